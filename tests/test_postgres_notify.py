"""Workers waiting for work are woken by the commit that makes a task ready (issue 32,
part 4): a PostgreSQL write that moves a task to ``routed`` notifies the store's channel
(``pg_notify`` in its transaction, so only a commit delivers it), and
``PostgresStore.wait_for_work`` returns on it instead of polling. Shown with a real
waiting process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hivelite import Hive, ManualClock
from hivelite.core.errors import HiveliteError

from . import pg
from .conftest import CODER, HANG_S, OWNER, START, own_task

pytestmark = pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")

WAITER = textwrap.dedent("""
    import sys
    from hivelite import Hive
    with Hive.open(sys.argv[1]) as hive:
        hive.store.listen()
        print("listening", flush=True)
        print("woken" if hive.store.wait_for_work(float(sys.argv[2])) else "timed out",
              flush=True)
""")
"""A worker process whose queue is empty: it listens, says so, and waits."""


def waiter(url: str, timeout: float) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, (str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")))),
        "HIVELITE_LOAD_PLUGINS": ""}
    proc = subprocess.Popen([sys.executable, "-c", WAITER, url, str(timeout)],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "listening"
    return proc


def answer(proc: subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 0
    return out.strip()


def test_a_waiting_worker_is_woken_by_the_commit_that_routes_a_task() -> None:
    url = pg.store_url(pg.new_schema())
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive:
        proc = waiter(url, 60.0)  # woken long before: no poll, no timeout
        own_task(hive)  # requested -> routed, committed
        assert answer(proc) == "woken"


def test_a_write_that_readies_nothing_or_rolls_back_wakes_no_one() -> None:
    url = pg.store_url(pg.new_schema())
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive:
        number, other = own_task(hive), own_task(hive)
        proc = waiter(url, 3.0)
        hive.claim(CODER, number)  # routed -> accepted: nothing became ready
        hive.cancel(OWNER, other, reason="not needed")  # a move, to cancelled
        with pytest.raises(HiveliteError), hive.store.write() as tx:  # routed, then undone
            row = tx.lock_task(number)
            assert row is not None
            tx.move(number, row.state, "routed", at=START, actor="ana/coder",
                    reason="released", end_lease=True)
            raise HiveliteError("undone", "rolled back on purpose")
        assert answer(proc) == "timed out"


def test_the_notification_names_the_store_and_its_ready_tasks() -> None:
    schema = pg.new_schema()
    url = pg.store_url(schema)
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive:
        raw = pg.connect()
        try:
            raw.execute(f'LISTEN "{hive.store.channel}"')  # type: ignore[attr-defined]
            number = own_task(hive)
            got = next(raw.notifies(timeout=HANG_S, stop_after=1))
        finally:
            raw.close()
        assert got.payload == str(number)
        other = pg.store_url(pg.new_schema())
        with Hive.open(other, owner="ana") as second:  # another store, another channel
            assert second.store.channel != hive.store.channel  # type: ignore[attr-defined]
