"""``python -m bench.killnine``: real worker processes killed with SIGKILL mid-write.

Worker processes (``python -m bench.killnine worker STORE``, the real library on the
normal VFS) write in a loop on one store: hand off a task, claim it, add updates and
checkpoints, submit, have it verified, now and then run a WAL checkpoint. Before each
verb a worker writes ``begin`` to its stdout, and after it every acknowledged receipt
(one JSON line, one ``write`` each, so a line is whole or absent). The parent reads the
lines as they come and SIGKILLs a worker at a random moment (usually while it is writing,
sometimes while it is still starting or opening the store), then starts another in its
place; several workers run at once, so a kill can also leave the write lock, a half
written transaction or a checkpoint behind for the others.

Afterwards the store is opened with hivelite, ``doctor``'s checks must all pass and every
acknowledged receipt's effect must be there (the same look-ups as ``bench.powerloss``).
A killed process loses nothing its commit returned, with ``synchronous=FULL`` or
``NORMAL`` alike: its writes are in the operating system's cache, which outlives it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hivelite import Caller, Hive, HiveliteError
from hivelite.store.doctor import diagnose

from .powerloss import EVIDENCE, OWNER, REVIEWER, Store, conn_of

ROOT = Path(__file__).resolve().parent.parent


# -- the worker ---------------------------------------------------------------------------

def _say(**message: Any) -> None:
    os.write(1, (json.dumps(message, separators=(",", ":")) + "\n").encode())


def worker(path: Path, sync: str, name: str, seed: int, threads: int = 1) -> None:
    """Write forever (until killed) on ``threads`` threads sharing one store (their writes
    share transactions: group commit): handoff, claim, update/checkpoint, submit, verify."""
    hive = Hive.open(path, owner="ana", synchronous=sync)  # type: ignore[arg-type]
    _say(opened=name)
    if threads == 1:
        _write_forever(hive, name, random.Random(seed))
    runs = [threading.Thread(target=_write_forever,
                             args=(hive, f"{name}t{t}", random.Random(f"{seed}:{t}")))
            for t in range(threads)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()


def _write_forever(hive: Hive, name: str, rng: random.Random) -> None:
    coder = Caller.agent("ana/coder", name)
    i = 0

    def ack(op: str, receipt: Any, **extra: Any) -> None:
        fact = {"op": op, "task": receipt.number, "state": receipt.state.value,
                "seq": receipt.seq, **extra}
        _say(ack=fact)

    while True:
        i += 1
        mark = f"{name}-{i}"
        try:
            _say(begin="handoff")
            r = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                             project="kill", packet={"task": f"Task {mark}",
                                                     "deliverable_type": "code",
                                                     "acceptance_criteria": ["ok"]})
            ack("handoff", r, id=r.id)
            n = r.number
            _say(begin="claim")
            c = hive.claim(coder, n)
            ack("claim", c)
            for j in range(rng.randint(0, 3)):
                if rng.random() < 0.5:
                    _say(begin="update")
                    r = hive.update(coder, n, lease_id=c.lease_id, token=c.fencing_token,
                                    summary=f"up {mark}-{j}", tokens=j + 1)
                    ack("update", r, up=f"up {mark}-{j}")
                else:
                    _say(begin="checkpoint")
                    r = hive.checkpoint(coder, n, lease_id=c.lease_id, token=c.fencing_token,
                                        progress=f"cp {i * 10 + j}")
                    ack("checkpoint", r, cp=i * 10 + j)
            _say(begin="submit")
            r = hive.submit(coder, n, lease_id=c.lease_id, token=c.fencing_token,
                            summary=f"done {mark}", evidence=EVIDENCE)
            ack("submit", r)
            _say(begin="verify")
            r = hive.verify(REVIEWER, n, verdict="accept")
            ack("verify", r)
            if rng.random() < 0.1:
                _say(begin="wal_checkpoint")
                conn_of(hive).execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except HiveliteError as exc:  # e.g. store_busy under load: not acknowledged
            _say(refused=f"{type(exc).__name__}: {exc}")


# -- the parent ---------------------------------------------------------------------------

@dataclass
class Worker:
    proc: subprocess.Popen[bytes]
    name: str
    started: float
    lines: list[dict[str, Any]] = field(default_factory=list)
    first_ack: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None

    def read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if not raw.endswith(b"\n"):
                break  # a line cut short by the kill: never acknowledged
            msg = json.loads(raw)
            self.lines.append(msg)
            if "ack" in msg:
                self.first_ack.set()

    @property
    def acks(self) -> list[dict[str, Any]]:
        return [m["ack"] for m in self.lines if "ack" in m]

    @property
    def mid_op(self) -> bool:
        """Killed between a ``begin`` and its acknowledgement (or refusal)."""
        last = next((m for m in reversed(self.lines) if "opened" not in m), None)
        return last is not None and "begin" in last


@dataclass
class KillStats:
    sync: str
    kills: int = 0
    kills_mid_op: int = 0
    kills_before_first_ack: int = 0
    workers: int = 0
    acked: int = 0
    refused: int = 0
    lost: int = 0
    opened: bool = False
    doctor_ok: bool = False
    problems: list[str] = field(default_factory=list)
    worker_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return (self.opened and self.doctor_ok and self.lost == 0 and not self.problems
                and not self.worker_errors and self.acked > 0)


def _spawn(path: Path, sync: str, name: str, seed: int, threads: int = 1) -> Worker:
    env = {**os.environ, "HIVELITE_LOAD_PLUGINS": "",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                         if p)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.killnine", "worker", str(path), "--sync", sync,
         "--name", name, "--seed", str(seed), "--threads", str(threads)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    w = Worker(proc, name, time.monotonic())
    w.reader = threading.Thread(target=w.read, daemon=True)
    w.reader.start()
    return w


def _kill(w: Worker, stats: KillStats) -> None:
    w.proc.send_signal(signal.SIGKILL)
    w.proc.wait()
    assert w.reader is not None
    w.reader.join()
    stderr = w.proc.stderr.read().decode() if w.proc.stderr else ""
    if w.proc.returncode != -signal.SIGKILL:
        stats.worker_errors.append(f"{w.name} ended by itself ({w.proc.returncode}):"
                                   f" {stderr[-2000:]}")
    stats.kills += 1
    stats.kills_mid_op += w.mid_op
    stats.kills_before_first_ack += not w.first_ack.is_set()


def run_kills(path: Path, sync: str, kills: int, *, workers: int = 2, seed: int = 1,
              early: float = 0.2, threads: int = 1) -> KillStats:
    """Start ``workers`` writers on a new store at ``path`` and SIGKILL ``kills`` of them
    (each replaced by a new one) at random moments, then check the store."""
    rng = random.Random(f"{seed}:{sync}")
    stats = KillStats(sync)
    started = time.monotonic()
    Hive.open(path, owner="ana", synchronous=sync).close()  # type: ignore[arg-type]
    live: list[Worker] = []
    done: list[Worker] = []
    count = 0

    def spawn() -> None:
        nonlocal count
        count += 1
        live.append(_spawn(path, sync, f"w{count}", rng.getrandbits(32), threads))

    for _ in range(workers):
        spawn()
    while stats.kills < kills:
        victim = rng.choice(live)
        if rng.random() < early:  # while it starts or opens the store
            time.sleep(max(0.0, victim.started + rng.uniform(0.05, 0.6) - time.monotonic()))
        else:  # while it writes
            victim.first_ack.wait(timeout=20)
            time.sleep(rng.uniform(0.0, 0.3))
        live.remove(victim)
        _kill(victim, stats)
        done.append(victim)
        if stats.kills + len(live) < kills + workers:
            spawn()
    for w in live:  # the last ones go the same way
        _kill(w, stats)
        done.append(w)
    stats.workers = len(done)
    facts = [a for w in done for a in w.acks]
    stats.acked = len(facts)
    stats.refused = sum(1 for w in done for m in w.lines if "refused" in m)
    try:
        hive = Hive.open(path, owner="ana", synchronous=sync)  # type: ignore[arg-type]
    except Exception as exc:
        stats.problems.append(f"the store does not open: {type(exc).__name__}: {exc}")
        stats.seconds = time.monotonic() - started
        return stats
    stats.opened = True
    try:
        failed = [f for f in diagnose(conn_of(hive)) if not f.ok]
        stats.doctor_ok = not failed
        stats.problems += [f"doctor: {f.check}: {f.detail}" for f in failed]
        held = Store.read(hive)
    finally:
        hive.close()
    missing = [f for f in facts if not held.has(f)]
    stats.lost = len(missing)
    stats.problems += [f"acknowledged but missing: {f}" for f in missing[:10]]
    stats.seconds = time.monotonic() - started
    return stats


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("HIVELITE_LOAD_PLUGINS", "")  # installed plugins do not load
    if args[:1] == ["worker"]:
        p = argparse.ArgumentParser(prog="python -m bench.killnine worker")
        p.add_argument("path", type=Path)
        p.add_argument("--sync", default="FULL")
        p.add_argument("--name", default="w")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--threads", type=int, default=1)
        w = p.parse_args(args[1:])
        worker(w.path, w.sync, w.name, w.seed, w.threads)
        return 0
    p = argparse.ArgumentParser(prog="python -m bench.killnine", description=__doc__)
    p.add_argument("--kills", type=int, default=100, help="per sync mode (default 100)")
    p.add_argument("--workers", type=int, default=2, help="writing at once (default 2)")
    p.add_argument("--threads", type=int, default=1,
                   help="writing threads in each worker (default 1; more share commits)")
    p.add_argument("--sync", choices=("full", "normal", "both"), default="both")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(args)
    syncs = {"full": ["FULL"], "normal": ["NORMAL"], "both": ["FULL", "NORMAL"]}[a.sync]
    results = []
    with tempfile.TemporaryDirectory(prefix="hivelite-kill9-") as tmp:
        for sync in syncs:
            results.append(run_kills(Path(tmp) / f"{sync.lower()}.db", sync, a.kills,
                                     workers=a.workers, seed=a.seed, threads=a.threads))
    command = "python -m bench.killnine " + shlex.join(args)
    if a.json:
        print(json.dumps({"command": command, "modes": [
            {**asdict(s), "passed": s.passed} for s in results]}, indent=2))
    else:
        for s in results:
            print(f"{s.sync}: {s.kills} kills ({s.kills_mid_op} mid-operation,"
                  f" {s.kills_before_first_ack} before the first acknowledgement) of"
                  f" {s.workers} workers; {s.acked} operations acknowledged, {s.lost} lost;"
                  f" {s.refused} refused; store opened: {s.opened}; doctor passes:"
                  f" {s.doctor_ok}; {s.seconds:.1f} s; {'PASS' if s.passed else 'FAIL'}")
            for problem in s.problems[:10] + s.worker_errors[:5]:
                print(f"{s.sync} PROBLEM: {problem}")
        print(f"command: {command}")
    return 0 if all(s.passed for s in results) else 1


if __name__ == "__main__":
    sys.exit(main())
