"""A fast CLI (issue 18): ``hivelite --version``, ``--help`` and the verbs that need no
store import neither pydantic nor SQLite nor the library's models; ``import hivelite``
imports nothing until a name is used. The reads (issue 32: ``list``, ``show``,
``history``, ``show --lease``) import the store and the renderer, and neither pydantic,
pluggy, the models, the write path nor any plugin (issue 46). What is checked is which
modules a real process loaded, not how long it took (bench/startup.py prints the times)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hivelite

from .conftest import HANG_S
from .test_discovery import write_distribution

HEAVY = ("pydantic", "apsw", "jsonschema", "pluggy", "hivelite.core.models", "hivelite.hive",
         "hivelite.store", "hivelite.core.caller", "importlib.metadata")


def loaded(code: str, env: dict[str, str] | None = None) -> list[str]:
    """The modules a fresh interpreter has after running ``code``."""
    return ran_with_modules(code, env)[1]


def ran_with_modules(code: str, env: dict[str, str] | None = None
                     ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """A fresh interpreter that ran ``code``, and the modules it had then."""
    ran = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json\n"
         "print(json.dumps(sorted(sys.modules)), file=sys.__stderr__)"],
        capture_output=True, text=True, timeout=HANG_S, check=True, env=env)
    found: list[str] = json.loads(ran.stderr.strip().splitlines()[-1])
    return ran, found


def heavy_in(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["states"], ["completion", "bash"],
                                  ["list", "--help"], ["serve", "--help"],
                                  ["policy", "--help"]], ids=" ".join)
def test_the_cli_s_light_calls_load_nothing_heavy(args: list[str]) -> None:
    code = ("from hivelite.faces.cli.main import main\n"
            f"try:\n    main({args!r})\nexcept SystemExit:\n    pass")
    assert heavy_in(loaded(code)) == []


def test_a_verb_on_a_store_loads_what_it_needs(tmp_path: object) -> None:
    """The check above can fail: a verb that opens a store does load the models."""
    code = ("from hivelite.faces.cli.main import main\n"
            f"try:\n    main(['--db', {str(tmp_path) + '/s.db'!r}, 'init', '--owner', 'ana'])\n"
            "except SystemExit:\n    pass")
    assert "hivelite.core.models" in heavy_in(loaded(code))


def test_importing_hivelite_loads_no_name_until_it_is_used() -> None:
    assert heavy_in(loaded("import hivelite")) == []
    assert "hivelite.hive" in loaded("from hivelite import Hive")


def test_every_public_name_resolves_from_where_it_is_said_to_live() -> None:
    exports = hivelite._EXPORTS
    assert sorted(exports) == sorted(hivelite.__all__)
    for name, module in exports.items():
        assert getattr(hivelite, name) is getattr(sys.modules[module], name), name
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        hivelite.Nothing  # noqa: B018
    assert {"Hive", "Caller", "__version__"} <= set(dir(hivelite))


WRITERS = ("pydantic", "pydantic_core", "pluggy", "jsonschema", "importlib.metadata",
           "hivelite.core.models", "hivelite.core.caller", "hivelite.core.wording",
           "hivelite.hive", "hivelite.faces.client", "hivelite.faces.cli.commands",
           "hivelite.faces.cli.verbs")
"""What a read must not import: the models and their library, the plugins, the library
and its write path (``hivelite.verbs`` but its settings file), the other commands."""
READER = ("click", "apsw", "hivelite.store.sqlite", "hivelite.faces.reading",
          "hivelite.faces.render", "hivelite.faces.cli.reads")


def writers_in(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == w or m.startswith(w + ".") for w in WRITERS)
            or (m.startswith("hivelite.verbs.")
                and m not in ("hivelite.verbs.settings", "hivelite.verbs.installed"))]


@pytest.fixture(scope="module")
def read_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A store file with a live claim (task 1), and the environment a call reads it in
    (the $HIVELITE_ variables cleared)."""
    from hivelite import Caller, Hive, ManualClock

    db = tmp_path_factory.mktemp("reads") / "store.db"
    with Hive.open(db, owner="ana", clock=ManualClock("2026-12-02T09:00:00Z")) as hive:
        for n in range(3):
            hive.handoff(hive.as_owner(), requester="ana/planner", assignee="ana/coder",
                         project="demo", packet={"task": f"Task number {n}",
                                                 "deliverable_type": "code",
                                                 "acceptance_criteria": ["done"]})
        hive.claim(Caller.agent("ana/coder", "laptop"), 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    return {**env, "HIVELITE_DB": str(db), "HIVELITE_NOW": "2026-12-02T09:01:00Z"}


@pytest.mark.parametrize(("args", "says"), [pytest.param(a, s, id=" ".join(a)) for a, s in [
    (["list"], "Task number 2"), (["--json", "list"], '"next_cursor": null'),
    (["show", "1"], "claim      ana/coder on laptop"),
    (["--json", "show", "1"], '"lifecycle": "claimed"'),
    (["history", "1"], "routed -> accepted"), (["--json", "history", "2"], '"move": 1'),
    (["show", "1", "--lease", "--agent", "ana/coder", "--instance", "laptop"], "lease_id"),
    (["--json", "show", "1", "--lease"], '"fencing_token": 1'),
]])
def test_a_read_loads_neither_the_models_nor_the_plugins_nor_the_write_path(
        read_store: dict[str, str], args: list[str], says: str) -> None:
    """The real command on a real store file, in a fresh interpreter: it answers, having
    loaded the store and the renderer, and nothing of the library's models, plugins or
    writes."""
    env = dict(read_store)
    if "--lease" in args and "--agent" not in args:
        env.update(HIVELITE_AGENT="ana/coder", HIVELITE_INSTANCE="laptop")
    code = ("import sys\nfrom hivelite.faces.cli.main import main\n"
            f"try:\n    main({args!r})\nexcept SystemExit as e:\n    sys.exit(e.code)")
    ran, modules = ran_with_modules(code, env)
    assert says in ran.stdout
    assert writers_in(modules) == []
    assert set(READER) <= set(modules)


def test_the_read_check_can_fail(read_store: dict[str, str]) -> None:
    """A read the rows cannot answer (task 9 is not there: the library says so) loads the
    library, and the check above sees it."""
    code = ("from hivelite.faces.cli.main import main\n"
            "try:\n    main(['show', '9'])\nexcept SystemExit:\n    pass")
    assert {"pydantic", "hivelite.hive", "pluggy"} <= set(writers_in(loaded(code, read_store)))


STARTER = """
import os

import hivelite

open(os.environ["PLUGIN_MARK"], "a").write("imported\\n")


@hivelite.hookimpl
def hivelite_startup(hive):
    open(os.environ["PLUGIN_MARK"], "a").write("started\\n")
"""


def test_a_read_starts_no_plugin(tmp_path: Path) -> None:
    """A read loads no plugin (issue 46: plugins decide writes, never what a read shows):
    not the installed one the store enabled, not the plugins folder's. Neither is imported
    nor started, and the read still loads nothing of the library; a write starts both."""
    site = tmp_path / "site"
    write_distribution(site, "hl-startup-plugin", "hl_startup_plugin",
                       {"startup-plugin": "hl_startup_plugin"}, STARTER)
    folder = tmp_path / "plugins"
    folder.mkdir(mode=0o700)
    (folder / "folder_plugin.py").write_text(STARTER)
    mark = tmp_path / "mark"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env.update(PLUGIN_MARK=str(mark), PYTHONPATH=os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
    code = ("from hivelite import Hive\n"
            f"with Hive.open({str(tmp_path / 's.db')!r}, owner='ana') as hive:\n"
            "    policy = hive.enable_plugin(hive.as_owner(), 'startup-plugin')\n"
            "assert policy.enabled_plugins == ['startup-plugin'], policy\n")
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=HANG_S)
    assert mark.read_text().splitlines() == ["imported", "started"]  # there, at once
    mark.unlink()
    env.update(HIVELITE_DB=str(tmp_path / "s.db"), HIVELITE_PLUGINS_DIR=str(folder))
    for args in (["list"], ["--json", "list"]):
        code = ("from hivelite.faces.cli.main import main\n"
                f"try:\n    main({args!r})\nexcept SystemExit as e:\n    assert not e.code\n")
        assert writers_in(loaded(code, env)) == []
    assert not mark.exists(), mark.read_text()
    code = ("from hivelite.faces.cli.main import main\n"
            "try:\n    main(['handoff', '--requester', 'ana/planner', '--assignee',"
            " 'ana/coder', '--project', 'demo', '--task', 'Write the parser', '--type',"
            " 'code', '--accept', 'tests pass'])\nexcept SystemExit as e:\n"
            "    assert not e.code\n")
    assert {"hivelite.hive", "pluggy"} <= set(writers_in(loaded(code, env)))
    assert sorted(mark.read_text().splitlines()) == ["imported"] * 2 + ["started"] * 2


def test_the_console_script_is_the_one_tested() -> None:
    """The module the checks above load is the console script's entry point."""
    text = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    assert 'hivelite = "hivelite.faces.cli.main:main"' in text
