"""Crashes: simulated power loss (``bench.powerloss``, through the ``bench.crashvfs`` shim)
and real processes killed with SIGKILL mid-write (``bench.killnine``).

The shim's own tests come first: a power-loss run that passes proves nothing unless the
shim really loses what was not synced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from bench.crashvfs import PowerCut, PowerLost
from bench.killnine import run_kills

from .conftest import HANG_S

ROOT = Path(__file__).resolve().parent.parent
CRASHES = 50


def _shim_store(tmp_path: Path, sync: str, name: str) -> tuple[PowerCut, apsw.Connection, Path]:
    shim = PowerCut(name=name, makedefault=False)
    path = tmp_path / "t.db"
    conn = apsw.Connection(str(path), vfs=name)
    assert conn.execute("PRAGMA journal_mode = WAL").get == "wal"
    conn.execute(f"PRAGMA synchronous = {sync}")
    conn.execute("CREATE TABLE t(x)")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()  # syncs the WAL and the file
    return shim, conn, path


def _reopen(path: Path) -> list[int]:
    """The rows a normal connection finds once the shared memory is gone (rebuilt)."""
    Path(f"{path}-shm").unlink(missing_ok=True)
    conn = apsw.Connection(str(path))
    try:
        assert conn.execute("PRAGMA integrity_check").get == "ok"
        return [r[0] for r in conn.execute("SELECT x FROM t ORDER BY x")]
    finally:
        conn.close()


def test_the_shim_loses_every_commit_not_synced(tmp_path: Path) -> None:
    shim, conn, path = _shim_store(tmp_path, "NORMAL", "powercut-normal")
    try:
        for x in range(5):
            conn.execute("INSERT INTO t VALUES (?)", (x,))
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()  # syncs the WAL: 0-4 durable
        for x in range(5, 10):  # committed, never synced (NORMAL syncs at checkpoints only)
            conn.execute("INSERT INTO t VALUES (?)", (x,))
        assert shim.pending("wal") > 0
        cut = shim.cut()
        assert cut.dropped_bytes["wal"] > 0
        conn.close()  # the machine is off: closing writes nothing
    finally:
        shim.close()
    assert _reopen(path) == [0, 1, 2, 3, 4]


def test_the_shim_keeps_what_full_synced_and_cuts_mid_transaction(tmp_path: Path) -> None:
    shim, conn, path = _shim_store(tmp_path, "FULL", "powercut-full")
    try:
        for x in range(5):  # FULL: every commit syncs the WAL
            conn.execute("INSERT INTO t VALUES (?)", (x,))
        assert shim.pending("wal") == 0
        shim.cut_at = shim.events + 2  # the power goes inside the next commit
        with pytest.raises(PowerLost):
            conn.execute("INSERT INTO t VALUES (5)")
        assert shim.dead
        conn.close()
    finally:
        shim.close()
    assert _reopen(path) == [0, 1, 2, 3, 4]


@pytest.mark.slow
def test_power_loss_full_loses_nothing_normal_only_its_window(tmp_path: Path) -> None:
    """``CRASHES`` simulated power cuts per mode over the mixed workload."""
    env = {**os.environ, "HIVELITE_LOAD_PLUGINS": ""}
    done = subprocess.run(
        [sys.executable, "-m", "bench.powerloss", "--crashes", str(CRASHES), "--sync", "both",
         "--seed", "3", "--generation", "20", "--dir", str(tmp_path), "--json"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=HANG_S)
    assert done.returncode in (0, 1), done.stderr
    modes = {m["sync"]: m for m in json.loads(done.stdout)["modes"]}
    for sync, m in modes.items():
        assert m["failures"] == [], (sync, m["failures"])
        assert m["crashes"] == m["opened"] == m["doctor_ok"] == CRASHES, (sync, m)
        assert m["child_errors"] == m["no_cut"] == 0, (sync, m)
        assert m["lost_earlier"] == m["lost_outside_window"] == 0, (sync, m)
        assert m["acked"] > 10 * CRASHES, (sync, m)  # the workload did work
        assert m["unsynced_at_cut"] > CRASHES // 2, (sync, m)  # and the cuts did lose data
        assert m["passed"], (sync, m)
    assert modes["FULL"]["lost_total"] == 0
    # NORMAL's window is real (the shim drops acknowledged commits), and it is all it loses
    assert modes["NORMAL"]["lost_total"] > 0
    assert modes["NORMAL"]["lost_max"] <= modes["NORMAL"]["window_max"]
    assert done.returncode == 0, done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("sync", ["FULL", "NORMAL"])
def test_kill_nine_loses_nothing_acknowledged(tmp_path: Path, sync: str) -> None:
    """Ten SIGKILLs of real writers (two at a time), then the store is checked."""
    stats = run_kills(tmp_path / "store.db", sync, 10, workers=2, seed=5)
    assert stats.worker_errors == []
    assert stats.opened and stats.doctor_ok, stats.problems
    assert stats.acked > 0 and stats.kills >= 10
    assert stats.kills_mid_op > 0
    assert stats.lost == 0, stats.problems
    assert stats.passed
