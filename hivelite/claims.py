"""Working under a claim: claim, resume, renew, release, checkpoint, update, pause.

A claim is a lease of 5-15 minutes with a lease id and a fencing token kept on
the task row; every holder write carries both, so a holder whose lease ran
out, or was replaced, is refused with ``stale_claim``.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import TypeAdapter, ValidationError

from . import guard
from .base import HiveBase, Moved, invalid
from .clock import format_ts
from .errors import InvalidInput, InvalidState
from .ids import new_lease_id
from .models import AgentName, Checkpoint, InstanceName, Lease, TaskView, UpdateSummary
from .protocol import MOVES_BY_PAIR, State, WaitingOn
from .store import TaskRow

MIN_LEASE_MINUTES, DEFAULT_LEASE_MINUTES, MAX_LEASE_MINUTES = 5, 10, 15
_AGENT = TypeAdapter(AgentName)
_INSTANCE = TypeAdapter(InstanceName)
_SUMMARY = TypeAdapter(UpdateSummary)


def identity(agent: str, instance: str | None, session: str | None) -> tuple[str, str, str | None]:
    """A valid ``owner/agent``, instance and optional session, or ``422`` naming which."""
    try:
        _AGENT.validate_python(agent)
    except ValidationError as exc:
        raise InvalidInput("invalid_agent", f"agent {agent!r} is not owner/agent: "
                           f"{exc.errors()[0]['msg']}", field="agent") from None
    for field, value in (("instance", instance), ("session", session)):
        if value is None and field == "session":
            continue
        try:
            _INSTANCE.validate_python(value)
        except ValidationError:
            raise InvalidInput(f"invalid_{field}", f"{field} {value!r} must be 1-64 of"
                               " letters, digits, '.', '_' or '-'", field=field) from None
    return agent, str(instance), session


def lease_minutes(minutes: int) -> int:
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not (
        MIN_LEASE_MINUTES <= minutes <= MAX_LEASE_MINUTES
    ):
        raise InvalidInput("lease_minutes", f"a lease lasts {MIN_LEASE_MINUTES} to"
                           f" {MAX_LEASE_MINUTES} minutes, not {minutes!r}", field="minutes")
    return minutes


def usage_fits(tokens: int | None, usd_micros: int | None) -> None:
    for field, value in (("tokens", tokens), ("usd_micros", usd_micros)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 0):
            raise InvalidInput("invalid_usage", f"{field} must be a non-negative integer",
                               field=field)


class ClaimVerbs(HiveBase):
    """claim, resume, renew, release, checkpoint, update, pause."""

    def _lease(self, row: TaskRow, state: State, lease_id: str, token: int, holder: str,
               instance: str, session: str | None, expires: str) -> Lease:
        return Lease(number=row.number, id=row.id, state=state, lease_id=lease_id,
                     fencing_token=token, holder=holder, instance=instance, session=session,
                     expires_at=expires)

    def _start(self, ref: str | int, agent: str, instance: str | None, session: str | None,
               minutes: int, *, resume: bool) -> Lease:
        agent, instance, session = identity(agent, instance, session)
        lease_minutes(minutes)
        lease_id = new_lease_id()
        target = State.working if resume else State.accepted
        with self.store.write():
            now = self._now()  # under the lock: the lease starts when the claim lands
            at, expires = format_ts(now), format_ts(now + timedelta(minutes=minutes))
            moved = self._sweep(at)
            row = self._row(ref)
            guard.claimable(row, agent, resume=resume)
            if not resume and row.depends:
                blocked = self.store.dependencies_open(row.number)
                if blocked:
                    raise InvalidState("blocked", f"task {row.number} waits on tasks not yet"
                                       f" completed: {', '.join(blocked)}")
            token = row.lease_token + 1
            self.store.start_lease(
                row.number, target.value, lease_id=lease_id, token=token, holder=agent,
                instance=instance, session=session, expires=expires, at=at,
                reason="resumed" if resume else "claimed",
                detail={"fencing_token": token, "instance": instance,
                        "session": session, "expires_at": expires},
            )
        moved.append((row.number, MOVES_BY_PAIR[(State(row.state), target)], agent))
        self._notify(moved)
        return self._lease(row, target, lease_id, token, agent, instance, session, expires)

    def claim(self, ref: str | int, agent: str, *, instance: str, session: str | None = None,
              minutes: int = DEFAULT_LEASE_MINUTES) -> Lease:
        """The assignee takes a routed task under a lease: routed -> accepted.

        Refused with ``task_claimed`` while another claim holds it, ``task_not_open``
        unless routed, ``blocked`` until every ``depends_on`` task is completed.
        """
        return self._start(ref, agent, instance, session, minutes, resume=False)

    def resume(self, ref: str | int, agent: str, *, instance: str, session: str | None = None,
               minutes: int = DEFAULT_LEASE_MINUTES) -> Lease:
        """The answer arrived: the assignee claims a paused task again, with a new token."""
        return self._start(ref, agent, instance, session, minutes, resume=True)

    def renew(self, ref: str | int, *, lease_id: str, token: int, agent: str | None = None,
              minutes: int = DEFAULT_LEASE_MINUTES) -> Lease:
        """Extend the live claim; lease id and token stay the same."""
        lease_minutes(minutes)
        with self.store.write():
            now = self._now()  # under the lock: the fence and the new expiry agree
            at, expires = format_ts(now), format_ts(now + timedelta(minutes=minutes))
            row = self._row(ref)
            holder = self._fence(row, lease_id, token, agent, at)
            moved = self._sweep(at)
            self.store.extend_lease(row.number, expires)
        self._notify(moved)
        return self._lease(row, State(row.state), lease_id, token, holder,
                           row.lease_instance or "", row.lease_session, expires)

    def release(self, ref: str | int, *, lease_id: str | None = None, token: int | None = None,
                agent: str | None = None, actor: str | None = None,
                reason: str | None = None) -> TaskView:
        """Give the task back (holder, with lease and token; or the owner): it is routed again."""
        reason = guard.reason_fits(reason)
        person = None if lease_id is not None else guard.person(self.owner, actor, "release")
        if token is not None and (isinstance(token, bool) or not isinstance(token, int)):
            raise InvalidInput("invalid_token", "the fencing token is an integer",
                               field="token")
        with self.store.write():
            at = format_ts(self._now())  # under the lock: fence and journal agree
            row = self._row(ref)
            if person is None:
                who = self._fence(row, lease_id or "", int(token or 0), agent, at)
            else:
                who = person
                guard.still_open(row)
                if row.lease_id is None:
                    raise InvalidState("not_claimed", f"task {row.number} has no claim")
            moved = self._sweep(at)
            row = self._row(ref)  # the owner's release may find the lease already expired
            if row.lease_id is not None:
                move = guard.check_move(row.state, row.waiting_on, State.routed)
                self.store.move(row.number, State.routed.value, at=at, actor=who,
                                reason=reason or "released", end_lease=True,
                                detail={"holder": row.lease_holder,
                                        "fencing_token": row.lease_token})
                moved.append((row.number, move, who))
        self._notify(moved)
        return self.get(row.number)

    def _start_work(self, row: TaskRow, who: str, at: str, why: str, moved: list[Moved]) -> None:
        """The holder's first progress moves accepted -> working (move 7)."""
        if row.state == State.accepted.value:
            self.store.move(row.number, State.working.value, at=at, actor=who, reason=why)
            moved.append((row.number, MOVES_BY_PAIR[(State.accepted, State.working)], who))
        else:
            self.store.touch(row.number, at)

    def checkpoint(self, ref: str | int, *, lease_id: str, token: int, progress: str,
                   decisions: list[str] | None = None, files_touched: list[str] | None = None,
                   next_steps: list[str] | None = None, open_questions: list[str] | None = None,
                   agent: str | None = None) -> TaskView:
        """Record where the work stands (``latest_checkpoint``); the first one starts the work."""
        try:
            checkpoint = Checkpoint(progress=progress, decisions=decisions or [],
                                    files_touched=files_touched or [],
                                    next_steps=next_steps or [],
                                    open_questions=open_questions or [])
        except ValidationError as exc:
            raise invalid(exc, "checkpoint") from None
        body = checkpoint.model_dump_json()
        with self.store.write():
            at = format_ts(self._now())  # under the lock: fence and journal agree
            row = self._row(ref)
            who = self._fence(row, lease_id, token, agent, at)
            moved = self._sweep(at)
            self.store.set_checkpoint(row.number, body)
            self._start_work(row, who, at, "checkpoint", moved)
        self._notify(moved)
        return self.get(row.number)

    def update(self, ref: str | int, *, lease_id: str, token: int, summary: str,
               tokens: int | None = None, usd_micros: int | None = None,
               agent: str | None = None) -> TaskView:
        """One line of progress (at most 300 characters), with optional usage."""
        try:
            _SUMMARY.validate_python(summary)
        except ValidationError as exc:
            raise InvalidInput("invalid_summary", "an update summary is one line of 1-300"
                               f" characters: {exc.errors()[0]['msg']}", field="summary") from None
        usage_fits(tokens, usd_micros)
        with self.store.write():
            at = format_ts(self._now())  # under the lock: fence and journal agree
            row = self._row(ref)
            who = self._fence(row, lease_id, token, agent, at)
            moved = self._sweep(at)
            self.store.add_update(row.number, at=at, actor=who, summary=summary,
                                  tokens=tokens, usd_micros=usd_micros)
            self._start_work(row, who, at, "update", moved)
        self._notify(moved)
        return self.get(row.number)

    def pause(self, ref: str | int, *, lease_id: str, token: int, on: str, reason: str,
              agent: str | None = None) -> TaskView:
        """Wait for an outside answer (``on`` human or agent); the claim ends."""
        if on not in (WaitingOn.human.value, WaitingOn.agent.value):
            raise InvalidInput("invalid_waiting_on", f"pause on 'human' or 'agent', not {on!r}",
                               field="on")
        reason = str(guard.reason_fits(reason, required=True))
        with self.store.write():
            at = format_ts(self._now())  # under the lock: fence and journal agree
            row = self._row(ref)
            who = self._fence(row, lease_id, token, agent, at)
            moved = self._sweep(at)
            self._start_work(row, who, at, "pause", moved)
            self.store.move(row.number, State.waiting.value, at=at, actor=who, reason=reason,
                            waiting_on=on, end_lease=True)
        moved.append((row.number, MOVES_BY_PAIR[(State.working, State.waiting)], who))
        self._notify(moved)
        return self.get(row.number)


