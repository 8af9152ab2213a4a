"""A task's own fields after handoff: priority, labels and its attempt limit (seed 004's
PATCH), changed against the version the caller last saw."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..core.caller import Caller
from ..core.errors import ForbiddenRight, InvalidInput, InvalidState
from ..core.models import Receipt
from ..core.protocol import PRIORITIES
from ..store import TaskRow, Writer
from ..store.records import replace
from . import guard
from .base import HiveBase
from .retries import idempotent
from .unit import Unit, receipt

MAX_LABELS = 10
LABEL = re.compile(r"^[a-z0-9-]{1,32}$")
MAX_ATTEMPT_LIMIT = 1000


def _version(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput("invalid_base_version", f"base_version is the task's"
                           f" fields_version as last read (an integer from 1), not {value!r}",
                           field="base_version")
    return value


def _labels(values: Sequence[str], what: str) -> list[str]:
    if isinstance(values, str):
        values = [values]
    bad = [v for v in values if not isinstance(v, str) or not LABEL.fullmatch(v)]
    if bad:
        raise InvalidInput("invalid_label", f"a label is 1-32 of a-z, 0-9 and '-', not"
                           f" {bad[0]!r}", field=what)
    return list(values)


@idempotent
def set_fields(hive: HiveBase, caller: Caller, ref: str | int, *, base_version: int,
               priority: str | None = None, labels: Sequence[str] | None = None,
               add_labels: Sequence[str] = (), remove_labels: Sequence[str] = (),
               max_attempts: int | None = None, request_id: str | None = None) -> Receipt:
    """Change an open task's priority and labels (its requester, assignee or the owner)
    or its attempt limit (the owner, which re-opens a task whose attempts ran out).

    ``base_version`` is the ``fields_version`` the caller last read: another version
    is ``409 stale_base`` and nothing changes. ``labels`` replaces the set;
    ``add_labels``/``remove_labels`` edit it; at most 10, each ``^[a-z0-9-]{1,32}$``.
    The version grows by one and the change is journaled.
    """
    caller = hive._caller(caller, "fields")
    version = _version(base_version)
    if priority is not None and priority not in PRIORITIES:
        raise InvalidInput("invalid_priority", f"priority is one of"
                           f" {', '.join(reversed(PRIORITIES))}, not {priority!r}",
                           field="priority")
    replacing = None if labels is None else _labels(labels, "labels")
    adding, removing = _labels(add_labels, "add_labels"), _labels(remove_labels,
                                                                  "remove_labels")
    if max_attempts is not None:
        if not caller.is_owner:
            raise ForbiddenRight("not_permitted", "only the owner changes how many"
                                 " attempts a task may fail")
        if (isinstance(max_attempts, bool) or not isinstance(max_attempts, int)
                or not 1 <= max_attempts <= MAX_ATTEMPT_LIMIT):
            raise InvalidInput("invalid_max_attempts", f"max_attempts is an integer"
                               f" from 1 to {MAX_ATTEMPT_LIMIT}, not {max_attempts!r}",
                               field="max_attempts")
    if (priority is None and replacing is None and not adding and not removing
            and max_attempts is None):
        raise InvalidInput("no_fields", "name something to change: priority, labels or"
                           " max_attempts", field="fields")

    def changed(tx: Writer, at: str, row: TaskRow) -> Receipt:
        """The fields' writes on ``row`` (read under the lock, at ``version``): the new
        fields, then the event naming what changed."""
        current = json.loads(row.labels)
        chosen = list(replacing if replacing is not None else current)
        chosen = sorted((set(chosen) | set(adding)) - set(removing))
        if len(chosen) > MAX_LABELS:
            raise InvalidInput("too_many_labels", f"a task has at most {MAX_LABELS}"
                               f" labels; this would give it {len(chosen)}",
                               field="labels")
        after = replace(row, priority=priority or row.priority,
                        labels=json.dumps(chosen), fields_version=version + 1,
                        attempt_limit=max_attempts or row.attempt_limit, updated_at=at)
        tx.set_fields(row.number, priority=after.priority, labels=after.labels,
                      attempt_limit=after.attempt_limit, version=after.fields_version)
        told: dict[str, Any] = {"fields_version": after.fields_version}
        if after.priority != row.priority:
            told["priority"] = after.priority
        if chosen != current:
            told["labels"] = chosen
        if after.attempt_limit != row.attempt_limit:
            told["max_attempts"] = after.attempt_limit
        tx.record_event(row.number, at=at, actor=caller.name, state=row.state,
                        reason="fields", detail=told)
        return receipt(row.number, row.id, row.state, at, row.waiting_on)

    def statement(tx: Writer, now: datetime, at: str) -> Receipt | None:
        row = tx.lock_task(ref)
        if row is None or not (caller.is_owner or caller.name in (row.requester,
                                                                    row.assignee)):
            return None  # (not the caller's to change: the full run says so)
        return changed(tx, at, row)  # (the rules take only the version after the one read)

    def body(unit: Unit) -> Receipt:
        row = unit.task(ref)
        guard.still_open(row)
        if not caller.is_owner and caller.name not in (row.requester, row.assignee):
            raise ForbiddenRight("not_permitted", f"only the requester, the assignee or"
                                 f" the owner changes task {row.number}'s fields")
        if row.fields_version != version:
            raise InvalidState("stale_base", f"task {row.number}'s fields are at version"
                               f" {row.fields_version}, not {version}: read it again and"
                               " decide on what it holds now",
                               fields_version=row.fields_version)
        unit.journaled = True
        return changed(unit.tx, unit.at, row)

    return hive._verb(caller, "fields", statement, body, about=ref)


__all__ = ["set_fields"]
