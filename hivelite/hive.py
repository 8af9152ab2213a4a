"""``Hive``: the Python API, one method per verb, each verb one ``BEGIN IMMEDIATE`` transaction.

Inputs are validated (pydantic) and plugins consulted before or inside the
transaction; results are plain pydantic models a web layer can reuse unchanged.
"""

from __future__ import annotations

import getpass
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from pydantic import ValidationError

from . import guard
from .clock import Clock, format_ts, system_clock
from .errors import InvalidInput, PluginError
from .ids import new_task_id
from .models import (
    ClaimView,
    GateDecision,
    HandoffRequest,
    JournalEntry,
    Packet,
    Page,
    Task,
    TaskView,
)
from .plugins import PluginManager, call_each, get_plugin_manager
from .protocol import MOVES_BY_PAIR, Move, State, WaitingOn
from .store import Store, TaskRow
from .store.sqlite import Synchronous

MAX_PAGE = 500
_SLUG_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


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


def _default_owner() -> str:
    name = os.environ.get("HIVELITE_OWNER") or getpass.getuser()
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:39].strip("-")
    return slug or "owner"


class Hive:
    """One store, its owner and its plugins. Open with :meth:`open`; use as a context manager."""

    def __init__(self, store: Store, owner: str, plugins: PluginManager, clock: Clock) -> None:
        self.store = store
        self.owner = owner
        self.plugins = plugins
        self.clock = clock

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        owner: str | None = None,
        plugins_dir: str | os.PathLike[str] | None = None,
        plugins: Iterable[object] = (),
        clock: Clock = system_clock,
        synchronous: Synchronous = "NORMAL",
        create: bool = True,
    ) -> Hive:
        """Open (or create) the store at ``path``.

        A new store records ``owner`` (default ``$HIVELITE_OWNER`` or the login
        name); an existing one keeps its owner, and a different ``owner`` is refused.
        """
        if owner is not None and (not _SLUG_RE.fullmatch(owner) or len(owner) > 39):
            raise InvalidInput("invalid_owner", f"owner {owner!r} must be a slug like 'ana'",
                               field="owner")
        manager = get_plugin_manager(plugins_dir, extra=plugins)
        store = Store(path, create=create, synchronous=synchronous)
        try:
            stored = store.meta("owner")
            if stored is None:
                stored = owner or _default_owner()
                with store.write():
                    store.set_meta("owner", stored)
            elif owner is not None and owner != stored:
                raise InvalidInput(
                    "owner_mismatch", f"this store belongs to {stored!r}, not {owner!r}",
                    field="owner")
        except BaseException:
            store.close()
            raise
        return cls(store, stored, manager, clock)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Hive:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- helpers -------------------------------------------------------------

    def _now(self) -> datetime:
        return self.clock()

    def _row(self, ref: str | int) -> TaskRow:
        return guard.found(self.store.task(ref), ref)

    def _view(self, row: TaskRow, *, reveal_token: bool = False) -> TaskView:
        packet, result, checkpoint = self.store.bodies(row.number)
        task = Task.model_validate({
            "id": row.id, "project": row.project, "state": row.state,
            "waiting_on": row.waiting_on, "requester": row.requester,
            "assignee": row.assignee, "packet": json.loads(packet),
            "result": json.loads(result) if result else None,
            "latest_checkpoint": json.loads(checkpoint) if checkpoint else None,
            "created_at": row.created_at, "updated_at": row.updated_at,
        })
        claim = None
        if row.lease_id is not None:
            claim = ClaimView(
                holder=row.lease_holder or "", instance=row.lease_instance or "",
                session=row.lease_session, expires_at=row.lease_expires or "",
                lease_id=row.lease_id if reveal_token else None,
                fencing_token=row.lease_token if reveal_token else None,
            )
        return TaskView(
            number=row.number, task=task, priority=row.priority,  # type: ignore[arg-type]
            labels=json.loads(row.labels), fields_version=row.fields_version,
            claim=claim, last_reason=row.reason,
        )

    def _notify(self, moves: Sequence[tuple[int, Move, str]]) -> None:
        """After commit: tell ``hivelite_on_transition`` plugins; their failures undo nothing."""
        if not moves or not self.plugins.hook.hivelite_on_transition.get_hookimpls():
            return
        for number, move, actor in moves:
            view = self.get(number)
            self.plugins.hook.hivelite_on_transition(
                task=view.task, move=move, actor=actor, hive=self)

    # -- verbs ---------------------------------------------------------------

    def handoff(self, request: HandoffRequest | None = None, **fields: Any) -> TaskView:
        """Create a task and run the owner's permission gate on it, in one transaction.

        Any deny rejects it, else any hold parks it waiting on the owner, else it is routed.
        """
        try:
            req = request if request is not None else HandoffRequest.model_validate(fields)
        except ValidationError as exc:
            raise invalid(exc, "handoff") from None
        now = self._now()
        at = format_ts(now)
        task_id = req.id or new_task_id(now)
        task = Task.model_construct(
            id=task_id, project=req.project, state=State.requested, waiting_on=None,
            requester=req.requester, assignee=req.assignee, packet=req.packet, result=None,
            latest_checkpoint=None, created_at=at, updated_at=at,
        )
        row = TaskRow(
            number=0, id=task_id, state=State.requested.value, waiting_on=None,
            project=req.project, requester=req.requester, assignee=req.assignee,
            created_at=at, updated_at=at, lease_id=None, lease_token=0, lease_holder=None,
            lease_instance=None, lease_session=None, lease_expires=None,
            priority=req.priority, labels=json.dumps(sorted(set(req.labels))),
            fields_version=1, reason=None,
        )
        packet_json = req.packet.model_dump_json()
        with self.store.write():
            if self.store.task(task_id) is not None:
                raise InvalidInput("duplicate_id", f"a task with id {task_id!r} exists",
                                   field="id")
            self._check_dependencies(req.packet)
            number = self.store.insert_task(row, packet_json, actor=req.requester,
                                            reason="handoff", detail=None)
            decision, answers = self._gate(task)
            target = {"allow": State.routed, "hold": State.waiting,
                      "deny": State.rejected}[decision.action]
            waiting = WaitingOn.owner_approval.value if target is State.waiting else None
            self.store.move(number, target.value, at=at, actor="gate",
                            reason=decision.reason, waiting_on=waiting,
                            detail={"decided_by": decision.plugin, "answers": answers})
        self._notify([(number, MOVES_BY_PAIR[(State.requested, target)], "gate")])
        return self.get(number)

    def _check_dependencies(self, packet: Packet) -> None:
        missing = sorted(set(packet.depends_on) - self.store.existing_ids(packet.depends_on))
        if missing:
            raise InvalidInput(
                "unknown_dependency",
                f"packet.depends_on names tasks this store does not have: {', '.join(missing)}",
                field="packet.depends_on")

    def _gate(self, task: Task) -> tuple[GateDecision, list[dict[str, str]]]:
        """Every gate plugin's answer; any deny wins, then any hold, else allow."""
        decisions: list[GateDecision] = []
        for plugin, answer in call_each(self.plugins, "hivelite_permission_gate",
                                        task=task, hive=self):
            if answer is None:
                continue
            if isinstance(answer, str) and answer in ("allow", "hold", "deny"):
                answer = GateDecision(action=answer, reason=f"{plugin} says {answer}")
            if not isinstance(answer, GateDecision):
                raise PluginError(plugin, "hivelite_permission_gate",
                                  f"returned {answer!r}; expected a GateDecision, "
                                  "'allow', 'hold', 'deny' or None")
            decisions.append(answer.model_copy(update={"plugin": plugin}))
        answers = [{"plugin": d.plugin or "", "action": d.action, "reason": d.reason}
                   for d in decisions]
        for action in ("deny", "hold", "allow"):
            for decision in decisions:
                if decision.action == action:
                    return decision, answers
        return GateDecision(action="allow", reason="no gate plugin objected"), answers

    def get(self, ref: str | int) -> TaskView:
        """One task by id or number."""
        with self.store.read():
            return self._view(self._row(ref))

    def list(
        self,
        *,
        state: State | str | Sequence[State | str] | None = None,
        assignee: str | None = None,
        requester: str | None = None,
        project: str | None = None,
        limit: int = 50,
        cursor: int | None = None,
    ) -> Page:
        """Tasks in creation order, filtered; ``cursor`` is the last page's ``next_cursor``."""
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput("invalid_limit", f"limit must be 1..{MAX_PAGE}", field="limit")
        states: list[str] = []
        if state is not None:
            wanted = [state] if isinstance(state, str | State) else list(state)
            try:
                states = [State(s).value for s in wanted]
            except ValueError as exc:
                raise InvalidInput("invalid_state_filter", str(exc), field="state") from None
        with self.store.read():
            rows = self.store.list_tasks(state=states, assignee=assignee, requester=requester,
                                         project=project, after=cursor, limit=limit + 1)
            items = [self._view(r) for r in rows[:limit]]
        next_cursor = rows[limit - 1].number if len(rows) > limit else None
        return Page(items=items, next_cursor=next_cursor)

    def _person_move(self, ref: str | int, target: State, verb: str, actor: str | None,
                     reason: str | None, check: Callable[[TaskRow], object]) -> TaskView:
        who = guard.person(self.owner, actor, verb)
        if reason is not None and len(reason) > 500:
            raise InvalidInput("reason_too_long", "a reason is at most 500 characters",
                               field="reason")
        at = format_ts(self._now())
        with self.store.write():
            row = self._row(ref)
            check(row)
            move = guard.check_move(row.state, row.waiting_on, target)
            self.store.move(row.number, target.value, at=at, actor=who,
                            reason=reason or verb, end_lease=row.lease_id is not None)
        self._notify([(row.number, move, who)])
        return self.get(row.number)

    def approve(self, ref: str | int, *, actor: str | None = None,
                reason: str | None = None) -> TaskView:
        """The owner lets a held handoff go ahead: waiting(owner_approval) -> routed."""
        return self._person_move(ref, State.routed, "approve", actor, reason,
                                 lambda row: guard.awaiting_owner(row, "approve"))

    def deny(self, ref: str | int, *, actor: str | None = None,
             reason: str | None = None) -> TaskView:
        """The owner refuses a held handoff: waiting(owner_approval) -> rejected."""
        return self._person_move(ref, State.rejected, "deny", actor, reason,
                                 lambda row: guard.awaiting_owner(row, "deny"))

    def cancel(self, ref: str | int, *, actor: str | None = None,
               reason: str | None = None) -> TaskView:
        """The owner withdraws an open task (requested, waiting, routed, accepted, working)."""
        return self._person_move(ref, State.cancelled, "cancel", actor, reason,
                                 guard.cancellable)

    def history(self, ref: str | int) -> list[JournalEntry]:
        """The journal rows of one task, oldest first: every move, who made it and why."""
        with self.store.read():
            row = self._row(ref)
            return [JournalEntry.model_validate(r) for r in self.store.journal(row.number)]

    def journal(self) -> list[JournalEntry]:
        """The whole journal, oldest first."""
        with self.store.read():
            return [JournalEntry.model_validate(r) for r in self.store.journal()]
