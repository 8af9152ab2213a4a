"""Time is passed in, never read inside SQL: an injectable clock and the one timestamp format.

Timestamps are RFC 3339 UTC with milliseconds (``2026-12-02T14:56:09.123Z``); they
sort as text, so the store compares them as strings.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from .errors import InvalidInput

Clock = Callable[[], datetime]
"""A clock is any callable returning an aware ``datetime``."""


def system_clock() -> datetime:
    """The machine's clock; ``422 invalid_input clock_out_of_range`` when it reads a time
    a timestamp cannot hold (past the year 9999: Python's dates end there)."""
    try:
        return datetime.now(UTC)
    except (ValueError, OverflowError, OSError) as exc:
        raise InvalidInput("clock_out_of_range", f"the system clock reads a time outside the"
                           f" years 1 to 9999 ({exc}); set the machine's clock right, or"
                           " HIVELITE_NOW for a script", field="now") from None


class ManualClock:
    """A clock that moves only when told: tests and scripts travel in time without sleeping."""

    def __init__(self, start: datetime | str) -> None:
        self.now = parse_ts(start) if isinstance(start, str) else start.astimezone(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


def format_ts(moment: datetime) -> str:
    """``moment`` as RFC 3339 UTC with milliseconds."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def parse_ts(text: str) -> datetime:
    """An RFC 3339 instant (any offset, ``Z`` allowed) as an aware UTC ``datetime``."""
    moment = datetime.fromisoformat(text.replace("z", "Z"))
    if moment.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no UTC offset")
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00:00-05:00 is in the year 10000 in UTC
        raise ValueError(f"timestamp {text!r} is outside the years 1-9999 in UTC") from None


def clock_from_env(default: Clock = system_clock) -> Clock:
    """``$HIVELITE_NOW`` (an RFC 3339 instant) as a fixed clock, else ``default``."""
    fixed = os.environ.get("HIVELITE_NOW")
    if not fixed:
        return default
    try:
        return ManualClock(fixed)
    except ValueError as exc:
        raise InvalidInput("invalid_now", f"HIVELITE_NOW={fixed!r} is not an RFC 3339 instant"
                           f" with an offset, like 2026-12-02T09:00:00Z ({exc})",
                           field="HIVELITE_NOW") from None


def duration(seconds: int) -> str:
    """A wait in words a person reads at a glance: ``45 s``, ``3 min 20 s``,
    ``6 h 14 min``."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min" + (f" {rest} s" if rest and minutes < 10 else "")
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h" + (f" {minutes} min" if minutes else "")

