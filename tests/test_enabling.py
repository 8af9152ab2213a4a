"""Installing is not enabling (issue 46, item 2): an installed plugin acts on a store only
once its owner enables it there; a store made before that rule tells its owner once.

These run the real CLI in subprocesses with the four first-party plugins installed, as the
README's test command installs them."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest

from hivelite import Hive, ManualClock
from hivelite.store.doctor import diagnose_file
from hivelite.verbs.installed import entry_points

from .conftest import HANG_S, START, own_task
from .downgrade import to_version

FIRST_PARTY = {"evidence", "notify", "policy", "quorum"}
CODER = ["--agent", "ana/coder", "--instance", "laptop"]


@pytest.fixture(autouse=True)
def _installed() -> None:
    missing = FIRST_PARTY - {ep.name for ep in entry_points()}
    assert not missing, f"the README installs the first-party plugins; missing: {missing}"


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``hivelite --json --db DB ARGS`` in a fresh process, as a user's shell runs it:
    no variable of ours set, so every installed plugin is there to be loaded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env["HIVELITE_NOW"] = START
    env["HIVELITE_CACHE_DIR"] = str(db.parent / "cache")
    return subprocess.run([sys.executable, "-m", "hivelite", "--json", "--db", str(db),
                           *args], capture_output=True, text=True, env=env, timeout=HANG_S,
                          cwd=db.parent)


def ok(db: Path, *args: str) -> Any:
    done = cli(db, *args)
    assert done.returncode == 0, (args, done.stderr)
    return json.loads(done.stdout)


def note_result(db: Path, number: int) -> str:
    """Claim task ``number`` as the coder and submit a code result with only a note: the
    state it lands in."""
    lease = ok(db, "claim", str(number), *CODER)
    return str(ok(db, "submit", str(number), *CODER, "--lease", lease["lease_id"],
                  "--token", str(lease["fencing_token"]), "--summary", "done",
                  "--evidence", "note:looked at it")["task"]["state"])


def test_a_fresh_store_takes_a_note_until_its_owner_enables_the_evidence_plugin(
        tmp_path: Path) -> None:
    """The issue's 'done when': with the four plugins installed and nothing enabled, a
    code result with only a note goes to review; once the owner enables the evidence
    plugin there, the same result is sent back; disabled, it is taken again."""
    db = tmp_path / "work.db"
    ok(db, "init", "--owner", "ana")
    for n in range(3):
        ok(db, "handoff", "--requester", "ana/planner", "--assignee", "ana/coder",
           "--project", "site", "--task", f"Fix bug {n}", "--type", "code",
           "--accept", "tests pass")
    listed = {row["name"]: row for row in ok(db, "plugins")}
    assert {n: listed[n]["status"] for n in FIRST_PARTY} == dict.fromkeys(
        FIRST_PARTY, "not_enabled")
    info = ok(db, "info")
    assert (info["enabled_plugins"], set(info["installed_not_enabled"])) == ([], FIRST_PARTY)
    assert note_result(db, 1) == "approval"

    policy = ok(db, "policy", "enable", "evidence")
    assert policy["enabled_plugins"] == ["evidence"]
    assert note_result(db, 2) == "routed"
    assert ok(db, "show", "2")["attempts"] == 1
    listed = {row["name"]: row for row in ok(db, "plugins")}
    assert (listed["evidence"]["enabled"], listed["evidence"]["status"]) == (True, "ok")

    assert ok(db, "policy", "disable", "evidence")["enabled_plugins"] == []
    assert note_result(db, 3) == "approval"
    assert ok(db, "doctor")["ok"]  # the enable and the disable replay from the journal


def test_enabling_what_is_not_installed_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "work.db"
    ok(db, "init", "--owner", "ana")
    before = db.read_bytes()
    done = cli(db, "policy", "enable", "evidense")
    assert done.returncode == 6, done.stderr
    error = json.loads(done.stdout)["error"]
    assert (error["code"], error["reason"]) == ("invalid_input", "unknown_plugin")
    assert "evidence" in error["message"]  # what is installed, to pick from
    done = cli(db, "policy", "disable", "evidence")
    assert done.returncode == 5 and json.loads(done.stdout)["error"]["reason"] == "not_enabled"
    assert db.read_bytes() == before


def older_store(path: Path) -> int:
    """A store as migration 17 left it: made before installing stopped enabling."""
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        number = own_task(hive)
    conn = apsw.Connection(str(path))
    with conn:
        to_version(conn, 17)
    conn.close()
    return number


def test_an_older_store_tells_its_owner_once_which_plugins_stopped_acting(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A store that relied on installed plugins acting by themselves: its first open says
    which ones no longer act, and how to enable them; the telling is journaled and said
    once; doctor agrees with the store. (Mutation caught: the mark never cleared.)"""
    path = tmp_path / "old.db"
    older_store(path)
    with caplog.at_level(logging.WARNING, logger="hivelite"):
        with Hive.open(path, clock=ManualClock(START)) as hive:
            told = [r.getMessage() for r in caplog.records if r.name == "hivelite"]
            assert len(told) == 1, told
            assert all(name in told[0] for name in FIRST_PARTY)
            assert "hivelite policy enable NAME" in told[0]
            (event,) = [e for e in hive.journal() if e.reason == "policy"]
            assert event.detail is not None and event.detail["key"] == "plugins_notice"
            assert set(event.detail["not_enabled"]) == FIRST_PARTY
        caplog.clear()
        Hive.open(path, clock=ManualClock(START)).close()
        assert [r for r in caplog.records if r.name == "hivelite"] == []
    assert all(f.ok for f in diagnose_file(path))


def test_the_cli_prints_the_notice_once_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    number = older_store(path)
    first = cli(path, "claim", str(number), *CODER)
    assert first.returncode == 0, first.stderr
    assert first.stderr.startswith("warning: installed plugins act on a store only once")
    assert "hivelite policy enable NAME" in first.stderr
    again = cli(path, "show", str(number))
    assert again.returncode == 0 and again.stderr == ""


def test_a_new_store_owes_no_notice(tmp_path: Path,
                                    caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hivelite"):
        Hive.open(tmp_path / "new.db", owner="ana").close()
        Hive.open(tmp_path / "new.db").close()
    assert [r for r in caplog.records if r.name == "hivelite"] == []


def test_a_plugin_enabled_on_the_store_and_given_to_open_acts_once(tmp_path: Path) -> None:
    import hivelite_notify  # type: ignore[import-not-found]

    with Hive.open(tmp_path / "s.db", owner="ana") as hive:
        hive.enable_plugin(hive.as_owner(), "notify")
    with Hive.open(tmp_path / "s.db", plugins=[hivelite_notify]) as hive:
        names = [name for name, plugin in hive.plugins.list_name_plugin()
                 if plugin is hivelite_notify]
        assert len(names) == 1


def test_enabling_and_disabling_take_effect_in_the_process_that_does_it(
        tmp_path: Path) -> None:
    """A notebook's open Hive follows its owner's choice at once: the note is sent back
    right after enabling, taken again right after disabling (no reopen). (Mutation caught:
    the choice only written, this process's plugins left as they were.)"""
    from hivelite import Caller

    coder = Caller.agent("ana/coder", "laptop")
    with Hive.open(tmp_path / "s.db", owner="ana") as hive:
        def note(n: int) -> str:
            number = own_task(hive, packet={"task": f"Fix bug {n}", "deliverable_type":
                                            "code", "acceptance_criteria": ["ok"]})
            lease = hive.claim(coder, number)
            return hive.submit(coder, number, lease_id=lease.lease_id,
                               token=lease.fencing_token, summary="done",
                               evidence=[{"kind": "note", "summary": "looked"}]).state.value

        assert note(1) == "approval"
        hive.enable_plugin(hive.as_owner(), "evidence")
        assert note(2) == "routed"
        assert {r.name: r.status for r in hive.plugin_status()}["evidence"] == "ok"
        hive.disable_plugin(hive.as_owner(), "evidence")
        assert note(3) == "approval"
        assert {r.name: r.status for r in hive.plugin_status()}["evidence"] == "not_enabled"


def test_a_process_with_no_plugin_installed_leaves_the_notice_for_one_that_has(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    from hivelite.verbs import policy

    path = tmp_path / "old.db"
    older_store(path)
    monkeypatch.setattr(policy, "entry_points", lambda: [])
    Hive.open(path, clock=ManualClock(START)).close()  # nothing installed: nothing said
    monkeypatch.undo()
    with caplog.at_level(logging.WARNING, logger="hivelite"):
        Hive.open(path, clock=ManualClock(START)).close()
    told = [r.getMessage() for r in caplog.records if r.name == "hivelite"]
    assert len(told) == 1 and "evidence" in told[0]


def test_enabling_a_plugin_that_refuses_the_store_writes_nothing(tmp_path: Path) -> None:
    """The plugin starts in the enabling process first: settings it refuses are told at
    once, and the store is left exactly as it was."""
    db = tmp_path / "work.db"
    ok(db, "init", "--owner", "ana")
    (tmp_path / "hivelite.toml").write_text('[evidence.require]\nscreenshots = ["photo"]\n')
    before = db.read_bytes()
    done = cli(db, "policy", "enable", "evidence")
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["plugin"] == "evidence" and "photo" in error["message"]
    assert db.read_bytes() == before
    (tmp_path / "hivelite.toml").unlink()
    assert ok(db, "policy", "enable", "evidence")["enabled_plugins"] == ["evidence"]
