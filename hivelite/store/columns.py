"""What both engines read the same way: column lists, and rows turned into contract rows.

The SQL of each engine lives in its own module (``sqlite.py``, ``postgres.py``); the
column lists and the conversions here are shared, so a row means the same on either.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..core.protocol import JUDGEMENTS, STATE_OF, SUBMITTED_VIA, State, passage
from .rows import (
    Bodies,
    ConfirmationRow,
    Dependency,
    JournalRow,
    ResultMeta,
    TaskRow,
    UpdateRow,
    ViewRow,
)

VIEW_UPDATES = 20
"""Updates a task view carries, newest first."""

TASK_COLUMNS = (
    "number", "id", "state", "waiting_on", "project", "requester", "assignee",
    "created_at", "updated_at", "lease_id", "lease_token", "lease_holder", "lease_instance",
    "lease_session", "lease_expires", "priority", "labels", "fields_version", "reason",
    "depends", "waits", "attempts", "attempt_limit", "role", "lease_scope",
)
SELECT_TASK = f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks"


def pick_where(mark: str, ready: str, assignee: str, project: str | None,
               projects: Sequence[str] | None,
               roles: Sequence[str]) -> tuple[list[str], list[object]]:
    """The clauses of ``next``'s pick that both engines write alike (``mark``: their
    placeholder; ``ready``: their ready-task condition): the assignee's ready tasks, in
    the enrolment's projects and roles, in ``project``. Each engine adds the tasks to
    skip and the label in its own dialect."""
    clauses, args = [f"assignee = {mark} AND {ready}"], [assignee]
    if projects is not None:  # an enrolment's scope
        clauses.append(f"project IN ({', '.join([mark] * len(projects)) or 'NULL'})")
        args.extend(projects)
    clauses.append(f"(role IS NULL OR role IN ({', '.join([mark] * len(roles)) or 'NULL'}))")
    args.extend(roles)
    if project is not None:
        clauses.append(f"project = {mark}")
        args.append(project)
    return clauses, list(args)


def _states(states: Iterable[State]) -> str:
    """States as an SQL list, sorted."""
    return "(" + ", ".join(f"'{s.value}'" for s in sorted(states)) + ")"


JOURNAL = (
    "SELECT j.seq, t.id, j.task, j.at, j.actor, j.from_state, j.to_state, j.waiting_on,"
    " m.number, j.reason, j.detail FROM journal j"
    " LEFT JOIN tasks t ON t.number = j.task"
    " LEFT JOIN moves m ON m.from_state = j.from_state AND m.to_state = j.to_state"
)
PAUSED = "j.from_state = 'working' AND j.to_state = 'waiting'"
ANSWERED = "j.reason = 'answered' AND j.from_state = 'waiting' AND j.to_state = 'waiting'"
MINE = "j.task = {p}"
"""A task's journal rows (``j``), found by its number (``p``: the engine's placeholder); an
engine that links them instead names them otherwise (``sqlite.HISTORY``)."""
QUESTION_OF = (
    JOURNAL + " WHERE {mine} AND j.seq >= (SELECT coalesce(max(j.seq), 0) FROM journal j"
    f" WHERE {{mine}} AND {PAUSED}) AND (({PAUSED}) OR ({ANSWERED})) ORDER BY j.seq")
QUESTION = QUESTION_OF.format(mine=MINE)
"""A task's latest pause and the answers after it: a pause is move 10 (working ->
waiting), an answer an event recorded while it waits."""
DECIDING = ("('working', 'verifying'), ('verifying', 'completed'), ('verifying', 'approval'),"
            " ('verifying', 'routed'), ('approval', 'completed'), ('approval', 'routed')")
SUBMISSION = (
    f"(j.from_state IN {_states(SUBMITTED_VIA)} AND j.to_state IN {_states(JUDGEMENTS)}"
    " AND {via} IS NOT NULL)")
"""A submission's journal row (``j``; ``via``: its detail's via as the engine reads it): the
store's rules let a via only on a submission's passage (migration 19)."""
DECISION_OF = (
    JOURNAL + " WHERE j.seq = (SELECT max(j.seq) FROM journal j WHERE {mine}"
    f" AND ((j.from_state, j.to_state) IN (VALUES {DECIDING}) OR {SUBMISSION}))")
"""The last move on a task's result (``mine``: its rows; ``via`` as in :data:`SUBMISSION`):
its submission, the guard's judgement, or the decision on it; a decision only when its last
seed move is 13, 16 or 17."""
SUBMITTED_OF = ("SELECT max(j.seq) FROM journal j WHERE {mine} AND ((j.from_state = 'working'"
                f" AND j.to_state = 'verifying') OR {SUBMISSION})")
"""The journal row of a task's last submission (move 12, or the row a submission is since
migration 19): the one its result's draft cites."""
DECISIONS = frozenset({13, 16, 17})
"""The moves that decide on a result: passed by a threshold of 0, completed by a sign-off
or the confirmations, declined by a person or a verifier's reject."""
ENROLMENT = "agent, projects, roles, rights, active, seq, at, by"
PRUNE_BATCH = 64
"""Expired rows a write drops at most (request records, watches): they leave over the next
writes that keep one, never in one long write."""
TOKEN = "id, agent, instance, rights, hash, created_at, expires_at, revoked_at, by"
WATCH = ("id, caller, token, verb, number, asked, answer, created_at, updated_at, expires_at,"
         " poll_ms, cancelled_at")
VIEW_OF = (
    "{columns}, p.body, r.body, c.body, r.worker, r.instance, r.session,"
    " r.outcome, r.version, r.threshold, r.merge_commit, r.merged_by, {creator}, r.draft,"
    " r.receipts"
    " FROM tasks t JOIN packets p ON p.task = t.number"
    " LEFT JOIN results r ON r.task = t.number"
    " LEFT JOIN checkpoints c ON c.task = t.number"
)
VIEW = VIEW_OF.format(columns="{columns}", creator="(SELECT actor FROM journal j"
                      " WHERE j.task = t.number ORDER BY j.seq LIMIT 1)")
"""A task with its bodies, result and creator, after ``SELECT`` (``columns``: the task's)."""


_DETAIL = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
"""``json.dumps(..., separators=(",", ":"), sort_keys=True)`` without making an encoder
each call."""


def dump(detail: dict[str, Any] | None) -> str | None:
    """A journal detail as the store keeps it: compact, sorted JSON (None when empty)."""
    return _DETAIL(detail) if detail else None


def usage_sum(rows: Iterable[Sequence[Any]]) -> tuple[int, int]:
    """Exact totals of (tokens, usd_micros) pairs; a value that is not an integer (raw SQL
    can write one) counts 0 here, and the update's own view reports it."""
    tokens = usd = 0
    for spent, cost in rows:
        tokens += spent if type(spent) is int else 0
        usd += cost if type(cost) is int else 0
    return tokens, usd


def journal_row(values: Sequence[Any]) -> JournalRow:
    """One row of :data:`JOURNAL` as the contract's journal row, as it is stored."""
    seq, task_id, number, at, actor, from_state, to_state, waiting_on, move, reason, detail = (
        values)
    return JournalRow(seq=seq, task=task_id, number=number, at=at, actor=actor,
                      from_state=from_state, to_state=to_state, waiting_on=waiting_on,
                      move=move, reason=reason, detail=json.loads(detail) if detail else None)


SUBMIT_REASON = "submit"
"""The reason of a submission's move 7 (the holder's first progress was its result)."""
JUDGE = "guard"
"""Who judges a submission (moves 13, 14, 15)."""


def returned_reason(outcome: str) -> str:
    """The reason of a submission's move 12."""
    return f"result returned ({outcome})"


def submission_detail(via: Sequence[str], returned: dict[str, Any],
                      judged: dict[str, Any]) -> dict[str, Any]:
    """A submission's journal detail (one row since migration 19): the guard's judgement's
    own, with the states it passed through (``via``) and what the row of move 12 sealed
    (``returned``: the claim's token, the draft's digest, the evidence verified)."""
    return judged | {"via": list(via), "returned": returned}


def seed_rows(row: JournalRow) -> list[JournalRow]:
    """The seed moves a journal row stands for, one row each (all at its seq): a
    submission's row (:func:`submission_detail`) gives moves 7, 12 and the judgement's;
    any other row is itself."""
    detail = row.detail
    if detail is None or "via" not in detail or row.from_state is None or row.to_state is None:
        return [row]
    source, target, via = STATE_OF.get(row.from_state), STATE_OF.get(row.to_state), detail["via"]
    moves = (passage(source, via, target) if source is not None and target is not None
             and isinstance(via, list) else None)
    if moves is None:
        return [row]
    judged = {k: v for k, v in detail.items() if k not in ("via", "returned")} or None
    returned = detail.get("returned")
    outcome = "failed" if judged is not None and judged.get("outcome") == "failed" else (
        "completed")
    steps = []
    for move in moves:
        reason: str | None
        said: dict[str, Any] | None
        if move.target is State.working:
            actor, reason, said = row.actor, SUBMIT_REASON, None
        elif move.target is State.verifying:
            actor, reason = row.actor, returned_reason(outcome)
            said = returned if isinstance(returned, dict) and returned else None
        else:
            actor, reason, said = JUDGE, row.reason, judged
        steps.append(JournalRow(
            seq=row.seq, task=row.task, number=row.number, at=row.at, actor=actor,
            from_state=move.source.value, to_state=move.target.value, waiting_on=None,
            move=move.number, reason=reason, detail=said))
    return steps


def journal_rows(rows: Iterable[Sequence[Any]]) -> list[JournalRow]:
    """Rows of :data:`JOURNAL` as the seed's moves (:func:`seed_rows`), oldest first."""
    out: list[JournalRow] = []
    for values in rows:
        out.extend(seed_rows(journal_row(values)))
    return out


def asks(task: TaskRow) -> bool:
    """Whether a view shows the task's question: while it waits on a person or an agent,
    and after a resume until its next move (the holder reads the answers there)."""
    return ((task.state == "waiting" and task.waiting_on in ("human", "agent"))
            or task.reason == "resumed")


def decides(task: TaskRow) -> bool:
    """Whether a task with a result may show a decision on it: completed, or routed again
    (a decline or a reject); one awaiting a verdict has none yet."""
    return task.state in ("completed", "routed", "accepted", "working")


class ViewRows:
    """Task views built from rows of :data:`VIEW`, the same on every engine; an engine
    gives the queries (``_recent_updates``, ``_usage_total``, ``confirmations``,
    ``dependencies``)."""

    __slots__ = ()

    def confirmations(self, number: int, version: int) -> list[ConfirmationRow]:
        raise NotImplementedError

    def dependencies(self, number: int) -> list[Dependency]:
        raise NotImplementedError

    def _recent_updates(self, number: int, limit: int) -> list[UpdateRow]:
        """A task's ``limit`` newest updates, newest first."""
        raise NotImplementedError

    def _usage_total(self, number: int) -> tuple[int, int]:
        """A task's usage over all its updates."""
        raise NotImplementedError

    def question(self, number: int) -> list[JournalRow]:
        raise NotImplementedError

    def decision(self, number: int) -> JournalRow | None:
        raise NotImplementedError

    def submitted(self, number: int) -> int | None:
        raise NotImplementedError

    def _view_rows(self, rows: Iterable[Sequence[Any]]) -> list[ViewRow]:
        """Each row of :data:`VIEW` with its current verdicts, last updates, usage totals
        and dependencies."""
        out = []
        n = len(TASK_COLUMNS)
        for values in rows:
            task = TaskRow(*values[:n])
            meta = ResultMeta(*values[n + 3:n + 11]) if values[n + 1] is not None else None
            verdicts = self.confirmations(task.number, meta.version) if meta else []
            recent = self._recent_updates(task.number, VIEW_UPDATES + 1)
            if len(recent) <= VIEW_UPDATES:  # all of them: sum here rather than ask again
                tokens, usd = usage_sum((u.tokens, u.usd_micros) for u in recent)
            else:
                recent = recent[:VIEW_UPDATES]
                tokens, usd = self._usage_total(task.number)
            needs = tuple(self.dependencies(task.number)) if task.depends else ()
            asked = tuple(self.question(task.number)) if asks(task) else ()
            decided = self.decision(task.number) if meta and decides(task) else None
            draft = values[n + 12]
            out.append(ViewRow(task, Bodies(values[n], values[n + 1], values[n + 2]), meta,
                               verdicts, recent, tokens, usd, needs, values[n + 11], asked,
                               decided, draft, self.submitted(task.number) if draft else None,
                               values[n + 13]))
        return out
