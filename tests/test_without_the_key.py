"""Where the owner's key is not (issue 48, item 4): a read never writes, and ``doctor``
fails unless the owner asks for a check of consistency only (``--no-key``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hivelite import Hive, ManualClock

from .conftest import CODER, HANG_S, START, own_task


@pytest.fixture
def claimed(tmp_path: Path) -> Path:
    """A keyed store whose one claim ran out (10 minutes) an hour ago, as of ``START`` +
    1 hour."""
    path = tmp_path / "keyed.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        hive.claim(CODER, own_task(hive))
    return path


def later() -> ManualClock:
    clock = ManualClock(START)
    clock.advance(minutes=70)
    return clock


def test_a_read_without_the_key_shows_an_expired_claim_and_writes_nothing(
        claimed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = claimed.read_bytes()
    with monkeypatch.context() as away:
        away.setenv("HIVELITE_KEYS", str(tmp_path / "elsewhere"))
        with Hive.open(claimed, clock=later()) as hive:
            view = hive.get(1)
            assert view.task.state == "accepted"
            assert view.claim is not None and view.claim.expired
            assert hive.expired_on_open == []
            assert hive.info().key_state == "missing"
    assert claimed.read_bytes() == before
    assert not (tmp_path / "elsewhere").exists()  # no key was made for it either
    with Hive.open(claimed, clock=later()) as hive:  # with the key, opening sweeps
        assert [c.number for c in hive.expired_on_open] == [1]
        assert hive.get(1).task.state == "routed"


def hivelite(path: Path, *args: str, keys: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env.update(HIVELITE_LOAD_PLUGINS="", HIVELITE_NOW=START, HIVELITE_KEYS=str(keys))
    return subprocess.run([sys.executable, "-m", "hivelite", "--db", str(path), *args],
                          capture_output=True, text=True, env=env, timeout=HANG_S)


def test_doctor_fails_without_the_key_the_store_names_unless_told_no_key(
        claimed: Path, tmp_path: Path) -> None:
    done = hivelite(claimed, "doctor", keys=tmp_path / "elsewhere")
    assert done.returncode == 6, (done.stdout, done.stderr)
    assert "FAIL  hash chain" in done.stdout and "doctor --no-key" in done.stdout
    assert "failed: hash chain" in done.stderr
    done = hivelite(claimed, "doctor", "--no-key", keys=tmp_path / "elsewhere")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "checked for consistency only" in done.stdout
    done = hivelite(claimed, "info", keys=tmp_path / "elsewhere")
    assert done.returncode == 0, done.stderr
    assert "chain key  not on this machine: the store names the owner's key" in done.stdout


def test_opening_a_store_that_names_no_key_yet_takes_none(
        claimed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store from before the key, on a machine whose keys folder never saw it: opening
    it sweeps nothing and makes no key (a key is taken by a write, never by a read)."""
    from .test_key_taken_once import unkey

    unkey(claimed)
    before = claimed.read_bytes()
    monkeypatch.setenv("HIVELITE_KEYS", str(tmp_path / "elsewhere"))
    with Hive.open(claimed, clock=later()) as hive:
        claim = hive.get(1).claim
        assert claim is not None and claim.expired and hive.expired_on_open == []
        assert hive.info().chain_key is None and hive.info().key_state == "new_here"
    assert claimed.read_bytes() == before
    assert not (tmp_path / "elsewhere").exists()
