"""Questions a paused task asks, and their answers.

A holder pauses on a person (``on=human``) or another agent (``on=agent``) with its
question as the pause's reason: the task waits and the claim ends (move 10). ``answer``
journals an answer in place (the task stays waiting, so nothing about the protocol's
moves changes); the holder's ``resume`` takes the task back under a new fencing token
and reads every answer given in its receipt, as ``show`` shows them until the next move.
"""

from __future__ import annotations

from datetime import datetime

from ..core.caller import Caller
from ..core.models import Receipt
from ..core.protocol import State
from ..store import Writer
from . import guard
from .base import HiveBase
from .retries import idempotent
from .unit import Unit, receipt


@idempotent
def answer(hive: HiveBase, caller: Caller, ref: str | int, *, text: str,
           request_id: str | None = None) -> Receipt:
    """Answer the question a paused task waits on: the owner any question, another agent
    one on an agent. The task stays waiting until its assignee resumes it."""
    checked = hive._caller(caller, "answer")
    given = guard.answer_fits(text)

    def statement(tx: Writer, now: datetime, at: str) -> Receipt | None:
        row = tx.lock_task(ref)
        if row is None:
            return None
        # journaled as a row that leaves the task waiting: the store's rules take it only
        # on a task paused on a question, from one who may answer it (journal_answered)
        tx.record_event(row.number, at=at, actor=checked.name, state=State.waiting.value,
                        reason="answered", detail={"text": given})
        return receipt(row.number, row.id, State.waiting, at, row.waiting_on)

    def body(unit: Unit) -> Receipt:
        row = unit.task(ref)
        guard.asking(row, None if checked.is_owner else checked.name, hive.owner)
        unit.event(row, "answered", {"text": given})
        return unit.receipt(row)

    return hive._verb(checked, "answer", statement, body, about=ref)


__all__ = ["answer"]
