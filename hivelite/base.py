"""What every verb stands on: the store, the owner, the plugins and the clock.

Reading (views, listing, history) and the expiry sweep live here; the verbs
that write are grouped by stage in ``handoff``, ``claims`` and ``results``.
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from pydantic import ValidationError

from . import guard
from .clock import Clock, format_ts
from .errors import InvalidInput, InvalidState, PluginError
from .models import (
    Checkpoint,
    ClaimView,
    Confirmation,
    Evidence,
    ExpiredClaim,
    JournalEntry,
    Merge,
    Packet,
    Page,
    Result,
    Task,
    TaskView,
    UpdateView,
    Usage,
)
from .plugins import PluginManager, call_all
from .protocol import MOVES_BY_PAIR, Move, State, WaitingOn, lifecycle
from .settings import settings_path
from .store import Store, TaskRow
from .store.sqlite import ViewRow

log = logging.getLogger("hivelite")

MAX_PAGE = 500
PACKET_CACHE = 512
Bodies = tuple[str, str | None, str | None]
"""A task's packet, result and checkpoint JSON."""
Moved = tuple[int, Move, str]
"""A committed move to announce: task number, the move, the actor."""


def invalid(exc: ValidationError, what: str) -> InvalidInput:
    """A pydantic error as ``422 invalid_input``, naming each field and the rule it broke."""
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or what
        problems.append(f"{where}: {err['msg']}")
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or what
    return InvalidInput("invalid_" + what, f"invalid {what}: " + "; ".join(problems),
                        field=field, problems=problems)


class HiveBase:
    """One open store with its owner, plugins and clock."""

    def __init__(self, store: Store, owner: str, plugins: PluginManager, clock: Clock,
                 config: dict[str, Any] | None = None) -> None:
        self.store = store
        self.owner = owner
        self.plugins = plugins
        self.clock = clock
        self.config: dict[str, Any] = config or {}
        self.notify_failures: builtins.list[PluginError] = []
        self.expired_on_open: builtins.list[ExpiredClaim] = []
        self._packets: dict[int, Packet] = {}

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> HiveBase:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- helpers -------------------------------------------------------------

    def _now(self) -> datetime:
        return self.clock()

    def _row(self, ref: str | int) -> TaskRow:
        return guard.found(self.store.task(ref), ref)

    def _task(self, row: TaskRow, bodies: Bodies | None = None) -> Task:
        """The seed object from the store's own rows, built without validating again:
        everything in the store was validated on its way in (DESIGN §4a)."""
        packet, result, checkpoint = bodies or self.store.bodies(row.number)
        result_model = None
        if result:
            data = json.loads(result)
            data["evidence"] = [Evidence.model_construct(**e) for e in data["evidence"]]
            result_model = Result.model_construct(**data)
        return Task.model_construct(
            id=row.id, project=row.project, state=State(row.state),
            waiting_on=WaitingOn(row.waiting_on) if row.waiting_on else None,
            requester=row.requester, assignee=row.assignee,
            packet=self._packet(row.number, packet), result=result_model,
            latest_checkpoint=Checkpoint.model_construct(**json.loads(checkpoint))
            if checkpoint else None,
            created_at=row.created_at, updated_at=row.updated_at,
        )

    def _packet(self, number: int, body: str) -> Packet:
        """A task's packet, parsed once: packets never change after the handoff (a trigger
        sees to it), so the parsed model is kept for the next view of the task."""
        packet = self._packets.get(number)
        if packet is None:
            packet = self._packets[number] = Packet.model_construct(**json.loads(body))
            if len(self._packets) > PACKET_CACHE:
                self._packets.pop(next(iter(self._packets)))  # the oldest
        return packet

    def _view(self, found: ViewRow) -> TaskView:
        row, meta = found.task, found.meta
        task = self._task(row, (found.packet, found.result, found.checkpoint))
        claim = None
        if row.lease_id is not None:
            expires = row.lease_expires or ""
            claim = ClaimView(holder=row.lease_holder or "", instance=row.lease_instance or "",
                              session=row.lease_session, expires_at=expires,
                              expired=expires <= format_ts(self._now()))
        # the verdicts on the current result, whatever became of it, in the order given
        confirmations = [
            Confirmation(reviewer=c[0], instance=c[1], session=c[2], verdict=c[3],
                         reason=c[4], at=c[5], counted=bool(c[6]))
            for c in sorted(found.confirmations, key=lambda c: (c[5], c[0]))
        ]
        updates = [UpdateView(at=u[0], actor=u[1], summary=u[2], tokens=u[3], usd_micros=u[4])
                   for u in reversed(found.updates)]
        failed = meta is not None and meta.outcome == "failed"
        return TaskView(
            number=row.number, task=task,
            lifecycle=lifecycle(task.state, task.waiting_on, failed),
            priority=row.priority,
            labels=json.loads(row.labels), fields_version=row.fields_version, claim=claim,
            outcome=meta.outcome if meta else None,
            threshold=meta.threshold if meta else None, confirmations=confirmations,
            updates=updates, usage=Usage(tokens=found.usage[0], usd_micros=found.usage[1]),
            merge=Merge(commit=meta.merge_commit, by=meta.merged_by or "")
            if meta and meta.merge_commit else None,
            last_reason=row.reason,
        )

    def _sweep(self, at: str, overdue: builtins.list[TaskRow] | None = None) -> list[Moved]:
        """Inside a write: every claim whose lease ran out goes back to ``routed`` (moves 8/9)."""
        moved: list[Moved] = []
        for row in self.store.overdue(at) if overdue is None else overdue:
            self.store.move(
                row.number, State.routed.value, at=at, actor="clock", reason="expired",
                detail={"holder": row.lease_holder,
                        "fencing_token": row.lease_token, "expired_at": row.lease_expires},
                end_lease=True,
            )
            moved.append((row.number, MOVES_BY_PAIR[(State(row.state), State.routed)], "clock"))
        return moved

    def _notify(self, moves: Sequence[Moved]) -> None:
        """After commit: tell ``hivelite_on_transition`` plugins.

        The move is committed whatever they do: a failing notifier is logged (and
        kept in ``notify_failures``), never raised.
        """
        if not moves or not self.plugins.hook.hivelite_on_transition.get_hookimpls():
            return
        entries = self._entries(moves)
        for (number, move, actor), entry in zip(moves, entries, strict=True):
            with self.store.read():
                task = self._task(self._row(number))
            for error in call_all(self.plugins, "hivelite_on_transition", task=task,
                                  move=move, actor=actor, hive=self, entry=entry):
                self.notify_failures.append(error)
                log.warning("%s (task %s, move %s)", error.message, number, move.number)

    def _entries(self, moves: Sequence[Moved]) -> builtins.list[JournalEntry | None]:
        """The journal row of each committed move: the newest rows of its task, matched
        by their states (None where another writer has already moved the task on)."""
        wanted: dict[int, int] = {}
        for number, _, _ in moves:
            wanted[number] = wanted.get(number, 0) + 1
        rows: dict[int, builtins.list[dict[str, Any]]] = {
            number: [r for r in self.store.journal_moves(number, count)]
            for number, count in wanted.items()}
        entries: builtins.list[JournalEntry | None] = []
        for number, move, _ in moves:
            row = rows[number].pop(0) if rows[number] else None
            matches = row is not None and (row["from_state"], row["to_state"]) == (
                move.source.value, move.target.value)
            entries.append(JournalEntry.model_validate(row) if matches else None)
        return entries

    def settings(self, section: str) -> dict[str, Any]:
        """A plugin's table from the settings file (``hivelite.toml`` beside the store)."""
        value = self.config.get(section, {})
        if not isinstance(value, dict):
            where = settings_path(self.store.path).absolute()
            raise InvalidInput("invalid_config", f"[{section}] in the settings file must be"
                               f" a table, not {type(value).__name__} ({where})",
                               field=section)
        return value

    # -- reading -------------------------------------------------------------

    def get(self, ref: str | int) -> TaskView:
        """One task by id or number."""
        with self.store.read():
            return self._view(guard.found(self.store.view(ref), ref))

    def list(
        self,
        *,
        state: State | str | Sequence[State | str] | None = None,
        assignee: str | None = None,
        requester: str | None = None,
        project: str | None = None,
        ready: bool = False,
        limit: int = 50,
        cursor: int | None = None,
    ) -> Page:
        """Tasks in creation order, filtered; ``cursor`` is the last page's ``next_cursor``.

        ``ready=True`` keeps only tasks an agent could claim now: routed, with every
        ``packet.depends_on`` task completed.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            raise InvalidInput("invalid_limit", f"limit must be an integer 1..{MAX_PAGE}",
                               field="limit")
        if cursor is not None and (isinstance(cursor, bool) or not isinstance(cursor, int)):
            raise InvalidInput("invalid_cursor", "cursor is the next_cursor of a page",
                               field="cursor")
        states: list[str] = []
        if state is not None:
            wanted = [state] if isinstance(state, str | State) else list(state)
            try:
                states = [State(s).value for s in wanted]
            except ValueError as exc:
                raise InvalidInput("invalid_state_filter", str(exc), field="state") from None
        with self.store.read():
            rows = self.store.list_views(state=states, assignee=assignee, requester=requester,
                                         project=project, ready=ready, after=cursor,
                                         limit=limit + 1)
        items = [self._view(r) for r in rows[:limit]]
        next_cursor = rows[limit - 1].task.number if len(rows) > limit else None
        return Page(items=items, next_cursor=next_cursor)

    def history(self, ref: str | int) -> builtins.list[JournalEntry]:
        """The journal rows of one task, oldest first: every move, who made it and why."""
        with self.store.read():
            row = self._row(ref)
            return [JournalEntry.model_validate(r) for r in self.store.journal(row.number)]

    def journal(self) -> builtins.list[JournalEntry]:
        """The whole journal, oldest first."""
        with self.store.read():
            return [JournalEntry.model_validate(r) for r in self.store.journal()]

    # -- the clock -----------------------------------------------------------

    def expire(self) -> builtins.list[ExpiredClaim]:
        """Return every task whose claim has expired to ``routed`` now; report what reopened
        (including what opening this store already reopened)."""
        with self.store.write():
            at = format_ts(self._now())  # under the lock: fence and journal agree
            overdue = self.store.overdue(at)
            moved = self._sweep(at, overdue)
        self._notify(moved)
        reopened = self.expired_on_open + [
            ExpiredClaim(number=r.number, id=r.id, holder=r.lease_holder or "",
                         from_state=State(r.state), expired_at=r.lease_expires or at)
            for r in overdue]
        self.expired_on_open = []
        return reopened

    def _expire_on_open(self) -> None:
        """Opening a store returns expired claims' tasks first (only writes when there are)."""
        if self.store.overdue(format_ts(self._now())):
            self.expired_on_open = self.expire()

    def _fence(self, row: TaskRow, lease_id: str, token: int, agent: str | None,
               at: str) -> str:
        """The holder check, saying "expired" when the clock already ended this very claim."""
        try:
            return guard.holder(row, lease_id, token, agent, at)
        except InvalidState as error:
            if error.reason != "stale_claim" or row.lease_id is not None:
                raise
            ended = self.store.last_expiry(row.number)
            if ended is None or ended[1] != token:
                raise
            raise InvalidState("stale_claim", f"the claim with token {token} on task"
                               f" {row.number} expired at {ended[0]}") from None
