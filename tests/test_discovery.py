"""How plugins are found (DESIGN §2, §9; docs/plugins.md): each route loads a real plugin.

The routes: a ``--plugins-dir`` folder (CLI and ``Hive.open(plugins_dir=...)``),
``$HIVELITE_PLUGINS_DIR``, an entry point of the ``hivelite`` group (a
distribution's metadata on the path, and whatever is really installed), and
objects given to ``Hive.open(plugins=...)``. Then what start-up refuses, what
``hivelite plugins`` and ``$HIVELITE_TRACE_PLUGINS`` show, and that a failing
plugin leaves the store as it was when driven through the real CLI.

Stores are made in-process (fast); only the command under test runs as a
subprocess of the real ``hivelite`` script.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import hivelite
from hivelite import Hive, PluginError, State
from hivelite.verbs import installed
from hivelite.verbs.plugins import call_each, get_plugin_manager

from . import rawsql
from .conftest import OWNER, OpenHive

TIMEOUT = 30
GATE = "hivelite_permission_gate"
LISTED = {"loaded": True, "required": False, "detail": None}
"""What ``hivelite plugins`` says of every plugin loaded here when no store requires any."""
BUILT_INS = [
    {"name": "hivelite.default_gate", "source": "built-in", "essential": True,
     "hooks": ["hivelite_permission_gate"], "policy": False, "status": "built_in", **LISTED},
    {"name": "hivelite.default_threshold", "source": "built-in", "essential": True,
     "hooks": ["hivelite_merge_threshold"], "policy": False, "status": "built_in", **LISTED},
]

# -- plugin files ------------------------------------------------------------------------

NO_SECRETS = '''
"""Deny any project named secret-*."""
import hivelite


@hivelite.hookimpl
def hivelite_permission_gate(task, hive):
    if task.project.startswith("secret-"):
        return hivelite.GateDecision(action="deny", reason="secret projects stay with ana")
    return None
'''

HOLD_ALL = '''
import hivelite


@hivelite.hookimpl
def hivelite_permission_gate(task):
    return "hold"
'''

TYPO = '''
import hivelite


@hivelite.hookimpl
def hivelite_permision_gate(task, hive):
    return "deny"
'''

SYNTAX_ERROR = '''
import hivelite

def hivelite_permission_gate(task, hive:
    return "deny"
'''

WRAPPERS = {
    "new-style": '''
import hivelite


@hivelite.hookimpl(wrapper=True)
def hivelite_permission_gate(task, hive):
    return (yield)
''',
    "old-style": '''
import hivelite


@hivelite.hookimpl(hookwrapper=True)
def hivelite_permission_gate(task, hive):
    yield
''',
}

FLAKY = '''
import hivelite


@hivelite.hookimpl
def hivelite_permission_gate(task, hive):
    raise RuntimeError("the policy server is down")
'''

SLOPPY = '''
import hivelite


@hivelite.hookimpl
def hivelite_permission_gate(task, hive):
    return 42
'''

REFUSER = '''
import hivelite


@hivelite.hookimpl
def hivelite_startup(hive):
    raise RuntimeError("[refuser] needs a token in hivelite.toml")
'''

LOUD = '''
import hivelite


@hivelite.hookimpl
def hivelite_on_transition(task, move, actor):
    raise RuntimeError("the mail server is down")
'''

# An installed plugin's module: a gate and a threshold (used to show who is asked first).
DIST_NAME = "hl-discovery-gate"
DIST_MODULE = "hl_discovery_gate"
DIST_ENTRY_POINT = "discovery-gate"
DIST_SOURCE = '''
import hivelite


@hivelite.hookimpl
def hivelite_permission_gate(task, hive):
    if task.project.startswith("secret-"):
        return hivelite.GateDecision(action="deny", reason="the installed plugin says no")
    return None


@hivelite.hookimpl
def hivelite_merge_threshold(task, hive):
    return 2
'''


# -- helpers -----------------------------------------------------------------------------


def hivelite_script() -> Path:
    """The console script installed next to this interpreter."""
    script = Path(sys.executable).parent / "hivelite"
    if not script.is_file():
        pytest.skip(f"no hivelite script next to {sys.executable}")
    return script


def clean_env(**extra: str | None) -> dict[str, str]:
    """This environment without any HIVELITE_* setting, installed plugins off, then ``extra``
    (a None value leaves that variable unset)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env["HIVELITE_LOAD_PLUGINS"] = ""
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run(args: list[str], cwd: Path, **env: str | None) -> Ran:
    proc = subprocess.run([str(hivelite_script()), *args], cwd=cwd, env=clean_env(**env),
                          capture_output=True, text=True, timeout=TIMEOUT)
    return Ran(proc.returncode, proc.stdout, proc.stderr)


def plugin_folder(parent: Path, name: str, source: str) -> Path:
    """A fresh folder holding one plugin file ``name.py``."""
    folder = parent / f"plugins-{name}"
    folder.mkdir()
    (folder / f"{name}.py").write_text(textwrap.dedent(source))
    return folder


def write_distribution(site: Path, dist: str, module: str, entry_points: dict[str, str],
                       source: str) -> None:
    """What ``pip install`` leaves in site-packages: the module and its ``.dist-info``."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[hivelite]\n" + "".join(f"{name} = {value}\n" for name, value in entry_points.items()))


def handoff_args(project: str = "demo") -> list[str]:
    return ["handoff", "--requester", "ana/planner", "--assignee", "ana/coder",
            "--project", project, "--task", "Write the parser", "--type", "code",
            "--accept", "tests pass"]


snapshot = rawsql.snapshot_file


def gate_decider(db: Path, number: int) -> str:
    """The plugin the journal names as having decided task ``number``'s handoff."""
    with Hive.open(db, owner="ana") as hive:
        rows = [r for r in hive.history(number) if r.actor == "gate"]
    assert len(rows) == 1, rows
    assert rows[0].detail is not None
    return str(rows[0].detail["decided_by"])


def names(pm: Any) -> list[str]:
    return [row["name"] for row in pm.describe()]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store owned by ana with one routed task already in it (made in-process)."""
    db = tmp_path / "store.db"
    with Hive.open(db, owner="ana") as hive:
        hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
                     packet={"task": "Write the parser", "deliverable_type": "code",
                             "acceptance_criteria": ["tests pass"]})
    return db


@pytest.fixture
def dist_site(tmp_path: Path) -> Iterator[Path]:
    """A folder holding an 'installed' distribution with a ``hivelite`` entry point."""
    site = tmp_path / "site"
    write_distribution(site, DIST_NAME, DIST_MODULE, {DIST_ENTRY_POINT: DIST_MODULE},
                       DIST_SOURCE)
    yield site
    sys.modules.pop(DIST_MODULE, None)


# -- a plugins folder --------------------------------------------------------------------


def test_plugins_dir_on_the_cli_is_listed_and_decides(tmp_path: Path, store: Path) -> None:
    folder = plugin_folder(tmp_path, "no_secrets", NO_SECRETS)
    listed = run(["--plugins-dir", str(folder), "--json", "plugins"], cwd=tmp_path)
    assert listed.code == 0, listed.err
    assert listed.json() == [*BUILT_INS, {
        "name": "no_secrets", "source": f"file {folder / 'no_secrets.py'}",
        "essential": False, "hooks": [GATE], "policy": True, "status": "ok", **LISTED}]

    done = run(["--db", str(store), "--plugins-dir", str(folder), "--json",
                *handoff_args("secret-plans")], cwd=tmp_path)
    assert done.code == 0, done.err
    assert done.err == ""  # no trace unless asked for
    view = done.json()
    assert view["task"]["state"] == "rejected"
    assert view["last_reason"] == "secret projects stay with ana"
    assert gate_decider(store, view["number"]) == "no_secrets"


def test_plugins_dir_in_python(tmp_path: Path, open_hive: OpenHive) -> None:
    folder = plugin_folder(tmp_path, "no_secrets", NO_SECRETS)
    (folder / "notes.txt").write_text("only .py files are plugins")
    hive = open_hive(plugins_dir=folder)
    assert names(hive.plugins)[2:] == ["no_secrets"]
    assert hive.plugins.sources["no_secrets"] == f"file {folder / 'no_secrets.py'}"
    receipt = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                           project="secret-plans",
                           packet={"task": "Write the parser", "deliverable_type": "code",
                                   "acceptance_criteria": ["tests pass"]})
    assert receipt.state is State.rejected
    assert hive.get(receipt.number).task.state is State.rejected


def test_plugins_dir_from_the_environment_on_the_cli(tmp_path: Path, store: Path) -> None:
    folder = plugin_folder(tmp_path, "no_secrets", NO_SECRETS)
    done = run(["--db", str(store), "--json", *handoff_args("secret-plans")], cwd=tmp_path,
               HIVELITE_PLUGINS_DIR=str(folder))
    assert done.code == 0, done.err
    assert done.json()["task"]["state"] == "rejected"
    assert gate_decider(store, done.json()["number"]) == "no_secrets"


def test_plugins_dir_from_the_environment_in_python(tmp_path: Path, open_hive: OpenHive,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from_env = plugin_folder(tmp_path, "no_secrets", NO_SECRETS)
    given = plugin_folder(tmp_path, "hold_all", HOLD_ALL)
    monkeypatch.setenv("HIVELITE_PLUGINS_DIR", str(from_env))
    assert "no_secrets" in names(open_hive().plugins)
    # A folder given explicitly replaces the environment's.
    assert names(get_plugin_manager(given))[2:] == ["hold_all"]


def test_a_missing_plugins_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PluginError) as err:
        get_plugin_manager(tmp_path / "nowhere")
    assert err.value.hook == "load"
    assert "does not exist" in str(err.value)


# -- entry points --------------------------------------------------------------------------


def test_entry_point_of_a_distribution_on_the_path(tmp_path: Path, store: Path,
                                                   dist_site: Path) -> None:
    path = os.pathsep.join([str(dist_site), *filter(None, [os.environ.get("PYTHONPATH")])])

    listed = run(["--json", "plugins"], cwd=tmp_path, PYTHONPATH=path,
                 HIVELITE_LOAD_PLUGINS=DIST_ENTRY_POINT)
    assert listed.code == 0, listed.err
    assert listed.json() == [*BUILT_INS, {
        "name": DIST_ENTRY_POINT, "source": f"entry point ({DIST_NAME})", "essential": False,
        "hooks": ["hivelite_merge_threshold", GATE], "policy": True, "status": "ok",
        **LISTED}]

    shown = run(["--json", "plugins"], cwd=tmp_path, PYTHONPATH=path,
                HIVELITE_LOAD_PLUGINS="")  # empty: none
    assert shown.code == 0, shown.err
    assert shown.json() == BUILT_INS

    # a name no installed plugin has is a typo: refused, never a silently missing policy
    typo = run(["--json", "plugins"], cwd=tmp_path, PYTHONPATH=path,
               HIVELITE_LOAD_PLUGINS=f"{DIST_ENTRY_POINT},some-other-plugin")
    assert typo.code == 1
    assert "some-other-plugin" in typo.err and "not installed" in typo.err

    done = run(["--db", str(store), "--json", *handoff_args("secret-plans")], cwd=tmp_path,
               PYTHONPATH=path, HIVELITE_LOAD_PLUGINS=DIST_ENTRY_POINT)
    assert done.code == 0, done.err
    assert done.json()["task"]["state"] == "rejected"
    assert gate_decider(store, done.json()["number"]) == DIST_ENTRY_POINT


def test_installed_entry_point(tmp_path: Path) -> None:
    """A real installed distribution (the first-party plugins, once installed)."""
    installed = sorted(importlib.metadata.entry_points(group="hivelite"), key=lambda e: e.name)
    if not installed:
        pytest.skip("no distribution with a `hivelite` entry point is installed "
                    "(pip install -e plugins/hivelite-NAME installs one)")
    first = installed[0]
    cwd = tmp_path

    listed = run(["--json", "plugins"], cwd=cwd, HIVELITE_LOAD_PLUGINS=first.name)
    assert listed.code == 0, listed.err
    rows = {row["name"]: row for row in listed.json()}
    assert first.name in rows
    assert rows[first.name]["source"].startswith("entry point (")
    assert rows[first.name]["essential"] is False
    assert rows[first.name]["hooks"], "an installed plugin with no hooks"

    none = run(["--json", "plugins"], cwd=cwd, HIVELITE_LOAD_PLUGINS="")
    assert none.code == 0, none.err
    assert [r for r in none.json() if r["source"].startswith("entry point")] == []

    other = installed[1].name if len(installed) > 1 else f"not-{first.name}"
    limited = run(["--json", "plugins"], cwd=cwd, HIVELITE_LOAD_PLUGINS=other)
    assert limited.code == 0, limited.err
    assert first.name not in {r["name"] for r in limited.json()}


def test_entry_points_are_skipped_under_the_test_suite(dist_site: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    assert getattr(sys, "_hivelite_under_test", False) is True  # set by tests/conftest.py
    monkeypatch.syspath_prepend(str(dist_site))
    monkeypatch.setenv("HIVELITE_LOAD_PLUGINS", DIST_ENTRY_POINT)
    assert DIST_ENTRY_POINT not in names(get_plugin_manager())
    opted_in = get_plugin_manager(entry_points=True)
    assert DIST_ENTRY_POINT in names(opted_in)
    assert opted_in.sources[DIST_ENTRY_POINT] == f"entry point ({DIST_NAME})"


def test_load_order_and_who_is_asked_first(tmp_path: Path, dist_site: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Built-ins, entry points, the folder, given objects; the last registered is asked
    first and the built-ins last."""
    monkeypatch.syspath_prepend(str(dist_site))
    monkeypatch.setenv("HIVELITE_LOAD_PLUGINS", DIST_ENTRY_POINT)
    folder = plugin_folder(tmp_path, "three", '''
        import hivelite

        @hivelite.hookimpl
        def hivelite_merge_threshold(task, hive):
            return 3
    ''')

    class Four:
        @hivelite.hookimpl
        def hivelite_merge_threshold(self, task: Any, hive: Any) -> int:
            return 4

    pm = get_plugin_manager(folder, extra=[Four()], entry_points=True)
    assert names(pm) == ["hivelite.default_gate", "hivelite.default_threshold",
                         DIST_ENTRY_POINT, "three", "Four"]
    assert [pm.sources[n] for n in names(pm)][2:] == [
        f"entry point ({DIST_NAME})", f"file {folder / 'three.py'}", "given"]
    answers = call_each(pm, "hivelite_merge_threshold", task=None, hive=None)
    assert answers == [("Four", 4), ("three", 3), (DIST_ENTRY_POINT, 2),
                       ("hivelite.default_threshold", 1)]


# -- what start-up refuses -------------------------------------------------------------------


def test_unknown_hook_fails_at_start_up_on_the_cli(tmp_path: Path) -> None:
    folder = plugin_folder(tmp_path, "typo_gate", TYPO)
    db = tmp_path / "new.db"
    done = run(["--db", str(db), "--plugins-dir", str(folder), "init", "--owner", "ana"],
               cwd=tmp_path)
    assert done.code == 1
    assert done.err.startswith("error: plugin_error/plugin_failed: plugin 'typo_gate', hook ")
    assert "hivelite_permision_gate" in done.err
    assert "Traceback" not in done.err
    assert not db.exists()  # refused before the store was touched


def test_syntax_error_names_the_file(tmp_path: Path) -> None:
    folder = plugin_folder(tmp_path, "broken", SYNTAX_ERROR)
    with pytest.raises(PluginError) as err:
        get_plugin_manager(folder)
    assert err.value.plugin == "broken"
    assert err.value.hook == "load"
    assert "SyntaxError" in err.value.message

    done = run(["--plugins-dir", str(folder), "plugins"], cwd=tmp_path)
    assert done.code == 1
    assert done.err.startswith("error: plugin_error/plugin_failed: plugin 'broken', hook load:")
    assert "Traceback" not in done.err


@pytest.mark.parametrize("style", sorted(WRAPPERS))
def test_hook_wrappers_are_refused(tmp_path: Path, style: str) -> None:
    folder = plugin_folder(tmp_path, "wrap", WRAPPERS[style])
    with pytest.raises(PluginError) as err:
        get_plugin_manager(folder)
    assert err.value.plugin == "wrap"
    assert err.value.hook == GATE
    assert "wrappers are not supported" in err.value.message


BAD_IMPLS = {
    "argument not in the hookspec": '''
        import hivelite

        @hivelite.hookimpl
        def hivelite_permission_gate(task, hive, owner):
            return None
    ''',
    "wrapper that is not a generator": '''
        import hivelite

        @hivelite.hookimpl(wrapper=True)
        def hivelite_permission_gate(task, hive):
            return None
    ''',
}


@pytest.mark.parametrize("case", sorted(BAD_IMPLS))
def test_invalid_hook_implementation_is_a_plugin_error(tmp_path: Path, case: str) -> None:
    folder = plugin_folder(tmp_path, "bad", BAD_IMPLS[case])
    with pytest.raises(PluginError) as err:
        get_plugin_manager(folder)
    assert err.value.plugin == "bad"


# -- what hivelite shows about its plugins ---------------------------------------------------


def test_trace_prints_each_gate_call_and_answer(tmp_path: Path, store: Path) -> None:
    folder = plugin_folder(tmp_path, "hold_all", HOLD_ALL)
    done = run(["--db", str(store), "--plugins-dir", str(folder), "--json", *handoff_args()],
               cwd=tmp_path, HIVELITE_TRACE_PLUGINS="1")
    assert done.code == 0, done.err
    assert done.json()["task"]["state"] == "waiting"
    lines = done.err.splitlines()
    assert lines[0] == f"hivelite: {GATE} [hold_all] -> 'hold'"
    assert lines[1].startswith(f"hivelite: {GATE} [hivelite.default_gate] -> "
                               "GateDecision(action='allow', ")
    assert len(lines) == 2, lines


# -- a failing plugin through the CLI: exit 1, the store unchanged -----------------------------


def test_raising_gate_exits_1_and_changes_nothing(tmp_path: Path, store: Path) -> None:
    folder = plugin_folder(tmp_path, "flaky", FLAKY)
    before = snapshot(store)
    done = run(["--db", str(store), "--plugins-dir", str(folder), *handoff_args()],
               cwd=tmp_path)
    assert done.code == 1
    assert done.out == ""
    assert done.err == ("error: plugin_error/plugin_failed: plugin 'flaky', hook "
                        f"{GATE}: raised RuntimeError: the policy server is down\n")
    assert snapshot(store) == before


def test_wrong_type_answer_exits_1_and_changes_nothing(tmp_path: Path, store: Path) -> None:
    folder = plugin_folder(tmp_path, "sloppy", SLOPPY)
    before = snapshot(store)
    done = run(["--db", str(store), "--plugins-dir", str(folder), "--json", *handoff_args()],
               cwd=tmp_path)
    assert done.code == 1
    message = (f"plugin 'sloppy', hook {GATE}: returned 42; expected a GateDecision, "
               "'allow', 'hold', 'deny' or None")
    assert done.json() == {"error": {"status": 500, "code": "plugin_error",
                                     "reason": "plugin_failed", "message": message,
                                     "plugin": "sloppy", "hook": GATE}}
    assert done.err == f"error: plugin_error/plugin_failed: {message}\n"
    assert snapshot(store) == before


def test_raising_startup_exits_1_and_writes_no_task(tmp_path: Path, store: Path) -> None:
    folder = plugin_folder(tmp_path, "refuser", REFUSER)
    before = snapshot(store)
    done = run(["--db", str(store), "--plugins-dir", str(folder), *handoff_args()],
               cwd=tmp_path)
    assert done.code == 1
    assert done.err == ("error: plugin_error/plugin_failed: plugin 'refuser', hook "
                        "hivelite_startup: raised RuntimeError: [refuser] needs a token in"
                        " hivelite.toml\n")
    assert snapshot(store) == before
    assert len(before["tasks"]) == 1


def test_startup_refusal_leaves_no_new_store_behind(tmp_path: Path) -> None:
    folder = plugin_folder(tmp_path, "refuser", REFUSER)
    db = tmp_path / "new.db"
    with pytest.raises(PluginError) as err:
        Hive.open(db, owner="ana", plugins_dir=folder)
    assert (err.value.plugin, err.value.hook) == ("refuser", "hivelite_startup")
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name]


def test_failing_notifier_only_warns(tmp_path: Path, store: Path) -> None:
    folder = plugin_folder(tmp_path, "loud", LOUD)
    done = run(["--db", str(store), "--plugins-dir", str(folder), "--json", *handoff_args()],
               cwd=tmp_path)
    assert done.code == 0, done.err
    view = done.json()
    assert view["task"]["state"] == "routed"  # committed before the notifier ran
    assert done.err == ("warning: plugin 'loud', hook hivelite_on_transition: raised "
                        f"RuntimeError: the mail server is down (task {view['number']}, move 1)\n")


def test_a_failing_notifier_does_not_silence_the_others(open_hive: OpenHive) -> None:
    heard: list[int] = []

    class Quiet:
        @hivelite.hookimpl
        def hivelite_on_transition(self, move: Any) -> None:
            heard.append(move.number)

    class Noisy:  # registered later, so asked first
        @hivelite.hookimpl
        def hivelite_on_transition(self, move: Any) -> None:
            raise RuntimeError("the mail server is down")

    hive = open_hive(plugins=[Quiet(), Noisy()])
    hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
                 packet={"task": "Write the parser", "deliverable_type": "code",
                         "acceptance_criteria": ["tests pass"]})
    failures = list(hive.notify_failures)
    assert len(failures) == 1
    assert (failures[0].plugin, failures[0].hook) == ("Noisy", "hivelite_on_transition")
    assert heard == [1]


# -- the installed entry points, cached between calls (hivelite/verbs/installed.py) -------------


@pytest.fixture
def cached(tmp_path: Path, dist_site: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of this test's own, and the 'installed' distribution on the path."""
    monkeypatch.syspath_prepend(str(dist_site))
    folder = tmp_path / "cache"
    monkeypatch.setenv("HIVELITE_CACHE_DIR", str(folder))
    return folder


def metadata_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(**kwargs: Any) -> Any:
        raise AssertionError("the distributions' metadata was read again")

    monkeypatch.setattr(importlib.metadata, "entry_points", refuse)


def test_the_entry_points_found_are_kept_for_the_next_call(
        cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = installed.entry_points()
    assert DIST_ENTRY_POINT in {e.name for e in first}
    assert (cached / installed.CACHE_NAME).stat().st_mode & 0o777 == 0o600
    metadata_unread(monkeypatch)
    assert installed.entry_points() == first
    mine = next(e for e in first if e.name == DIST_ENTRY_POINT)
    assert (mine.dist, mine.version) == (DIST_NAME, "0.1.0")
    assert getattr(mine.load(), "__name__", None) == DIST_MODULE


def test_installing_or_removing_a_distribution_reads_them_again(
        cached: Path, dist_site: Path) -> None:
    """What pip changes when it installs anything changes the key: a policy plugin
    installed after the cache was written is never missed."""
    installed.entry_points()
    write_distribution(dist_site, "hivelite-second", "hivelite_second_plugin",
                       {"second": "hivelite_second_plugin"}, DIST_SOURCE)
    assert "second" in {e.name for e in installed.entry_points()}
    shutil.rmtree(dist_site / "hivelite_second-0.1.0.dist-info")
    assert "second" not in {e.name for e in installed.entry_points()}


def test_an_entry_point_changed_in_place_is_read_again(cached: Path, dist_site: Path) -> None:
    installed.entry_points()
    points = dist_site / f"{DIST_NAME.replace('-', '_')}-0.1.0.dist-info" / "entry_points.txt"
    points.write_text(points.read_text() + "renamed = " + DIST_MODULE + "\n")
    os.utime(points, ns=(1, 1))  # whatever the clock's resolution, its time changed
    assert "renamed" in {e.name for e in installed.entry_points()}


@pytest.mark.parametrize("damage", ["not json", "others may write", "another shape"])
def test_a_cache_that_cannot_be_trusted_is_read_around(
        cached: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    first = installed.entry_points()
    cache = cached / installed.CACHE_NAME
    if damage == "not json":
        cache.write_text("{")
    elif damage == "others may write":
        os.chmod(cache, 0o622)
    else:
        cache.write_text(json.dumps({"key": installed.path_key(), "entry_points": [1]}))
    assert installed.entry_points() == first
    if damage == "others may write":  # its list was read again, not taken
        data = json.loads(cache.read_text())
        data["entry_points"] = []
        cache.write_text(json.dumps(data))
        os.chmod(cache, 0o622)
        assert installed.entry_points() == first


def test_an_unwritable_cache_folder_is_no_error(cached: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("HIVELITE_CACHE_DIR", str(blocker / "cache"))
    assert DIST_ENTRY_POINT in {e.name for e in installed.entry_points()}


def test_the_cli_finds_an_entry_point_through_the_cache(tmp_path: Path, store: Path,
                                                        dist_site: Path) -> None:
    """Two real calls: the first writes the cache, the second reads it, and both load the
    distribution's plugin."""
    path = os.pathsep.join([str(dist_site), *filter(None, [os.environ.get("PYTHONPATH")])])
    cache = tmp_path / "cli-cache"
    for _ in range(2):
        listed = run(["--json", "plugins"], cwd=tmp_path, PYTHONPATH=path,
                     HIVELITE_LOAD_PLUGINS=DIST_ENTRY_POINT, HIVELITE_CACHE_DIR=str(cache))
        assert listed.code == 0, listed.err
        assert DIST_ENTRY_POINT in {row["name"] for row in listed.json()}
    assert DIST_ENTRY_POINT in (cache / installed.CACHE_NAME).read_text()
