"""hivelite-notify: one JSON event per committed move, to a JSON Lines file and/or a command.

The rules are checked in-process on real store files (``Hive.open(...,
plugins=[hivelite_notify])``); the end-to-end tests run the real ``hivelite``
command with the plugin from its installed entry point, which acts on a store only
once its owner enabled it there (``hivelite policy enable notify``). Every event's
``task_object`` is checked against seed 000's task schema (the copy hivelite ships,
``hivelite/data/task.schema.json``), formats included.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hivelite import Caller, Hive, ManualClock, PluginError, State, Task, hookimpl
from hivelite.core.protocol import MOVES, MOVES_BY_NAME
from jsonschema import Draft202012Validator, FormatChecker  # type: ignore[import-untyped]

import hivelite_notify

START = "2026-12-02T09:00:00.000Z"
LATER = "2026-12-02T09:05:00.000Z"
PACKET: dict[str, Any] = {"task": "Write the parser", "deliverable_type": "code",
                          "acceptance_criteria": ["tests pass"]}
HIVELITE = Path(sys.executable).parent / "hivelite"
HANG_S = float(os.environ.get("HIVELITE_TEST_HANG_S") or 600)
"""A guard against a hung command only: never a limit on how long a slow machine takes."""
OWNER = Caller.owner("ana")
"""The store's owner, acting as owner."""
CODER = Caller.agent("ana/coder", "laptop")
"""The assignee of every task here, on the laptop."""
REVIEWER = Caller.agent("ana/reviewer", "desktop")
"""An independent reviewer on another instance."""
GUEST = Caller.agent("guest/scout", "elsewhere")
"""Someone else's agent: the built-in gate holds its handoffs for the owner."""
SCHEMA: dict[str, Any] = json.loads(
    resources.files("hivelite").joinpath("data/task.schema.json").read_text(encoding="utf-8"))
"""Seed 000's task object schema, as hivelite ships it."""
TASK_OBJECT = Draft202012Validator(SCHEMA, format_checker=FormatChecker())


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No installed entry points in-process (the module is given), no outside settings."""
    monkeypatch.setenv("HIVELITE_LOAD_PLUGINS", "")
    for name in ("HIVELITE_NOTIFY_FILE", "HIVELITE_NOTIFY_COMMAND", "HIVELITE_CONFIG",
                 "HIVELITE_PLUGINS_DIR", "HIVELITE_NOW", "HIVELITE_TRACE_PLUGINS",
                 "HIVELITE_AGENT", "HIVELITE_INSTANCE", "HIVELITE_SESSION"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


def open_hive(folder: Path, settings: str | None, clock: ManualClock,
              *others: object) -> Hive:
    if settings is not None:
        (folder / "hivelite.toml").write_text(settings, encoding="utf-8")
    return Hive.open(folder / "store.db", owner="ana", clock=clock,
                     plugins=[hivelite_notify, *others])


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def pycommand(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def toml_list(words: list[str]) -> str:
    return json.dumps(words)  # a JSON array of strings is a valid TOML array


def schema_errors(instance: Any) -> list[str]:
    """Every violation of the seed's task schema as ``path: message`` (empty: valid)."""
    return sorted(f"{'/'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"
                  for err in TASK_OBJECT.iter_errors(instance))


def handoff(hive: Hive, caller: Caller = OWNER, **overrides: Any) -> int:
    """A handoff by ``caller`` (the owner unless given; a guest hands off as itself)."""
    fields: dict[str, Any] = {"requester": "ana/planner", "assignee": "ana/coder",
                              "project": "demo", "packet": PACKET}
    fields.update(overrides)
    return hive.handoff(caller, **fields).number


# -- the events ---------------------------------------------------------------


def test_a_handoff_appends_one_event_beside_the_store(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a relative file is beside the store, not the cwd
    with open_hive(tmp_path, '[notify]\nfile = "events.jsonl"\n', clock) as hive:
        number = handoff(hive)
        task = hive.get(number).task
    assert not list(elsewhere.iterdir())
    assert events(tmp_path / "events.jsonl") == [{
        "at": START, "task": task.id, "number": number, "seq": 2, "move": 1, "name": "route",
        "from": "requested", "to": "routed", "waiting_on": None, "actor": "gate",
        "project": "demo", "requester": "ana/planner", "assignee": "ana/coder",
        "store": str(tmp_path / "store.db"),
        "task_object": {  # seed 000's task object: every key, the null ones too
            "id": task.id, "project": "demo", "state": "routed", "waiting_on": None,
            "requester": "ana/planner", "assignee": "ana/coder",
            "packet": {**PACKET, "context": "", "files": [], "depends_on": []},
            "result": None, "latest_checkpoint": None,
            "created_at": START, "updated_at": START,
        },
    }]


def test_claim_submit_verify_gives_one_event_per_move_in_order(
        tmp_path: Path, clock: ManualClock) -> None:
    with open_hive(tmp_path, '[notify]\nfile = "events.jsonl"\n', clock) as hive:
        number = handoff(hive)
        clock.advance(minutes=1)
        lease = hive.claim(CODER, number)
        clock.advance(minutes=1)
        hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=[{"kind": "test_output", "summary": "3 passed"}])
        clock.advance(minutes=1)
        verified = hive.verify(REVIEWER, number, verdict="accept")
        assert verified.state is State.completed
        assert verified.seq == hive.history(number)[-1].seq
        assert hive.get(number).task.state is State.completed
        journal = [e.move for e in hive.history(number) if e.move is not None]
        seqs = [e.seq for e in hive.history(number) if e.move is not None]
    got = events(tmp_path / "events.jsonl")
    assert [e["seq"] for e in got] == seqs  # each event carries its journal row's seq
    assert [(e["move"], e["name"], e["from"], e["to"], e["actor"]) for e in got] == [
        (1, "route", "requested", "routed", "gate"),
        (6, "claim", "routed", "accepted", "ana/coder"),
        (7, "start", "accepted", "working", "ana/coder"),
        (12, "submit", "working", "verifying", "ana/coder"),  # the pass-through ...
        (14, "await_approval", "verifying", "approval", "guard"),  # ... in one commit
        (16, "complete", "approval", "completed", "ana/reviewer"),
    ]
    assert [e["move"] for e in got] == journal  # exactly the journaled moves
    assert [e["at"] for e in got] == [START, "2026-12-02T09:01:00.000Z",
                                      "2026-12-02T09:02:00.000Z", "2026-12-02T09:02:00.000Z",
                                      "2026-12-02T09:02:00.000Z", "2026-12-02T09:03:00.000Z"]
    assert {e["number"] for e in got} == {number}


def test_waiting_on_is_named_for_moves_into_waiting_only(
        tmp_path: Path, clock: ManualClock) -> None:
    with open_hive(tmp_path, '[notify]\nfile = "events.jsonl"\n', clock) as hive:
        held = handoff(hive, GUEST, requester=GUEST.name)  # the built-in gate holds it
        hive.approve(OWNER, held, reason="fine")
        lease = hive.claim(CODER, held)
        hive.pause(CODER, held, lease_id=lease.lease_id, token=lease.fencing_token, on="human",
                   reason="which format?")
    got = [(e["move"], e["waiting_on"]) for e in events(tmp_path / "events.jsonl")]
    assert got == [(2, "owner_approval"), (4, None), (6, None), (7, None), (10, "human")]



def test_waiting_on_is_named_even_if_the_task_moved_on(
        tmp_path: Path, clock: ManualClock) -> None:
    """Another process may move the task between the commit and the event."""
    with open_hive(tmp_path, None, clock) as hive:
        task = hive.get(handoff(hive)).task  # routed now
    assert task.state is State.routed
    assert hivelite_notify._waiting_on(task, MOVES_BY_NAME["hold"]) == "owner_approval"
    assert hivelite_notify._waiting_on(task, MOVES_BY_NAME["pause"]) is None  # human or agent

class RefusingGate:
    """A permission gate that refuses the handoffs whose task begins with "Refuse"."""

    @hookimpl
    def hivelite_permission_gate(self, task: Task, hive: Any) -> str | None:
        return "deny" if task.packet.task.startswith("Refuse") else None


def test_every_event_carries_the_task_object_as_the_store_has_it(
        tmp_path: Path, clock: ManualClock) -> None:
    """Every move the verbs make, each event checked against the store right after its write.

    All but ``cancel_requested`` (18): the gate decides a handoff in the handoff's own
    commit, so no task is ever left in ``requested`` to be cancelled.
    """
    path = tmp_path / "events.jsonl"
    sent = 0
    moves: set[int] = set()
    evidence = [{"kind": "test_output", "summary": "3 passed"}]
    with open_hive(tmp_path, '[notify]\nfile = "events.jsonl"\n', clock,
                   RefusingGate()) as hive:

        def check(number: int) -> None:
            """The events of the write just made, against the task as the store has it now."""
            nonlocal sent
            got = events(path)[sent:]
            sent += len(got)
            assert got, "the write sent no event"
            task = hive.get(number).task.to_json_dict()
            for event in got:
                assert schema_errors(event["task_object"]) == [], event
                assert event["task_object"] == task
                for key in ("waiting_on", "result", "latest_checkpoint"):
                    assert key in event["task_object"]  # present even when null
                assert (event["task"], event["number"]) == (task["id"], number)
                assert (event["project"], event["requester"], event["assignee"]) == (
                    task["project"], task["requester"], task["assignee"])
                moves.add(event["move"])
            # The state once the write committed: its last move's (a submit that passes
            # straight through makes three moves in one write: all three carry it).
            assert (got[-1]["to"], got[-1]["waiting_on"]) == (task["state"],
                                                              task["waiting_on"])

        def claim(number: int) -> tuple[str, int]:
            lease = hive.claim(CODER, number)
            check(number)
            return lease.lease_id, lease.fencing_token

        def submit(number: int, lease: tuple[str, int], **extra: Any) -> None:
            hive.submit(CODER, number, lease_id=lease[0], token=lease[1], summary="done",
                        evidence=evidence, **extra)
            check(number)

        check(handoff(hive, packet={**PACKET, "task": "Refuse this"}))  # 3 refuse
        for decide in (hive.deny, hive.approve, hive.cancel):  # 2 hold, then 5, 4 or 19
            held = handoff(hive, GUEST, requester=GUEST.name)
            check(held)
            decide(OWNER, held)
            check(held)

        number = handoff(hive)  # 1 route
        check(number)
        hive.cancel(OWNER, number)  # 20
        check(number)
        number = handoff(hive)
        check(number)
        claim(number)  # 6 claim
        hive.cancel(OWNER, number)  # 21
        check(number)

        number = handoff(hive)
        check(number)
        lease = claim(number)
        hive.release(CODER, number, lease_id=lease[0], token=lease[1])  # 8
        check(number)
        lease = claim(number)
        hive.checkpoint(CODER, number, lease_id=lease[0], token=lease[1],
                        progress="half way")  # 7 start: latest_checkpoint set
        check(number)
        hive.release(CODER, number, lease_id=lease[0], token=lease[1])  # 9
        check(number)
        lease = claim(number)
        hive.checkpoint(CODER, number, lease_id=lease[0], token=lease[1], progress="again")
        check(number)
        hive.cancel(OWNER, number)  # 22
        check(number)

        number = handoff(hive)
        check(number)
        lease = claim(number)
        hive.pause(CODER, number, lease_id=lease[0], token=lease[1], on="agent",
                   reason="which format?")  # 7 start, 10 pause
        check(number)
        resumed = hive.resume(CODER, number)  # 11
        check(number)
        submit(number, (resumed.lease_id, resumed.fencing_token),
               outcome="failed")  # 12 submit, 15 bounce
        submit(number, claim(number))  # 7, 12, 14 await_approval: result set
        hive.decline(OWNER, number, reason="not yet")  # 17
        check(number)
        submit(number, claim(number))
        clock.advance(minutes=1)
        hive.verify(REVIEWER, number, verdict="accept")  # 16 complete
        check(number)

        hive.set_policy(OWNER, "threshold", 0)
        number = handoff(hive)
        check(number)
        submit(number, claim(number))  # 7, 12, 13 pass

        number = handoff(hive)
        check(number)
        claim(number)
        clock.advance(minutes=30)
        hive.expire(OWNER)  # 8 by the clock
        check(number)
        assert list(hive.notify_failures) == []
    assert moves == {m.number for m in MOVES} - {MOVES_BY_NAME["cancel_requested"].number}
    assert sent == len(events(path))  # every event was checked


def test_no_settings_sends_nothing(tmp_path: Path, clock: ManualClock) -> None:
    with open_hive(tmp_path, None, clock) as hive:
        handoff(hive)
        assert list(hive.notify_failures) == []
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("store.db")) == []


def test_each_line_is_one_write_on_an_append_only_private_file(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[bytes] = []
    real_write = os.write

    def spy(fd: int, data: bytes) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", spy)  # the module hivelite_notify writes with
    (tmp_path / "events.jsonl").write_text('{"earlier": true}\n', encoding="utf-8")
    with open_hive(tmp_path, '[notify]\nfile = "events.jsonl"\n', clock) as hive:
        handoff(hive, packet={**PACKET, "task": "Write the parser " + "x" * 400})
        handoff(hive)
    assert len(writes) == 2  # one write call per event: whole lines, never interleaved
    assert all(w.endswith(b"\n") and w.count(b"\n") == 1 for w in writes)
    lines = (tmp_path / "events.jsonl").read_bytes().splitlines(keepends=True)
    assert lines == [b'{"earlier": true}\n', *writes]  # appended, nothing rewritten

    new_file = tmp_path / "new.jsonl"
    monkeypatch.setenv("HIVELITE_NOTIFY_FILE", str(new_file))
    with open_hive(tmp_path, None, clock) as hive:
        handoff(hive)
    assert stat.S_IMODE(new_file.stat().st_mode) == 0o600


# -- the command target -------------------------------------------------------


def test_the_command_gets_the_event_on_stdin(tmp_path: Path, clock: ManualClock) -> None:
    out = tmp_path / "out.txt"
    command = pycommand(f"import sys; open({str(out)!r},'a').write(sys.stdin.read()+'\\n')")
    settings = f'[notify]\nfile = "events.jsonl"\ncommand = {toml_list(command)}\n'
    with open_hive(tmp_path, settings, clock) as hive:
        handoff(hive)
        handoff(hive, GUEST, requester=GUEST.name)
        assert list(hive.notify_failures) == []
    received = out.read_text(encoding="utf-8")
    # exactly the file's lines: one JSON document per run, in the same order
    assert received == (tmp_path / "events.jsonl").read_text(encoding="utf-8")
    assert [e["move"] for e in events(out)] == [1, 2]


def test_a_failing_command_keeps_the_move_and_is_reported(
        tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    command = pycommand("import sys; sys.stdin.read(); sys.stderr.write('boom: no display');"
                        " sys.exit(3)")
    settings = f'[notify]\nfile = "events.jsonl"\ncommand = {toml_list(command)}\n'
    with caplog.at_level(logging.WARNING, logger="hivelite"), \
            open_hive(tmp_path, settings, clock) as hive:
        number = handoff(hive)
        assert hive.get(number).task.state is State.routed  # committed all the same
        assert [e.move for e in hive.history(number) if e.move] == [1]
        [failure] = hive.notify_failures
    assert isinstance(failure, PluginError)
    assert failure.plugin == "hivelite_notify"
    assert failure.hook == "hivelite_on_transition"
    assert "exited with status 3" in failure.message
    assert sys.executable in failure.message  # names the command
    assert "boom: no display" in failure.message  # and its stderr's tail
    assert "exited with status 3" in caplog.text
    assert [e["move"] for e in events(tmp_path / "events.jsonl")] == [1]  # the file still got it


def test_a_command_that_hangs_is_killed_after_the_timeout(
        tmp_path: Path, clock: ManualClock) -> None:
    command = pycommand("import time; time.sleep(60)")
    settings = f"[notify]\ncommand = {toml_list(command)}\ntimeout = 0.5\n"
    with open_hive(tmp_path, settings, clock) as hive:
        began = time.monotonic()
        number = handoff(hive)
        elapsed = time.monotonic() - began
        assert hive.get(number).task.state is State.routed
        assert [e.move for e in hive.history(number) if e.move] == [1]
        [failure] = hive.notify_failures
    assert elapsed < 10
    assert "timed out after 0.5 s" in failure.message


def test_every_failing_target_is_named(tmp_path: Path, clock: ManualClock) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    settings = (f'[notify]\nfile = "logs/events.jsonl"\n'
                f'command = {toml_list(pycommand("raise SystemExit(4)"))}\n')
    with open_hive(tmp_path, settings, clock) as hive:
        folder.rmdir()  # the folder went away after the store opened
        handoff(hive)
        [failure] = hive.notify_failures
    assert "cannot append to" in failure.message
    assert "exited with status 4" in failure.message


# -- settings -----------------------------------------------------------------


@pytest.mark.parametrize(("settings", "fragment"), [
    ('[notify]\nfiles = "e.jsonl"\n', "unknown key(s) 'files'"),
    ("[notify]\nfile = 3\n", "file must be a non-empty path string"),
    ('[notify]\nfile = ""\n', "file must be a non-empty path string"),
    ('[notify]\nfile = "."\n', "is a directory"),
    ('[notify]\nfile = "missing/e.jsonl"\n', "its folder does not exist"),
    ('[notify]\ncommand = "notify-send hivelite"\n', "command must be a list of strings"),
    ("[notify]\ncommand = [1]\n", "command must be a list of strings"),
    ("[notify]\ncommand = []\n", "command is empty"),
    ("[notify]\ncommand = ['true']\ntimeout = 0\n", "timeout must be a positive number"),
    ("[notify]\ncommand = ['true']\ntimeout = -1.5\n", "timeout must be a positive number"),
    ("[notify]\ncommand = ['true']\ntimeout = '10'\n", "timeout must be a positive number"),
    ("[notify]\ncommand = ['true']\ntimeout = true\n", "timeout must be a positive number"),
    ("notify = 3\n", "must be a table"),
])
def test_malformed_settings_refuse_to_open(tmp_path: Path, clock: ManualClock, settings: str,
                                           fragment: str) -> None:
    with pytest.raises(PluginError) as caught:
        open_hive(tmp_path, settings, clock)
    assert caught.value.plugin == "hivelite_notify"
    assert caught.value.hook == "hivelite_startup"
    assert fragment in caught.value.message
    if "table" not in fragment:
        assert str(tmp_path / "hivelite.toml") in caught.value.message  # names the file


@pytest.mark.parametrize(("name", "value", "fragment"), [
    ("HIVELITE_NOTIFY_COMMAND", "  ", "$HIVELITE_NOTIFY_COMMAND is set but empty"),
    ("HIVELITE_NOTIFY_COMMAND", "notify-send 'hivelite", "$HIVELITE_NOTIFY_COMMAND: cannot"),
    ("HIVELITE_NOTIFY_FILE", "", "$HIVELITE_NOTIFY_FILE is set but empty"),
])
def test_malformed_environment_refuses_to_open(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, name: str,
        value: str, fragment: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(PluginError, match="hivelite_notify") as caught:
        open_hive(tmp_path, None, clock)
    assert fragment in caught.value.message


def test_the_environment_beats_the_settings_file(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.txt"
    env_command = pycommand(f"import sys; open({str(out)!r},'a').write(sys.stdin.read())")
    monkeypatch.setenv("HIVELITE_NOTIFY_FILE", "from-env.jsonl")  # relative: beside the store
    monkeypatch.setenv("HIVELITE_NOTIFY_COMMAND", shlex.join(env_command))
    settings = (f'[notify]\nfile = "from-toml.jsonl"\n'
                f'command = {toml_list(pycommand("raise SystemExit(9)"))}\n')
    with open_hive(tmp_path, settings, clock) as hive:
        handoff(hive)
        assert list(hive.notify_failures) == []  # the settings file's failing command never ran
    assert not (tmp_path / "from-toml.jsonl").exists()
    assert [e["move"] for e in events(tmp_path / "from-env.jsonl")] == [1]
    assert json.loads(out.read_text(encoding="utf-8"))["move"] == 1


def test_settings_are_kept_per_store(tmp_path: Path, clock: ManualClock) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    with open_hive(one, '[notify]\nfile = "events.jsonl"\n', clock) as first, \
            open_hive(two, None, clock) as second:
        handoff(second)
        handoff(first)
    assert len(events(one / "events.jsonl")) == 1
    assert not (two / "events.jsonl").exists()


# -- end to end through the CLI ------------------------------------------------


def run(db: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HIVELITE), "--db", str(db), *args], capture_output=True,
                          text=True, env=env, timeout=HANG_S, check=False)


@pytest.fixture
def cli_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HIVELITE_") and k != "PYTHONPATH"}
    env.update(HIVELITE_NOW=START)  # no HIVELITE_LOAD_PLUGINS: the store's enabling decides
    yield env


def set_enabled(db: Path, verb: str, env: dict[str, str]) -> list[str]:
    """``hivelite policy enable|disable notify`` as the owner: the store's enabled plugins."""
    done = run(db, "--json", "policy", verb, "notify", env=env)
    assert done.returncode == 0, done.stderr
    enabled: list[str] = json.loads(done.stdout)["enabled_plugins"]
    return enabled


def init_and_enable(db: Path, env: dict[str, str]) -> None:
    """What the owner does to have the installed plugin act on a new store."""
    done = run(db, "init", "--owner", "ana", env=env)
    assert done.returncode == 0, done.stderr
    assert "notify" in set_enabled(db, "enable", env)


def notify_row(db: Path, env: dict[str, str]) -> dict[str, Any]:
    """The plugin's row in ``hivelite plugins``."""
    listed = run(db, "--json", "plugins", env=env)
    assert listed.returncode == 0, listed.stderr
    [row] = [r for r in json.loads(listed.stdout) if r["name"] == "notify"]
    assert row["source"] == "entry point (hivelite-notify)"
    return row


HANDOFF = ("--json", "handoff", "--requester", "ana/planner", "--assignee", "ana/coder",
           "--project", "demo", "--task", "Write the parser", "--type", "code",
           "--accept", "tests pass")


def test_cli_handoff_appends_a_line_with_the_entry_point_plugin(
        tmp_path: Path, cli_env: dict[str, str]) -> None:
    db = tmp_path / "store.db"
    row = notify_row(db, cli_env)  # installed; no store enabled it
    assert (row["status"], row["enabled"], row["hooks"]) == ("not_enabled", False, [])

    init_and_enable(db, cli_env)
    row = notify_row(db, cli_env)
    assert (row["enabled"], row["loaded"]) == (True, True)  # status: not_policy
    assert row["hooks"] == ["hivelite_on_transition", "hivelite_startup"]
    (tmp_path / "hivelite.toml").write_text('[notify]\nfile = "events.jsonl"\n')
    done = run(db, *HANDOFF, env=cli_env)
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    [event] = events(tmp_path / "events.jsonl")
    assert event["task"] == view["task"]["id"]
    assert event["task_object"] == view["task"]  # the task object as the CLI shows it
    assert schema_errors(event["task_object"]) == []
    assert (event["number"], event["move"], event["at"]) == (view["number"], 1, START)
    assert event["store"] == str(db)


def test_cli_warns_but_succeeds_when_the_command_fails_or_hangs(
        tmp_path: Path, cli_env: dict[str, str]) -> None:
    db = tmp_path / "store.db"
    init_and_enable(db, cli_env)
    failing = {**cli_env, "HIVELITE_NOTIFY_COMMAND": shlex.join(pycommand(
        "import sys; print('noise on stdout'); sys.stderr.write('boom'); sys.exit(3)"))}
    done = run(db, *HANDOFF, env=failing)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["task"]["state"] == "routed"  # stdout: one JSON document
    assert done.stderr.startswith("warning: ")
    assert "plugin 'notify'" in done.stderr and "exited with status 3" in done.stderr
    assert "boom" in done.stderr

    (tmp_path / "hivelite.toml").write_text("[notify]\ntimeout = 0.3\n")
    hanging = {**cli_env,
               "HIVELITE_NOTIFY_COMMAND": shlex.join(pycommand("import time; time.sleep(60)"))}
    done = run(db, *HANDOFF, env=hanging)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("warning: ") and "timed out after 0.3 s" in done.stderr

    with Hive.open(db, plugins=[]) as hive:  # both moves are in the store
        assert [e.move for e in hive.journal() if e.move] == [1, 1]
        assert [v.task.state for v in hive.list().items] == [State.routed, State.routed]


def test_cli_refuses_to_open_with_malformed_settings(
        tmp_path: Path, cli_env: dict[str, str]) -> None:
    db = tmp_path / "store.db"
    init_and_enable(db, cli_env)
    (tmp_path / "hivelite.toml").write_text("[notify]\ncommand = []\n")
    done = run(db, *HANDOFF, env=cli_env)
    assert done.returncode == 1
    assert "plugin 'notify', hook hivelite_startup" in done.stderr
    assert "command is empty" in done.stderr
    with Hive.open(db, plugins=[]) as hive:  # refused before it wrote anything
        assert hive.list().items == []


def test_cli_installed_is_not_enabled_until_the_owner_enables_it(
        tmp_path: Path, cli_env: dict[str, str]) -> None:
    """Installing enables the plugin nowhere: with ``[notify] file`` set, a handoff appends
    no line until the owner runs ``policy enable notify`` on this store, one line per move
    from then on, and none again once ``policy disable notify`` ran."""
    db = tmp_path / "store.db"
    path = tmp_path / "events.jsonl"
    (tmp_path / "hivelite.toml").write_text('[notify]\nfile = "events.jsonl"\n')
    assert run(db, "init", "--owner", "ana", env=cli_env).returncode == 0
    done = run(db, *HANDOFF, env=cli_env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert not path.exists()  # installed, not enabled: nothing sent
    info = json.loads(run(db, "--json", "info", env=cli_env).stdout)
    assert "notify" in info["installed_not_enabled"]
    assert "notify" not in info["enabled_plugins"]
    assert notify_row(db, cli_env)["status"] == "not_enabled"

    assert "notify" in set_enabled(db, "enable", cli_env)
    done = run(db, *HANDOFF, env=cli_env)
    assert done.returncode == 0, done.stderr
    [event] = events(path)
    assert (event["number"], event["move"]) == (json.loads(done.stdout)["number"], 1)

    assert "notify" not in set_enabled(db, "disable", cli_env)
    assert notify_row(db, cli_env)["status"] == "not_enabled"
    done = run(db, *HANDOFF, env=cli_env)
    assert done.returncode == 0, done.stderr
    assert len(events(path)) == 1  # disabled: no line for the third handoff
    with Hive.open(db, plugins=[]) as hive:
        assert len(hive.list().items) == 3
