"""A caller the face proves (issue 13): every write verb takes an explicit ``Caller``; the
library never substitutes the owner; an agent cannot use an owner verb, through the API or
the CLI; the owner cannot use an agent's verb.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hivelite import (
    Caller,
    ForbiddenRight,
    Hive,
    HiveliteError,
    InvalidInput,
    ManualClock,
    State,
)

from . import rawsql
from .conftest import CODER, HANG_S, OWNER, REVIEWER, START, held_task, own_task
from .inproc import run_main

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]
Verb = Callable[[Hive, Any, int], object]


def snapshot(hive: Hive) -> dict[str, list[tuple[object, ...]]]:
    return rawsql.snapshot(hive.store.conn)  # type: ignore[attr-defined]


def in_approval(hive: Hive) -> int:
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    assert hive.get(number).task.state is State.approval
    return number


def completed(hive: Hive) -> int:
    number = in_approval(hive)
    hive.verify(REVIEWER, number, verdict="accept")
    return number


def claimed(hive: Hive) -> int:
    number = own_task(hive)
    hive.claim(CODER, number)
    return number


# The owner's verbs, each with a task in the state it applies to.
OWNER_VERBS: dict[str, tuple[Callable[[Hive], int], Verb]] = {
    "approve": (held_task, lambda h, c, n: h.approve(c, n)),
    "deny": (held_task, lambda h, c, n: h.deny(c, n, reason="no")),
    "cancel": (own_task, lambda h, c, n: h.cancel(c, n, reason="not needed")),
    "sign_off": (in_approval, lambda h, c, n: h.sign_off(c, n, reason="I approve my own work")),
    "decline": (in_approval, lambda h, c, n: h.decline(c, n, reason="no")),
    "release": (claimed, lambda h, c, n: h.release(c, n, reason="take it back")),
}


@pytest.mark.parametrize("verb", sorted(OWNER_VERBS))
@pytest.mark.parametrize("agent", [CODER, REVIEWER, Caller.agent("bob/stranger", "far")],
                         ids=["assignee", "reviewer", "stranger"])
def test_an_agent_cannot_use_an_owner_verb(hive: Hive, verb: str, agent: Caller) -> None:
    make, call = OWNER_VERBS[verb]
    number = make(hive)
    before = snapshot(hive)
    with pytest.raises(ForbiddenRight) as err:
        call(hive, agent, number)
    assert err.value.reason == "not_permitted"
    assert agent.name in err.value.message
    assert snapshot(hive) == before


@pytest.mark.parametrize("verb", sorted(OWNER_VERBS))
def test_the_owner_uses_them_and_the_journal_credits_the_owner(hive: Hive, verb: str) -> None:
    make, call = OWNER_VERBS[verb]
    number = make(hive)
    receipt = call(hive, OWNER, number)
    last = hive.history(number)[-1]
    assert last.actor == "ana"
    assert getattr(receipt, "seq", None) == last.seq


def test_an_agent_cannot_record_a_merge_it_did_not_submit(hive: Hive) -> None:
    number = completed(hive)
    before = snapshot(hive)
    for agent, reason in ((REVIEWER, "not_merger"),
                          (Caller.agent("ana/other", "desktop"), "not_submitter")):
        with pytest.raises(ForbiddenRight) as err:
            hive.amend(agent, number, merge_commit="3f2a9c1")
        assert err.value.reason == reason
    assert snapshot(hive) == before
    hive.amend(OWNER, number, merge_commit="3f2a9c1")
    assert hive.get(number).merge is not None
    assert hive.history(number)[-1].actor == "ana"


def test_an_owner_caller_must_be_this_stores_owner(hive: Hive) -> None:
    number = held_task(hive)
    before = snapshot(hive)
    with pytest.raises(ForbiddenRight) as err:
        hive.approve(Caller.owner("bob"), number)
    assert err.value.reason == "not_owner"
    assert snapshot(hive) == before


AGENT_VERBS: dict[str, Verb] = {
    "claim": lambda h, c, n: h.claim(c, n),
    "resume": lambda h, c, n: h.resume(c, n),
    "renew": lambda h, c, n: h.renew(c, n, lease_id="L1", token=1),
    "checkpoint": lambda h, c, n: h.checkpoint(c, n, lease_id="L1", token=1, progress="p"),
    "update": lambda h, c, n: h.update(c, n, lease_id="L1", token=1, summary="s"),
    "pause": lambda h, c, n: h.pause(c, n, lease_id="L1", token=1, on="human", reason="r"),
    "submit": lambda h, c, n: h.submit(c, n, lease_id="L1", token=1, summary="s",
                                       evidence=EVIDENCE),
    "verify": lambda h, c, n: h.verify(c, n, verdict="accept"),
}


@pytest.mark.parametrize("verb", sorted(AGENT_VERBS))
def test_the_owner_cannot_use_an_agents_verb(hive: Hive, verb: str) -> None:
    number = own_task(hive)
    before = snapshot(hive)
    with pytest.raises(ForbiddenRight) as err:
        AGENT_VERBS[verb](hive, OWNER, number)
    assert err.value.reason == "agent_only"
    assert snapshot(hive) == before


ALL_VERBS: dict[str, Verb] = {
    **{name: call for name, (_, call) in OWNER_VERBS.items()},
    **AGENT_VERBS,
    "handoff": lambda h, c, n: h.handoff(c, requester="ana/planner", assignee="ana/coder",
                                         project="demo",
                                         packet={"task": "Write the parser",
                                                 "deliverable_type": "code",
                                                 "acceptance_criteria": ["ok"]}),
    "amend": lambda h, c, n: h.amend(c, n, merge_commit="3f2a9c1"),
    "expire": lambda h, c, n: h.expire(c),
}


@pytest.mark.parametrize("verb", sorted(ALL_VERBS))
@pytest.mark.parametrize("missing", [None, "ana", "ana/coder"], ids=["none", "owner-name",
                                                                     "agent-name"])
def test_a_missing_caller_is_refused_never_the_owner(hive: Hive, verb: str,
                                                     missing: object) -> None:
    number = own_task(hive)
    before = snapshot(hive)
    with pytest.raises(InvalidInput) as err:
        ALL_VERBS[verb](hive, missing, number)
    assert err.value.reason == "caller_required"
    assert snapshot(hive) == before


def test_an_agent_hands_off_only_as_itself(hive: Hive) -> None:
    before = snapshot(hive)
    with pytest.raises(ForbiddenRight) as err:
        hive.handoff(CODER, requester="ana/planner", assignee="ana/coder", project="demo",
                     packet={"task": "Write the parser", "deliverable_type": "code",
                             "acceptance_criteria": ["ok"]})
    assert err.value.reason == "not_requester"
    assert snapshot(hive) == before
    receipt = hive.handoff(CODER, requester="ana/coder", assignee="ana/coder", project="demo",
                           packet={"task": "Write the parser", "deliverable_type": "code",
                                   "acceptance_criteria": ["ok"]})
    assert hive.history(receipt.number)[0].actor == "ana/coder"


@pytest.mark.parametrize(("make", "error"), [
    (lambda: Caller.agent("coder", "laptop"), "invalid_agent"),
    (lambda: Caller.agent("ana/coder", "lap top"), "invalid_instance"),
    (lambda: Caller.agent("ana/coder", "laptop", "no spaces"), "invalid_session"),
    (lambda: Caller.owner("Ana Smith"), "invalid_owner"),
])
def test_a_malformed_caller_cannot_be_made(make: Callable[[], Caller], error: str) -> None:
    with pytest.raises(InvalidInput) as err:
        make()
    assert err.value.reason == error


# -- the CLI: who runs it decides who acts ----------------------------------------------


def cli(db: Path, *args: str,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI run in this process (``test_the_cli_as_a_process_acts_as_the_file_owner``
    runs it as a process)."""
    return run_main(["--db", str(db), *args],
                    {"HIVELITE_NOW": START, "HIVELITE_LOAD_PLUGINS": "", **(env or {})})


def test_the_cli_as_a_process_acts_as_the_file_owner(store: Path) -> None:
    """The smoke test of the path above: a real ``python -m hivelite`` process."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    clean.update({"HIVELITE_NOW": START, "HIVELITE_LOAD_PLUGINS": ""})
    done = subprocess.run([sys.executable, "-m", "hivelite", "--db", str(store), "--json",
                           "sign-off", "1"], capture_output=True, text=True, env=clean,
                          timeout=HANG_S)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["task"]["state"] == "completed"
    agent = {**clean, "HIVELITE_AGENT": "ana/coder", "HIVELITE_INSTANCE": "laptop"}
    done = subprocess.run([sys.executable, "-m", "hivelite", "--db", str(store), "approve",
                           "2"], capture_output=True, text=True, env=agent, timeout=HANG_S)
    assert done.returncode == 4 and "ana/coder" in done.stderr, done.stderr


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store with a task in approval (1), one held for the owner (2), a claimed one (3),
    a completed one (4)."""
    path = tmp_path / "cli.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        in_approval(hive)
        held_task(hive)
        claimed(hive)
        completed(hive)
    return path


CLI_OWNER_VERBS = {
    "approve": ["approve", "2"],
    "deny": ["deny", "2", "--reason", "no"],
    "cancel": ["cancel", "2"],
    "sign-off": ["sign-off", "1", "--reason", "I approve my own work"],
    "decline": ["decline", "1", "--reason", "no"],
    "release": ["release", "3"],
}


@pytest.mark.slow
def test_an_agent_cannot_use_an_owner_verb_through_the_cli(store: Path) -> None:
    conn = rawsql.connect(store)
    before = rawsql.snapshot(conn)
    agent = {"HIVELITE_AGENT": "ana/coder", "HIVELITE_INSTANCE": "laptop"}
    for name, args in CLI_OWNER_VERBS.items():
        done = cli(store, "--json", *args, env=agent)
        assert done.returncode == 4, (name, done.stderr)
        error = json.loads(done.stdout)["error"]
        assert (error["code"], error["reason"]) == ("forbidden_right", "not_permitted"), name
        assert "ana/coder" in done.stderr
        # naming the agent without its instance is no owner either: a usage error
        done = cli(store, *args, env={"HIVELITE_AGENT": "ana/coder"})
        assert done.returncode == 2, (name, done.stderr)
        assert "--instance" in done.stderr
        # nor is --agent on the command line
        done = cli(store, *args, "--agent", "ana/coder", "--instance", "laptop")
        assert done.returncode == 4, (name, done.stderr)
    # the merge record: never the reviewer, nor another agent
    for agent, reason in (("ana/reviewer", "not_merger"), ("ana/other", "not_submitter")):
        done = cli(store, "--json", "amend", "4", "--merge-commit", "3f2a9c1",
                   env={"HIVELITE_AGENT": agent, "HIVELITE_INSTANCE": "desktop"})
        assert done.returncode == 4, done.stderr
        assert json.loads(done.stdout)["error"]["reason"] == reason
    assert rawsql.snapshot(conn) == before
    # the file's owner, naming no agent, acts as the owner
    done = cli(store, "--json", "sign-off", "1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["task"]["state"] == "completed"
    history = json.loads(cli(store, "--json", "history", "1").stdout)
    assert history[-1]["actor"] == "ana"


@pytest.mark.slow
def test_an_agents_verb_without_an_agent_is_a_usage_error(store: Path) -> None:
    conn = rawsql.connect(store)
    before = rawsql.snapshot(conn)
    for args in (["claim", "3"], ["verify", "1", "--accept"],
                 ["checkpoint", "3", "--lease", "L1", "--token", "1", "--progress", "p"],
                 ["release", "3", "--lease", "L1", "--token", "1"]):
        done = cli(store, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "--agent" in done.stderr
    assert rawsql.snapshot(conn) == before


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="handing the file to another user needs root")
def test_only_the_store_files_owner_acts_as_owner(store: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        part = Path(f"{store}{suffix}")
        if part.exists():
            os.chown(part, 4242, -1)
    done = cli(store, "approve", "2")
    assert done.returncode == 4, done.stderr
    assert "not_owner" in done.stderr and "uid 4242" in done.stderr
    assert cli(store, "--json", "show", "2").returncode == 0  # reading stays open


def test_refusals_through_the_api_are_hivelite_errors(hive: Hive) -> None:
    number = in_approval(hive)
    with pytest.raises(HiveliteError):
        hive.sign_off(CODER, number)
    assert hive.get(number).task.state is State.approval


@pytest.mark.slow
def test_the_cli_decides_the_caller_before_it_opens_the_store(store: Path) -> None:
    """A refused caller writes nothing, not even the expiry sweep that opening does."""
    conn = rawsql.connect(store)
    before = rawsql.snapshot(conn)
    later = {"HIVELITE_NOW": "2026-12-02T10:00:00.000Z"}  # task 3's claim has run out
    assert cli(store, "renew", "3", "--lease", "L1", "--token", "1", env=later).returncode == 2
    assert cli(store, "approve", "2", "--instance", "laptop", env=later).returncode == 2
    assert rawsql.snapshot(conn) == before
    assert cli(store, "approve", "2", env=later).returncode == 0  # opening sweeps task 3
    assert rawsql.snapshot(conn) != before


@pytest.mark.slow
def test_cli_flags_of_an_agent_need_the_agent(store: Path) -> None:
    done = cli(store, "approve", "2", "--session", "s1")
    assert done.returncode == 2
    assert "--session belongs to an agent" in done.stderr
    # the machine's own $HIVELITE_INSTANCE does not stop its owner
    done = cli(store, "--json", "approve", "2", env={"HIVELITE_INSTANCE": "laptop"})
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_a_refusal_says_the_agent_came_from_the_environment(store: Path) -> None:
    done = cli(store, "cancel", "2", env={"HIVELITE_AGENT": "ana/coder",
                                          "HIVELITE_INSTANCE": "laptop"})
    assert done.returncode == 4
    assert "ana/coder on laptop (named by $HIVELITE_AGENT) may not" in done.stderr
    done = cli(store, "cancel", "2", "--agent", "ana/coder", "--instance", "laptop")
    assert done.returncode == 4
    assert "$HIVELITE_AGENT" not in done.stderr


def test_a_holder_writes_from_the_instance_it_claimed_from(hive: Hive) -> None:
    """The lease is the coder's on the laptop: the same agent on another machine is refused;
    a new session on the laptop (a restarted process) carries on, whatever the case."""
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    before = snapshot(hive)
    elsewhere = Caller.agent("ana/coder", "desktop")
    for write in (lambda c: hive.checkpoint(c, number, progress="p", **fence),
                  lambda c: hive.renew(c, number, **fence),
                  lambda c: hive.submit(c, number, summary="s", evidence=EVIDENCE, **fence),
                  lambda c: hive.release(c, number, **fence)):
        with pytest.raises(ForbiddenRight) as err:
            write(elsewhere)
        assert err.value.reason == "not_permitted"
        assert "held from laptop, not desktop" in err.value.message
    assert snapshot(hive) == before
    restarted = Caller.agent("ana/coder", "LAPTOP", "after-restart")
    assert hive.checkpoint(restarted, number, progress="p", **fence).state is State.working
