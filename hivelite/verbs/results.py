"""Results and decisions: submit, verify, sign-off, decline, amend.

Submitting ends the claim and passes the task through ``verifying`` in the same
transaction: evidence that fails its checks sends it back to ``routed``; else
the merge threshold decides between ``completed`` (0) and ``approval`` (n >= 1).
The plugins are asked before the write lock is taken (the packet never changes
after a handoff, and the fence is checked again under the lock); when no plugin but
the built-in one is asked, the store's policy decides under the lock
(:func:`_submit_by_policy`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import TypeAdapter, ValidationError

from ..core.caller import Caller, require_agent, require_owner
from ..core.clock import format_ts
from ..core.errors import (
    ForbiddenRight,
    HiveliteError,
    InvalidInput,
    InvalidState,
    PluginError,
    StoreBusy,
    StoreError,
)
from ..core.models import (
    DEFERRED,
    CommitHash,
    Confirmation,
    Draft,
    Evidence,
    EvidenceReceipt,
    EvidenceView,
    Receipt,
    Result,
    Task,
    normal_instance,
)
from ..core.protocol import State
from ..core.receipts import check as check_receipt
from ..store import Bodies, ConfirmationRow, Held, TaskRow, Writer
from ..store.columns import submission_detail
from ..store.keys import load_signer
from . import guard
from .authority import store_policy, why_not_counted
from .base import HiveBase, Refusals, charge, invalid
from .claims import fencing_token, usage_fits
from .plugins import call_each, call_first
from .retries import idempotent
from .unit import Unit, receipt, updated
from .views import evidence_views, task_of, verified_of

_COMMIT = TypeAdapter(CommitHash, config=DEFERRED)
T = TypeVar("T")
Outcome = Literal["completed", "failed"]
MAX_THRESHOLD = 1000
THRESHOLD = "hivelite.default_threshold"
"""The built-in threshold's name (``plugins.DEFAULT_PLUGINS``)."""


# -- plugin questions ----------------------------------------------------


def _evidence_problems(hive: HiveBase, task: Task, result: Result,
                       evidence: list[EvidenceView] | None = None) -> list[dict[str, str]]:
    problems = []
    shown = evidence if evidence is not None else evidence_views(result, None)
    for plugin, answer in call_each(hive.plugins, "hivelite_check_evidence",
                                    task=task, result=result, hive=hive, evidence=shown):
        if answer is None:
            continue
        if not isinstance(answer, list | tuple) or not all(
                isinstance(p, str) for p in answer):
            raise PluginError(plugin, "hivelite_check_evidence",
                              f"returned {answer!r}; expected a list of strings or None")
        problems += [{"plugin": plugin, "problem": p} for p in answer]
    return problems


def _threshold(hive: HiveBase, task: Task) -> tuple[int, str]:
    answer = call_first(hive.plugins, "hivelite_merge_threshold", task=task, hive=hive)
    if answer is None:
        return 1, "default"
    plugin, value = answer
    if isinstance(value, bool) or not isinstance(value, int) or not (
            0 <= value <= MAX_THRESHOLD):
        raise PluginError(plugin, "hivelite_merge_threshold",
                          f"returned {value!r}; expected an integer 0..{MAX_THRESHOLD}")
    if plugin == THRESHOLD:  # the store's policy decided
        return value, hive.policy().threshold_for(task.project)[1]
    return value, plugin


def _uncounted_by_plugin(hive: HiveBase, task: Task, confirmation: Confirmation) -> str | None:
    """Why a plugin does not count a verdict the store's mode would count, or None.
    A plugin only narrows the mode's rule: it is asked about counted verdicts alone."""
    answer = call_first(hive.plugins, "hivelite_count_confirmation", task=task,
                        confirmation=confirmation, hive=hive)
    if answer is None:
        return None
    plugin, value = answer
    if not isinstance(value, bool):
        raise PluginError(plugin, "hivelite_count_confirmation",
                          f"returned {value!r}; expected True, False or None")
    return None if value else f"the plugin {plugin} does not count it"


ASKS = 3
"""How many times a verdict or an amendment asks its plugins (before the write lock) when
the result they were asked about changed before the write could take it."""


class _AskAgain(Exception):
    """The result the plugins were asked about is not the one the write found: the write
    is undone, and the plugins are asked about the result as it is now."""


def _asking(name: str, ask: Callable[[], T], write: Callable[[T], Receipt]) -> Receipt:
    """``write`` given what ``ask`` learnt from the plugins before the write lock (each
    asked outside it: a plugin that takes its time holds up no other writer), asked
    afresh while the write finds that the result asked about changed meanwhile (at most
    :data:`ASKS` times; then ``503 store_busy``)."""
    for _ in range(ASKS):
        try:
            return write(ask())
        except _AskAgain:
            continue
    raise StoreBusy("busy", f"the result changed {ASKS} times while the plugins were asked"
                    f" about it; nothing was written by this {name}. Try again", retry=True)

# -- submit --------------------------------------------------------------


@idempotent
def submit(
    hive: HiveBase, caller: Caller, ref: str | int, *, lease_id: str, token: int, summary: str,
    evidence: Sequence[Evidence | Mapping[str, Any]],
    provenance: str = "agent_generated", outcome: Outcome = "completed",
    tokens: int | None = None, usd_micros: int | None = None,
    draft: Draft | Mapping[str, Any] | None = None, request_id: str | None = None,
) -> Receipt:
    """The holder returns a result with evidence; the claim ends and the task is judged.

    ``outcome="failed"`` records the failure and returns the task to ``routed``. ``draft``
    is the result's knowledge change (a patch, a document or a decision), kept with it;
    the submission's journal row seals its digest, and the view cites that row.
    """
    agent = require_agent(hive._caller(caller, "submit"), "submit")
    token = fencing_token(token)
    if outcome not in ("completed", "failed"):
        raise InvalidInput("invalid_outcome", f"outcome is completed or failed, not"
                           f" {outcome!r}", field="outcome")
    usage_fits(tokens, usd_micros)
    drafted = _draft(draft, outcome)
    plain, given = _split_receipts(evidence)
    charged = tokens is not None or usd_micros is not None  # against the day's budget
    refused: Refusals = []  # (the plain statement's, for the full run that follows)
    plainly = (not charged and not any(given) and "submit" in hive.store.statements
               and _by_policy_alone(hive))
    if plainly:
        try:
            returned = _submit_by_policy(hive, agent, ref, lease_id=lease_id, token=token,
                                         summary=summary, evidence=plain,
                                         provenance=provenance, outcome=outcome,
                                         drafted=drafted, refused=refused)
        except (StoreBusy, StoreError):
            # no write could begin (busy, a key missing, a damaged store): a claim that is
            # not the caller's is named first, from a snapshot, as it always was
            _read_before_the_lock(hive, agent, ref, lease_id, token, format_ts(hive.clock()),
                                  receipts=False)
            raise
        if returned is not None:
            return returned
    at = format_ts(hive.clock())
    row, task, holder, store_id = _read_before_the_lock(hive, agent, ref, lease_id, token, at,
                                                        receipts=any(given))
    try:
        result = Result.model_validate({
            "summary": summary,
            "evidence": plain,
            "provenance": provenance, "returned_by": holder, "returned_at": at})
    except ValidationError as exc:
        raise invalid(exc, "result") from None
    receipts = _checked(store_id, result, given)
    # the result as the store keeps it, but for its time (read under the lock): no model is
    # made or dumped inside the write
    kept = result.model_dump_json(exclude_none=True, exclude={"returned_at"})
    sealed = _sealed(token, drafted, receipts)
    problems: list[dict[str, str]] = []
    threshold, decided_by = None, None
    if outcome == "completed":
        with hive._policy_once():
            problems = _evidence_problems(hive, task, result, evidence_views(result, receipts))
            if not problems:
                threshold, decided_by = _threshold(hive, task)

    def body(unit: Unit) -> Receipt:
        row = unit.task(ref)  # the plugins took time: fence again under the lock
        holder = hive._fence(unit, row, lease_id, token)
        unit.tx.put_result(row.number, returned_at(kept, unit.at), worker=holder,
                           instance=row.lease_instance or "", session=row.lease_session,
                           outcome=outcome, threshold=threshold, draft=drafted,
                           receipts=receipts)
        if tokens is not None or usd_micros is not None:
            hive._charge(unit, usage=True)
            unit.tx.add_update(row.number, at=unit.at, actor=holder,
                               summary=f"result returned ({outcome})", tokens=tokens,
                               usd_micros=usd_micros)
        row = unit.submission(row, target, actor=holder, reason=reason, sealed=sealed,
                              judged=detail)
        return unit.receipt(row)

    target, reason, detail = _judged(outcome, summary, problems, threshold, decided_by)
    if not plainly:  # (a plain one was offered to the statements first)
        instance = agent.instance or ""

        def statement(tx: Writer, now: datetime, at: str) -> Receipt | None:
            held = tx.held(row.number, lease_id=lease_id, token=token, holder=agent.name,
                           instance=instance, at=at)
            if held is None:
                return None
            if charged:  # the usage it reports, charged and kept as the full run keeps it
                charge(tx, now, agent.name, usage=True)
                tx.add_update(held.number, at=at, actor=agent.name,
                              summary=f"result returned ({outcome})", tokens=tokens,
                              usd_micros=usd_micros)
            return _returned(tx, held, agent.name, instance, at, kept=kept, outcome=outcome,
                             threshold=threshold, drafted=drafted, receipts=receipts,
                             sealed=sealed, judged=(target, reason, detail))

        return hive._verb(agent, "submit", statement, body, about=ref)
    return hive._write(agent, "submit", body, about=ref,  # (the plain one's full run)
                       refused=refused)

def _read_before_the_lock(hive: HiveBase, agent: Caller, ref: str | int, lease_id: str,
                          token: int, at: str, *, receipts: bool
                          ) -> tuple[TaskRow, Task, str, str | None]:
    """What a submission reads before the write lock, in one snapshot: the task (for the
    plugins' questions), its fence (a claim that is not the caller's is refused here,
    before any plugin is asked, naming a control that ended it), and the store's identity
    when receipts are to be checked."""
    with hive.store.read() as reader:
        store_id = reader.meta("store_id") if receipts else None
        found = reader.task_with_bodies(ref)
        row = guard.found(None if found is None else found[0], ref)
        try:
            holder = guard.holder(row, lease_id, token, agent.name, at, agent.instance)
        except (InvalidState, ForbiddenRight):
            hive._controlled(reader, agent, "submit", row)  # a control ended the lease?
            raise
        assert found is not None
        return row, task_of(row, found[1], hive._packets), holder, store_id


def _sealed(token: int, drafted: str | None, receipts: str | None) -> dict[str, Any]:
    """What the submission's journal row seals: the claim's token, the draft's digest and
    whether its evidence was verified."""
    return {"fencing_token": token} | ({"draft": hashlib.sha256(
        drafted.encode("utf-8")).hexdigest()} if drafted else {}) | (
        {"verified": verified_of(receipts)} if receipts else {})


def _by_policy_alone(hive: HiveBase) -> bool:
    """Whether the store's policy alone judges a submission here: no plugin checks
    evidence, and no plugin but the built-in one (the store's threshold) answers the
    threshold's question. Then no plugin needs the task before the write."""
    hooks = hive.plugins.hook
    return (not hooks.hivelite_check_evidence.get_hookimpls()
            and [i.plugin_name for i in hooks.hivelite_merge_threshold.get_hookimpls()]
            == [THRESHOLD])


def _submit_by_policy(hive: HiveBase, agent: Caller, ref: str | int, *, lease_id: str,
                      token: int, summary: str, evidence: list[Any], provenance: str,
                      outcome: str, drafted: str | None, refused: Refusals) -> Receipt | None:
    """A submission the store's policy alone judges (:func:`_by_policy_alone`), with no
    receipts and no usage, as its statements: the fence, the result, the threshold the
    policy sets for the task's project (read under the lock, as the built-in plugin would
    read it) and the moves, with no read before the lock. None when the result does not
    validate or the statements take nothing: the full submission then runs, and refuses
    in its own order (the fence first); a refusal of the statements goes to ``refused``,
    for its full run to explain."""
    try:
        result = Result.model_validate({
            "summary": summary, "evidence": evidence, "provenance": provenance,
            "returned_by": agent.name, "returned_at": "1970-01-01T00:00:00.000Z"})
    except ValidationError:  # (its time is the write's, set under the lock)
        return None
    kept = result.model_dump_json(exclude_none=True, exclude={"returned_at"})
    sealed = _sealed(token, drafted, None)
    instance = agent.instance or ""

    def statement(tx: Writer, now: datetime, at: str) -> Receipt | None:
        held = tx.held(ref, lease_id=lease_id, token=token, holder=agent.name,
                       instance=instance, at=at)
        if held is None:
            return None
        threshold, decided_by = (store_policy(tx.policy()).threshold_for(held.project)
                                 if outcome == "completed" else (None, None))
        return _returned(tx, held, agent.name, instance, at, kept=kept, outcome=outcome,
                         threshold=threshold, drafted=drafted, receipts=None, sealed=sealed,
                         judged=_judged(outcome, summary, [], threshold, decided_by))

    return hive._statement(agent, "submit", statement, about=ref, refused=refused)


def _returned(tx: Writer, held: Held, holder: str, instance: str, at: str, *, kept: str,
              outcome: str, threshold: int | None, drafted: str | None,
              receipts: str | None, sealed: dict[str, Any],
              judged: tuple[State, str, dict[str, Any]]) -> Receipt:
    """A submission's writes under the fence ``held``: the result, then its one journal row
    (from the holder's state through ``verifying``, ending the claim, to ``judged``'s
    target: the seed moves 7, 12 and 13, 14 or 15); the receipt."""
    target, reason, detail = judged
    tx.put_result(held.number, returned_at(kept, at), worker=holder, instance=instance,
                  session=held.session, outcome=outcome, threshold=threshold, draft=drafted,
                  receipts=receipts)
    tx.move(held.number, held.state, target.value, at=at, actor=holder, reason=reason,
            detail=submission_detail(guard.check_passage(held.state, target), sealed,
                                     detail), end_lease=True)
    return receipt(held.number, held.id, target, at)


def _judged(outcome: str, summary: str, problems: list[dict[str, str]],
            threshold: int | None, decided_by: str | None
            ) -> tuple[State, str, dict[str, Any]]:
    """Where a submission goes from ``verifying``, why, and the journal's detail: back to
    ``routed`` when it failed or its evidence was refused, else ``completed`` (threshold 0)
    or ``approval``. Decided before the write: the plugins were asked before the lock."""
    if outcome == "failed":
        return State.routed, f"attempt failed: {summary[:200]}", {"outcome": "failed"}
    if problems:
        return (State.routed,
                "evidence refused: " + "; ".join(p["problem"] for p in problems)[:400],
                {"problems": problems})
    if threshold == 0:
        return (State.completed, "no confirmation needed (threshold 0)",
                {"threshold": 0, "decided_by": decided_by})
    return (State.approval, f"awaiting {threshold} independent confirmation(s) or sign-off"
            f" (threshold set by {decided_by})",
            {"threshold": threshold, "decided_by": decided_by})


def returned_at(kept: str, at: str) -> str:
    """A result's JSON (``model_dump_json(exclude_none=True)`` without ``returned_at``)
    with its time, as the whole model would dump it: ``returned_at`` is its last field."""
    assert kept.endswith("}") and kept != "{}"
    return f'{kept[:-1]},"returned_at":"{at}"}}'


def _split_receipts(evidence: Sequence[Evidence | Mapping[str, Any]]
                    ) -> tuple[list[Any], list[EvidenceReceipt | None]]:
    """Each piece of evidence as the seed has it, and the receipt it carried (if any), or
    ``422 invalid_receipt`` naming the piece."""
    plain: list[Any] = []
    receipts: list[EvidenceReceipt | None] = []
    for index, item in enumerate(evidence):
        if isinstance(item, Evidence):
            plain.append(item.model_dump(exclude_none=True))
            receipts.append(None)
            continue
        if isinstance(item, Mapping) and "receipt" in item:
            item = dict(item)
            given = item.pop("receipt")
            try:
                receipts.append(None if given is None else EvidenceReceipt.model_validate(given))
            except ValidationError as exc:
                error = invalid(exc, "receipt")
                error.reason = "invalid_receipt"
                error.extra["field"] = f"evidence.{index}.receipt"
                raise error from None
        else:
            receipts.append(None)
        plain.append(item)
    return plain, receipts


def _checked(store_id: str | None, result: Result,
             receipts: Sequence[EvidenceReceipt | None]) -> str | None:
    """The receipts as the store keeps them (JSON, one entry per piece of evidence, null
    where none), each checked here: ``verified`` is hivelite's word alone."""
    if not any(receipts):
        return None
    kept: list[dict[str, Any] | None] = []
    for item, given in zip(result.evidence, receipts, strict=True):
        if given is None:
            kept.append(None)
            continue
        secret = (load_signer(store_id, given.signer)
                  if given.signer is not None and store_id else None)
        why = check_receipt(given.digest, item.content, given.signer, given.signature,
                            secret)
        kept.append({"digest": given.digest, "signer": given.signer,
                     "verified": why is None, "why": why})
    return json.dumps(kept, separators=(",", ":"))


def _draft(draft: Draft | Mapping[str, Any] | None, outcome: str) -> str | None:
    """The draft as the store keeps it (compact JSON), or ``422 invalid_draft``."""
    if draft is None:
        return None
    if outcome == "failed":
        raise InvalidInput("invalid_draft", "a failed result brings no draft (seed 004)",
                           field="draft")
    try:
        checked = draft if isinstance(draft, Draft) else Draft.model_validate(draft)
    except ValidationError as exc:
        error = invalid(exc, "draft")
        error.extra["field"] = ".".join(["draft", *filter(None, [error.extra.get("field")])])
        raise error from None
    return checked.model_dump_json(exclude_none=True)


# -- decisions -----------------------------------------------------------


@idempotent
def verify(hive: HiveBase, caller: Caller, ref: str | int, *,
           verdict: Literal["accept", "reject"] = "accept",
           reason: str | None = None, request_id: str | None = None) -> Receipt:
    """An independent agent's verdict: enough counted accepts complete the task, a reject
    sends it back to ``routed`` (a reason is required)."""
    agent = require_agent(hive._caller(caller, "verify"), "verify")
    if verdict not in ("accept", "reject"):
        raise InvalidInput("invalid_verdict", f"verdict is accept or reject, not"
                           f" {verdict!r}", field="verdict")
    reason = guard.reason_fits(reason, required=verdict == "reject")
    instance = str(agent.instance)
    asking = bool(hive.plugins.hook.hivelite_count_confirmation.get_hookimpls())

    def ask() -> _Counted | None:
        """The plugins' word on this verdict, from a snapshot (None: nobody to ask, or no
        verdict the store's mode would count: the write decides)."""
        if not asking:
            return None
        with hive.store.read() as reader:
            found = reader.task_with_bodies(ref)
            meta = None if found is None else reader.result_meta(found[0].number)
            if found is None or meta is None or found[0].state != State.approval.value:
                return None
            given = reader.confirmations(found[0].number, meta.version)
            mode = store_policy(reader.policy()).mode
        if (agent.name == meta.worker or instance == normal_instance(meta.instance)
                or why_not_counted(mode, hive.owner, meta.worker, agent.name, instance,
                                   given) is not None):
            return None
        confirmation = Confirmation(reviewer=agent.name, instance=instance,
                                    session=agent.session, verdict=verdict, reason=reason,
                                    at=format_ts(hive.clock()))
        return _Counted(meta.version, _uncounted_by_plugin(
            hive, task_of(found[0], found[1], hive._packets), confirmation))

    def write(asked: _Counted | None) -> Receipt:
        return hive._verb(agent, "verify", lambda tx, now, at: statement(tx, at, asked),
                          lambda unit: body(unit, asked), about=ref)

    def body(unit: Unit, asked: _Counted | None) -> Receipt:
        row = unit.task(ref)
        guard.awaiting_decision(row)
        meta = unit.tx.result_meta(row.number)
        assert meta is not None  # the triggers keep a result from verifying on
        if agent.name == meta.worker:
            raise ForbiddenRight("self_verify", f"{agent.name} returned this result;"
                                 " another agent must verify it")
        if instance == normal_instance(meta.instance):  # "Laptop." is the laptop
            raise InvalidState("reviewer_not_independent",
                               f"{instance} is the instance the result came from;"
                               " a confirmation must come from another instance")
        given = unit.tx.confirmations(row.number, meta.version)
        if any(c.reviewer == agent.name for c in given):
            raise InvalidState("already_verified",
                               f"{agent.name} already gave a verdict on this result")
        # A verdict that does not count (a stranger's in a personal store, a second
        # from one instance) neither completes nor sends back: it is kept, with why.
        why = why_not_counted(unit.policy().mode, hive.owner, meta.worker, agent.name,
                              instance, given)
        if why is None and asking:  # the plugins' word, asked about this very result
            if asked is None or asked.version != meta.version:
                raise _AskAgain
            why = asked.why
        unit.journaled = True
        state = _recorded(unit.tx, unit.at, row, meta.version, meta.threshold, given,
                          ConfirmationRow(reviewer=agent.name, instance=instance,
                                          session=agent.session, verdict=verdict,
                                          reason=reason, at=unit.at, counted=why is None,
                                          why=why))
        return unit.receipt(updated(row, state=state.value, updated_at=unit.at))

    def statement(tx: Writer, at: str, asked: _Counted | None) -> Receipt | None:
        """The verdict as its statement: counted, or kept uncounted with why when the
        store's mode does not count it (a stranger's, a second from one instance or owner)
        or a plugin said so. The rules refuse a counted verdict the mode does not count,
        the worker's own, one from its instance, a second one, or one on a task not in
        approval: the full run then says which."""
        row = tx.lock_task(ref)
        meta = None if row is None else tx.result_meta(row.number)
        if row is None or meta is None:
            return None
        given = tx.confirmations(row.number, meta.version)
        why = None
        if agent.name != meta.worker and instance != normal_instance(meta.instance):
            why = why_not_counted(store_policy(tx.policy()).mode, hive.owner, meta.worker,
                                  agent.name, instance, given)  # (else refused: in words)
        if why is None and asking:  # the plugins' word, asked about this very result
            if asked is None or asked.version != meta.version:
                return None  # (the full run asks again)
            why = asked.why
        state = _recorded(tx, at, row, meta.version, meta.threshold, given, ConfirmationRow(
            reviewer=agent.name, instance=instance, session=agent.session, verdict=verdict,
            reason=reason, at=at, counted=why is None, why=why))
        return receipt(row.number, row.id, state, at)

    return _asking("verify", ask, write)


def _recorded(tx: Writer, at: str, row: TaskRow, version: int, threshold: int | None,
              given: Sequence[ConfirmationRow], verdict: ConfirmationRow) -> State:
    """A verdict's writes: the confirmation, then what it makes of the task (a counted
    reject sends it back, enough counted accepts complete it, else an event says it was
    given); the state the task is left in."""
    tx.add_confirmation(row.number, version, verdict)
    accepts = sum(1 for c in given if c.verdict == "accept" and c.counted)
    accepts += int(verdict.counted and verdict.verdict == "accept")
    needed = threshold or 1
    if verdict.verdict == "reject" and verdict.counted:
        tx.move(row.number, row.state, State.routed.value, at=at, actor=verdict.reviewer,
                reason=verdict.reason, detail={"verdict": "reject"})
        return State.routed
    if accepts >= needed:
        tx.move(row.number, row.state, State.completed.value, at=at, actor=verdict.reviewer,
                reason=f"threshold met: {accepts} of {needed} confirmation(s)",
                detail={"decided_by": "threshold", "confirmations": accepts})
        return State.completed
    tx.record_event(row.number, at=at, actor=verdict.reviewer, state=row.state,
                    reason=("confirmed" if verdict.verdict == "accept" else "rejected")
                    if verdict.counted else "not_counted",
                    detail={"confirmations": accepts, "threshold": needed}
                    | ({"why": verdict.why} if verdict.why else {}))
    return State(row.state)


@dataclass(frozen=True)
class _Counted:
    """What the plugins said of a verdict before the lock: about which version of the
    result, and why one of them does not count it (None: it counts)."""

    version: int
    why: str | None


def _owner_decision(hive: HiveBase, caller: Caller, ref: str | int, target: State, verb: str,
                    reason: str | None) -> Receipt:
    name = verb.replace(" ", "_")  # the verb table's name; the journal keeps the words
    caller = hive._caller(caller, name)
    who = require_owner(caller, hive.owner, verb)
    reason = guard.reason_fits(reason, required=target is State.routed)
    def body(unit: Unit) -> Receipt:
        row = unit.task(ref)
        guard.awaiting_decision(row)
        row = unit.move(row, target, actor=who, reason=reason or verb,
                        detail={"decided_by": "person"})
        return unit.receipt(row)

    return hive._moved_by_owner(caller, name, ref, target, reason=reason or verb,
                                explain=body,
                                accepts=lambda row: row.state == State.approval.value,
                                detail={"decided_by": "person"})


@idempotent
def sign_off(hive: HiveBase, caller: Caller, ref: str | int, *,
             reason: str | None = None, request_id: str | None = None) -> Receipt:
    """The owner accepts the result: approval -> completed, decided by a person."""
    return _owner_decision(hive, caller, ref, State.completed, "sign off", reason)


@idempotent
def decline(hive: HiveBase, caller: Caller, ref: str | int, *, reason: str,
            request_id: str | None = None) -> Receipt:
    """The owner sends the result back: approval -> routed (a reason is required)."""
    return _owner_decision(hive, caller, ref, State.routed, "decline", reason)

# -- amend ---------------------------------------------------------------


@idempotent
def amend(hive: HiveBase, caller: Caller, ref: str | int, *, summary: str | None = None,
          evidence: Sequence[Evidence | Mapping[str, Any]] | None = None,
          merge_commit: str | None = None, request_id: str | None = None) -> Receipt:
    """Correct a result awaiting a decision (its submitter; confirmations are dismissed),
    or record the merge of a completed one (its submitter or the owner, once; never a
    reviewer)."""
    caller = hive._caller(caller, "amend")
    who = caller.name
    if merge_commit is not None:
        try:
            _COMMIT.validate_python(merge_commit)
        except ValidationError:
            raise InvalidInput("invalid_commit", "merge_commit is 7-64 lowercase hex"
                               " characters", field="merge_commit") from None

    def ask() -> _Amended | None:
        """The new result and what the plugins say of its evidence, from a snapshot
        (None: nothing to replace, or not the caller's to amend: the write says why)."""
        if merge_commit is not None or (summary is None and evidence is None):
            return None
        with hive.store.read() as reader:
            found = reader.task_with_bodies(ref)
            meta = None if found is None else reader.result_meta(found[0].number)
            if (found is None or meta is None or found[0].state != State.approval.value
                    or caller.is_owner or who != meta.worker):
                return None
            kept = reader.receipts(found[0].number) if evidence is None else None
            store_id = reader.meta("store_id") if evidence is not None else None
        try:
            return _Amended(meta.version, *_amended(
                hive, found[0], found[1], kept, store_id, summary, evidence))
        except HiveliteError as error:  # said by the write, after its own checks
            return _Amended(meta.version, "", None, [], error)

    def write(asked: _Amended | None) -> Receipt:
        return hive._verb(caller, "amend", lambda tx, now, at: statement(tx, at, asked),
                          lambda unit: body(unit, asked), about=ref)

    def statement(tx: Writer, at: str, asked: _Amended | None) -> Receipt | None:
        """The worker's amendment worked out before the lock, as its statement, when it is
        sound (no refusal of its own). The rules take a result awaiting a decision changed
        only by its worker's journaled amend naming the version it makes: an amendment
        worked out on a result replaced meanwhile is refused, and the full run asks
        again. A merge record alone is :func:`merged`."""
        if merge_commit is not None and summary is None and evidence is None:
            return merged(tx, at)
        if asked is None or asked.error is not None or asked.problems:
            return None
        row = tx.lock_task(ref)
        if row is None:
            return None
        _replaced(tx, at, who, row, asked)
        return receipt(row.number, row.id, row.state, at)

    def merged(tx: Writer, at: str) -> Receipt | None:
        """The merge record as its statement: the journal row naming the commit, written
        as one on a completed task (a task with no result takes no record, and no rule of
        the record's would see it), then the record. The rules take it only on a
        completed task, from its worker or the owner, right after its journal row, once;
        a reviewer who confirmed the result is no worker, so the full run names it."""
        row = tx.lock_task(ref)
        if row is None:
            return None
        assert merge_commit is not None
        tx.record_event(row.number, at=at, actor=who, state=State.completed.value,
                        reason="merge_recorded", detail={"merge_commit": merge_commit})
        tx.record_merge(row.number, merge_commit, who)
        return receipt(row.number, row.id, State.completed, at)

    def body(unit: Unit, asked: _Amended | None) -> Receipt:
        row = unit.task(ref)
        meta = unit.tx.result_meta(row.number)
        state = State(row.state)
        if meta is None or state not in (State.approval, State.completed):
            raise InvalidState("not_amendable", f"task {row.number} is {state.value};"
                               " only a result awaiting a decision or a completed one"
                               " is amended")
        if state is State.approval:
            if merge_commit is not None:
                raise InvalidState("not_amendable", "a merge record needs a completed task")
            if caller.is_owner or who != meta.worker:
                raise ForbiddenRight("not_submitter",
                                     f"only {meta.worker}, who submitted it, may amend")
            if summary is None and evidence is None:
                raise InvalidInput("nothing_to_amend", "give a new summary or new evidence",
                                   field="summary")
            if asked is None or asked.version != meta.version:
                raise _AskAgain  # (the plugins were asked about another result)
            _replace_result(unit, row, asked)
            row = updated(row, updated_at=unit.at)
        else:
            if summary is not None or evidence is not None:
                raise InvalidState("not_amendable", "a completed result takes only its"
                                   " merge record")
            if merge_commit is None:
                raise InvalidInput("merge_commit_required", "give the merge commit",
                                   field="merge_commit")
            reviewers = {c.reviewer for c in unit.tx.confirmations(row.number, meta.version)
                         if c.verdict == "accept"}
            if not caller.is_owner and who in reviewers:
                raise ForbiddenRight("not_merger", f"{who} confirmed this result; a"
                                     " reviewer does not record its merge")
            if not caller.is_owner and who != meta.worker:
                raise ForbiddenRight("not_submitter", f"only {meta.worker} or"
                                     f" {hive.owner} record the merge")
            if meta.merge_commit is not None:
                raise InvalidState("merge_recorded",
                                   f"merge {meta.merge_commit} is already recorded")
            # the journal row first: the store takes a merge record only right after it
            unit.event(row, "merge_recorded", {"merge_commit": merge_commit})
            unit.tx.record_merge(row.number, merge_commit, who)
        return unit.receipt(row)

    return _asking("amend", ask, write)


@dataclass(frozen=True)
class _Amended:
    """A result awaiting a decision as its amendment makes it, worked out before the lock:
    which version it replaces, the new result's JSON and receipts, and what the plugins
    said of its evidence (or the error the amendment meets, said after the write's own
    checks)."""

    version: int
    result: str
    receipts: str | None
    problems: list[dict[str, str]]
    error: HiveliteError | None = None


def _amended(hive: HiveBase, row: TaskRow, bodies: Bodies, kept: str | None,
             store_id: str | None, summary: str | None,
             evidence: Sequence[Evidence | Mapping[str, Any]] | None
             ) -> tuple[str, str | None, list[dict[str, str]]]:
    """The amended result (its JSON), its receipts (new evidence: new receipts, checked
    here; else those ``kept``) and what the plugins say of its evidence."""
    data = json.loads(bodies.result or "{}")
    if summary is not None:
        data["summary"] = summary
    given: list[EvidenceReceipt | None] | None = None
    if evidence is not None:
        data["evidence"], given = _split_receipts(evidence)
    try:
        result = Result.model_validate(data)
    except ValidationError as exc:
        raise invalid(exc, "result") from None
    receipts = _checked(store_id, result, given) if given is not None else kept
    problems = _evidence_problems(hive, task_of(row, bodies, hive._packets), result,
                                  evidence_views(result, receipts))
    return result.model_dump_json(exclude_none=True), receipts, problems


def _replace_result(unit: Unit, row: TaskRow, amended: _Amended) -> None:
    """Write the amendment worked out before the lock (or refuse it, as it found)."""
    if amended.error is not None:
        raise amended.error
    if amended.problems:
        raise InvalidInput("evidence_refused",
                           "; ".join(p["problem"] for p in amended.problems),
                           field="evidence", problems=amended.problems)
    unit.journaled = True
    _replaced(unit.tx, unit.at, unit.who, row, amended)


def _replaced(tx: Writer, at: str, who: str, row: TaskRow, amended: _Amended) -> None:
    """An amendment's writes: the journal row first, naming the new version (the store
    changes a result awaiting a decision only right after its worker's amend is
    journaled), then the result and the task's time."""
    dismissed = len(tx.confirmations(row.number, amended.version))
    tx.record_event(row.number, at=at, actor=who, state=row.state, reason="amended",
                    detail={"version": amended.version + 1, "dismissed": dismissed}
                    | ({"verified": verified_of(amended.receipts)} if amended.receipts
                       else {}))
    tx.amend_result(row.number, amended.result, amended.receipts)
    tx.touch(row.number, at)
