"""``python -m bench.report``: every performance figure in one run, written to a page.

Runs, each in a process of its own and one after the other:

1. ``python -m bench`` (claim -> submit at one worker, NORMAL and FULL, against raw
   SQLite in the same run, with the WAL pages per transaction without and with a
   request id, and the fsync wait per commit);
2. ``python -m bench.queue --only drain`` at W = 1 and 2, NORMAL (next -> submit, against
   a raw queue of the same shape);
3. ``python -m bench.startup`` (CLI calls against ``python -c pass``, bytecode cached and
   not);
4. ``python -m bench.sizes`` (the everyday verbs, walking every task and export, on stores
   of 1,000 to 1,000,000 tasks built with the bulk handoff);
5. ``python -m bench.engines`` at W = 1, 2, 4 and 8, SQLite and PostgreSQL, twice: on a
   throwaway PostgreSQL server (fsync off) and on a durable one (fsync on);
6. ``python -m bench.serve`` (32 agents over HTTP against the same loop in-process);
7. ``python -m bench.threads`` (one process's threads on one store: group commit, at 1, 2,
   4 and 32 threads);
8. ``python -m bench.peers`` (FleetWright's contention workload, P = 1, 8 and 64 worker
   processes each looping claim -> finish, on hivelite, FleetWright and litequeue).

Every benchmark runs twice (a first pass of all of them, then a second). Around each run
the report measures the CPU other processes used meanwhile (the machine's busy time in
``/proc/stat`` less the benchmark's own and its PostgreSQL server's), which marks a run
busy, and reads the 1-minute load average, which cannot: the benchmark itself keeps a
core busy. Then it writes ``docs/performance.md`` (or ``--out``): the machine, the
command, each of issue 32's and issue 47's targets beside the two figures reached (met,
or short by how much; the verdict is on the better of the two), others' CPU and the load
at each, and every run's own output.

PostgreSQL: ``$HIVELITE_TEST_POSTGRES`` is the throwaway server when it is set; otherwise
the report starts one with ``.ci/postgres start``. The durable server is always its own
(``.ci/postgres start --durable``). Each server the report starts is stopped whatever
happens. A missing server, driver, ``server`` or ``bench`` extra (the peers' packages) is
said on the page.

The takes are kept beside the page (``docs/performance.json``): ``--only NAME… --keep``
runs those benchmarks again and keeps the others' takes from the last report, each shown
with when it began and at which revision.

``--quick`` runs smaller versions (minutes instead of hours) for trying it out; its page
says so. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw

import hivelite

from . import figures as figures_file
from .figures import revision

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "performance.md"
TAKES = 2
"""Each figure is taken this many times (a pass of every benchmark each)."""
BUSY_OTHERS = 10.0
"""A run during which other processes used more than this share of one core (%, averaged
over the run) is marked busy on the page."""
BUSY_PER_CORE = 0.5
"""Where others' CPU is not measured (no ``/proc``): a run whose 1-minute load average
passed this per core is marked busy instead. The benchmark's own process counts in the
load, so this marks quiet runs too; it is only the fallback."""
RUN_TIMEOUT_S = 4 * 3600.0


@dataclass(frozen=True)
class Run:
    """One benchmark as the report runs it (``server``: the PostgreSQL server it needs,
    passed as ``--postgres``; ``needs``: modules it cannot run without, from the optional
    extra ``extra``)."""

    name: str
    args: tuple[str, ...]
    quick: tuple[str, ...]
    server: str = ""
    needs: tuple[str, ...] = ()
    extra: str = ""


ENGINES = ("bench.engines", "--workers", "1", "2", "4", "8")
RUNS = (
    Run("cycle", ("bench", "--items", "5000", "--repeat", "3", "--sync", "both"),
        ("bench", "--items", "800", "--repeat", "1", "--sync", "both")),
    Run("drain", ("bench.queue", "--only", "drain", "--items", "2000", "--repeat", "3",
                  "--sync", "normal"),
        ("bench.queue", "--only", "drain", "--items", "500", "--repeat", "1",
         "--sync", "normal")),
    Run("startup", ("bench.startup", "--runs", "15"), ("bench.startup", "--runs", "5")),
    Run("sizes", ("bench.sizes", "--sizes", "1000", "100000", "1000000", "--repeat", "20"),
        ("bench.sizes", "--sizes", "1000", "20000", "--repeat", "5")),
    Run("postgres", (*ENGINES, "--items", "1000", "--repeat", "2"),
        (*ENGINES, "--items", "200", "--repeat", "1"), server="throwaway",
        needs=("psycopg",)),
    Run("postgres-durable", (*ENGINES, "--items", "1000", "--repeat", "2"),
        (*ENGINES, "--items", "200", "--repeat", "1"), server="durable",
        needs=("psycopg",)),
    Run("serve", ("bench.serve", "--agents", "32", "--seconds", "60", "--tasks", "800"),
        ("bench.serve", "--agents", "32", "--seconds", "5", "--tasks", "100"),
        needs=("uvicorn", "starlette")),
    Run("threads", ("bench.threads", "--threads", "1", "2", "4", "32", "--cycles", "6000"),
        ("bench.threads", "--threads", "1", "2", "4", "32", "--cycles", "1200")),
    Run("peers", ("bench.peers", "--units", "5000", "--processes", "1", "8", "64",
                  "--repeat", "2", "--durability", "full"),
        ("bench.peers", "--units", "500", "--processes", "1", "8", "64", "--repeat", "1",
         "--durability", "full"),
        needs=("fleetwright", "litequeue"), extra="bench"),
)
FIGURES_FILE = frozenset({"bench", "bench.queue", "bench.startup", "bench.sizes",
                          "bench.engines", "bench.peers"})
"""The benchmarks that take ``--figures FILE``; the others print a ``FIGURES`` line."""


@dataclass
class Take:
    """One run of one benchmark: what it printed, its figures, the load around it."""

    output: str = ""
    figures: dict[str, Any] | None = None
    load: tuple[float, float] | None = None
    """The 1-minute load average before and after."""
    seconds: float = 0.0
    skipped: str = ""
    """Why it did not run (empty: it ran)."""
    when: str = ""
    """When it began (UTC) and at which revision: a page can keep an earlier report's takes."""
    others_cpu: float | None = None
    """The CPU processes other than the benchmark (and its PostgreSQL server) used during
    the run, in % of one core averaged over it; None: not measured (``cpu_missing`` says
    why) or a take kept from a report that did not measure it."""
    cpu_missing: str = ""


def busy(t: Take, cores: int) -> bool:
    """True when others used more than :data:`BUSY_OTHERS` % of a core during the run; where
    that was not measured, when the load average passed :data:`BUSY_PER_CORE` per core."""
    if t.others_cpu is not None:
        return t.others_cpu > BUSY_OTHERS
    return t.load is not None and max(t.load) > BUSY_PER_CORE * cores


# -- the targets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One of issue 32's targets and the figures (one a take) that meet or miss it."""

    what: str
    figures: tuple[float | None, ...]
    goal: float
    unit: str
    at_least: bool
    """True: the figure must reach the goal (a ratio to raw); False: stay under it."""
    source: str = ""
    """The run the figures come from (whose load the page shows beside them)."""
    beside: str = ""
    """What the page states beside the figures (a baseline, the same figure uncached)."""
    missing: str = ""
    """Why there is no figure, when there is none."""

    def _meets(self, value: float) -> bool:
        return value >= self.goal if self.at_least else value <= self.goal

    @property
    def best(self) -> float | None:
        """The better of the figures: the verdict is on it."""
        known = [v for v in self.figures if v is not None]
        if not known:
            return None
        return max(known) if self.at_least else min(known)

    def verdict(self) -> str:
        best = self.best
        if best is None:
            return f"not measured ({self.missing})" if self.missing else "not measured"
        if self._meets(best):
            met = sum(1 for v in self.figures if v is not None and self._meets(v))
            known = sum(1 for v in self.figures if v is not None)
            return "met" if met == known else f"met in {met} of {known} runs"
        if self.at_least:
            return f"short: {best / self.goal:.0%} of the target"
        if not self.goal:
            return f"short: {best:g}, not 0"
        return f"short: {best / self.goal:.1f}x the limit"

    def shown(self) -> str:
        return _numbers(self.figures) + (f" {self.unit}" if self.unit and self.best is not None
                                         else "")

    def row(self, others: str = "", load: str = "") -> str:
        sign = ">=" if self.at_least else "<="
        goal = f"{sign} {self.goal:g} {self.unit}".strip()
        return (f"| {self.what} | {self.shown()} | {goal} | {self.verdict()} | {self.beside}"
                f" | {others} | {load} |")


def _get(figures: dict[str, Any] | None, *path: str) -> float | None:
    value: Any = figures
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return float(value) if isinstance(value, int | float) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _each(takes: Sequence[Take], *path: str) -> tuple[float | None, ...]:
    return tuple(_get(t.figures, *path) for t in takes)


def _why(takes: Sequence[Take]) -> str:
    """Why a run's figures are missing, from its takes."""
    for take in takes:
        if take.skipped:
            return take.skipped
    if any(take.output for take in takes):
        return "the run printed no figures; see its output"
    return "not run"


def _number(value: float | None, form: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if form == "{:,.3g}" and abs(value) >= 1000 else form.format(value)


def _numbers(values: Sequence[float | None], form: str = "{:,.3g}") -> str:
    """Each take's figure (three significant digits unless ``form`` says otherwise)."""
    return " / ".join(_number(v, form) for v in values)


def targets(found: dict[str, list[Take]]) -> list[Target]:
    """Issue 32's targets, each beside what this report's runs measured."""
    rows: list[Target] = []

    def add(what: str, source: str, values: Sequence[float | None], goal: float,
            unit: str = "", *, at_least: bool, beside: str = "") -> None:
        rows.append(Target(what, tuple(values), goal, unit, at_least, source, beside,
                           _why(found.get(source, []))))

    cycle = found.get("cycle", [])
    normal = _each(cycle, "NORMAL", "ratio")
    stretch = max((v for v in normal if v is not None), default=None)
    add("claim -> submit, W=1, NORMAL (x raw)", "cycle", normal, 0.15, at_least=True,
        beside="stretch 0.20: " + ("-" if stretch is None else "met" if stretch >= 0.20
                                   else f"{stretch / 0.20:.0%}")
        + f"; CPU-time ratio {_numbers(_each(cycle, 'NORMAL', 'cpu_ratio'))}")
    drain = found.get("drain", [])
    add("next -> submit, W=2, NORMAL (x raw queue)", "drain", _each(drain, "W=2", "ratio"),
        0.12, at_least=True, beside=f"W=1: {_numbers(_each(drain, 'W=1', 'ratio'))}")
    raw_pages = _numbers(_each(cycle, "pages", "raw", "all"))
    add("WAL pages a transaction, no request id", "cycle",
        _each(cycle, "pages", "hivelite", "all"), 4.5, at_least=False,
        beside=f"raw: {raw_pages}")
    add("WAL pages a transaction, with a request id", "cycle",
        _each(cycle, "pages", "request_id", "all"), 5.5, at_least=False,
        beside=f"raw: {raw_pages}")
    add("claim -> submit, W=1, FULL (x raw FULL)", "cycle", _each(cycle, "FULL", "ratio"),
        0.60, at_least=True, beside="fsync wait a commit: "
        + _numbers(_each(cycle, "fsync_wait_us"), "{:,.0f}") + " us")

    startup = found.get("startup", [])
    base = _numbers(_each(startup, "pass_ms"), "{:.0f}")
    for name, goal in (("list", 4.0), ("--json show 1", 4.0), ("history 1", 4.0),
                       ("--version", 2.5)):
        what = f"`hivelite {name}`" + (" (1,000 tasks)" if name != "--version" else "")
        add(f"{what}, cached bytecode (x `python -c pass`)", "startup",
            _each(startup, name, "ratio"), goal, at_least=False,
            beside=f"uncached: {_numbers(_each(startup, name, 'uncached_ratio'))};"
            f" `python -c pass` {base} ms")

    for source, server in (("postgres", "throwaway"), ("postgres-durable", "durable")):
        takes = found.get(source, [])
        pg1, pg4 = _each(takes, "postgres_w1", "hivelite_per_s"), _each(
            takes, "postgres_w4", "hivelite_per_s")
        sq1 = _each(takes, "sqlite_w1", "hivelite_per_s")
        raw1, raw4 = _each(takes, "postgres_w1", "raw_per_s"), _each(
            takes, "postgres_w4", "raw_per_s")
        add(f"PostgreSQL W=1 ({server} server), x hivelite on SQLite W=1", source,
            [_ratio(a, b) for a, b in zip(pg1, sq1, strict=True)], 0.5, at_least=True,
            beside=f"cycles/s: PostgreSQL {_numbers(pg1, '{:,.0f}')},"
            f" SQLite {_numbers(sq1, '{:,.0f}')}")
        add(f"PostgreSQL W=4 over W=1 ({server} server)", source,
            [_ratio(a, b) for a, b in zip(pg4, pg1, strict=True)], 2.0, at_least=True,
            beside="ceiling, raw PostgreSQL W=4 over W=1: "
            + _numbers([_ratio(a, b) for a, b in zip(raw4, raw1, strict=True)]))
        add(f"PostgreSQL round trips a claim -> submit, the store's policy judging"
            f" ({server} server)", source, _each(takes, "postgres_round_trips_policy"), 4,
            at_least=False, beside="a plugin judging (submit reads the task for it first): "
            + _numbers(_each(takes, "postgres_round_trips")))

    serve = found.get("serve", [])
    agents = next((int(v) for v in _each(serve, "agents") if v is not None), 32)
    http, local = _each(serve, "http", "per_s"), _each(serve, "in_process", "per_s")
    dups = [_get(t.figures, "http", "duplicates") for t in serve]
    errors = [len(t.figures["http"]["errors"]) if t.figures and isinstance(
        t.figures.get("http"), dict) and isinstance(t.figures["http"].get("errors"), list)
        else None for t in serve]
    add(f"HTTP, {agents} agents, x in-process", "serve",
        [_ratio(a, b) for a, b in zip(http, local, strict=True)], 1.0, at_least=True,
        beside=f"cycles/s: HTTP {_numbers(http, '{:,.0f}')}, in-process"
        f" {_numbers(local, '{:,.0f}')}; duplicates {_numbers(dups, '{:.0f}')}, errors"
        f" {_numbers(errors, '{:.0f}')}")
    add(f"HTTP, {agents} agents, p99 of a cycle", "serve", _each(serve, "http", "p99_ms"),
        300, "ms", at_least=False,
        beside=f"in-process p99 {_numbers(_each(serve, 'in_process', 'p99_ms'), '{:,.0f}')} ms")

    threads = found.get("threads", [])
    one = _each(threads, "T=1", "per_s")
    many = {t: _each(threads, f"T={t}", "per_s") for t in (2, 4, 32)}
    add("next -> submit, 32 threads of one process, x 1 thread (group commit)", "threads",
        [_ratio(a, b) for a, b in zip(many[32], one, strict=True)], 1.0, at_least=True,
        beside="; ".join(
            f"{t} threads: " + _numbers([_ratio(a, b) for a, b in zip(many[t], one,
                                                                      strict=True)])
            for t in (2, 4)) + "; p99 of a cycle at 32 threads "
        + _numbers(_each(threads, "T=32", "p99_ms"), "{:,.0f}") + " ms")

    rows += _size_targets(found.get("sizes", []))
    rows += _peer_targets(found.get("peers", []))
    return rows


PEER_PROCESSES = (1, 8, 64)
"""The worker process counts issue 47 sets FleetWright's workload's targets at."""


def _summed(takes: Sequence[Take], side: str, key: str,
            processes: Sequence[int]) -> tuple[float | None, ...]:
    """``key`` of ``side`` added up over every P of each take (None: a P is missing)."""
    out: list[float | None] = []
    for t in takes:
        values = [_get(t.figures, f"P={p}", side, key) for p in processes]
        out.append(None if any(v is None for v in values) else sum(
            v for v in values if v is not None))
    return tuple(out)


def _peer_targets(takes: list[Take]) -> list[Target]:
    """Issue 47's targets on FleetWright's contention workload (``bench.peers``): hivelite
    over FleetWright in units/s and the p99 of a submit over a finish's, at each P; units
    finished twice and busy errors reaching a worker, over every P."""
    missing = _why(takes)
    shown = next((t.figures for t in takes if t.figures), None) or {}
    durability = shown.get("durability", "")
    rows = []
    for p in PEER_PROCESSES:
        at = f"P={p}"
        rate = {side: _numbers(_each(takes, at, side, "per_s"), "{:,.0f}")
                for side in ("hivelite", "fleetwright", "litequeue")}
        rows.append(Target(
            f"FleetWright's workload, {at}: units/s (x FleetWright)", _each(takes, at, "ratio"),
            1.5, "", True, "peers", f"units/s: hivelite {rate['hivelite']}, FleetWright"
            f" {rate['fleetwright']}, litequeue {rate['litequeue']}"
            + (f"; WAL, synchronous {durability}" if durability and p == 1 else ""),
            missing))
    for p in PEER_PROCESSES:
        at = f"P={p}"
        rows.append(Target(
            f"FleetWright's workload, {at}: submit p99 (x FleetWright's finish p99)",
            _each(takes, at, "finish_p99_ratio"), 1.0, "", False, "peers",
            f"p99 ms: hivelite {_numbers(_each(takes, at, 'hivelite', 'finish_p99_ms'))},"
            f" FleetWright {_numbers(_each(takes, at, 'fleetwright', 'finish_p99_ms'))}",
            missing))
    every = f"P = {', '.join(str(p) for p in PEER_PROCESSES)}"
    peers = {side: {key: _numbers(_summed(takes, side, key, PEER_PROCESSES), "{:.0f}")
                    for key in ("duplicates", "busy")} for side in ("fleetwright", "litequeue")}
    rows.append(Target(
        f"FleetWright's workload: units finished twice by hivelite ({every})",
        _summed(takes, "hivelite", "duplicates", PEER_PROCESSES), 0, "", False, "peers",
        f"FleetWright {peers['fleetwright']['duplicates']}, litequeue"
        f" {peers['litequeue']['duplicates']}", missing))
    rows.append(Target(
        f"FleetWright's workload: busy errors reaching a hivelite worker ({every})",
        _summed(takes, "hivelite", "busy", PEER_PROCESSES), 0, "", False, "peers",
        f"at P=64: {_numbers(_each(takes, 'P=64', 'hivelite', 'busy'), '{:.0f}')};"
        f" FleetWright {peers['fleetwright']['busy']}, litequeue {peers['litequeue']['busy']};"
        " other errors: "
        + _numbers(_summed(takes, "hivelite", "errors", PEER_PROCESSES), "{:.0f}"), missing))
    return rows


def _size_targets(takes: list[Take]) -> list[Target]:
    """Issue 18's rows on the store's size (met then, to stay met)."""
    sizes = next((t.figures for t in takes if t.figures), None)
    if not sizes:
        return [Target("1M-task sizes and RSS", (None,) * max(1, len(takes)), 1.5, "", False,
                       "sizes", missing=_why(takes))]
    small, big = min(sizes, key=int), max(sizes, key=int)
    rows = []
    for verb in ("next", "claim -> submit", "show", "history", "list --ready --limit 50",
                 "list --state completed --limit 50"):
        values = tuple(_ratio(_get(t.figures, big, f"{verb} (ms)"),
                              _get(t.figures, small, f"{verb} (ms)")) for t in takes)
        rows.append(Target(f"`{verb}` at {int(big):,} tasks (x {int(small):,})", values, 1.5,
                           "", False, "sizes", missing=_why(takes)))
    for what, key, goal, unit in (
            (f"RSS, listing all {int(big):,} tasks", "walk all RSS (MB)", 80.0, "MB"),
            (f"RSS, export of {int(big):,} tasks", "export RSS (MB)", 150.0, "MB"),
            (f"bulk handoff of {int(big):,} tasks", "build (s)", 180 * int(big) / 1_000_000,
             "s")):
        rows.append(Target(what, _each(takes, big, key), goal, unit, False, "sizes",
                           missing=_why(takes)))
    return rows


# -- PostgreSQL servers --------------------------------------------------------------------


@dataclass
class Server:
    """A PostgreSQL server for the engines runs: its connection string, or why none."""

    kind: str
    conninfo: str = ""
    folder: str = ""
    """Set when the report started it (and so stops it)."""
    settings: str = ""
    missing: str = ""
    home: str = ""
    """Its ``.ci/postgres`` folder when known (``data/postmaster.pid`` inside): the CPU it
    spends serving the benchmark is then told apart from other processes'."""


def _settings(conninfo: str) -> str:
    """The server's version and durability settings, as the page states them."""
    try:
        import psycopg

        with psycopg.connect(conninfo, autocommit=True) as conn:
            shown = [f"{name} {conn.execute(f'SHOW {name}').fetchone()[0]}"  # type: ignore[index]
                     for name in ("fsync", "synchronous_commit", "full_page_writes")]
            version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    except Exception as exc:  # the page says what went wrong; the report goes on
        return f"(settings not read: {type(exc).__name__})"
    return f"PostgreSQL {version}, " + ", ".join(shown)


def start_server(kind: str) -> Server:
    """The throwaway (``$HIVELITE_TEST_POSTGRES`` if set) or durable server; one started
    with ``.ci/postgres`` when needed. Never raises: a failure is said in ``missing``."""
    if importlib.util.find_spec("psycopg") is None:
        return Server(kind, missing="no PostgreSQL driver (psycopg): install the postgres"
                      " extra")
    given = os.environ.get("HIVELITE_TEST_POSTGRES", "")
    if kind == "throwaway" and given:
        return Server(kind, given, settings=_settings(given) + " ($HIVELITE_TEST_POSTGRES)",
                      home=os.environ.get("HIVELITE_TEST_POSTGRES_DIR", ""))
    command = [str(ROOT / ".ci" / "postgres"), "start", *(["--durable"] * (kind == "durable"))]
    try:
        ran = subprocess.run(command, capture_output=True, text=True, timeout=180,
                             check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return Server(kind, missing=f"no PostgreSQL server: `.ci/postgres start` failed"
                      f" ({type(exc).__name__})")
    found = dict(re.findall(r"export (HIVELITE_TEST_POSTGRES\w*)='([^']*)'", ran.stdout))
    folder = found.get("HIVELITE_TEST_POSTGRES_DIR", "")
    server = Server(kind, found.get("HIVELITE_TEST_POSTGRES", ""), folder, home=folder)
    if ran.returncode or not server.conninfo:
        stop_server(server)
        last = (ran.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return Server(kind, missing=f"no PostgreSQL server: `.ci/postgres start` failed"
                      f" ({last})")
    server.settings = _settings(server.conninfo)
    return server


def stop_server(server: Server) -> None:
    """Stop and remove a server the report started (nothing for a given one)."""
    if server.folder:
        subprocess.run([str(ROOT / ".ci" / "postgres"), "stop"], capture_output=True,
                       env={**os.environ, "HIVELITE_TEST_POSTGRES_DIR": server.folder},
                       timeout=120, check=False)
        server.folder = ""


@contextlib.contextmanager
def postgres(kind: str) -> Iterator[Server]:
    server = start_server(kind)
    try:
        yield server
    finally:
        stop_server(server)


# -- others' CPU ---------------------------------------------------------------------------

PROC = Path("/proc")
"""Where the machine's and the server's CPU times are read (Linux)."""


class NotMeasured(Exception):
    """Why others' CPU cannot be measured here (the page says it, and falls back on the
    load average)."""


@dataclass(frozen=True)
class Cpu:
    """CPU seconds used so far: by the whole machine (busy, not idle), by the report and
    the benchmarks it waited for, and by the PostgreSQL server a run drives."""

    machine: float
    own: float
    server: float = 0.0


def _tick() -> float:
    """Seconds a ``/proc`` clock tick."""
    return 1.0 / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> float:
    """The machine's busy CPU seconds since boot, from ``/proc/stat``: user, nice, system,
    irq, softirq and steal (guest time is inside user already; idle and iowait are not
    busy)."""
    try:
        first = (PROC / "stat").read_text().split("\n", 1)[0].split()
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, first[1:9])
    except (OSError, ValueError) as exc:
        raise NotMeasured(f"no {PROC / 'stat'} to read ({type(exc).__name__})") from exc
    return (user + nice + system + irq + softirq + steal) * _tick()


def own_cpu() -> float:
    """CPU seconds of the report's process and of every child it waited for: a benchmark,
    with the processes it waited for in turn (``RUSAGE_CHILDREN`` counts those too)."""
    return sum(used.ru_utime + used.ru_stime for used in (
        resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))


def _times(pid: int | str) -> tuple[int, list[int]]:
    """A process's parent and fields 14-17 of ``/proc/<pid>/stat`` (utime, stime, cutime,
    cstime, in ticks); its name, field 2, may hold spaces and parentheses."""
    text = (PROC / str(pid) / "stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), [int(v) for v in fields[11:15]]


def server_cpu(pid: int) -> float:
    """CPU seconds a PostgreSQL server used: the postmaster's own and its reaped children's
    (fields 14-17), and its live children's (backends and background workers; one that
    ends during a run moves from these to the postmaster's reaped children)."""
    try:
        total = sum(_times(pid)[1])
    except (OSError, ValueError, IndexError) as exc:
        raise NotMeasured(f"the PostgreSQL server's CPU not readable ({type(exc).__name__})"
                          ) from exc
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                parent, times = _times(entry.name)
            except (OSError, ValueError, IndexError):
                continue  # ended meanwhile
            if parent == pid:
                total += sum(times)
    return total * _tick()


def postmaster(home: str) -> int:
    """The pid of the server ``.ci/postgres`` made in ``home``: the first line of its data
    directory's ``postmaster.pid``."""
    try:
        return int((Path(home) / "data" / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError) as exc:
        raise NotMeasured(f"the PostgreSQL server's pid not readable ({type(exc).__name__})"
                          ) from exc


def cpu_now(server: int | None = None) -> Cpu:
    """The CPU used so far (the server's only when its postmaster's pid is given)."""
    return Cpu(machine_cpu(), own_cpu(), server_cpu(server) if server is not None else 0.0)


def others_cpu(before: Cpu, after: Cpu, seconds: float) -> float:
    """Other processes' CPU between two readings, in % of one core averaged over
    ``seconds``: the machine's busy time less the report's, the benchmark's and its
    server's. The machine's time comes in clock ticks, the benchmark's more finely, so a
    quiet run can come out a little below zero: that reads as 0."""
    used = ((after.machine - before.machine) - (after.own - before.own)
            - (after.server - before.server))
    return max(0.0, 100.0 * used / seconds) if seconds > 0 else 0.0


class CpuMeter:
    """Others' CPU over one run: made just before it, :meth:`read` just after it."""

    def __init__(self, server: Server | None = None) -> None:
        self.missing = ""
        self.pid: int | None = None
        self.before: Cpu | None = None
        try:
            if server is not None:
                if not server.home:
                    raise NotMeasured("the PostgreSQL server's folder is not known (set"
                                      " $HIVELITE_TEST_POSTGRES_DIR)")
                self.pid = postmaster(server.home)
            self.before = cpu_now(self.pid)
        except NotMeasured as exc:
            self.missing = str(exc)

    def read(self, seconds: float) -> float | None:
        """Others' CPU since the meter was made (None: not measured, ``missing`` says why)."""
        if self.before is None:
            return None
        try:
            return others_cpu(self.before, cpu_now(self.pid), seconds)
        except NotMeasured as exc:
            self.missing = str(exc)
            return None


# -- running -------------------------------------------------------------------------------


def _missing_modules(run: Run) -> str:
    absent = [name for name in run.needs if importlib.util.find_spec(name) is None]
    if not absent:
        return ""
    extra = run.extra or ("postgres" if "psycopg" in absent else "server")
    return f"{', '.join(absent)} not installed (the {extra} extra)"


def _load() -> float:
    return os.getloadavg()[0]


def take(run: Run, args: tuple[str, ...], folder: Path, number: int,
         env: dict[str, str]) -> Take:
    """Run ``run`` once (its ``number``-th take), with a PostgreSQL server when it needs
    one; never raises for a benchmark that fails or cannot run."""
    missing = _missing_modules(run)
    if missing:
        return Take(skipped=missing)
    with contextlib.ExitStack() as stack:
        server: Server | None = None
        if run.server:
            server = stack.enter_context(postgres(run.server))
            SERVERS.setdefault(run.server, []).append(server.settings or server.missing)
            if not server.conninfo:
                return Take(skipped=server.missing)
            args = (*args, "--postgres", server.conninfo)
        module = args[0]
        path = folder / f"{run.name}-{number}.json"
        command = [sys.executable, "-m", *args]
        if module in FIGURES_FILE:
            command += ["--figures", str(path)]
        print(f"{run.name} (run {number}): python -m {' '.join(shown_args(run, args))}",
              file=sys.stderr, flush=True)
        when = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC at {revision()}"
        before, meter, began = _load(), CpuMeter(server), time.perf_counter()
        try:
            ran = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=RUN_TIMEOUT_S, check=False)
            output = ran.stdout + (f"\n(exit {ran.returncode})\n{ran.stderr[-2000:]}"
                                   if ran.returncode else "")
        except subprocess.TimeoutExpired:
            output = f"(stopped after {RUN_TIMEOUT_S:.0f} s)"
        seconds = time.perf_counter() - began
        others = meter.read(seconds)
        got = Take(figures_file.without_line(output), figures_file.read(path, output),
                   (before, _load()), seconds, when=when, others_cpu=others,
                   cpu_missing=meter.missing)
    return got


SERVERS: dict[str, list[str]] = {}
"""Each PostgreSQL server kind's settings (or why there was none), one a take."""


def shown_args(run: Run, args: Sequence[str]) -> list[str]:
    """``args`` as the page shows them: a server's connection string named, not spelled."""
    out = list(args)
    if "--postgres" in out:
        i = out.index("--postgres")
        out[i + 1:i + 2] = [f"<{run.server} server>"]
    return out


# -- the page ------------------------------------------------------------------------------


def machine() -> str:
    """The machine and the versions, in one line."""
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{os.cpu_count()} cores ({model}), {platform.system()},"
            f" Python {platform.python_version()}, SQLite {apsw.sqlite_lib_version()},"
            f" hivelite {hivelite.__version__} ({revision()})")


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} minutes"


def _percent(value: float) -> str:
    return f"{value:.1f}%" if value < 10 else f"{value:.0f}%"


def others(takes: Sequence[Take]) -> str:
    """Others' CPU during each take, a busy one in bold ("-": a take kept from a report
    that did not measure it)."""
    shown = []
    for t in takes:
        if t.others_cpu is None:
            shown.append("not measured" if t.cpu_missing else "-")
        else:
            text = _percent(t.others_cpu)
            shown.append(f"**{text} busy**" if t.others_cpu > BUSY_OTHERS else text)
    return " / ".join(shown)


def loads(takes: Sequence[Take], cores: int) -> str:
    """The load around each take, ``before -> after``; in bold, busy, only where others'
    CPU was not measured and the load says the machine was busy."""
    shown = []
    for t in takes:
        if t.load is None:
            shown.append("-")
            continue
        text = f"{t.load[0]:.2f} -> {t.load[1]:.2f}"
        shown.append(f"**{text} busy**" if t.others_cpu is None and busy(t, cores) else text)
    return " / ".join(shown)


def _warning(found: dict[str, list[Take]], cores: int) -> list[str]:
    """The page's warning naming the busy runs (nothing when none was)."""
    crowded = [name for name, ts in found.items() if any(busy(t, cores) for t in ts)]
    if not crowded:
        return []
    why = f"other processes used more than {BUSY_OTHERS:g}% of a core"
    if any(busy(t, cores) and t.others_cpu is None for ts in found.values() for t in ts):
        why += (f"; where that was not measured, the load average passed {BUSY_PER_CORE:g}"
                " per core")
    return [f"**Warning: the machine was busy** ({why}) during {', '.join(crowded)}: take"
            " those figures again on a quiet machine before quoting them.", ""]


def page(found: dict[str, list[Take]], command: str, quick: bool, seconds: float, *,
         cores: int | None = None, servers: dict[str, list[str]] | None = None,
         load: tuple[float, float] | None = None) -> str:
    """``docs/performance.md`` from the takes of one report."""
    cores = cores or os.cpu_count() or 1
    servers = SERVERS if servers is None else servers
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = [t for t in targets(found) if t.source in found]
    takes = max((len(v) for v in found.values()), default=TAKES)
    often = "twice" if takes == 2 else f"{takes} times"
    lines = [
        "<!-- Generated by `python -m bench.report`; its figures are this report's runs'. -->",
        "# Performance",
        "",
        f"Written by `{command}` on {when}, in {_duration(seconds)}"
        + (" (**--quick**: small runs, for trying the report, not for quoting)" if quick
           else "") + ".",
        "",
        f"Machine: {machine()}.",
        "",
        "Every ratio compares hivelite with a baseline measured beside it in the same run"
        " (see bench/README.md for what each side does). The machine may be shared, so"
        " figures move between runs: compare ratios, not times.",
        "",
        "## Targets (issues 32 and 47)",
        "",
        (f"Each figure is taken {often}: the report runs every benchmark once, then"
         " every benchmark again, and shows each run's figure (run 1 / run 2). **The verdict"
         " is on the better of them** (a busy machine only ever slows a run down), and says"
         f" \"met in 1 of {takes} runs\" when only one met the target." if takes > 1 else
         "Each figure is taken once here (`--takes 1`); the report's default takes each"
         " twice.")
        + " **Others' CPU** is the CPU time processes other than the benchmark (and the"
        " PostgreSQL server it drives) used during each run, in % of one core averaged over"
        " the run: the machine's busy time (`/proc/stat`) less the benchmark's own and its"
        f" server's. **busy** marks a run where it passed {BUSY_OTHERS:g}%, whose figures"
        " say more about the machine than about hivelite. The load is the 1-minute load"
        " average before -> after each run, for reference only: the benchmark's own process"
        " counts in it, so a quiet machine reads about 1 after a run that keeps one core"
        " busy. Where others' CPU was not measured (no `/proc`, or a PostgreSQL server whose"
        " folder is not known), busy falls back on the load"
        f" passing {BUSY_PER_CORE:g} per core ({BUSY_PER_CORE * cores:g} on these {cores}"
        " cores); \"-\" is a take kept from a report that did not measure it.",
        "",
        f"| what | {' / '.join(f'run {n}' for n in range(1, takes + 1))} | target | verdict"
        " | beside it | others' CPU (% of a core) | load (1 min) |",
        "|---|---|---|---|---|---|---|",
        *(t.row(others(found.get(t.source, [])), loads(found.get(t.source, []), cores))
          for t in rows),
        "",
    ]
    lines += _warning(found, cores)
    if load is not None:
        lines += [f"Load average (1 minute) when the report began: {load[0]:.2f}; when it"
                  f" ended: {load[1]:.2f}.", ""]
    if servers:
        lines += ["PostgreSQL servers (one started for each run, stopped after it):", ""]
        lines += [f"- {kind}: {'; '.join(dict.fromkeys(said))}"
                  for kind, said in servers.items()]
        lines.append("")
    lines.append("## What each benchmark printed")
    for run in RUNS:
        for number, t in enumerate(found.get(run.name, []), 1):
            args = shown_args(run, (*(run.quick if quick else run.args),
                                    *(("--postgres", "-") if run.server else ())))
            head = f"### {run.name}, run {number}: `python -m {' '.join(args)}`"
            if t.skipped:
                lines += ["", head, "", f"Not run: {t.skipped}."]
                continue
            taken = f", began {t.when}" if t.when else ""
            cpu = others([t]) + (f" ({t.cpu_missing})" if t.cpu_missing else "")
            lines += ["", head, "", f"Others' CPU {cpu}, load {loads([t], cores)},"
                      f" {_duration(t.seconds)}{taken}.", "", "```", t.output.rstrip(), "```"]
    return "\n".join(lines) + "\n"


def takes_file(page_path: Path) -> Path:
    """Where a report keeps its takes beside its page (``docs/performance.json``)."""
    return page_path.with_suffix(".json")


def save_takes(path: Path, found: dict[str, list[Take]],
               servers: dict[str, list[str]]) -> None:
    """Write every take (and the servers' settings) so a later ``--keep`` can reuse them."""
    data = {"runs": {name: [dataclasses.asdict(t) for t in ts] for name, ts in found.items()},
            "servers": servers}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def load_takes(path: Path) -> tuple[dict[str, list[Take]], dict[str, list[str]]]:
    """The takes and servers :func:`save_takes` wrote (nothing when there is no file). A
    take written before one of :class:`Take`'s fields existed gets its default (others'
    CPU: "-" on the page)."""
    if not path.exists():
        return {}, {}
    data = json.loads(path.read_text())
    known = {field.name for field in dataclasses.fields(Take)}
    found = {name: [Take(**{**{k: v for k, v in t.items() if k in known},
                            "load": tuple(t["load"]) if t.get("load") else None})
                    for t in ts] for name, ts in data["runs"].items()}
    return found, data.get("servers", {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report")
    parser.add_argument("--quick", action="store_true", help="small runs (minutes)")
    parser.add_argument("--out", type=Path, default=PAGE,
                        help="the page to write (default: docs/performance.md)")
    parser.add_argument("--only", nargs="+", choices=[r.name for r in RUNS], default=None,
                        help="run only these benchmarks")
    parser.add_argument("--takes", type=int, default=TAKES,
                        help=f"runs of each benchmark (default {TAKES})")
    parser.add_argument("--keep", action="store_true",
                        help="with --only: keep the other benchmarks' takes from the last"
                             " report (the .json file beside the page)")
    args = parser.parse_args(argv)
    if args.takes < 1:
        parser.error("--takes must be at least 1")
    if args.keep and not args.only:
        parser.error("--keep needs --only (the benchmarks to run again)")
    began, first = time.perf_counter(), _load()
    found: dict[str, list[Take]] = {}
    env = {**os.environ, "HIVELITE_LOAD_PLUGINS": ""}
    with tempfile.TemporaryDirectory(prefix="hivelite-report-") as folder:
        for number in range(1, args.takes + 1):
            for run in RUNS:
                if args.only and run.name not in args.only:
                    continue
                found.setdefault(run.name, []).append(
                    take(run, run.quick if args.quick else run.args, Path(folder), number,
                         env))
    command = "python -m bench.report" + (" --quick" if args.quick else "") + (
        f" --takes {args.takes}" if args.takes != TAKES else "") + (
        f" --only {' '.join(args.only)}" if args.only else "") + (" --keep" if args.keep else "")
    again = {run.server for run in RUNS if run.server and run.name in found}
    servers = {kind: said for kind, said in SERVERS.items() if kind in again}
    if args.keep:
        kept, kept_servers = load_takes(takes_file(args.out))
        found = {run.name: found[run.name] if run.name in found else kept[run.name]
                 for run in RUNS if run.name in found or run.name in kept}
        servers = {**{kind: said for kind, said in kept_servers.items() if kind not in again},
                   **servers}
    save_takes(takes_file(args.out), found, servers)
    args.out.write_text(page(found, command, args.quick, time.perf_counter() - began,
                             servers=servers, load=(first, _load())))
    for target in targets(found):
        if target.source in found:
            print(f"{target.what}: {target.shown()}: {target.verdict()}", file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
