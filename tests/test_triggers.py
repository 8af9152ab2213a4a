"""The triggers alone keep raw SQL inside the protocol.

Each case runs raw SQL through a second apsw connection on a real store file,
checks the exact ``code:reason`` of the abort, and checks that every table is
exactly as it was before the refused statement.
"""

from __future__ import annotations

import json
from typing import Any

import apsw
import pytest

from hivelite.core.errors import from_trigger
from hivelite.core.protocol import TERMINAL, State, WaitingOn

from . import rawsql

NOW = "2026-12-02T09:00:00.000Z"
LATER = "2026-12-02T10:00:00.000Z"


refused = rawsql.refused


def journal_count(conn: apsw.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM journal").get)


def task_row(conn: apsw.Connection, number: int) -> dict[str, Any]:
    cursor = conn.execute("SELECT * FROM tasks WHERE number = ?", (number,))
    values = cursor.fetchone()
    names = [d[0] for d in cursor.getdescription()]
    return dict(zip(names, values, strict=True))


# -- the journal is append-only --------------------------------------------------


@pytest.mark.parametrize("sql", [
    "UPDATE journal SET reason = 'rewritten' WHERE seq = 1",
    "UPDATE journal SET to_state = 'completed'",
    "UPDATE journal SET seq = seq + 100 WHERE seq = 2",
])
def test_journal_rows_cannot_be_updated(raw: apsw.Connection, sql: str) -> None:
    rawsql.put_in(raw, "t1", State.working)
    refused(raw, "forbidden_right:append_only", sql)


@pytest.mark.parametrize("sql", [
    "DELETE FROM journal WHERE seq = 1",
    "DELETE FROM journal",
])
def test_journal_rows_cannot_be_deleted(raw: apsw.Connection, sql: str) -> None:
    rawsql.put_in(raw, "t1", State.working)
    refused(raw, "forbidden_right:append_only", sql)


# -- tasks are kept, and born requested --------------------------------------


@pytest.mark.parametrize("state", [State.requested, State.working, State.completed,
                                   State.cancelled])
def test_a_task_cannot_be_deleted(raw: apsw.Connection, state: State) -> None:
    number = rawsql.put_in(raw, "t1", state)
    refused(raw, "forbidden_right:tasks_are_kept",
            "DELETE FROM tasks WHERE number = ?", (number,))


def test_no_task_can_be_deleted_at_all(raw: apsw.Connection) -> None:
    rawsql.put_in(raw, "t1", State.routed)
    rawsql.put_in(raw, "t2", State.rejected)
    refused(raw, "forbidden_right:tasks_are_kept", "DELETE FROM tasks")


INSERT = ("INSERT INTO tasks(id, state, waiting_on, lease_id, lease_token, project, requester,"
          " assignee, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'demo', 'ana/planner',"
          " 'ana/coder', ?, ?)")


@pytest.mark.parametrize("state", [s for s in State if s is not State.requested])
def test_a_task_is_inserted_only_as_requested(raw: apsw.Connection, state: State) -> None:
    waiting_on = WaitingOn.human.value if state is State.waiting else None
    refused(raw, "invalid_state:insert_not_requested", INSERT,
            ("t1", state.value, waiting_on, None, 0, NOW, NOW))


@pytest.mark.parametrize("waiting_on", [w.value for w in WaitingOn])
def test_a_requested_task_is_inserted_without_waiting_on(
    raw: apsw.Connection, waiting_on: str
) -> None:
    refused(raw, "invalid_state:insert_not_requested", INSERT,
            ("t1", "requested", waiting_on, None, 0, NOW, NOW))


def test_a_requested_task_is_inserted_without_a_lease(raw: apsw.Connection) -> None:
    refused(raw, "invalid_state:insert_not_requested", INSERT,
            ("t1", "requested", None, "lease-1", 1, NOW, NOW))


def test_an_inserted_task_is_journaled_as_created(raw: apsw.Connection) -> None:
    raw.execute(
        "INSERT INTO tasks(id, state, project, requester, assignee, created_at, updated_at,"
        " actor, reason, detail) VALUES ('t1', 'requested', 'demo', 'ana/planner',"
        " 'ana/coder', ?, ?, 'ana/planner', 'handoff', '{\"k\":1}')", (NOW, LATER))
    number = raw.last_insert_rowid()
    rows = list(raw.execute(
        "SELECT task, at, actor, from_state, to_state, waiting_on, reason, detail"
        " FROM journal"))
    assert rows == [(number, NOW, "ana/planner", None, "requested", None, "handoff",
                     '{"k":1}')]


# -- a terminal task is closed to every change ---------------------------------

TERMINAL_CHANGES = {
    "state_back": "state = 'routed'",
    "state_same": "state = state",
    "state_cancelled": "state = 'cancelled'",
    "reason": "reason = 'changed my mind'",
    "priority": "priority = 'high'",
    "labels": "labels = '[\"x\"]'",
    "updated_at": f"updated_at = '{LATER}'",
    "actor": "actor = 'ana'",
    "detail": "detail = '{}'",
    "fields_version": "fields_version = fields_version + 1",
    "lease_token": "lease_token = lease_token + 1",
    "lease": "lease_id = 'l9', lease_token = lease_token + 1",
    "waiting_on": "waiting_on = 'human'",
    "assignee": "assignee = 'ana/other'",
    "noop": "priority = priority",
}


@pytest.mark.parametrize("change", TERMINAL_CHANGES.values(), ids=TERMINAL_CHANGES.keys())
@pytest.mark.parametrize("state", sorted(TERMINAL))
def test_a_terminal_task_cannot_change(raw: apsw.Connection, state: State,
                                       change: str) -> None:
    number = rawsql.put_in(raw, "t1", state)
    refused(raw, "invalid_state:task_closed",
            f"UPDATE tasks SET {change} WHERE number = ?", (number,))


# -- waiting_on matches state --------------------------------------------------


@pytest.mark.parametrize("waiting_on", [w for w in WaitingOn])
def test_waiting_needs_waiting_on(raw: apsw.Connection, waiting_on: WaitingOn) -> None:
    number = rawsql.put_in(raw, "t1", State.waiting, waiting_on)
    refused(raw, "invalid_state:waiting_on_mismatch",
            "UPDATE tasks SET waiting_on = NULL WHERE number = ?", (number,))


@pytest.mark.parametrize("state", [s for s in State
                                   if s is not State.waiting and s not in TERMINAL])
def test_waiting_on_only_on_a_waiting_task(raw: apsw.Connection, state: State) -> None:
    number = rawsql.put_in(raw, "t1", state)
    refused(raw, "invalid_state:waiting_on_mismatch",
            "UPDATE tasks SET waiting_on = 'human' WHERE number = ?", (number,))


@pytest.mark.parametrize("value", ["bogus", "", "Human", "owner"])
def test_waiting_on_must_be_a_known_value(raw: apsw.Connection, value: str) -> None:
    number = rawsql.put_in(raw, "t1", State.waiting, WaitingOn.human)
    refused(raw, "invalid_state:waiting_on_mismatch",
            "UPDATE tasks SET waiting_on = ? WHERE number = ?", (value, number))


def test_a_move_out_of_waiting_must_clear_waiting_on(raw: apsw.Connection) -> None:
    number = rawsql.put_in(raw, "t1", State.waiting, WaitingOn.human)
    refused(raw, "invalid_state:waiting_on_mismatch",
            "UPDATE tasks SET state = 'working' WHERE number = ?", (number,))


@pytest.mark.parametrize("sql", [
    "UPDATE tasks SET state = 'waiting', waiting_on = NULL WHERE number = ?",
    "UPDATE tasks SET state = 'waiting', waiting_on = 'bogus' WHERE number = ?",
])
def test_a_move_into_waiting_needs_a_known_waiting_on(raw: apsw.Connection, sql: str) -> None:
    """Both checks apply here; whichever trigger runs first, the move is refused."""
    number = rawsql.put_in(raw, "t1", State.working)
    before = rawsql.snapshot(raw)
    with pytest.raises(apsw.Error) as info:
        raw.execute(sql, (number,))
    text = str(info.value)
    assert "invalid_state:no_such_move" in text or "invalid_state:waiting_on_mismatch" in text
    assert rawsql.snapshot(raw) == before


@pytest.mark.parametrize(("start", "value"), [
    (WaitingOn.human, WaitingOn.owner_approval),
    (WaitingOn.agent, WaitingOn.owner_approval),
    (WaitingOn.owner_approval, WaitingOn.human),
    (WaitingOn.human, WaitingOn.agent),
])
def test_waiting_on_cannot_change_without_a_move(
    raw: apsw.Connection, start: WaitingOn, value: WaitingOn
) -> None:
    """waiting(x) -> waiting(y) is no move; otherwise a paused task could be approved or
    denied (moves 4, 5 are only from owner_approval), and the journal, which records
    waiting_on only on a state change, would no longer replay to the task's waiting_on."""
    number = rawsql.put_in(raw, "t1", State.waiting, start)
    before = rawsql.snapshot(raw)
    with pytest.raises(apsw.Error) as info:
        raw.execute("UPDATE tasks SET waiting_on = ? WHERE number = ?", (value.value, number))
    assert "invalid_state:" in str(info.value)
    assert rawsql.snapshot(raw) == before


# -- a result exists from verifying on -----------------------------------------


def test_verifying_needs_a_result(raw: apsw.Connection) -> None:
    number = rawsql.put_in(raw, "t1", State.working)
    refused(raw, "invalid_state:result_missing",
            "UPDATE tasks SET state = 'verifying', lease_id = NULL WHERE number = ?", (number,))


def _drop_result(conn: apsw.Connection, number: int) -> None:
    """A verifying task without its result: results are kept by their own trigger, so lift
    that one first to reach the move check behind it."""
    conn.execute("DROP TRIGGER results_kept")
    conn.execute("DELETE FROM results WHERE task = ?", (number,))


@pytest.mark.parametrize("target", [State.approval, State.completed])
def test_approval_and_completed_need_a_result(raw: apsw.Connection, target: State) -> None:
    number = rawsql.put_in(raw, "t1", State.verifying)
    _drop_result(raw, number)
    refused(raw, "invalid_state:result_missing",
            "UPDATE tasks SET state = ? WHERE number = ?", (target.value, number))


def test_completed_from_approval_needs_a_result(raw: apsw.Connection) -> None:
    number = rawsql.put_in(raw, "t1", State.approval)
    _drop_result(raw, number)
    refused(raw, "invalid_state:result_missing",
            "UPDATE tasks SET state = 'completed' WHERE number = ?", (number,))


@pytest.mark.parametrize("state", [State.verifying, State.approval, State.completed])
def test_a_result_cannot_be_removed_from_verifying_on(
    raw: apsw.Connection, state: State
) -> None:
    """DESIGN §4: "a result exists from verifying on" - not only at the moment of the move."""
    number = rawsql.put_in(raw, "t1", state)
    before = rawsql.snapshot(raw)
    with pytest.raises(apsw.Error) as info:
        raw.execute("DELETE FROM results WHERE task = ?", (number,))
    assert from_trigger(info.value) is not None, f"not a code:reason abort: {info.value!r}"
    assert rawsql.snapshot(raw) == before


# -- fencing tokens and the live lease -----------------------------------------


CLAIMED_BY_CODER = ("lease_holder = 'ana/coder', lease_instance = 'laptop',"
                    " updated_at = '2026-12-02T09:00:00.000Z',"
                    " lease_expires = '2026-12-02T09:10:00.000Z'")
"""The rest of a claim as the store insists on it: the assignee's, for ten minutes."""


def _leased(conn: apsw.Connection, state: State = State.accepted) -> int:
    """A task in ``state`` holding lease ``l1`` with token 3 (its third claim)."""
    number = rawsql.put_in(conn, "t1", State.routed)
    for token in (1, 2, 3):
        conn.execute(f"UPDATE tasks SET state = 'accepted', lease_id = ?, lease_token = ?,"
                     f" {CLAIMED_BY_CODER} WHERE number = ?",
                     ("l1" if token == 3 else f"l0{token}", token, number))
        if token < 3:
            conn.execute("UPDATE tasks SET state = 'routed', lease_id = NULL, lease_holder ="
                         " NULL, lease_instance = NULL, lease_expires = NULL WHERE number = ?",
                         (number,))
    if state is State.working:
        conn.execute("UPDATE tasks SET state = 'working' WHERE number = ?", (number,))
    return number


@pytest.mark.parametrize("state", [State.accepted, State.working])
def test_fencing_token_cannot_go_down(raw: apsw.Connection, state: State) -> None:
    number = _leased(raw, state)
    refused(raw, "invalid_state:fencing_token",
            "UPDATE tasks SET lease_token = 2 WHERE number = ?", (number,))
    refused(raw, "invalid_state:fencing_token",
            "UPDATE tasks SET lease_token = 0, lease_id = NULL WHERE number = ?", (number,))


@pytest.mark.parametrize("token", [3, 2, 0])
def test_a_new_lease_must_raise_the_token(raw: apsw.Connection, token: int) -> None:
    number = _leased(raw)
    refused(raw, "invalid_state:fencing_token",
            "UPDATE tasks SET lease_id = 'l2', lease_token = ? WHERE number = ?",
            (token, number))


def test_a_lease_after_no_lease_must_raise_the_token(raw: apsw.Connection) -> None:
    number = _leased(raw)
    raw.execute("UPDATE tasks SET state = 'routed', lease_id = NULL WHERE number = ?",
                (number,))
    raw.execute(f"UPDATE tasks SET state = 'accepted', lease_id = 'l3', lease_token = 4,"
                f" {CLAIMED_BY_CODER} WHERE number = ?", (number,))
    raw.execute("UPDATE tasks SET state = 'routed', lease_id = NULL WHERE number = ?",
                (number,))
    for lease in ("l3", "l4"):  # neither the old id nor a new one, at the same token
        refused(raw, "invalid_state:fencing_token",
                f"UPDATE tasks SET state = 'accepted', lease_id = ?, lease_token = 4,"
                f" {CLAIMED_BY_CODER} WHERE number = ?", (lease, number))


def test_a_live_lease_is_replaced_only_by_a_claim(raw: apsw.Connection) -> None:
    """A higher token is not enough: a lease is taken only by a claim move."""
    number = _leased(raw)
    refused(raw, "forbidden_right:lease_by_claim_only",
            "UPDATE tasks SET lease_id = 'l2', lease_token = 4 WHERE number = ?", (number,))
    for column, value in (("lease_holder", "'ana/thief'"), ("lease_instance", "'elsewhere'"),
                          ("lease_session", "'s9'")):
        refused(raw, "forbidden_right:lease_by_claim_only",
                f"UPDATE tasks SET {column} = {value} WHERE number = ?", (number,))


@pytest.mark.parametrize("state", [State.requested, State.routed, State.waiting,
                                   State.verifying, State.approval])
def test_no_lease_outside_accepted_or_working(raw: apsw.Connection, state: State) -> None:
    waiting_on = WaitingOn.human if state is State.waiting else None
    number = rawsql.put_in(raw, "t1", state, waiting_on)
    refused(raw, "invalid_state:claim_outlives_state",
            "UPDATE tasks SET lease_id = 'l1', lease_token = lease_token + 1"
            " WHERE number = ?", (number,))


@pytest.mark.parametrize(("start", "target", "waiting_on"), [
    (State.accepted, State.routed, None),
    (State.working, State.routed, None),
    (State.working, State.waiting, WaitingOn.human),
    (State.working, State.verifying, None),
])
def test_a_move_out_of_a_claim_must_end_the_lease(
    raw: apsw.Connection, start: State, target: State, waiting_on: WaitingOn | None
) -> None:
    number = _leased(raw, start)
    raw.execute(
        "INSERT INTO results(task, body, worker, instance)"
        " VALUES (?, '{}', 'ana/coder', 'laptop')",
        (number,))
    refused(raw, "invalid_state:claim_outlives_state",
            "UPDATE tasks SET state = ?, waiting_on = ? WHERE number = ?",
            (target.value, waiting_on and waiting_on.value, number))
    # Ending the lease in the same statement makes it a legal move.
    raw.execute(
        "UPDATE tasks SET state = ?, waiting_on = ?, lease_id = NULL WHERE number = ?",
        (target.value, waiting_on and waiting_on.value, number))
    assert task_row(raw, number)["state"] == target.value


# -- immutable columns ---------------------------------------------------------

IMMUTABLE = {
    "id": "'other-id'",
    "number": "number + 1000",
    "requester": "'bob/planner'",
    "assignee": "'bob/coder'",
    "project": "'elsewhere'",
    "created_at": f"'{LATER}'",
}


@pytest.mark.parametrize("column", IMMUTABLE)
@pytest.mark.parametrize("state", [State.requested, State.working])
def test_immutable_columns(raw: apsw.Connection, state: State, column: str) -> None:
    number = rawsql.put_in(raw, "t1", state)
    refused(raw, "invalid_input:immutable_field",
            f"UPDATE tasks SET {column} = {IMMUTABLE[column]} WHERE number = ?", (number,))


def test_mutable_columns_can_change(raw: apsw.Connection) -> None:
    number = rawsql.put_in(raw, "t1", State.working)
    count = journal_count(raw)
    raw.execute(
        "UPDATE tasks SET priority = 'high', labels = '[\"a\"]', updated_at = ?,"
        " fields_version = 2 WHERE number = ?", (LATER, number))
    row = task_row(raw, number)
    assert (row["priority"], row["labels"], row["fields_version"]) == ("high", '["a"]', 2)
    assert journal_count(raw) == count  # not a state change: no journal row


# -- the moves table is fixed ----------------------------------------------------


@pytest.mark.parametrize("sql", [
    "INSERT INTO moves(number, name, from_state, to_state)"
    " VALUES (23, 'shortcut', 'requested', 'completed')",
    "UPDATE moves SET to_state = 'completed' WHERE number = 1",
    "UPDATE moves SET from_waiting = NULL WHERE number = 4",
    "DELETE FROM moves WHERE number = 22",
    "DELETE FROM moves",
])
def test_moves_table_is_fixed(raw: apsw.Connection, sql: str) -> None:
    refused(raw, "forbidden_right:protocol_fixed", sql)


# -- a legal move is journaled exactly once ------------------------------------


def test_a_legal_raw_move_writes_one_journal_row(raw: apsw.Connection) -> None:
    number = rawsql.put_in(raw, "t1", State.routed)
    other = rawsql.put_in(raw, "t2", State.routed)
    last = raw.execute("SELECT max(seq) FROM journal").get
    raw.execute(
        "UPDATE tasks SET state = 'accepted', updated_at = ?, actor = 'ana/coder',"
        " reason = 'claimed', detail = ?, lease_id = 'l1', lease_token = 1,"
        " lease_holder = 'ana/coder', lease_instance = 'laptop',"
        " lease_expires = strftime('%Y-%m-%dT%H:%M:%fZ', ?, '+10 minutes')"
        " WHERE number = ?", (LATER, json.dumps({"token": 1}), LATER, number))
    rows = list(raw.execute(
        "SELECT seq, task, at, actor, from_state, to_state, waiting_on, reason, detail"
        " FROM journal WHERE seq > ?", (last,)))
    assert rows == [(last + 1, number, LATER, "ana/coder", "routed", "accepted", None,
                     "claimed", '{"token": 1}')]
    assert task_row(raw, other)["state"] == "routed"


def test_a_legal_move_into_waiting_journals_waiting_on(raw: apsw.Connection) -> None:
    number = rawsql.put_in(raw, "t1", State.working)
    last = raw.execute("SELECT max(seq) FROM journal").get
    raw.execute(
        "UPDATE tasks SET state = 'waiting', waiting_on = 'agent', actor = 'ana/coder',"
        " reason = 'asked ana/reviewer', lease_id = NULL WHERE number = ?", (number,))
    rows = list(raw.execute(
        "SELECT task, actor, from_state, to_state, waiting_on, reason FROM journal"
        " WHERE seq > ?", (last,)))
    assert rows == [(number, "ana/coder", "working", "waiting", "agent", "asked ana/reviewer")]


def test_a_non_state_update_writes_no_journal_row(raw: apsw.Connection) -> None:
    number = rawsql.put_in(raw, "t1", State.routed)
    count = journal_count(raw)
    raw.execute("UPDATE tasks SET reason = 'note', actor = 'ana' WHERE number = ?", (number,))
    assert journal_count(raw) == count


def test_every_put_in_step_is_journaled(raw: apsw.Connection) -> None:
    number = rawsql.put_in(raw, "t1", State.completed)
    path = [(None, "requested")] + [
        (a.value, b.value) for a, b in zip(
            [State.requested, State.routed, State.accepted, State.working, State.verifying],
            [State.routed, State.accepted, State.working, State.verifying, State.completed],
            strict=True)
    ]
    rows = list(raw.execute(
        "SELECT from_state, to_state FROM journal WHERE task = ? ORDER BY seq", (number,)))
    assert rows == path
