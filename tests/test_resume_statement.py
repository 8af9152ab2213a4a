"""``resume`` as its statement (issue 47, item 1), on both engines: a task paused on a
person or an agent, taken again by its assignee under a new lease (waiting -> working),
is one write, its receipt carrying the question and its answers; every
other case takes the full run, which refuses in the words it always used.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hivelite import Caller, Hive, ManualClock, State

from .both_ways import full_run_only, refusals_both_ways
from .conftest import CODER, OWNER, START, OpenHive, held_task, own_task
from .test_statements import FullRuns

pytestmark = pytest.mark.contract

OTHER = Caller.agent("ana/other", "laptop")


def paused(hive: Hive, *, on: str = "human", assignee: str = "ana/coder") -> int:
    number = own_task(hive, assignee=assignee)
    who = CODER if assignee == "ana/coder" else OTHER
    lease = hive.claim(who, number)
    hive.pause(who, number, lease_id=lease.lease_id, token=lease.fencing_token, on=on,
               reason="which version?")
    return number


def said(receipt: Any) -> tuple[Any, ...]:
    question = receipt.question
    return (receipt.number, receipt.state, receipt.fencing_token, receipt.holder,
            question and (question.text, question.on, question.asked_by,
                          [(a.text, a.by) for a in question.answers]))


@pytest.mark.parametrize("on", ["human", "agent"])
def test_resume_is_its_statement_and_answers_as_the_full_run(
        open_hive: OpenHive, tmp_path: Path, on: str, monkeypatch: pytest.MonkeyPatch) -> None:
    answers = []
    for statements in (True, False):
        hive = open_hive(path=tmp_path / f"{statements}.db", clock=ManualClock(START))
        if not statements:
            full_run_only(hive)
        number = paused(hive, on=on)
        hive.answer(OWNER, number, text="16")
        runs = FullRuns(monkeypatch)
        receipt = hive.resume(CODER, number)
        assert runs.verbs == ([] if statements else ["resume"])
        monkeypatch.undo()
        view = hive.get(number)
        assert view.task.state is State.working and view.claim is not None
        assert hive.lease(CODER, number).fencing_token == receipt.fencing_token == 2
        assert receipt.seq == hive.last_seq() == hive.history(number)[-1].seq
        answers.append((said(receipt), [(e.from_state, e.to_state, e.actor, e.reason)
                                        for e in hive.history(number)]))
    assert answers[0] == answers[1]
    assert answers[0][0][4] == ("which version?", on, "ana/coder", [("16", "ana")])


def wrong_cases(hive: Hive) -> dict[str, Callable[[], Any]]:
    routed, held = own_task(hive), held_task(hive)
    claimed = own_task(hive)
    hive.claim(CODER, claimed)
    others = paused(hive, assignee="ana/other")
    done = own_task(hive)
    hive.cancel(OWNER, done)
    return {
        "resume a routed task": lambda: hive.resume(CODER, routed),
        "resume a task held for the owner": lambda: hive.resume(CODER, held),
        "resume a claimed task": lambda: hive.resume(CODER, claimed),
        "resume another agent's paused task": lambda: hive.resume(CODER, others),
        "resume a cancelled task": lambda: hive.resume(CODER, done),
        "resume no such task": lambda: hive.resume(CODER, 999),
    }


def test_resume_refusals_read_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, wrong_cases)
    assert said["resume a routed task"][1] == "task_not_open"
    assert said["resume another agent's paused task"][1] == "not_permitted"


def test_a_budget_and_an_enrolment_leave_resume_its_statement(
        open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    hive = open_hive()
    number, other = paused(hive), paused(hive, assignee="ana/other")
    hive.set_budget(OWNER, "ana/coder", tasks=5)
    hive.enrol(OWNER, "ana/other")
    runs = FullRuns(monkeypatch)
    assert hive.resume(CODER, number).state is State.working
    assert hive.resume(OTHER, other).state is State.working
    assert runs.verbs == []
