"""How plugins are found (DESIGN §2, §9; docs/plugins.md): each route loads a real plugin.

The routes: a ``--plugins-dir`` folder (CLI and ``Hive.open(plugins_dir=...)``),
``$HIVELITE_PLUGINS_DIR``, objects given to ``Hive.open(plugins=...)``, and an entry
point of the ``hivelite`` group (a distribution's metadata on the path, and whatever is
really installed), which acts on a store only once its owner enabled it there
(``hivelite policy enable NAME``: installing is not enabling, issue 46). Then what
start-up refuses, what ``hivelite plugins`` and ``$HIVELITE_TRACE_PLUGINS`` show, and that
a failing plugin leaves the store as it was when driven through the real CLI.

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
from hivelite import (
    Caller,
    ForbiddenRight,
    Hive,
    InvalidInput,
    NotFound,
    PluginError,
    State,
)
from hivelite.store.doctor import diagnose_file
from hivelite.verbs import installed
from hivelite.verbs.plugins import call_each, get_plugin_manager, load_installed

from . import rawsql
from .conftest import HANG_S, OWNER, OpenHive

GATE = "hivelite_permission_gate"
LISTED = {"loaded": True, "required": False, "enabled": False, "detail": None}
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
    """This environment without any HIVELITE_* setting, then ``extra`` (a None value leaves
    that variable unset). The plugins installed here act on no store a test made unless
    the test enables them there: installing is not enabling."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
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
                          capture_output=True, text=True, timeout=HANG_S)
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


def installed_here() -> dict[str, str]:
    """The plugins installed in this Python (entry point name: distribution), which
    ``hivelite plugins`` lists besides those a test puts on the path."""
    return {e.name: e.dist.name if e.dist else "?"
            for e in importlib.metadata.entry_points(group=installed.GROUP)}


def idle(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The installed plugins a listing shows as not loaded, by name, with their hint
    checked and taken out: each names its distribution and how to enable it, and is
    neither loaded, enabled nor required."""
    out = {}
    for row in rows:
        if row["loaded"]:
            continue
        row = dict(row)
        detail = row.pop("detail")
        if row["status"] == "not_enabled":
            assert f"hivelite policy enable {row['name']}" in detail, detail
        out[row["name"]] = row
    return out


def not_enabled(name: str, dist: str) -> dict[str, Any]:
    """How ``hivelite --json plugins`` shows an installed plugin that does not act (its
    ``detail`` aside: :func:`idle`)."""
    return {"name": name, "source": f"entry point ({dist})", "hooks": [], "policy": False,
            "essential": False, "loaded": False, "required": False, "enabled": False,
            "status": "not_enabled"}


def status_of(hive: Hive, name: str) -> tuple[bool, bool, str]:
    """(loaded, enabled, status) of one plugin as ``plugin_status`` says."""
    [row] = [r for r in hive.plugin_status() if r.name == name]
    return row.loaded, row.enabled, row.status


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
    rows = listed.json()
    assert [r for r in rows if r["loaded"]] == [*BUILT_INS, {
        "name": "no_secrets", "source": f"file {folder / 'no_secrets.py'}",
        "essential": False, "hooks": [GATE], "policy": True, "status": "ok", **LISTED}]
    # the plugins installed here are listed too, and (no store: none enabled) do not load
    assert idle(rows) == {name: not_enabled(name, dist)
                          for name, dist in installed_here().items()}

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


def on_path(site: Path) -> str:
    """$PYTHONPATH with ``site`` first: what installing it would put on the path."""
    return os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])


def test_entry_point_of_a_distribution_on_the_path(tmp_path: Path, store: Path,
                                                   dist_site: Path) -> None:
    """Installed, the plugin is listed but acts nowhere, whatever $HIVELITE_LOAD_PLUGINS
    names; once the store's owner enables it, every process that opens the store (and has
    it installed) loads it, and $HIVELITE_LOAD_PLUGINS only limits which of those load."""
    path = on_path(dist_site)
    for limit in (None, DIST_ENTRY_POINT):  # naming it in the variable loads nothing
        listed = run(["--json", "plugins"], cwd=tmp_path, PYTHONPATH=path,
                     HIVELITE_LOAD_PLUGINS=limit)
        assert listed.code == 0, listed.err
        assert [r for r in listed.json() if r["loaded"]] == BUILT_INS
        assert idle(listed.json())[DIST_ENTRY_POINT] == not_enabled(DIST_ENTRY_POINT,
                                                                    DIST_NAME)
        done = run(["--db", str(store), "--json", *handoff_args("secret-plans")],
                   cwd=tmp_path, PYTHONPATH=path, HIVELITE_LOAD_PLUGINS=limit)
        assert done.code == 0, done.err
        assert done.json()["task"]["state"] == "routed"  # its gate was never asked
        assert gate_decider(store, done.json()["number"]) == "hivelite.default_gate"

    enabled = run(["--db", str(store), "--json", "policy", "enable", DIST_ENTRY_POINT],
                  cwd=tmp_path, PYTHONPATH=path)
    assert enabled.code == 0, enabled.err
    assert enabled.json()["enabled_plugins"] == [DIST_ENTRY_POINT]
    listed = run(["--db", str(store), "--json", "plugins"], cwd=tmp_path, PYTHONPATH=path)
    assert listed.code == 0, listed.err
    assert [r for r in listed.json() if r["name"] == DIST_ENTRY_POINT] == [{
        "name": DIST_ENTRY_POINT, "source": f"entry point ({DIST_NAME})", "essential": False,
        "hooks": ["hivelite_merge_threshold", GATE], "policy": True, "status": "ok",
        **LISTED, "enabled": True}]
    done = run(["--db", str(store), "--json", *handoff_args("secret-plans")], cwd=tmp_path,
               PYTHONPATH=path)
    assert done.code == 0, done.err
    assert done.json()["task"]["state"] == "rejected"
    assert gate_decider(store, done.json()["number"]) == DIST_ENTRY_POINT

    # $HIVELITE_LOAD_PLUGINS limits what the store enabled: empty leaves it out here
    left_out = run(["--db", str(store), "--json", *handoff_args("secret-plans")],
                   cwd=tmp_path, PYTHONPATH=path, HIVELITE_LOAD_PLUGINS="")
    assert left_out.code == 0, left_out.err
    assert left_out.json()["task"]["state"] == "routed"
    # a name no installed plugin has is a typo: refused, never a silently missing policy
    before = snapshot(store)
    typo = run(["--db", str(store), "--json", *handoff_args("secret-plans")], cwd=tmp_path,
               PYTHONPATH=path, HIVELITE_LOAD_PLUGINS=f"{DIST_ENTRY_POINT},some-other-plugin")
    assert typo.code == 1
    assert "some-other-plugin" in typo.err and "not installed" in typo.err
    assert snapshot(store) == before


def test_installed_entry_point(tmp_path: Path, store: Path) -> None:
    """A real installed distribution (the first-party plugins, once installed): listed
    everywhere, loaded only on a store that enables it."""
    found = sorted(importlib.metadata.entry_points(group="hivelite"), key=lambda e: e.name)
    if not found:
        pytest.skip("no distribution with a `hivelite` entry point is installed "
                    "(pip install -e plugins/hivelite-NAME installs one)")
    first = found[0]
    cwd = tmp_path
    db = ["--db", str(store)]

    for where in ([], db):  # no store, and a store that enables none
        listed = run([*where, "--json", "plugins"], cwd=cwd)
        assert listed.code == 0, listed.err
        assert [r["name"] for r in listed.json() if r["loaded"]] == [
            b["name"] for b in BUILT_INS]
        assert idle(listed.json()) == {name: not_enabled(name, dist)
                                       for name, dist in installed_here().items()}

    assert run([*db, "policy", "enable", first.name], cwd=cwd).code == 0
    listed = run([*db, "--json", "plugins"], cwd=cwd)
    assert listed.code == 0, listed.err
    rows = {row["name"]: row for row in listed.json()}
    assert rows[first.name]["source"].startswith("entry point (")
    assert (rows[first.name]["loaded"], rows[first.name]["enabled"]) == (True, True)
    assert rows[first.name]["essential"] is False
    assert rows[first.name]["hooks"], "an installed plugin with no hooks"
    assert all(not r["loaded"] for r in rows.values() if r["source"].startswith(
        "entry point") and r["name"] != first.name)  # the others are still not enabled

    none = run([*db, "--json", "plugins"], cwd=cwd, HIVELITE_LOAD_PLUGINS="")
    assert none.code == 0, none.err
    assert [r["name"] for r in none.json() if r["loaded"]] == [b["name"] for b in BUILT_INS]
    [left_out] = [r for r in none.json() if r["name"] == first.name]
    assert (left_out["enabled"], left_out["status"]) == (True, "ok")
    assert "HIVELITE_LOAD_PLUGINS" in left_out["detail"]

    other = found[1].name if len(found) > 1 else None
    if other is not None:  # another installed one, named but not enabled: neither loads
        limited = run([*db, "--json", "plugins"], cwd=cwd, HIVELITE_LOAD_PLUGINS=other)
        assert limited.code == 0, limited.err
        assert [r["name"] for r in limited.json() if r["loaded"]] == [
            b["name"] for b in BUILT_INS]

    assert run([*db, "policy", "disable", first.name], cwd=cwd).code == 0
    listed = run([*db, "--json", "plugins"], cwd=cwd)
    assert idle(listed.json())[first.name] == not_enabled(first.name, installed_here()[
        first.name])


def test_the_manager_loads_an_installed_plugin_only_when_named(
        dist_site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``get_plugin_manager`` loads no entry point by itself (what replaced the switch
    that skipped them under the test suite): only the names a store enabled or requires,
    handed to it (``installed_names``) or to ``load_installed``."""
    monkeypatch.syspath_prepend(str(dist_site))
    monkeypatch.setenv("HIVELITE_LOAD_PLUGINS", DIST_ENTRY_POINT)  # loads nothing by itself
    assert DIST_ENTRY_POINT not in names(get_plugin_manager())
    assert DIST_MODULE not in sys.modules  # not even imported
    named = get_plugin_manager(installed_names=[DIST_ENTRY_POINT])
    assert names(named)[2:] == [DIST_ENTRY_POINT]
    assert named.sources[DIST_ENTRY_POINT] == f"entry point ({DIST_NAME})"
    monkeypatch.delenv("HIVELITE_LOAD_PLUGINS")
    later = get_plugin_manager()
    assert load_installed(later, [DIST_ENTRY_POINT, "not-installed-here"]) == [
        "not-installed-here"]  # a store may name one this machine lacks
    assert names(later)[2:] == [DIST_ENTRY_POINT]

    monkeypatch.setenv("HIVELITE_LOAD_PLUGINS", "")  # limits the names to none
    assert names(get_plugin_manager(installed_names=[DIST_ENTRY_POINT]))[2:] == []
    monkeypatch.setenv("HIVELITE_LOAD_PLUGINS", "discovery-gaet")
    with pytest.raises(PluginError) as err:
        get_plugin_manager(installed_names=[DIST_ENTRY_POINT])
    assert "discovery-gaet" in err.value.message and "not installed" in err.value.message


def test_load_order_and_who_is_asked_first(tmp_path: Path, dist_site: Path, store: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Built-ins, the folder, given objects, then the installed plugins the store enabled;
    the last registered is asked first and the built-ins last."""
    monkeypatch.syspath_prepend(str(dist_site))
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

    pm = get_plugin_manager(folder, extra=[Four()], installed_names=[DIST_ENTRY_POINT])
    order = ["hivelite.default_gate", "hivelite.default_threshold", "three", "Four",
             DIST_ENTRY_POINT]
    assert names(pm) == order
    assert [pm.sources[n] for n in names(pm)][2:] == [
        f"file {folder / 'three.py'}", "given", f"entry point ({DIST_NAME})"]
    answers = call_each(pm, "hivelite_merge_threshold", task=None, hive=None)
    assert answers == [(DIST_ENTRY_POINT, 2), ("Four", 4), ("three", 3),
                       ("hivelite.default_threshold", 1)]

    with Hive.open(store, owner="ana") as hive:  # the same order when a store enabled it
        hive.enable_plugin(hive.as_owner(), DIST_ENTRY_POINT)
    with Hive.open(store, owner="ana", plugins_dir=folder, plugins=[Four()]) as hive:
        assert names(hive.plugins) == order
        assert call_each(hive.plugins, "hivelite_merge_threshold", task=None,
                         hive=None)[0] == (DIST_ENTRY_POINT, 2)


# -- installing is not enabling (issue 46): the rule, on a real distribution -------------------

THRESHOLD_DIST = ("hl-discovery-threshold", "hl_discovery_threshold", "discovery-threshold")
THRESHOLD_SOURCE = '''
import hivelite


@hivelite.hookimpl
def hivelite_merge_threshold(task, hive):
    return 3
'''


@pytest.fixture
def second_dist(dist_site: Path) -> Iterator[str]:
    """A second installed distribution beside ``dist_site``'s: a threshold plugin."""
    dist, module, name = THRESHOLD_DIST
    write_distribution(dist_site, dist, module, {name: module}, THRESHOLD_SOURCE)
    yield name
    sys.modules.pop(module, None)


def secret_handoff(hive: Hive, caller: Caller = OWNER) -> Any:
    return hive.handoff(caller, requester="ana/planner", assignee="ana/coder",
                        project="secret-plans",
                        packet={"task": "Write the parser", "deliverable_type": "code",
                                "acceptance_criteria": ["tests pass"]})


def policy_events(db: Path) -> list[dict[str, Any]]:
    with Hive.open(db, owner="ana") as hive:
        return [dict(r.detail or {}) for r in hive.journal() if r.reason == "policy"]


def test_an_installed_plugin_the_store_did_not_enable_does_not_act(
        store: Path, dist_site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(dist_site))
    monkeypatch.delenv("HIVELITE_LOAD_PLUGINS", raising=False)
    with Hive.open(store, owner="ana") as hive:
        assert not hive.plugins.has_plugin(DIST_ENTRY_POINT)
        receipt = secret_handoff(hive)
        assert receipt.state is State.routed  # its gate would have said no
        assert status_of(hive, DIST_ENTRY_POINT) == (False, False, "not_enabled")
        about = hive.info()
        assert about.enabled_plugins == [] and DIST_ENTRY_POINT in about.installed_not_enabled
        assert hive.policy().enabled_plugins == []
    assert DIST_MODULE not in sys.modules  # never imported, so no hook of it ran
    assert gate_decider(store, receipt.number) == "hivelite.default_gate"


def test_an_enabled_plugin_acts_in_every_process_until_disabled(
        tmp_path: Path, store: Path, dist_site: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(dist_site))
    monkeypatch.delenv("HIVELITE_LOAD_PLUGINS", raising=False)
    with Hive.open(store, owner="ana") as hive:
        policy = hive.enable_plugin(hive.as_owner(), DIST_ENTRY_POINT)
        assert policy.enabled_plugins == [DIST_ENTRY_POINT]
        assert hive.plugins.has_plugin(DIST_ENTRY_POINT)  # here at once, elsewhere next open
    assert policy_events(store) == [{"key": f"plugin:{DIST_ENTRY_POINT}",
                                     "value": "enabled", "was": None}]
    with Hive.open(store, owner="ana") as hive:
        assert hive.plugins.sources[DIST_ENTRY_POINT] == f"entry point ({DIST_NAME})"
        assert status_of(hive, DIST_ENTRY_POINT) == (True, True, "ok")
        assert hive.info().enabled_plugins == [DIST_ENTRY_POINT]
        receipt = secret_handoff(hive)
        assert receipt.state is State.rejected
    assert gate_decider(store, receipt.number) == DIST_ENTRY_POINT

    path = on_path(dist_site)  # a second process, which only the store tells to load it
    done = run(["--db", str(store), "--json", *handoff_args("secret-plans")], cwd=tmp_path,
               PYTHONPATH=path)
    assert done.code == 0, done.err
    assert done.json()["task"]["state"] == "rejected"
    assert gate_decider(store, done.json()["number"]) == DIST_ENTRY_POINT
    about = run(["--db", str(store), "--json", "info"], cwd=tmp_path, PYTHONPATH=path)
    assert about.json()["enabled_plugins"] == [DIST_ENTRY_POINT]
    assert DIST_ENTRY_POINT not in about.json()["installed_not_enabled"]

    disabled = run(["--db", str(store), "--json", "policy", "disable", DIST_ENTRY_POINT],
                   cwd=tmp_path, PYTHONPATH=path)
    assert disabled.code == 0, disabled.err
    assert disabled.json()["enabled_plugins"] == []
    assert policy_events(store)[-1] == {"key": f"plugin:{DIST_ENTRY_POINT}", "value": None,
                                        "was": "enabled"}
    done = run(["--db", str(store), "--json", *handoff_args("secret-plans")], cwd=tmp_path,
               PYTHONPATH=path)
    assert done.json()["task"]["state"] == "routed"
    assert gate_decider(store, done.json()["number"]) == "hivelite.default_gate"
    with Hive.open(store, owner="ana") as hive:
        assert not hive.plugins.has_plugin(DIST_ENTRY_POINT)
        assert status_of(hive, DIST_ENTRY_POINT) == (False, False, "not_enabled")
        assert DIST_ENTRY_POINT in hive.info().installed_not_enabled


def test_enabling_twice_is_journaled_once(store: Path, dist_site: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(dist_site))
    with Hive.open(store, owner="ana") as hive:
        for _ in range(2):
            assert hive.enable_plugin(OWNER, DIST_ENTRY_POINT).enabled_plugins == [
                DIST_ENTRY_POINT]
    assert len(policy_events(store)) == 1


def test_what_is_not_installed_cannot_be_enabled(tmp_path: Path, store: Path) -> None:
    before = snapshot(store)
    with Hive.open(store, owner="ana") as hive:
        for name in ("not-installed-here", "../evil", ""):
            with pytest.raises(InvalidInput) as err:
                hive.enable_plugin(OWNER, name)
            assert (err.value.status, err.value.reason) == (422, "unknown_plugin")
    assert snapshot(store) == before
    done = run(["--db", str(store), "--json", "policy", "enable", "not-installed-here"],
               cwd=tmp_path)
    assert done.code == 6
    assert (done.json()["error"]["status"], done.json()["error"]["reason"]) == (
        422, "unknown_plugin")
    assert "not-installed-here" in done.err
    assert snapshot(store) == before


def test_what_is_not_enabled_cannot_be_disabled(tmp_path: Path, store: Path,
                                                dist_site: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(dist_site))
    before = snapshot(store)
    with Hive.open(store, owner="ana") as hive:  # installed, never enabled
        with pytest.raises(NotFound) as err:
            hive.disable_plugin(OWNER, DIST_ENTRY_POINT)
        assert (err.value.status, err.value.reason) == (404, "not_enabled")
    assert snapshot(store) == before
    done = run(["--db", str(store), "--json", "policy", "disable", DIST_ENTRY_POINT],
               cwd=tmp_path, PYTHONPATH=on_path(dist_site))
    assert done.code == 5
    assert done.json()["error"]["reason"] == "not_enabled"
    assert snapshot(store) == before


def test_an_agent_may_not_enable_or_disable(tmp_path: Path, store: Path, dist_site: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(dist_site))
    coder = Caller.agent("ana/coder", "laptop")
    with Hive.open(store, owner="ana") as hive:
        hive.enable_plugin(OWNER, DIST_ENTRY_POINT)
    before = snapshot(store)
    with Hive.open(store, owner="ana") as hive:
        for verb in (hive.enable_plugin, hive.disable_plugin):
            with pytest.raises(ForbiddenRight) as err:
                verb(coder, DIST_ENTRY_POINT)
            assert (err.value.status, err.value.reason) == (403, "not_permitted")
    assert snapshot(store) == before
    for verb in ("enable", "disable"):
        done = run(["--db", str(store), "--json", "policy", verb, DIST_ENTRY_POINT],
                   cwd=tmp_path, PYTHONPATH=on_path(dist_site),
                   HIVELITE_AGENT="ana/coder", HIVELITE_INSTANCE="laptop")
        assert done.code == 4, done.err
        assert done.json()["error"]["reason"] == "not_permitted"
    assert snapshot(store) == before


def test_a_required_plugin_must_be_enabled_first(store: Path, dist_site: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Requiring binds what this process loaded, and an installed plugin loads only once
    enabled: the refusal says so."""
    monkeypatch.syspath_prepend(str(dist_site))
    before = snapshot(store)
    with Hive.open(store, owner="ana") as hive:
        with pytest.raises(InvalidInput) as err:
            hive.require_plugin(OWNER, DIST_ENTRY_POINT)
        assert err.value.reason == "unknown_plugin"
        assert f"hivelite policy enable {DIST_ENTRY_POINT}" in err.value.message
    assert snapshot(store) == before


def test_a_store_that_requires_one_and_enables_another(
        store: Path, dist_site: Path, second_dist: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The store requires the gate and enables the threshold: a process with both writes
    (an enabled plugin is no unapproved one), so does one that leaves the enabled one out;
    one without the required one, or with a policy plugin the store neither requires nor
    enables, is refused and writes nothing."""
    monkeypatch.syspath_prepend(str(dist_site))
    monkeypatch.delenv("HIVELITE_LOAD_PLUGINS", raising=False)
    with Hive.open(store, owner="ana") as hive:
        hive.enable_plugin(OWNER, DIST_ENTRY_POINT)
    with Hive.open(store, owner="ana") as hive:
        assert hive.require_plugin(OWNER, DIST_ENTRY_POINT).kind == "entry_point"
        hive.enable_plugin(OWNER, second_dist)
    with Hive.open(store, owner="ana") as hive:
        assert names(hive.plugins)[2:] == [DIST_ENTRY_POINT, second_dist]
        assert secret_handoff(hive).state is State.rejected
        assert status_of(hive, second_dist) == (True, True, "ok")
    monkeypatch.setenv("HIVELITE_LOAD_PLUGINS", DIST_ENTRY_POINT)
    with Hive.open(store, owner="ana") as hive:  # the enabled one left out: still fine
        assert names(hive.plugins)[2:] == [DIST_ENTRY_POINT]
        assert secret_handoff(hive).state is State.rejected
    monkeypatch.delenv("HIVELITE_LOAD_PLUGINS")

    class Extra:
        @hivelite.hookimpl
        def hivelite_merge_threshold(self, task: Any) -> int:
            return 0

    before = snapshot(store)
    with Hive.open(store, owner="ana", plugins=[Extra()]) as hive:
        with pytest.raises(ForbiddenRight) as err:
            secret_handoff(hive)
        assert (err.value.reason, err.value.extra.get("plugin")) == ("policy_unapproved",
                                                                     "Extra")
    monkeypatch.setenv("HIVELITE_LOAD_PLUGINS", second_dist)
    with Hive.open(store, owner="ana") as hive:
        with pytest.raises(ForbiddenRight) as err:
            secret_handoff(hive)
        assert err.value.reason == "policy_missing"
    assert snapshot(store) == before


def test_a_file_named_like_an_enabled_plugin_is_no_approved_one(
        tmp_path: Path, store: Path, dist_site: Path, second_dist: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The store requires the gate and enables the threshold plugin: a process whose
    plugins folder has a file of that name (which takes the installed one's place) runs a
    policy the owner neither required nor enabled, and is refused."""
    monkeypatch.syspath_prepend(str(dist_site))
    monkeypatch.delenv("HIVELITE_LOAD_PLUGINS", raising=False)
    with Hive.open(store, owner="ana") as hive:
        hive.enable_plugin(OWNER, DIST_ENTRY_POINT)
    with Hive.open(store, owner="ana") as hive:
        hive.require_plugin(OWNER, DIST_ENTRY_POINT)
        hive.enable_plugin(OWNER, second_dist)
    folder = plugin_folder(tmp_path, second_dist.replace("-", "_"), '''
        import hivelite

        @hivelite.hookimpl
        def hivelite_merge_threshold(task):
            return 0
    ''')
    (folder / f"{second_dist.replace('-', '_')}.py").rename(folder / f"{second_dist}.py")
    before = snapshot(store)
    with Hive.open(store, owner="ana", plugins_dir=folder) as hive:
        assert hive.plugins.sources[second_dist] == f"file {folder / second_dist}.py"
        with pytest.raises(ForbiddenRight) as err:
            secret_handoff(hive)
        assert err.value.reason == "policy_unapproved"
    assert snapshot(store) == before


def test_the_doctor_replays_enabling_from_the_journal(store: Path, dist_site: Path,
                                                      second_dist: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(dist_site))
    with Hive.open(store, owner="ana") as hive:
        hive.enable_plugin(OWNER, DIST_ENTRY_POINT)
        hive.enable_plugin(OWNER, second_dist)
        hive.disable_plugin(OWNER, DIST_ENTRY_POINT)
    assert [f.check for f in diagnose_file(store) if not f.ok] == []
    with Hive.open(store, owner="ana") as hive:
        hive.disable_plugin(OWNER, second_dist)
    assert [f.check for f in diagnose_file(store) if not f.ok] == []
    # and it can fail: a plugin enabled by raw SQL, with no journal row, is caught
    conn = rawsql.connect(store)
    try:
        conn.execute("INSERT INTO policy VALUES (?, 'enabled', '2026-12-02T09:00:00.000Z',"
                     " 'ana')", (f"plugin:{DIST_ENTRY_POINT}",))
    finally:
        conn.close()
    failed = {f.check: f.detail for f in diagnose_file(store) if not f.ok}
    assert list(failed) == ["policy"] and f"plugin:{DIST_ENTRY_POINT}" in failed["policy"]


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
    """Two real calls: the first writes the cache, the second reads it, and both find the
    distribution's plugin (listed, and loaded on the store that enabled it)."""
    with Hive.open(store, owner="ana") as hive:  # enabled in a process that had it too
        original = list(sys.path)
        sys.path.insert(0, str(dist_site))
        try:
            hive.enable_plugin(OWNER, DIST_ENTRY_POINT)
        finally:
            sys.path[:] = original
    path = on_path(dist_site)
    cache = tmp_path / "cli-cache"
    for _ in range(2):
        listed = run(["--json", "plugins"], cwd=tmp_path, PYTHONPATH=path,
                     HIVELITE_CACHE_DIR=str(cache))
        assert listed.code == 0, listed.err
        assert idle(listed.json())[DIST_ENTRY_POINT] == not_enabled(DIST_ENTRY_POINT,
                                                                    DIST_NAME)
        done = run(["--db", str(store), "--json", *handoff_args("secret-plans")],
                   cwd=tmp_path, PYTHONPATH=path, HIVELITE_CACHE_DIR=str(cache))
        assert done.code == 0, done.err
        assert gate_decider(store, done.json()["number"]) == DIST_ENTRY_POINT
    assert DIST_ENTRY_POINT in (cache / installed.CACHE_NAME).read_text()
