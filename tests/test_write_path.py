"""The one write path (issue 13): receipts from values in hand, notifications read from the
journal by seq, a bounded failure list, one Hive shared by threads, and SQL kept inside
``hivelite/store``.
"""

from __future__ import annotations

import gc
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import hivelite
from hivelite import (
    Caller,
    ClaimReceipt,
    Hive,
    ManualClock,
    Receipt,
    State,
    StoreError,
    WaitingOn,
    hookimpl,
)
from hivelite.core.clock import format_ts
from hivelite.store.doctor import diagnose_file
from hivelite.store.sqlite import SqliteTx

from .conftest import (
    CODER,
    HANG_S,
    OWNER,
    REVIEWER,
    OpenHive,
    held_task,
    own_task,
    packet,
    traced,
)

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]
LIBRARY = Path(hivelite.__file__).parent


def agrees(hive: Hive, receipt: Receipt) -> None:
    """The receipt says what the store now holds, and carries the journal's last seq."""
    view = hive.get(receipt.number)
    assert (receipt.id, receipt.state, receipt.waiting_on) == (
        view.task.id, view.task.state, view.task.waiting_on)
    assert receipt.at == view.task.updated_at
    assert receipt.seq == hive.history(receipt.number)[-1].seq


def test_every_write_answers_with_a_receipt_of_what_it_did(hive: Hive,
                                                           clock: ManualClock) -> None:
    held = hive.handoff(Caller.agent("guest/scout", "elsewhere"), requester="guest/scout",
                        assignee="ana/coder", project="demo",
                        packet={"task": "Review it", "deliverable_type": "doc",
                                "acceptance_criteria": ["ok"]})
    assert (held.state, held.waiting_on) == (State.waiting, WaitingOn.owner_approval)
    agrees(hive, held)
    agrees(hive, hive.approve(OWNER, held.number))
    number = own_task(hive)
    clock.advance(minutes=1)
    lease = hive.claim(CODER, number)
    assert isinstance(lease, ClaimReceipt)
    agrees(hive, lease)
    claim = hive.get(number).claim
    assert claim is not None
    assert (lease.holder, lease.instance, lease.expires_at) == (
        claim.holder, claim.instance, claim.expires_at)
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    clock.advance(minutes=1)
    agrees(hive, hive.checkpoint(CODER, number, progress="half", **fence))  # the first moves
    clock.advance(minutes=1)
    quiet = hive.update(CODER, number, summary="more", **fence)
    assert quiet.seq is None and quiet.state is State.working  # journaled nothing
    assert quiet.at == format_ts(clock())
    renewed = hive.renew(CODER, number, minutes=15, **fence)
    assert renewed.seq is None and renewed.fencing_token == lease.fencing_token
    assert renewed.expires_at == hive.get(number).claim.expires_at  # type: ignore[union-attr]
    submitted = hive.submit(CODER, number, summary="done", evidence=EVIDENCE, **fence)
    assert submitted.state is State.approval
    agrees(hive, submitted)
    agrees(hive, hive.verify(REVIEWER, number, verdict="accept"))
    agrees(hive, hive.amend(OWNER, number, merge_commit="3f2a9c1"))
    agrees(hive, hive.cancel(OWNER, held_task(hive)))


def test_no_write_reads_a_view_again(hive: Hive, monkeypatch: pytest.MonkeyPatch) -> None:
    """Receipts come from values in hand: writes work with the view reads switched off."""
    number = own_task(hive)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a write read a view")

    monkeypatch.setattr(SqliteTx, "view", refuse)
    monkeypatch.setattr(SqliteTx, "views", refuse)
    lease = hive.claim(CODER, number)
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    hive.checkpoint(CODER, number, progress="half", **fence)
    receipt = hive.submit(CODER, number, summary="done", evidence=EVIDENCE, **fence)
    assert hive.verify(REVIEWER, receipt.number).state is State.completed


def test_with_no_notifier_a_write_reads_no_journal(hive: Hive,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Announcing costs nothing when no plugin listens."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a write read the journal for nobody")

    monkeypatch.setattr(SqliteTx, "journal_after", refuse)
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    assert hive.get(number).task.state is State.approval


class Recorder:
    """A notifier that writes down what it hears."""

    def __init__(self) -> None:
        self.heard: list[tuple[int, int, int, str, State]] = []

    @hookimpl
    def hivelite_on_transition(self, task: Any, move: Any, actor: str, hive: Any,
                               entry: Any) -> None:
        assert isinstance(entry.from_state, State) and isinstance(entry.to_state, State)
        self.heard.append((entry.seq, entry.number, move.number, actor, task.state))


def test_notifications_come_from_the_journal_by_seq(open_hive: OpenHive, clock: ManualClock,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder()
    hive = open_hive(plugins=[recorder])
    first, second = own_task(hive), own_task(hive)
    hive.claim(CODER, first)
    clock.advance(minutes=11)  # the first claim runs out
    recorder.heard.clear()

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("notifications scanned a task's journal")

    monkeypatch.setattr(SqliteTx, "journal", refuse)
    hive.claim(CODER, second)  # the sweep's move, then the claim, in one write
    assert recorder.heard == [
        (recorder.heard[0][0], first, 8, "clock", State.routed),
        (recorder.heard[0][0] + 1, second, 6, "ana/coder", State.accepted),
    ]
    monkeypatch.undo()
    assert list(hive.notify_failures) == []
    journal = {e.seq: e for e in hive.journal()}
    for seq, number, move, actor, _ in recorder.heard:
        assert (journal[seq].number, journal[seq].move, journal[seq].actor) == (
            number, move, actor)


def test_a_move_is_announced_once_with_its_own_row(open_hive: OpenHive) -> None:
    recorder = Recorder()
    hive = open_hive(plugins=[recorder])
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    moves = [e for e in hive.history(number) if e.move is not None]
    assert list(hive.notify_failures) == []
    assert [(s, n, m, a) for s, n, m, a, _ in recorder.heard] == [
        (e.seq, number, e.move, e.actor) for e in moves]


class Broken:
    @hookimpl
    def hivelite_on_transition(self, task: Any) -> None:
        raise RuntimeError(f"down for {task.id}")


def test_the_failure_list_is_bounded(open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[Broken()])
    numbers = [own_task(hive) for _ in range(120)]  # one announced move each
    assert len(hive.notify_failures) == hivelite.verbs.base.MAX_NOTIFY_FAILURES == 100
    newest = hive.get(numbers[-1]).task.id
    assert newest in hive.notify_failures[-1].message
    assert all(hive.get(n).task.state is State.routed for n in numbers)


def test_one_hive_serves_many_threads(hive: Hive) -> None:
    numbers = [own_task(hive) for _ in range(40)]
    errors: list[BaseException] = []

    def work(mine: list[int], instance: str) -> None:
        agent = Caller.agent("ana/coder", instance)
        try:
            for n in mine:
                lease = hive.claim(agent, n)
                hive.update(agent, n, lease_id=lease.lease_id, token=lease.fencing_token,
                            summary="going")
                hive.submit(agent, n, lease_id=lease.lease_id, token=lease.fencing_token,
                            summary="done", evidence=EVIDENCE)
                assert hive.get(n).task.state is State.approval
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(numbers[i::4], f"box-{i}"))
               for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=HANG_S)
    assert errors == []
    assert {v.task.state for v in hive.list(limit=500).items} == {State.approval}
    seqs = [e.seq for e in hive.journal()]  # a submission's moves share its row's seq
    assert seqs == sorted(seqs) and set(seqs) == set(range(1, seqs[-1] + 1))


def test_a_read_never_joins_another_threads_write(hive: Hive) -> None:
    """Each thread has its own connection: another thread's open write stays invisible."""
    number = own_task(hive)
    opened, done = threading.Event(), threading.Event()

    def writer() -> None:
        with hive.store.write() as tx:
            tx.record_event(number, at="2026-12-02T09:00:00.000Z", actor="ana",
                            state="routed", reason="uncommitted")
            opened.set()
            done.wait(timeout=HANG_S)

    thread = threading.Thread(target=writer)
    thread.start()
    assert opened.wait(timeout=HANG_S)
    try:
        assert [e.reason for e in hive.history(number)][-1] != "uncommitted"
    finally:
        done.set()
        thread.join(timeout=HANG_S)
    assert hive.history(number)[-1].reason == "uncommitted"


def test_a_closed_hive_says_so_in_every_thread(open_hive: OpenHive) -> None:
    hive = open_hive()
    number = own_task(hive)
    hive.close()
    caught: list[BaseException] = []

    def read() -> None:
        try:
            hive.get(number)
        except BaseException as exc:  # reported below
            caught.append(exc)

    thread = threading.Thread(target=read)
    thread.start()
    thread.join(timeout=HANG_S)
    with pytest.raises(StoreError) as here:
        hive.get(number)
    assert len(caught) == 1
    for error in (*caught, here.value):
        assert isinstance(error, StoreError) and error.reason == "store_closed"


# -- the shape of the code -------------------------------------------------------------


def sources(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(LIBRARY)): p.read_text() for p in folder.rglob("*.py")}


def test_sql_and_apsw_stay_inside_the_store_package() -> None:
    outside = {name: text for name, text in sources(LIBRARY).items()
               if not name.startswith("store/")}
    assert [n for n, t in outside.items() if re.search(r"^\s*(import|from) apsw", t, re.M)] == []
    assert [n for n, t in outside.items()
            if re.search(r'"\s*(SELECT|INSERT|UPDATE|DELETE) ', t)] == []


def test_only_the_write_path_opens_write_transactions() -> None:
    found = {name for name, text in sources(LIBRARY).items()
             if not name.startswith("store/") and ("store.write(" in text
                                                    or "store.transact(" in text)}
    assert found == {"verbs/base.py", "hive.py"}  # the unit of work; recording a new owner


def test_a_threads_connection_ends_with_the_thread(hive: Hive) -> None:
    """A server that starts a thread per request does not pile up open files."""
    number = own_task(hive)
    store: Any = hive.store
    threads = [threading.Thread(target=hive.get, args=(number,)) for _ in range(50)]
    for thread in threads:
        thread.start()
        thread.join(timeout=HANG_S)
    gc.collect()
    assert len(store._slots) == 1  # this thread's (it alone wrote: the writes use it)
    assert hive.get(number).number == number


def test_closing_while_other_threads_read_is_clean(open_hive: OpenHive) -> None:
    """Threads busy on the store when it closes end with ``store_closed``, never a raw
    database error."""
    hive = open_hive()
    for _ in range(30):
        number = own_task(hive)
    started = threading.Barrier(4)
    seen: list[BaseException] = []

    def reader() -> None:
        started.wait(timeout=HANG_S)
        try:
            while True:
                hive.list()
                hive.get(number)
        except BaseException as exc:  # reported below
            seen.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    started.wait(timeout=HANG_S)
    time.sleep(0.2)  # let them get going: most closes meet a reader inside SQLite
    hive.close()
    for thread in threads:
        thread.join(timeout=HANG_S)
    assert len(seen) == 3
    assert all(isinstance(e, StoreError) and e.reason == "store_closed" for e in seen), seen


# -- what a write knows from the last one (hivelite/store/known.py) ------------------------

PLANNER_AGENT = Caller.agent("ana/planner", "laptop")


def test_a_write_after_a_write_reads_only_what_it_must(open_hive: OpenHive,
                                                        db_path: Path) -> None:
    """Nobody wrote the file since this connection's last commit: the journal's tip, the
    controls, the required plugins and the overdue leases are what that commit left."""
    hive = open_hive()
    first, second = own_task(hive), own_task(hive)
    hive.claim(CODER, first)
    seen = traced(hive)
    hive.claim(CODER, second)
    reads = [s for s in seen if s.startswith("SELECT")]
    assert reads == [s for s in reads if s.startswith("SELECT number, id, ")], reads
    assert len(reads) == 1  # the task it claims, locked (its statement: the number, id, token)
    assert all(f.ok for f in diagnose_file(db_path)), diagnose_file(db_path)


def test_a_write_reads_what_another_connection_changed(open_hive: OpenHive,
                                                       db_path: Path) -> None:
    """Another process's commit (here another store on the file) changes SQLite's data
    version: the next write reads the controls, the journal's tip and the leases again."""
    hive, other = open_hive(), open_hive()
    number = own_task(hive)
    hive.handoff(PLANNER_AGENT, requester="ana/planner", assignee="ana/coder",
                 project="demo", packet=packet())
    other.stop(OWNER, agent="ana/planner")
    with pytest.raises(hivelite.ForbiddenRight) as err:
        hive.handoff(PLANNER_AGENT, requester="ana/planner", assignee="ana/coder",
                     project="demo", packet=packet())
    assert err.value.reason == "vetoed"
    lease = other.claim(CODER, number)  # the other store adds to the journal
    receipt = hive.release(CODER, number, lease_id=lease.lease_id,
                           token=lease.fencing_token)
    assert receipt.seq == hive.history(number)[-1].seq
    assert all(f.ok for f in diagnose_file(db_path)), diagnose_file(db_path)


def test_raw_sql_on_the_same_connection_is_seen(open_hive: OpenHive) -> None:
    """A commit outside the write path on the very same connection counts as another's."""
    hive = open_hive()
    hive.handoff(PLANNER_AGENT, requester="ana/planner", assignee="ana/coder",
                 project="demo", packet=packet())  # the live controls are read, and known
    hive.store.conn.execute(  # type: ignore[attr-defined]
        "INSERT INTO controls(kind, agent, at, by) VALUES ('stop', 'ana/planner',"
        " '2026-01-01T00:00:00.000000Z', 'ana')")
    with pytest.raises(hivelite.ForbiddenRight):
        hive.handoff(PLANNER_AGENT, requester="ana/planner", assignee="ana/coder",
                     project="demo", packet=packet())


def test_a_failed_write_leaves_nothing_known(open_hive: OpenHive, db_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails after it chained a journal row rolls the row back: the tip it
    computed is not kept, and the next write reads the journal's own."""
    hive = open_hive()
    number, other = own_task(hive), own_task(hive)
    hive.claim(CODER, own_task(hive))
    def failing(made: Any) -> Any:
        def fails_after(self: SqliteTx, *args: Any, **kwargs: Any) -> None:
            made(self, *args, **kwargs)
            raise RuntimeError("the disk went away")
        return fails_after

    for chained in ("start_lease", "_take"):  # the full run's claim, and its statement
        monkeypatch.setattr(SqliteTx, chained, failing(getattr(SqliteTx, chained)))
    with pytest.raises(RuntimeError):
        hive.claim(CODER, number)
    monkeypatch.undo()
    seen = traced(hive)
    hive.claim(CODER, other)
    assert any(s.startswith("SELECT seq, hash FROM journal") for s in seen), seen
    assert all(f.ok for f in diagnose_file(db_path)), diagnose_file(db_path)


def test_a_shortened_lease_is_swept_when_it_runs_out(open_hive: OpenHive,
                                                    clock: ManualClock) -> None:
    """A renewal may end a lease sooner than the claim did; the next write after that
    sooner time sweeps it, though nobody else wrote in between."""
    hive = open_hive()
    number, other = own_task(hive), own_task(hive)
    lease = hive.claim(CODER, number, minutes=15)
    clock.advance(minutes=1)
    hive.renew(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
               minutes=5)
    clock.advance(minutes=7)
    hive.claim(CODER, other)
    assert hive.get(number).task.state is State.routed


def test_a_close_between_a_threads_look_and_its_use_is_store_closed(
        open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race the test above meets now and then on a loaded machine, made certain: the
    store is closed just after a thread took its connection and before it used it. The
    thread gets ``store_closed``, never apsw's raw ``ConnectionClosedError``."""
    from hivelite.store.sqlite import SqliteStore

    hive = open_hive()
    number = own_task(hive)
    store = hive.store
    assert isinstance(store, SqliteStore)
    taken = SqliteStore._slot

    def then_closed(self: SqliteStore) -> Any:
        slot = taken(self)
        self.close()  # another thread's close lands here
        return slot

    monkeypatch.setattr(SqliteStore, "_slot", then_closed)
    for read in (hive.list, lambda: hive.get(number), lambda: hive.history(number)):
        with pytest.raises(StoreError) as closed:
            read()
        assert closed.value.reason == "store_closed"


def test_a_close_right_after_a_writes_commit_leaves_the_write_done(
        open_hive: OpenHive) -> None:
    """Another thread's close lands between a write's COMMIT and its last look at the
    connection: the write is committed and answers normally."""
    from hivelite.store.sqlite import SqliteStore

    hive = open_hive()
    store = hive.store
    assert isinstance(store, SqliteStore)
    real = store.conn

    class ClosedAfterCommit:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def execute(self, sql: str, *args: Any) -> Any:
            answer = real.execute(sql, *args)
            if sql == "COMMIT":
                store.close()
            return answer

    store.conn = ClosedAfterCommit()  # type: ignore[assignment]
    receipt = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                           project="site", packet=packet())
    with Hive.open(store.path) as again:
        assert again.get(receipt.number).task.state is State.routed


def test_a_submit_reads_the_policy_once(open_hive: OpenHive) -> None:
    """The plugins asked about one submission (the evidence, the threshold and who set it)
    see one read of the store's policy: one read transaction for it before the write, not
    one for each question."""
    hive = open_hive()
    hive.store.statements = frozenset()  # type: ignore[misc]  # (the plugins are asked)
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    seen = traced(hive)
    receipt = hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                          summary="done", evidence=EVIDENCE)
    assert receipt.state is State.approval  # the store's threshold (1) decided
    assert seen.count("SELECT key, value FROM policy") == 1, seen
    assert seen.count("BEGIN") == 2, seen  # the fence and the packet; the policy


def test_next_picks_from_the_queue_index_and_reads_one_row(open_hive: OpenHive) -> None:
    """``next``'s full run (a store without the statement, or a case that is not plain)
    picks the task's number from the ready index, then reads that row alone."""
    hive = open_hive()
    hive.store.statements = frozenset()  # type: ignore[misc]
    numbers = [own_task(hive) for _ in range(3)]
    seen = traced(hive)
    lease = hive.claim_next(CODER)
    assert lease.number == numbers[0]
    picks = [s for s in seen if "ORDER BY assignee" in s]
    assert len(picks) == 1 and picks[0].startswith("SELECT number FROM tasks WHERE"), picks
    rows = [s for s in seen if s.startswith("SELECT number, id, state")]
    assert len(rows) == 1, seen
