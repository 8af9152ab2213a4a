"""Eight real processes claim the same routed task at the same moment, fifty rounds.

DESIGN §4 (every write in ``BEGIN IMMEDIATE`` with a several-second busy
timeout; at most one active claim per task; fencing tokens strictly grow) and
§5 (claims as leases). Each round the parent releases a barrier and all eight
workers call ``claim`` at once: exactly one gets a lease, the other seven get
``409 invalid_state task_claimed`` and nothing else (in particular no
"database is locked"). The winner then releases the task with its own lease,
so the one task is claimed again next round with the next fencing token.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from hivelite import Hive

from . import rawsql
from .conftest import HANG_S, own_task

WORKERS = 8
ROUNDS = 50
BARRIER_TIMEOUT_S = RESULT_TIMEOUT_S = JOIN_TIMEOUT_S = HANG_S  # hang guards, not deadlines
GO_DELAY_S = 0.02  # after the barrier, so that all eight are awake when the instant comes
ASSIGNEE = "ana/coder"

pytestmark = pytest.mark.slow


def _worker(k: int, path: str, number: int, rounds: int, start: Any, go: Any, claimed: Any,
            results: Any) -> None:
    """One process: open the store once (at the first start signal), then claim each round.

    Everything that happens is reported on ``results`` as a plain tuple; the
    worker never raises, so the parent sees every failure instead of a hang.
    """
    sys._hivelite_under_test = True  # type: ignore[attr-defined]  # no installed plugins
    from hivelite import Caller, HiveliteError, InvalidState

    hive: Hive | None = None
    try:
        for rnd in range(1, rounds + 1):
            try:
                start.wait(BARRIER_TIMEOUT_S)
            except threading.BrokenBarrierError:
                results.put((rnd, k, "error", "start barrier broken", 0.0, None))
                return
            opened = 0.0
            if hive is None:
                t0 = time.perf_counter()
                try:
                    hive = Hive.open(path)
                except Exception as exc:  # reported, not raised: the parent fails clearly
                    results.put((rnd, k, "error", f"open: {type(exc).__name__}: {exc}",
                                 0.0, None))
                    return
                opened = time.perf_counter() - t0
            # Line up on the parent's "go" instant: sleep most of the way, spin the rest.
            while (left := go.value - time.monotonic()) > 0:
                if left > 0.002:
                    time.sleep(left - 0.002)
            began = time.monotonic()
            t0 = time.perf_counter()
            outcome: str
            detail: Any
            lease = None
            caller = Caller.agent(ASSIGNEE, f"i{k}", f"r{rnd}")
            try:
                lease = hive.claim(caller, number)
                outcome, detail = "won", (lease.lease_id, lease.fencing_token)
                held = (lease.state, lease.holder, lease.instance, lease.session)
                if held != ("accepted", ASSIGNEE, f"i{k}", f"r{rnd}"):
                    outcome, detail = "error", f"claim receipt says {held}"
            except InvalidState as exc:
                outcome = "lost" if exc.reason == "task_claimed" else "error"
                detail = f"{type(exc).__name__}: {exc}"
            except HiveliteError as exc:
                outcome, detail = "error", f"{type(exc).__name__}: {exc}"
            except Exception as exc:
                outcome, detail = "error", f"{type(exc).__name__}: {exc}"
            latency = time.perf_counter() - t0
            try:
                claimed.wait(BARRIER_TIMEOUT_S)  # every claim is in before the winner lets go
            except threading.BrokenBarrierError:
                results.put((rnd, k, "error", "claimed barrier broken", latency, None))
                return
            if lease is not None:
                try:
                    hive.release(caller, number, lease_id=lease.lease_id,
                                 token=lease.fencing_token, reason=f"round {rnd} done")
                except Exception as exc:
                    outcome, detail = "error", f"release: {type(exc).__name__}: {exc}"
            results.put((rnd, k, outcome, detail, latency, opened, began, began + latency))
    finally:
        if hive is not None:
            hive.close()


def test_eight_processes_claim_one_task(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    with Hive.open(path, owner="ana") as hive:  # the system clock, as the workers use
        number = own_task(hive)
        assert hive.get(number).task.state == "routed"

    ctx = mp.get_context("spawn")
    start = ctx.Barrier(WORKERS + 1)  # the parent is the one who says "go"
    go = ctx.Value("d", 0.0)  # the instant (time.monotonic) every worker claims at
    claimed = ctx.Barrier(WORKERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, name=f"claimer-{k}", daemon=True,
                         args=(k, str(path), number, ROUNDS, start, go, claimed, results))
             for k in range(WORKERS)]
    began = time.perf_counter()
    for p in procs:
        p.start()

    rounds: list[list[tuple[Any, ...]]] = []
    errors: list[str] = []
    try:
        for rnd in range(1, ROUNDS + 1):
            go.value = time.monotonic() + GO_DELAY_S
            try:
                start.wait(BARRIER_TIMEOUT_S)
            except threading.BrokenBarrierError:
                dead = [(p.name, p.exitcode) for p in procs if not p.is_alive()]
                pytest.fail(f"round {rnd}: workers did not reach the start line; exited: {dead}")
            got: list[tuple[Any, ...]] = []
            while len(got) < WORKERS:
                try:
                    got.append(results.get(timeout=RESULT_TIMEOUT_S))
                except queue.Empty:
                    pytest.fail(f"round {rnd}: only {len(got)} of {WORKERS} workers answered"
                                f" within {RESULT_TIMEOUT_S:.0f} s: {got}")
            assert {r[0] for r in got} == {rnd}, got
            rounds.append(got)
            errors += [f"round {rnd} worker {r[1]}: {r[3]}" for r in got if r[2] == "error"]
            if errors:
                break
    finally:
        if errors or len(rounds) < ROUNDS:
            start.abort()
            claimed.abort()
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for p in procs:
            p.join(timeout=max(0.1, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():  # only our own children, by handle
                p.terminate()
                p.join(timeout=5)
    total = time.perf_counter() - began

    assert not errors, "claims failed with something other than task_claimed:\n" + "\n".join(
        errors)
    assert all(p.exitcode == 0 for p in procs), [(p.name, p.exitcode) for p in procs]

    winners = [[r for r in got if r[2] == "won"] for got in rounds]
    losers = [sum(1 for r in got if r[2] == "lost") for got in rounds]
    latencies = [r[4] for got in rounds for r in got]
    opens = [r[5] for r in rounds[0]]
    tokens = [w[0][3][1] for w in winners if len(w) == 1]
    win_by_worker = {k: sum(1 for w in winners if w and w[0][1] == k) for k in range(WORKERS)}
    # How simultaneous it was: the spread of the claims' start instants in a round, and
    # how many losers were already in flight before the winner's claim returned.
    spreads = [max(r[6] for r in got) - min(r[6] for r in got) for got in rounds]
    overlap = [sum(1 for r in got if r[2] == "lost" and r[6] < w[0][7])
               for got, w in zip(rounds, winners, strict=True) if len(w) == 1]
    print()
    print(f"race: {len(rounds)} rounds x {WORKERS} processes on one task in {total:.2f} s"
          f" (incl. spawning)")
    print(f"race: winners per round {sorted({len(w) for w in winners})}, losers per round"
          f" {sorted(set(losers))}; wins by worker {win_by_worker}")
    print(f"race: claim latency mean {1000 * sum(latencies) / len(latencies):.2f} ms,"
          f" max {1000 * max(latencies):.2f} ms; open in round 1 mean"
          f" {1000 * sum(opens) / len(opens):.1f} ms")
    print(f"race: start spread per round mean {1000 * sum(spreads) / len(spreads):.2f} ms;"
          f" losers in flight while the winner claimed: mean"
          f" {sum(overlap) / max(1, len(overlap)):.1f} of {WORKERS - 1}")
    print(f"race: fencing tokens {tokens[:5]} ... {tokens[-3:]}")

    for rnd, (won, lost) in enumerate(zip(winners, losers, strict=True), start=1):
        assert len(won) == 1, f"round {rnd}: {len(won)} winners: {rounds[rnd - 1]}"
        assert lost == WORKERS - 1, f"round {rnd}: {rounds[rnd - 1]}"
    assert all(a < b for a, b in itertools.pairwise(tokens)), tokens
    assert tokens == list(range(1, ROUNDS + 1))
    assert len({w[0][3][0] for w in winners}) == ROUNDS  # a fresh lease id every round

    conn = rawsql.connect(path)
    try:
        claims = conn.execute(
            "SELECT count(*) FROM journal WHERE task = ? AND from_state = 'routed'"
            " AND to_state = 'accepted'", (number,)).get
        state, lease_id, token = conn.execute(
            "SELECT state, lease_id, lease_token FROM tasks WHERE number = ?", (number,)
        ).fetchone()
    finally:
        conn.close()
    assert claims == ROUNDS
    assert (state, lease_id, token) == ("routed", None, ROUNDS)
    with Hive.open(path) as hive:
        moves = [e.move for e in hive.history(number)]
    assert moves.count(6) == ROUNDS
    assert moves.count(8) == ROUNDS  # each winner released it again
