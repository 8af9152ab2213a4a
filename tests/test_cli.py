"""The ``hivelite`` command line, in-process: every verb, human and ``--json`` output, exit codes.

DESIGN §7 (``error: <code>/<reason>: <message>`` on stderr, one exit code per
error class), §8 (``HIVELITE_NOW``, text limits), §11 (verbs, ``$HIVELITE_DB``,
``--json`` prints exactly one JSON document). ``hivelite.faces.cli.main.main`` is called
directly, so its error -> exit code mapping runs; a refused call must leave every
row of the store as it was (``rawsql.snapshot``). Who acts: an agent's verb names its
agent and instance (``--agent``/``--instance`` or ``$HIVELITE_AGENT``/``$HIVELITE_INSTANCE``);
the owner's verbs act as the store's owner, for the store file's owner only, and refuse a
named agent. Real processes are in ``test_cli_e2e.py``.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import stat
import sys
import traceback
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from hivelite import Hive, ManualClock
from hivelite.faces.cli.main import cli, main
from hivelite.faces.render import WAITING_WORDS

from . import rawsql
from .conftest import CODER as CODER_AGENT
from .conftest import PLANNER as PLANNER_AGENT
from .conftest import START, at, held_task, own_task
from .test_discovery import write_distribution

ENV = ("HIVELITE_DB", "HIVELITE_NOW", "HIVELITE_OWNER", "HIVELITE_AGENT", "HIVELITE_INSTANCE",
       "HIVELITE_URL", "HIVELITE_TOKEN",
       "HIVELITE_SESSION", "HIVELITE_PLUGINS_DIR", "HIVELITE_LOAD_PLUGINS",
       "HIVELITE_TRACE_PLUGINS")
EXIT = {"usage": 2, "invalid_state": 3, "forbidden_right": 4, "not_found": 5,
        "invalid_input": 6, "rate_limited": 7, "plugin_error": 1}
OWN = ("--requester", "ana/planner", "--assignee", "ana/coder", "--project", "site")
GUEST = ("--requester", "guest/scout", "--assignee", "ana/coder", "--project", "site")
TASK = ("--task", "Fix the login bug", "--type", "code", "--accept", "tests pass")
CODER = ("--agent", "ana/coder", "--instance", "laptop")
PLANNER = ("--agent", "ana/planner", "--instance", "desktop")
PR = "pull_request:the PR:https://example.com/pr/7"


snapshot = rawsql.snapshot_file
WALK_MODULE = "hl_walk_plugin"


def installed_names() -> list[str]:
    """The plugins installed in this Python (``hivelite plugins`` lists them, each
    ``not_enabled`` until a store's owner enables it there)."""
    from importlib.metadata import entry_points

    return sorted(e.name for e in entry_points(group="hivelite"))


@dataclass
class Ran:
    """One ``hivelite`` call: its exit code and what it printed."""

    code: int
    out: str
    err: str

    def doc(self) -> Any:
        """stdout as exactly one JSON document (``json.loads`` refuses anything after it)."""
        return json.loads(self.out)

    def error(self) -> dict[str, Any]:
        doc = self.doc()
        assert isinstance(doc, dict) and set(doc) == {"error"}, self.out
        error: dict[str, Any] = doc["error"]
        return error


class Runner:
    """Calls ``hivelite.faces.cli.main.main`` with ``--db`` and ``$HIVELITE_NOW`` set;
    catches its exit."""

    def __init__(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                 db: Path) -> None:
        self.capsys = capsys
        self.monkeypatch = monkeypatch
        self.db = db

    def __call__(self, *args: str, as_json: bool = False, t: float | str = 0.0,
                 stdin: str | None = None, db: Path | None = None,
                 group: tuple[str, ...] = ()) -> Ran:
        argv = ["--db", str(db or self.db), *group, *(["--json"] if as_json else []), *args]
        self.monkeypatch.setenv("HIVELITE_NOW", t if isinstance(t, str) else at(t))
        if stdin is not None:
            self.monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        # main gives the hivelite logger a handler on the stderr of its first call; pytest
        # swaps the captured stderr between phases, so each call starts without one.
        self.monkeypatch.setattr(logging.getLogger("hivelite"), "handlers", [])
        self.capsys.readouterr()
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except Exception:  # what the interpreter would do with it: a traceback, exit 1
            print(traceback.format_exc(), end="", file=sys.stderr)
            code = 1
        out, err = self.capsys.readouterr()
        return Ran(code, out, err)

    def ok(self, *args: str, **kwargs: Any) -> Ran:
        ran = self(*args, **kwargs)
        assert ran.code == 0, (args, ran.err)
        return ran


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No developer settings leak in, and a default ``./hivelite.db`` lands in tmp."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        db_path: Path) -> Runner:
    return Runner(capsys, monkeypatch, db_path)


@pytest.fixture
def store(run: Runner) -> Path:
    """An empty store owned by ana, made by ``hivelite init``."""
    run.ok("init", "--owner", "ana")
    return run.db


# -- reading human and JSON output alike ------------------------------------------------------

def task_state(ran: Ran, as_json: bool) -> str:
    """The task's state as ``show`` words it (``waiting: owner``), from a task view in
    either form."""
    if as_json:
        task = ran.doc()["task"]
        return (f"{task['state']}: {WAITING_WORDS[task['waiting_on']]}" if task["waiting_on"]
                else task["state"])
    match = re.search(r"^  state      (\S+(?: (?:owner|human|agent))?)", ran.out, re.M)
    assert match, ran.out
    return match.group(1)


def task_ref(ran: Ran, as_json: bool) -> tuple[int, str]:
    """(number, id) of a task view in either form."""
    if as_json:
        doc = ran.doc()
        return doc["number"], doc["task"]["id"]
    match = re.match(r"task (\d+)  (\S+)\n", ran.out)
    assert match, ran.out
    return int(match.group(1)), match.group(2)


def lease_of(ran: Ran, as_json: bool) -> tuple[str, int, str]:
    """(lease_id, fencing_token, expires_at) of a claim, resume or renewal in either form."""
    if as_json:
        doc = ran.doc()
        return doc["lease_id"], doc["fencing_token"], doc["expires_at"]
    found = dict(re.findall(r"^  (lease_id|fencing_token|expires_at) +(\S+)", ran.out, re.M))
    return found["lease_id"], int(found["fencing_token"]), found["expires_at"]


# -- every verb, human and JSON ----------------------------------------------------------------

@pytest.mark.parametrize("as_json", [False, True], ids=["human", "json"])
def test_every_verb_along_the_protocol(run: Runner, db_path: Path, tmp_path: Path,
                                       as_json: bool) -> None:
    """One store through every verb; each call exits 0 and prints what it should (with
    ``--json``: exactly one JSON document and nothing on stderr)."""
    used: set[str] = set()

    def ok(*args: str, t: float) -> Ran:
        ran = run.ok(*args, as_json=as_json, t=t)
        assert ran.err == "", ran.err
        if as_json:
            ran.doc()
        used.add(args[0])
        return ran

    def state(*args: str, t: float) -> str:
        return task_state(ok(*args, t=t), as_json)

    def lease(*args: str, t: float) -> tuple[str, int, str]:
        return lease_of(ok(*args, t=t), as_json)

    ran = ok("init", "--owner", "ana", t=0)
    if as_json:
        assert ran.doc() == {"db": os.path.abspath(db_path), "owner": "ana",
                             "schema_version": ran.doc()["schema_version"]}
    else:
        assert ran.out == f"store {os.path.abspath(db_path)} ready (owner ana)\n"

    first = ok("handoff", *OWN, *TASK, "--label", "auth", "--priority", "high", t=0)
    number, task_id = task_ref(first, as_json)
    assert number == 1
    assert task_state(first, as_json) == "routed"
    if as_json:
        doc = first.doc()
        assert doc["task"]["packet"]["task"] == "Fix the login bug"
        assert doc["task"]["packet"]["acceptance_criteria"] == ["tests pass"]
        assert (doc["priority"], doc["labels"], doc["lifecycle"]) == ("high", ["auth"], "queued")
    else:
        assert "  task       Fix the login bug  [code]" in first.out
        assert "  accept     - tests pass" in first.out
    assert state("handoff", *GUEST, *TASK, t=0) == "waiting: owner"
    assert state("handoff", *GUEST, *TASK, t=0) == "waiting: owner"
    assert state("approve", "2", "--reason", "fine by me", t=1) == "routed"
    assert state("deny", "3", "--reason", "not now", t=1) == "rejected"
    changed = ok("fields", "2", "--label", "web", "--base-version", "1", t=1)
    if as_json:
        assert (changed.doc()["labels"], changed.doc()["fields_version"]) == (["web"], 2)
    else:
        assert "labels web   fields v2" in changed.out

    listed = ok("list", t=1)
    if as_json:
        page = listed.doc()
        assert [(i["number"], i["task"]["state"]) for i in page["items"]] == [
            (1, "routed"), (2, "routed"), (3, "rejected")]
        assert page["next_cursor"] is None
    else:
        lines = listed.out.splitlines()
        assert lines[0].split() == ["#", "STATE", "ASSIGNEE", "PROJECT", "PRIORITY", "UPDATED",
                                    "TASK"]
        assert [line.split()[:2] for line in lines[1:]] == [
            ["1", "routed"], ["2", "routed"], ["3", "rejected"]]
    assert task_ref(ok("show", task_id, t=1), as_json) == (1, task_id)
    assert state("show", "1", t=1) == "routed"
    journal = ok("history", "1", t=1)
    if as_json:
        # The owner handed it off (no agent named): the creation row is hers.
        assert [(r["from_state"], r["to_state"], r["actor"]) for r in journal.doc()] == [
            (None, "requested", "ana"), ("requested", "routed", "gate")]
    else:
        assert "requested -> routed" in journal.out
    awaited = ok("await", "1", "--until", "outcome", t=1)
    if as_json:
        assert (awaited.doc()["settled"], awaited.doc()["status"]) == (
            False, "routed to ana/coder, not claimed yet")
    else:
        assert awaited.out.startswith("task 1 (") and "not settled yet" in awaited.out

    # Claim, renew, checkpoint, update, pause, resume, release.
    lease_id, token, expires = lease("claim", "1", *CODER, "--session", "s1", t=2)
    assert (token, expires) == (1, at(12))
    assert lease("renew", "1", "--lease", lease_id, "--token", "1", "--minutes", "15", *CODER,
                 t=3) == (lease_id, 1, at(18))
    fence = ("--lease", lease_id, "--token", str(token), *CODER)
    point = ok("checkpoint", "1", *fence, "--progress", "parser drafted", "--next", "tests", t=4)
    assert task_state(point, as_json) == "working"
    if as_json:
        assert point.doc()["task"]["latest_checkpoint"]["progress"] == "parser drafted"
        assert point.doc()["claim"]["holder"] == "ana/coder"
    else:
        assert "  checkpoint parser drafted" in point.out
    news = ok("update", "1", *fence, "--summary", "tests green", "--tokens", "100",
              "--usd-micros", "5", t=5)
    if as_json:
        assert news.doc()["updates"][0]["summary"] == "tests green"
        assert news.doc()["usage"] == {"tokens": 100, "usd_micros": 5}
    assert state("pause", "1", *fence, "--on", "human", "--reason", "which API?",
                 t=6) == "waiting: human"
    answered = ok("answer", "1", "--text", "the v2 one", t=6)  # as the owner
    assert task_state(answered, as_json) == "waiting: human"
    if as_json:
        assert answered.doc()["question"]["answers"][0] == {"text": "the v2 one", "by": "ana",
                                                            "at": at(6)}
    else:
        assert "  state      waiting: human, answered  (which API?)" in answered.out
        assert "  answer     the v2 one (ana, " in answered.out
    resumed = ok("resume", "1", *CODER, t=7)
    if as_json:
        assert resumed.doc()["question"]["answers"][0]["text"] == "the v2 one"
    else:
        assert "  answer         the v2 one (ana)" in resumed.out
    lease_id, token, _ = lease_of(resumed, as_json)
    assert token == 2
    fence = ("--lease", lease_id, "--token", str(token), *CODER)
    assert state("release", "1", *fence, "--reason", "blocked", t=8) == "routed"

    # Submit with evidence; a rejecting verdict, a decline, an amend, a sign-off, a merge.
    # (next takes task 1 before task 2: high before normal.)
    took = ok("next", *CODER, t=9)
    lease_id, token, _ = lease_of(took, as_json)
    if as_json:  # the claim and the task it took
        assert (took.doc()["task"]["number"], took.doc()["task"]["task"]["state"]) == (
            1, "accepted")
    else:
        assert "  state      accepted  (claimed)" in took.out  # the task block
    assert state("show", "1", t=9) == "accepted"
    fence = ("--lease", lease_id, "--token", str(token), *CODER)
    result = ok("submit", "1", *fence, "--summary", "Parser written",
                "--evidence", "test_output:42 passed", "--evidence", PR, t=10)
    assert task_state(result, as_json) == "approval"
    if as_json:
        doc = result.doc()
        assert doc["task"]["result"]["evidence"] == [
            {"kind": "test_output", "summary": "42 passed"},
            {"kind": "pull_request", "summary": "the PR", "url": "https://example.com/pr/7"}]
        assert (doc["threshold"], doc["outcome"], doc["claim"]) == (1, "completed", None)
    else:
        assert "    evidence pull_request: the PR <https://example.com/pr/7>" in result.out
    assert state("verify", "1", "--reject", "--reason", "misses a case", *PLANNER,
                 t=11) == "routed"
    lease_id, token, _ = lease("claim", "1", *CODER, t=12)
    evidence_file = tmp_path / "evidence.json"
    evidence_file.write_text(json.dumps([{"kind": "note", "summary": "covered the case"}]))
    assert state("submit", "1", "--lease", lease_id, "--token", str(token), *CODER,
                 "--summary", "Parser written", "--evidence-file", str(evidence_file),
                 t=13) == "approval"
    assert state("decline", "1", "--reason", "missing tests", t=14) == "routed"
    lease_id, token, _ = lease("claim", "1", *CODER, t=15)
    assert state("submit", "1", "--lease", lease_id, "--token", str(token), *CODER,
                 "--summary", "Parser written", "--evidence", "test_output:43 passed",
                 t=16) == "approval"
    amended = ok("amend", "1", *CODER, "--summary", "Parser and tests", t=17)
    if as_json:
        assert amended.doc()["task"]["result"]["summary"] == "Parser and tests"
    else:
        assert "  result     Parser and tests (by ana/coder)" in amended.out
    assert state("sign-off", "1", "--reason", "good", t=18) == "completed"
    merged = ok("amend", "1", "--merge-commit", "3f2a9c1", t=19)
    if as_json:
        assert merged.doc()["merge"] == {"commit": "3f2a9c1", "by": "ana", "evidence": {
            "kind": "commit", "summary": "merged as 3f2a9c1",
            "content": "3f2a9c1"}}

    # A failed attempt, then the owner cancels.
    lease_id, token, _ = lease("claim", "2", *CODER, t=20)
    failed = ok("submit", "2", "--lease", lease_id, "--token", str(token), *CODER,
                "--summary", "The site is down", "--evidence", "note:HTTP 503", "--outcome",
                "failed", t=21)
    assert task_state(failed, as_json) == "routed"
    if as_json:
        assert (failed.doc()["outcome"], failed.doc()["lifecycle"]) == ("failed", "queued")
    expired = ok("expire", t=22)
    assert (expired.doc() == []) if as_json else (expired.out == "no expired claims\n")

    # The owner's controls, budgets and policy (task 2 is routed again).
    lease_id, token, _ = lease("claim", "2", *CODER, t=22)
    held = ok("hold", "--agent", "ana/coder", "--reason", "lunch", t=22)
    assert (held.doc()["ended"] == [2]) if as_json else ("task(s) 2" in held.out)
    assert state("show", "2", t=22) == ("routed" if as_json else "routed,")
    refused = run("claim", "2", *CODER, as_json=as_json, t=22)
    assert (refused.code, "forbidden_right/held" in refused.err) == (4, True)
    live = ok("controls", t=22)
    assert (len(live.doc()) == 1) if as_json else ("1: ana/coder held by ana" in live.out)
    ok("lift", "--agent", "ana/coder", t=22)
    ok("veto", "2", "--agent", "ana/coder", "--reason", "not this one", t=22)
    ok("stop", "--all", t=22)
    ok("lift", "--all", t=22)
    ok("lift", "--agent", "ana/coder", "--task", "2", t=22)
    ok("budget", "set", "--agent", "ana/coder", "--tasks", "5", "--usd", "2.50", t=22)
    shown = ok("budget", "show", t=22)
    if as_json:
        assert [(b["agent"], b["used_tasks"], b["usd_micros"]) for b in shown.doc()] == [
            ("ana/coder", 6, 2_500_000)]  # six claims this day
    ok("budget", "clear", "--agent", "ana/coder", t=22)
    enrolled = ok("enrol", "set", "--agent", "ana/helper", "--project", "demo", "--role",
                  "writer", "--tasks", "9", t=22)
    if as_json:
        assert (enrolled.doc()["projects"], enrolled.doc()["budget"]["tasks"]) == (["demo"], 9)
    else:
        assert "ana/helper  demo" in enrolled.out
    ok("enrol", "show", t=22)
    ok("enrol", "end", "--agent", "ana/helper", t=22)
    added = ok("signer", "add", "ci", t=22)
    listed = ok("signer", "list", t=22)
    if as_json:
        assert [s["name"] for s in listed.doc()] == ["ci"] and len(added.doc()["secret"]) == 64
    else:
        assert listed.out.startswith("ci  key ")
    ok("signer", "remove", "ci", t=22)
    ok("policy", "set", "threshold", "2", "--project", "web", t=22)
    policy = ok("policy", "show", t=22)
    if as_json:
        assert policy.doc()["project_thresholds"] == {"web": 2}
    ok("policy", "unset", "threshold", "--project", "web", t=22)
    # an installed plugin acts on the store once the owner enables it there
    site = tmp_path / f"site-{as_json}"
    write_distribution(site, "hl-walk-plugin", WALK_MODULE, {"walk": WALK_MODULE},
                       "import hivelite\n\n\n@hivelite.hookimpl\n"
                       "def hivelite_on_transition(task, move):\n    return None\n")
    run.monkeypatch.syspath_prepend(str(site))
    enabled = ok("policy", "enable", "walk", t=22)
    if as_json:
        assert enabled.doc()["enabled_plugins"] == ["walk"]
    else:
        assert "enabled     walk" in enabled.out
    disabled = ok("policy", "disable", "walk", t=22)  # this open loaded it; the next will not
    if as_json:
        assert disabled.doc()["enabled_plugins"] == []
    else:
        assert "enabled     no installed plugin" in disabled.out
    sys.modules.pop(WALK_MODULE, None)
    issued = ok("token", "add", "ana/coder", "--instance", "laptop", t=22)
    ok("token", "list", t=22)
    token_id = issued.doc()["id"] if as_json else re.findall(r"\(token (\w+) for", issued.out)[0]
    ok("token", "revoke", token_id, t=22)
    about = ok("info", t=22)
    if as_json:
        assert (about.doc()["owner"], about.doc()["live_tokens"]) == ("ana", 0)
    assert state("cancel", "2", "--reason", "no longer needed", t=23) == "cancelled"

    # Care of the store: doctor, a backup, an export and its import into a new store.
    checked = ok("doctor", t=24)
    assert checked.doc()["ok"] if as_json else "FAIL" not in checked.out
    ok("backup", str(tmp_path / f"backup-{as_json}.db"), t=24)
    assert run.ok("doctor", db=tmp_path / f"backup-{as_json}.db").code == 0
    ok("export", "--out", str(tmp_path / f"export-{as_json}.jsonl"), t=24)
    copy = tmp_path / f"copy-{as_json}.db"
    imported = run.ok("import", str(tmp_path / f"export-{as_json}.jsonl"), db=copy,
                      as_json=as_json)
    assert imported.doc()["doctor"] if as_json else "doctor: ok" in imported.out
    used.add("import")
    assert run.ok("export", db=copy).out == run.ok("export").out

    # The store-free verbs and the demo.
    artifact = tmp_path / f"artifact-{as_json}.txt"
    artifact.write_text("14 passed\n")
    made = json.loads(ok("receipt", str(artifact), t=24).out)
    assert made == {"digest": "sha256:" + hashlib.sha256(b"14 passed\n").hexdigest()}
    moves = ok("states", t=24)
    if as_json:
        assert len(moves.doc()["states"]) == 10
    else:
        assert "| 1 | `route` | requested → routed |" in moves.out
    shipped = resources.files("hivelite").joinpath("data/task.schema.json").read_text()
    assert json.loads(ok("schema", t=24).out) == json.loads(shipped)
    loaded = ok("plugins", t=24)
    if as_json:  # the built-ins, and every plugin installed here, none enabled on the store
        assert [(p["name"], p["essential"], p["status"]) for p in loaded.doc()
                if p["loaded"]] == [("hivelite.default_gate", True, "built_in"),
                                    ("hivelite.default_threshold", True, "built_in")]
        assert sorted((p["name"], p["enabled"], p["status"]) for p in loaded.doc()
                      if not p["loaded"]) == [(name, False, "not_enabled")
                                              for name in installed_names()]
    else:
        assert re.search(r"^hivelite\.default_gate +built-in +permission_gate +- +no"
                         r" +built_in$", loaded.out, re.M), loaded.out
        assert re.search(r"^walk +entry point \(hl-walk-plugin\) +no +no +not_enabled \(.*"
                         r"hivelite policy enable walk\)$", loaded.out, re.M), loaded.out
    story = ok("demo", t=24)
    if as_json:
        assert {s["number"] for s in story.doc()} == {4, 5, 6}
    else:
        assert "hivelite demo on" in story.out
    if as_json:  # a shell script, not JSON, either way
        used.add("completion")
    else:
        assert "_HIVELITE_COMPLETE" in ok("completion", "bash", t=24).out
    used |= {"serve", "mcp"}  # they serve until stopped: test_serve.py, test_mcp.py run them
    used.add("witness")  # another key holder's, with a keys folder of its own: test_witness.py
    assert used == set(cli.commands), "a verb is missing from this walk"


# -- help, version, store file ----------------------------------------------------------------

@pytest.mark.parametrize("verb", sorted(cli.commands))
def test_every_verb_has_help_with_an_example(run: Runner, verb: str) -> None:
    ran = run.ok(verb, "--help")
    assert ran.out.startswith(f"Usage: hivelite {verb} ")
    assert "Example:" in ran.out
    assert not run.db.exists()


def test_group_help_lists_every_verb_and_version(run: Runner) -> None:
    ran = run.ok("--help")
    assert all(f"  {verb} " in ran.out for verb in cli.commands)
    assert re.fullmatch(r"hivelite, version \S+\n", run.ok("--version").out)


def test_init_creates_a_private_store_and_keeps_its_owner(run: Runner) -> None:
    run.ok("init", "--owner", "ana")
    assert stat.S_IMODE(run.db.stat().st_mode) == 0o600
    assert run.ok("--json", "init").doc()["owner"] == "ana"
    assert run.ok("--json", "init", "--owner", "ana").doc()["owner"] == "ana"
    other = run("init", "--owner", "bob")
    assert other.code == 6
    assert other.err.startswith("error: invalid_input/owner_mismatch: ")


def test_init_refuses_a_bad_owner_without_creating_a_file(run: Runner, tmp_path: Path) -> None:
    ran = run("init", "--owner", "Ana Smith", as_json=True)
    assert ran.code == 6
    assert ran.error()["reason"] == "invalid_owner"
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_is_not_a_store_is_refused_and_left_alone(run: Runner) -> None:
    run.db.write_bytes(b"my notes, not a database\n" * 10)
    for verb in (("init", "--owner", "ana"), ("list",), ("demo",)):
        ran = run(*verb, as_json=True)
        assert ran.code == 6, ran
        assert ran.error()["reason"] == "not_a_store"
    assert run.db.read_bytes() == b"my notes, not a database\n" * 10


def test_the_default_store_is_hivelite_db_in_the_current_folder(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.setenv("HIVELITE_NOW", START)
    main(["init", "--owner", "ana"])
    assert (tmp_path / "hivelite.db").is_file()
    assert "hivelite.db ready (owner ana)" in capsys.readouterr().out


def test_hivelite_db_is_honoured_and_db_overrides_it(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    env_db = tmp_path / "from-env.db"
    monkeypatch.setenv("HIVELITE_DB", str(env_db))
    monkeypatch.setenv("HIVELITE_NOW", START)
    main(["--json", "init", "--owner", "ana"])
    assert json.loads(capsys.readouterr().out)["db"] == str(env_db)
    main(["handoff", *OWN, *TASK])
    main(["--json", "list"])
    capsys.readouterr()
    main(["--json", "show", "1"])
    assert json.loads(capsys.readouterr().out)["number"] == 1
    with pytest.raises(SystemExit) as exit_info:
        main(["--db", str(tmp_path / "other.db"), "list"])
    assert exit_info.value.code == 6
    assert not (tmp_path / "other.db").exists()
    assert not (tmp_path / "hivelite.db").exists()


# Every verb that opens a store, with arguments it would otherwise accept.
STORE_VERBS: dict[str, tuple[str, ...]] = {
    "handoff": (*OWN, *TASK),
    "list": (),
    "show": ("1",),
    "approve": ("1",),
    "deny": ("1",),
    "cancel": ("1",),
    "history": ("1",),
    "await": ("1",),
    "doctor": (),
    "backup": ("elsewhere.db",),
    "export": (),
    "claim": ("1", *CODER),
    "resume": ("1", *CODER),
    "renew": ("1", "--lease", "L1", "--token", "1", *CODER),
    "release": ("1",),
    "checkpoint": ("1", "--lease", "L1", "--token", "1", *CODER, "--progress",
                   "parser drafted"),
    "update": ("1", "--lease", "L1", "--token", "1", *CODER, "--summary", "tests green"),
    "pause": ("1", "--lease", "L1", "--token", "1", *CODER, "--on", "human", "--reason",
              "which?"),
    "submit": ("1", "--lease", "L1", "--token", "1", *CODER, "--summary", "done",
               "--evidence", "note:done"),
    "verify": ("1", "--accept", *PLANNER),
    "sign-off": ("1",),
    "answer": ("1", "--text", "the v2 one"),
    "decline": ("1", "--reason", "missing tests"),
    "amend": ("1", "--summary", "better"),
    "expire": (),
    "next": CODER,
    "fields": ("1", "--priority", "low", "--base-version", "1"),
    "hold": ("--agent", "ana/coder"),
    "veto": ("1", "--agent", "ana/coder"),
    "stop": ("--all",),
    "lift": ("1",),
    "controls": (),
    "budget": ("show",),
    "enrol": ("show",),
    "signer": ("list",),
    "policy": ("show",),
    "token": ("list",),
    "info": (),
    "serve": ("--port", "0"),
    "mcp": ("--token", "hl_abc_def"),
}


def test_store_verbs_cover_every_verb_but_the_creators_and_the_store_free() -> None:
    assert set(STORE_VERBS) | {"init", "demo", "states", "schema", "plugins", "import",
                               "completion", "receipt", "witness"} == set(
        cli.commands)


@pytest.mark.parametrize("verb", sorted(STORE_VERBS))
def test_verbs_other_than_init_and_demo_never_create_a_store(run: Runner, tmp_path: Path,
                                                             verb: str) -> None:
    human = run(verb, *STORE_VERBS[verb])
    assert human.code == 6, human
    assert human.out == ""
    assert human.err.startswith("error: invalid_input/no_store: ")
    assert "hivelite --db" in human.err and " init" in human.err
    machine = run(verb, *STORE_VERBS[verb], as_json=True)
    assert machine.code == 6
    assert machine.error()["reason"] == "no_store"
    assert " init" in machine.error()["message"]
    assert list(tmp_path.iterdir()) == [], "no file may be created"


# -- refusals: exit code, message, and an unchanged store -------------------------------------

@dataclass
class World:
    """A store with a task in each interesting state, made through the Python API at START."""

    db: Path
    routed: int
    held: int
    claimed: int
    lease: str
    token: int
    approval: int
    completed: int

    def fill(self, args: tuple[str, ...]) -> list[str]:
        names = {k: str(v) for k, v in vars(self).items()}
        names["wrong_token"] = str(self.token + 1)
        return [a.format(**names) for a in args]


@pytest.fixture
def world(db_path: Path) -> World:
    clock = ManualClock(START)
    evidence = [{"kind": "note", "summary": "checked by hand"}]
    # The CLI opens the store by its file, so this fixture makes that file itself.
    with Hive.open(db_path, owner="ana", clock=clock) as hive:
        routed, held = own_task(hive), held_task(hive)
        claimed = own_task(hive)
        lease = hive.claim(CODER_AGENT, claimed)
        approval = own_task(hive)
        done = hive.claim(CODER_AGENT, approval)
        hive.submit(CODER_AGENT, approval, lease_id=done.lease_id, token=done.fencing_token,
                    summary="done", evidence=evidence)
        completed = own_task(hive)
        done = hive.claim(CODER_AGENT, completed)
        hive.submit(CODER_AGENT, completed, lease_id=done.lease_id, token=done.fencing_token,
                    summary="done", evidence=evidence)
        assert hive.verify(PLANNER_AGENT, completed).state.value == "completed"
    return World(db_path, routed, held, claimed, lease.lease_id, lease.fencing_token,
                 approval, completed)


@dataclass(frozen=True)
class Refusal:
    name: str
    args: tuple[str, ...]
    code: str
    reason: str
    needle: str = ""


FENCE = ("--lease", "{lease}", "--token", "{token}", *CODER)
REFUSALS = [
    # 2: usage
    Refusal("handoff-missing-requester", ("handoff", "--assignee", "ana/coder", "--project",
                                          "site", *TASK), "usage", "usage", "--requester"),
    Refusal("handoff-no-task", ("handoff", *OWN), "usage", "usage", "--task"),
    Refusal("handoff-bad-priority", ("handoff", *OWN, *TASK, "--priority", "asap"), "usage",
            "usage", "--priority"),
    Refusal("claim-missing-instance", ("claim", "{routed}", "--agent", "ana/coder"), "usage",
            "usage", "--instance"),
    Refusal("claim-minutes-not-int", ("claim", "{routed}", *CODER, "--minutes", "ten"),
            "usage", "usage", "--minutes"),
    Refusal("update-token-not-int", ("update", "{claimed}", "--lease", "{lease}", "--token",
                                     "x", *CODER, "--summary", "s"), "usage", "usage",
            "--token"),
    Refusal("release-lease-without-token", ("release", "{claimed}", "--lease", "{lease}",
                                            *CODER), "usage", "usage", "--token"),
    Refusal("pause-on-owner", ("pause", "{claimed}", *FENCE, "--on", "owner", "--reason", "x"),
            "usage", "usage", "--on"),
    Refusal("submit-malformed-evidence", ("submit", "{claimed}", *FENCE, "--summary", "done",
                                          "--evidence", "nocolon"), "usage", "usage",
            "KIND:SUMMARY"),
    Refusal("verify-no-verdict", ("verify", "{approval}", *PLANNER), "usage", "usage",
            "--accept"),
    Refusal("decline-missing-reason", ("decline", "{approval}"), "usage", "usage", "--reason"),
    Refusal("list-unknown-state", ("list", "--state", "done"), "usage", "usage", "--state"),
    Refusal("show-missing-ref", ("show",), "usage", "usage", "REF"),
    Refusal("unknown-verb", ("frobnicate",), "usage", "usage", "frobnicate"),
    # 3: invalid_state
    Refusal("claim-claimed", ("claim", "{claimed}", "--agent", "ana/coder", "--instance",
                              "desktop"), "invalid_state", "task_claimed"),
    Refusal("update-wrong-token", ("update", "{claimed}", "--lease", "{lease}", "--token",
                                   "{wrong_token}", *CODER, "--summary", "s"),
            "invalid_state", "stale_claim"),
    Refusal("update-wrong-lease", ("update", "{claimed}", "--lease", "Lnope", "--token",
                                   "{token}", *CODER, "--summary", "s"),
            "invalid_state", "stale_claim"),
    Refusal("resume-routed", ("resume", "{routed}", *CODER), "invalid_state", "task_not_open"),
    Refusal("approve-routed", ("approve", "{routed}"), "invalid_state", "not_awaiting_owner"),
    Refusal("verify-not-submitted", ("verify", "{routed}", "--accept", *PLANNER),
            "invalid_state", "not_submitted"),
    Refusal("verify-same-instance", ("verify", "{approval}", "--accept", "--agent",
                                     "ana/helper", "--instance", "laptop"),
            "invalid_state", "reviewer_not_independent"),
    Refusal("cancel-awaiting-decision", ("cancel", "{approval}"), "invalid_state",
            "not_cancellable"),
    Refusal("sign-off-completed", ("sign-off", "{completed}"), "invalid_state", "task_closed"),
    Refusal("amend-completed-summary", ("amend", "{completed}", "--summary", "better"),
            "invalid_state", "not_amendable"),
    # 4: forbidden_right
    Refusal("claim-not-assignee", ("claim", "{routed}", *PLANNER), "forbidden_right",
            "not_permitted", "ana/coder"),
    Refusal("update-not-holder", ("update", "{claimed}", "--lease", "{lease}", "--token",
                                  "{token}", *PLANNER, "--summary", "s"),
            "forbidden_right", "not_permitted"),
    Refusal("verify-self", ("verify", "{approval}", "--accept", "--agent", "ana/coder",
                            "--instance", "desktop"), "forbidden_right", "self_verify"),
    Refusal("amend-not-submitter", ("amend", "{approval}", *PLANNER, "--summary", "better"),
            "forbidden_right", "not_submitter"),
    Refusal("merge-by-reviewer", ("amend", "{completed}", *PLANNER, "--merge-commit",
                                  "3f2a9c1"), "forbidden_right", "not_merger"),
    # 5: not_found
    Refusal("show-unknown-number", ("show", "99"), "not_found", "no_such_task", "99"),
    Refusal("show-unknown-id", ("show", "no-such-task"), "not_found", "no_such_task",
            "no-such-task"),
    Refusal("claim-unknown", ("claim", "99", *CODER), "not_found", "no_such_task"),
    Refusal("cancel-unknown", ("cancel", "99"), "not_found", "no_such_task"),
    Refusal("history-unknown", ("history", "99"), "not_found", "no_such_task"),
    # 6: invalid_input
    Refusal("handoff-malformed-project", ("handoff", "--requester", "ana/planner", "--assignee",
                                          "ana/coder", "--project", "Site_2", *TASK),
            "invalid_input", "invalid_handoff", "project"),
    Refusal("handoff-malformed-agent", ("handoff", "--requester", "ana", "--assignee",
                                        "ana/coder", "--project", "site", *TASK),
            "invalid_input", "invalid_handoff", "requester"),
    Refusal("handoff-malformed-id", ("handoff", *OWN, *TASK, "--id", "has space"),
            "invalid_input", "invalid_handoff", "id"),
    Refusal("update-negative-tokens", ("update", "{claimed}", *FENCE, "--summary", "s",
                                       "--tokens", "-1"), "invalid_input", "invalid_usage",
            "tokens"),
    Refusal("handoff-task-too-long", ("handoff", *OWN, "--task", "x" * 501, "--accept", "ok"),
            "invalid_input", "invalid_handoff", "the task's text (--task)"),
    Refusal("handoff-task-too-short", ("handoff", *OWN, "--task", "fix", "--accept", "ok"),
            "invalid_input", "invalid_handoff", "the task's text (--task)"),
    Refusal("handoff-no-criteria", ("handoff", *OWN, "--task", "Fix the login bug"),
            "invalid_input", "invalid_handoff", "acceptance criteria (--accept)"),
    Refusal("update-two-lines", ("update", "{claimed}", *FENCE, "--summary",
                                 "tests green\nand more"), "invalid_input", "invalid_summary"),
    Refusal("update-too-long", ("update", "{claimed}", *FENCE, "--summary", "x" * 301),
            "invalid_input", "invalid_summary"),
    Refusal("checkpoint-too-long", ("checkpoint", "{claimed}", *FENCE, "--progress", "p" * 2001),
            "invalid_input", "invalid_checkpoint", "progress"),
    Refusal("cancel-reason-too-long", ("cancel", "{routed}", "--reason", "r" * 501),
            "invalid_input", "reason_too_long"),
    Refusal("claim-lease-too-long", ("claim", "{routed}", *CODER, "--minutes", "20"),
            "invalid_input", "lease_minutes"),
    Refusal("claim-malformed-agent", ("claim", "{routed}", "--agent", "Ana Coder",
                                      "--instance", "laptop"), "invalid_input", "invalid_agent"),
    Refusal("claim-malformed-instance", ("claim", "{routed}", "--agent", "ana/coder",
                                         "--instance", "my laptop"),
            "invalid_input", "invalid_instance"),
    Refusal("submit-no-evidence", ("submit", "{claimed}", *FENCE, "--summary", "done"),
            "invalid_input", "invalid_result", "evidence"),
    Refusal("submit-unknown-evidence-kind", ("submit", "{claimed}", *FENCE, "--summary", "done",
                                             "--evidence", "video:a recording"),
            "invalid_input", "invalid_result", "kind"),
    Refusal("submit-summary-too-long", ("submit", "{claimed}", *FENCE, "--summary", "s" * 4001,
                                        "--evidence", "note:ok"),
            "invalid_input", "invalid_result", "summary"),
    Refusal("reject-without-reason", ("verify", "{approval}", "--reject", *PLANNER),
            "invalid_input", "reason_required"),
    Refusal("merge-commit-not-hex", ("amend", "{completed}", "--merge-commit", "HEAD~1"),
            "invalid_input", "invalid_commit"),
    # Who acts: an agent's verb names its agent and instance; the owner's verbs refuse agents.
    Refusal("handoff-agent-without-instance", ("handoff", "--assignee", "ana/coder",
                                               "--project", "site", *TASK, "--agent",
                                               "ana/planner"), "usage", "usage", "--instance"),
    Refusal("approve-agent-without-instance", ("approve", "{held}", "--agent", "ana/planner"),
            "usage", "usage", "--instance"),
    Refusal("amend-agent-without-instance", ("amend", "{approval}", "--agent", "ana/coder",
                                             "--summary", "better"), "usage", "usage",
            "--instance"),
    Refusal("expire-agent-without-instance", ("expire", "--agent", "ana/coder"), "usage",
            "usage", "--instance"),
    Refusal("release-lease-without-agent", ("release", "{claimed}", "--lease", "{lease}",
                                            "--token", "{token}"), "usage", "usage",
            "--agent"),
    Refusal("release-holder-without-lease", ("release", "{claimed}", *CODER), "forbidden_right",
            "not_permitted", "ana/coder"),
    Refusal("release-not-holder", ("release", "{claimed}", "--lease", "{lease}", "--token",
                                   "{token}", *PLANNER), "forbidden_right", "not_permitted",
            "ana/planner"),
    Refusal("handoff-not-requester", ("handoff", *OWN, *TASK, *CODER), "forbidden_right",
            "not_requester", "ana/planner"),
    *[Refusal(f"{verb}-no-agent", (verb, *args), "usage", "usage", "--agent")
      for verb, args in (
          ("claim", ("{routed}",)),
          ("resume", ("{routed}",)),
          ("renew", ("{claimed}", "--lease", "{lease}", "--token", "{token}")),
          ("checkpoint", ("{claimed}", "--lease", "{lease}", "--token", "{token}",
                          "--progress", "parser drafted")),
          ("update", ("{claimed}", "--lease", "{lease}", "--token", "{token}", "--summary",
                      "s")),
          ("pause", ("{claimed}", "--lease", "{lease}", "--token", "{token}", "--on", "human",
                     "--reason", "which?")),
          ("submit", ("{claimed}", "--lease", "{lease}", "--token", "{token}", "--summary",
                      "done", "--evidence", "note:ok")),
          ("verify", ("{approval}", "--accept")),
      )],
    *[Refusal(f"{verb}-by-an-agent", (verb, *args, *PLANNER), "forbidden_right",
              "not_permitted", "ana/planner")
      for verb, args in (
          ("approve", ("{held}",)),
          ("deny", ("{held}", "--reason", "not now")),
          ("cancel", ("{routed}",)),
          ("sign-off", ("{approval}",)),
          ("decline", ("{approval}", "--reason", "missing tests")),
          ("release", ("{claimed}",)),
      )],
]


@pytest.mark.parametrize("case", REFUSALS, ids=[c.name for c in REFUSALS])
def test_a_refused_call_exits_with_its_class_code_and_changes_nothing(
        run: Runner, world: World, case: Refusal) -> None:
    args = world.fill(case.args)
    before = snapshot(world.db)
    exit_code = EXIT[case.code]

    human = run(*args, t=1)
    assert human.code == exit_code, human
    assert human.out == ""
    if case.code == "usage":
        assert "Error: " in human.err and case.needle in human.err
    else:
        line = human.err.rstrip("\n")
        assert line.startswith(f"error: {case.code}/{case.reason}: "), line
        assert "\n" not in line or case.name == "update-two-lines"
        assert case.needle in line

    machine = run(*args, as_json=True, t=1)
    assert machine.code == exit_code
    error = machine.error()
    assert (error["code"], error["reason"]) == (case.code, case.reason)
    assert case.needle in error["message"]
    if case.code != "usage":
        assert error["status"] in (403, 404, 409, 422)
        assert machine.err == f"error: {case.code}/{case.reason}: {error['message']}\n"

    assert snapshot(world.db) == before


# -- 1: a plugin that fails ---------------------------------------------------------------------

FAILING_PLUGINS = {
    "gate": ("def hivelite_permission_gate(task, hive):\n", ("handoff", *OWN, *TASK)),
    "threshold": ("def hivelite_merge_threshold(task, hive):\n",
                  ("submit", "{claimed}", *FENCE, "--summary", "done", "--evidence", "note:ok")),
    "evidence": ("def hivelite_check_evidence(task, result, hive):\n",
                 ("submit", "{claimed}", *FENCE, "--summary", "done", "--evidence", "note:ok")),
}


@pytest.mark.parametrize("hook", sorted(FAILING_PLUGINS))
def test_a_plugin_that_raises_exits_1_naming_it_and_changes_nothing(
        run: Runner, world: World, tmp_path: Path, hook: str) -> None:
    signature, args = FAILING_PLUGINS[hook]
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "boom.py").write_text("from hivelite import hookimpl\n\n\n@hookimpl\n"
                                     + signature + "    raise RuntimeError('boom')\n")
    before = snapshot(world.db)
    group = ("--plugins-dir", str(plugins))
    human = run(*world.fill(args), t=1, group=group)
    assert human.code == 1
    assert human.err.startswith("error: plugin_error/plugin_failed: plugin 'boom', hook ")
    assert "RuntimeError: boom" in human.err
    machine = run(*world.fill(args), t=1, group=group, as_json=True)
    assert machine.code == 1
    error = machine.error()
    assert (error["reason"], error["plugin"]) == ("plugin_failed", "boom")
    assert snapshot(world.db) == before


def test_a_plugin_that_cannot_be_imported_exits_1(run: Runner, store: Path,
                                                  tmp_path: Path) -> None:
    """A write starts the plugins, and one that does not import stops it (exit 1, nothing
    written); a read loads no plugin (issue 46), so the same folder does not stop it."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "broken.py").write_text("def oops(:\n")
    before = snapshot(store)
    ran = run("handoff", *OWN, *TASK, as_json=True, group=("--plugins-dir", str(plugins)))
    assert ran.code == 1
    assert ran.error()["plugin"] == "broken"
    missing = run("handoff", *OWN, *TASK, group=("--plugins-dir", str(tmp_path / "nowhere")))
    assert missing.code == 1
    assert missing.err.startswith("error: plugin_error/plugin_failed: ")
    assert snapshot(store) == before
    for group in (("--plugins-dir", str(plugins)), ("--plugins-dir", str(tmp_path / "no"))):
        read = run("list", as_json=True, group=group)
        assert (read.code, read.doc()["items"]) == (0, [])


def test_a_failing_notification_plugin_is_a_warning_and_the_move_stands(
        run: Runner, store: Path, tmp_path: Path) -> None:
    """``hivelite_on_transition`` runs after commit: its failure is a ``warning:`` line on
    stderr naming the plugin, never a traceback, and the verb's output is still one document."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "notify.py").write_text(
        "from hivelite import hookimpl\n\n\n@hookimpl\n"
        "def hivelite_on_transition(task, move, actor, hive):\n"
        "    raise RuntimeError('mail server down')\n")
    ran = run("handoff", *OWN, *TASK, as_json=True, group=("--plugins-dir", str(plugins)))
    crashed = "Traceback" in ran.err
    assert not crashed, ran.err.splitlines()[-1]
    assert ran.code == 0
    assert ran.doc()["task"]["state"] == "routed"
    warnings = ran.err.splitlines()
    assert warnings and all(
        w.startswith("warning: plugin 'notify', hook hivelite_on_transition: raised"
                     " RuntimeError: mail server down") for w in warnings), warnings
    assert run.ok("show", "1", as_json=True).doc()["task"]["state"] == "routed"


def test_plugins_lists_a_plugins_dir(run: Runner, tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "two.py").write_text("from hivelite import hookimpl\n\n\n@hookimpl\n"
                                    "def hivelite_merge_threshold(task, hive):\n    return 2\n")
    listed = run.ok("plugins", as_json=True, group=("--plugins-dir", str(plugins))).doc()
    [two] = [r for r in listed if r["name"] == "two"]
    assert {k: two[k] for k in ("source", "essential", "hooks", "loaded", "status")} == {
        "source": f"file {plugins / 'two.py'}", "essential": False,
        "hooks": ["hivelite_merge_threshold"], "loaded": True, "status": "ok"}
    assert [r["name"] for r in listed if r["loaded"]][-1] == "two"  # after the built-ins
    assert sorted(r["name"] for r in listed if not r["loaded"]) == installed_names()
    human = run.ok("plugins", group=("--plugins-dir", str(plugins))).out
    assert re.search(r"^two +file \S+two\.py +merge_threshold +- +no +ok$", human,
                     re.M), human
    assert not run.db.exists()


# -- time -----------------------------------------------------------------------------------------

def test_expire_reports_the_claims_it_returns(run: Runner, store: Path) -> None:
    """``hivelite expire`` after a lease ran out lists the task it sent back to routed
    (not ``[]`` because opening the store already swept it)."""
    run.ok("handoff", *OWN, *TASK)
    run.ok("claim", "1", *CODER, t=1)
    ran = run.ok("expire", as_json=True, t=12)
    assert [(r["number"], r["holder"], r["expired_at"]) for r in ran.doc()] == [
        (1, "ana/coder", at(11))]


def test_a_stale_holder_is_told_its_lease_expired(run: Runner, store: Path) -> None:
    """docs/decisions.md: a holder's write with an expired lease is refused with
    ``stale_claim`` "and the message says the lease expired" (as it does in the demo)."""
    run.ok("handoff", *OWN, *TASK)
    lease = run.ok("claim", "1", *CODER, as_json=True, t=1).doc()
    late = run("update", "1", "--lease", lease["lease_id"], "--token", "1", *CODER,
               "--summary", "s", as_json=True, t=12)
    assert late.code == 3
    assert late.error()["reason"] == "stale_claim"
    assert "expired" in late.error()["message"]


def test_hivelite_now_moves_time_for_every_verb(run: Runner, store: Path) -> None:
    run.ok("handoff", *OWN, *TASK, t=0)
    lease = run.ok("claim", "1", *CODER, as_json=True, t=30).doc()
    assert lease["expires_at"] == at(40)
    late = run("update", "1", "--lease", lease["lease_id"], "--token", "1", *CODER,
               "--summary", "s", t=40)
    assert late.code == 3
    assert late.err.startswith("error: invalid_state/stale_claim: ")
    view = run.ok("show", "1", as_json=True, t=41).doc()
    assert (view["task"]["state"], view["claim"], view["last_reason"]) == (
        "routed", None, "expired")


@pytest.mark.parametrize("now", ["yesterday", "2026-12-02T09:00:00"])
def test_a_bad_hivelite_now_is_a_clear_error(run: Runner, store: Path, now: str) -> None:
    """An unreadable ``$HIVELITE_NOW`` is refused like any bad input: an ``error:`` line,
    one JSON document with ``--json``, no traceback."""
    ran = run("list", as_json=True, t=now)
    crashed = "Traceback" in ran.err
    assert not crashed, ran.err.splitlines()[-1]
    assert ran.code in (2, 6)
    assert "HIVELITE_NOW" in ran.error()["message"]
    assert ran.err.startswith("error: ")


# -- verbs in more detail ---------------------------------------------------------------------

def test_handoff_takes_the_whole_packet_from_a_file_or_stdin(run: Runner, store: Path,
                                                             tmp_path: Path) -> None:
    body = {"task": "Document the API", "deliverable_type": "doc",
            "acceptance_criteria": ["every verb is covered"], "files": ["docs/api.md"]}
    packet_file = tmp_path / "packet.json"
    packet_file.write_text(json.dumps(body))
    from_file = run.ok("handoff", *OWN, "--packet", str(packet_file), as_json=True).doc()
    from_stdin = run.ok("handoff", *OWN, "--packet", "-", as_json=True,
                        stdin=json.dumps(body)).doc()
    for view in (from_file, from_stdin):
        assert {k: view["task"]["packet"][k] for k in body} == body
    broken = run("handoff", *OWN, "--packet", "-", stdin="{not json", as_json=True)
    assert broken.code == 2
    assert "--packet is not valid JSON" in broken.error()["message"]
    not_object = run("handoff", *OWN, "--packet", "-", stdin="[1, 2]", as_json=True)
    assert not_object.code == 6
    assert not_object.error()["reason"] == "invalid_handoff"


def test_handoff_options_reach_the_task(run: Runner, store: Path) -> None:
    first = run.ok("handoff", *OWN, *TASK, "--id", "login-bug", as_json=True).doc()
    assert first["task"]["id"] == "login-bug"
    view = run.ok("handoff", *OWN, *TASK, "--context", "see issue 7", "--file", "app/login.py",
                  "--depends-on", "login-bug", "--label", "auth", "--label", "urgent-fix",
                  "--priority", "urgent", as_json=True).doc()
    packet = view["task"]["packet"]
    assert (packet["context"], packet["files"], packet["depends_on"]) == (
        "see issue 7", ["app/login.py"], ["login-bug"])
    assert (view["labels"], view["priority"]) == (["auth", "urgent-fix"], "urgent")
    blocked = run("claim", "2", *CODER, as_json=True)
    assert blocked.code == 3
    assert blocked.error()["reason"] == "blocked"
    # the same handoff again (a retry) answers with the task it made; other content under
    # the same id is refused
    again = run.ok("handoff", *OWN, *TASK, "--id", "login-bug", as_json=True).doc()
    assert (again["number"], again["task"]["id"]) == (1, "login-bug")
    same_id = run("handoff", *OWN, *TASK, "--id", "login-bug", "--context", "other",
                  as_json=True)
    assert same_id.code == 6
    assert same_id.error()["reason"] == "duplicate_id"
    assert run.ok("show", "login-bug", as_json=True).doc()["number"] == 1
    assert run.ok("list", as_json=True).doc()["items"][-1]["number"] == 2


def test_list_filters_and_pages(run: Runner, store: Path) -> None:
    assert run.ok("list").out == "no tasks\n"
    assert run.ok("list", as_json=True).doc() == {"items": [], "next_cursor": None}
    run.ok("handoff", *OWN, *TASK)
    run.ok("handoff", *GUEST, *TASK)
    run.ok("handoff", *OWN, "--project", "blog", *TASK)
    first = run.ok("list", "--limit", "1", as_json=True).doc()
    assert ([i["number"] for i in first["items"]], first["next_cursor"]) == ([1], 1)
    assert run.ok("list", "--limit", "1").out.endswith("… more: --after 1\n")
    rest = run.ok("list", "--after", "1", as_json=True).doc()
    assert [i["number"] for i in rest["items"]] == [2, 3]

    def numbers(*args: str) -> list[int]:
        return [i["number"] for i in run.ok("list", *args, as_json=True).doc()["items"]]

    assert numbers("--state", "waiting") == [2]
    assert numbers("--state", "waiting", "--state", "routed") == [1, 2, 3]
    assert numbers("--requester", "guest/scout") == [2]
    assert numbers("--assignee", "ana/coder") == [1, 2, 3]
    assert numbers("--project", "blog") == [3]
    assert run("list", "--limit", "0").code == 2


def test_release_by_the_owner_and_by_the_holder(run: Runner, world: World) -> None:
    owner = run.ok("release", str(world.claimed), "--reason", "reassigning", as_json=True, t=1)
    assert (owner.doc()["task"]["state"], owner.doc()["claim"]) == ("routed", None)
    lease = run.ok("claim", str(world.claimed), *CODER, as_json=True, t=2).doc()
    again = run.ok("release", str(world.claimed), "--lease", lease["lease_id"], "--token",
                   str(lease["fencing_token"]), *CODER, t=3)
    assert task_state(again, as_json=False) == "routed"
    assert lease["fencing_token"] == world.token + 1


def test_agent_options_come_from_the_environment(run: Runner, world: World,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIVELITE_AGENT", "ana/coder")
    monkeypatch.setenv("HIVELITE_INSTANCE", "laptop")
    monkeypatch.setenv("HIVELITE_SESSION", "morning")
    lease = run.ok("claim", str(world.routed), as_json=True, t=1).doc()
    assert (lease["holder"], lease["instance"], lease["session"]) == (
        "ana/coder", "laptop", "morning")
    # The holder check of a fenced write also reads $HIVELITE_AGENT.
    monkeypatch.setenv("HIVELITE_AGENT", "ana/planner")
    other = run("update", str(world.routed), "--lease", lease["lease_id"], "--token",
                str(lease["fencing_token"]), "--summary", "s", t=2)
    assert other.code == 4
    # An agent in the environment is who acts: the owner's verbs refuse it...
    before = snapshot(world.db)
    refused = run("approve", str(world.held), as_json=True, t=2)
    assert refused.code == 4
    assert refused.error()["reason"] == "not_permitted"
    assert "ana/planner" in refused.error()["message"]
    assert snapshot(world.db) == before
    # ... and without $HIVELITE_INSTANCE an agent cannot act at all.
    monkeypatch.delenv("HIVELITE_INSTANCE")
    lost = run("renew", str(world.routed), "--lease", lease["lease_id"], "--token",
               str(lease["fencing_token"]), t=2)
    assert lost.code == 2 and "--instance" in lost.err
    assert snapshot(world.db) == before
    # With no agent named, the same call acts as the store's owner.
    monkeypatch.delenv("HIVELITE_AGENT")
    approved = run.ok("approve", str(world.held), as_json=True, t=3).doc()
    assert approved["task"]["state"] == "routed"
    assert run.ok("history", str(world.held), as_json=True, t=3).doc()[-1]["actor"] == "ana"


def test_handoff_as_an_agent_hands_off_as_itself(run: Runner, store: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """--requester defaults to --agent; the creation row's actor is the agent that acted."""
    mine = run.ok("handoff", "--assignee", "ana/coder", "--project", "site", *TASK, *PLANNER,
                  as_json=True).doc()
    assert (mine["task"]["requester"], mine["task"]["state"]) == ("ana/planner", "routed")
    rows = run.ok("history", "1", as_json=True).doc()
    assert [(r["to_state"], r["actor"]) for r in rows] == [
        ("requested", "ana/planner"), ("routed", "gate")]
    monkeypatch.setenv("HIVELITE_AGENT", "guest/scout")
    monkeypatch.setenv("HIVELITE_INSTANCE", "elsewhere")
    theirs = run.ok("handoff", "--assignee", "ana/coder", "--project", "site", *TASK,
                    as_json=True).doc()
    assert theirs["task"]["requester"] == "guest/scout"
    assert (theirs["task"]["state"], theirs["task"]["waiting_on"]) == (
        "waiting", "owner_approval")
    assert run.ok("history", "2", as_json=True).doc()[0]["actor"] == "guest/scout"
    # The owner (no agent named) hands off for any requester.
    monkeypatch.delenv("HIVELITE_AGENT")
    monkeypatch.delenv("HIVELITE_INSTANCE")
    for_guest = run.ok("handoff", *GUEST, *TASK, as_json=True).doc()
    assert for_guest["task"]["requester"] == "guest/scout"
    assert run.ok("history", "3", as_json=True).doc()[0]["actor"] == "ana"


# Every call that acts as the store's owner when no agent is named.
AS_OWNER: dict[str, tuple[str, ...]] = {
    "handoff": (*OWN, *TASK),
    "approve": ("{held}",),
    "deny": ("{held}",),
    "cancel": ("{routed}",),
    "release": ("{claimed}",),
    "sign-off": ("{approval}",),
    "decline": ("{approval}", "--reason", "missing tests"),
    "amend": ("{completed}", "--merge-commit", "3f2a9c1"),
    "expire": (),
    "fields": ("1", "--priority", "low", "--base-version", "1"),
    "hold": ("--agent", "ana/coder"),
    "veto": ("1", "--agent", "ana/coder"),
    "stop": ("--all",),
    "budget": ("set", "--agent", "ana/coder", "--tasks", "3"),
    "policy": ("set", "mode", "team"),
    "token": ("add", "ana/coder", "--instance", "laptop"),
}


@pytest.mark.parametrize("verb", sorted(AS_OWNER))
def test_only_the_store_files_owner_acts_as_its_owner(
        run: Runner, world: World, monkeypatch: pytest.MonkeyPatch, verb: str) -> None:
    """Another user's process that names no agent is refused with ``not_owner`` (exit 4)
    and changes nothing; the same call from the file's owner goes through."""
    args = world.fill((verb, *AS_OWNER[verb]))
    before = snapshot(world.db)
    with monkeypatch.context() as other_user:
        other_user.setattr(os, "geteuid", lambda: world.db.stat().st_uid + 1)
        human = run(*args, t=1)
        assert human.code == 4, human
        assert human.out == ""
        assert human.err.startswith("error: forbidden_right/not_owner: ")
        assert "--agent" in human.err
        machine = run(*args, as_json=True, t=1)
        assert machine.code == 4
        assert machine.error()["reason"] == "not_owner"
        assert snapshot(world.db) == before
        assert run.ok("show", "1", t=1).code == 0  # reading needs no owner
    run.ok(*args, t=1)
    # Every one of them writes, but expire has nothing to return at minute 1.
    assert (snapshot(world.db) != before) == (verb != "expire")


def test_an_agent_acts_from_another_users_process(run: Runner, world: World,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Naming an agent is not acting as the owner: the file's owner is not asked for."""
    monkeypatch.setattr(os, "geteuid", lambda: world.db.stat().st_uid + 1)
    view = run.ok("handoff", "--assignee", "ana/coder", "--project", "site", *TASK, *PLANNER,
                  as_json=True, t=1).doc()
    assert view["task"]["state"] == "routed"
    lease = run.ok("claim", str(view["number"]), *CODER, as_json=True, t=1).doc()
    assert lease["holder"] == "ana/coder"
    assert run.ok("expire", *CODER, as_json=True, t=1).doc() == []


def test_a_verdict_that_does_not_complete_is_reported(run: Runner, world: World,
                                                      tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "two.py").write_text("from hivelite import hookimpl\n\n\n@hookimpl\n"
                                    "def hivelite_merge_threshold(task, hive):\n    return 2\n")
    group = ("--plugins-dir", str(plugins))
    lease = ("--lease", world.lease, "--token", str(world.token), *CODER)
    view = run.ok("submit", str(world.claimed), *lease, "--summary", "done", "--evidence",
                  "note:ok", as_json=True, t=1, group=group).doc()
    assert (view["task"]["state"], view["threshold"]) == ("approval", 2)
    once = run.ok("verify", str(world.claimed), "--accept", *PLANNER, as_json=True, t=2,
                  group=group).doc()
    assert once["task"]["state"] == "approval"
    assert [(c["reviewer"], c["verdict"], c["counted"]) for c in once["confirmations"]] == [
        ("ana/planner", "accept", True)]
    human = run.ok("verify", str(world.claimed), "--accept", "--agent", "ana/helper",
                   "--instance", "server", t=3, group=group)
    assert task_state(human, as_json=False) == "completed"


@pytest.mark.parametrize("fmt", ["table", "mermaid", "dot", "json"])
def test_states_formats(run: Runner, fmt: str) -> None:
    ran = run.ok("states", "--format", fmt)
    text = ran.out
    if fmt == "table":
        assert text.startswith("| # | move | from → to |")
        assert len(re.findall(r"^\| \d+ \|", text, re.M)) == 22
    elif fmt == "mermaid":
        assert text.startswith("stateDiagram-v2\n")
        assert "requested --> routed" in text
    elif fmt == "dot":
        assert text.startswith("digraph hivelite {")
        assert text.rstrip().endswith("}")
    else:
        doc = json.loads(text)
        assert len(doc["states"]) == 10
    # With --json every format prints the protocol as one JSON document.
    as_json = run.ok("states", "--format", fmt, as_json=True).doc()
    assert as_json == json.loads(run.ok("states", "--format", "json").out)
    assert not run.db.exists()


def test_schema_prints_the_shipped_schema(run: Runner) -> None:
    shipped = json.loads(resources.files("hivelite").joinpath("data/task.schema.json")
                         .read_text())
    assert json.loads(run.ok("schema").out) == shipped
    assert run.ok("schema", as_json=True).doc() == shipped
    assert not run.db.exists()


def test_demo_runs_twice_on_one_store_and_adds_tasks(run: Runner, store: Path) -> None:
    first = run.ok("demo")
    assert first.out.startswith(f"hivelite demo on {store} (owner ana)\n")
    assert "refused: invalid_state/stale_claim: " in first.out
    assert "refused: invalid_state/reviewer_not_independent: " in first.out
    assert "refused: forbidden_right/vetoed: " in first.out  # the stop
    assert "refused: rate_limited/daily_budget: " in first.out
    assert len(run.ok("list", as_json=True).doc()["items"]) == 3
    steps = run.ok("demo", as_json=True).doc()
    assert {s["number"] for s in steps} == {4, 5, 6}
    final = {s["number"]: s["state"] for s in steps if "state" in s}
    assert final == {4: "completed", 5: "cancelled", 6: "routed"}
    refusals = [s["error"]["reason"] for s in steps if "error" in s]
    assert refusals == ["stale_claim", "reviewer_not_independent", "vetoed", "daily_budget"]
    states = [i["task"]["state"] for i in run.ok("list", as_json=True).doc()["items"]]
    assert states == ["completed", "cancelled", "routed"] * 2
    assert run.ok("controls", as_json=True).doc() == []  # the demo lifts what it sets
    assert run.ok("budget", "show", as_json=True).doc() == []


def test_demo_creates_a_missing_store(run: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIVELITE_OWNER", "bo")
    run.ok("demo", as_json=True)
    assert stat.S_IMODE(run.db.stat().st_mode) == 0o600
    assert run.ok("init", as_json=True).doc()["owner"] == "bo"


def test_claim_json_has_lease_token_and_expiry(run: Runner, world: World) -> None:
    lease = run.ok("claim", str(world.routed), *CODER, "--minutes", "15", as_json=True,
                   t=1).doc()
    assert lease["lease_id"] and isinstance(lease["lease_id"], str)
    assert isinstance(lease["fencing_token"], int) and lease["fencing_token"] >= 1
    assert lease["expires_at"] == at(16)
    assert (lease["number"], lease["state"], lease["holder"]) == (
        world.routed, "accepted", "ana/coder")
    # The ClaimReceipt: the old lease fields plus when, where and the journal row it added.
    assert (lease["instance"], lease["session"], lease["waiting_on"], lease["at"]) == (
        "laptop", None, None, at(1))
    rows = run.ok("history", str(world.routed), as_json=True, t=1).doc()
    assert lease["seq"] == rows[-1]["seq"]
    assert (rows[-1]["to_state"], rows[-1]["actor"]) == ("accepted", "ana/coder")
