"""Questions that get answered (issue 29 point 4): a holder pauses on a person or an agent,
the owner (or, for an agent's question, another agent) answers, the answer is journaled and
shown on the task, and the holder resumes under a new fencing token and reads it.

Runs on each engine and over HTTP: the answer crosses every transport the holder and the
owner use.
"""

from __future__ import annotations

from typing import Any

import pytest

from hivelite import ForbiddenRight, Hive, InvalidInput, InvalidState, NotFound, State

from .conftest import CODER, OWNER, REVIEWER, Snap, held_task, own_task, refused

pytestmark = pytest.mark.contract

EVIDENCE: list[dict[str, Any]] = [{"kind": "test_output", "summary": "3 passed"}]


def fence(lease: Any) -> dict[str, Any]:
    return {"lease_id": lease.lease_id, "token": lease.fencing_token}


def paused(hive: Hive, on: str = "human", question: str = "which database?") -> int:
    """A task its holder paused on ``question``; its number."""
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.pause(CODER, number, **fence(lease), on=on, reason=question)
    return number


def test_the_question_shows_on_the_task_while_it_waits(hive: Hive) -> None:
    number = paused(hive)
    view = hive.get(number)
    assert (view.task.state, view.task.waiting_on.value) == (State.waiting, "human")
    asked = view.question
    assert asked is not None
    assert (asked.text, asked.on, asked.asked_by, asked.answers) == (
        "which database?", "human", "ana/coder", [])
    assert not asked.answered
    listed = {v.number: v for v in hive.list().items}[number]
    assert listed.question == asked  # the listing shows it too


def test_the_owner_answers_and_the_holder_resumes_and_reads_it(hive: Hive) -> None:
    number = paused(hive)
    receipt = hive.answer(OWNER, number, text="PostgreSQL 16")
    assert (receipt.state, receipt.waiting_on.value) == (State.waiting, "human")
    view = hive.get(number)
    assert [(a.text, a.by) for a in view.question.answers] == [("PostgreSQL 16", "ana")]
    assert view.question.answered
    rows = [r for r in hive.history(number) if r.reason == "answered"]
    assert len(rows) == 1 and rows[0].actor == "ana"
    assert rows[0].detail == {"text": "PostgreSQL 16"}

    resumed = hive.resume(CODER, number)
    assert resumed.fencing_token == 2 and resumed.state is State.working
    assert resumed.question is not None
    assert [a.text for a in resumed.question.answers] == ["PostgreSQL 16"]
    assert hive.get(number).question == resumed.question  # show keeps it until the next move
    hive.submit(CODER, number, **fence(resumed), summary="done", evidence=EVIDENCE)
    assert hive.get(number).question is None


def test_answers_accumulate_and_a_new_pause_asks_afresh(hive: Hive) -> None:
    number = paused(hive)
    hive.answer(OWNER, number, text="PostgreSQL")
    hive.answer(OWNER, number, text="version 16, sorry")
    assert [a.text for a in hive.get(number).question.answers] == ["PostgreSQL",
                                                                    "version 16, sorry"]
    lease = hive.resume(CODER, number)
    hive.pause(CODER, number, **fence(lease), on="human", reason="which port?")
    asked = hive.get(number).question
    assert (asked.text, asked.answers) == ("which port?", [])


def test_a_question_on_a_person_is_the_owners_to_answer(hive: Hive, snap: Snap) -> None:
    number = paused(hive)
    error = refused(snap, ForbiddenRight, "not_permitted",
                    lambda: hive.answer(REVIEWER, number, text="use sqlite"))
    assert "only the owner" in str(error)


def test_a_question_on_an_agent_is_answered_by_another_agent(hive: Hive, snap: Snap) -> None:
    number = paused(hive, on="agent", question="is the schema frozen?")
    refused(snap, ForbiddenRight, "self_answer",
            lambda: hive.answer(CODER, number, text="yes"))  # the asker itself
    hive.answer(REVIEWER, number, text="yes, since migration 9")
    hive.answer(OWNER, number, text="confirmed")
    assert [(a.by, a.text) for a in hive.get(number).question.answers] == [
        ("ana/reviewer", "yes, since migration 9"), ("ana", "confirmed")]


@pytest.mark.parametrize("where", ["routed", "working", "held", "cancelled"])
def test_only_a_task_paused_on_a_question_is_answered(hive: Hive, snap: Snap,
                                                      where: str) -> None:
    if where == "held":
        number = held_task(hive)
    else:
        number = own_task(hive)
        if where == "working":
            lease = hive.claim(CODER, number)
            hive.checkpoint(CODER, number, **fence(lease), progress="started")
        elif where == "cancelled":
            hive.cancel(OWNER, number)
    reason = "task_closed" if where == "cancelled" else "not_asking"
    refused(snap, InvalidState, reason, lambda: hive.answer(OWNER, number, text="go on"))


@pytest.mark.parametrize("text, reason", [("", "answer_required"), ("   ", "answer_required"),
                                          ("x" * 4001, "answer_too_long")])
def test_an_answer_is_one_to_4000_characters(hive: Hive, snap: Snap, text: str,
                                             reason: str) -> None:
    number = paused(hive)
    refused(snap, InvalidInput, reason, lambda: hive.answer(OWNER, number, text=text))


def test_no_such_task(hive: Hive, snap: Snap) -> None:
    refused(snap, NotFound, "no_such_task", lambda: hive.answer(OWNER, 99, text="?"))

