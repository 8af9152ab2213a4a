"""Group commit (issue 47, item 3): the writes a process's threads have waiting share one
transaction on the store's write connection; a refused write undoes itself alone; no
thread has its answer before the commit that keeps its write; a transaction lost midway is
written again. Real threads on a real file; the order of the writes is made certain by a
first write that holds the lead until the others wait (a readiness wait, not a sleep)."""

from __future__ import annotations

import functools
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from bench.killnine import run_kills
from hivelite import ClaimReceipt, Hive, InvalidState, ManualClock
from hivelite.core.errors import StoreBusy, StoreError, UnexpectedError
from hivelite.store.doctor import diagnose
from hivelite.store.group import Group
from hivelite.store.sqlite import SqliteStore

from .conftest import CODER, HANG_S, OWNER, START, own_task, ready


@pytest.fixture
def hive(tmp_path: Path) -> Iterator[Hive]:
    with Hive.open(tmp_path / "store.db", owner="ana", clock=ManualClock(START)) as opened:
        yield opened


def store_of(hive: Hive) -> SqliteStore:
    assert isinstance(hive.store, SqliteStore)
    return hive.store


class Held:
    """A first write that holds the lead (and the write lock) until released, so the
    writes started meanwhile all wait, then share the next transaction."""

    def __init__(self, hive: Hive) -> None:
        self.store = store_of(hive)
        self.holding = threading.Event()
        self.release = threading.Event()
        self.answer: list[Any] = []
        self.thread = threading.Thread(target=self._run)
        self.thread.start()
        assert self.holding.wait(HANG_S)

    def _run(self) -> None:
        try:
            self.answer.append(self.store.transact(self._hold))
        except Exception as exc:  # looked at by the test
            self.answer.append(exc)

    def _hold(self, tx: Any) -> str:
        self.holding.set()
        assert self.release.wait(HANG_S)
        return "held"

    def waiting(self, count: int) -> None:
        """Until ``count`` writes wait behind it."""
        ready(lambda: len(self.store._group._waiting) >= count, f"{count} waiting writes")

    def queue(self, calls: list[Callable[[], Any]]) -> tuple[list[threading.Thread], list[Any]]:
        """Each call on a thread of its own, started once the one before waits: they are
        written in this order. Its answer, or its error, lands in the list."""
        out: list[Any] = [None] * len(calls)
        threads = []
        for i in range(len(calls)):
            threads.append(in_thread(calls, i, out))
            self.waiting(i + 1)
        return threads, out

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(HANG_S)
        assert not self.thread.is_alive()
        if exc[0] is None and not self.store._closed:
            assert self.answer == ["held"]


def in_threads(calls: list[Callable[[], Any]]) -> tuple[list[threading.Thread], list[Any]]:
    """Each call on a thread of its own, started at once."""
    out: list[Any] = [None] * len(calls)
    return [in_thread(calls, i, out) for i in range(len(calls))], out


def in_thread(calls: list[Callable[[], Any]], i: int, out: list[Any]) -> threading.Thread:
    def run() -> None:
        try:
            out[i] = calls[i]()
        except BaseException as exc:  # the test looks at it
            out[i] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def joined(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(HANG_S)
        assert not thread.is_alive()


def commits(hive: Hive) -> list[int]:
    """Counts the write connection's commits from now on."""
    counted = [0]

    def hook() -> bool:
        counted[0] += 1
        return False  # go on and commit

    store_of(hive).writer.set_commit_hook(hook)
    return counted


def test_waiting_writes_share_one_transaction(hive: Hive) -> None:
    numbers = [own_task(hive) for _ in range(6)]
    with Held(hive) as held:
        threads, out = held.queue([functools.partial(hive.claim, CODER, n) for n in numbers])
        counted = commits(hive)  # writes waited: the store's write connection, from now on
    joined(threads)
    assert all(isinstance(lease, ClaimReceipt) for lease in out), out
    assert [lease.number for lease in out] == numbers  # each its own answer
    assert counted[0] == 1  # all six claims in one transaction (the held write's own
    # commit was on its thread's connection, before writes waited)
    assert store_of(hive).writer is not store_of(hive).conn  # one write connection now
    assert {hive.get(n).task.state for n in numbers} == {"accepted"}
    assert all(f.ok for f in diagnose(store_of(hive).conn))


def test_a_refused_write_undoes_itself_alone(hive: Hive) -> None:
    """In one transaction: a claim of a cancelled task, a write that journals and
    then fails, and good writes before and after; the good ones are kept, the chain links
    the rows that stayed (what the failed write linked is forgotten)."""
    good, cancelled, undone, after = (own_task(hive) for _ in range(4))
    hive.cancel(OWNER, cancelled)
    store = store_of(hive)

    def journals_then_fails(tx: Any) -> None:
        tx.record_event(undone, at=START, actor="ana", state="routed", reason="to undo")
        raise RuntimeError("after its journal row")

    with Held(hive) as held:
        threads, out = held.queue([
            lambda: hive.claim(CODER, good),
            lambda: hive.claim(CODER, cancelled),
            lambda: store.transact(journals_then_fails),
            lambda: hive.claim(CODER, after),
        ])
        counted = commits(hive)  # writes waited: the store's write connection
    joined(threads)
    # one commit: the claim after the undone row was kept in the same transaction, not
    # refused there (a link to the undone row) and claimed again by a later write
    assert counted[0] == 1
    assert [out[0].number, out[3].number] == [good, after]
    assert all(isinstance(out[i], ClaimReceipt) for i in (0, 3)), out
    assert isinstance(out[1], InvalidState) and out[1].reason == "task_closed"
    assert isinstance(out[2], RuntimeError)
    assert "to undo" not in [e.reason for e in hive.history(undone)]
    assert hive.get(cancelled).task.state == "cancelled"
    assert all(f.ok for f in diagnose(store.conn)), [
        f for f in diagnose(store.conn) if not f.ok]


def parked(thread: threading.Thread) -> bool:
    """True while ``thread`` waits for its write's answer and has not been woken for it
    (read off its frame in ``Group._await``, whose event is ``woken``)."""
    assert "woken" in Group._await.__code__.co_varnames  # else this would wait for ever
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code.co_name == "_await" and "woken" in frame.f_locals:
            return not frame.f_locals["woken"].is_set()
        frame = frame.f_back
    return False


def test_no_answer_before_its_commit(hive: Hive) -> None:
    """A write done early in a transaction is neither answered nor seen by a reader until
    the transaction's last write is done and the commit is made."""
    first, second = own_task(hive), own_task(hive)
    store = store_of(hive)
    answered = threading.Event()
    seen: dict[str, Any] = {}
    threads: list[threading.Thread] = []

    def claim() -> Any:
        lease = hive.claim(CODER, first)
        answered.set()
        return lease

    def last(tx: Any) -> None:  # the claim is written; this transaction is still open
        ready(lambda: answered.is_set() or parked(threads[1]), "the claim answered or"
              " waiting for its answer")
        seen["answered"] = answered.is_set()
        other = apsw.Connection(str(store.path))  # another connection's view
        seen["state"] = other.execute("SELECT state FROM tasks WHERE number = ?",
                                      (first,)).get
        other.close()

    with Held(hive) as held:
        # the first leads the transaction (on its own thread); the claim waits in it
        queued, out = held.queue([lambda: store.transact(lambda tx: None), claim,
                                  lambda: store.transact(last)])
        threads.extend(queued)
    joined(threads)
    assert seen == {"answered": False, "state": "routed"}
    assert isinstance(out[1], ClaimReceipt) and out[1].number == first
    assert hive.get(first).task.state == "accepted"
    assert hive.get(second).task.state == "routed"


def test_a_lost_transaction_writes_the_others_again(hive: Hive) -> None:
    """A write whose error ends the whole transaction fails alone: the writes before it in
    that transaction, never answered, and those after it are written again, once each."""
    numbers = [own_task(hive) for _ in range(2)]
    store = store_of(hive)
    runs: list[str] = []

    def note(name: str, number: int) -> Callable[[Any], str]:
        def job(tx: Any) -> str:
            runs.append(name)
            tx.record_event(number, at=START, actor="ana", state="routed", reason=name)
            return name
        return job

    def ends_it(tx: Any) -> None:
        tx.conn.execute("ROLLBACK")
        raise RuntimeError("ended the transaction")

    with Held(hive) as held:
        threads, out = held.queue([lambda: store.transact(note("before", numbers[0])),
                                   lambda: store.transact(ends_it),
                                   lambda: store.transact(note("after", numbers[1]))])
    joined(threads)
    assert out[0] == "before" and out[2] == "after"
    assert isinstance(out[1], RuntimeError)
    assert sorted(runs) == ["after", "before", "before"]  # "after" ran once: after the loss
    reasons = [e.reason for n in numbers for e in hive.history(n)]
    assert reasons.count("before") == 1 and reasons.count("after") == 1
    assert all(f.ok for f in diagnose(store.conn))


def test_a_write_from_inside_a_write_is_refused_not_hung(hive: Hive) -> None:
    """A job that writes again on the thread leading the transaction is refused at once
    (as on PostgreSQL), never left waiting for itself."""
    store = store_of(hive)

    def nested(tx: Any) -> None:
        store.transact(lambda inner: None)

    threads, out = in_threads([functools.partial(store.transact, nested)])
    joined(threads)
    assert isinstance(out[0], UnexpectedError) and out[0].reason == "nested_write"
    assert own_task(hive) > 0  # the store goes on


def test_ctrl_c_while_waiting_withdraws_the_write(hive: Hive) -> None:
    """Interrupted while its write waits, a thread's write is never written, and the
    writes after it go on (the lead it would have had passes on)."""
    assert threading.current_thread() is threading.main_thread()  # where SIGINT lands
    number = own_task(hive)
    store = store_of(hive)
    main = threading.main_thread().ident
    assert main is not None

    def interrupt() -> None:
        ready(lambda: len(store._group._waiting) >= 1, "the claim waiting")
        signal.pthread_kill(main, signal.SIGINT)

    with Held(hive):
        interrupter = threading.Thread(target=interrupt)
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            hive.claim(CODER, number)
        interrupter.join(HANG_S)
    assert hive.get(number).task.state == "routed"  # withdrawn, not written
    threads, out = in_threads([functools.partial(hive.claim, CODER, number)])
    joined(threads)
    assert isinstance(out[0], ClaimReceipt)
    assert not store._group._waiting and not store._group._leading


def test_a_write_that_waits_too_long_is_busy_and_unwritten(hive: Hive) -> None:
    """A write whose turn does not begin within the store's patience is ``store_busy``,
    and nothing of it is written (as a write that waited on another process's lock)."""
    number = own_task(hive)
    store = store_of(hive)
    store._group._patience = 0.05  # instead of the busy timeout's 10 s
    with Held(hive):
        threads, out = in_threads([functools.partial(hive.claim, CODER, number)])
        joined(threads)  # it gave up while the held write still holds the lead
    assert isinstance(out[0], StoreBusy) and out[0].reason == "busy"
    assert hive.get(number).task.state == "routed"
    assert isinstance(hive.claim(CODER, number), ClaimReceipt)


def test_an_interrupt_while_the_leader_writes_another_s_write(hive: Hive) -> None:
    """Ctrl-C reaching the leader while it runs another thread's write interrupts the
    leader: the writes before are kept, that write and those after it are written again,
    each once."""
    numbers = [own_task(hive) for _ in range(3)]
    store = store_of(hive)
    runs: list[str] = []

    def note(name: str, number: int, interrupted_once: bool = False) -> Callable[[Any], str]:
        def job(tx: Any) -> str:
            runs.append(name)
            if interrupted_once and runs.count(name) == 1:
                raise KeyboardInterrupt  # as if it landed on the leader here
            tx.record_event(number, at=START, actor="ana", state="routed", reason=name)
            return name
        return job

    with Held(hive) as held:
        threads, out = held.queue([
            lambda: store.transact(note("leader", numbers[0])),
            lambda: store.transact(note("hit", numbers[1], interrupted_once=True)),
            lambda: store.transact(note("after", numbers[2]))])
    joined(threads)
    assert isinstance(out[0], KeyboardInterrupt)  # the leader's thread was interrupted
    assert out[1:] == ["hit", "after"]
    assert runs == ["leader", "hit", "hit", "after"]
    reasons = [e.reason for n in numbers for e in hive.history(n)]
    assert [reasons.count(r) for r in ("leader", "hit", "after")] == [1, 1, 1]
    assert all(f.ok for f in diagnose(store.conn))


def test_a_committed_write_is_never_written_again(
        hive: Hive, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupt right after the commit leaves the committed writes answered, once."""
    numbers = [own_task(hive) for _ in range(2)]
    store = store_of(hive)
    committed = store._committed
    calls: list[int] = []

    def interrupted(*args: Any) -> None:
        committed(*args)
        calls.append(1)
        if len(calls) == 2:  # the held write's commit, then the batch of two
            raise KeyboardInterrupt

    monkeypatch.setattr(store, "_committed", interrupted)
    with Held(hive) as held:
        threads, out = held.queue([
            lambda: store.transact(lambda tx: tx.record_event(
                numbers[0], at=START, actor="ana", state="routed", reason="one")),
            lambda: store.transact(lambda tx: tx.record_event(
                numbers[1], at=START, actor="ana", state="routed", reason="two"))])
    joined(threads)
    assert len(calls) == 2
    assert isinstance(out[0], KeyboardInterrupt) and out[1] is None
    reasons = [e.reason for n in numbers for e in hive.history(n)]
    assert reasons.count("one") == 1 and reasons.count("two") == 1


def test_closing_while_a_transaction_runs_closes_its_connection(hive: Hive) -> None:
    own_task(hive)
    store = store_of(hive)
    store._group.contended = True  # as after writes that waited: the write connection
    with Held(hive) as held:
        writer = store._writer
        assert writer is not None
        hive.close()
    assert isinstance(held.answer[0], StoreError) and held.answer[0].reason == "store_closed"
    with pytest.raises(apsw.ConnectionClosedError):
        writer.conn.execute("SELECT 1")


def test_a_connection_in_use_at_close_is_closed_by_its_writer(hive: Hive) -> None:
    """``close()`` cannot close the write connection while another thread is inside one
    of its calls: that thread closes it once its write ends."""
    own_task(hive)
    store = store_of(hive)
    store._group.contended = True  # as after writes that waited: the write connection
    inside, go_on = threading.Event(), threading.Event()

    def hold(value: int) -> int:
        inside.set()
        assert go_on.wait(HANG_S)
        return value

    writer = store.writer
    writer.create_scalar_function("hold_here", hold, 1)
    threads, out = in_threads([lambda: store.transact(
        lambda tx: tx.conn.execute("SELECT hold_here(1)").get)])
    assert inside.wait(HANG_S)
    hive.close()  # the connection is in a call on the writing thread: left to it
    go_on.set()
    joined(threads)
    assert out[0] == 1
    with pytest.raises(apsw.ConnectionClosedError):
        writer.execute("SELECT 1")


@pytest.mark.slow
def test_kill_nine_of_threaded_writers_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """Real writer processes, four threads each sharing commits, killed with SIGKILL."""
    stats = run_kills(tmp_path / "store.db", "NORMAL", 4, workers=2, seed=7, threads=4)
    assert stats.worker_errors == []
    assert stats.opened and stats.doctor_ok, stats.problems
    assert stats.acked > 0 and stats.lost == 0, stats.problems
