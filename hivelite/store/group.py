"""Group commit: the writes one process's threads have waiting share one transaction.

A thread that writes while another thread of the process is writing does not queue on
the file's lock (SQLite's busy handler sleeps in steps of up to 100 ms, and each writer
pays its own ``BEGIN`` and ``COMMIT``): it leaves its write here and waits. The thread
that is writing, the leader, takes every write waiting when its transaction begins and
runs each in turn inside it; a write that fails is undone alone (the engine's
savepoint), and no thread has its answer before the commit that keeps its write. Then
the oldest write still waiting leads the next transaction.

The engine says how a batch is written (:class:`Batch`); this module only says who
writes and when.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")

MOST = 64
"""The most writes one transaction takes (a bound on how long the last one waits)."""


class Turn(Generic[T]):
    """One thread's write, waiting to be written, then its answer or its error."""

    __slots__ = ("_context", "_error", "_woken", "answer", "job", "lead", "settled")

    def __init__(self, job: Callable[[Any], T]) -> None:
        self.job = job
        self._context = contextvars.copy_context()
        """The writer's context: the job runs in it, on whichever thread leads."""
        self._woken: threading.Event | None = None
        """Made when the write has to wait (a thread that leads at once never does)."""
        self.answer: T | None = None
        self._error: BaseException | None = None
        self.settled = False
        self.lead = False
        """Asked to lead the next transaction (it was the oldest write waiting)."""

    def run(self, tx: Any) -> T:
        """The job, in its writer's context."""
        return self._context.run(self.job, tx)

    def done(self, answer: T) -> None:
        self.answer, self.settled = answer, True

    def fail(self, error: BaseException) -> None:
        self._error, self.settled = error, True

    def outcome(self) -> T:
        if self._error is not None:
            raise self._error
        return self.answer  # type: ignore[return-value]


class Batch(Protocol):
    """How an engine writes a batch: one transaction, each turn settled (done or failed)
    or handed back to be written again (the transaction was lost before its commit)."""

    def __call__(self, turns: list[Turn[Any]]) -> list[Turn[Any]]: ...


class Solo(Protocol):
    """How an engine writes one job alone, when no other write waits: its transaction,
    the job's answer or its error (the job runs in its caller's own context)."""

    def __call__(self, job: Callable[[Any], T]) -> T: ...


class Group:
    """The writes of one process's threads on one store, one transaction at a time."""

    def __init__(self, batch: Batch, solo: Solo, *, most: int = MOST,
                 patience: float | None = None,
                 impatient: Callable[[], BaseException] = TimeoutError) -> None:
        self._batch = batch
        self._solo = solo
        self._most = most
        self._patience = patience
        """How long a write waits for its turn to begin (None: for ever); then it is
        withdrawn, unwritten, with ``impatient()``. Once begun it is waited for."""
        self._impatient = impatient
        self._lock = threading.Lock()
        self._waiting: deque[Turn[Any]] = deque()
        self._leading = False
        """Some thread is writing a batch, or is asked to (then, and only then, writes
        may wait)."""
        self._local = threading.local()
        self.contended = False
        """A write of this process has waited for another's (the engine may then keep
        one connection for the writes: what it knows stays true whoever leads)."""

    @property
    def leading(self) -> bool:
        """True on the thread that is writing a batch right now."""
        return bool(getattr(self._local, "leading", False))

    def run(self, job: Callable[[Any], T]) -> T:
        """``job`` written in a transaction, maybe with other threads' writes; its answer
        once that transaction has committed, or its error (its own writes undone).

        Interrupted while it waits (Ctrl-C), the write is withdrawn if no transaction
        has taken it yet, and the lead it was offered goes on to the next write."""
        turn: Turn[T] | None = None
        with self._lock:
            if self._leading:  # another write is being written: wait in the queue
                turn = Turn(job)
                self._waiting.append(turn)
                self.contended = True
            self._leading = True
        if turn is None:  # no write waits: no queue, no turn (the usual case of one thread)
            self._local.leading = True
            try:
                return self._solo(job)
            finally:
                self._local.leading = False
                with self._lock:
                    self._pass_lead()  # to a write that came meanwhile, if one did
        deadline = (None if self._patience is None
                    else time.monotonic() + self._patience)
        try:
            while True:
                if not turn.lead:
                    self._await(turn, deadline)
                    if turn.settled:
                        return turn.outcome()
                turn.lead = False
                self._lead()
                if turn.settled:
                    return turn.outcome()
                # handed back (its transaction was lost): written again, maybe by another
        except BaseException:
            self._withdraw(turn)
            raise

    def _await(self, turn: Turn[Any], deadline: float | None) -> None:
        """Until ``turn`` is settled or asked to lead (each is set under the lock, before
        the turn is woken); past ``deadline`` a turn no transaction has taken is
        withdrawn with the impatient error."""
        while True:
            with self._lock:
                if turn.settled or turn.lead:
                    return
                if turn._woken is None:
                    turn._woken = threading.Event()
                woken = turn._woken
                taken = turn not in self._waiting  # in a transaction now: wait for it
            left = None if deadline is None or taken else deadline - time.monotonic()
            if left is not None and left <= 0:
                with self._lock:
                    if not turn.settled and not turn.lead and turn in self._waiting:
                        self._waiting.remove(turn)
                        raise self._impatient()
                continue
            woken.wait(left)
            woken.clear()

    def _withdraw(self, turn: Turn[Any]) -> None:
        """``turn``'s writer is gone (interrupted, or out of patience): it is taken out of
        the queue if it is still there, and a lead it was offered goes on."""
        with self._lock:
            if turn in self._waiting:
                self._waiting.remove(turn)
            if turn.lead:
                turn.lead = False
                self._pass_lead()

    def _pass_lead(self) -> None:
        """Under the lock: the oldest write waiting leads next, or nobody is leading."""
        if self._waiting:
            first = self._waiting[0]
            first.lead = True
            if first._woken is not None:
                first._woken.set()
        else:
            self._leading = False

    def _lead(self) -> None:
        """Write one batch of the waiting writes (this thread's first), then wake each
        writer whose write is settled and hand the lead to the oldest still waiting."""
        turns: list[Turn[Any]] = []
        again: list[Turn[Any]] = []
        self._local.leading = True
        try:
            with self._lock:
                turns = [self._waiting.popleft()
                         for _ in range(min(self._most, len(self._waiting)))]
            again = self._batch(turns)
        except BaseException:
            # The leader was interrupted: the others write again.
            again = [turn for turn in turns[1:] if not turn.settled]
            raise
        finally:
            self._local.leading = False
            with self._lock:
                self._waiting.extendleft(reversed(again))
                for turn in turns:
                    if turn.settled and turn._woken is not None:
                        turn._woken.set()
                self._pass_lead()
