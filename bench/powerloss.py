"""``python -m bench.powerloss``: simulated power loss under a mixed workload.

Each crash is one forked child process that opens the store through the power-cut shim
(``bench/crashvfs.py``, registered as the child's default VFS, so the library is used
unchanged), runs a random mix of handoff, claim, checkpoint, update, submit, verify
(accept and reject), release (holder and owner), cancel, WAL checkpoints and jumps of the
clock past lease expiry on a few tasks, and reports every operation the library
acknowledged (returned without error) down a pipe as it happens. At a random write, sync
or truncate (one cut in ten among the first 15, about what reopening the store takes, the
others log-uniform from there to ``--max-events``) the power goes: every write
not yet synced is lost, and the child dies on the spot (``os._exit``: no cleanup runs).

The parent then treats the ``-shm`` as the memory it is (deleted, left stale or filled
with garbage, at random), copies the files and opens the copy with hivelite on the normal
VFS, runs ``doctor``'s checks (``hivelite.store.doctor.diagnose``), and looks for every
acknowledged operation's effect: its receipt's journal row (``seq`` with the same task and
``to_state``), a handoff's task id, an update's row, a checkpoint (or a later one). The next
child carries on from the crashed files themselves (recovery included), and every
``--generation`` crashes a new store is started, so crashes during creation are met too.

With ``synchronous=FULL`` nothing acknowledged may be lost. With ``NORMAL`` the WAL is
synced only at checkpoints, so what was committed since the last sync of the ``-wal`` may
be lost, and only that: the lost operations must be a suffix of the acknowledged ones,
all acknowledged after that sync. Nothing acknowledged in an earlier crash's round (which
survived it) may be lost later. The figures say how many were lost per crash.

Exit status 0 when every crash passed, 1 otherwise. ``--json`` prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

from hivelite import Caller, Hive, HiveliteError, ManualClock
from hivelite.core.clock import parse_ts
from hivelite.store.doctor import diagnose

from .crashvfs import Cut, PowerCut

START = "2026-12-02T09:00:00.000Z"
OWNER = Caller.owner("ana")
CODER = Caller.agent("ana/coder", "laptop")
REVIEWER = Caller.agent("ana/reviewer", "desktop")
OPEN_TASKS = 4
"""The workload keeps about this many tasks open."""
MAX_OPS = 20_000
"""A child that meets no power cut within this many operations reports it and stops."""
OPEN_STATES = ("requested", "waiting", "routed", "accepted", "working", "verifying",
               "approval")
SHM_FATES = ("deleted", "stale", "garbage")
EVIDENCE = [{"kind": "test_output", "summary": "ok"}]
MARK = 100_000
"""An operation's mark is round * MARK + its index in the round."""


# -- the child: the workload under the shim -----------------------------------------------

class _Pipe:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, **message: Any) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        while data:
            data = data[os.write(self.fd, data):]


class Workload:
    """The child's side: random verbs on a few tasks, each acknowledgement reported."""

    def __init__(self, hive: Hive, clock: ManualClock, rng: random.Random, pipe: _Pipe,
                 round_no: int) -> None:
        self.hive = hive
        self.clock = clock
        self.rng = rng
        self.pipe = pipe
        self.round = round_no
        self.index = 0
        self.acks = 0
        self.known: dict[int, str] = {}
        self.leases: dict[int, tuple[str, int]] = {}
        self.on_ack: Callable[[], None] | None = None
        self.current = "open"
        """The verb under way (for the figures: what the power cut interrupted)."""
        self.refresh()

    def refresh(self) -> None:
        """What the store says now (after a refused verb, or at the start)."""
        page = self.hive.list(state=list(OPEN_STATES), limit=500)
        self.known = {v.number: v.task.state.value for v in page.items}
        self.leases = {n: lease for n, lease in self.leases.items()
                       if self.known.get(n) in ("accepted", "working")}

    def choices(self) -> list[tuple[float, str, int | None]]:
        cands: list[tuple[float, str, int | None]] = []
        if len(self.known) < OPEN_TASKS:
            cands.append((3.0, "handoff", None))
        for n, state in self.known.items():
            if state == "routed":
                cands += [(3.0, "claim", n), (0.2, "cancel", n)]
            elif state in ("accepted", "working"):
                if n in self.leases:
                    cands += [(2.0, "checkpoint", n), (2.0, "update", n), (2.5, "submit", n),
                              (0.4, "release", n), (0.3, "owner_release", n),
                              (0.2, "cancel", n)]
                else:
                    cands.append((1.0, "owner_release", n))
            elif state == "approval":
                cands += [(2.0, "verify", n), (0.6, "reject", n)]
        cands += [(0.6, "wal_checkpoint", None), (0.2, "wal_truncate", None),
                  (0.15, "time_jump", None)]
        return cands

    def run(self) -> None:
        while self.index < MAX_OPS:
            self.index += 1
            weights, kinds = zip(*[(w, (k, n)) for w, k, n in self.choices()], strict=True)
            kind, number = self.rng.choices(kinds, weights=weights)[0]
            self.clock.advance(seconds=2)
            self.current = kind
            try:
                self.step(kind, number)
            except HiveliteError:  # a lease the clock ended, a task a move closed: fine
                self.current = "refresh"
                self.refresh()
            self.current = "between verbs"

    def step(self, kind: str, n: int | None) -> None:
        hive, mark = self.hive, self.round * MARK + self.index
        if kind == "time_jump":
            self.clock.advance(minutes=11)  # every live lease runs out: the next write sweeps
            return
        if kind in ("wal_checkpoint", "wal_truncate"):
            mode = "PASSIVE" if kind == "wal_checkpoint" else "TRUNCATE"
            conn_of(hive).execute(f"PRAGMA wal_checkpoint({mode})").fetchall()
            return
        fact: dict[str, Any] = {"op": kind, "mark": mark}
        if kind == "handoff":
            r = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                             project="crash", packet={"task": f"Task of op {mark}",
                                                      "deliverable_type": "code",
                                                      "acceptance_criteria": ["ok"]})
            fact["id"] = r.id
        else:
            assert n is not None
            lease_id, token = self.leases.get(n, ("", 0))
            if kind == "claim":
                r = hive.claim(CODER, n)
                self.leases[n] = (r.lease_id, r.fencing_token)
            elif kind == "checkpoint":
                r = hive.checkpoint(CODER, n, lease_id=lease_id, token=token,
                                    progress=f"cp {mark}")
                fact["cp"] = mark
            elif kind == "update":
                r = hive.update(CODER, n, lease_id=lease_id, token=token,
                                summary=f"up {mark}", tokens=self.rng.randint(1, 999))
                fact["up"] = f"up {mark}"
            elif kind == "submit":
                r = hive.submit(CODER, n, lease_id=lease_id, token=token,
                                summary=f"done {mark}", evidence=EVIDENCE)
            elif kind == "release":
                r = hive.release(CODER, n, lease_id=lease_id, token=token)
            elif kind == "owner_release":
                r = hive.release(OWNER, n)
            elif kind == "cancel":
                r = hive.cancel(OWNER, n, reason=f"cancel {mark}")
            elif kind == "verify":
                r = hive.verify(REVIEWER, n, verdict="accept")
            elif kind == "reject":
                r = hive.verify(REVIEWER, n, verdict="reject", reason=f"reject {mark}")
            else:  # pragma: no cover - a kind without a verb
                raise AssertionError(kind)
        state = r.state.value
        fact.update(task=r.number, state=state, seq=r.seq)
        if r.seq is None and not {"id", "cp", "up"} & fact.keys():
            fact["vacuous"] = True  # e.g. an owner release of a claim the clock just ended
        self.acks += 1
        self.pipe.send(ack=fact)
        if self.on_ack is not None:
            self.on_ack()
        self.known[r.number] = state
        if state not in ("accepted", "working"):
            self.leases.pop(r.number, None)
        for gone in [k for k, s in self.known.items() if s not in OPEN_STATES]:
            del self.known[gone]


def _child(path: Path, sync: str, seed: int, cut_at: int, flush_chance: float,
           round_no: int, out_fd: int) -> NoReturn:
    """Run in the forked child: never returns (``os._exit``)."""
    pipe = _Pipe(out_fd)
    state: dict[str, Any] = {"durable": 0, "work": None}

    def on_sync(kind: str) -> None:
        if kind == "wal":  # everything committed before is now on the disk
            work = state["work"]
            state["durable"] = work.acks if work is not None else 0

    def on_ack() -> None:
        if not state["shim"].pending("wal"):  # this commit's frames were synced already
            state["durable"] = state["work"].acks

    def on_power_loss(cut: Cut) -> None:
        work = state["work"]
        pipe.send(cut=asdict(cut), acks=work.acks if work is not None else 0,
                  durable=state["durable"], opened=work is not None,
                  during=work.current if work is not None else "open")
        os._exit(0)

    os.environ["HIVELITE_LOAD_PLUGINS"] = ""  # this process only: no installed plugin
    try:
        state["shim"] = PowerCut.install(  # kept: the VFS lives as long as this object
            cut_at=cut_at, flush_chance=flush_chance, seed=seed, on_sync=on_sync,
            on_power_loss=on_power_loss)
        clock = ManualClock(parse_ts(START) + timedelta(days=round_no))
        hive = Hive.open(path, owner="ana", synchronous=sync,  # type: ignore[arg-type]
                         clock=clock)
        work = Workload(hive, clock, random.Random(seed), pipe, round_no)
        work.on_ack = on_ack
        state["work"] = work
        work.run()
        pipe.send(nocut=work.acks)
        os._exit(0)
    except BaseException:
        work = state["work"]
        pipe.send(error=traceback.format_exc(limit=12),
                  acks=work.acks if work is not None else 0)
        os._exit(3)


# -- the parent: crash, reopen, check ------------------------------------------------------

@dataclass
class Round:
    """What one child reported."""

    acks: list[dict[str, Any]] = field(default_factory=list)
    cut: dict[str, Any] | None = None
    durable: int = 0
    opened: bool = False
    error: str | None = None
    nocut: bool = False
    status: int = 0
    during: str = ""


def _crash_once(path: Path, sync: str, seed: int, cut_at: int, flush_chance: float,
                round_no: int) -> Round:
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        _child(path, sync, seed, cut_at, flush_chance, round_no, write_fd)
    os.close(write_fd)
    chunks = []
    with os.fdopen(read_fd, "rb") as stream:
        while chunk := stream.read(65536):
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    result = Round(status=os.waitstatus_to_exitcode(status))
    for line in b"".join(chunks).decode().splitlines():
        msg = json.loads(line)
        if "ack" in msg:
            result.acks.append(msg["ack"])
        elif "cut" in msg:
            result.cut, result.durable, result.opened = msg["cut"], msg["durable"], msg["opened"]
            result.during = msg["during"]
        elif "error" in msg:
            result.error = msg["error"]
        elif "nocut" in msg:
            result.nocut = True
    return result


def _treat_shm(path: Path, fate: str, rng: random.Random) -> None:
    """The ``-shm`` is memory: after the crash it is gone, stale or garbage."""
    shm = Path(f"{path}-shm")
    if fate == "deleted":
        shm.unlink(missing_ok=True)
    elif fate == "garbage" and shm.exists():
        shm.write_bytes(rng.randbytes(shm.stat().st_size or 32768))


@dataclass
class Store:
    """What the reopened store holds, to look each acknowledged effect up in."""

    journal: dict[int, tuple[int, str]]
    ids: dict[int, str]
    updates: set[tuple[int, str]]
    checkpoints: dict[int, int]

    @classmethod
    def read(cls, hive: Hive) -> Store:
        conn = conn_of(hive)
        checkpoints = {}
        for task, body in conn.execute("SELECT task, body FROM checkpoints"):
            progress = str(json.loads(body).get("progress", ""))
            if progress.startswith("cp "):
                checkpoints[int(task)] = int(progress[3:])
        return cls(
            journal={int(s): (t, str(st)) for s, t, st in conn.execute(
                "SELECT seq, task, to_state FROM journal")},
            ids={int(n): str(i) for n, i in conn.execute("SELECT number, id FROM tasks")},
            updates={(int(t), str(s)) for t, s in conn.execute(
                "SELECT task, summary FROM updates")},
            checkpoints=checkpoints)

    def has(self, fact: dict[str, Any]) -> bool:
        task = fact["task"]
        if fact["seq"] is not None and self.journal.get(fact["seq"]) != (task, fact["state"]):
            return False
        if "id" in fact and self.ids.get(task) != fact["id"]:
            return False
        if "cp" in fact and self.checkpoints.get(task, -1) < fact["cp"]:
            return False
        return not ("up" in fact and (task, fact["up"]) not in self.updates)


@dataclass
class Check:
    """One crash's verdict."""

    opened: bool = False
    doctor: bool = False
    lost: int = 0
    lost_earlier: int = 0
    window_ok: bool = True
    problem: str | None = None
    survived: list[dict[str, Any]] = field(default_factory=list)


def _check(path: Path, workdir: Path, sync: str, fate: str, rng: random.Random,
           earlier: list[dict[str, Any]], rnd: Round) -> Check:
    """Open a copy of the crashed files with hivelite (normal VFS) and judge it."""
    check = Check()
    copy = workdir / "check" / "store.db"
    shutil.rmtree(copy.parent, ignore_errors=True)
    copy.parent.mkdir()
    for suffix in ("", "-wal", "-shm", "-journal"):
        if Path(f"{path}{suffix}").exists():
            shutil.copyfile(f"{path}{suffix}", f"{copy}{suffix}")
    _treat_shm(copy, fate, rng)
    try:
        hive = Hive.open(copy, owner="ana", synchronous=sync,  # type: ignore[arg-type]
                         clock=ManualClock(START))  # START: no lease is overdue, no write
    except Exception as exc:
        check.problem = f"the store does not open: {type(exc).__name__}: {exc}"
        return check
    check.opened = True
    try:
        findings = diagnose(conn_of(hive))
        failed = [f for f in findings if not f.ok]
        check.doctor = not failed
        if failed:
            check.problem = "doctor: " + "; ".join(f"{f.check}: {f.detail}" for f in failed)
        held = Store.read(hive)
    finally:
        hive.close()
    check.lost_earlier = sum(1 for f in earlier if not held.has(f))
    lost = [i for i, f in enumerate(rnd.acks) if not held.has(f)]
    gone = set(lost)
    check.survived = [f for i, f in enumerate(rnd.acks) if i not in gone]
    check.lost = len(lost)
    if lost:  # a suffix of what can be looked up (a vacuous fact is always "there")
        is_suffix = lost == [i for i in range(lost[0], len(rnd.acks))
                             if not rnd.acks[i].get("vacuous")]
        check.window_ok = sync == "NORMAL" and is_suffix and lost[0] >= rnd.durable
        if not check.window_ok:
            check.problem = (check.problem or "") + (
                f" lost {len(lost)} of {len(rnd.acks)} acknowledged operation(s)"
                f" (first lost #{lost[0]}: {rnd.acks[lost[0]]}; {rnd.durable} were"
                " acknowledged before the last sync of the -wal)")
    if check.lost_earlier:
        check.problem = (check.problem or "") + (
            f" lost {check.lost_earlier} operation(s) acknowledged before an earlier crash"
            " and found after it")
    return check


@dataclass
class ModeStats:
    sync: str
    crashes: int = 0
    opened: int = 0
    doctor_ok: int = 0
    acked: int = 0
    lost_total: int = 0
    lost_max: int = 0
    crashes_losing: int = 0
    lost_outside_window: int = 0
    lost_earlier: int = 0
    window_total: int = 0
    window_max: int = 0
    unsynced_at_cut: int = 0
    vacuous: int = 0
    child_errors: int = 0
    no_cut: int = 0
    cut_in_open: int = 0
    cut_at: Counter[str] = field(default_factory=Counter)
    cut_during: Counter[str] = field(default_factory=Counter)
    shm: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def lost_mean(self) -> float:
        return self.lost_total / self.crashes if self.crashes else 0.0

    @property
    def window_mean(self) -> float:
        return self.window_total / self.crashes if self.crashes else 0.0

    @property
    def passed(self) -> bool:
        return (self.opened == self.crashes and self.doctor_ok == self.crashes
                and self.lost_outside_window == 0 and self.lost_earlier == 0
                and self.child_errors == 0 and self.no_cut == 0
                and (self.sync == "NORMAL" or self.lost_total == 0))

    def as_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items()
               if k not in ("cut_at", "cut_during", "shm")}
        out.update(lost_mean=round(self.lost_mean, 3), window_mean=round(self.window_mean, 3),
                   cut_at=dict(self.cut_at.most_common()),
                   cut_during=dict(self.cut_during.most_common()), shm=dict(self.shm),
                   passed=self.passed, seconds=round(self.seconds, 1))
        return out


EARLY_EVENTS = 15
"""Opening a store again (recovery, ending the claims that expired) takes about ten writes
and syncs, creating one about fifty: a tenth of the cuts fall among the first 15, the rest
log-uniformly after."""


def _cut_point(rng: random.Random, max_events: int) -> int:
    if max_events <= EARLY_EVENTS or rng.random() < 0.1:
        return rng.randint(1, min(EARLY_EVENTS, max_events))
    return int(math.exp(rng.uniform(math.log(EARLY_EVENTS), math.log(max_events))))


def run_mode(sync: str, crashes: int, seed: int, *, generation: int, max_events: int,
             flush_chance: float, workdir: Path, progress: bool = False) -> ModeStats:
    """``crashes`` simulated power cuts with ``synchronous=sync``."""
    rng = random.Random(f"{seed}:{sync}")
    stats = ModeStats(sync)
    started = time.perf_counter()
    path = workdir / "store.db"
    earlier: list[dict[str, Any]] = []
    round_no = 0
    for i in range(crashes):
        if i % generation == 0:  # a new store
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            earlier, round_no = [], 0
        round_no += 1
        cut_at = _cut_point(rng, max_events)
        rnd = _crash_once(path, sync, rng.getrandbits(32), cut_at, flush_chance, round_no)
        fate = rng.choice(SHM_FATES)
        _treat_shm(path, fate, rng)  # what the next child meets
        stats.crashes += 1
        stats.shm[fate] += 1
        stats.acked += len(rnd.acks)
        stats.vacuous += sum(1 for f in rnd.acks if f.get("vacuous"))
        if rnd.error is not None or rnd.nocut or rnd.cut is None:
            stats.child_errors += rnd.error is not None
            stats.no_cut += rnd.nocut
            why = rnd.error or ("no power cut within the workload" if rnd.nocut
                                else f"the child died with status {rnd.status}")
            stats.failures.append(f"crash {i + 1} (round {round_no}): {why.strip()}")
        if rnd.cut is not None:
            stats.cut_at[rnd.cut["at"]] += 1
            stats.cut_during[rnd.during] += 1
            stats.unsynced_at_cut += bool(rnd.cut["dropped_bytes"])
            stats.cut_in_open += not rnd.opened
            window = len(rnd.acks) - rnd.durable
            stats.window_total += window
            stats.window_max = max(stats.window_max, window)
        check = _check(path, workdir, sync, fate, rng, earlier, rnd)
        stats.opened += check.opened
        stats.doctor_ok += check.doctor
        stats.lost_total += check.lost
        stats.lost_max = max(stats.lost_max, check.lost)
        stats.crashes_losing += check.lost > 0
        stats.lost_outside_window += 0 if check.window_ok else check.lost
        stats.lost_earlier += check.lost_earlier
        if check.problem:
            stats.failures.append(f"crash {i + 1} (round {round_no}, power cut at event"
                                  f" {cut_at}: {rnd.cut and rnd.cut['at']}):"
                                  f" {check.problem.strip()}")
            keep = workdir / f"failed-{sync}-{i + 1}"
            shutil.copytree(workdir / "check", keep, dirs_exist_ok=True)
        earlier += check.survived  # durable from now on; what was lost never happened
        if progress and (i + 1) % 50 == 0:
            print(f"  {sync}: {i + 1} crashes, {stats.lost_total} lost,"
                  f" {len(stats.failures)} failure(s)", file=sys.stderr, flush=True)
    stats.seconds = time.perf_counter() - started
    return stats


def run(crashes: int, syncs: list[str], seed: int, *, generation: int = 25,
        max_events: int = 3000, flush_chance: float = 0.0, workdir: Path | None = None,
        progress: bool = False) -> list[ModeStats]:
    out = []
    with tempfile.TemporaryDirectory(prefix="hivelite-powerloss-") as tmp:
        for sync in syncs:
            where = (workdir or Path(tmp)) / sync.lower()
            where.mkdir(parents=True, exist_ok=True)
            out.append(run_mode(sync, crashes, seed, generation=generation,
                                max_events=max_events, flush_chance=flush_chance,
                                workdir=where, progress=progress))
    return out


def conn_of(hive: Hive) -> Any:
    """The store's SQLite connection (this thread's); the benchmarks reach in the same way."""
    return hive.store.conn  # type: ignore[attr-defined]


def _report(results: list[ModeStats], command: str) -> str:
    rows: list[tuple[str, Callable[[ModeStats], str]]] = [
        ("crashes run", lambda s: f"{s.crashes}"),
        ("files that opened", lambda s: f"{s.opened}"),
        ("doctor passes", lambda s: f"{s.doctor_ok}"),
        ("operations acknowledged", lambda s: f"{s.acked}"),
        ("  with nothing to look up", lambda s: f"{s.vacuous}"),
        ("acknowledged ops lost: total", lambda s: f"{s.lost_total}"),
        ("  max per crash", lambda s: f"{s.lost_max}"),
        ("  mean per crash", lambda s: f"{s.lost_mean:.2f}"),
        ("  crashes that lost any", lambda s: f"{s.crashes_losing}"),
        ("  lost outside the window", lambda s: f"{s.lost_outside_window}"),
        ("  lost after surviving a crash", lambda s: f"{s.lost_earlier}"),
        ("unsynced window at the cut: max", lambda s: f"{s.window_max}"),
        ("  mean", lambda s: f"{s.window_mean:.2f}"),
        ("cuts that met unsynced writes", lambda s: f"{s.unsynced_at_cut}"),
        ("cuts while opening the store", lambda s: f"{s.cut_in_open}"),
        ("workload errors (tracebacks)", lambda s: f"{s.child_errors}"),
        ("seconds", lambda s: f"{s.seconds:.0f}"),
        ("verdict", lambda s: "PASS" if s.passed else "FAIL"),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"{'':{width}}  " + "  ".join(f"{s.sync:>8}" for s in results)]
    lines += [f"{name:{width}}  " + "  ".join(f"{get(s):>8}" for s in results)
              for name, get in rows]
    for s in results:
        where = ", ".join(f"{k} {v}" for k, v in s.cut_at.most_common())
        lines.append(f"{s.sync}: the power went at: {where}")
        lines.append(f"{s.sync}: ... during: "
                     + ", ".join(f"{k} {v}" for k, v in s.cut_during.most_common()))
        lines.append(f"{s.sync}: -shm after the cut: "
                     + ", ".join(f"{k} {v}" for k, v in sorted(s.shm.items())))
        for failure in s.failures[:10]:
            lines.append(f"{s.sync} FAILURE: {failure}")
        if len(s.failures) > 10:
            lines.append(f"{s.sync}: ... and {len(s.failures) - 10} more failure(s)")
    lines.append(f"command: {command}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.powerloss",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--crashes", type=int, default=1000, help="per sync mode (default 1000)")
    p.add_argument("--sync", choices=("full", "normal", "both"), default="both")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--generation", type=int, default=25,
                   help="crashes on one store before a new one is started (default 25)")
    p.add_argument("--max-events", type=int, default=3000,
                   help="the power goes at the Kth write/sync/truncate: K in 1..15 one time"
                   " in ten, else log-uniform in 15..N (default 3000)")
    p.add_argument("--flush-chance", type=float, default=0.0,
                   help="each unsynced write still reaches the disk with this chance"
                   " (default 0: every unsynced write is lost)")
    p.add_argument("--dir", type=Path, default=None,
                   help="keep the stores (and copies of failed ones) here")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--progress", action="store_true")
    args = p.parse_args(argv)
    os.environ.setdefault("HIVELITE_LOAD_PLUGINS", "")  # installed plugins do not load
    if args.crashes < 1 or args.generation < 1 or args.max_events < 1:
        p.error("--crashes, --generation and --max-events must be at least 1")
    syncs = {"full": ["FULL"], "normal": ["NORMAL"], "both": ["FULL", "NORMAL"]}[args.sync]
    command = "python -m bench.powerloss " + shlex.join(sys.argv[1:] if argv is None else argv)
    results = run(args.crashes, syncs, args.seed, generation=args.generation,
                  max_events=args.max_events, flush_chance=args.flush_chance,
                  workdir=args.dir, progress=args.progress)
    if args.json:
        print(json.dumps({"command": command, "modes": [s.as_json() for s in results]},
                         indent=2))
    else:
        print(_report(results, command))
    return 0 if all(s.passed for s in results) else 1


if __name__ == "__main__":
    sys.exit(main())
