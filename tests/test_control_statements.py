"""The owner's controls as their statements (issue 47, item 1), on both engines: ``hold``,
``veto``, ``stop`` and ``lift`` are one write each (the control's row, its journal row, the
end of each lease it covers, checked by the store's rules), whatever else is live; a veto
on a task that is not open, a task or control that is not there, take the full run, which
refuses in the words it always used.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hivelite import Caller, Hive, HiveliteError, State, hookimpl
from hivelite.store import ControlRow

from .both_ways import refusals_both_ways, written_both_ways
from .conftest import CODER, OWNER, OpenHive, own_task
from .test_statements import FullRuns

pytestmark = pytest.mark.contract

OTHER = Caller.agent("ana/other", "desk")


def said(controls: Any) -> Any:
    return [(c.id, c.kind, c.agent, c.instance, c.task, c.ended, c.lifted_at)
            for c in (controls if isinstance(controls, list) else [controls])]


def journal(hive: Hive) -> list[tuple[Any, ...]]:
    return [(e.seq, e.number, e.from_state, e.to_state, e.actor, e.reason)
            for e in hive.journal()]


def scenario(hive: Hive) -> Any:
    """Every control placed and lifted, each ending the leases it covers."""
    first, second, third = own_task(hive), own_task(hive), own_task(hive, assignee="ana/other")
    for number, agent in ((first, CODER), (second, CODER), (third, OTHER)):
        hive.claim(agent, number)
    answers = [said(hive.veto(OWNER, first, agent=CODER.name, reason="not this one")),
               said(hive.hold(OWNER, agent=CODER.name)),
               said(hive.hold(OWNER, instance="Desk")),
               said(hive.stop(OWNER, agent=OTHER.name)),
               said(hive.stop(OWNER, everyone=True)),
               said(hive.lift(OWNER, 1)),
               said(hive.lift(OWNER, agent=CODER.name)),
               said(hive.lift(OWNER, everyone=True))]
    states = [hive.get(n).task.state for n in (first, second, third)]
    return answers, states, said(hive.controls(live=False)), journal(hive)


@pytest.mark.parametrize("verb", ["veto", "hold", "stop", "lift"])
def test_each_control_is_its_statement_and_answers_as_the_full_run(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        verb: str) -> None:
    written, ran = written_both_ways(open_hive, tmp_path, scenario, monkeypatch, verb)
    assert ran[0] == 0 and ran[1] > 0
    answers, states, kept, rows = written
    assert [a[0][5] for a in answers[:5]] == [[1], [2], [3], [], []]
    assert states == [State.routed] * 3
    assert [r[4:] for r in rows if r[1] is not None][-3:] == [
        ("ana", "vetoed"), ("ana", "held"), ("ana", "held")]
    assert [k[6] is not None for k in kept] == [True, True, False, False, True]


def wrong_cases(hive: Hive) -> dict[str, Callable[[], Any]]:
    done = own_task(hive)
    hive.cancel(OWNER, done)
    return {
        "veto on a cancelled task": lambda: hive.veto(OWNER, done, agent=CODER.name),
        "veto on no such task": lambda: hive.veto(OWNER, 999, agent=CODER.name),
        "lift no such control": lambda: hive.lift(OWNER, 7),
        "lift a veto on no such task": lambda: hive.lift(OWNER, agent=CODER.name, task=999),
        "lift what nothing holds": lambda: hive.lift(OWNER, agent=CODER.name),
        "an agent holding": lambda: hive.hold(CODER, agent=OTHER.name),
    }


def test_every_refusal_reads_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, wrong_cases)
    assert {case: reason for case, (_, reason, _) in said.items()} == {
        "veto on a cancelled task": "task_closed", "veto on no such task": "no_such_task",
        "lift no such control": "no_such_control",
        "lift a veto on no such task": "no_such_task",
        "lift what nothing holds": "no_such_control", "an agent holding": "not_permitted"}


def test_the_owner_s_word_takes_no_full_run_for_a_live_control_or_a_required_plugin(
        open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    """No control, enrolment, budget or plugin bears on the owner's controls; the owner's
    moves are their statements with a control live too."""
    class Decides:
        @hookimpl
        def hivelite_merge_threshold(self, task: Any, hive: Any) -> int:
            return 0

    hive = open_hive(plugins=[Decides()])
    number = own_task(hive)
    hive.require_plugin(OWNER, "Decides")
    runs = FullRuns(monkeypatch)
    hive.hold(OWNER, agent=OTHER.name)
    hive.stop(OWNER, instance="desk")
    hive.lift(OWNER, instance="desk")
    assert hive.cancel(OWNER, number).state is State.cancelled  # (the hold is live)
    assert runs.verbs == []


UNENDED = {
    "a hold of the holder": ("hold", CODER.name, None, False, "held"),
    "a hold of its instance": ("hold", None, "laptop", False, "held"),
    "a stop of every agent": ("stop", None, None, False, "vetoed"),
    "a veto of the holder on the task": ("veto", CODER.name, None, True, "vetoed"),
}


@pytest.mark.parametrize("control", UNENDED.values(), ids=UNENDED.keys())
def test_a_holder_bound_by_a_control_that_left_its_claim_writes_nothing_under_it(
        open_hive: OpenHive, control: tuple[str, str | None, str | None, bool, str]) -> None:
    """A control written straight into the store (which ends no claim, as the verbs do)
    binds the holder all the same: its statement takes nothing, and the full run refuses
    in words; nothing is written."""
    kind, agent, instance, on_task, reason = control
    hive = open_hive()
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    with hive.store.write() as tx:
        tx.add_control(ControlRow(0, kind, agent, instance, number if on_task else None,
                                  "2026-12-02T09:00:00.000Z", OWNER.name, None))
    before = hive.last_seq()
    with pytest.raises(HiveliteError) as refused:
        hive.checkpoint(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                        progress="half")
    assert refused.value.reason == reason
    assert hive.last_seq() == before and hive.get(number).task.state is State.accepted


BEFORE_THE_BUDGET = {"a hold": "held", "a stop": "vetoed", "an ended enrolment": "optin_inactive"}


@pytest.mark.parametrize("then", BEFORE_THE_BUDGET)
def test_a_control_or_an_ended_enrolment_is_named_before_the_budget(
        open_hive: OpenHive, then: str) -> None:
    """The full run's order: the owner's controls, then the enrolment, then the day's
    budget. A held or stopped agent, or one whose enrolment ended, that has used its
    claims for the day is told why it may not claim at all, not to come back tomorrow."""
    hive = open_hive()
    hive.enrol(OWNER, CODER.name)
    hive.set_budget(OWNER, CODER.name, tasks=1)
    first, second = own_task(hive), own_task(hive)
    hive.claim(CODER, first)
    {"a hold": lambda: hive.hold(OWNER, agent=CODER.name),
     "a stop": lambda: hive.stop(OWNER, agent=CODER.name),
     "an ended enrolment": lambda: hive.end_enrolment(OWNER, CODER.name)}[then]()
    before = hive.last_seq()
    for claim in (lambda: hive.claim(CODER, second), lambda: hive.claim_next(CODER)):
        with pytest.raises(HiveliteError) as refused:
            claim()
        assert refused.value.reason == BEFORE_THE_BUDGET[then]
    assert hive.last_seq() == before


def test_a_veto_leaves_its_agent_s_watches_of_that_task_alone(open_hive: OpenHive) -> None:
    """A veto binds its agent's writes about the task, not the watches it keeps of it: an
    agent vetoed on a task still follows it, and cancels what it follows."""
    hive = open_hive()
    number = own_task(hive)
    hive.veto(OWNER, number, agent=OTHER.name)
    made = hive.watch(OTHER, "await", number=number)
    assert made.number == number
    assert hive.settle_watch(OTHER, made.id, cancelled=True).id == made.id
