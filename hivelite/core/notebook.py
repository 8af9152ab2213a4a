"""HTML for notebooks: what Jupyter shows for a task, a page of tasks, a history, a
receipt and a store (each model's ``_repr_html_`` calls one of these).

Pure functions of the models, escaping every value; small inline styles only, so a
notebook saved as HTML still reads the same. Imported only when a notebook asks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any, TypeAlias

# The models call these from their ``_repr_html_``; this module does not import them
# back (it reads their attributes), so the two stay one above the other.
TaskView: TypeAlias = Any
JournalEntry: TypeAlias = Any
Receipt: TypeAlias = Any
StoreInfo: TypeAlias = Any

_TABLE = "border-collapse:collapse;font-size:90%"
_CELL = "padding:2px 8px;text-align:left;border-bottom:1px solid #ddd"
TASK_COLUMNS = ("#", "title", "state", "assignee", "priority", "claim expires")


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]], caption: str = "") -> str:
    cells = "".join(f'<th style="{_CELL}">{escape(h)}</th>' for h in head)
    body = "".join(
        "<tr>" + "".join(f'<td style="{_CELL}">{escape(_text(v))}</td>' for v in row) + "</tr>"
        for row in rows)
    title = f"<caption style=\"text-align:left\">{escape(caption)}</caption>" if caption else ""
    return (f'<table style="{_TABLE}">{title}<thead><tr>{cells}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


def _text(value: Any) -> str:
    if value is None:
        return ""
    return str(getattr(value, "value", value))


def state_of(view: TaskView) -> str:
    """The task's state as a person reads it: ``waiting (owner_approval)``."""
    task = view.task
    return str(task.state.value) + (f" ({task.waiting_on.value})" if task.waiting_on else "")


def task_row(view: TaskView) -> tuple[Any, ...]:
    claim = view.claim
    expiry = "" if claim is None else claim.expires_at + (" (expired)" if claim.expired else "")
    return (view.number, view.task.packet.task, state_of(view), view.task.assignee,
            view.priority, expiry)


def task_table(views: Sequence[TaskView], *, more: bool = False) -> str:
    """A page of tasks: one row each."""
    caption = f"{len(views)} task{'s' if len(views) != 1 else ''}" + (
        " (more on the next page)" if more else "")
    return _table(TASK_COLUMNS, (task_row(v) for v in views), caption)


def task_card(view: TaskView) -> str:
    """One task: its facts, then its claim, result and verdicts when it has them."""
    task = view.task
    facts: list[tuple[str, Any]] = [
        ("state", state_of(view)), ("lifecycle", view.lifecycle),
        ("assignee", task.assignee), ("requester", task.requester),
        ("project", task.project), ("priority", view.priority),
        ("labels", ", ".join(view.labels)), ("acceptance", "; ".join(
            task.packet.acceptance_criteria)),
        ("updated", task.updated_at)]
    if view.claim is not None:
        facts.append(("claim", f"{view.claim.holder} on {view.claim.instance}, expires"
                               f" {view.claim.expires_at}"
                               + (" (expired)" if view.claim.expired else "")))
    if view.blocked_by:
        facts.append(("blocked by", ", ".join(f"#{n}" for n in view.blocked_by)))
    if task.result is not None:
        facts.append(("result", f"{task.result.summary} (by {task.result.returned_by})"))
    for verdict in view.confirmations:
        facts.append(("verdict", f"{verdict.verdict} by {verdict.reviewer}"
                                 + ("" if verdict.counted else f" (not counted: {verdict.why})")))
    if view.last_reason:
        facts.append(("last reason", view.last_reason))
    return _table(("", ""), facts, f"#{view.number} {task.packet.task}")


def timeline(entries: Sequence[JournalEntry]) -> str:
    """A task's journal: when, who, the move, why."""
    rows = [(e.seq, e.at, e.actor or "", _move(e), e.reason or "") for e in entries]
    return _table(("seq", "at", "actor", "move", "reason"), rows,
                  f"{len(entries)} journal row{'s' if len(entries) != 1 else ''}")


def _move(entry: JournalEntry) -> str:
    to = _text(entry.to_state)
    if entry.from_state is None:
        return f"created {to}"
    if entry.from_state == entry.to_state:
        return f"({to})"
    return f"{_text(entry.from_state)} → {to}"


def receipt(answer: Receipt) -> str:
    """A write's answer: the task, where it stands, the lease when it carries one."""
    facts: list[tuple[str, Any]] = [("task", f"#{answer.number} ({answer.id})"),
                                    ("state", answer.state.value + (
                                        f" ({answer.waiting_on.value})"
                                        if answer.waiting_on else "")),
                                    ("at", answer.at), ("journal seq", answer.seq)]
    for name in ("holder", "instance", "fencing_token", "expires_at"):
        if hasattr(answer, name):
            facts.append((name.replace("_", " "), getattr(answer, name)))
    return _table(("", ""), facts, type(answer).__name__)


def store(info: StoreInfo) -> str:
    """A store: where and whose, tasks by state, live claims."""
    live = info.tasks.get("accepted", 0) + info.tasks.get("working", 0)
    facts: list[tuple[str, Any]] = [("store", info.location), ("owner", info.owner),
                                    ("mode", info.mode), ("live claims", live),
                                    ("live controls", info.live_controls)]
    facts += [(f"tasks {state}", count) for state, count in sorted(info.tasks.items())]
    return _table(("", ""), facts, "hivelite store")
