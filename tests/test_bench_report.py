"""``python -m bench.report``: each target's verdict, how each benchmark's figures are read,
and the page it writes (figures made up here, in the shapes the benchmarks write them; the
benchmarks themselves are run by hand, never by the tests)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench import figures, peers, report
from bench.report import RUNS, Cpu, Take, Target, page, targets

from . import pg
from .conftest import ready


def cycle(normal: float, full: float, pages: float, with_id: float) -> dict[str, Any]:
    """What ``python -m bench --figures FILE`` writes."""
    return {"NORMAL": {"ratio": normal, "cpu_ratio": normal + 0.01, "runs": [normal]},
            "FULL": {"ratio": full, "runs": [full]}, "fsync_wait_us": 640.0,
            "pages": {"raw": {"all": 1.5}, "hivelite": {"all": pages},
                      "request_id": {"all": with_id}}}


def engines(pg1: float, pg4: float, sqlite1: float) -> dict[str, Any]:
    """What ``python -m bench.engines --figures FILE`` writes."""
    return {"sqlite_w1": {"hivelite_per_s": sqlite1, "raw_per_s": 9000.0},
            "postgres_w1": {"hivelite_per_s": pg1, "raw_per_s": 500.0},
            "postgres_w4": {"hivelite_per_s": pg4, "raw_per_s": 1100.0},
            "postgres_round_trips": 6.0, "postgres_round_trips_policy": 4.0}


def serve(http: float, local: float, p99: float) -> dict[str, Any]:
    """What ``python -m bench.serve`` prints on its ``FIGURES`` line."""
    return {"agents": 32, "seconds": 60.0,
            "http": {"per_s": http, "p99_ms": p99, "duplicates": 0, "errors": []},
            "in_process": {"per_s": local, "p99_ms": 300.0, "duplicates": 0, "errors": []}}


def peer_run(side: str, processes: int, per_s: float, *, finish_ms: float = 2.0,
             busy: int = 0, twice: int = 0) -> peers.Run:
    """One made-up drain of 100 units (``twice`` of them finished a second time)."""
    done = [f"u{i}" for i in range(100)] + [f"u{i}" for i in range(twice)]
    return peers.Run(side, processes, 100, 100 / per_s, done, [len(done)], [0.5] * 100,
                     [finish_ms] * 100, 0, busy, Counter(), 100, 0.05)


def peer_figures(hivelite: dict[int, float], *, p99: float = 2.0, busy: int = 0,
                 twice: int = 0) -> dict[str, Any]:
    """What ``python -m bench.peers --figures FILE`` writes (made by its own ``collect``):
    FleetWright at 1,000 units/s and a finish p99 of 4 ms at every P, litequeue at 1,200;
    hivelite's busy errors and units finished twice at P = 64."""
    runs = {}
    for p in (1, 8, 64):
        runs[("hivelite", p)] = [peer_run("hivelite", p, hivelite[p], finish_ms=p99,
                                          busy=busy * (p == 64), twice=twice * (p == 64))]
        runs[("fleetwright", p)] = [peer_run("fleetwright", p, 1000.0, finish_ms=4.0,
                                             busy=1)]
        runs[("litequeue", p)] = [peer_run("litequeue", p, 1200.0)]
    return json.loads(json.dumps(peers.collect(runs, 100, (1, 8, 64), 1, "FULL",
                                               peers.SIDES)))


SIZES = {
    "1000": {"next (ms)": 1.0, "claim -> submit (ms)": 1.0, "show (ms)": 1.0,
             "history (ms)": 1.0, "list --ready --limit 50 (ms)": 1.0,
             "list --state completed --limit 50 (ms)": 1.0, "walk all RSS (MB)": 40.0,
             "export RSS (MB)": 40.0, "build (s)": 0.3},
    "1000000": {"next (ms)": 1.2, "claim -> submit (ms)": 1.6, "show (ms)": 1.0,
                "history (ms)": 1.0, "list --ready --limit 50 (ms)": 4.0,
                "list --state completed --limit 50 (ms)": 1.5,
                "walk all RSS (MB)": 70.0, "export RSS (MB)": 151.0, "build (s)": 240.0}}


def takes(*found: dict[str, Any] | None, load: tuple[float, float] = (0.2, 0.3),
          others: float = 2.0) -> list[Take]:
    return [Take("output", f, load, 10.0, others_cpu=others) for f in found]


FOUND = {
    "cycle": takes(cycle(0.16, 0.55, 4.6, 5.5), cycle(0.12, 0.62, 4.4, 5.6)),
    "drain": takes({"W=1": {"ratio": 0.2}, "W=2": {"ratio": 0.11}},
                   {"W=1": {"ratio": 0.2}, "W=2": {"ratio": 0.10}}),
    "startup": takes(*[{"pass_ms": 25.0, "--version": {"ratio": 2.4, "uncached_ratio": 2.6},
                        "list": {"ratio": 4.2, "uncached_ratio": 6.0},
                        "--json show 1": {"ratio": 4.0, "uncached_ratio": 6.0},
                        "history 1": {"ratio": 3.9, "uncached_ratio": 5.9}}] * 2),
    "sizes": takes(SIZES, SIZES, load=(1.0, 1.01), others=0.4),  # its own core in the load
    "postgres": takes(engines(300.0, 700.0, 500.0), engines(200.0, 500.0, 500.0)),
    "postgres-durable": takes(engines(40.0, 50.0, 500.0), None, load=(1.4, 1.9), others=35.0),
    "serve": takes(serve(380.0, 360.0, 1200.0), serve(250.0, 370.0, 250.0)),
    "threads": takes({f"T={t}": {"per_s": v, "p99_ms": 20.0}
                      for t, v in ((1, 3400.0), (2, 2400.0), (4, 2600.0), (32, 3200.0))},
                     {f"T={t}": {"per_s": v, "p99_ms": 25.0}
                      for t, v in ((1, 3000.0), (2, 2500.0), (4, 2700.0), (32, 3300.0))}),
    "peers": takes(peer_figures({1: 1600.0, 8: 1400.0, 64: 600.0}, p99=5.0, busy=3),
                   peer_figures({1: 1400.0, 8: 1600.0, 64: 400.0}, p99=3.0)),
}


def verdicts(found: dict[str, list[Take]] = FOUND) -> dict[str, str]:
    return {t.what: t.verdict() for t in targets(found)}


def test_a_ratio_to_raw_must_reach_its_target_in_the_better_run() -> None:
    found = verdicts()
    assert found["claim -> submit, W=1, NORMAL (x raw)"] == "met in 1 of 2 runs"
    assert found["claim -> submit, W=1, FULL (x raw FULL)"] == "met in 1 of 2 runs"
    assert found["next -> submit, W=2, NORMAL (x raw queue)"] == "short: 92% of the target"
    assert found["HTTP, 32 agents, x in-process"] == "met in 1 of 2 runs"
    assert found["next -> submit, 32 threads of one process, x 1 thread (group commit)"] == (
        "met in 1 of 2 runs")  # 3200 / 3400, 3300 / 3000


def test_a_limit_must_not_be_passed() -> None:
    found = verdicts()
    assert found["WAL pages a transaction, no request id"] == "met in 1 of 2 runs"
    assert found["WAL pages a transaction, with a request id"] == "met in 1 of 2 runs"
    assert found["`hivelite --version`, cached bytecode (x `python -c pass`)"] == "met"
    assert found["`hivelite list` (1,000 tasks), cached bytecode (x `python -c pass`)"] == (
        "short: 1.1x the limit")
    assert found["`hivelite --json show 1` (1,000 tasks), cached bytecode"
                 " (x `python -c pass`)"] == "met"  # equal to the limit
    assert found["HTTP, 32 agents, p99 of a cycle"] == "met in 1 of 2 runs"


def test_both_runs_meeting_the_target_say_met() -> None:
    twice = {"cycle": takes(cycle(0.2, 0.7, 4.0, 5.0), cycle(0.18, 0.65, 4.1, 5.1))}
    found = verdicts(twice)
    assert found["claim -> submit, W=1, NORMAL (x raw)"] == "met"
    assert found["WAL pages a transaction, with a request id"] == "met"
    row = next(t for t in targets(twice) if t.what.startswith("claim -> submit, W=1, NORMAL"))
    assert row.shown() == "0.2 / 0.18" and "stretch 0.20: met" in row.beside
    assert Target("p99", (1363.6, None), 500, "ms", False).shown() == "1,364 / - ms"


def test_postgresql_is_compared_with_sqlite_of_the_same_run_and_raw_is_its_ceiling() -> None:
    rows = {t.what: t for t in targets(FOUND)}
    w1 = rows["PostgreSQL W=1 (throwaway server), x hivelite on SQLite W=1"]
    assert w1.figures == (0.6, 0.4) and w1.verdict() == "met in 1 of 2 runs"
    w4 = rows["PostgreSQL W=4 over W=1 (throwaway server)"]
    assert w4.figures == pytest.approx((7 / 3, 2.5)) and w4.verdict() == "met"
    assert "ceiling, raw PostgreSQL W=4 over W=1: 2.2 / 2.2" in w4.beside
    trips = rows["PostgreSQL round trips a claim -> submit, the store's policy judging"
                 " (throwaway server)"]
    assert trips.verdict() == "met" and "a plugin judging" in trips.beside
    durable = rows["PostgreSQL W=4 over W=1 (durable server)"]
    assert durable.figures == (1.25, None)
    assert durable.verdict() == "short: 62% of the target"


def test_the_big_store_is_compared_with_the_small_one() -> None:
    found = verdicts()
    assert found["`next` at 1,000,000 tasks (x 1,000)"] == "met"
    assert found["`claim -> submit` at 1,000,000 tasks (x 1,000)"] == "short: 1.1x the limit"
    assert found["`list --ready --limit 50` at 1,000,000 tasks (x 1,000)"] == (
        "short: 2.7x the limit")
    assert found["RSS, listing all 1,000,000 tasks"] == "met"
    assert found["RSS, export of 1,000,000 tasks"] == "short: 1.0x the limit"
    assert found["bulk handoff of 1,000,000 tasks"] == "short: 1.3x the limit"


def test_a_missing_figure_is_said_so_with_why() -> None:
    assert Target("x", (None, None), 1.0, "", True).verdict() == "not measured"
    skipped = [Take(skipped="uvicorn not installed (the server extra)")] * 2
    rows = [t for t in targets({"serve": skipped}) if t.source == "serve"]
    assert {t.verdict() for t in rows} == {
        "not measured (uvicorn not installed (the server extra))"}
    silent = [t for t in targets({"drain": takes(None, None)}) if t.source == "drain"]
    assert silent[0].verdict() == "not measured (the run printed no figures; see its output)"


def test_a_figures_line_is_read_back(capsys: pytest.CaptureFixture[str]) -> None:
    figures.emit(serve(180.0, 360.0, 1200.0))
    printed = "32 agents, next -> checkpoint -> submit\nhttp / in-process: 0.50\n" + (
        capsys.readouterr().out)
    assert printed.splitlines()[-1].startswith("FIGURES {")
    assert figures.parse(printed) == serve(180.0, 360.0, 1200.0)
    assert figures.read(None, printed) == serve(180.0, 360.0, 1200.0)
    assert "FIGURES" not in figures.without_line(printed)
    assert "http / in-process: 0.50" in figures.without_line(printed)


def test_the_last_figures_line_counts_and_a_broken_one_is_no_figures() -> None:
    assert figures.parse('FIGURES {"a": 1}\nFIGURES {"a": 2}\n') == {"a": 2}
    assert figures.parse('FIGURES {"a": 1\n') is None
    assert figures.parse("FIGURES [1, 2]\n") is None
    assert figures.parse("no figures here\n  FIGURES {}\n") is None  # not at a line's start


def test_a_figures_file_comes_before_the_line(tmp_path: Path) -> None:
    path = tmp_path / "figures.json"
    figures.save(path, cycle(0.15, 0.6, 4.0, 5.0))
    assert figures.read(path, 'FIGURES {"other": 1}') == cycle(0.15, 0.6, 4.0, 5.0)
    path.write_text("not json")
    assert figures.read(path, 'FIGURES {"other": 1}') == {"other": 1}
    assert figures.read(tmp_path / "absent.json", "") is None


def test_the_page_holds_the_table_the_loads_and_every_output() -> None:
    found = {**FOUND, "serve": [Take(skipped="uvicorn not installed (the server extra)")] * 2}
    text = page(found, "python -m bench.report", False, 1800.0, cores=2,
                servers={"durable": ["PostgreSQL 15, fsync on"]}, load=(0.1, 0.4))
    assert "in 30 minutes" in text and "--quick" not in text
    assert ("| WAL pages a transaction, no request id | 4.6 / 4.4 | <= 4.5 |"
            " met in 1 of 2 runs | raw: 1.5 / 1.5 | 2.0% / 2.0% |"
            " 0.20 -> 0.30 / 0.20 -> 0.30 |") in text
    assert "fsync wait a commit: 640 / 640 us" in text
    assert "uncached: 6 / 6" in text  # the list row states its uncached figures
    assert "| **35% busy** / **35% busy** | 1.40 -> 1.90 / 1.40 -> 1.90 |" in text
    assert "| 0.4% / 0.4% | 1.00 -> 1.01 / 1.00 -> 1.01 |" in text  # quiet, load or not
    assert ("**Warning: the machine was busy** (other processes used more than 10% of a"
            " core) during postgres-durable: take those figures again") in text
    assert "Others' CPU **35% busy**, load 1.40 -> 1.90, 10 s." in text
    assert "not measured (uvicorn not installed (the server extra))" in text
    assert "- durable: PostgreSQL 15, fsync on" in text
    assert "began: 0.10; when it ended: 0.40" in text
    for run in RUNS:
        shown = " ".join(report.shown_args(run, (*run.args, *(("--postgres", "-")
                                                               if run.server else ()))))
        if run.name != "serve":
            assert f"python -m {shown}`" in text
    assert "--postgres <durable server>" in text
    assert "Not run: uvicorn not installed (the server extra)." in text


def test_a_page_of_some_runs_leaves_the_others_out() -> None:
    text = page({"drain": FOUND["drain"]}, "python -m bench.report --only drain", True, 60.0,
                cores=2, servers={})
    assert "next -> submit, W=2" in text and "claim -> submit, W=1" not in text
    assert "**--quick**" in text


def test_a_missing_postgresql_is_said_not_raised(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".ci").mkdir()
    script = tmp_path / ".ci" / "postgres"
    script.write_text("#!/bin/sh\necho 'initdb: command not found' >&2\nexit 1\n")
    script.chmod(0o755)
    monkeypatch.setattr(report, "ROOT", tmp_path)
    monkeypatch.delenv("HIVELITE_TEST_POSTGRES", raising=False)
    server = report.start_server("throwaway")
    assert server.conninfo == "" and server.folder == ""
    assert server.missing == ("no PostgreSQL server: `.ci/postgres start` failed"
                              " (initdb: command not found)")
    run = next(r for r in RUNS if r.server == "durable")
    got = report.take(run, run.quick, tmp_path, 1, dict(os.environ))
    assert got.skipped.startswith("no PostgreSQL") and got.figures is None


def test_a_missing_extra_is_said_not_raised(tmp_path: Path) -> None:
    run = report.Run("x", ("bench.serve",), ("bench.serve",),
                     needs=("no_such_module_here",))
    got = report.take(run, run.args, tmp_path, 1, dict(os.environ))
    assert got.skipped == "no_such_module_here not installed (the server extra)"


def test_busy_is_others_using_more_than_a_tenth_of_a_core() -> None:
    assert not report.busy(Take(load=(1.0, 1.01), others_cpu=3.0), 2)  # the run's own core
    assert not report.busy(Take(load=(0.1, 0.2), others_cpu=10.0), 2)
    assert report.busy(Take(load=(0.1, 0.2), others_cpu=10.5), 2)


def test_others_cpu_is_the_machines_less_the_benchmarks_and_its_servers() -> None:
    before = Cpu(machine=1000.0, own=50.0, server=7.0)
    after = Cpu(machine=1031.0, own=70.0, server=16.0)  # 31 s busy: 20 s its own, 9 s server
    assert report.others_cpu(before, after, 20.0) == pytest.approx(10.0)  # 2 s in 20 s
    assert report.others_cpu(before, Cpu(1019.99, 70.0, 7.0), 20.0) == 0.0  # ticks' noise


def test_without_proc_busy_falls_back_on_the_load() -> None:
    missing = "no /proc/stat to read (FileNotFoundError)"
    assert not report.busy(Take(load=(0.9, 1.0), cpu_missing=missing), 2)
    assert report.busy(Take(load=(0.9, 1.01), cpu_missing=missing), 2)
    assert not report.busy(Take(), 2)
    found = {"drain": [Take("out", None, (1.2, 1.3), 5.0, cpu_missing=missing)] * 2}
    text = page(found, "python -m bench.report --only drain", False, 60.0, cores=2,
                servers={})
    assert "| not measured / not measured | **1.20 -> 1.30 busy** /" in text
    assert "where that was not measured, the load average passed 0.5 per core" in text
    assert f"Others' CPU not measured ({missing}), load **1.20 -> 1.30 busy**" in text


def test_a_server_whose_folder_is_not_known_is_not_measured() -> None:
    meter = report.CpuMeter(report.Server("throwaway", "host=/somewhere"))
    assert meter.read(1.0) is None and "folder is not known" in meter.missing


def test_a_takes_file_from_before_others_cpu_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "performance.json"
    old = {"output": "drain, an older report", "figures": None, "load": [0.3, 0.4],
           "seconds": 5.0, "skipped": "", "when": "2026-12-05 10:00 UTC at old"}
    path.write_text(json.dumps({"runs": {"drain": [old]}, "servers": {}}))
    found, _ = report.load_takes(path)
    assert found["drain"][0].others_cpu is None and found["drain"][0].load == (0.3, 0.4)
    text = page(found, "python -m bench.report --only drain", False, 60.0, cores=2,
                servers={})
    assert "| - | 0.30 -> 0.40 |" in text and "Others' CPU -, load 0.30 -> 0.40" in text
    again = {"drain": [Take("new", None, (0.1, 0.2), 5.0, others_cpu=4.5)]}
    report.save_takes(path, again, {})
    assert report.load_takes(path)[0] == again


def test_a_real_run_measures_others_cpu(tmp_path: Path) -> None:
    run = report.Run("tiny", ("timeit", "-n", "1", "-r", "1", "pass"), ())
    got = report.take(run, run.args, tmp_path, 1, dict(os.environ))
    assert "1 loop" in got.output and got.cpu_missing == ""
    assert got.others_cpu is not None and got.others_cpu >= 0


BURN = "import time\nwhile time.process_time() < 0.5:\n    pass\n"
"""A benchmark stand-in that uses half a second of CPU by its own clock."""


def test_a_benchmarks_cpu_is_its_own_and_in_the_machines() -> None:
    before, began = report.cpu_now(), time.perf_counter()
    subprocess.run([sys.executable, "-c", BURN], check=True)
    after, wall = report.cpu_now(), time.perf_counter() - began
    own, machine = after.own - before.own, after.machine - before.machine
    assert own >= 0.5
    assert machine >= own - 0.1  # the machine's busy time holds the benchmark's (ticks aside)
    assert machine <= wall * (os.cpu_count() or 1) + 0.1  # seconds, not clock ticks


@pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")
def test_a_postgresql_servers_cpu_counts_its_backends_live_and_ended() -> None:
    import psycopg

    server = report.start_server("throwaway")  # $HIVELITE_TEST_POSTGRES, folder from _DIR
    pid = report.postmaster(server.home)
    before = report.server_cpu(pid)
    with psycopg.connect(server.conninfo, autocommit=True) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        start = sum(report._times(backend)[1])
        conn.execute("SELECT count(*) FROM generate_series(1, 3000000)")
        used = (sum(report._times(backend)[1]) - start) * report._tick()
        live = report.server_cpu(pid)
    half = report._tick() / 2  # both are whole ticks, in floating point
    assert used > 0 and live - before >= used - half  # a backend still running
    ready(lambda: not (report.PROC / str(backend)).exists(), "the postmaster to reap it",
          every=0.01)
    # an ended one: the postmaster's cutime (measured from before it began: other tests'
    # backends on a shared server come and go meanwhile)
    assert report.server_cpu(pid) - before >= used - half


def test_a_server_the_report_started_is_stopped_when_the_run_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[report.Server] = []
    stopped: list[str] = []

    def start(kind: str) -> report.Server:
        started.append(report.Server(kind, "host=/nowhere", str(tmp_path / kind),
                                     settings="fsync off"))
        return started[-1]

    monkeypatch.setattr(report, "start_server", start)
    monkeypatch.setattr(report, "stop_server", lambda server: stopped.append(server.folder))
    run = report.Run("broken", ("bench.no_such_benchmark",), (), server="throwaway")
    got = report.take(run, run.args, tmp_path, 1, dict(os.environ))
    assert "(exit 1)" in got.output and got.figures is None and got.load is not None
    assert stopped == [str(tmp_path / "throwaway")]
    assert {t.verdict() for t in targets({"postgres": [got]}) if t.source == "postgres"} == {
        "not measured (the run printed no figures; see its output)"}


def test_keep_runs_some_again_and_keeps_the_other_takes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def fake(run: report.Run, args: tuple[str, ...], folder: Path, number: int,
             env: dict[str, str]) -> Take:
        ran.append(run.name)
        return Take(f"{run.name} take {number} of the second report", None, (0.1, 0.2), 1.0,
                    when="2026-12-06 10:00 UTC at new")

    out = tmp_path / "performance.md"
    report.save_takes(report.takes_file(out), {
        "cycle": [Take("cycle, first report", None, (0.3, 0.4), 5.0,
                       when="2026-12-05 10:00 UTC at old")],
        "drain": [Take("drain, first report", None, (0.3, 0.4), 5.0, when="")]},
        {"durable": ["fsync on"]})
    monkeypatch.setattr(report, "take", fake)
    assert report.main(["--only", "drain", "--keep", "--takes", "1", "--out", str(out)]) == 0
    assert ran == ["drain"]
    text = out.read_text()
    assert "cycle, first report" in text and "began 2026-12-05 10:00 UTC at old" in text
    assert "drain take 1 of the second report" in text and "drain, first report" not in text
    assert "--only drain --keep" in text and "durable: fsync on" in text
    kept, servers = report.load_takes(report.takes_file(out))
    assert set(kept) == {"cycle", "drain"} and kept["cycle"][0].load == (0.3, 0.4)
    assert servers == {"durable": ["fsync on"]}


def test_keep_needs_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        report.main(["--keep"])
    assert stopped.value.code == 2 and "--keep needs --only" in capsys.readouterr().err


def test_the_peers_rows_are_hivelite_over_fleetwright_in_the_same_run() -> None:
    rows = {t.what: t for t in targets(FOUND) if t.source == "peers"}
    assert len(rows) == 8
    p1 = rows["FleetWright's workload, P=1: units/s (x FleetWright)"]
    assert p1.figures == pytest.approx((1.6, 1.4)) and p1.verdict() == "met in 1 of 2 runs"
    assert p1.beside == ("units/s: hivelite 1,600 / 1,400, FleetWright 1,000 / 1,000,"
                         " litequeue 1,200 / 1,200; WAL, synchronous FULL")
    p64 = rows["FleetWright's workload, P=64: units/s (x FleetWright)"]
    assert p64.verdict() == "short: 40% of the target"
    tail = rows["FleetWright's workload, P=64: submit p99 (x FleetWright's finish p99)"]
    assert tail.figures == pytest.approx((1.25, 0.75)) and tail.verdict() == "met in 1 of 2 runs"
    assert tail.beside == "p99 ms: hivelite 5 / 3, FleetWright 4 / 4"
    twice = rows["FleetWright's workload: units finished twice by hivelite (P = 1, 8, 64)"]
    assert twice.figures == (0, 0) and twice.verdict() == "met"
    busy = rows["FleetWright's workload: busy errors reaching a hivelite worker (P = 1, 8, 64)"]
    assert busy.figures == (3, 0) and busy.verdict() == "met in 1 of 2 runs"
    assert busy.beside == ("at P=64: 3 / 0; FleetWright 3 / 3, litequeue 0 / 0;"
                           " other errors: 0 / 0")
    both = {"peers": takes(peer_figures({1: 1000.0, 8: 1000.0, 64: 1000.0}, busy=2, twice=1))}
    found = {t.what: t.verdict() for t in targets(both) if t.source == "peers"}
    assert found["FleetWright's workload: units finished twice by hivelite (P = 1, 8, 64)"] == (
        "short: 1, not 0")
    assert found["FleetWright's workload: busy errors reaching a hivelite worker"
                 " (P = 1, 8, 64)"] == "short: 2, not 0"
    text = page(FOUND, "python -m bench.report", False, 60.0, cores=2, servers={})
    assert ("| FleetWright's workload, P=8: units/s (x FleetWright) | 1.4 / 1.6 | >= 1.5 |"
            " met in 1 of 2 runs | units/s: hivelite 1,400 / 1,600, FleetWright 1,000 / 1,000,"
            " litequeue 1,200 / 1,200 | 2.0% / 2.0% | 0.20 -> 0.30 / 0.20 -> 0.30 |") in text
    assert "### peers, run 2: `python -m bench.peers --units 5000 --processes 1 8 64" in text


def test_the_peers_take_is_skipped_without_the_bench_extra(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: (
        None if name in peers.PEERS else real(name, *rest)))
    run = next(r for r in RUNS if r.name == "peers")
    got = report.take(run, run.quick, tmp_path, 1, dict(os.environ))
    why = "fleetwright, litequeue not installed (the bench extra)"
    assert got.skipped == why and got.output == "" and got.figures is None
    rows = [t for t in targets({"peers": [got, got]}) if t.source == "peers"]
    assert len(rows) == 8 and {t.verdict() for t in rows} == {f"not measured ({why})"}
    text = page({"peers": [got, got]}, "python -m bench.report --only peers", False, 1.0,
                cores=2, servers={})
    assert f"| - / - | >= 1.5 | not measured ({why}) |" in text
    assert f"### peers, run 1: `python -m {' '.join(run.args)}`\n\nNot run: {why}." in text
    assert peers.main(["--units", "10"]) == 2  # the benchmark itself says so too
    assert "pip install -e '.[bench]'" in capsys.readouterr().err
