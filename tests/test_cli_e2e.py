"""The ``hivelite`` command in real processes: the demo's story, verb by verb, on one store.

Each step is one ``hivelite --json ...`` subprocess; ``$HIVELITE_NOW`` moves time
(DESIGN §8), so a lease runs out without sleeping. Refused steps must exit with
their class's code, print one JSON error document, and leave the store as it was.
The rest of the CLI is tested in-process in ``test_cli.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from . import rawsql
from .conftest import HANG_S, at

pytestmark = pytest.mark.slow

TIMEOUT = HANG_S
CODER = ("--agent", "ana/coder", "--instance", "laptop")
PLANNER = ("--agent", "ana/planner", "--instance", "desktop")


def hivelite_command() -> list[str]:
    """The console script next to this interpreter, else on PATH, else ``main()`` itself."""
    script = Path(sys.executable).parent / "hivelite"
    if script.is_file():
        return [str(script)]
    found = shutil.which("hivelite")
    if found:
        return [found]
    return [sys.executable, "-c", "from hivelite.faces.cli.main import main; main()"]


snapshot = rawsql.snapshot_file


@dataclass
class Done:
    code: int
    out: str
    err: str


class Shell:
    """Runs ``hivelite`` in a subprocess against one store, in a clean environment."""

    def __init__(self, db: Path, cwd: Path) -> None:
        self.db = db
        self.cwd = cwd
        self.command = hivelite_command()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
        self.env["HIVELITE_LOAD_PLUGINS"] = ""  # installed plugins must not change results

    def raw(self, *args: str, t: float = 0, env: dict[str, str] | None = None,
            db: bool = True) -> Done:
        argv = [*self.command, *(["--db", str(self.db)] if db else []), *args]
        proc = subprocess.run(argv, cwd=self.cwd, capture_output=True, text=True,
                              timeout=TIMEOUT,
                              env={**self.env, "HIVELITE_NOW": at(t), **(env or {})})
        return Done(proc.returncode, proc.stdout, proc.stderr)

    def __call__(self, *args: str, t: float = 0, env: dict[str, str] | None = None) -> Any:
        """A ``--json`` step that must succeed; its one JSON document."""
        done = self.raw("--json", *args, t=t, env=env)
        assert done.code == 0, (args, done.err)
        assert done.err == ""
        return json.loads(done.out)

    def refused(self, *args: str, t: float, exit_code: int, reason: str) -> dict[str, Any]:
        """A ``--json`` step that must be refused without touching the store."""
        before = snapshot(self.db)
        done = self.raw("--json", *args, t=t)
        assert done.code == exit_code, (args, done.code, done.err)
        doc = json.loads(done.out)
        assert set(doc) == {"error"}
        error: dict[str, Any] = doc["error"]
        assert error["reason"] == reason
        assert done.err == f"error: {error['code']}/{reason}: {error['message']}\n"
        assert snapshot(self.db) == before
        return error


@pytest.fixture
def sh(tmp_path: Path) -> Shell:
    return Shell(tmp_path / "story.db", tmp_path)


def test_the_demo_story_verb_by_verb(sh: Shell) -> None:
    # The owner makes the store; only she can read it.
    assert sh("init", "--owner", "ana")["owner"] == "ana"
    assert stat.S_IMODE(sh.db.stat().st_mode) == 0o600

    # Ana's planner hands off to her coder (as itself: the requester defaults to the agent);
    # it is routed. A guest's request is held; the owner (no agent named) approves it.
    first = sh("handoff", *PLANNER, "--assignee", "ana/coder", "--project", "demo", "--task",
               "Add input validation to the signup form", "--type", "code", "--accept",
               "invalid emails are refused", "--accept", "the test suite passes", "--file",
               "app/signup.py")
    assert (first["number"], first["task"]["state"]) == (1, "routed")
    assert first["task"]["requester"] == "ana/planner"
    assert first["task"]["packet"]["files"] == ["app/signup.py"]
    held = sh("handoff", "--requester", "guest/scout", "--assignee", "ana/coder", "--project",
              "demo", "--task", "Review the public API documentation", "--type", "doc",
              "--accept", "every verb is covered", "--agent", "guest/scout", "--instance",
              "elsewhere")
    assert (held["number"], held["task"]["state"], held["task"]["waiting_on"]) == (
        2, "waiting", "owner_approval")
    sh.refused("approve", "2", *PLANNER, t=0, exit_code=4, reason="not_permitted")
    assert sh("approve", "2", "--reason", "fine by me")["task"]["state"] == "routed"

    # The coder claims at T and checkpoints.
    first_lease = sh("claim", "1", "--agent", "ana/coder", "--instance", "laptop", "--session",
                     "morning", t=1)
    assert {"lease_id", "fencing_token", "expires_at"} <= set(first_lease)
    assert (first_lease["fencing_token"], first_lease["expires_at"]) == (1, at(11))
    old = ("--lease", first_lease["lease_id"], "--token", "1", *CODER)
    view = sh("checkpoint", "1", *old, "--progress", "validation rules drafted", "--next",
              "write tests", t=4)
    assert (view["task"]["state"], view["claim"]["holder"]) == ("working", "ana/coder")

    # T+11 minutes: the lease ran out; the stale holder's update is refused with stale_claim.
    stale = sh.raw("--json", "update", "1", *old, "--summary", "still on it", t=12)
    assert stale.code == 3
    assert json.loads(stale.out)["error"]["reason"] == "stale_claim"
    assert stale.err.startswith("error: invalid_state/stale_claim: ")
    view = sh("show", "1", t=12)
    assert (view["task"]["state"], view["claim"], view["last_reason"]) == (
        "routed", None, "expired")
    assert view["task"]["latest_checkpoint"]["progress"] == "validation rules drafted"

    # A fresh claim: a new lease and a higher token; the old pair stays refused.
    second = sh("claim", "1", "--agent", "ana/coder", "--instance", "laptop", "--session",
                "afternoon", t=13)
    assert second["fencing_token"] == 2 and second["lease_id"] != first_lease["lease_id"]
    sh.refused("update", "1", *old, "--summary", "still on it", t=14, exit_code=3,
               reason="stale_claim")
    new = ("--lease", second["lease_id"], "--token", "2", *CODER)
    view = sh("update", "1", *new, "--summary", "tests written", "--tokens", "1200", t=14)
    assert view["updates"][0]["summary"] == "tests written"
    assert view["task"]["state"] == "working"
    # An agent may name itself in its environment instead; naming nobody is a usage error.
    fence = ("--lease", second["lease_id"], "--token", "2")
    nobody = sh.raw("--json", "renew", "1", *fence, t=15)
    assert nobody.code == 2
    assert "--agent" in json.loads(nobody.out)["error"]["message"]
    renewed = sh("renew", "1", *fence, t=15,
                 env={"HIVELITE_AGENT": "ana/coder", "HIVELITE_INSTANCE": "laptop"})
    assert (renewed["expires_at"], renewed["holder"], renewed["instance"]) == (
        at(25), "ana/coder", "laptop")

    # The result, with evidence.
    view = sh("submit", "1", *new, "--summary", "Signup now refuses malformed emails.",
              "--evidence", "test_output:42 passed",
              "--evidence", "pull_request:the PR:https://example.com/pr/7", t=17)
    assert (view["task"]["state"], view["threshold"], view["claim"]) == ("approval", 1, None)
    assert view["task"]["result"]["evidence"] == [
        {"kind": "test_output", "summary": "42 passed"},
        {"kind": "pull_request", "summary": "the PR", "url": "https://example.com/pr/7"}]
    assert view["task"]["result"]["returned_by"] == "ana/coder"

    # Not from the claiming laptop, not by the worker; the planner on the desktop completes it.
    sh.refused("verify", "1", "--accept", "--agent", "ana/helper", "--instance", "laptop", t=18,
               exit_code=3, reason="reviewer_not_independent")
    sh.refused("verify", "1", "--accept", "--agent", "ana/coder", "--instance", "desktop", t=18,
               exit_code=4, reason="self_verify")
    view = sh("verify", "1", "--accept", "--agent", "ana/planner", "--instance", "desktop", t=19)
    assert (view["task"]["state"], view["lifecycle"]) == ("completed", "completed")
    view = sh("amend", "1", *CODER, "--merge-commit", "3f2a9c1", t=20)
    assert view["merge"] == {"commit": "3f2a9c1", "by": "ana/coder", "evidence": {
        "kind": "commit", "summary": "merged as 3f2a9c1", "content": "3f2a9c1"}}

    # The approved request: a failed attempt, then the owner cancels it.
    attempt = sh("claim", "2", "--agent", "ana/coder", "--instance", "laptop", t=21)
    view = sh("submit", "2", "--lease", attempt["lease_id"], "--token",
              str(attempt["fencing_token"]), *CODER, "--summary",
              "The docs site is unreachable.",
              "--evidence", "note:HTTP 503 on every page", "--outcome", "failed", t=26)
    assert (view["task"]["state"], view["outcome"], view["lifecycle"], view["attempts"]) == (
        "routed", "failed", "queued", 1)
    sh.refused("cancel", "2", *CODER, t=27, exit_code=4, reason="not_permitted")
    view = sh("cancel", "2", "--reason", "docs are being rewritten", t=27)
    assert view["task"]["state"] == "cancelled"
    sh.refused("cancel", "2", t=28, exit_code=3, reason="task_closed")
    sh.refused("show", "3", t=28, exit_code=5, reason="no_such_task")

    # What the store says now.
    moves = [(r["from_state"], r["to_state"], r["actor"]) for r in sh("history", "1", t=29)]
    assert moves == [
        (None, "requested", "ana/planner"), ("requested", "routed", "gate"),
        ("routed", "accepted", "ana/coder"), ("accepted", "working", "ana/coder"),
        ("working", "routed", "clock"), ("routed", "accepted", "ana/coder"),
        ("accepted", "working", "ana/coder"), ("working", "verifying", "ana/coder"),
        ("verifying", "approval", "guard"), ("approval", "completed", "ana/planner"),
        ("completed", "completed", "ana/coder"),  # the merge record: an event, not a move
    ]
    page = sh("list", t=29)
    assert [(i["number"], i["task"]["state"]) for i in page["items"]] == [
        (1, "completed"), (2, "cancelled")]
    human = sh.raw("show", "1", t=29)
    assert human.code == 0
    assert "  state      completed" in human.out
    assert "    evidence pull_request: the PR <https://example.com/pr/7>" in human.out


def test_hivelite_db_and_no_implicit_store(sh: Shell, tmp_path: Path) -> None:
    elsewhere = sh.raw("list", db=False, env={"HIVELITE_DB": str(tmp_path / "nope.db")})
    assert elsewhere.code == 6
    assert elsewhere.err.startswith("error: invalid_input/no_store: ")
    assert "hivelite --db" in elsewhere.err and " init" in elsewhere.err
    assert list(tmp_path.iterdir()) == []
    made = sh.raw("--json", "init", "--owner", "ana", db=False,
                  env={"HIVELITE_DB": str(sh.db)})
    assert made.code == 0
    assert json.loads(made.out)["db"] == str(sh.db)
    assert sh.raw("list", db=False, env={"HIVELITE_DB": str(sh.db)}).out == "no tasks\n"
