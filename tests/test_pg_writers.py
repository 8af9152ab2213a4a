"""Writers side by side on a PostgreSQL store (docs/postgres.md, "Concurrency, round trips
and the chain"): what letting writes on different tasks overlap must keep, and that they
do overlap.

A write is held open mid-way on purpose: the store reads its clock inside the write's
transaction (after its ``BEGIN``, its lock and the reads sent with them), so a clock that
waits for the test keeps one write open while another runs; a wrapped ``start_lease``
keeps a claim open after its lease row. The properties hold whatever the timing: an
outbox cursor that follows the journal while writers on different tasks commit sees
every row once; an owner's hold that commits while an agent's claim is in flight leaves
the agent no live claim; a budgeted agent's two claims in flight never pass its budget;
a writer on another task commits while one is held open, never waiting on a lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from hivelite import Caller, Hive, HiveliteError, ManualClock
from hivelite.store.pg_doctor import diagnose_url

from . import pg
from .conftest import CODER, OWNER, START, own_task, packet

pytestmark = pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")

TESTER = Caller.agent("ana/tester", "desktop")
EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]
WAIT_S = 30.0
"""How long a step waits for another thread before the test gives up (a hang, not a
timing: every wait below ends as soon as the awaited thing happens)."""


class HeldClock(ManualClock):
    """A manual clock that, once :meth:`hold` is called, keeps the next write that reads
    it waiting (inside its transaction) until :meth:`let_go`."""

    def __init__(self, start: str) -> None:
        super().__init__(start)
        self.entered = threading.Event()
        self._release = threading.Event()
        self._armed = False

    def hold(self) -> None:
        self._armed = True

    def let_go(self) -> None:
        self._release.set()

    def __call__(self) -> datetime:
        if self._armed:
            self._armed = False
            self.entered.set()
            self._release.wait(WAIT_S)
        return self.now


@pytest.fixture
def url() -> Iterator[str]:
    name = pg.new_schema()
    yield pg.store_url(name)
    pg.drop(name)


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException]]:
    """``call`` on a thread of its own (its own connection); what it raised, kept."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the test
            failed.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, failed


def waits_on_lock(schema: str) -> bool:
    """Whether some session of this store's tests is waiting on a lock right now."""
    with pg.connect() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = 'hivelite' AND wait_event_type = 'Lock'").fetchone()
    return bool(row and row[0])


def test_an_outbox_cursor_sees_every_row_once_while_writers_on_other_tasks_commit(
        url: str) -> None:
    """Three writers claim and submit tasks of their own while a reader follows the
    journal by number (``journal_after``, as the notify plugin's cursor does): the reader
    sees every row exactly once, in order, with no gap, however the commits interleave."""
    clock = ManualClock(START)
    agents = [Caller.agent(f"ana/worker{i}", "laptop") for i in range(3)]
    with Hive.open(url, owner="ana", clock=clock) as hive:
        tasks = {a.name: [own_task(hive, assignee=a.name) for _ in range(6)] for a in agents}
        done = threading.Event()
        seen: list[int] = []

        def follow() -> None:
            cursor = 0
            while True:
                last_round = done.is_set()
                with hive.store.read() as reader:
                    rows = reader.journal_after(cursor)
                for row in rows:
                    if row.seq != cursor:  # (a submission's moves share its one row)
                        seen.append(row.seq)
                    cursor = row.seq
                if last_round:
                    return

        def work(agent: Caller) -> None:
            for number in tasks[agent.name]:
                lease = hive.claim(agent, number)
                hive.submit(agent, number, lease_id=lease.lease_id,
                            token=lease.fencing_token, summary="done", evidence=EVIDENCE)

        follower, follower_failed = in_thread(follow)
        workers = [in_thread(lambda a=a: work(a)) for a in agents]  # type: ignore[misc]
        for thread, _ in workers:
            thread.join(WAIT_S)
        done.set()
        follower.join(WAIT_S)
        assert [f for _, failed in workers for f in failed] == []
        assert follower_failed == []
        with hive.store.read() as reader:
            every = list(dict.fromkeys(r.seq for r in reader.journal()))
    assert every == list(range(1, len(every) + 1))
    assert seen == every  # each once, in order: no row committed behind the cursor


def test_two_claims_in_flight_never_pass_a_daily_budget(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent with a budget of one task a day claims two tasks at once, the first held
    open after its lease row: the second counts the first's claim (it waits for it) and
    is refused, however the two interleave."""
    from hivelite.store.postgres import PostgresTx

    inside, release = threading.Event(), threading.Event()
    first: list[threading.Thread] = []
    start_lease = PostgresTx.start_lease

    def held_open(self: PostgresTx, *args: Any, **kwargs: Any) -> None:
        start_lease(self, *args, **kwargs)
        if threading.current_thread() in first:
            inside.set()
            release.wait(WAIT_S)

    monkeypatch.setattr(PostgresTx, "start_lease", held_open)
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive:
        one, two = own_task(hive), own_task(hive)
        hive.set_budget(hive.as_owner(), CODER.name, tasks=1)
        claim_one, one_failed = in_thread(lambda: hive.claim(CODER, one))
        first.append(claim_one)
        assert inside.wait(WAIT_S)
        claim_two, two_failed = in_thread(lambda: hive.claim(CODER, two))
        claim_two.join(0.5)  # its chance to count before the first commits
        release.set()
        claim_one.join(WAIT_S)
        claim_two.join(WAIT_S)
        assert one_failed == []
        assert len(two_failed) == 1 and getattr(two_failed[0], "reason", None) == (
            "daily_budget"), two_failed
        assert hive.get(two).claim is None


def test_a_retry_racing_its_first_call_gets_its_answer(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A handoff given a request id is held open after its task row; the same call again
    (a retry whose first answer seemed lost) waits for it and answers with its receipt:
    one task, never two."""
    from hivelite.store.postgres import PostgresTx

    inside, release = threading.Event(), threading.Event()
    first: list[threading.Thread] = []
    insert_task = PostgresTx.insert_task

    def held_open(self: PostgresTx, *args: Any, **kwargs: Any) -> int:
        number = insert_task(self, *args, **kwargs)
        if threading.current_thread() in first:
            inside.set()
            release.wait(WAIT_S)
        return number

    monkeypatch.setattr(PostgresTx, "insert_task", held_open)
    answers: list[int] = []
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive:
        def handoff() -> None:
            answers.append(hive.handoff(OWNER, requester="ana/planner", assignee=CODER.name,
                                        project="demo", packet=packet(),
                                        request_id="handoff-1").number)

        one, one_failed = in_thread(handoff)
        first.append(one)
        assert inside.wait(WAIT_S)
        two, two_failed = in_thread(handoff)
        two.join(0.5)  # its chance to look for the first answer before it commits
        release.set()
        one.join(WAIT_S)
        two.join(WAIT_S)
        assert one_failed == [] and two_failed == []
        with hive.store.read() as reader:
            tasks = reader.state_counts()
    assert answers == [answers[0]] * 2 and tasks == {"routed": 1}


def test_a_hold_committed_while_a_claim_is_in_flight_leaves_no_live_claim(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The owner holds an agent while that agent's claim is mid-write, its lease already
    written and not yet committed: whatever order the two commits take, the agent ends
    with no live claim (the hold sees the claim and ends it, or the claim is refused).
    A hold that read the leases before the claim committed would leave it live."""
    from hivelite.store.postgres import PostgresTx

    inside, release = threading.Event(), threading.Event()
    claiming: list[threading.Thread] = []
    start_lease = PostgresTx.start_lease

    def held_open(self: PostgresTx, *args: Any, **kwargs: Any) -> None:
        start_lease(self, *args, **kwargs)
        if threading.current_thread() in claiming:  # the claim's write stays open here
            inside.set()
            release.wait(WAIT_S)

    monkeypatch.setattr(PostgresTx, "start_lease", held_open)
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive:
        number = own_task(hive)
        claim, claim_failed = in_thread(lambda: hive.claim(CODER, number))
        claiming.append(claim)
        assert inside.wait(WAIT_S)
        hold, hold_failed = in_thread(lambda: hive.hold(hive.as_owner(), agent=CODER.name))
        hold.join(0.5)  # the hold's chance to commit first (nothing is asserted on it)
        release.set()
        claim.join(WAIT_S)
        hold.join(WAIT_S)
        assert hold_failed == []
        assert all(isinstance(f, HiveliteError) for f in claim_failed), claim_failed
        view = hive.get(number)
        assert view.claim is None and view.task.state.value == "routed"
    assert [f for f in diagnose_url(url) if not f.ok] == []


def test_a_writer_on_another_task_never_waits_for_one_held_open(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A handoff is held open mid-write, at its sweep (after its BEGIN, before its first
    task row: a write that names no task up front takes the chain lock there); an agent's
    claim of another task commits meanwhile, and no session waits on a lock while it does
    (pg_stat_activity is asked until the claim has committed or a session is seen
    waiting). (A write about a task its verb names, as a claim, takes the chain lock and
    the row with its BEGIN, in one round trip: docs/postgres.md.)"""
    from hivelite.store.postgres import PostgresTx

    entered, release = threading.Event(), threading.Event()
    lock_overdue = PostgresTx.lock_overdue

    def held_open(self: PostgresTx, at: str) -> list[Any]:
        if threading.current_thread().name == "held":  # the handoff's write stays open
            entered.set()
            release.wait(WAIT_S)
        return lock_overdue(self, at)

    monkeypatch.setattr(PostgresTx, "lock_overdue", held_open)
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as owner_side:
        second = own_task(owner_side, assignee=TESTER.name)
        with Hive.open(url, owner="ana", clock=ManualClock(START)) as held_side:
            def handoff() -> int:
                threading.current_thread().name = "held"
                return own_task(held_side)

            blocked, blocked_failed = in_thread(handoff)
            assert entered.wait(WAIT_S)
            try:
                other, other_failed = in_thread(lambda: owner_side.claim(TESTER, second))
                waited = False
                for _ in range(int(WAIT_S * 20)):  # looks, until one of the two is seen
                    other.join(0.05)
                    if not other.is_alive():
                        break
                    if waits_on_lock(url.rsplit("schema=", 1)[1]):
                        waited = True
                        break
            finally:
                release.set()
                blocked.join(WAIT_S)
            other.join(WAIT_S)
        assert blocked_failed == [] and other_failed == []
        assert not waited, "the claim of another task waited on a lock"


def hold_start_lease(monkeypatch: pytest.MonkeyPatch, *, after: bool
                     ) -> tuple[threading.Event, threading.Event]:
    """Keep the claim made on a thread named ``held`` open at its lease row: ``after``
    the row reached the server (its journal row numbered: the numbers lock taken), or
    before it (the task's row taken ``FOR UPDATE``, no journal row yet). The events: the
    claim is held; let it go."""
    from hivelite.store.postgres import PostgresTx

    entered, release = threading.Event(), threading.Event()
    start_lease = PostgresTx.start_lease

    def held_open(self: PostgresTx, *args: Any, **kwargs: Any) -> None:
        if after:
            start_lease(self, *args, **kwargs)
            self._value("SELECT 1")  # the row and its journal row reach the server
        if threading.current_thread().name == "held":
            entered.set()
            release.wait(WAIT_S)
        if not after:
            start_lease(self, *args, **kwargs)

    monkeypatch.setattr(PostgresTx, "start_lease", held_open)
    return entered, release


def run_beside(url: str, held: Callable[[Hive], Any], other: Callable[[Hive], Any],
               entered: threading.Event, release: threading.Event
               ) -> tuple[bool, list[BaseException]]:
    """``held`` on a thread named ``held``, kept open; meanwhile ``other`` on a thread of
    its own, until it has committed or a session of the store is seen waiting on a lock;
    then both end. Whether one was seen waiting, and what ``other`` raised."""
    schema = url.rsplit("schema=", 1)[1]
    with Hive.open(url, clock=ManualClock(START)) as held_side, Hive.open(
            url, clock=ManualClock(START)) as other_side:
        def hold() -> None:
            threading.current_thread().name = "held"
            held(held_side)

        blocked, blocked_failed = in_thread(hold)
        assert entered.wait(WAIT_S)
        waited = False
        try:
            running, running_failed = in_thread(lambda: other(other_side))
            for _ in range(int(WAIT_S * 20)):  # looks, until one of the two is seen
                running.join(0.05)
                if not running.is_alive():
                    break
                if waits_on_lock(schema):
                    waited = True
                    break
        finally:
            release.set()
            blocked.join(WAIT_S)
        running.join(WAIT_S)
    assert blocked_failed == []
    return waited, running_failed


def test_a_claim_and_submission_of_another_task_never_wait_for_a_claim_held_open(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim is held open with its task's row taken (``FOR UPDATE``, from its BEGIN),
    its moves not yet made; another agent claims another task and submits its result
    meanwhile: both commit without waiting on a lock, and the journal's chains hold. (With
    one chain for the whole journal, the held claim held its lock from its BEGIN.)"""
    entered, release = hold_start_lease(monkeypatch, after=False)
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive:
        first, second = own_task(hive), own_task(hive, assignee=TESTER.name)

    def claim_and_submit(hive: Hive) -> None:
        lease = hive.claim(TESTER, second)
        hive.submit(TESTER, second, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)

    waited, failed = run_beside(url, lambda hive: hive.claim(CODER, first),
                                claim_and_submit, entered, release)
    assert not waited, "a write on another task waited for the one held open"
    assert failed == []
    with Hive.open(url, clock=ManualClock(START)) as hive:
        assert hive.get(first).claim is not None
        assert hive.get(second).task.state.value in ("verifying", "approval", "completed")
        rows = list(dict.fromkeys(r.seq for r in hive.journal()))  # one row, its moves
        assert rows == list(range(1, len(rows) + 1))
        assert hive.store.chain_sound()  # type: ignore[attr-defined]
    assert all(f.ok for f in diagnose_url(url)), [f for f in diagnose_url(url) if not f.ok]


def test_writes_on_one_task_take_turns_and_rows_are_numbered_as_they_commit(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two writes on one task queue on its row: the second waits for the first. And once
    a write's journal row is numbered (the numbers lock held to its commit), a write on
    another task waits to number its own: the journal grows only at its end, in commit
    order. Both end well either way, the chains sound."""
    entered, release = hold_start_lease(monkeypatch, after=False)
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive:
        first = own_task(hive)
    waited, failed = run_beside(url, lambda hive: hive.claim(CODER, first),
                                lambda hive: hive.claim(TESTER, first), entered, release)
    assert waited, "a second write on the held task did not wait for its row"
    assert [getattr(f, "reason", f) for f in failed] == ["task_claimed"]  # (after it)

    entered, release = hold_start_lease(monkeypatch, after=True)
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive:
        third, fourth = own_task(hive), own_task(hive, assignee=TESTER.name)
    waited, failed = run_beside(url, lambda hive: hive.claim(CODER, third),
                                lambda hive: hive.claim(TESTER, fourth), entered, release)
    assert waited, "a journal row was numbered while another write's row was in flight"
    assert failed == []
    with Hive.open(url, clock=ManualClock(START)) as hive:
        claims = [r for r in hive.journal() if r.move is not None
                  and r.to_state is not None and r.to_state.value == "accepted"]
        assert [r.number for r in claims][-2:] == [third, fourth]  # the held one first
        assert hive.store.chain_sound()  # type: ignore[attr-defined]


def test_a_claim_next_submit_cycle_waits_for_the_server_six_times(url: str) -> None:
    """Round trips, counted as ``python -m bench.engines`` counts them (each wait for the
    server's answers; a count, not a time): ``next`` takes its pick with its BEGIN and
    commits (2); ``submit`` reads the task with its bodies and ends that snapshot (2),
    then takes the task with its BEGIN and commits (2)."""
    from bench import lib
    from bench.engines import round_trips

    with Hive.open(url, owner=lib.OWNER, plugins=[lib.ZeroThreshold()]) as hive:
        for _ in range(6):
            hive.handoff(lib.OWNER_CALLER, requester="ana/planner", assignee=lib.AGENT,
                         project="bench", packet=lib.PACKET)
    assert round_trips(url, cycles=5) == 6.0


def test_a_write_the_server_gives_up_as_a_deadlock_is_tried_again(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes on different tasks take their rows in no common order, so the server may
    end one as a deadlock (or a serialization failure); nothing of it was written, and
    the library runs the verb again, so the caller sees it succeed. A third such end is
    the caller's ``store_busy`` (503), naming the try again."""
    from psycopg import errors as pg_errors

    from hivelite.core.errors import StoreBusy
    from hivelite.store.postgres import PostgresTx

    met: list[int] = []
    start_lease = PostgresTx.start_lease
    times = {"n": 1}

    def meets_another(self: PostgresTx, *args: Any, **kwargs: Any) -> None:
        met.append(1)
        if len(met) <= times["n"]:
            raise pg_errors.DeadlockDetected("deadlock detected")
        start_lease(self, *args, **kwargs)

    monkeypatch.setattr(PostgresTx, "start_lease", meets_another)
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive:
        first, second = own_task(hive), own_task(hive)
        lease = hive.claim(CODER, first)
        assert lease.fencing_token == 1 and len(met) == 2
        met.clear()
        times["n"] = 3
        with pytest.raises(StoreBusy) as busy:
            hive.claim(CODER, second)
        assert len(met) == 3 and busy.value.extra.get("retry") is True
        assert hive.get(second).claim is None
