"""``python -m bench.engines``: both engines under the same load, each beside its own raw
baseline (issue 20).

For each engine (SQLite, PostgreSQL) and each W (1, 2, 4, 8 by default), W worker
processes drain N tasks with ``claim_next`` -> ``submit`` (zero threshold: a submit
completes the task). Beside it, in the same minutes, a raw baseline of the same shape on
the same engine: one narrow table, and per item a claim transaction (pick the best ready
row, mark it claimed) and a completion transaction. The PostgreSQL baseline picks with
``FOR UPDATE SKIP LOCKED``, as ``next`` does. Prints cycles/s per side, the
hivelite/raw ratio, and wasted claims (refusals other than ``queue_empty``).

The PostgreSQL server is ``$HIVELITE_TEST_POSTGRES`` (a libpq connection string), or
``--postgres``; ``.ci/postgres start`` makes a throwaway one. Figures only: nothing here
asserts a timing. See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hivelite import Caller, Hive, HiveliteError, NotFound
from hivelite.core.protocol import PRIORITIES

from . import figures as figures_file
from . import lib
from .queue import priority, raw_populate, raw_worker
from .workers import outputs, reap

WORKER_TIMEOUT_S = 900.0
PG_RAW_SCHEMA = """
CREATE TABLE items(
    id bigint PRIMARY KEY,
    state text NOT NULL,
    rank integer NOT NULL,
    lease text,
    token bigint NOT NULL DEFAULT 0,
    result text
);
CREATE INDEX items_ready ON items(rank, id) WHERE state = 'routed';
"""


def _psycopg() -> Any:
    import psycopg

    return psycopg


# -- stores -------------------------------------------------------------------------------


def pg_url(server: str, database: str, schema: str) -> str:
    params = dict(item.split("=", 1) for item in server.split())
    return (f"postgresql://{params.get('user', 'postgres')}@/{database}"
            f"?host={params['host']}&schema={schema}")


def make_hivelite(engine: str, where: Path, server: str, database: str, items: int,
                  tag: str) -> str:
    """A store named as ``Hive.open`` takes it, with ``items`` routed tasks (not timed)."""
    store = (str(where / f"{tag}.db") if engine == "sqlite"
             else pg_url(server, database, tag))
    with Hive.open(store, owner=lib.OWNER, plugins=[lib.ZeroThreshold()]) as hive:
        for i in range(1, items + 1):
            hive.handoff(lib.OWNER_CALLER, requester="ana/planner", assignee=lib.AGENT,
                         project="bench", packet=lib.PACKET, priority=priority(i))
    return store


def make_raw(engine: str, where: Path, server: str, database: str, items: int,
             tag: str) -> str:
    if engine == "sqlite":
        path = where / f"{tag}.db"
        raw_populate(path, items)
        return str(path)
    with _psycopg().connect(pg_url(server, database, "public").split("&schema=")[0],
                            autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {tag}")
        conn.execute(f"SET search_path = {tag}")
        conn.execute(PG_RAW_SCHEMA)
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO items(id, state, rank) VALUES (%s, 'routed', %s)",
                            [(i, PRIORITIES.index(priority(i))) for i in range(1, items + 1)])
    return pg_url(server, database, tag)


def pg_raw_worker(url: str, name: str) -> tuple[int, int]:
    """Drain the raw PostgreSQL table; (cycles, wasted claims)."""
    base, _, schema = url.partition("&schema=")
    conn = _psycopg().connect(base, autocommit=True)
    conn.execute(f"SET search_path = {schema}")
    cycles = wasted = 0
    while True:
        with conn.transaction():
            row = conn.execute("SELECT id FROM items WHERE state = 'routed' ORDER BY rank, id"
                               " LIMIT 1 FOR UPDATE SKIP LOCKED").fetchone()
            if row is None:
                break
            lease = f"{name}-{cycles}"
            claimed = conn.execute("UPDATE items SET state = 'accepted', lease = %s,"
                                   " token = token + 1 WHERE id = %s AND state = 'routed'",
                                   (lease, row[0])).rowcount == 1
        if not claimed:
            wasted += 1
            continue
        with conn.transaction():
            done = conn.execute("UPDATE items SET state = 'completed', lease = NULL,"
                                " result = %s WHERE id = %s AND lease = %s",
                                (lib.SUMMARY, row[0], lease)).rowcount == 1
        wasted += not done
        cycles += 1
    conn.close()
    return cycles, wasted


def lib_worker(store: str, name: str) -> tuple[int, int]:
    """Drain through the API; (cycles, wasted: refusals other than queue_empty)."""
    me = Caller.agent(lib.AGENT, name)
    cycles = wasted = 0
    with Hive.open(store, plugins=[lib.ZeroThreshold()]) as hive:
        while wasted <= 1000:
            try:
                lease = hive.claim_next(me)
            except NotFound as exc:
                if exc.reason == "queue_empty":
                    break
                wasted += 1
                continue
            except HiveliteError:
                wasted += 1
                continue
            try:
                hive.submit(me, lease.number, lease_id=lease.lease_id,
                            token=lease.fencing_token, summary=lib.SUMMARY,
                            evidence=lib.EVIDENCE)
            except HiveliteError:
                wasted += 1
                continue
            cycles += 1
    return cycles, wasted


def round_trips(store: str, cycles: int = 20, *, plugin: bool = True) -> float:
    """Round trips per ``claim_next`` -> ``submit`` cycle on a PostgreSQL store: the times
    the client waits for the server's answers. The store runs its statements in psycopg's
    pipeline mode, where a statement whose answer is not needed yet is only queued, and the
    client waits when it fetches an answer (a flush) or ends the pipeline (a sync, which
    carries the ``COMMIT``): each such wait with answers still due is one round trip. A
    wait for an answer outside a pipeline (``Wait.R``) counts one too. The store needs
    ``cycles + 1`` ready tasks; one cycle runs first, untimed, to open the connection and
    check the rules. ``plugin``: a plugin answers the threshold's question, as in the
    drains (submit reads the task for it first); without, the store's policy judges."""
    from psycopg import _pipeline_base, waiting  # what every wait goes through

    base = _pipeline_base.BasePipeline
    real_wait = waiting.wait
    real = {name: getattr(base, name) for name in ("_fetch_gen", "_sync_gen", "_exit_gen")}
    count, counting, inside = 0, False, 0

    def waits_for(name: str) -> Any:
        def gen(self: Any, *args: Any, **kwargs: Any) -> Any:
            nonlocal count, inside
            if counting and not inside and (name != "_fetch_gen" or self.result_queue):
                count += 1  # a sync always waits (for its own answer, at least)
            inside += 1
            try:
                return (yield from real[name](self, *args, **kwargs))
            finally:
                inside -= 1

        return gen

    def counted(gen: Any, *args: Any, **kwargs: Any) -> Any:
        def watched() -> Any:
            nonlocal count
            blocked = False
            try:
                ask = next(gen)
                while True:  # (a pipeline's waits are counted above)
                    if counting and int(ask) == 1 and not blocked and not inside:
                        count, blocked = count + 1, True
                    ask = gen.send((yield ask))
            except StopIteration as done:
                return done.value

        return real_wait(watched(), *args, **kwargs)

    me = Caller.agent(lib.AGENT, "rt")
    loaded = os.environ.get("HIVELITE_LOAD_PLUGINS")
    os.environ["HIVELITE_LOAD_PLUGINS"] = ""  # as the workers: no installed plugin
    try:
        hive = Hive.open(store, plugins=[lib.ZeroThreshold()] if plugin else [])
    finally:
        if loaded is None:
            del os.environ["HIVELITE_LOAD_PLUGINS"]
        else:
            os.environ["HIVELITE_LOAD_PLUGINS"] = loaded
    waiting.wait = counted
    for name in real:
        setattr(base, name, waits_for(name))
    try:
        with hive:
            for n in range(cycles + 1):
                counting = n > 0
                lease = hive.claim_next(me)
                hive.submit(me, lease.number, lease_id=lease.lease_id,
                            token=lease.fencing_token, summary=lib.SUMMARY,
                            evidence=lib.EVIDENCE)
    finally:
        waiting.wait = real_wait
        for name, method in real.items():
            setattr(base, name, method)
    return count / cycles


def worker_main(argv: Sequence[str]) -> int:
    """One worker process: say ready, wait for the start, drain, print what it did."""
    engine, side, store, name, go = argv
    Path(f"{go}.{name}").touch()
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            return 1
        time.sleep(0.0005)
    if side == "hivelite":
        cycles, wasted = lib_worker(store, name)
    elif engine == "sqlite":
        cycles, wasted = raw_worker(Path(store), name, "NORMAL", 4000)
    else:
        cycles, wasted = pg_raw_worker(store, name)
    print(json.dumps({"cycles": cycles, "wasted": wasted, "end": time.monotonic()}))
    return 0


def drain(engine: str, side: str, store: str, workers: int, scratch: Path) -> dict[str, Any]:
    """Start ``workers`` processes on ``store``, release them together, time them."""
    go = scratch / f"go-{engine}-{side}-{workers}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, (str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")))),
        "HIVELITE_LOAD_PLUGINS": ""}
    names = [f"w{k}" for k in range(workers)]
    procs = [subprocess.Popen([sys.executable, "-m", "bench.engines", "_worker", engine, side,
                               store, name, str(go)], stdout=subprocess.PIPE, text=True,
                              env=env) for name in names]
    try:
        deadline = time.monotonic() + 120
        while not all(Path(f"{go}.{name}").exists() for name in names):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"{engine} {side}: a worker did not start")
            time.sleep(0.005)
        started = time.monotonic()
        go.touch()
    except BaseException:
        reap(procs)
        raise
    outs = outputs(procs, f"{engine} {side}", WORKER_TIMEOUT_S)
    reports = [json.loads(out) for out in outs]
    seconds = max(r["end"] for r in reports) - started
    cycles = sum(r["cycles"] for r in reports)
    return {"rate": cycles / seconds, "cycles": cycles,
            "wasted": sum(r["wasted"] for r in reports), "seconds": seconds}


def run(args: argparse.Namespace) -> dict[str, Any]:
    server = args.postgres or os.environ.get("HIVELITE_TEST_POSTGRES", "")
    engines = [e for e in args.engines if e == "sqlite" or server]
    if "postgres" in args.engines and not server:
        print("  postgres: skipped (no server: --postgres or $HIVELITE_TEST_POSTGRES)")
    database = f"hivelite_bench_{os.getpid()}"
    if "postgres" in engines:
        with _psycopg().connect(server, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {database}")
    found: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="hivelite-bench-engines-") as tmp:
            scratch = Path(tmp)
            print(f"  {args.items:,} tasks per drain, best of {args.repeat}; W = worker"
                  " processes")
            print(f"  {'engine':<9} {'W':>2}  {'hivelite/s':>10}  {'raw/s':>9}  {'ratio':>6}"
                  f"  {'wasted':>6}")
            for engine in engines:
                for workers in args.workers:
                    best: dict[str, dict[str, Any]] = {}
                    for round_ in range(args.repeat):
                        for side in ("raw", "hivelite"):
                            tag = f"{side[0]}{workers}_{round_}"
                            make = make_raw if side == "raw" else make_hivelite
                            store = make(engine, scratch, server, database, args.items, tag)
                            got = drain(engine, side, store, workers, scratch)
                            if side not in best or got["rate"] > best[side]["rate"]:
                                best[side] = got
                    ratio = best["hivelite"]["rate"] / best["raw"]["rate"]
                    print(f"  {engine:<9} {workers:>2}  {best['hivelite']['rate']:>10.0f}"
                          f"  {best['raw']['rate']:>9.0f}  {ratio:>6.3f}"
                          f"  {best['hivelite']['wasted'] + best['raw']['wasted']:>6}")
                    found[f"{engine}_w{workers}"] = {
                        "hivelite_per_s": best["hivelite"]["rate"],
                        "raw_per_s": best["raw"]["rate"], "ratio": ratio,
                        "wasted": best["hivelite"]["wasted"]}
            if "postgres" in engines:
                store = make_hivelite("postgres", scratch, server, database, 21, "rt")
                found["postgres_round_trips"] = trips = round_trips(store)
                store = make_hivelite("postgres", scratch, server, database, 21, "rtp")
                found["postgres_round_trips_policy"] = alone = round_trips(store, plugin=False)
                print(f"  postgres: {trips:.1f} round trips a claim -> submit cycle"
                      f" ({alone:.1f} when the store's policy alone judges the result)")
    finally:
        if "postgres" in engines:
            with _psycopg().connect(server, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_worker"]:
        return worker_main(argv[1:])
    p = argparse.ArgumentParser(prog="python -m bench.engines", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--items", type=int, default=1000, help="tasks each drain empties")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8], metavar="W")
    p.add_argument("--repeat", type=int, default=2, help="drains per side and W (best kept)")
    p.add_argument("--engines", nargs="+", choices=("sqlite", "postgres"),
                   default=["sqlite", "postgres"])
    p.add_argument("--postgres", default=None, metavar="CONNINFO",
                   help="the PostgreSQL server (default: $HIVELITE_TEST_POSTGRES)")
    p.add_argument("--figures", type=Path, default=None, metavar="FILE",
                   help="also write the figures as JSON to FILE")
    args = p.parse_args(argv)
    print(f"bench.engines at {figures_file.revision()}")
    found = run(args)
    if args.figures is not None:
        figures_file.save(args.figures, found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
