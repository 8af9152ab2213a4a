"""The verbs a store writes as their statements (issue 47): on SQLite ``claim``, ``next``,
``submit`` and the holder's ``checkpoint``, ``update``, ``renew``, ``pause`` and
``release``, are one write transaction each whose statements the store's rules check,
reading none of the owner's controls, enrolments or budgets first (they fold them in);
every other case takes the write path's full run, which decides and explains as it always
did.

The statements and the full run are held to the same journal, the same answers and the
same refusals, case by case.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hivelite import (
    Caller,
    ForbiddenRight,
    Hive,
    HiveliteError,
    InvalidState,
    ManualClock,
    NotFound,
    State,
    hookimpl,
)
from hivelite.store.doctor import diagnose_file
from hivelite.store.sqlite import SqliteTx
from hivelite.verbs.base import HiveBase

from . import rawsql
from .conftest import CODER, OWNER, START, own_task, packet, traced

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]
ADMISSION = re.compile(r"SELECT [^()]* FROM controls\b")
"""What the full run reads before a holder's write (the statements fold the controls into
their own ``WHERE``). The plugins a store requires are this process's question,
and a claim's budget the day's: each read, as every write reads them, when another
connection may have changed them."""


class FullRuns:
    """The verbs that took the write path's full run (``HiveBase._attempt``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.verbs: list[str] = []
        attempt = HiveBase._attempt

        def counted(hive: HiveBase, caller: Any, body: Any, verb: str, *args: Any,
                    **kwargs: Any) -> Any:
            self.verbs.append(verb)
            return attempt(hive, caller, body, verb, *args, **kwargs)

        monkeypatch.setattr(HiveBase, "_attempt", counted)


@pytest.fixture
def opened(db_path: Path, clock: ManualClock) -> Iterator[Callable[..., Hive]]:
    hives: list[Hive] = []

    def open_(**options: Any) -> Hive:
        hive = Hive.open(db_path, owner="ana", clock=clock, **options)
        hives.append(hive)
        return hive

    yield open_
    for hive in hives:
        hive.close()


def cycle(hive: Hive, caller: Caller = CODER, **submitted: Any) -> tuple[Any, Any]:
    lease = hive.claim_next(caller)
    fields = {"summary": "done", "evidence": EVIDENCE} | submitted
    receipt = hive.submit(caller, lease.number, lease_id=lease.lease_id,
                          token=lease.fencing_token, **fields)
    return lease, receipt


def test_next_and_submit_are_one_write_transaction_each_in_the_plain_case(
        opened: Callable[..., Hive], db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hive = opened()
    first = own_task(hive)
    own_task(hive)
    runs = FullRuns(monkeypatch)
    seen = traced(hive)
    lease, receipt = cycle(hive)
    assert runs.verbs == []
    assert seen.count("BEGIN IMMEDIATE") == 2, seen
    alone = [s for s in seen if s.startswith("SELECT")]
    assert not [s for s in alone if ADMISSION.match(s)], alone
    assert len([s for s in alone if "FROM required_plugins" in s]) <= 1, alone
    assert len([s for s in alone if "FROM budgets" in s]) <= 1, alone
    assert len([s for s in alone if s.startswith("SELECT agent, projects")]) <= 1, alone
    assert (lease.number, lease.fencing_token, lease.holder) == (first, 1, "ana/coder")
    view = hive.get(first)
    assert view.task.state is State.approval and receipt.state is State.approval
    assert receipt.seq == hive.history(first)[-1].seq == hive.last_seq()
    assert lease.seq == hive.history(first)[-4].seq  # the claim, then the three moves
    assert all(f.ok for f in diagnose_file(db_path)), diagnose_file(db_path)


def case_enrolment(hive: Hive) -> None:
    hive.enrol(OWNER, "ana/coder", projects=["demo"])


def test_a_veto_of_the_holder_is_passed_over_by_its_statements(
        opened: Callable[..., Hive], monkeypatch: pytest.MonkeyPatch) -> None:
    """A veto of the holder on its best task: ``next``'s statement passes over that task and
    takes the next, and the holder's writes there are their statements; a claim of the
    vetoed task is refused (the full run's words), nothing written."""
    hive = opened()
    vetoed = own_task(hive, priority="high")
    number = own_task(hive)
    hive.veto(OWNER, vetoed, agent="ana/coder")
    runs = FullRuns(monkeypatch)
    lease, receipt = cycle(hive)
    assert (lease.number, receipt.state) == (number, State.approval)
    assert runs.verbs == []
    seq = hive.last_seq()
    with pytest.raises(ForbiddenRight) as refused:
        hive.claim(CODER, vetoed)
    assert refused.value.reason == "vetoed" and runs.verbs == ["claim"]
    assert hive.last_seq() == seq and hive.get(vetoed).task.state is State.routed


def test_an_enrolled_agent_s_claim_and_writes_under_it_are_their_statements(
        opened: Callable[..., Hive], monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim names the enrolment it is taken under, and the store's rules hold the lease
    and its holder's moves to it: an enrolled agent's cycle takes no full run (its other
    verbs do: a verdict's or an answer's scope is no rule of the store's)."""
    hive = opened()
    number = own_task(hive, priority="high")
    case_enrolment(hive)
    runs = FullRuns(monkeypatch)
    lease, receipt = cycle(hive)
    assert (lease.number, receipt.state) == (number, State.approval)
    assert runs.verbs == []


@pytest.mark.parametrize("control", ["hold", "stop", "veto"])
def test_a_control_on_another_agent_or_instance_leaves_the_statements(
        opened: Callable[..., Hive], control: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a control that names the holder or its instance, or stops every agent, sends
    its statements to the full run: the owner holding one agent slows no other."""
    hive = opened()
    number = own_task(hive, priority="high")
    other = own_task(hive, assignee="ana/other")
    {"hold": lambda: hive.hold(OWNER, agent="ana/other"),
     "stop": lambda: hive.stop(OWNER, instance="desk"),
     "veto": lambda: hive.veto(OWNER, other, agent="ana/other")}[control]()
    runs = FullRuns(monkeypatch)
    lease, receipt = cycle(hive)
    assert (lease.number, receipt.state) == (number, State.approval)
    assert runs.verbs == []


@pytest.mark.parametrize(("control", "reason"), [("stop", "vetoed"), ("hold", "held")])
def test_a_stop_of_every_agent_or_a_hold_of_the_holder_s_instance_takes_the_full_run(
        opened: Callable[..., Hive], monkeypatch: pytest.MonkeyPatch, control: str,
        reason: str) -> None:
    hive = opened()
    own_task(hive)
    if control == "stop":
        hive.stop(OWNER, everyone=True)
    else:
        hive.hold(OWNER, instance="Laptop.")  # (the holder's, as the owner spells it)
    runs = FullRuns(monkeypatch)
    with pytest.raises(ForbiddenRight) as refused:
        hive.claim_next(CODER)
    assert (refused.value.reason, runs.verbs) == (reason, ["next"])


def test_a_lease_run_out_is_swept_by_the_statement_first(
        opened: Callable[..., Hive], clock: ManualClock, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    hive = opened()
    stale = own_task(hive, priority="high")
    hive.claim(CODER, stale, minutes=5)
    fresh = own_task(hive)
    clock.advance(minutes=6)
    runs = FullRuns(monkeypatch)
    lease = hive.claim_next(CODER)
    assert runs.verbs == []
    assert lease.number == stale and lease.fencing_token == 2  # swept, then taken again
    assert [e.reason for e in hive.history(stale)][-2:] == ["expired", "claimed"]
    assert hive.get(fresh).task.state is State.routed


def test_a_required_plugin_this_process_runs_and_a_kept_answer_take_the_statements(
        opened: Callable[..., Hive], monkeypatch: pytest.MonkeyPatch) -> None:
    class Decides:
        @hookimpl
        def hivelite_merge_threshold(self, task: Any, hive: Any) -> int:
            return 0

    hive = opened(plugins=[Decides()])
    hive.require_plugin(OWNER, "Decides")
    own_task(hive)
    own_task(hive)
    runs = FullRuns(monkeypatch)
    lease, receipt = cycle(hive)
    assert receipt.state is State.completed
    assert runs.verbs == []  # (the process runs what the store requires)
    hive.unrequire_plugin(OWNER, "Decides")
    runs.verbs.clear()
    lease = hive.claim_next(CODER, request_id="r-1")
    again = hive.claim_next(CODER, request_id="r-1")  # the kept answer, under the lock
    assert (again.lease_id, again.seq) == (lease.lease_id, lease.seq)
    assert runs.verbs == []


def test_a_process_without_a_required_plugin_is_refused_next_and_submit(
        opened: Callable[..., Hive]) -> None:
    """The store requires a plugin this process did not load: its statements write
    nothing, and it is refused (``policy_missing``), as every other write."""
    class Decides:
        @hookimpl
        def hivelite_merge_threshold(self, task: Any, hive: Any) -> int:
            return 0

    owner = opened(plugins=[Decides()])
    owner.require_plugin(OWNER, "Decides")
    number = own_task(owner)
    lease = owner.claim(CODER, number)
    without = opened()
    for call in (lambda: without.claim_next(CODER),
                 lambda: without.submit(CODER, number, lease_id=lease.lease_id,
                                        token=lease.fencing_token, summary="done",
                                        evidence=EVIDENCE)):
        kind, reason, _ = refusal(call)
        assert (kind, reason) == (ForbiddenRight, "policy_missing")
    assert owner.get(number).task.state is State.accepted


def refusal(call: Callable[[], Any]) -> tuple[type[HiveliteError], str, str]:
    with pytest.raises(HiveliteError) as caught:
        call()
    return type(caught.value), caught.value.reason, caught.value.message


WRONG = {
    "token": lambda lease: {"lease_id": lease.lease_id, "token": lease.fencing_token + 1},
    "lease id": lambda lease: {"lease_id": "L0000000000000000", "token": lease.fencing_token},
    "instance": lambda lease: {"lease_id": lease.lease_id, "token": lease.fencing_token,
                               "caller": Caller.agent("ana/coder", "desktop")},
    "agent": lambda lease: {"lease_id": lease.lease_id, "token": lease.fencing_token,
                            "caller": Caller.agent("ana/other", "laptop")},
    "expired": lambda lease: {"lease_id": lease.lease_id, "token": lease.fencing_token,
                              "advance": 20},
}


@pytest.mark.parametrize("wrong", WRONG)
@pytest.mark.parametrize("statements", [True, False], ids=["statements", "full run"])
def test_a_fence_that_does_not_hold_is_refused_as_before(
        opened: Callable[..., Hive], db_path: Path, clock: ManualClock, wrong: str,
        statements: bool) -> None:
    """The statement takes nothing, and the full run names why: the same error, reason and
    message with statements as without; the store is as it was."""
    hive = opened()
    if not statements:
        hive.store.statements = frozenset()  # type: ignore[misc]
    number = own_task(hive)
    lease = hive.claim_next(CODER)
    given = WRONG[wrong](lease)
    clock.advance(minutes=given.pop("advance", 0))
    caller = given.pop("caller", CODER)
    before = rawsql.snapshot_file(db_path) if wrong != "expired" else None
    kind, reason, message = refusal(lambda: hive.submit(
        caller, number, summary="done", evidence=EVIDENCE, **given))
    expected = {"token": (InvalidState, "stale_claim"), "lease id": (InvalidState, "stale_claim"),
                "instance": (ForbiddenRight, "not_permitted"),
                "agent": (ForbiddenRight, "not_permitted"),
                "expired": (InvalidState, "stale_claim")}[wrong]
    assert (kind, reason) == expected, message
    assert str(number) in message or lease.lease_id in message or "expired" in message
    if before is not None:
        assert rawsql.snapshot_file(db_path) == before


class Meddler:
    """Between the plugins' questions and the write, another process gives the claim back
    and its holder claims the task again (a new lease and token)."""

    def __init__(self, other: Hive) -> None:
        self.other = other

    @hookimpl
    def hivelite_check_evidence(self, task: Any, result: Any, hive: Any,
                                evidence: Any) -> None:
        def meddle() -> None:
            lease = self.other.lease(CODER, task.id)
            self.other.release(CODER, task.id, lease_id=lease.lease_id,
                               token=lease.fencing_token)
            self.other.claim(CODER, task.id)

        thread = threading.Thread(target=meddle)  # not inside this hook: its own write
        thread.start()
        thread.join()


@pytest.mark.parametrize("statements", [True, False], ids=["statements", "full run"])
def test_a_claim_taken_again_between_the_questions_and_the_write_is_stale(
        opened: Callable[..., Hive], statements: bool) -> None:
    """The fence is checked again where the write is made: the old lease's result is
    refused (``stale_claim``) and the new claim is untouched."""
    other = opened()
    hive = opened(plugins=[Meddler(other)])
    if not statements:
        hive.store.statements = frozenset()  # type: ignore[misc]
    number = own_task(hive)
    lease = hive.claim_next(CODER)
    kind, reason, message = refusal(lambda: hive.submit(
        CODER, number, lease_id=lease.lease_id, token=lease.fencing_token, summary="done",
        evidence=EVIDENCE))
    assert (kind, reason) == (InvalidState, "stale_claim"), message
    assert hive.get(number).task.state is State.accepted
    assert hive.get(number).task.result is None
    assert hive.lease(CODER, number).fencing_token == 2


def test_the_refusals_read_the_same_with_statements_and_without(tmp_path: Path) -> None:
    """Each wrong fence gives the same words through the statement as through the full
    run alone."""
    said: dict[tuple[str, bool], tuple[type[HiveliteError], str, str]] = {}
    for statements in (True, False):
        for wrong, make in WRONG.items():
            path = tmp_path / f"{wrong}-{statements}.db"
            clock = ManualClock(START)
            with Hive.open(path, owner="ana", clock=clock) as hive:
                if not statements:
                    hive.store.statements = frozenset()  # type: ignore[misc]
                number = own_task(hive)
                lease = hive.claim_next(CODER)
                given = make(lease)
                clock.advance(minutes=given.pop("advance", 0))
                caller = given.pop("caller", CODER)
                found = refusal(functools.partial(hive.submit, caller, number,
                                                  summary="done", evidence=EVIDENCE, **given))
                said[(wrong, statements)] = (found[0], found[1],
                                             found[2].replace(lease.lease_id, "L"))
    for wrong in WRONG:
        assert said[(wrong, True)] == said[(wrong, False)], wrong


def test_a_statement_the_stores_rules_refuse_is_undone_and_the_full_run_only_explains(
        opened: Callable[..., Hive], db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the statement wrote before a rule refused it is undone; the full run then
    only explains, and writes nothing: here the guard finds nothing to say (the rule is a
    stand-in), so the store's refusal is the answer, and the task stays routed."""
    hive = opened()
    number = own_task(hive)
    take_next = SqliteTx.take_next

    def refused_after_writing(tx: SqliteTx, *args: Any, **kwargs: Any) -> Any:
        taken = take_next(tx, *args, **kwargs)  # the move is made, then a rule refuses
        refusal = InvalidState("no_such_move", f"refused after taking {taken}")
        refusal.by_store = True  # (as a rule of the store's refuses: from_trigger)
        raise refusal

    monkeypatch.setattr(SqliteTx, "take_next", refused_after_writing)
    runs = FullRuns(monkeypatch)
    seq = hive.last_seq()
    with pytest.raises(InvalidState) as refused:
        hive.claim_next(CODER)
    assert refused.value.reason == "no_such_move" and runs.verbs == ["next"]
    assert hive.last_seq() == seq and hive.get(number).task.state is State.routed
    assert all(f.ok for f in diagnose_file(db_path)), diagnose_file(db_path)


def scenario(hive: Hive) -> list[tuple[Any, ...]]:
    """The same cycles, each outcome a submission can have; what every answer said and
    every task's journal, without the times and lease ids a run makes afresh."""
    said: list[tuple[Any, ...]] = []
    numbers = [own_task(hive) for _ in range(4)]
    _, receipt = cycle(hive)  # approval (threshold 1)
    said.append((receipt.number, receipt.state, receipt.waiting_on))
    _, receipt = cycle(hive, outcome="failed", summary="it broke")  # back to routed
    said.append((receipt.number, receipt.state))
    _, receipt = cycle(hive)  # the failed one again: a second result, version 2
    said.append((receipt.number, receipt.state))
    hive.set_policy(OWNER, "threshold", 0)
    lease = hive.claim_next(CODER)
    checkpointed = hive.checkpoint(CODER, lease.number, lease_id=lease.lease_id,
                                   token=lease.fencing_token, progress="half")
    receipt = hive.submit(CODER, lease.number, lease_id=lease.lease_id,
                          token=lease.fencing_token, summary="done", evidence=EVIDENCE,
                          draft={"kind": "document", "content": "notes"})
    said.append((checkpointed.state, receipt.number, receipt.state))
    more = [own_task(hive) for _ in range(2)]
    lease = hive.claim(CODER, more[0])
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    said.append((hive.update(CODER, more[0], summary="reading", **fence).state,
                 hive.renew(CODER, more[0], minutes=10, **fence).expires_at,
                 hive.checkpoint(CODER, more[0], progress="a third", **fence).state,
                 hive.pause(CODER, more[0], on="human", reason="which version?",
                            **fence).waiting_on))
    hive.answer(OWNER, more[0], text="16")
    again = hive.resume(CODER, more[0])
    said.append(hive.release(CODER, more[0], lease_id=again.lease_id,
                             token=again.fencing_token, reason="not mine").state)
    lease = hive.claim(CODER, more[1])
    said.append(hive.release(CODER, more[1], lease_id=lease.lease_id,
                             token=lease.fencing_token).state)
    numbers += more
    for number in numbers:
        view = hive.get(number)
        said.append((number, view.task.state, view.task.result and view.task.result.summary,
                     view.attempts))
        said.extend((e.number, e.from_state, e.to_state, e.actor, e.reason,
                     {k: v for k, v in (e.detail or {}).items()
                      if k not in ("expires_at", "draft")})
                    for e in hive.history(number))
    return said


def test_the_statements_leave_the_journal_the_full_run_leaves(
        tmp_path: Path, clock: ManualClock) -> None:
    written = []
    for statements in (True, False):
        with Hive.open(tmp_path / f"{statements}.db", owner="ana", clock=clock) as hive:
            if not statements:
                hive.store.statements = frozenset()  # type: ignore[misc]
            written.append(scenario(hive))
        assert all(f.ok for f in diagnose_file(tmp_path / f"{statements}.db"))
    assert written[0] == written[1]
    assert any(row[1:3] == (State.verifying, State.approval) for row in written[0]
               if len(row) == 6)


def test_claim_by_number_or_id_is_one_write_transaction_in_the_plain_case(
        opened: Callable[..., Hive], db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hive = opened()
    first, second = own_task(hive), own_task(hive)
    second_id = hive.get(second).task.id
    runs = FullRuns(monkeypatch)
    seen = traced(hive)
    by_number = hive.claim(CODER, first)
    by_id = hive.claim(CODER, second_id)
    assert runs.verbs == []
    assert seen.count("BEGIN IMMEDIATE") == 2, seen
    assert not [s for s in seen if ADMISSION.match(s)], seen
    assert (by_number.number, by_id.number) == (first, second)
    assert by_id.seq == hive.last_seq() and by_number.seq == hive.history(first)[-1].seq
    assert all(f.ok for f in diagnose_file(db_path)), diagnose_file(db_path)


def claim_cases(hive: Hive) -> dict[str, Callable[[], Any]]:
    """A claim refused for each reason a claim has (each task made here, in this order)."""
    open_ = own_task(hive)
    claimed = own_task(hive)
    hive.claim(CODER, claimed)
    blocker = own_task(hive)
    blocked = own_task(hive, packet=packet(depends_on=[hive.get(blocker).task.id]))
    other = own_task(hive, assignee="ana/other")
    roled = own_task(hive, role="tester")
    cancelled = own_task(hive)
    hive.cancel(OWNER, cancelled)
    return {
        "claimed": lambda: hive.claim(CODER, claimed),
        "blocked": lambda: hive.claim(CODER, blocked),
        "not the assignee": lambda: hive.claim(CODER, other),
        "a role": lambda: hive.claim(CODER, roled),
        "cancelled": lambda: hive.claim(CODER, cancelled),
        "no such task": lambda: hive.claim(CODER, 999),
        "no such id": lambda: hive.claim(CODER, "T-nope"),
        "another instance": lambda: (hive.claim(Caller.agent("ana/coder", "desktop"), open_),
                                     hive.claim(CODER, open_)),
    }


def test_claim_refusals_read_the_same_with_statements_and_without(tmp_path: Path) -> None:
    said: dict[bool, dict[str, tuple[type[HiveliteError], str, str]]] = {}
    for statements in (True, False):
        with Hive.open(tmp_path / f"{statements}.db", owner="ana",
                       clock=ManualClock(START)) as hive:
            if not statements:
                hive.store.statements = frozenset()  # type: ignore[misc]
            said[statements] = {case: refusal(call)
                                for case, call in claim_cases(hive).items()}
    assert said[True] == said[False]
    assert {case: reason for case, (_, reason, _) in said[True].items()} == {
        "claimed": "task_claimed", "blocked": "blocked", "not the assignee": "not_permitted",
        "a role": "not_permitted", "cancelled": "task_closed", "no such task": "no_such_task",
        "no such id": "no_such_task", "another instance": "task_claimed"}


def test_the_benchmark_of_the_statements_runs_both_sides(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    """``python -m bench.statements`` (small): both loops, both sides, a ratio each."""
    from bench import statements

    assert statements.main(["--cycles", "20", "--warm", "5", "--block", "10"]) == 0
    shown = capsys.readouterr().out
    for loop in statements.LOOPS:
        assert f"{loop}:" in shown
    assert shown.count("full run / statements:") == 2
    assert shown.count("us a cycle") == 4


HOLDER_VERBS: dict[str, Callable[[Hive, Caller, int, dict[str, Any]], Any]] = {
    "checkpoint": lambda hive, who, n, fence: hive.checkpoint(who, n, progress="half",
                                                              **fence),
    "update": lambda hive, who, n, fence: hive.update(who, n, summary="reading", **fence),
    "renew": lambda hive, who, n, fence: hive.renew(who, n, minutes=10, **fence),
    "pause": lambda hive, who, n, fence: hive.pause(who, n, on="agent", reason="which one?",
                                                    **fence),
    "release": lambda hive, who, n, fence: hive.release(who, n, reason="not mine", **fence),
    "submit": lambda hive, who, n, fence: hive.submit(who, n, summary="done",
                                                      evidence=EVIDENCE, **fence),
}


@pytest.mark.parametrize("verb", HOLDER_VERBS)
def test_each_holder_verb_is_one_write_transaction_in_the_plain_case(
        opened: Callable[..., Hive], db_path: Path, verb: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    hive = opened()
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    runs = FullRuns(monkeypatch)
    seen = traced(hive)
    answer = HOLDER_VERBS[verb](hive, CODER, number,
                                {"lease_id": lease.lease_id, "token": lease.fencing_token})
    assert runs.verbs == []
    assert seen.count("BEGIN IMMEDIATE") == 1, seen
    assert not [s for s in seen if ADMISSION.match(s)], seen
    view = hive.get(number)
    assert (answer.number, answer.state, answer.waiting_on) == (
        number, view.task.state, view.task.waiting_on)
    journaled = verb not in ("renew",)
    assert answer.seq == (hive.last_seq() if journaled else None)
    assert all(f.ok for f in diagnose_file(db_path)), diagnose_file(db_path)


def test_holder_refusals_read_the_same_with_statements_and_without(tmp_path: Path) -> None:
    """Here the fence is the statement's own (no read comes before it): each wrong fence,
    for each holder verb, takes nothing and the full run names it in the same words."""
    said: dict[tuple[str, str, bool], tuple[type[HiveliteError], str, str]] = {}
    for statements in (True, False):
        for verb, call in HOLDER_VERBS.items():
            for wrong, make in WRONG.items():
                clock = ManualClock(START)
                path = tmp_path / f"{verb}-{wrong}-{statements}.db"
                with Hive.open(path, owner="ana", clock=clock) as hive:
                    if not statements:
                        hive.store.statements = frozenset()  # type: ignore[misc]
                    number = own_task(hive)
                    lease = hive.claim(CODER, number)
                    given = make(lease)
                    clock.advance(minutes=given.pop("advance", 0))
                    caller = given.pop("caller", CODER)
                    before = hive.last_seq()
                    kind, reason, message = refusal(
                        functools.partial(call, hive, caller, number, given))
                    said[(verb, wrong, statements)] = (
                        kind, reason, message.replace(lease.lease_id, "L"))
                    assert hive.last_seq() == before
    for verb in HOLDER_VERBS:
        for wrong in WRONG:
            assert said[(verb, wrong, True)] == said[(verb, wrong, False)], (verb, wrong)
            assert said[(verb, wrong, True)][1] in ("stale_claim", "not_permitted")


@pytest.mark.parametrize("verb", ["checkpoint", "renew", "release"])
def test_a_lease_that_ran_out_is_refused_by_the_fence_itself(
        opened: Callable[..., Hive], clock: ManualClock, verb: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep before a statement ends a lease that ran out; the fence's statement does
    not count on it (here no sweep finds it): a lease past its time is not a fence."""
    hive = opened()
    number = own_task(hive)
    lease = hive.claim(CODER, number, minutes=5)
    clock.advance(minutes=6)
    monkeypatch.setattr(SqliteTx, "lock_overdue", lambda tx, at: [])
    kind, reason, message = refusal(functools.partial(
        HOLDER_VERBS[verb], hive, CODER, number,
        {"lease_id": lease.lease_id, "token": lease.fencing_token}))
    assert (kind, reason) == (InvalidState, "stale_claim"), message
    assert "expired" in message


def test_the_time_is_read_under_the_write_lock(
        opened: Callable[..., Hive], clock: ManualClock, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    """A lease that runs out while the verb waits for the write lock is stale: the
    statement reads the time once it holds the lock, as the full run does (here the wait
    is made certain: the clock moves on as the write begins)."""
    hive = opened()
    number = own_task(hive)
    lease = hive.claim(CODER, number, minutes=5)
    transact = hive.store.transact

    def waited(job: Any, **kwargs: Any) -> Any:
        clock.advance(minutes=6)
        return transact(job, **kwargs)

    monkeypatch.setattr(hive.store, "transact", waited)
    kind, reason, message = refusal(functools.partial(
        hive.checkpoint, CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
        progress="half"))
    assert (kind, reason) == (InvalidState, "stale_claim"), message
    monkeypatch.undo()
    assert [e.at for e in hive.journal()] == sorted(e.at for e in hive.journal())


def test_an_empty_queue_is_answered_by_the_statement(
        opened: Callable[..., Hive], monkeypatch: pytest.MonkeyPatch) -> None:
    """``next`` finding nothing answers ``queue_empty`` at once (the full
    run's pick would find nothing either), an enrolled agent's too; an enrolment that ended
    or gives no ``tasks.work`` is refused by the full run, in its words."""
    hive = opened()
    runs = FullRuns(monkeypatch)
    words = refusal(lambda: hive.claim_next(CODER, project="demo"))
    assert words[:2] == (NotFound, "queue_empty") and runs.verbs == []
    hive.enrol(OWNER, "ana/coder", projects=["demo"])
    runs.verbs.clear()
    assert refusal(lambda: hive.claim_next(CODER, project="demo")) == words
    assert runs.verbs == []
    for change, reason in ((lambda: hive.end_enrolment(OWNER, "ana/coder"), "optin_inactive"),
                           (lambda: hive.enrol(OWNER, "ana/coder", rights=["tasks.propose"]),
                            "optin_scope")):
        change()
        said = refusal(lambda: hive.claim_next(CODER, project="demo"))
        hive.store.statements = frozenset()  # type: ignore[misc]
        assert refusal(lambda: hive.claim_next(CODER, project="demo")) == said
        del hive.store.statements
        assert said[1] == reason


def test_a_veto_lifted_by_another_connection_is_read_by_the_next_statement(
        opened: Callable[..., Hive], monkeypatch: pytest.MonkeyPatch) -> None:
    """The controls are read in the write's own transaction (what a connection knows of
    them is kept only while nobody else writes the file): a veto another process lifts
    frees its task for this connection's very next claim, its statement."""
    hive, other = opened(), opened()
    vetoed = own_task(hive)
    hive.veto(OWNER, vetoed, agent="ana/coder")
    with pytest.raises(ForbiddenRight):
        hive.claim(CODER, vetoed)  # (the veto, as this connection knows it now)
    other.lift(OWNER, task=vetoed, agent="ana/coder")
    runs = FullRuns(monkeypatch)
    assert hive.claim(CODER, vetoed).number == vetoed
    assert runs.verbs == []


class Judge:
    """A plugin that answers the threshold's question (and so needs the task first)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    @hookimpl
    def hivelite_merge_threshold(self, task: Any, hive: Any) -> int:
        self.asked.append(task.id)
        return 2


def test_a_submission_the_policy_alone_judges_reads_nothing_before_the_lock(
        opened: Callable[..., Hive], db_path: Path) -> None:
    """No plugin checks evidence or sets the threshold: the submission is its statements
    alone (the threshold read under the lock, the task's project's own); with a plugin
    that answers, the task is read before the lock and the plugin asked, as before."""
    hive = opened()
    hive.set_policy(OWNER, "threshold", 2, project="demo")
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    seen = traced(hive)
    receipt = hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                          summary="done", evidence=EVIDENCE)
    assert seen.count("BEGIN") == 0 and seen.count("BEGIN IMMEDIATE") == 1, seen
    assert receipt.state is State.approval
    assert hive.history(number)[-1].reason == (
        "awaiting 2 independent confirmation(s) or sign-off"
        " (threshold set by store policy (project demo))")
    judge = Judge()
    other = opened(plugins=[judge])
    second = own_task(other)
    lease = other.claim(CODER, second)
    seen = traced(other)
    other.submit(CODER, second, lease_id=lease.lease_id, token=lease.fencing_token,
                 summary="done", evidence=EVIDENCE)
    assert seen.count("BEGIN") >= 1 and judge.asked == [other.get(second).task.id]
    assert other.history(second)[-1].detail == {"threshold": 2, "decided_by": "Judge"}
    assert all(f.ok for f in diagnose_file(db_path)), diagnose_file(db_path)


def test_a_result_that_does_not_validate_is_refused_after_the_fence(
        opened: Callable[..., Hive]) -> None:
    """A stale claim's invalid result is refused as stale (the fence comes first), and a
    live claim's as invalid, with or without the statements."""
    for statements in (True, False):
        hive = opened()
        if not statements:
            hive.store.statements = frozenset()  # type: ignore[misc]
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        for token, expected in ((lease.fencing_token + 1, "stale_claim"),
                                (lease.fencing_token, "invalid_result")):
            _, reason, _ = refusal(functools.partial(
                hive.submit, CODER, number, lease_id=lease.lease_id, token=token,
                summary="", evidence=EVIDENCE))
            assert reason == expected, (statements, token)


def test_a_stale_submission_is_named_before_a_write_that_cannot_begin(
        db_path: Path, tmp_path: Path, clock: ManualClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A submission the policy alone judges takes no read before the lock; when no write
    can begin (the owner's key is not here, the store is busy), a claim that is not the
    caller's, or a task that is not there, is still named first, as from the snapshot the
    submission always read before the lock; a live claim meets the write's own error."""
    from hivelite import StoreBusy, StoreError

    with Hive.open(db_path, owner="ana", clock=clock) as hive:
        number = own_task(hive)
        lease = hive.claim(CODER, number)
    stale = {"lease_id": lease.lease_id, "token": lease.fencing_token + 1}
    live = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    monkeypatch.setenv("HIVELITE_KEYS", str(tmp_path / "no-keys"))
    with Hive.open(db_path, clock=clock) as hive:
        submit = functools.partial(hive.submit, CODER, summary="done", evidence=EVIDENCE)
        assert refusal(functools.partial(submit, number, **stale))[1] == "stale_claim"
        assert refusal(functools.partial(submit, 99, **stale))[1] == "no_such_task"
        assert refusal(functools.partial(submit, number, **live))[:2] == (
            StoreError, "key_missing")
    monkeypatch.delenv("HIVELITE_KEYS")
    with Hive.open(db_path, clock=clock) as hive:
        def busy(job: Any, **kwargs: Any) -> Any:
            raise StoreBusy("busy", "another writer held the store for more than 10 s")

        monkeypatch.setattr(hive.store, "transact", busy)
        submit = functools.partial(hive.submit, CODER, summary="done", evidence=EVIDENCE)
        assert refusal(functools.partial(submit, number, **stale))[1] == "stale_claim"
        assert refusal(functools.partial(submit, number, **live))[:2] == (StoreBusy, "busy")


def test_a_refusal_of_a_statement_is_explained_by_its_own_verb_alone(
        opened: Callable[..., Hive], monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule refuses a submission's statement, and the submission then fails before its
    full run (the claim ended meanwhile): the next write on the thread (the owner's) is its
    own, not taken for the explanation of the refused one."""
    from hivelite.verbs import results

    hive = opened()
    number = own_task(hive)
    lease = hive.claim(CODER, number)

    def refused(*args: Any, **kwargs: Any) -> Any:
        error = InvalidState("stand_in_rule", "refused by the store: stand in rule")
        error.by_store = True
        raise error

    def ended(*args: Any, **kwargs: Any) -> Any:
        raise InvalidState("stale_claim", "the claim ended meanwhile")

    monkeypatch.setattr(results, "_returned", refused)
    monkeypatch.setattr(results, "_read_before_the_lock", ended)
    with pytest.raises(InvalidState) as failed:
        hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)
    assert failed.value.reason == "stale_claim"
    assert hive.set_policy(OWNER, "threshold", 0).threshold == 0
