"""``answer`` as its statement (issue 47, item 1), on both engines: an answer to a task
paused on a question is one journal row, which the store's rule of answers (migration 20)
takes only from one who may give it; every other case takes the full run, which refuses in
the words it always used.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hivelite import Caller, Hive, HiveliteError, State, WaitingOn

from .both_ways import refusals_both_ways, written_both_ways
from .conftest import CODER, OWNER, OpenHive, held_task, own_task
from .test_statements import FullRuns

pytestmark = pytest.mark.contract

PLANNER = Caller.agent("ana/planner", "desk")


def paused(hive: Hive, *, on: str = "human") -> int:
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.pause(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token, on=on,
               reason="which version?")
    return number


@pytest.mark.parametrize(("on", "who"), [("human", OWNER), ("agent", OWNER),
                                         ("agent", PLANNER)])
def test_an_answer_is_its_statement_and_answers_as_the_full_run(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on: str,
        who: Caller) -> None:
    def scenario(hive: Hive) -> Any:
        number = paused(hive, on=on)
        receipt = hive.answer(who, number, text="16")
        question = hive.get(number).question
        assert question is not None
        return ((receipt.number, receipt.state, receipt.waiting_on, receipt.seq),
                [(a.text, a.by) for a in question.answers],
                [(e.seq, e.from_state, e.to_state, e.actor, e.reason)
                 for e in hive.history(number)])

    written, ran = written_both_ways(open_hive, tmp_path, scenario, monkeypatch, "answer")
    assert ran == [0, 1]
    (_, state, waiting_on, seq), answers, history = written
    assert (state, waiting_on) == (State.waiting, WaitingOn(on))
    assert answers == [("16", who.name)]
    assert history[-1][0] == seq and history[-1][3:] == (who.name, "answered")


def wrong_cases(hive: Hive) -> dict[str, Callable[[], Any]]:
    routed, held = own_task(hive), held_task(hive)
    claimed = own_task(hive)
    hive.claim(CODER, claimed)
    person, agent = paused(hive), paused(hive, on="agent")
    done = own_task(hive)
    hive.cancel(OWNER, done)
    return {
        "a routed task": lambda: hive.answer(OWNER, routed, text="x"),
        "a task held for the owner": lambda: hive.answer(OWNER, held, text="x"),
        "a claimed task": lambda: hive.answer(OWNER, claimed, text="x"),
        "a cancelled task": lambda: hive.answer(OWNER, done, text="x"),
        "an agent answering a person's question": lambda: hive.answer(PLANNER, person,
                                                                      text="x"),
        "the asker answering itself": lambda: hive.answer(CODER, agent, text="x"),
        "no such task": lambda: hive.answer(OWNER, 999, text="x"),
        "no answer": lambda: hive.answer(OWNER, person, text=" "),
    }


def test_every_refusal_reads_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, wrong_cases)
    assert {case: reason for case, (_, reason, _) in said.items()} == {
        "a routed task": "not_asking", "a task held for the owner": "not_asking",
        "a claimed task": "not_asking", "a cancelled task": "task_closed",
        "an agent answering a person's question": "not_permitted",
        "the asker answering itself": "self_answer", "no such task": "no_such_task",
        "no answer": "answer_required"}


def test_a_stopped_agent_s_answer_is_refused_before_anything_is_written(
        open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    hive = open_hive()
    number = paused(hive, on="agent")
    hive.stop(OWNER, agent=PLANNER.name)
    runs = FullRuns(monkeypatch)
    before = hive.last_seq()
    with pytest.raises(HiveliteError) as refused:
        hive.answer(PLANNER, number, text="16")
    assert (refused.value.reason, runs.verbs) == ("vetoed", [])  # (the full run's words)
    assert hive.last_seq() == before
