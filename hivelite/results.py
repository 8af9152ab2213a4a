"""Results and decisions: submit, verify, sign-off, decline, amend.

Submitting ends the claim and passes the task through ``verifying`` in the same
transaction: evidence that fails its checks sends it back to ``routed``; else
the merge threshold decides between ``completed`` (0) and ``approval`` (n >= 1).
The plugins are asked before the write lock is taken (the packet never changes
after a handoff, and the fence is checked again under the lock).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from . import guard
from .base import HiveBase, Moved, invalid
from .claims import identity, usage_fits
from .clock import format_ts
from .errors import ForbiddenRight, InvalidInput, InvalidState, PluginError
from .models import CommitHash, Confirmation, Evidence, Result, Task, TaskView
from .plugins import call_each, call_first
from .protocol import MOVES_BY_PAIR, State

_COMMIT = TypeAdapter(CommitHash)
Outcome = Literal["completed", "failed"]
MAX_THRESHOLD = 1000


class ResultVerbs(HiveBase):
    """submit, verify, sign_off, decline, amend."""

    # -- plugin questions ----------------------------------------------------

    def _evidence_problems(self, task: Task, result: Result) -> list[dict[str, str]]:
        problems = []
        for plugin, answer in call_each(self.plugins, "hivelite_check_evidence",
                                        task=task, result=result, hive=self):
            if answer is None:
                continue
            if not isinstance(answer, list | tuple) or not all(
                    isinstance(p, str) for p in answer):
                raise PluginError(plugin, "hivelite_check_evidence",
                                  f"returned {answer!r}; expected a list of strings or None")
            problems += [{"plugin": plugin, "problem": p} for p in answer]
        return problems

    def _threshold(self, task: Task) -> tuple[int, str]:
        answer = call_first(self.plugins, "hivelite_merge_threshold", task=task, hive=self)
        if answer is None:
            return 1, "default"
        plugin, value = answer
        if isinstance(value, bool) or not isinstance(value, int) or not (
                0 <= value <= MAX_THRESHOLD):
            raise PluginError(plugin, "hivelite_merge_threshold",
                              f"returned {value!r}; expected an integer 0..{MAX_THRESHOLD}")
        return value, plugin

    def _counts(self, task: Task, confirmation: Confirmation) -> bool:
        answer = call_first(self.plugins, "hivelite_count_confirmation", task=task,
                            confirmation=confirmation, hive=self)
        if answer is None:
            return True
        plugin, value = answer
        if not isinstance(value, bool):
            raise PluginError(plugin, "hivelite_count_confirmation",
                              f"returned {value!r}; expected True, False or None")
        return value

    # -- submit --------------------------------------------------------------

    def submit(
        self, ref: str | int, *, lease_id: str, token: int, summary: str,
        evidence: list[Evidence | dict[str, Any]],
        provenance: str = "agent_generated", outcome: Outcome = "completed",
        tokens: int | None = None, usd_micros: int | None = None, agent: str | None = None,
    ) -> TaskView:
        """The holder returns a result with evidence; the claim ends and the task is judged.

        ``outcome="failed"`` records the failure and returns the task to ``routed``.
        """
        if outcome not in ("completed", "failed"):
            raise InvalidInput("invalid_outcome", f"outcome is completed or failed, not"
                               f" {outcome!r}", field="outcome")
        usage_fits(tokens, usd_micros)
        at = format_ts(self._now())
        row = self._row(ref)  # the fence and the plugins' task, before the write lock
        holder = self._fence(row, lease_id, token, agent, at)
        task = self._task(row)
        try:
            result = Result.model_validate({
                "summary": summary,
                "evidence": [e.model_dump(exclude_none=True) if isinstance(e, Evidence) else e
                             for e in evidence],
                "provenance": provenance, "returned_by": holder, "returned_at": at})
        except ValidationError as exc:
            raise invalid(exc, "result") from None
        problems: list[dict[str, str]] = []
        threshold, decided_by = None, None
        if outcome == "completed":
            problems = self._evidence_problems(task, result)
            if not problems:
                threshold, decided_by = self._threshold(task)
        with self.store.write():
            at = format_ts(self._now())  # the plugins took time: fence and stamp at the lock
            row = self._row(ref)
            holder = self._fence(row, lease_id, token, agent, at)
            moved = self._sweep(at)
            body = result.model_copy(update={"returned_at": at}).model_dump_json(
                exclude_none=True)
            self.store.put_result(row.number, body, worker=holder,
                                  instance=row.lease_instance or "",
                                  session=row.lease_session, outcome=outcome,
                                  threshold=threshold)
            if tokens is not None or usd_micros is not None:
                self.store.add_update(row.number, at=at, actor=holder,
                                      summary=f"result returned ({outcome})", tokens=tokens,
                                      usd_micros=usd_micros)
            if row.state == State.accepted.value:
                self.store.move(row.number, State.working.value, at=at, actor=holder,
                                reason="submit")
                moved.append((row.number, MOVES_BY_PAIR[(State.accepted, State.working)],
                               holder))
            self.store.move(row.number, State.verifying.value, at=at, actor=holder,
                            reason=f"result returned ({outcome})", end_lease=True,
                            detail={"fencing_token": token})
            moved.append((row.number, MOVES_BY_PAIR[(State.working, State.verifying)], holder))
            if outcome == "failed":
                target, reason = State.routed, f"attempt failed: {summary[:200]}"
                detail: dict[str, Any] = {"outcome": "failed"}
            elif problems:
                target = State.routed
                reason = "evidence refused: " + "; ".join(p["problem"] for p in problems)[:400]
                detail = {"problems": problems}
            elif threshold == 0:
                target, reason = State.completed, "no confirmation needed (threshold 0)"
                detail = {"threshold": 0, "decided_by": decided_by}
            else:
                target = State.approval
                reason = (f"awaiting {threshold} independent confirmation(s) or sign-off"
                          f" (threshold set by {decided_by})")
                detail = {"threshold": threshold, "decided_by": decided_by}
            self.store.move(row.number, target.value, at=at, actor="guard", reason=reason,
                            detail=detail)
            moved.append((row.number, MOVES_BY_PAIR[(State.verifying, target)], "guard"))
        self._notify(moved)
        return self.get(row.number)

    # -- decisions -----------------------------------------------------------

    def verify(self, ref: str | int, agent: str, *, instance: str, session: str | None = None,
               verdict: Literal["accept", "reject"] = "accept",
               reason: str | None = None) -> TaskView:
        """An independent agent's verdict: enough counted accepts complete the task, a reject
        sends it back to ``routed`` (a reason is required)."""
        agent, instance, session = identity(agent, instance, session)
        if verdict not in ("accept", "reject"):
            raise InvalidInput("invalid_verdict", f"verdict is accept or reject, not"
                               f" {verdict!r}", field="verdict")
        reason = guard.reason_fits(reason, required=verdict == "reject")
        with self.store.write():
            at = format_ts(self._now())  # under the lock: fence and journal agree
            moved = self._sweep(at)
            row = self._row(ref)
            guard.awaiting_decision(row)
            meta = self.store.result_meta(row.number)
            assert meta is not None  # the triggers keep a result from verifying on
            if agent == meta.worker:
                raise ForbiddenRight("self_verify", f"{agent} returned this result; another"
                                     " agent must verify it")
            if instance.casefold() == meta.instance.casefold():  # "Laptop" is the laptop
                raise InvalidState("reviewer_not_independent",
                                   f"{instance} is the instance the result came from;"
                                   " a confirmation must come from another instance")
            given = self.store.confirmations(row.number, meta.version)
            if any(c[0] == agent for c in given):
                raise InvalidState("already_verified",
                                   f"{agent} already gave a verdict on this result")
            confirmation = Confirmation(reviewer=agent, instance=instance, session=session,
                                        verdict=verdict, reason=reason, at=at)
            # A verdict the policy would not count (an outsider's) neither completes nor
            # sends back: it is recorded and journaled, nothing more.
            counted = self._counts(self._task(row), confirmation)
            self.store.add_confirmation(row.number, meta.version, reviewer=agent,
                                        instance=instance, session=session, verdict=verdict,
                                        reason=reason, at=at, counted=counted)
            accepts = sum(1 for c in given if c[3] == "accept" and c[6])
            accepts += int(counted and verdict == "accept")
            threshold = meta.threshold or 1
            if verdict == "reject" and counted:
                self.store.move(row.number, State.routed.value, at=at, actor=agent,
                                reason=reason, detail={"verdict": "reject"})
                moved.append((row.number, MOVES_BY_PAIR[(State.approval, State.routed)], agent))
            elif accepts >= threshold:
                self.store.move(row.number, State.completed.value, at=at, actor=agent,
                                reason=f"threshold met: {accepts} of {threshold}"
                                " confirmation(s)",
                                detail={"decided_by": "threshold", "confirmations": accepts})
                moved.append((row.number, MOVES_BY_PAIR[(State.approval, State.completed)],
                               agent))
            else:
                self.store.record_event(row.number, at=at, actor=agent, state=row.state,
                                        reason=("confirmed" if verdict == "accept" else
                                                "rejected") if counted else "not_counted",
                                        detail={"confirmations": accepts,
                                                "threshold": threshold})
        self._notify(moved)
        return self.get(row.number)

    def _person_decision(self, ref: str | int, target: State, verb: str, actor: str | None,
                         reason: str | None) -> TaskView:
        who = guard.person(self.owner, actor, verb)
        reason = guard.reason_fits(reason, required=target is State.routed)
        with self.store.write():
            at = format_ts(self._now())  # under the lock: fence and journal agree
            moved: list[Moved] = self._sweep(at)
            row = self._row(ref)
            guard.awaiting_decision(row)
            self.store.move(row.number, target.value, at=at, actor=who, reason=reason or verb,
                            detail={"decided_by": "person"})
        moved.append((row.number, MOVES_BY_PAIR[(State.approval, target)], who))
        self._notify(moved)
        return self.get(row.number)

    def sign_off(self, ref: str | int, *, actor: str | None = None,
                 reason: str | None = None) -> TaskView:
        """The owner accepts the result: approval -> completed, decided by a person."""
        return self._person_decision(ref, State.completed, "sign off", actor, reason)

    def decline(self, ref: str | int, *, reason: str, actor: str | None = None) -> TaskView:
        """The owner sends the result back: approval -> routed (a reason is required)."""
        return self._person_decision(ref, State.routed, "decline", actor, reason)

    # -- amend ---------------------------------------------------------------

    def amend(self, ref: str | int, *, actor: str | None = None, summary: str | None = None,
              evidence: list[Evidence | dict[str, Any]] | None = None,
              merge_commit: str | None = None) -> TaskView:
        """Correct a result awaiting a decision (its submitter; confirmations are dismissed),
        or record the merge of a completed one (its submitter or the owner, once)."""
        who = actor or self.owner
        if merge_commit is not None:
            try:
                _COMMIT.validate_python(merge_commit)
            except ValidationError:
                raise InvalidInput("invalid_commit", "merge_commit is 7-64 lowercase hex"
                                   " characters", field="merge_commit") from None
        with self.store.write():
            at = format_ts(self._now())  # under the lock: fence and journal agree
            moved = self._sweep(at)
            row = self._row(ref)
            meta = self.store.result_meta(row.number)
            state = State(row.state)
            if meta is None or state not in (State.approval, State.completed):
                raise InvalidState("not_amendable", f"task {row.number} is {state.value}; only a"
                                   " result awaiting a decision or a completed one is amended")
            if state is State.approval:
                if merge_commit is not None:
                    raise InvalidState("not_amendable", "a merge record needs a completed task")
                if who != meta.worker:
                    raise ForbiddenRight("not_submitter",
                                         f"only {meta.worker}, who submitted it, may amend")
                self._replace_result(row.number, meta.version, summary, evidence, who, at)
            else:
                if summary is not None or evidence is not None:
                    raise InvalidState("not_amendable", "a completed result takes only its"
                                       " merge record")
                if merge_commit is None:
                    raise InvalidInput("merge_commit_required", "give the merge commit",
                                       field="merge_commit")
                reviewers = {c[0] for c in self.store.confirmations(row.number, meta.version)
                             if c[3] == "accept"}
                if who in reviewers:
                    raise ForbiddenRight("not_merger", f"{who} confirmed this result; a reviewer"
                                         " does not record its merge")
                if who not in (meta.worker, self.owner):
                    raise ForbiddenRight("not_submitter", f"only {meta.worker} or {self.owner}"
                                         " record the merge")
                if meta.merge_commit is not None:
                    raise InvalidState("merge_recorded",
                                       f"merge {meta.merge_commit} is already recorded")
                self.store.record_merge(row.number, merge_commit, who)
                self.store.record_event(row.number, at=at, actor=who, state=row.state,
                                        reason="merge_recorded",
                                        detail={"merge_commit": merge_commit})
        self._notify(moved)
        return self.get(row.number)

    def _replace_result(self, number: int, version: int, summary: str | None,
                        evidence: list[Evidence | dict[str, Any]] | None, who: str,
                        at: str) -> None:
        if summary is None and evidence is None:
            raise InvalidInput("nothing_to_amend", "give a new summary or new evidence",
                               field="summary")
        _, current, _ = self.store.bodies(number)
        data = json.loads(current or "{}")
        if summary is not None:
            data["summary"] = summary
        if evidence is not None:
            data["evidence"] = [e.model_dump(exclude_none=True) if isinstance(e, Evidence)
                                else e for e in evidence]
        try:
            result = Result.model_validate(data)
        except ValidationError as exc:
            raise invalid(exc, "result") from None
        task = self._task(guard.found(self.store.task(number), number))
        problems = self._evidence_problems(task, result)
        if problems:
            raise InvalidInput("evidence_refused", "; ".join(p["problem"] for p in problems),
                               field="evidence", problems=problems)
        dismissed = len(self.store.confirmations(number, version))
        new_version = self.store.amend_result(number, result.model_dump_json(exclude_none=True))
        self.store.touch(number, at)
        self.store.record_event(number, at=at, actor=who, state=State.approval.value,
                                reason="amended",
                                detail={"version": new_version, "dismissed": dismissed})
