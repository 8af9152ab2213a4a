"""Shared fixtures: a real store file in a tmp dir, a clock that moves only when told."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from hivelite import Hive, ManualClock
from hivelite.clock import format_ts, parse_ts

from . import rawsql

# Installed entry-point plugins must not change test results (a test may opt in).
sys._hivelite_under_test = True  # type: ignore[attr-defined]

START = "2026-12-02T09:00:00.000Z"


def packet(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "task": "Write the parser",
        "deliverable_type": "code",
        "acceptance_criteria": ["tests pass"],
    }
    base.update(overrides)
    return base


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def hive(db_path: Path, clock: ManualClock) -> Iterator[Hive]:
    with Hive.open(db_path, owner="ana", clock=clock) as h:
        yield h


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[apsw.Connection]:
    """A fresh store made by the library, reached through a second, raw connection."""
    path = tmp_path / "store.db"
    Hive.open(path, owner="ana").close()
    conn = rawsql.connect(path)
    yield conn
    conn.close()


def at(minutes: float) -> str:
    """``START`` plus ``minutes``, as ``HIVELITE_NOW`` takes it."""
    return format_ts(parse_ts(START) + timedelta(minutes=minutes))


def own_task(hive: Hive, **overrides: Any) -> int:
    """A routed task between the owner's own agents; returns its number."""
    fields: dict[str, Any] = {"requester": "ana/planner", "assignee": "ana/coder",
                              "project": "demo", "packet": packet()}
    fields.update(overrides)
    return hive.handoff(**fields).number


def held_task(hive: Hive, **overrides: Any) -> int:
    """A task the built-in gate held for the owner (a guest's request)."""
    return own_task(hive, requester="guest/scout", **overrides)
