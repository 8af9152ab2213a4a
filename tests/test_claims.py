"""Claims: claim, renew, release, checkpoint, update, pause, resume, expiry and fencing.

DESIGN §3 (moves 6-12), §5 (leases and fencing tokens), §6 (submit ends the
claim), §8 (limits, time) and issue 3. Time moves only through the ManualClock,
and a refused call must leave every row of the store as it was. Every write
names its caller; claim, resume and renew answer a ``ClaimReceipt``, the other
writes a ``Receipt`` (``hive.get`` gives the full view).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivelite import (
    Caller,
    ClaimReceipt,
    Evidence,
    ForbiddenRight,
    Hive,
    HiveliteError,
    InvalidInput,
    InvalidState,
    ManualClock,
    Receipt,
    State,
    TaskView,
    WaitingOn,
)
from hivelite.core.models import ExpiredClaim

from . import rawsql
from .conftest import (
    CODER,
    GUEST,
    OWNER,
    PLANNER,
    REVIEWER,
    START,
    OpenHive,
    Snap,
    held_task,
    own_task,
    packet,
    refused,
)

pytestmark = pytest.mark.contract

S, W = State, WaitingOn
CODER_ON_DESKTOP = Caller.agent(CODER.name, "desktop")
"""The assignee again, from its other instance."""
EVIDENCE: list[Evidence | dict[str, Any]] = [{"kind": "test_output", "summary": "3 passed"}]


@pytest.fixture
def raw(hive: Hive, db_path: Path) -> Iterator[apsw.Connection]:
    """A second connection on the same store (opened after the hive made the schema)."""
    conn = rawsql.connect(db_path)
    yield conn
    conn.close()





def claimed(hive: Hive, *, instance: str = "laptop",
            **overrides: Any) -> tuple[int, ClaimReceipt]:
    number = own_task(hive, **overrides)
    return number, hive.claim(Caller.agent(CODER.name, instance), number)


def fence(lease: ClaimReceipt) -> dict[str, Any]:
    return {"lease_id": lease.lease_id, "token": lease.fencing_token}


def moves(hive: Hive, number: int) -> list[int]:
    """The numbered moves of a task's journal (the creation row has none)."""
    return [e.move for e in hive.history(number) if e.move is not None]


def last_seq(hive: Hive, number: int) -> int:
    """The seq of the task's newest journal row (what a journaling write's receipt names)."""
    return hive.history(number)[-1].seq


def task_row(raw: apsw.Connection, number: int) -> dict[str, Any]:
    cursor = raw.execute("SELECT * FROM tasks WHERE number = ?", (number,))
    names = [d[0] for d in cursor.getdescription()]
    return dict(zip(names, cursor.fetchone(), strict=True))


# Every kind of holder write, by a caller with a given (lease id, token).
def _checkpoint(hive: Hive, who: Caller, n: int, lid: str, tok: int) -> object:
    return hive.checkpoint(who, n, lease_id=lid, token=tok, progress="parsed the header")


def _update(hive: Hive, who: Caller, n: int, lid: str, tok: int) -> object:
    return hive.update(who, n, lease_id=lid, token=tok, summary="halfway", tokens=5)


def _pause(hive: Hive, who: Caller, n: int, lid: str, tok: int) -> object:
    return hive.pause(who, n, lease_id=lid, token=tok, on="human", reason="which format?")


def _renew(hive: Hive, who: Caller, n: int, lid: str, tok: int) -> object:
    return hive.renew(who, n, lease_id=lid, token=tok, minutes=15)


def _release(hive: Hive, who: Caller, n: int, lid: str, tok: int) -> object:
    return hive.release(who, n, lease_id=lid, token=tok)


def _submit(hive: Hive, who: Caller, n: int, lid: str, tok: int) -> object:
    return hive.submit(who, n, lease_id=lid, token=tok, summary="done", evidence=EVIDENCE)


WRITES: dict[str, Callable[[Hive, Caller, int, str, int], object]] = {
    "checkpoint": _checkpoint, "update": _update, "pause": _pause, "renew": _renew,
    "release": _release, "submit": _submit,
}


# -- callers -------------------------------------------------------------------


@pytest.mark.file_only
@pytest.mark.parametrize("write", list(WRITES))
def test_a_holder_write_needs_a_caller(hive: Hive, snap: Snap, write: str) -> None:
    """A missing caller is refused, never taken for the owner or the holder."""
    number, lease = claimed(hive)
    for nobody in (None, CODER.name, "ana"):
        refused(snap, InvalidInput, "caller_required",
                lambda nobody=nobody: WRITES[write](hive, nobody, number,  # type: ignore[arg-type]
                                                    lease.lease_id, lease.fencing_token))


@pytest.mark.file_only
def test_claim_resume_expire_and_release_need_a_caller(hive: Hive, snap: Snap) -> None:
    number = own_task(hive)
    for nobody in (None, CODER.name):
        refused(snap, InvalidInput, "caller_required",
                lambda nobody=nobody: hive.claim(nobody, number))  # type: ignore[arg-type]
        refused(snap, InvalidInput, "caller_required",
                lambda nobody=nobody: hive.resume(nobody, number))  # type: ignore[arg-type]
        refused(snap, InvalidInput, "caller_required",
                lambda nobody=nobody: hive.expire(nobody))  # type: ignore[arg-type]
    hive.claim(CODER, number)
    refused(snap, InvalidInput, "caller_required",
            lambda: hive.release(None, number))  # type: ignore[arg-type]


@pytest.mark.parametrize("write", [w for w in WRITES if w != "release"])
def test_the_owner_cannot_make_a_holder_write(hive: Hive, snap: Snap, write: str) -> None:
    """Holder writes are an agent's: the owner acts through release, cancel and decisions."""
    number, lease = claimed(hive)
    refused(snap, ForbiddenRight, "agent_only",
            lambda: WRITES[write](hive, OWNER, number, lease.lease_id, lease.fencing_token))


def test_the_owner_cannot_claim_or_resume(hive: Hive, snap: Snap) -> None:
    number = own_task(hive)
    refused(snap, ForbiddenRight, "agent_only", lambda: hive.claim(OWNER, number))
    lease = hive.claim(CODER, number)
    hive.pause(CODER, number, **fence(lease), on="human", reason="ask ana")
    refused(snap, ForbiddenRight, "agent_only", lambda: hive.resume(OWNER, number))


# -- claim -------------------------------------------------------------------


def test_claim_returns_lease_id_token_and_expiry(hive: Hive) -> None:
    number = own_task(hive)
    lease = hive.claim(Caller.agent(CODER.name, "laptop", "s1"), number)
    assert isinstance(lease, ClaimReceipt)
    assert lease.number == number
    assert lease.state is S.accepted
    assert lease.waiting_on is None
    assert lease.lease_id
    assert lease.fencing_token >= 1
    assert (lease.holder, lease.instance, lease.session) == (CODER.name, "laptop", "s1")
    assert lease.expires_at == "2026-12-02T09:10:00.000Z"  # default 10 minutes
    assert lease.at == START
    assert lease.seq == last_seq(hive, number)
    view = hive.get(number)
    assert lease.id == view.task.id
    assert view.task.state is S.accepted
    assert view.claim is not None and view.claim.expires_at == lease.expires_at


def test_claim_is_move_6_journaled_with_instance_and_token(hive: Hive) -> None:
    number, lease = claimed(hive)
    entry = hive.history(number)[-1]
    assert (entry.move, entry.from_state, entry.to_state) == (6, S.routed, S.accepted)
    assert entry.actor == CODER.name
    assert entry.detail is not None
    assert entry.detail["instance"] == "laptop"
    assert entry.detail["fencing_token"] == lease.fencing_token
    assert lease.seq == entry.seq


@pytest.mark.parametrize("minutes", [5, 15])
def test_claim_accepts_5_to_15_minutes(hive: Hive, minutes: int) -> None:
    lease = hive.claim(CODER, own_task(hive), minutes=minutes)
    assert lease.expires_at == f"2026-12-02T09:{minutes:02d}:00.000Z"


@pytest.mark.parametrize("minutes", [0, 4, 16, 60, -10, 10.0, True, "10"])
def test_claim_refuses_a_lease_outside_5_to_15_minutes(hive: Hive, snap: Snap,
                                                       minutes: Any) -> None:
    number = own_task(hive)
    refused(snap, InvalidInput, "lease_minutes",
            lambda: hive.claim(CODER, number, minutes=minutes))


@pytest.mark.parametrize("agent", ["ana/planner", "ana/other", "bob/coder"])
def test_only_the_assignee_claims(hive: Hive, snap: Snap, agent: str) -> None:
    number = own_task(hive)
    refused(snap, ForbiddenRight, "not_permitted",
            lambda: hive.claim(Caller.agent(agent, "laptop"), number))


def test_only_the_assignee_resumes(hive: Hive, snap: Snap) -> None:
    number, lease = claimed(hive)
    hive.pause(CODER, number, **fence(lease), on="agent", reason="waiting on the planner")
    refused(snap, ForbiddenRight, "not_permitted",
            lambda: hive.resume(Caller.agent(PLANNER.name, "laptop"), number))


@pytest.mark.parametrize("second", [CODER.name, PLANNER.name])
@pytest.mark.parametrize("instance", ["laptop", "desktop"])
def test_a_claimed_task_refuses_another_claim(hive: Hive, snap: Snap, second: str,
                                              instance: str) -> None:
    number, _ = claimed(hive)
    refused(snap, InvalidState, "task_claimed",
            lambda: hive.claim(Caller.agent(second, instance), number))


def test_a_working_task_refuses_another_claim(hive: Hive, snap: Snap) -> None:
    number, lease = claimed(hive)
    hive.checkpoint(CODER, number, **fence(lease), progress="started")
    refused(snap, InvalidState, "task_claimed", lambda: hive.claim(CODER_ON_DESKTOP, number))


def test_a_task_held_for_the_owner_is_not_open(hive: Hive, snap: Snap) -> None:
    number = held_task(hive, assignee=CODER.name)
    assert hive.get(number).task.waiting_on is W.owner_approval
    refused(snap, InvalidState, "task_not_open", lambda: hive.claim(CODER, number))


@pytest.mark.parametrize("on", ["human", "agent"])
def test_a_paused_task_is_not_open_to_claim(hive: Hive, snap: Snap, on: str) -> None:
    number, lease = claimed(hive)
    hive.pause(CODER, number, **fence(lease), on=on, reason="need an answer")
    refused(snap, InvalidState, "task_not_open", lambda: hive.claim(CODER, number))


def test_a_task_awaiting_approval_is_not_open(hive: Hive, snap: Snap) -> None:
    number, lease = claimed(hive)
    assert hive.submit(CODER, number, **fence(lease), summary="done",
                       evidence=EVIDENCE).state is S.approval
    refused(snap, InvalidState, "task_not_open", lambda: hive.claim(CODER, number))


def test_resume_refuses_a_task_that_is_not_paused(hive: Hive, snap: Snap) -> None:
    number = own_task(hive)
    refused(snap, InvalidState, "task_not_open", lambda: hive.resume(CODER, number))


@pytest.mark.parametrize("end", ["cancel", "complete"])
def test_a_closed_task_refuses_a_claim(hive: Hive, snap: Snap, end: str) -> None:
    number, lease = claimed(hive)
    if end == "cancel":
        hive.cancel(OWNER, number, reason="not needed")
    else:
        hive.submit(CODER, number, **fence(lease), summary="done", evidence=EVIDENCE)
        hive.sign_off(OWNER, number)
    refused(snap, InvalidState, "task_closed", lambda: hive.claim(CODER, number))
    refused(snap, InvalidState, "task_closed", lambda: hive.resume(CODER, number))


def complete(hive: Hive, number: int) -> None:
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, **fence(lease), summary="done", evidence=EVIDENCE)
    assert hive.sign_off(OWNER, number).state is S.completed
    assert hive.get(number).task.state is S.completed


def test_a_task_is_blocked_until_every_dependency_is_completed(hive: Hive, snap: Snap) -> None:
    first, second = own_task(hive), own_task(hive)
    ids = [hive.get(first).task.id, hive.get(second).task.id]
    number = own_task(hive, packet=packet(depends_on=ids))
    err = refused(snap, InvalidState, "blocked", lambda: hive.claim(CODER, number))
    assert f"{first} (routed), {second} (routed)" in err.message
    assert err.extra["blocked_by"] == [first, second]
    complete(hive, first)
    err = refused(snap, InvalidState, "blocked", lambda: hive.claim(CODER, number))
    assert err.extra["blocked_by"] == [second]
    # a dependency in approval is not completed yet
    lease = hive.claim(CODER, second)
    hive.submit(CODER, second, **fence(lease), summary="done", evidence=EVIDENCE)
    refused(snap, InvalidState, "blocked", lambda: hive.claim(CODER, number))
    hive.sign_off(OWNER, second)
    assert hive.claim(CODER, number).state is S.accepted


def test_a_cancelled_dependency_still_blocks(hive: Hive, snap: Snap) -> None:
    first = own_task(hive)
    number = own_task(hive, packet=packet(depends_on=[hive.get(first).task.id]))
    hive.cancel(OWNER, first)
    refused(snap, InvalidState, "blocked", lambda: hive.claim(CODER, number))


@pytest.mark.parametrize("field, kwargs", [
    ("agent", {"agent": "coder"}),
    ("instance", {"instance": ""}),
    ("instance", {"instance": "has space"}),
    ("session", {"session": "bad session"}),
])
def test_claim_refuses_a_malformed_identity(hive: Hive, snap: Snap, field: str,
                                            kwargs: dict[str, Any]) -> None:
    """The caller is refused as it is built, before the claim is asked for."""
    number = own_task(hive)
    args: dict[str, Any] = {"agent": CODER.name, "instance": "laptop"}
    args.update(kwargs)
    agent = args.pop("agent")
    err = refused(snap, InvalidInput, f"invalid_{field}",
                  lambda: hive.claim(Caller.agent(agent, **args), number))
    assert err.extra["field"] == field


# -- tokens, renew -----------------------------------------------------------


def test_tokens_strictly_grow_across_every_claim_of_a_task(hive: Hive,
                                                           clock: ManualClock) -> None:
    number = own_task(hive)
    tokens = []
    lease = hive.claim(CODER, number)
    tokens.append(lease.fencing_token)
    hive.release(CODER, number, **fence(lease))
    lease = hive.claim(CODER_ON_DESKTOP, number)
    tokens.append(lease.fencing_token)
    hive.pause(CODER_ON_DESKTOP, number, **fence(lease), on="human", reason="ask ana")
    lease = hive.resume(CODER, number)
    tokens.append(lease.fencing_token)
    clock.advance(minutes=11)
    assert [e.number for e in hive.expire(OWNER)] == [number]
    lease = hive.claim(CODER, number)
    tokens.append(lease.fencing_token)
    hive.release(OWNER, number)
    lease = hive.claim(CODER, number)
    tokens.append(lease.fencing_token)
    hive.submit(CODER, number, **fence(lease), summary="done", evidence=EVIDENCE)
    hive.decline(OWNER, number, reason="not quite")
    lease = hive.claim(CODER, number)
    tokens.append(lease.fencing_token)
    assert tokens == sorted(set(tokens)), tokens
    # every claim is journaled with its token; never with the lease id (the holder's credential)
    journaled = [e.detail["fencing_token"] for e in hive.history(number)
                 if e.move in (6, 11) and e.detail]
    assert journaled == tokens
    assert all("lease_id" not in (e.detail or {}) for e in hive.history(number))


def test_renew_keeps_lease_id_and_token_and_moves_the_expiry(hive: Hive, snap: Snap,
                                                             clock: ManualClock) -> None:
    number, lease = claimed(hive)  # 09:00, expires 09:10
    clock.advance(minutes=8)
    renewed = hive.renew(CODER, number, **fence(lease), minutes=10)
    assert isinstance(renewed, ClaimReceipt)
    assert (renewed.lease_id, renewed.fencing_token) == (lease.lease_id, lease.fencing_token)
    assert renewed.expires_at == "2026-12-02T09:18:00.000Z"
    assert (renewed.holder, renewed.instance, renewed.state) == (CODER.name, "laptop",
                                                                 S.accepted)
    assert renewed.at == "2026-12-02T09:08:00.000Z"
    view = hive.get(number)
    assert view.claim is not None and view.claim.expires_at == renewed.expires_at
    clock.advance(minutes=5)  # 09:13: past the first expiry, inside the renewed one
    assert hive.expire(OWNER) == []
    hive.checkpoint(CODER, number, **fence(lease), progress="still on it")
    assert hive.get(number).task.state is S.working
    clock.advance(minutes=5)  # 09:18: the renewed lease ran out
    err = refused(snap, InvalidState, "stale_claim",
                  lambda: _checkpoint(hive, CODER, number, lease.lease_id, lease.fencing_token))
    assert "expired" in err.message


def test_renew_writes_no_journal_row(hive: Hive) -> None:
    number, lease = claimed(hive)
    before = hive.history(number)
    assert hive.renew(CODER, number, **fence(lease)).seq is None
    assert hive.history(number) == before


@pytest.mark.parametrize("minutes", [4, 16])
def test_renew_refuses_a_lease_outside_5_to_15_minutes(hive: Hive, snap: Snap,
                                                       minutes: int) -> None:
    number, lease = claimed(hive)
    refused(snap, InvalidInput, "lease_minutes",
            lambda: hive.renew(CODER, number, **fence(lease), minutes=minutes))


# -- release -----------------------------------------------------------------


def test_the_holder_releases_an_accepted_task_move_8(hive: Hive) -> None:
    number, lease = claimed(hive)
    receipt = hive.release(CODER, number, **fence(lease), reason="wrong repo")
    assert isinstance(receipt, Receipt) and not isinstance(receipt, ClaimReceipt)
    assert receipt.state is S.routed
    assert hive.get(number).claim is None
    entry = hive.history(number)[-1]
    assert (entry.move, entry.from_state, entry.to_state) == (8, S.accepted, S.routed)
    assert (entry.actor, entry.reason) == (CODER.name, "wrong repo")
    assert receipt.seq == entry.seq
    # the task is open again, for a new claim
    assert hive.claim(CODER, number).fencing_token > lease.fencing_token


def test_the_holder_releases_a_working_task_move_9_keeping_the_checkpoint(hive: Hive) -> None:
    number, lease = claimed(hive)
    hive.checkpoint(CODER, number, **fence(lease), progress="parsed the header")
    assert hive.release(CODER, number, **fence(lease)).state is S.routed
    view = hive.get(number)
    assert view.task.state is S.routed
    assert view.claim is None
    assert view.task.latest_checkpoint is not None
    assert view.task.latest_checkpoint.progress == "parsed the header"
    entry = hive.history(number)[-1]
    assert (entry.move, entry.actor, entry.reason) == (9, CODER.name, "released")


@pytest.mark.parametrize("state", [S.accepted, S.working])
def test_the_owner_releases_without_a_lease(hive: Hive, state: State) -> None:
    number, lease = claimed(hive)
    if state is S.working:
        hive.update(CODER, number, **fence(lease), summary="started")
    receipt = hive.release(OWNER, number, reason="reassigning")
    assert receipt.state is S.routed
    assert hive.get(number).claim is None
    entry = hive.history(number)[-1]
    assert (entry.from_state, entry.to_state) == (state, S.routed)
    assert entry.move == (8 if state is S.accepted else 9)
    assert (entry.actor, entry.reason) == ("ana", "reassigning")
    assert receipt.seq == entry.seq


@pytest.mark.parametrize("who, kind, reason", [
    (Caller.owner("bob"), ForbiddenRight, "not_owner"),
    (CODER, ForbiddenRight, "not_permitted"),
    (PLANNER, ForbiddenRight, "not_permitted"),
    (Caller.agent("bob/coder", "laptop"), ForbiddenRight, "not_permitted"),
], ids=["another_owner", "the_holder", "the_planner", "another_owners_agent"])
def test_only_the_owner_releases_without_a_lease(hive: Hive, snap: Snap, who: Caller,
                                                 kind: type[HiveliteError], reason: str) -> None:
    """Someone else's owner is not this store's owner; an agent, even the holder, releases
    only with its lease."""
    number, _ = claimed(hive)
    refused(snap, kind, reason, lambda: hive.release(who, number))


def test_the_owner_releases_without_the_holders_lease(hive: Hive, snap: Snap) -> None:
    number, lease = claimed(hive)
    for given_fence in (fence(lease), {"lease_id": lease.lease_id},
                        {"token": lease.fencing_token}):
        refused(snap, InvalidInput, "owner_release",
                lambda given_fence=given_fence: hive.release(OWNER, number, **given_fence))


def test_the_owner_cannot_release_an_unclaimed_task(hive: Hive, snap: Snap) -> None:
    number = own_task(hive)
    refused(snap, InvalidState, "not_claimed", lambda: hive.release(OWNER, number))


def test_release_with_a_lease_but_no_token_is_refused(hive: Hive, snap: Snap) -> None:
    """Half a fence is no fence: the holder releases with its lease id AND its token."""
    number, lease = claimed(hive)
    refused(snap, InvalidInput, "lease_required",
            lambda: hive.release(CODER, number, lease_id=lease.lease_id))
    refused(snap, InvalidInput, "lease_required",
            lambda: hive.release(CODER, number, token=lease.fencing_token))


def test_a_holder_write_by_another_agent_is_refused(hive: Hive, snap: Snap) -> None:
    number, lease = claimed(hive)
    for other in (PLANNER, Caller.agent(PLANNER.name, "laptop"), GUEST):
        refused(snap, ForbiddenRight, "not_permitted",
                lambda other=other: hive.checkpoint(other, number, **fence(lease),
                                                    progress="x"))
        refused(snap, ForbiddenRight, "not_permitted",
                lambda other=other: hive.release(other, number, **fence(lease)))
    hive.checkpoint(CODER, number, **fence(lease), progress="mine")


# -- fencing -----------------------------------------------------------------


@pytest.mark.parametrize("write", list(WRITES))
def test_stale_holder_is_refused_after_the_same_agent_reclaims_elsewhere(
        hive: Hive, snap: Snap, clock: ManualClock, write: str) -> None:
    """A (ana/coder on laptop) loses the lease to B (ana/coder on desktop)."""
    number, a = claimed(hive, instance="laptop")
    hive.checkpoint(CODER, number, **fence(a), progress="A started")
    clock.advance(minutes=11)
    b = hive.claim(CODER_ON_DESKTOP, number)
    assert b.fencing_token > a.fencing_token
    assert b.lease_id != a.lease_id
    # every write kind from A's old pair is refused and changes nothing
    for kind, call in WRITES.items():
        refused(snap, InvalidState, "stale_claim",
                lambda call=call: call(hive, CODER, number, a.lease_id, a.fencing_token))
        assert kind  # (loop label for a failing assert's traceback)
    # B's write of this kind goes through
    WRITES[write](hive, CODER_ON_DESKTOP, number, b.lease_id, b.fencing_token)
    view = hive.get(number)
    expected = {"checkpoint": S.working, "update": S.working, "pause": S.waiting,
                "renew": S.accepted, "release": S.routed, "submit": S.approval}[write]
    assert view.task.state is expected


def test_b_can_do_every_write_in_turn(hive: Hive, clock: ManualClock) -> None:
    number, _ = claimed(hive, instance="laptop")
    clock.advance(minutes=11)
    b = hive.claim(CODER_ON_DESKTOP, number)
    hive.renew(CODER_ON_DESKTOP, number, **fence(b))
    hive.checkpoint(CODER_ON_DESKTOP, number, **fence(b), progress="B took over")
    hive.update(CODER_ON_DESKTOP, number, **fence(b), summary="B halfway")
    receipt = hive.submit(CODER_ON_DESKTOP, number, **fence(b), summary="done",
                          evidence=EVIDENCE)
    assert receipt.state is S.approval
    assert receipt.seq == last_seq(hive, number)
    view = hive.get(number)
    assert view.task.state is S.approval
    assert view.task.result is not None and view.task.result.returned_by == CODER.name
    assert view.task.latest_checkpoint is not None
    assert view.task.latest_checkpoint.progress == "B took over"


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("wrong", ["token", "lease_id"])
def test_half_right_fences_are_refused(hive: Hive, snap: Snap, write: str, wrong: str) -> None:
    number, lease = claimed(hive)
    lid, tok = lease.lease_id, lease.fencing_token
    if wrong == "token":
        tokens = [tok + 1, tok - 1, 0]
        for bad in tokens:
            refused(snap, InvalidState, "stale_claim",
                    lambda bad=bad: WRITES[write](hive, CODER, number, lid, bad))
    else:
        for bad_id in ["L" + "0" * 20, lid + "x", lid[:-1], ""]:
            refused(snap, InvalidState, "stale_claim",
                    lambda bad_id=bad_id: WRITES[write](hive, CODER, number, bad_id, tok))
    WRITES[write](hive, CODER, number, lid, tok)  # the right pair still works


def test_an_earlier_claims_pair_is_refused_after_a_reclaim(hive: Hive, snap: Snap) -> None:
    """Same lease id shape, lower token: the first claim's pair after release and reclaim."""
    number, first = claimed(hive)
    hive.release(CODER, number, **fence(first))
    second = hive.claim(CODER, number)
    for call in WRITES.values():
        refused(snap, InvalidState, "stale_claim",
                lambda call=call: call(hive, CODER, number, first.lease_id,
                                       first.fencing_token))
        refused(snap, InvalidState, "stale_claim",
                lambda call=call: call(hive, CODER, number, first.lease_id,
                                       second.fencing_token))
        refused(snap, InvalidState, "stale_claim",
                lambda call=call: call(hive, CODER, number, second.lease_id,
                                       first.fencing_token))


@pytest.mark.parametrize("end", ["release", "pause", "submit", "owner_release"])
def test_an_ended_claims_pair_is_refused(hive: Hive, snap: Snap, end: str) -> None:
    number, lease = claimed(hive)
    if end == "owner_release":
        hive.release(OWNER, number)
    else:
        WRITES[end](hive, CODER, number, lease.lease_id, lease.fencing_token)
    for call in WRITES.values():
        refused(snap, InvalidState, "stale_claim",
                lambda call=call: call(hive, CODER, number, lease.lease_id,
                                       lease.fencing_token))


@pytest.mark.parametrize("write", list(WRITES))
def test_an_expired_pair_is_refused_and_changes_nothing(hive: Hive, snap: Snap,
                                                        clock: ManualClock, write: str) -> None:
    number, lease = claimed(hive)
    hive.checkpoint(CODER, number, **fence(lease), progress="half")
    clock.advance(minutes=11)
    err = refused(snap, InvalidState, "stale_claim",
                  lambda: WRITES[write](hive, CODER, number, lease.lease_id,
                                        lease.fencing_token))
    assert "expired" in err.message
    assert err.code == "invalid_state" and err.status == 409


def test_a_lease_is_live_until_its_expiry_instant(hive: Hive, snap: Snap,
                                                  clock: ManualClock) -> None:
    number, lease = claimed(hive)
    clock.advance(minutes=9, seconds=59)
    hive.update(CODER, number, **fence(lease), summary="just in time")
    clock.advance(seconds=1)  # exactly the expiry
    refused(snap, InvalidState, "stale_claim",
            lambda: hive.update(CODER, number, **fence(lease), summary="too late"))


# -- expiry ------------------------------------------------------------------


def test_expire_reopens_expired_claims_and_reports_them(hive: Hive, clock: ManualClock) -> None:
    accepted, a = claimed(hive)
    working, w = claimed(hive)
    hive.checkpoint(CODER, working, **fence(w), progress="parsed the header",
                    next_steps=["write the body"])
    clock.advance(minutes=2)
    fresh, _ = claimed(hive)  # expires two minutes later than the others
    untouched = own_task(hive)
    assert hive.expire(OWNER) == []
    clock.advance(minutes=9)  # 09:11

    reopened = hive.expire(OWNER)

    assert all(isinstance(r, ExpiredClaim) for r in reopened)
    by_number = {r.number: r for r in reopened}
    assert set(by_number) == {accepted, working}
    assert by_number[accepted].from_state is S.accepted
    assert by_number[working].from_state is S.working
    for number in (accepted, working):
        item = by_number[number]
        assert item.id == hive.get(number).task.id
        assert item.holder == CODER.name
        assert item.expired_at == "2026-12-02T09:10:00.000Z"
        view = hive.get(number)
        assert view.task.state is S.routed
        assert view.claim is None
        entry = hive.history(number)[-1]
        assert (entry.actor, entry.reason, entry.to_state) == ("clock", "expired", S.routed)
        assert entry.move == (8 if number == accepted else 9)
    checkpoint = hive.get(working).task.latest_checkpoint
    assert checkpoint is not None
    assert (checkpoint.progress, checkpoint.next_steps) == ("parsed the header",
                                                            ["write the body"])
    assert hive.get(fresh).task.state is S.accepted
    assert hive.get(untouched).task.state is S.routed
    assert hive.expire(OWNER) == []  # nothing left to reopen
    assert a.number == accepted


@pytest.mark.parametrize("who", [CODER, GUEST], ids=["coder", "guest"])
def test_any_caller_may_expire(hive: Hive, clock: ManualClock, who: Caller) -> None:
    number, _ = claimed(hive)
    clock.advance(minutes=11)
    assert [e.number for e in hive.expire(who)] == [number]
    assert hive.history(number)[-1].actor == "clock"


SWEEPING_WRITES = ["handoff", "claim", "resume", "checkpoint", "update", "renew", "pause",
                   "release", "owner_release", "submit", "approve", "deny", "cancel",
                   "sign_off", "decline", "verify", "expire"]


@pytest.mark.parametrize("kind", SWEEPING_WRITES)
def test_every_write_first_reopens_expired_claims(hive: Hive, clock: ManualClock,
                                                  kind: str) -> None:
    expired, _ = claimed(hive)  # expires 09:10
    clock.advance(minutes=5)
    other, lease = claimed(hive)  # expires 09:15
    if kind == "resume":
        hive.pause(CODER, other, **fence(lease), on="human", reason="ask")
    elif kind in ("sign_off", "decline", "verify"):
        hive.submit(CODER, other, **fence(lease), summary="done", evidence=EVIDENCE)
    spare, held = own_task(hive), held_task(hive)
    clock.advance(minutes=6)  # 09:11
    if kind in WRITES:
        WRITES[kind](hive, CODER, other, lease.lease_id, lease.fencing_token)
    else:
        {
            "handoff": lambda: own_task(hive),
            "claim": lambda: hive.claim(CODER, spare),
            "resume": lambda: hive.resume(CODER, other),
            "owner_release": lambda: hive.release(OWNER, other),
            "approve": lambda: hive.approve(OWNER, held),
            "deny": lambda: hive.deny(OWNER, held),
            "cancel": lambda: hive.cancel(OWNER, spare),
            "sign_off": lambda: hive.sign_off(OWNER, other),
            "decline": lambda: hive.decline(OWNER, other, reason="redo"),
            "verify": lambda: hive.verify(REVIEWER, other, verdict="accept"),
            "expire": lambda: hive.expire(OWNER),
        }[kind]()
    view = hive.get(expired)
    assert view.task.state is S.routed
    assert view.claim is None
    entry = hive.history(expired)[-1]
    assert (entry.move, entry.actor, entry.reason) == (8, "clock", "expired")


def test_opening_the_store_reopens_expired_claims(hive: Hive, open_hive: OpenHive,
                                                  clock: ManualClock) -> None:
    number, lease = claimed(hive)
    hive.update(CODER, number, **fence(lease), summary="started")
    clock.advance(minutes=11)
    again = open_hive()
    view = again.get(number)
    assert view.task.state is S.routed
    assert view.claim is None
    entry = again.history(number)[-1]
    assert (entry.move, entry.actor, entry.reason) == (9, "clock", "expired")
    assert entry.detail is not None
    assert entry.detail["fencing_token"] == lease.fencing_token


def test_opening_before_expiry_changes_nothing(hive: Hive, open_hive: OpenHive, snap: Snap,
                                               clock: ManualClock) -> None:
    number, _ = claimed(hive)
    clock.advance(minutes=9)
    before = snap()
    again = open_hive()
    assert again.get(number).task.state is S.accepted
    again.close()
    assert snap() == before


def test_a_claim_after_expiry_journals_the_expiry_then_the_claim(hive: Hive,
                                                                 clock: ManualClock) -> None:
    number, a = claimed(hive)
    clock.advance(minutes=11)
    b = hive.claim(CODER_ON_DESKTOP, number)
    tail = hive.history(number)[-2:]
    assert [(e.move, e.actor, e.reason) for e in tail] == [(8, "clock", "expired"),
                                                           (6, CODER.name, "claimed")]
    assert tail[0].detail is not None and tail[0].detail["fencing_token"] == a.fencing_token
    assert tail[1].detail is not None and tail[1].detail["fencing_token"] == b.fencing_token
    assert tail[1].detail["instance"] == "desktop"
    assert b.seq == tail[1].seq


# -- progress ----------------------------------------------------------------


def test_first_checkpoint_starts_the_work_move_7(hive: Hive) -> None:
    number, lease = claimed(hive)
    receipt = hive.checkpoint(CODER, number, **fence(lease), progress="parsed the header",
                              decisions=["use a state machine"], files_touched=["parser.py"],
                              next_steps=["body"], open_questions=["unicode?"])
    assert receipt.state is S.working
    assert receipt.seq == last_seq(hive, number)
    view = hive.get(number)
    assert view.task.state is S.working
    cp = view.task.latest_checkpoint
    assert cp is not None
    assert cp.progress == "parsed the header"
    assert (cp.decisions, cp.files_touched) == (["use a state machine"], ["parser.py"])
    assert (cp.next_steps, cp.open_questions) == (["body"], ["unicode?"])
    entry = hive.history(number)[-1]
    assert (entry.move, entry.from_state, entry.to_state) == (7, S.accepted, S.working)
    assert entry.actor == CODER.name
    # the second checkpoint replaces the first and is no move
    receipt = hive.checkpoint(CODER, number, **fence(lease), progress="parsed the body")
    assert (receipt.state, receipt.seq) == (S.working, None)
    view = hive.get(number)
    assert view.task.latest_checkpoint is not None
    assert view.task.latest_checkpoint.progress == "parsed the body"
    assert view.task.latest_checkpoint.decisions == []
    assert moves(hive, number) == [1, 6, 7]


def test_first_update_also_starts_the_work(hive: Hive) -> None:
    number, lease = claimed(hive)
    receipt = hive.update(CODER, number, **fence(lease), summary="started")
    assert receipt.state is S.working
    assert receipt.seq == last_seq(hive, number)
    view = hive.get(number)
    assert view.task.state is S.working
    assert view.task.latest_checkpoint is None
    assert hive.update(CODER, number, **fence(lease), summary="again").seq is None
    assert moves(hive, number) == [1, 6, 7]


def test_progress_moves_updated_at(hive: Hive, clock: ManualClock) -> None:
    number, lease = claimed(hive)
    hive.checkpoint(CODER, number, **fence(lease), progress="one")
    clock.advance(minutes=1)
    receipt = hive.update(CODER, number, **fence(lease), summary="two")
    assert receipt.at == "2026-12-02T09:01:00.000Z"
    assert hive.get(number).task.updated_at == "2026-12-02T09:01:00.000Z"


@pytest.mark.parametrize("progress", ["", "x" * 2001])
def test_checkpoint_refuses_a_bad_progress(hive: Hive, snap: Snap, progress: str) -> None:
    number, lease = claimed(hive)
    refused(snap, InvalidInput, "invalid_checkpoint",
            lambda: hive.checkpoint(CODER, number, **fence(lease), progress=progress))


def test_update_records_summary_and_usage(hive: Hive) -> None:
    number, lease = claimed(hive)
    hive.update(CODER, number, **fence(lease), summary="parsed", tokens=1200, usd_micros=3400)
    view = hive.get(number)
    assert len(view.updates) == 1
    u = view.updates[0]
    assert (u.summary, u.actor, u.tokens, u.usd_micros) == ("parsed", CODER.name, 1200, 3400)
    assert u.at == "2026-12-02T09:00:00.000Z"


def test_usage_totals_sum_over_updates(hive: Hive) -> None:
    number, lease = claimed(hive)
    hive.update(CODER, number, **fence(lease), summary="a", tokens=100, usd_micros=7)
    hive.update(CODER, number, **fence(lease), summary="b", tokens=250)
    hive.update(CODER, number, **fence(lease), summary="c", usd_micros=5)
    hive.update(CODER, number, **fence(lease), summary="d")
    view = hive.get(number)
    assert (view.usage.tokens, view.usage.usd_micros) == (350, 12)
    other, other_lease = claimed(hive)
    assert hive.get(other).usage.tokens == 0
    hive.update(CODER, other, **fence(other_lease), summary="x", tokens=1)
    assert hive.get(number).usage.tokens == 350  # per task


def test_usage_totals_count_every_update_not_only_the_last_20(hive: Hive) -> None:
    number, lease = claimed(hive)
    for i in range(21):
        hive.update(CODER, number, **fence(lease), summary=f"step {i}", tokens=10,
                    usd_micros=1)
    view = hive.get(number)
    assert len(view.updates) == 20
    assert (view.usage.tokens, view.usage.usd_micros) == (210, 21)


def test_a_view_carries_the_last_20_updates_in_order(hive: Hive, clock: ManualClock) -> None:
    number, lease = claimed(hive)
    for i in range(21):
        hive.update(CODER, number, **fence(lease), summary=f"step {i}")
        clock.advance(seconds=1)
    view = hive.get(number)
    assert [u.summary for u in view.updates] == [f"step {i}" for i in range(1, 21)]


@pytest.mark.parametrize("summary", ["", "x" * 301, "two\nlines", "carriage\rreturn",
                                     "trailing\n"])
def test_update_refuses_a_summary_that_is_not_one_short_line(hive: Hive, snap: Snap,
                                                             summary: str) -> None:
    number, lease = claimed(hive)
    err = refused(snap, InvalidInput, "invalid_summary",
                  lambda: hive.update(CODER, number, **fence(lease), summary=summary))
    assert err.extra["field"] == "summary"


def test_update_takes_a_300_character_summary(hive: Hive) -> None:
    number, lease = claimed(hive)
    hive.update(CODER, number, **fence(lease), summary="x" * 300)
    assert hive.get(number).updates[-1].summary == "x" * 300


@pytest.mark.parametrize("field", ["tokens", "usd_micros"])
@pytest.mark.parametrize("value", [-1, 1.5, 2.0, True, "3"])
def test_update_refuses_usage_that_is_not_a_non_negative_integer(
        hive: Hive, snap: Snap, field: str, value: Any) -> None:
    number, lease = claimed(hive)
    err = refused(snap, InvalidInput, "invalid_usage",
                  lambda: hive.update(CODER, number, **fence(lease), summary="x",
                                      **{field: value}))
    assert err.extra["field"] == field


def test_update_takes_zero_usage(hive: Hive) -> None:
    number, lease = claimed(hive)
    hive.update(CODER, number, **fence(lease), summary="free", tokens=0, usd_micros=0)
    view = hive.get(number)
    assert (view.updates[-1].tokens, view.updates[-1].usd_micros) == (0, 0)


# -- pause, resume -----------------------------------------------------------


@pytest.mark.parametrize("on", ["human", "agent"])
def test_pause_ends_the_claim_and_waits_move_10(hive: Hive, on: str) -> None:
    number, lease = claimed(hive)
    hive.checkpoint(CODER, number, **fence(lease), progress="half")
    receipt = hive.pause(CODER, number, **fence(lease), on=on, reason="which date format?")
    assert receipt.state is S.waiting
    assert receipt.waiting_on is WaitingOn(on)
    view = hive.get(number)
    assert view.task.state is S.waiting
    assert view.task.waiting_on is WaitingOn(on)
    assert view.claim is None
    assert view.task.latest_checkpoint is not None
    entry = hive.history(number)[-1]
    assert (entry.move, entry.from_state, entry.to_state) == (10, S.working, S.waiting)
    assert entry.waiting_on is WaitingOn(on)
    assert (entry.actor, entry.reason) == (CODER.name, "which date format?")
    assert receipt.seq == entry.seq


def test_pause_from_accepted_passes_through_working(hive: Hive) -> None:
    number, lease = claimed(hive)
    receipt = hive.pause(CODER, number, **fence(lease), on="human", reason="blocked at once")
    assert (receipt.state, receipt.waiting_on) == (S.waiting, W.human)
    assert moves(hive, number) == [1, 6, 7, 10]


@pytest.mark.parametrize("on", ["owner_approval", "nobody", ""])
def test_pause_waits_only_on_a_human_or_an_agent(hive: Hive, snap: Snap, on: str) -> None:
    number, lease = claimed(hive)
    refused(snap, InvalidInput, "invalid_waiting_on",
            lambda: hive.pause(CODER, number, **fence(lease), on=on, reason="x"))


@pytest.mark.parametrize("reason, why", [("", "reason_required"), ("   ", "reason_required"),
                                         ("x" * 501, "reason_too_long")])
def test_pause_needs_a_reason(hive: Hive, snap: Snap, reason: str, why: str) -> None:
    number, lease = claimed(hive)
    refused(snap, InvalidInput, why,
            lambda: hive.pause(CODER, number, **fence(lease), on="human", reason=reason))


def test_resume_is_a_new_claim_with_a_new_token_move_11(hive: Hive, clock: ManualClock) -> None:
    number, lease = claimed(hive)
    hive.checkpoint(CODER, number, **fence(lease), progress="half")
    hive.pause(CODER, number, **fence(lease), on="human", reason="ask ana")
    clock.advance(minutes=30)
    again = hive.resume(CODER_ON_DESKTOP, number, minutes=5)
    assert isinstance(again, ClaimReceipt)
    assert again.state is S.working
    assert again.waiting_on is None
    assert again.fencing_token > lease.fencing_token
    assert again.lease_id != lease.lease_id
    assert again.expires_at == "2026-12-02T09:35:00.000Z"
    assert (again.holder, again.instance) == (CODER.name, "desktop")
    view = hive.get(number)
    assert view.task.state is S.working
    assert view.task.waiting_on is None
    assert view.claim is not None and view.claim.instance == "desktop"
    entry = hive.history(number)[-1]
    assert (entry.move, entry.from_state, entry.to_state) == (11, S.waiting, S.working)
    assert entry.actor == CODER.name
    assert entry.detail is not None
    assert entry.detail["fencing_token"] == again.fencing_token
    assert entry.detail["instance"] == "desktop"
    assert again.seq == entry.seq
    assert moves(hive, number) == [1, 6, 7, 10, 11]
    # the new pair works; the paused claim's pair does not
    hive.update(CODER_ON_DESKTOP, number, **fence(again), summary="answer arrived")
    with pytest.raises(InvalidState) as err:
        hive.update(CODER, number, **fence(lease), summary="old")
    assert err.value.reason == "stale_claim"


def test_resume_refuses_a_bad_lease_length(hive: Hive, snap: Snap) -> None:
    number, lease = claimed(hive)
    hive.pause(CODER, number, **fence(lease), on="agent", reason="ask planner")
    refused(snap, InvalidInput, "lease_minutes",
            lambda: hive.resume(CODER, number, minutes=16))


def test_a_resumed_claim_expires_back_to_routed_move_9(hive: Hive, clock: ManualClock) -> None:
    number, lease = claimed(hive)
    hive.pause(CODER, number, **fence(lease), on="human", reason="ask")
    hive.resume(CODER, number)
    clock.advance(minutes=10)
    [item] = hive.expire(OWNER)
    assert (item.number, item.from_state) == (number, S.working)
    assert hive.history(number)[-1].move == 9


# -- submit ------------------------------------------------------------------


def test_submit_from_accepted_passes_through_working(hive: Hive) -> None:
    number, lease = claimed(hive)
    receipt = hive.submit(CODER, number, **fence(lease), summary="parser done",
                          evidence=EVIDENCE)
    assert receipt.state is S.approval
    assert receipt.waiting_on is None
    view = hive.get(number)
    assert view.task.state is S.approval
    assert view.claim is None
    assert moves(hive, number) == [1, 6, 7, 12, 14]
    history = hive.history(number)
    assert [(e.from_state, e.to_state) for e in history[-3:]] == [
        (S.accepted, S.working), (S.working, S.verifying), (S.verifying, S.approval)]
    assert receipt.seq == history[-1].seq
    assert view.task.result is not None
    assert view.task.result.evidence[0].summary == "3 passed"


def test_submit_from_working_is_move_12(hive: Hive) -> None:
    number, lease = claimed(hive)
    hive.update(CODER, number, **fence(lease), summary="started")
    hive.submit(CODER, number, **fence(lease), summary="parser done", evidence=EVIDENCE,
                tokens=40, usd_micros=2)
    assert moves(hive, number) == [1, 6, 7, 12, 14]
    assert hive.get(number).usage.tokens == 40


# -- views -------------------------------------------------------------------


def test_the_view_shows_the_claim_but_never_the_lease_id_or_token(hive: Hive) -> None:
    number = own_task(hive)
    lease = hive.claim(Caller.agent(CODER.name, "laptop", "s-7"), number, minutes=12)
    views = [hive.get(number), hive.list().items[0]]
    receipts: list[Receipt] = [hive.checkpoint(CODER, number, **fence(lease), progress="x")]
    views.append(hive.get(number))
    receipts.append(hive.update(CODER, number, **fence(lease), summary="y"))
    views.append(hive.get(number))
    for view in views:
        claim = view.claim
        assert claim is not None
        assert (claim.holder, claim.instance, claim.session) == (CODER.name, "laptop", "s-7")
        assert claim.expires_at == "2026-12-02T09:12:00.000Z"
        assert claim.lease_id is None
        assert claim.fencing_token is None
        assert lease.lease_id not in view.model_dump_json()
    # a holder write's receipt does not echo the credential either
    for receipt in receipts:
        assert not isinstance(receipt, ClaimReceipt)
        assert lease.lease_id not in receipt.model_dump_json()
        assert "fencing_token" not in receipt.model_dump()


def test_a_view_without_a_claim_shows_none(hive: Hive) -> None:
    number = own_task(hive)
    assert hive.get(number).claim is None


def _to(hive: Hive, where: str) -> int:
    """A task made by the library's own verbs into ``where``."""
    if where == "waiting(owner_approval)":
        return held_task(hive)
    number = own_task(hive)
    if where == "routed":
        return number
    lease = hive.claim(CODER, number)
    if where == "accepted":
        return number
    if where == "working":
        hive.checkpoint(CODER, number, **fence(lease), progress="x")
    elif where in ("waiting(human)", "waiting(agent)"):
        hive.pause(CODER, number, **fence(lease), on=where[8:-1], reason="question")
    elif where in ("approval", "completed"):
        hive.submit(CODER, number, **fence(lease), summary="done", evidence=EVIDENCE)
        if where == "completed":
            hive.sign_off(OWNER, number)
    elif where in ("failed once", "failed"):
        hive.submit(CODER, number, **fence(lease), summary="could not", evidence=EVIDENCE,
                    outcome="failed")
        if where == "failed":  # its attempts run out: 3 failures by default
            for _ in range(2):
                lease = hive.claim(CODER, number)
                hive.submit(CODER, number, **fence(lease), summary="could not",
                            evidence=EVIDENCE, outcome="failed")
    elif where == "cancelled":
        hive.cancel(OWNER, number)
    return number


@pytest.mark.parametrize("where, expected", [
    ("routed", "queued"),
    ("waiting(owner_approval)", "queued"),
    ("accepted", "claimed"),
    ("working", "running"),
    ("waiting(human)", "running"),
    ("waiting(agent)", "running"),
    ("approval", "approval"),
    ("completed", "completed"),
    ("failed once", "queued"),
    ("failed", "failed"),
    ("cancelled", "cancelled"),
])
def test_lifecycle_is_derived_from_the_state(hive: Hive, where: str, expected: str) -> None:
    """A routed task reads ``failed`` only once its attempts ran out: never while it can
    still be claimed."""
    number = _to(hive, where)
    view: TaskView = hive.get(number)
    assert view.lifecycle == expected
    if where == "failed once":
        assert view.task.state is S.routed and view.attempts == 1
        hive.claim(CODER, number)  # claimed again, the failure is history
        assert hive.get(number).lifecycle == "claimed"
    if where == "failed":
        assert view.task.state is S.routed and view.attempts == view.max_attempts == 3


# -- more refusals -------------------------------------------------------------


@pytest.mark.parametrize("end", ["completed", "cancelled"])
def test_a_holder_write_on_a_closed_task_is_task_closed(hive: Hive, snap: Snap,
                                                        end: str) -> None:
    """Seed 004: task_closed is any write to a done, rejected or cancelled task."""
    number, lease = claimed(hive)
    if end == "completed":
        hive.submit(CODER, number, **fence(lease), summary="done", evidence=EVIDENCE)
        hive.sign_off(OWNER, number)
    else:
        hive.cancel(OWNER, number)
    for call in WRITES.values():
        refused(snap, InvalidState, "task_closed",
                lambda call=call: call(hive, CODER, number, lease.lease_id,
                                       lease.fencing_token))
    refused(snap, InvalidState, "task_closed", lambda: hive.release(OWNER, number))


def test_a_refused_claim_after_expiry_changes_nothing(hive: Hive, snap: Snap, raw: apsw.Connection,
                                                      clock: ManualClock) -> None:
    """The sweep runs inside the write, so a refused call rolls it back too."""
    number, _ = claimed(hive)
    clock.advance(minutes=11)
    refused(snap, ForbiddenRight, "not_permitted",
            lambda: hive.claim(PLANNER, number))
    assert task_row(raw, number)["state"] == "accepted"
    assert [e.number for e in hive.expire(OWNER)] == [number]


def test_release_refuses_a_long_reason(hive: Hive, snap: Snap) -> None:
    number, lease = claimed(hive)
    refused(snap, InvalidInput, "reason_too_long",
            lambda: hive.release(CODER, number, **fence(lease), reason="x" * 501))
    refused(snap, InvalidInput, "reason_too_long",
            lambda: hive.release(OWNER, number, reason="x" * 501))


# -- tokens over any sequence of claims ----------------------------------------

STEPS = st.lists(st.sampled_from(["claim", "release", "owner_release", "pause", "resume",
                                  "expire", "checkpoint", "renew"]), max_size=12)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_tokens_grow_and_views_hide_them_over_any_sequence(open_hive: OpenHive,
                                                           steps: list[str]) -> None:
    """Each example on a fresh store of its own (the fixture only opens it)."""
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock(START)
        hive = open_hive(path=Path(tmp) / "s.db", clock=clock)
        try:
            number = own_task(hive)
            lease: ClaimReceipt | None = None
            holder = CODER
            tokens: list[int] = []
            for step in steps:
                state = hive.get(number).task.state
                live = lease is not None and state in (S.accepted, S.working)
                if step == "claim" and state is S.routed:
                    lease, holder = hive.claim(CODER, number), CODER
                elif step == "resume" and state is S.waiting:
                    lease, holder = hive.resume(CODER_ON_DESKTOP, number), CODER_ON_DESKTOP
                elif lease is not None and live and step in ("release", "pause",
                                                             "checkpoint", "renew"):
                    WRITES[step](hive, holder, number, lease.lease_id, lease.fencing_token)
                elif step == "owner_release" and state in (S.accepted, S.working):
                    hive.release(OWNER, number)
                elif step == "expire":
                    clock.advance(minutes=16)
                    hive.expire(OWNER)
                else:
                    continue
                if step in ("claim", "resume") and lease is not None:
                    tokens.append(lease.fencing_token)
                view = hive.get(number)
                assert (view.claim is not None) == (view.task.state in (S.accepted, S.working))
                if view.claim is not None:
                    assert view.claim.lease_id is None and view.claim.fencing_token is None
            assert tokens == sorted(set(tokens))
        finally:
            hive.close()
