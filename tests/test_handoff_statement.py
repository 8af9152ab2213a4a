"""``handoff`` as its statement (issue 47, item 1), on both engines: the gate is asked
before the write lock as ever; the task's row and the gate's move are then one write in
every case (a control of the caller is asked in its transaction, an enrolment is the
store's rules'), and the store's rules check the move; a refusal takes the full run,
which says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hivelite import Caller, Hive, ManualClock, State, hookimpl

from .both_ways import full_run_only, refusals_both_ways
from .conftest import GUEST, OWNER, PLANNER, START, OpenHive, held_task, own_task, packet
from .test_statements import FullRuns, refusal

pytestmark = pytest.mark.contract


class Gate:
    """Denies a handoff into the project ``closed``."""

    @hookimpl
    def hivelite_permission_gate(self, task: Any, hive: Any) -> str | None:
        return "deny" if task.project == "closed" else None


def scenario(hive: Hive) -> list[tuple[Any, ...]]:
    """Every way a handoff can go, as the receipts and the journal say it."""
    receipts = [
        hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
                     packet=packet()),
        hive.handoff(PLANNER, requester="ana/planner", assignee="ana/coder", project="demo",
                     packet=packet(task="Its own")),
        hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="closed",
                     packet=packet()),
        hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
                     packet=packet(task="Named"), id="T-named"),
        hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
                     packet=packet(task="Named"), id="T-named"),  # a retry: the same task
        hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
                     packet=packet(task="After it"), depends_on=[1]),
    ]
    held_task(hive)
    hive.set_policy(OWNER, "proposals", "owner")
    receipts.append(hive.handoff(PLANNER, requester="ana/planner", assignee="ana/coder",
                                 project="demo", packet=packet(task="Proposed")))
    said: list[tuple[Any, ...]] = [(r.number, r.id if r.number == 4 else None, r.state,
                                    r.waiting_on, r.seq is not None) for r in receipts]
    said += [(e.number, e.from_state, e.to_state, e.actor, e.reason, e.detail)
             for e in hive.journal() if e.number is not None]
    return said


def test_a_handoff_is_its_statement_and_leaves_what_the_full_run_leaves(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = []
    for statements in (True, False):
        hive = open_hive(path=tmp_path / f"{statements}.db", clock=ManualClock(START),
                         plugins=[Gate()])
        if not statements:
            full_run_only(hive)
        runs = FullRuns(monkeypatch)
        written.append(scenario(hive))
        expected = [] if statements else ["handoff"] * 7  # (the retry answers first)
        assert [v for v in runs.verbs if v == "handoff"] == expected
        monkeypatch.undo()
        assert hive.get(5).blocked_by == [1]  # (the retry made no task)
    assert written[0] == written[1]
    states = [row[2] for row in written[0][:7]]
    assert states == [State.routed, State.routed, State.rejected, State.routed, State.routed,
                      State.routed, State.waiting]


def wrong_cases(hive: Hive) -> dict[str, Any]:
    hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
                 packet=packet(task="Named"), id="T-named")
    enrolled = Caller.agent("ana/enrolled", "desktop")
    hive.enrol(OWNER, "ana/enrolled", projects=["demo"])
    return {
        "an id taken by another task": lambda: hive.handoff(
            OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
            packet=packet(task="Other"), id="T-named"),
        "an enrolled agent outside its projects": lambda: hive.handoff(
            enrolled, requester="ana/enrolled", assignee="ana/coder", project="site",
            packet=packet()),
        "an unknown dependency": lambda: hive.handoff(
            OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
            packet=packet(), depends_on=[99]),
        "a guest for another": lambda: hive.handoff(
            GUEST, requester="ana/planner", assignee="ana/coder", project="demo",
            packet=packet()),
    }


def test_handoff_refusals_read_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, wrong_cases)
    assert said["an id taken by another task"][1] == "duplicate_id"
    assert said["an enrolled agent outside its projects"][1] == "optin_scope"


def stopped(hive: Hive) -> dict[str, Any]:
    """An agent the owner stopped (refused in the statement's transaction, in the
    full run's words; a store of its own)."""
    agent = Caller.agent("ana/stopped", "desktop")
    hive.stop(OWNER, agent="ana/stopped")
    return {"a stopped agent": lambda: hive.handoff(
        agent, requester="ana/stopped", assignee="ana/coder", project="demo",
        packet=packet())}


def test_a_stopped_agent_is_refused_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    assert refusals_both_ways(open_hive, tmp_path, stopped)["a stopped agent"][1] == "vetoed"


def test_an_enrolled_caller_s_handoff_is_its_statement(
        open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store holds an enrolment's projects (migration 21): within them, an enrolled
    agent's handoff is its statement; outside them, the full run refuses it."""
    hive = open_hive()
    hive.enrol(OWNER, "ana/planner", projects=["demo"])
    runs = FullRuns(monkeypatch)
    assert own_task(hive) and hive.handoff(
        PLANNER, requester="ana/planner", assignee="ana/coder", project="demo",
        packet=packet()).state is State.routed
    assert runs.verbs == []
    assert refusal(lambda: hive.handoff(
        PLANNER, requester="ana/planner", assignee="ana/coder", project="shop",
        packet=packet()))[1] == "optin_scope"
    assert runs.verbs == ["handoff"]


class Racer:
    """While the gate is asked, another connection makes the same handoff (same id)."""

    def __init__(self, other: Hive, content: str) -> None:
        self.other, self.content = other, content
        self.made: list[Any] = []

    @hookimpl
    def hivelite_permission_gate(self, task: Any, hive: Any) -> None:
        if not self.made:
            import threading

            thread = threading.Thread(target=lambda: self.made.append(self.other.handoff(
                OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
                packet=packet(task=self.content), id="T-raced")))
            thread.start()
            thread.join()


@pytest.mark.parametrize("content", ["The same", "Another one"])
def test_an_id_taken_while_the_gate_was_asked_is_the_same_task_or_a_duplicate(
        open_hive: OpenHive, content: str) -> None:
    """The same handoff made meanwhile: its task is the answer; another one under that id:
    ``duplicate_id``. The statement's insert meets the store's unique id, and the full run
    says which."""
    other = open_hive()
    racer = Racer(other, content)
    hive = open_hive(plugins=[racer])
    call = lambda: hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",  # noqa: E731
                                project="demo", packet=packet(task="The same"), id="T-raced")
    if content == "The same":
        assert call().number == racer.made[0].number
    else:
        with pytest.raises(Exception) as refused:
            call()
        assert getattr(refused.value, "reason", None) == "duplicate_id"
    assert [t.number for t in hive.list()] == [racer.made[0].number]
