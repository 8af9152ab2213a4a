"""A run that leaves tests out for want of a PostgreSQL server (or Chromium, or the sqlite3
shell) says so once, at its end, with how many and the line that includes them: a green run
on a contributor's machine never passes for a whole one (``conftest.left_out``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from . import conftest
from .conftest import ALL_OF_IT, HANG_S

ROOT = Path(__file__).resolve().parents[1]
TINY = ["tests/test_claims_wait.py::test_a_wait_on_an_empty_queue_ends_in_queue_empty_and_"
        "writes_nothing",
        "tests/test_pg_writers.py::test_two_claims_in_flight_never_pass_a_daily_budget"]
"""A contract test (its PostgreSQL twin is not collected without a server) and a
PostgreSQL test (skipped without one)."""


def pytest_run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest -q ARGS`` in this checkout, no PostgreSQL server named."""
    clean = {k: v for k, v in os.environ.items()
             if k not in ("HIVELITE_TEST_POSTGRES", "HIVELITE_NEED_POSTGRES", "PYTEST_ADDOPTS")
             and not k.startswith("PYTEST_XDIST")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args], capture_output=True, text=True, cwd=ROOT,
                          env={**clean, **env}, timeout=HANG_S)


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["-n0", "-n2"])
def test_a_run_without_a_server_says_once_at_its_end_what_it_left_out(workers: str) -> None:
    ran = pytest_run(workers, *TINY)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = ran.stdout
    said = ("2 PostgreSQL tests left out: no server ($HIVELITE_TEST_POSTGRES is not set):"
            " 1 not collected (the contract tests' second engine) and 1 skipped. Include"
            ' them with eval "$(.ci/postgres start)"')
    assert out.count(said) == 1, out
    assert out.count(f"The whole suite: {ALL_OF_IT}") == 1, out
    # at the end: after the short summary of the skips, before the counts
    assert out.index("short test summary info") < out.index(said), out
    assert out.rstrip().splitlines()[-1].startswith("1 passed, 1 skipped"), out


@pytest.mark.slow
def test_a_run_with_a_server_named_says_nothing_is_left_out() -> None:
    ran = pytest_run("-n0", "--collect-only", *TINY,
                     HIVELITE_TEST_POSTGRES="host=/nowhere user=postgres dbname=postgres")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "3 tests collected" in ran.stdout, ran.stdout
    assert "left out" not in ran.stdout


def skipped(reason: str) -> SimpleNamespace:
    return SimpleNamespace(longrepr=("tests/test_x.py", 1, f"Skipped: {reason}"))


def test_each_thing_missing_is_one_line_with_its_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chromium and the sqlite3 shell are counted from their skips' reasons; nothing is
    said of what is here, or of what no test needed."""
    monkeypatch.setattr(conftest.shutil, "which", lambda name: None)
    monkeypatch.setattr(conftest, "_not_collected", [])
    monkeypatch.setattr(conftest.pg, "SERVER", "host=/somewhere")
    stats = {"skipped": [skipped("chromium is not installed (apt-get install chromium)"),
                         skipped("chromedriver is not installed (apt-get install"
                                 " chromium-driver)"),
                         skipped("the sqlite3 shell is not installed"),
                         skipped("something else")],
             "passed": [SimpleNamespace()]}
    assert conftest.left_out(stats) == [
        "2 Chromium tests left out: no chromium or chromedriver on the PATH: 2 skipped."
        " Include them with apt-get install chromium chromium-driver.",
        "1 sqlite3 test left out: no sqlite3 shell on the PATH: 1 skipped. Include them"
        " with apt-get install sqlite3."]
    assert conftest.left_out({"skipped": [skipped("something else")]}) == []
