"""Group commit (issue 47, item 3): the writes a process's threads have waiting share one
transaction on the store's write connection; a refused write undoes itself alone; no
thread has its answer before the commit that keeps its write; a transaction lost midway is
written again. Real threads on a real file; the order of the writes is made certain by a
first write that holds the lead until the others wait (a readiness wait, not a sleep)."""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from bench.killnine import run_kills
from hivelite import ClaimReceipt, Hive, InvalidState, ManualClock
from hivelite.core.errors import UnexpectedError
from hivelite.store.doctor import diagnose
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
        self.thread = threading.Thread(target=self.store.transact, args=(self._hold,))
        self.thread.start()
        assert self.holding.wait(HANG_S)

    def _hold(self, tx: Any) -> None:
        self.holding.set()
        assert self.release.wait(HANG_S)

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
    with Held(hive) as held:  # a second thread writes: the store's write connection
        counted = commits(hive)
        threads, out = held.queue([functools.partial(hive.claim, CODER, n) for n in numbers])
    joined(threads)
    assert all(isinstance(lease, ClaimReceipt) for lease in out), out
    assert [lease.number for lease in out] == numbers  # each its own answer
    assert counted[0] == 2  # the held write's, then all six claims in one
    assert store_of(hive).writer is not store_of(hive).conn
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
    joined(threads)
    assert [out[0].number, out[3].number] == [good, after]
    assert all(isinstance(out[i], ClaimReceipt) for i in (0, 3)), out
    assert isinstance(out[1], InvalidState) and out[1].reason == "task_closed"
    assert isinstance(out[2], RuntimeError)
    assert "to undo" not in [e.reason for e in hive.history(undone)]
    assert hive.get(cancelled).task.state == "cancelled"
    assert all(f.ok for f in diagnose(store.conn)), [
        f for f in diagnose(store.conn) if not f.ok]


def parked(thread: threading.Thread) -> bool:
    """True while ``thread`` waits for its write's answer and has not been woken for it."""
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

    with pytest.raises(UnexpectedError) as refused:
        store.transact(nested)
    assert refused.value.reason == "nested_write"
    assert own_task(hive) > 0  # the store goes on


@pytest.mark.slow
def test_kill_nine_of_threaded_writers_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """Real writer processes, four threads each sharing commits, killed with SIGKILL."""
    stats = run_kills(tmp_path / "store.db", "NORMAL", 4, workers=2, seed=7, threads=4)
    assert stats.worker_errors == []
    assert stats.opened and stats.doctor_ok, stats.problems
    assert stats.acked > 0 and stats.lost == 0, stats.problems
