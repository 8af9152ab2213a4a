"""A PostgreSQL store on a bad day (issue 20, point 5): a worker killed with ``kill -9``
in the middle of its writes, and the server itself restarted under running workers.
Nothing a worker was told succeeded is lost, no task is done twice, the journal's chain
holds, and a lost connection is a clear error that a retry with the same request id
answers safely.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hivelite import Hive, ManualClock, hookimpl
from hivelite.core.clock import format_ts

from . import pg
from .conftest import HANG_S, ready

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")]

ROOT = Path(__file__).resolve().parents[1]
TASKS = 60

WORKER = r'''
import json, os, sys, time
sys._hivelite_under_test = True
from hivelite import Caller, Hive, NotFound, StoreBusy, hookimpl

class ZeroThreshold:
    @hookimpl
    def hivelite_merge_threshold(self, task, hive):
        return 0

store, name, log_path, pause = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
me = Caller.agent("ana/coder", name)
log = open(log_path, "a")
lost = 0

def say(**line):
    log.write(json.dumps(line) + "\n")
    log.flush()
    os.fsync(log.fileno())

def retried(call):
    """Call until the store answers; a lost connection is retried with the same id."""
    global lost
    deadline = time.monotonic() + float(os.environ.get("HIVELITE_TEST_HANG_S") or 600)
    while True:
        try:
            return call()
        except StoreBusy as exc:
            lost += 1
            say(lost=exc.reason)
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)

hive = retried(lambda: Hive.open(store, plugins=[ZeroThreshold()]))
k = 0
while True:
    k += 1
    try:
        lease = retried(lambda: hive.claim_next(me, request_id=f"{name}-next-{k}"))
    except NotFound:
        break
    say(claimed=lease.number, token=lease.fencing_token)
    time.sleep(pause)
    done = retried(lambda: hive.submit(me, lease.number, lease_id=lease.lease_id,
                                       token=lease.fencing_token, summary="done",
                                       evidence=[{"kind": "note", "summary": "ok"}],
                                       request_id=f"{name}-submit-{k}"))
    say(done=lease.number, state=done.state.value)
say(end=True, lost=lost)
'''


class ZeroThreshold:
    @hookimpl
    def hivelite_merge_threshold(self, task: object, hive: object) -> int:
        return 0


def start_worker(store: str, name: str, log: Path, pause: float) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env.update(PYTHONPATH=str(ROOT), HIVELITE_LOAD_PLUGINS="", HIVELITE_TEST_HANG_S=str(HANG_S))
    return subprocess.Popen([sys.executable, "-c", WORKER, store, name, str(log), str(pause)],
                            env=env)


def lines(log: Path) -> list[dict[str, object]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def hand_off(store: str) -> None:
    with Hive.open(store, owner="ana", plugins=[ZeroThreshold()]) as hive:
        for i in range(TASKS):
            hive.handoff(hive.as_owner(), requester="ana/planner", assignee="ana/coder",
                         project="p", packet={"task": f"Task number {i}",
                                              "deliverable_type": "code",
                                              "acceptance_criteria": ["ok"]})


def leases_over() -> ManualClock:
    """A clock 20 minutes on: every lease the workers took has expired (swept at open)."""
    return ManualClock(format_ts(datetime.now(UTC) + timedelta(minutes=20)))


def check_store(store: str, logs: list[Path]) -> None:
    """Every acknowledged claim and result is in the store; nothing was done twice."""
    with Hive.open(store, plugins=[ZeroThreshold()], clock=leases_over()) as hive:
        done = [line["done"] for log in logs for line in lines(log) if "done" in line]
        assert len(done) == len(set(done)), "a task was done twice"
        for number in done:
            assert hive.get(int(number)).task.state.value == "completed"  # type: ignore[arg-type]
        claims = {(e.number, (e.detail or {}).get("fencing_token"))
                  for e in hive.journal() if (e.from_state, e.to_state) == ("routed", "accepted")}
        for log in logs:
            for line in lines(log):
                if "claimed" in line:
                    assert (line["claimed"], line["token"]) in claims, line
        completions = [e.number for e in hive.journal() if e.to_state == "completed"]
        assert len(completions) == len(set(completions))
        assert all(not v.claim for v in hive.list(state=["routed"], limit=200).items)
        assert hive.store.chain_sound()  # type: ignore[attr-defined]


@pytest.fixture
def store() -> Iterator[str]:
    schema = pg.new_schema()
    yield pg.store_url(schema)
    pg.drop(schema)


def test_kill_nine_of_workers_loses_nothing_acknowledged(store: str, tmp_path: Path) -> None:
    """Three rounds: a worker runs a moment and is killed with SIGKILL wherever it is (in
    a claim, between claim and submit, in a submit); a last one drains the rest."""
    hand_off(store)
    logs = []
    for round_ in range(3):
        log = tmp_path / f"killed-{round_}.jsonl"
        logs.append(log)
        worker = start_worker(store, f"victim-{round_}", log, 0.01)
        ready(lambda: sum("done" in line for line in lines(log)) >= 3 + round_,  # noqa: B023
              f"{3 + round_} tasks done by victim-{round_}", worker,
              lambda: str(lines(log)))  # noqa: B023
        time.sleep(0.013 * (round_ + 1))  # land somewhere inside the next cycle
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=HANG_S)
    check_store(store, logs)
    # the killed workers' claims expire; a last worker (20 minutes on) drains the queue
    with Hive.open(store, plugins=[ZeroThreshold()], clock=leases_over()) as hive:
        assert hive.list(state=["accepted", "working"]).items == []


def test_a_server_restart_under_running_workers_loses_nothing(tmp_path: Path) -> None:
    """A private server with durable commits, two workers draining it, and ``pg_ctl
    restart -m immediate`` (the server stops as if it crashed, and recovers from its WAL)
    in the middle: each worker meets ``store_busy`` (connection_lost or unreachable),
    retries with the same request id, and every task ends completed exactly once."""
    started = subprocess.run([str(ROOT / ".ci" / "postgres"), "start", "--durable"],
                             capture_output=True, text=True, timeout=HANG_S, check=True)
    env = dict(line.removeprefix("export ").split("=", 1)
               for line in started.stdout.splitlines())
    folder = env["HIVELITE_TEST_POSTGRES_DIR"].strip("'")
    stop = {**os.environ, "HIVELITE_TEST_POSTGRES_DIR": folder}
    try:
        store = f"postgresql://postgres@/postgres?host={folder}&schema=restart"
        hand_off(store)
        logs = [tmp_path / f"w{k}.jsonl" for k in range(2)]
        workers = [start_worker(store, f"w{k}", log, 0.02) for k, log in enumerate(logs)]

        def ten_done() -> bool:
            ended = [w.args[-3] for w in workers if w.poll() is not None]
            assert not ended, f"{ended} ended: {[lines(log) for log in logs]}"
            return sum("done" in line for log in logs for line in lines(log)) >= 10

        ready(ten_done, "10 tasks done by the two workers")
        bin_dir = subprocess.run(["bash", "-c", "ls -d /usr/lib/postgresql/*/bin | sort -V"
                                  " | tail -n 1"], capture_output=True, text=True).stdout.strip()
        ctl = [f"{bin_dir}/pg_ctl" if bin_dir else "pg_ctl", "-D", f"{folder}/data", "-w",
               "-l", f"{folder}/server.log", "restart", "-m", "immediate", "-o",
               f"-k {folder} -c listen_addresses=''"]
        as_server = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*as_server, *ctl], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=HANG_S)
        for worker in workers:
            assert worker.wait(timeout=HANG_S) == 0
        ends = [line for log in logs for line in lines(log) if line.get("end")]
        assert len(ends) == 2
        assert any("lost" in line and not line.get("end") for log in logs
                   for line in lines(log)), "no worker noticed the restart"
        check_store(store, logs)
        with Hive.open(store, plugins=[ZeroThreshold()]) as hive:
            states = hive.store.tables().conn.execute(  # type: ignore[attr-defined]
                "SELECT state, count(*) FROM tasks GROUP BY state").fetchall()
        assert dict(states) == {"completed": TASKS}
    finally:
        subprocess.run([str(ROOT / ".ci" / "postgres"), "stop"], env=stop, timeout=HANG_S)
