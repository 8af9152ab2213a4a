"""The owner's verbs: approve, deny, cancel; and the read verbs list and history.

DESIGN §3 moves 4, 5 and 18-22, §7 errors, §8 identity and limits. Tasks in
any state are made with raw SQL along legal moves (``rawsql.put_in``), and a
refused call must leave every row of the store as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from hivelite import (
    Caller,
    ForbiddenRight,
    Hive,
    InvalidInput,
    InvalidState,
    ManualClock,
    NotFound,
    Receipt,
    State,
    WaitingOn,
)

from . import rawsql
from .conftest import OWNER, PLANNER, held_task, own_task, packet

pytestmark = pytest.mark.contract

S, W = State, WaitingOn

# Every (state, waiting_on) a task can be in, but waiting on the owner.
NOT_AWAITING_OWNER: list[tuple[State, WaitingOn | None]] = [
    (S.requested, None), (S.routed, None), (S.accepted, None), (S.working, None),
    (S.waiting, W.human), (S.waiting, W.agent), (S.verifying, None), (S.approval, None),
    (S.completed, None), (S.rejected, None), (S.cancelled, None),
]
CANCELLABLE: list[tuple[State, WaitingOn | None]] = [
    (S.requested, None), (S.waiting, W.owner_approval), (S.waiting, W.human),
    (S.waiting, W.agent), (S.routed, None), (S.accepted, None), (S.working, None),
]
CANCEL_MOVE = {S.requested: 18, S.waiting: 19, S.routed: 20, S.accepted: 21, S.working: 22}
NOT_CANCELLABLE: list[tuple[State, WaitingOn | None, str]] = [
    (S.verifying, None, "not_cancellable"), (S.approval, None, "not_cancellable"),
    (S.completed, None, "task_closed"), (S.rejected, None, "task_closed"),
    (S.cancelled, None, "task_closed"),
]
VERBS = ["approve", "deny", "cancel"]
LEASE_COLUMNS = ("lease_id", "lease_holder", "lease_instance", "lease_session", "lease_expires")


def label(where: tuple[State, WaitingOn | None]) -> str:
    state, on = where
    return f"{state.value}({on.value})" if on else state.value


@pytest.fixture
def raw(hive: Hive, db_path: Path) -> Iterator[apsw.Connection]:
    """A second connection on the same store (opened after the hive made the schema)."""
    conn = rawsql.connect(db_path)
    yield conn
    conn.close()



def verb(hive: Hive, name: str) -> Callable[..., Receipt]:
    return getattr(hive, name)  # type: ignore[no-any-return]


def task_row(raw: apsw.Connection, number: int) -> dict[str, Any]:
    cursor = raw.execute("SELECT * FROM tasks WHERE number = ?", (number,))
    names = [d[0] for d in cursor.getdescription()]
    values = cursor.fetchone()
    return dict(zip(names, values, strict=True))


def set_lease(raw: apsw.Connection, number: int) -> None:
    """Claim a routed task by raw SQL, as a claim leaves it (the next token, ten minutes)."""
    raw.execute(
        "UPDATE tasks SET state = 'accepted', lease_id = 'Lraw0001',"
        " lease_token = lease_token + 1, lease_holder = 'ana/coder',"
        " lease_instance = 'laptop', lease_session = 's1',"
        " updated_at = '2026-12-02T09:00:00.000Z',"
        " lease_expires = '2026-12-02T09:10:00.000Z' WHERE number = ?",
        (number,),
    )


# -- approve and deny: only from waiting(owner_approval) ----------------------


@pytest.mark.parametrize("name", ["approve", "deny"])
@pytest.mark.parametrize("where", NOT_AWAITING_OWNER, ids=label)
def test_approve_and_deny_refused_unless_awaiting_owner(
    hive: Hive, raw: apsw.Connection, snap: Callable[[], Any], name: str,
    where: tuple[State, WaitingOn | None],
) -> None:
    number = rawsql.put_in(raw, "t-" + label(where).replace("(", "-").rstrip(")"), *where)
    assert (hive.get(number).task.state, hive.get(number).task.waiting_on) == where
    before, journal_before = snap(), hive.journal()
    with pytest.raises(InvalidState) as err:
        verb(hive, name)(OWNER, number)
    closed = where[0] in (S.completed, S.rejected, S.cancelled)
    assert err.value.reason == ("task_closed" if closed else "not_awaiting_owner")
    assert err.value.status == 409
    assert err.value.code == "invalid_state"
    assert snap() == before
    assert hive.journal() == journal_before


@pytest.mark.parametrize("name", ["approve", "deny"])
def test_approve_and_deny_work_on_a_raw_task_awaiting_owner(
    hive: Hive, raw: apsw.Connection, name: str
) -> None:
    number = rawsql.put_in(raw, "held-raw", S.waiting, W.owner_approval)
    receipt = verb(hive, name)(OWNER, number)
    expected = S.routed if name == "approve" else S.rejected
    assert (receipt.number, receipt.id) == (number, "held-raw")
    assert receipt.state is expected
    assert receipt.waiting_on is None
    assert receipt.seq == hive.history(number)[-1].seq
    view = hive.get(number)
    assert view.task.state is expected
    assert view.task.waiting_on is None


def test_approve_routes_as_move_4(hive: Hive) -> None:
    number = held_task(hive)
    receipt = hive.approve(OWNER, number, reason="guest is a friend")
    assert (receipt.state, receipt.waiting_on) == (S.routed, None)
    last = hive.history(number)[-1]
    assert receipt.seq == last.seq
    assert receipt.at == last.at
    assert last.move == 4
    assert (last.from_state, last.to_state) == (S.waiting, S.routed)
    assert last.actor == "ana"
    assert last.reason == "guest is a friend"
    view = hive.get(number)
    assert (view.task.state, view.task.waiting_on) == (S.routed, None)
    assert view.last_reason == "guest is a friend"


def test_deny_rejects_as_move_5(hive: Hive) -> None:
    number = held_task(hive)
    receipt = hive.deny(OWNER, number, reason="not this week")
    assert (receipt.state, receipt.waiting_on) == (S.rejected, None)
    view = hive.get(number)
    assert (view.task.state, view.task.waiting_on) == (S.rejected, None)
    last = hive.history(number)[-1]
    assert receipt.seq == last.seq
    assert last.move == 5
    assert (last.from_state, last.to_state) == (S.waiting, S.rejected)
    assert last.actor == "ana"
    assert last.reason == "not this week"


def test_approve_and_deny_by_id(hive: Hive) -> None:
    first, second = held_task(hive, id="held-a"), held_task(hive, id="held-b")
    assert hive.approve(OWNER, "held-a").number == first
    assert hive.deny(OWNER, "held-b").number == second
    assert hive.get(first).task.state is S.routed
    assert hive.get(second).task.state is S.rejected


def test_approve_without_reason_still_journals_a_reason(hive: Hive) -> None:
    number = held_task(hive)
    hive.approve(OWNER, number)
    assert hive.history(number)[-1].reason  # something the owner can read later


@pytest.mark.parametrize("name", VERBS)
def test_blank_reason_is_not_journaled_blank(hive: Hive, name: str) -> None:
    """A whitespace-only reason is either refused or read as no reason, never stored blank."""
    number = _target(hive, name)
    try:
        verb(hive, name)(OWNER, number, reason="   ")
    except InvalidInput:
        return
    reason = hive.history(number)[-1].reason
    assert reason is not None and reason.strip()


def test_denied_task_is_closed(hive: Hive, snap: Callable[[], Any]) -> None:
    number = held_task(hive)
    hive.deny(OWNER, number)
    before = snap()
    for name in VERBS:
        with pytest.raises(InvalidState) as err:
            verb(hive, name)(OWNER, number)
        assert err.value.reason == "task_closed"
    assert snap() == before


# -- cancel ---------------------------------------------------------------------


@pytest.mark.parametrize("where", CANCELLABLE, ids=label)
def test_cancel_open_task(hive: Hive, raw: apsw.Connection,
                          where: tuple[State, WaitingOn | None]) -> None:
    number = rawsql.put_in(raw, "c-" + label(where).replace("(", "-").rstrip(")"), *where)
    journal_before = len(hive.journal())
    receipt = hive.cancel(OWNER, number, reason="plans changed")
    assert (receipt.state, receipt.waiting_on) == (S.cancelled, None)
    view = hive.get(number)
    assert (view.task.state, view.task.waiting_on) == (S.cancelled, None)
    assert view.claim is None
    journal = hive.journal()
    assert len(journal) == journal_before + 1
    last = journal[-1]
    assert receipt.seq == last.seq
    assert last.number == number
    assert (last.from_state, last.to_state) == (where[0], S.cancelled)
    assert last.move == CANCEL_MOVE[where[0]]
    assert last.actor == "ana"
    assert last.reason == "plans changed"
    assert hive.history(number)[-1] == last


@pytest.mark.parametrize("state, on, reason", NOT_CANCELLABLE,
                         ids=[s.value for s, _, _ in NOT_CANCELLABLE])
def test_cancel_refused(hive: Hive, raw: apsw.Connection, snap: Callable[[], Any],
                        state: State, on: WaitingOn | None, reason: str) -> None:
    number = rawsql.put_in(raw, "nc-" + state.value, state, on)
    before, journal_before = snap(), hive.journal()
    with pytest.raises(InvalidState) as err:
        hive.cancel(OWNER, number, reason="too late")
    assert err.value.reason == reason
    assert err.value.status == 409
    assert snap() == before
    assert hive.journal() == journal_before


@pytest.mark.parametrize("state", [S.accepted, S.working])
def test_cancel_ends_the_claim(hive: Hive, raw: apsw.Connection, state: State) -> None:
    number = rawsql.put_in(raw, "leased", S.routed)
    set_lease(raw, number)
    if state is S.working:
        rawsql.set_state(raw, number, S.working)
    claim = hive.get(number).claim
    assert claim is not None and claim.holder == "ana/coder"
    assert task_row(raw, number)["lease_id"] == "Lraw0001"

    receipt = hive.cancel(OWNER, number, reason="no longer needed")

    assert receipt.state is S.cancelled
    view = hive.get(number)
    assert view.task.state is S.cancelled
    assert view.claim is None
    row = task_row(raw, number)
    assert {c: row[c] for c in LEASE_COLUMNS} == dict.fromkeys(LEASE_COLUMNS)
    assert row["lease_token"] >= 1  # fencing tokens never go back
    last = hive.history(number)[-1]
    assert (last.from_state, last.to_state, last.actor) == (state, S.cancelled, "ana")
    assert last.move == CANCEL_MOVE[state]


def test_cancel_after_the_claim_expired(hive: Hive, raw: apsw.Connection,
                                        clock: ManualClock) -> None:
    """An expired claim first goes back to routed (DESIGN §5), then the cancel applies."""
    number = rawsql.put_in(raw, "expired", S.routed)
    set_lease(raw, number)  # expires 09:10
    clock.advance(minutes=30)
    receipt = hive.cancel(OWNER, number, reason="stale")
    assert receipt.state is S.cancelled
    assert receipt.seq == hive.history(number)[-1].seq
    view = hive.get(number)
    assert view.task.state is S.cancelled
    assert view.claim is None
    row = task_row(raw, number)
    assert {c: row[c] for c in LEASE_COLUMNS} == dict.fromkeys(LEASE_COLUMNS)
    tail = [(r.from_state, r.to_state, r.actor) for r in hive.history(number)[-2:]]
    assert tail == [(S.accepted, S.routed, "clock"), (S.routed, S.cancelled, "ana")]


def test_cancel_held_and_routed_tasks_made_by_handoff(hive: Hive) -> None:
    held, routed = held_task(hive), own_task(hive)
    assert hive.cancel(OWNER, held).state is S.cancelled
    assert hive.cancel(OWNER, routed, reason="dup").state is S.cancelled
    assert hive.get(held).task.state is hive.get(routed).task.state is S.cancelled
    assert hive.history(held)[-1].move == 19
    assert hive.history(routed)[-1].move == 20
    assert hive.history(routed)[-1].reason == "dup"


# -- only the owner, as a person ----------------------------------------------


def _target(hive: Hive, name: str) -> int:
    return held_task(hive) if name in ("approve", "deny") else own_task(hive)


AGENTS = ["ana/coder", "ana/planner", "bob/coder", "guest/scout"]


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("name", VERBS)
def test_an_agent_may_not(hive: Hive, snap: Callable[[], Any], name: str, agent: str) -> None:
    """Even the owner's own agents: approve, deny and cancel are the owner's, as a person."""
    number = _target(hive, name)
    before, journal_before = snap(), hive.journal()
    with pytest.raises(ForbiddenRight) as err:
        verb(hive, name)(Caller.agent(agent, "laptop", "s1"), number, reason="because")
    assert err.value.reason == "not_permitted"
    assert err.value.status == 403
    assert err.value.code == "forbidden_right"
    assert snap() == before
    assert hive.journal() == journal_before


@pytest.mark.parametrize("caller", [Caller.owner("bob"), Caller.owner("ana-x")], ids=str)
@pytest.mark.parametrize("name", VERBS)
def test_another_owner_is_not_this_stores_owner(hive: Hive, snap: Callable[[], Any],
                                                name: str, caller: Caller) -> None:
    """An owner caller must be this store's owner, exactly."""
    number = _target(hive, name)
    before, journal_before = snap(), hive.journal()
    with pytest.raises(ForbiddenRight) as err:
        verb(hive, name)(caller, number, reason="because")
    assert err.value.reason == "not_owner"
    assert err.value.status == 403
    assert err.value.code == "forbidden_right"
    assert snap() == before
    assert hive.journal() == journal_before


@pytest.mark.file_only
@pytest.mark.parametrize("caller", [None, "ana", "ana/coder", {"kind": "owner", "name": "ana"}],
                         ids=repr)
@pytest.mark.parametrize("name", VERBS)
def test_a_missing_caller_is_never_the_owner(hive: Hive, snap: Callable[[], Any], name: str,
                                             caller: object) -> None:
    """No caller (or a name instead of a Caller) is refused, not taken as the owner."""
    number = _target(hive, name)
    before, journal_before = snap(), hive.journal()
    with pytest.raises(InvalidInput) as err:
        verb(hive, name)(caller, number, reason="because")
    assert err.value.reason == "caller_required"
    assert err.value.status == 422
    assert err.value.code == "invalid_input"
    assert snap() == before
    assert hive.journal() == journal_before


@pytest.mark.parametrize(("build", "reason"), [
    (lambda: Caller.owner("Ana"), "invalid_owner"),
    (lambda: Caller.owner("bob/coder"), "invalid_owner"),
    (lambda: Caller.agent("bob", "laptop"), "invalid_agent"),
    (lambda: Caller.agent("Ana/coder", "laptop"), "invalid_agent"),
    (lambda: Caller.agent("ana/coder", "my laptop"), "invalid_instance"),
    (lambda: Caller.agent("ana/coder", "laptop", "a/b"), "invalid_session"),
    (lambda: Caller("owner", "Ana"), "invalid_owner"),
    (lambda: Caller("agent", "ana/coder"), "invalid_instance"),
    (lambda: Caller("owner", "ana", "laptop"), "invalid_caller"),
    (lambda: Caller("person", "ana"), "invalid_caller"),  # type: ignore[arg-type]
], ids=["owner-Ana", "owner-agent-name", "agent-bob", "agent-Ana", "instance", "session",
        "direct-owner-Ana", "direct-agent-no-instance", "direct-owner-instance",
        "direct-kind"])
@pytest.mark.parametrize("name", VERBS)
def test_a_malformed_caller_is_refused_before_the_verb(
    hive: Hive, snap: Callable[[], Any], name: str, build: Callable[[], Caller], reason: str,
) -> None:
    """Names that are no owner or agent fail when the caller is built: nothing is written."""
    number = _target(hive, name)
    before, journal_before = snap(), hive.journal()
    with pytest.raises(InvalidInput) as err:
        verb(hive, name)(build(), number, reason="because")
    assert err.value.reason == reason
    assert err.value.status == 422
    assert snap() == before
    assert hive.journal() == journal_before


@pytest.mark.parametrize("owner", [lambda hive: OWNER, lambda hive: hive.as_owner()],
                         ids=["OWNER", "as_owner"])
@pytest.mark.parametrize("name", VERBS)
def test_the_owner_may(hive: Hive, name: str, owner: Callable[[Hive], Caller]) -> None:
    number = _target(hive, name)
    receipt = verb(hive, name)(owner(hive), number)
    expected = {"approve": S.routed, "deny": S.rejected, "cancel": S.cancelled}[name]
    assert receipt.state is expected
    assert hive.get(number).task.state is expected
    last = hive.history(number)[-1]
    assert last.actor == "ana"
    assert receipt.seq == last.seq


# -- reasons, unknown tasks ---------------------------------------------------


@pytest.mark.parametrize("name", VERBS)
def test_reason_over_500_characters_refused(hive: Hive, snap: Callable[[], Any],
                                            name: str) -> None:
    number = _target(hive, name)
    before, journal_before = snap(), hive.journal()
    with pytest.raises(InvalidInput) as err:
        verb(hive, name)(OWNER, number, reason="x" * 501)
    assert err.value.status == 422
    assert snap() == before
    assert hive.journal() == journal_before
    # 500 is still allowed, and is kept whole.
    verb(hive, name)(OWNER, number, reason="y" * 500)
    assert hive.history(number)[-1].reason == "y" * 500


@pytest.mark.parametrize("ref", ["no-such-task", 999, "999"], ids=["id", "number", "number-text"])
@pytest.mark.parametrize("name", VERBS)
def test_unknown_task_not_found(hive: Hive, snap: Callable[[], Any], name: str,
                                ref: str | int) -> None:
    held_task(hive)
    before = snap()
    with pytest.raises(NotFound) as err:
        verb(hive, name)(OWNER, ref)
    assert err.value.status == 404
    assert snap() == before


def test_history_of_unknown_task_not_found(hive: Hive) -> None:
    with pytest.raises(NotFound):
        hive.history("nope")
    with pytest.raises(NotFound):
        hive.history(1)


# -- list ---------------------------------------------------------------------


@pytest.fixture
def mixed(hive: Hive, clock: ManualClock) -> dict[str, list[int]]:
    """Nine tasks across states, assignees, requesters and projects, a millisecond apart."""
    made: dict[str, list[int]] = {"routed": [], "waiting": [], "cancelled": [],
                                  "rejected": []}

    def make(kind: str, **fields: Any) -> int:
        number = (held_task if kind == "held" else own_task)(hive, **fields)
        clock.advance(milliseconds=1)
        return number

    made["routed"].append(make("own"))                                       # 1
    made["waiting"].append(make("held", project="web"))                      # 2
    made["routed"].append(make("own", assignee="ana/writer"))                # 3
    made["waiting"].append(make("held", assignee="ana/writer"))              # 4
    made["routed"].append(make("own", project="web"))                        # 5
    c = make("own", requester="ana/lead")                                    # 6
    hive.cancel(OWNER, c)
    made["cancelled"].append(c)
    d = make("held", project="web")                                          # 7
    hive.deny(OWNER, d)
    made["rejected"].append(d)
    made["routed"].append(make("own", requester="ana/lead", project="web"))  # 8
    made["waiting"].append(make("held"))                                     # 9
    return made


def numbers(page: Any) -> list[int]:
    return [v.number for v in page.items]


def test_list_everything_in_creation_order(hive: Hive, mixed: dict[str, list[int]]) -> None:
    page = hive.list()
    assert numbers(page) == list(range(1, 10))
    assert page.next_cursor is None
    created = [v.task.created_at for v in page.items]
    assert created == sorted(created)
    assert numbers(hive.list()) == numbers(page)  # stable


@pytest.mark.parametrize("state", ["routed", S.routed, ["routed"]])
def test_list_by_one_state(hive: Hive, mixed: dict[str, list[int]], state: Any) -> None:
    page = hive.list(state=state)
    assert numbers(page) == mixed["routed"]
    assert {v.task.state for v in page.items} == {S.routed}


def test_list_by_several_states(hive: Hive, mixed: dict[str, list[int]]) -> None:
    page = hive.list(state=["waiting", S.cancelled, "rejected"])
    assert numbers(page) == sorted(mixed["waiting"] + mixed["cancelled"] + mixed["rejected"])
    assert numbers(hive.list(state=("completed",))) == []


def test_list_by_assignee_requester_project(hive: Hive, mixed: dict[str, list[int]]) -> None:
    assert numbers(hive.list(assignee="ana/writer")) == [3, 4]
    assert numbers(hive.list(requester="ana/lead")) == [6, 8]
    assert numbers(hive.list(requester="guest/scout")) == [2, 4, 7, 9]
    assert numbers(hive.list(project="web")) == [2, 5, 7, 8]
    assert numbers(hive.list(project="web", state="routed")) == [5, 8]
    assert numbers(hive.list(project="web", requester="ana/lead")) == [8]
    assert numbers(hive.list(assignee="ana/writer", state=["waiting"])) == [4]
    assert numbers(hive.list(assignee="nobody/here")) == []
    for v in hive.list(project="web").items:
        assert v.task.project == "web"


def test_list_pages_walk_every_task_once(hive: Hive, clock: ManualClock) -> None:
    made = []
    for i in range(23):
        made.append(held_task(hive) if i % 3 == 0 else own_task(hive))
        clock.advance(milliseconds=1)
    for limit in (1, 4, 5, 23, 500):
        seen: list[int] = []
        cursor = None
        pages = 0
        while True:
            page = hive.list(limit=limit, cursor=cursor)
            pages += 1
            assert len(page.items) <= limit
            seen.extend(numbers(page))
            if page.next_cursor is None:
                break
            assert len(page.items) == limit
            cursor = page.next_cursor
        assert seen == made, limit
        assert pages == -(-23 // limit), limit  # no empty trailing page


def test_list_pages_with_a_filter(hive: Hive, clock: ManualClock) -> None:
    for i in range(12):
        (held_task if i % 2 else own_task)(hive)
        clock.advance(milliseconds=1)
    seen: list[int] = []
    cursor = None
    while True:
        page = hive.list(state="waiting", limit=2, cursor=cursor)
        seen.extend(numbers(page))
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [2, 4, 6, 8, 10, 12]


@pytest.mark.parametrize("limit", [0, -1, 501, 10_000])
def test_list_limit_out_of_range(hive: Hive, limit: int) -> None:
    own_task(hive)
    with pytest.raises(InvalidInput) as err:
        hive.list(limit=limit)
    assert err.value.status == 422


def test_list_limit_bounds_allowed(hive: Hive) -> None:
    own_task(hive)
    own_task(hive)
    assert numbers(hive.list(limit=1)) == [1]
    assert numbers(hive.list(limit=500)) == [1, 2]


@pytest.mark.parametrize("state", ["done", "Routed", ["routed", "nope"], "owner_approval"])
def test_list_unknown_state_filter(hive: Hive, state: Any) -> None:
    own_task(hive)
    with pytest.raises(InvalidInput) as err:
        hive.list(state=state)
    assert err.value.status == 422


def test_list_empty_store(hive: Hive) -> None:
    page = hive.list()
    assert page.items == []
    assert page.next_cursor is None


# -- history ------------------------------------------------------------------


def test_history_creation_gate_then_owner(hive: Hive) -> None:
    other = own_task(hive)  # another task's rows must not appear
    number = held_task(hive)
    hive.cancel(OWNER, other)
    receipt = hive.approve(OWNER, number, reason="ok by me")
    rows = hive.history(number)

    assert len(rows) == 3
    created, gated, approved = rows
    assert [r.seq for r in rows] == sorted(r.seq for r in rows)
    assert {r.number for r in rows} == {number}
    assert {r.task for r in rows} == {receipt.id}
    assert receipt.seq == rows[-1].seq

    assert created.from_state is None
    assert created.to_state is S.requested
    assert created.actor == "guest/scout"
    assert created.move is None

    assert (gated.from_state, gated.to_state) == (S.requested, S.waiting)
    assert gated.waiting_on is W.owner_approval
    assert gated.actor == "gate"
    assert gated.move == 2

    assert (approved.from_state, approved.to_state) == (S.waiting, S.routed)
    assert approved.actor == "ana"
    assert approved.reason == "ok by me"
    assert approved.move == 4


@pytest.mark.parametrize("by", [OWNER, PLANNER], ids=str)
def test_history_of_a_routed_then_cancelled_task(hive: Hive, clock: ManualClock,
                                                 by: Caller) -> None:
    """The creation row names who handed off: the owner for an agent, or the agent itself."""
    number = hive.handoff(by, requester="ana/planner", assignee="ana/coder", project="demo",
                          packet=packet()).number
    clock.advance(seconds=5)
    hive.cancel(OWNER, number, reason="changed my mind")
    rows = hive.history(number)
    assert [(r.from_state, r.to_state, r.actor, r.move) for r in rows] == [
        (None, S.requested, by.name, None),
        (S.requested, S.routed, "gate", 1),
        (S.routed, S.cancelled, "ana", 20),
    ]
    assert rows[0].at == rows[1].at < rows[2].at
    assert rows[-1].reason == "changed my mind"
    assert hive.history(hive.get(number).task.id) == rows
