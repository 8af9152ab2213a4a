"""The verbs a PostgreSQL store writes as their statements (issue 47, item 1): the same eight
as SQLite's (``contract.STATEMENTS``), through the same ``Writer`` methods.

A verb there is two round trips: the ``BEGIN`` with the store's lock, the stamp of its rules,
the rows every write reads first (the owner's controls, the enrolments and budgets, the
store's policy) and the task's row taken ``FOR UPDATE`` (for ``next``: the pick); then the
writes, sent with the ``COMMIT``. The store's rules check every write; a fence that does
not hold takes nothing, and the full run decides and says why, in the words it always
used.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hivelite import Caller, Hive, HiveliteError, InvalidState, ManualClock, State
from hivelite.store.postgres import PostgresTx

from . import pg
from .conftest import CODER, OWNER, START, own_task
from .test_statements import (
    EVIDENCE,
    HOLDER_VERBS,
    WRONG,
    FullRuns,
    claim_cases,
    cycle,
    refusal,
    scenario,
)

pytestmark = pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")


@pytest.fixture
def stores() -> Iterator[Callable[[], str]]:
    """Fresh PostgreSQL stores (a schema each), dropped after the test."""
    made: list[str] = []

    def new() -> str:
        made.append(pg.new_schema())
        return pg.store_url(made[-1])

    yield new
    for name in made:
        pg.drop(name)


@pytest.fixture
def hive(stores: Callable[[], str], clock: ManualClock) -> Iterator[Hive]:
    with Hive.open(stores(), owner="ana", clock=clock) as opened:
        yield opened


def full_run_only(hive: Hive) -> None:
    hive.store.statements = frozenset()  # type: ignore[misc]


def sound(hive: Hive) -> bool:
    return bool(hive.store.chain_sound())  # type: ignore[attr-defined]


def test_each_verb_is_its_statement_in_the_plain_case(
        hive: Hive, monkeypatch: pytest.MonkeyPatch) -> None:
    """``claim``, ``next``, each holder verb and ``submit``: no full run, and each answer
    is what the store then shows (the receipt's seq the task's last row)."""
    numbers = [own_task(hive) for _ in range(len(HOLDER_VERBS) + 1)]
    runs = FullRuns(monkeypatch)
    lease = hive.claim_next(CODER)
    assert lease.number == numbers[0] and lease.fencing_token == 1
    assert lease.seq == hive.history(numbers[0])[-1].seq == hive.last_seq()
    for verb, number in zip(HOLDER_VERBS, numbers[1:], strict=True):
        lease = hive.claim(CODER, hive.get(number).task.id)
        assert lease.seq == hive.last_seq() and lease.fencing_token == 1
        answer = HOLDER_VERBS[verb](hive, CODER, number,
                                    {"lease_id": lease.lease_id, "token": lease.fencing_token})
        view = hive.get(number)
        assert (answer.number, answer.state, answer.waiting_on) == (
            number, view.task.state, view.task.waiting_on), verb
        assert answer.seq == (None if verb == "renew" else hive.last_seq()), verb
    assert runs.verbs == []
    assert sound(hive)


def test_a_verb_is_two_round_trips_when_the_policy_alone_judges(
        stores: Callable[[], str]) -> None:
    """Counted as ``python -m bench.engines`` counts them: ``next`` and ``submit`` two round
    trips each (a plugin that answers the threshold's question adds the read of the task
    it is given, before the lock: ``test_pg_writers``)."""
    from bench import lib
    from bench.engines import round_trips

    url = stores()
    with Hive.open(url, owner=lib.OWNER) as hive:
        for _ in range(6):
            hive.handoff(lib.OWNER_CALLER, requester="ana/planner", assignee=lib.AGENT,
                         project="bench", packet=lib.PACKET)
    assert round_trips(url, cycles=5, plugin=False) == 4.0


def test_a_veto_of_the_holder_is_passed_over_by_its_statements(
        hive: Hive, monkeypatch: pytest.MonkeyPatch) -> None:
    """A veto of the holder on its best task (read with the BEGIN): ``next``'s statement
    passes over it, and the holder's writes on the task it took are their statements, one
    transaction each; a claim of the vetoed task is refused, nothing written."""
    vetoed = own_task(hive, priority="high")
    number = own_task(hive)
    hive.veto(OWNER, vetoed, agent="ana/coder")
    transactions: list[Any] = []
    transact = hive.store.transact

    def counted(job: Any, **kwargs: Any) -> Any:
        transactions.append(job)
        return transact(job, **kwargs)

    monkeypatch.setattr(hive.store, "transact", counted)
    runs = FullRuns(monkeypatch)
    lease, receipt = cycle(hive)
    assert (lease.number, receipt.state) == (number, State.approval)
    assert runs.verbs == [] and len(transactions) == 2
    seq = hive.last_seq()
    with pytest.raises(HiveliteError) as refused:
        hive.claim(CODER, vetoed)
    assert refused.value.reason == "vetoed" and runs.verbs == ["claim"]
    assert hive.last_seq() == seq


def test_holder_refusals_read_the_same_with_statements_and_without(
        stores: Callable[[], str]) -> None:
    """Each wrong fence, for each holder verb: the statement takes nothing and the full run
    names it in the same words; nothing is written."""
    said: dict[tuple[str, str, bool], tuple[type[HiveliteError], str, str]] = {}
    for statements in (True, False):
        clock = ManualClock(START)
        with Hive.open(stores(), owner="ana", clock=clock) as hive:
            if not statements:
                full_run_only(hive)
            for verb, call in HOLDER_VERBS.items():
                for wrong, make in WRONG.items():
                    number = own_task(hive)
                    lease = hive.claim(CODER, number)
                    given = make(lease)
                    advance = given.pop("advance", 0)
                    clock.advance(minutes=advance)
                    caller = given.pop("caller", CODER)
                    before = hive.last_seq()
                    kind, reason, message = refusal(
                        functools.partial(call, hive, caller, number, given))
                    said[(verb, wrong, statements)] = (
                        kind, reason, message.replace(lease.lease_id, "L").replace(
                            str(number), "N"))
                    if not advance:  # (a lease run out is swept, and journaled)
                        assert hive.last_seq() == before, (verb, wrong)
                    hive.release(OWNER, number) if hive.get(number).claim else None
    for verb in HOLDER_VERBS:
        for wrong in WRONG:
            assert said[(verb, wrong, True)] == said[(verb, wrong, False)], (verb, wrong)
            assert said[(verb, wrong, True)][1] in ("stale_claim", "not_permitted")


def test_claim_refusals_read_the_same_with_statements_and_without(
        stores: Callable[[], str]) -> None:
    said: dict[bool, dict[str, tuple[type[HiveliteError], str, str]]] = {}
    for statements in (True, False):
        with Hive.open(stores(), owner="ana", clock=ManualClock(START)) as hive:
            if not statements:
                full_run_only(hive)
            said[statements] = {case: refusal(call)
                                for case, call in claim_cases(hive).items()}
    assert said[True] == said[False]
    assert said[True]["blocked"][1] == "blocked" and said[True]["a role"][1] == "not_permitted"


@pytest.mark.parametrize("verb", ["checkpoint", "renew", "release", "submit"])
def test_a_lease_that_ran_out_is_refused_by_the_fence_itself(
        hive: Hive, clock: ManualClock, verb: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No sweep finds the lease here: the fence does not take a lease past its time."""
    number = own_task(hive)
    lease = hive.claim(CODER, number, minutes=5)
    clock.advance(minutes=6)
    monkeypatch.setattr(PostgresTx, "lock_overdue", lambda tx, at: [])
    kind, reason, message = refusal(functools.partial(
        HOLDER_VERBS[verb], hive, CODER, number,
        {"lease_id": lease.lease_id, "token": lease.fencing_token}))
    assert (kind, reason) == (InvalidState, "stale_claim"), message
    assert hive.get(number).task.state is State.accepted


def test_a_statement_the_stores_rules_refuse_is_undone_and_the_full_run_only_explains(
        hive: Hive, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the statement wrote before a rule refused it is undone; the full run then
    only explains, and writes nothing: here the guard finds nothing to say (the rule is a
    stand-in), so the store's refusal is the answer, and the task stays routed."""
    number = own_task(hive)
    take_next = PostgresTx.take_next

    def refused_after_writing(tx: PostgresTx, *args: Any, **kwargs: Any) -> Any:
        taken = take_next(tx, *args, **kwargs)
        refusal = InvalidState("no_such_move", f"refused after taking {taken}")
        refusal.by_store = True  # (as a rule of the store's refuses: from_trigger)
        raise refusal

    monkeypatch.setattr(PostgresTx, "take_next", refused_after_writing)
    runs = FullRuns(monkeypatch)
    seq = hive.last_seq()
    with pytest.raises(InvalidState) as refused:
        hive.claim_next(CODER)
    assert refused.value.reason == "no_such_move" and runs.verbs == ["next"]
    assert hive.last_seq() == seq and hive.get(number).task.state is State.routed
    assert sound(hive)


def test_the_statements_leave_the_journal_the_full_run_leaves(
        stores: Callable[[], str]) -> None:
    written = []
    for statements in (True, False):
        with Hive.open(stores(), owner="ana", clock=ManualClock(START)) as hive:
            if not statements:
                full_run_only(hive)
            written.append(scenario(hive))
            assert sound(hive)
    assert written[0] == written[1]


def test_another_agents_lease_is_not_taken_for_the_callers(
        hive: Hive) -> None:
    """The fence compares every part of the lease: the holder's lease id and token given
    by another agent, or from another instance, take nothing."""
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    for caller in (Caller.agent("ana/other", "laptop"), Caller.agent("ana/coder", "desktop")):
        _, reason, _ = refusal(lambda c=caller: hive.checkpoint(c, number, progress="x",
                                                                   **fence))
        assert reason == "not_permitted", caller
    assert hive.get(number).task.state is State.accepted
    assert hive.submit(CODER, number, summary="done", evidence=EVIDENCE,
                       **fence).state is State.approval


ANOTHERS = {
    "an enrolment": lambda owner: owner.enrol(OWNER, "ana/coder", projects=["demo"]),
    "a veto of another task": lambda owner: owner.veto(OWNER, own_task(owner),
                                                       agent="ana/coder"),
}


@pytest.mark.parametrize("change", ANOTHERS)
def test_what_another_connection_set_is_read_by_the_statement(
        stores: Callable[[], str], clock: ManualClock, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, change: str) -> None:
    """The owner sets an enrolment or a control from another process: the holder's next
    statement reads it with its BEGIN. A veto of another task leaves the checkpoint its
    statement; the enrolment changed since the claim takes nothing (no rule had to refuse
    it), and the full run refuses it in words."""
    caplog.set_level(logging.DEBUG, logger="hivelite")
    url = stores()
    with Hive.open(url, owner="ana", clock=clock) as hive, Hive.open(
            url, owner="ana", clock=clock) as owner:
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        ANOTHERS[change](owner)
        runs = FullRuns(monkeypatch)
        try:
            said: object = hive.checkpoint(CODER, number, lease_id=lease.lease_id,
                                           token=lease.fencing_token, progress="half").state
        except HiveliteError as error:
            said = error.reason
        enrolled = change == "an enrolment"
        assert runs.verbs == (["checkpoint"] if enrolled else [])
        assert "the store refused its statement" not in caplog.text
        assert said == ("optin_changed" if enrolled else State.working)


def test_a_write_reads_the_policy_it_set(hive: Hive) -> None:
    """The store's policy travels with every write's BEGIN; a write that sets it reads
    the new one afterwards."""
    assert hive.set_policy(OWNER, "threshold", 0).threshold == 0
    number = own_task(hive)
    assert cycle(hive)[1].state is State.completed
    assert hive.set_policy(OWNER, "threshold", 2).threshold == 2
    assert hive.get(number).task.state is State.completed
