"""Task views as pure functions of what the store read and the time: no store, no plugins.

Everything in the store was validated on its way in (DESIGN §4a), so the
models are built without validating again. Packets never change after a
handoff (a trigger sees to it), so a parsed packet is kept for the next view.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, cast

from ..core.models import (
    Answer,
    Checkpoint,
    ClaimView,
    Confirmation,
    Control,
    Decision,
    DependencyView,
    DraftView,
    Evidence,
    EvidenceView,
    Lifecycle,
    Merge,
    Packet,
    Question,
    ReceiptView,
    Result,
    Task,
    TaskView,
    UpdateView,
    Usage,
    made,
    merge_evidence,
)
from ..core.protocol import PRIORITIES, TERMINAL, State, WaitingOn, lifecycle
from ..store import Bodies, JournalRow, TaskRow, ViewRow

PACKET_CACHE = 512


def _stored(value: str | None, allowed: Sequence[str], what: str) -> Any:
    """A stored value the view's model allows only from a set, checked here because the
    views are built without validating (a row damaged behind the triggers' back raises,
    and the listing reports it as damaged)."""
    if value is not None and value not in allowed:
        raise ValueError(f"{what} {value!r} is not one of {', '.join(allowed)}")
    return value


class PacketCache:
    """Parsed packets by task number, the newest ``size`` kept; safe to share by threads."""

    def __init__(self, size: int = PACKET_CACHE) -> None:
        self.size = size
        self._items: OrderedDict[int, Packet] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, number: int, body: str) -> Packet:
        with self._lock:
            packet = self._items.get(number)
        if packet is None:
            packet = Packet.model_construct(**json.loads(body))
            with self._lock:
                self._items[number] = packet
                if len(self._items) > self.size:
                    self._items.popitem(last=False)
        return packet


def _labels(text: str) -> list[str]:
    labels = json.loads(text)
    if not isinstance(labels, list) or not all(isinstance(v, str) for v in labels):
        raise ValueError(f"labels {text[:80]!r} are not a list of strings")
    return labels


def task_of(row: TaskRow, bodies: Bodies, packets: PacketCache | None = None) -> Task:
    """The seed object from a task's row and bodies."""
    result = None
    if bodies.result:
        data = json.loads(bodies.result)
        data["evidence"] = [Evidence.model_construct(**e) for e in data["evidence"]]
        result = Result.model_construct(**data)
    packet = (packets.get(row.number, bodies.packet) if packets is not None
              else Packet.model_construct(**json.loads(bodies.packet)))
    return made(Task, {
        "id": row.id, "project": row.project, "state": State(row.state),
        "waiting_on": WaitingOn(row.waiting_on) if row.waiting_on else None,
        "requester": row.requester, "assignee": row.assignee, "packet": packet,
        "result": result,
        "latest_checkpoint": Checkpoint.model_construct(**json.loads(bodies.checkpoint))
        if bodies.checkpoint else None,
        "created_at": row.created_at, "updated_at": row.updated_at})


def evidence_views(result: Result | None, receipts: str | None) -> list[EvidenceView]:
    """A result's evidence with what hivelite checked of each: ``verified`` from a receipt
    the store kept (``receipts``: JSON, one entry per piece, null where none)."""
    if result is None:
        return []
    kept = json.loads(receipts) if receipts else []
    out = []
    for index, item in enumerate(result.evidence):
        receipt = kept[index] if index < len(kept) and isinstance(kept[index], dict) else None
        out.append(EvidenceView.model_construct(
            kind=item.kind, summary=item.summary, url=item.url, content=item.content,
            verified=bool(receipt and receipt.get("verified") is True),
            receipt=ReceiptView.model_construct(
                digest=str(receipt.get("digest", "")), signer=receipt.get("signer"),
                why=receipt.get("why")) if receipt else None))
    return out


def verified_of(receipts: str | None) -> list[int]:
    """Which pieces of evidence (by place, from 0) a receipt verified: what the journal
    seals of them."""
    kept = json.loads(receipts) if receipts else []
    return [i for i, r in enumerate(kept) if isinstance(r, dict) and r.get("verified") is True]


def question_of(rows: Sequence[JournalRow]) -> Question | None:
    """A question from its journal rows (``Reader.question``): the pause, then its answers."""
    if not rows:
        return None
    asked, *answered = rows
    return Question.model_construct(
        text=asked.reason or "", on=_stored(asked.waiting_on, ("human", "agent"), "waiting_on"),
        asked_by=asked.actor or "", at=asked.at,
        answers=[Answer.model_construct(text=str((a.detail or {}).get("text", "")),
                                        by=a.actor or "", at=a.at) for a in answered])


def decision_of(row: JournalRow | None) -> Decision | None:
    """The decision a journal row records (``Reader.decision``): move 13 (a threshold of 0),
    16 (a sign-off, or the confirmations), or 17 (a decline, or a verifier's reject)."""
    if row is None:
        return None
    detail = row.detail or {}
    accepted = row.to_state == State.completed.value
    by_person = detail.get("decided_by") == "person"
    return Decision.model_construct(
        outcome="accepted" if accepted else "declined",
        decided_by="person" if by_person else "threshold" if accepted else "verifier",
        by=row.actor or "", at=row.at, reason=row.reason, seq=row.seq)


def updates_of(found: ViewRow, confirmations: Sequence[Confirmation]) -> list[UpdateView]:
    """The holder's recent progress and the verdicts on the current result, oldest first
    (a verdict reads as its word, then its reason)."""
    updates = [UpdateView.model_construct(at=u.at, actor=u.actor, summary=u.summary,
                                          tokens=u.tokens, usd_micros=u.usd_micros,
                                          kind="progress")
               for u in reversed(found.updates)]
    if confirmations:
        updates += [UpdateView.model_construct(
            at=c.at, actor=c.reviewer, summary=c.verdict + (f": {c.reason}" if c.reason else ""),
            tokens=None, usd_micros=None, kind="verdict") for c in confirmations]
        updates.sort(key=lambda u: u.at)  # stable: progress before a verdict of one instant
    return updates


def view_of(found: ViewRow, now: str, packets: PacketCache | None = None,
            controls: Sequence[Control] = ()) -> TaskView:
    """A task's full view; ``now`` (RFC 3339) decides whether its claim has expired;
    ``controls`` are the owner's live controls that bear on it."""
    row, meta = found.task, found.meta
    task = task_of(row, found.bodies, packets)
    claim = None
    if row.lease_id is not None:
        expires = row.lease_expires or ""
        claim = ClaimView.model_construct(
            holder=row.lease_holder or "", instance=row.lease_instance or "",
            session=row.lease_session, expires_at=expires, expired=expires <= now)
    # the verdicts on the current result, whatever became of it, in the order given
    confirmations = [
        Confirmation.model_construct(
            reviewer=c.reviewer, instance=c.instance, session=c.session,
            verdict=_stored(c.verdict, ("accept", "reject"), "verdict"),
            reason=c.reason, at=c.at, counted=c.counted, why=c.why)
        for c in found.confirmations
    ]
    updates = updates_of(found, confirmations)
    depends = [DependencyView.model_construct(number=d.number, id=d.id, state=State(d.state))
               for d in found.dependencies]
    return TaskView.model_construct(
        number=row.number, task=task,
        lifecycle=cast(Lifecycle, lifecycle(
            task.state, task.waiting_on, exhausted=row.exhausted and task.state is State.routed)),
        priority=_stored(row.priority, PRIORITIES, "priority"),
        labels=_labels(row.labels), role=row.role, fields_version=row.fields_version,
        depends_on=depends,
        blocked_by=[d.number for d in depends if d.state is not State.completed]
        if task.state not in TERMINAL else [],
        attempts=row.attempts, max_attempts=row.attempt_limit, claim=claim,
        outcome=_stored(meta.outcome, ("completed", "failed"), "outcome") if meta else None,
        threshold=meta.threshold if meta else None, confirmations=confirmations,
        updates=updates,
        usage=Usage.model_construct(tokens=found.tokens, usd_micros=found.usd_micros),
        merge=Merge.model_construct(commit=meta.merge_commit, by=meta.merged_by or "",
                                    evidence=merge_evidence(meta.merge_commit))
        if meta and meta.merge_commit else None,
        decision=decision_of(found.decision),
        draft=DraftView.model_construct(**json.loads(found.draft), seq=found.draft_seq)
        if found.draft else None,
        evidence=evidence_views(task.result, found.receipts),
        last_reason=row.reason,
        origin="agent" if found.created_by and "/" in found.created_by else "person",
        controls=list(controls),
        question=question_of(found.question),
    )
