"""The protocol, proven twice: by raw SQL against the triggers and through the guard.

Every raw-SQL test works on a real store file in ``tmp_path`` through a second
apsw connection (``tests/rawsql.py``), so only the triggers stand between the
SQL and the file.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import apsw
import pytest

from hivelite import InvalidState
from hivelite.core.diagrams import protocol_page
from hivelite.core.protocol import (
    MOVES,
    MOVES_BY_PAIR,
    TERMINAL,
    State,
    WaitingOn,
    find_move,
)
from hivelite.store import move_rows
from hivelite.verbs.guard import check_move

from . import rawsql

ROOT = Path(__file__).resolve().parent.parent
WITH_RESULT = (State.verifying, State.approval, State.completed)
PAIRS = list(itertools.product(State, State))
LEGAL = {m.pair for m in MOVES}


def _source_waiting(source: State, target: State) -> WaitingOn | None:
    """The representative ``waiting_on`` of the source, or one the move needs.

    ``waiting -> routed`` and ``waiting -> rejected`` exist only from
    ``owner_approval``; from the representative ``human`` they are refused (see
    the qualifier tests), so the pair-level matrix starts those two from the
    value the move allows.
    """
    move = MOVES_BY_PAIR.get((source, target))
    if source is State.waiting and move is not None and move.from_waiting:
        return move.from_waiting[0]
    return rawsql.REPRESENTATIVE[source][1]


def _target_waiting(source: State, target: State) -> WaitingOn | None:
    """A ``waiting_on`` for a target in ``waiting``: one the move allows, else ``human``."""
    if target is not State.waiting:
        return None
    move = MOVES_BY_PAIR.get((source, target))
    if move is not None:
        return move.to_waiting[0]
    return WaitingOn.human


def _pair_id(pair: tuple[State, State]) -> str:
    return f"{pair[0].value}->{pair[1].value}"


def _expected_reason(source: State) -> str:
    return "task_closed" if source in TERMINAL else "no_such_move"


def _state_of(conn: apsw.Connection, number: int) -> tuple[str, str | None]:
    row = conn.execute(
        "SELECT state, waiting_on FROM tasks WHERE number = ?", (number,)).fetchone()
    return row[0], row[1]


# -- the moves by raw SQL ------------------------------------------------------


def test_matrix_has_22_legal_and_78_refused_pairs() -> None:
    assert len(PAIRS) == 100
    assert len(LEGAL) == 22
    assert sum(1 for p in PAIRS if p not in LEGAL) == 78
    assert all((s, s) not in LEGAL for s in State)


@pytest.mark.parametrize("pair", sorted(LEGAL, key=_pair_id), ids=_pair_id)
def test_raw_sql_takes_each_legal_move_with_one_journal_row(
        raw: apsw.Connection, pair: tuple[State, State]) -> None:
    """Each of the 22 moves by raw SQL stands and writes exactly one journal row. (The 78
    refused pairs are cases of the raw-SQL attack suite, ``tests/test_attacks.py``.)"""
    source, target = pair
    from_waiting = _source_waiting(source, target)
    to_waiting = _target_waiting(source, target)
    number = rawsql.put_in(raw, "t1", source, from_waiting)
    assert _state_of(raw, number) == (source.value, from_waiting and from_waiting.value)
    if target in WITH_RESULT and source is State.working:
        # set_state adds the holder's result in a statement of its own before the
        # UPDATE; add it first, so the count isolates the UPDATE itself. (Only the
        # holder returns a result, so only a working task takes one.)
        raw.execute(
            "INSERT INTO results(task, body, worker, instance, threshold)"
            " VALUES (?, '{}', 'ana/coder', 'laptop', 0)", (number,))
    journal_before = raw.execute("SELECT count(*) FROM journal").get
    rawsql.set_state(raw, number, target, to_waiting)
    assert _state_of(raw, number) == (target.value, to_waiting and to_waiting.value)
    assert raw.execute("SELECT count(*) FROM journal").get == journal_before + 1
    last = raw.execute(
        "SELECT from_state, to_state, waiting_on FROM journal ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    assert last == (source.value, target.value, to_waiting and to_waiting.value)


# -- the waiting_on qualifiers -------------------------------------------------

QUALIFIED_REFUSALS = [
    # (source, source waiting_on, target, target waiting_on)
    (State.waiting, WaitingOn.human, State.routed, None),
    (State.waiting, WaitingOn.agent, State.routed, None),
    (State.waiting, WaitingOn.human, State.rejected, None),
    (State.waiting, WaitingOn.agent, State.rejected, None),
    (State.waiting, WaitingOn.owner_approval, State.working, None),
    (State.working, None, State.waiting, WaitingOn.owner_approval),
    (State.requested, None, State.waiting, WaitingOn.human),
    (State.requested, None, State.waiting, WaitingOn.agent),
]

QUALIFIED_MOVES = [
    (State.waiting, WaitingOn.owner_approval, State.routed, None),
    (State.waiting, WaitingOn.owner_approval, State.rejected, None),
    (State.waiting, WaitingOn.human, State.working, None),
    (State.waiting, WaitingOn.agent, State.working, None),
    (State.working, None, State.waiting, WaitingOn.human),
    (State.working, None, State.waiting, WaitingOn.agent),
    (State.requested, None, State.waiting, WaitingOn.owner_approval),
    *((State.waiting, w, State.cancelled, None) for w in WaitingOn),
]


def _qual_id(case: tuple[State, WaitingOn | None, State, WaitingOn | None]) -> str:
    src, src_w, dst, dst_w = case
    left = f"{src.value}({src_w.value})" if src_w else src.value
    right = f"{dst.value}({dst_w.value})" if dst_w else dst.value
    return f"{left}->{right}"


# -- the 10x10 matrix through the guard ----------------------------------------


@pytest.mark.parametrize("pair", PAIRS, ids=_pair_id)
def test_guard_matrix(pair: tuple[State, State]) -> None:
    source, target = pair
    from_waiting = _source_waiting(source, target)
    to_waiting = _target_waiting(source, target)
    if pair in LEGAL:
        move = check_move(source, from_waiting, target, to_waiting)
        assert move is MOVES_BY_PAIR[pair]
        # The guard takes the store's plain strings too.
        assert check_move(source.value, from_waiting and from_waiting.value, target,
                          to_waiting) is move
    else:
        with pytest.raises(InvalidState) as info:
            check_move(source, from_waiting, target, to_waiting)
        assert info.value.code == "invalid_state"
        assert info.value.status == 409
        assert info.value.reason == _expected_reason(source)


@pytest.mark.parametrize("case", QUALIFIED_REFUSALS, ids=_qual_id)
def test_guard_refuses_wrong_waiting_on(
    case: tuple[State, WaitingOn | None, State, WaitingOn | None]
) -> None:
    source, from_waiting, target, to_waiting = case
    with pytest.raises(InvalidState) as info:
        check_move(source, from_waiting, target, to_waiting)
    assert info.value.reason == "no_such_move"


@pytest.mark.parametrize("case", QUALIFIED_MOVES, ids=_qual_id)
def test_guard_allows_right_waiting_on(
    case: tuple[State, WaitingOn | None, State, WaitingOn | None]
) -> None:
    source, from_waiting, target, to_waiting = case
    assert check_move(source, from_waiting, target, to_waiting).pair == (source, target)


def test_guard_refuses_a_move_into_waiting_without_waiting_on() -> None:
    for source in (State.requested, State.working):
        with pytest.raises(InvalidState) as info:
            check_move(source, None, State.waiting, None)
        assert info.value.reason == "no_such_move"


# Every (state, waiting_on) a task can be in, waiting_on set exactly for waiting.
QUALIFIED_STATES: list[tuple[State, WaitingOn | None]] = [
    (s, None) for s in State if s is not State.waiting
] + [(State.waiting, w) for w in WaitingOn]


def test_guard_and_triggers_agree_on_every_qualified_pair(raw: apsw.Connection) -> None:
    """12 x 12 (state, waiting_on) pairs: the guard and the store give the same answer."""
    answers = {}
    for i, ((src, src_w), (dst, dst_w)) in enumerate(
        itertools.product(QUALIFIED_STATES, QUALIFIED_STATES)
    ):
        number = rawsql.put_in(raw, f"q{i}", src, src_w)  # set_state adds the result
        try:
            check_move(src, src_w, dst, dst_w)
            guard = "ok"
        except InvalidState as exc:
            guard = exc.reason
        try:
            rawsql.set_state(raw, number, dst, dst_w)
            store = "ok"
        except apsw.ConstraintError as exc:
            store = str(exc).split("invalid_state:")[-1]
        answers[_qual_id((src, src_w, dst, dst_w))] = (guard, store)
    disagree = {k: v for k, v in answers.items() if v[0] != v[1]}
    assert disagree == {}
    # The 22 moves; pause and resume take two waiting_on values, cancel_waiting three.
    assert sum(1 for g, _ in answers.values() if g == "ok") == 26


# -- the moves table and the protocol module -----------------------------------


def test_moves_table_is_the_protocol(raw: apsw.Connection) -> None:
    rows = list(raw.execute(
        "SELECT number, name, from_state, from_waiting, to_state, to_waiting"
        " FROM moves ORDER BY number"))
    assert rows == move_rows()
    assert len(rows) == 22
    assert {(r[2], r[4]) for r in rows} == {(a.value, b.value) for a, b in LEGAL}


def test_protocol_module_counts() -> None:
    assert len(State) == 10
    assert len(TERMINAL) == 3
    assert {State.completed, State.rejected, State.cancelled} == TERMINAL
    assert len(WaitingOn) == 3
    assert len(MOVES) == 22
    assert len({m.pair for m in MOVES}) == 22
    assert sorted(m.number for m in MOVES) == list(range(1, 23))
    assert [m.number for m in MOVES] == list(range(1, 23))
    assert len({m.name for m in MOVES}) == 22
    assert all(m.source not in TERMINAL for m in MOVES)
    assert all(m.source is not m.target for m in MOVES)
    # Qualifiers only where waiting is involved, and every move into waiting names its values.
    assert all(not m.from_waiting or m.source is State.waiting for m in MOVES)
    assert all(bool(m.to_waiting) == (m.target is State.waiting) for m in MOVES)


def test_moves_match_design_table() -> None:
    """DESIGN §3's table, pair by pair, with its waiting_on qualifiers."""
    s, w = State, WaitingOn
    expected = {
        1: (s.requested, s.routed), 2: (s.requested, s.waiting), 3: (s.requested, s.rejected),
        4: (s.waiting, s.routed), 5: (s.waiting, s.rejected), 6: (s.routed, s.accepted),
        7: (s.accepted, s.working), 8: (s.accepted, s.routed), 9: (s.working, s.routed),
        10: (s.working, s.waiting), 11: (s.waiting, s.working), 12: (s.working, s.verifying),
        13: (s.verifying, s.completed), 14: (s.verifying, s.approval),
        15: (s.verifying, s.routed), 16: (s.approval, s.completed),
        17: (s.approval, s.routed), 18: (s.requested, s.cancelled),
        19: (s.waiting, s.cancelled), 20: (s.routed, s.cancelled),
        21: (s.accepted, s.cancelled), 22: (s.working, s.cancelled),
    }
    assert {m.number: m.pair for m in MOVES} == expected
    by_number = {m.number: m for m in MOVES}
    assert by_number[2].to_waiting == (w.owner_approval,)
    assert by_number[4].from_waiting == (w.owner_approval,)
    assert by_number[5].from_waiting == (w.owner_approval,)
    assert set(by_number[10].to_waiting) == {w.human, w.agent}
    assert set(by_number[11].from_waiting) == {w.human, w.agent}
    assert by_number[19].from_waiting == ()


# -- the generated page ------------------------------------------------------


def test_protocol_page_is_current() -> None:
    committed = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    assert committed == protocol_page(), (
        "docs/protocol.md differs from the protocol module; regenerate it with "
        "`python -m hivelite.core.diagrams > docs/protocol.md`"
    )


# -- journal replay ------------------------------------------------------------


def _replay(conn: apsw.Connection) -> dict[int, tuple[str, str | None]]:
    """Each task's (state, waiting_on) rebuilt from the journal alone."""
    replayed: dict[int, tuple[str, str | None]] = {}
    for task, from_state, to_state, waiting_on in conn.execute(
        "SELECT task, from_state, to_state, waiting_on FROM journal ORDER BY seq"
    ):
        if from_state is None:
            assert task not in replayed, f"task {task} created twice"
            assert to_state == State.requested.value
            assert waiting_on is None
            replayed[task] = (to_state, None)
            continue
        assert task in replayed, f"task {task} moved before it was created"
        if from_state == to_state:
            continue  # an event, not a move
        current, current_waiting = replayed[task]
        assert from_state == current, f"task {task}: journal skips {current} -> {from_state}"
        move = find_move(
            State(from_state), State(to_state),
            WaitingOn(current_waiting) if current_waiting else None,
            WaitingOn(waiting_on) if waiting_on else None,
        )
        assert move is not None, f"task {task}: {from_state} -> {to_state} is not a move"
        replayed[task] = (to_state, waiting_on)
    return replayed


def _current(conn: apsw.Connection) -> dict[int, tuple[str, str | None]]:
    return {n: (s, w) for n, s, w in conn.execute(
        "SELECT number, state, waiting_on FROM tasks ORDER BY number")}


def _legal_targets(state: State, waiting: WaitingOn | None) -> list[
    tuple[State, WaitingOn | None]
]:
    return [(t, tw) for t, tw in QUALIFIED_STATES
            if state not in TERMINAL and find_move(state, t, waiting, tw) is not None]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_journal_replay_reproduces_every_task(raw: apsw.Connection, seed: int) -> None:
    rng = random.Random(seed)
    start_states = [State.requested, State.routed, State.working, State.verifying]
    tasks = [rawsql.put_in(raw, f"r{seed}-{i}", rng.choice(start_states)) for i in range(6)]
    refused = moved = 0
    for step in range(200):
        open_tasks = [n for n in tasks if _state_of(raw, n)[0] not in TERMINAL]
        if not open_tasks or rng.random() < 0.05:
            tasks.append(rawsql.put_in(raw, f"r{seed}-x{step}", State.requested))
            continue
        # Mostly open tasks, sometimes a closed one (whose every move is refused).
        number = rng.choice(open_tasks if rng.random() < 0.9 else tasks)
        state, waiting = _state_of(raw, number)
        source = State(state)
        source_waiting = WaitingOn(waiting) if waiting else None
        legal = _legal_targets(source, source_waiting)
        if legal and rng.random() < 0.6:
            target, to_waiting = rng.choice(legal)
        else:
            target, to_waiting = rng.choice(QUALIFIED_STATES)
        if step % 20 == 0:
            # An event row (from == to) that replay must skip.
            raw.execute(
                "INSERT INTO journal(task, at, actor, from_state, to_state, reason, prev)"
                " VALUES (?, '2026-12-02T09:00:01.000Z', 'ana', ?, ?, 'note',"
                " (SELECT last_seq FROM tasks WHERE number = ?))", (number, state, state, number))
        if (target, to_waiting) in legal:
            rawsql.set_state(raw, number, target, to_waiting)
            moved += 1
        else:
            with pytest.raises(apsw.Error, match="invalid_state:"):
                rawsql.set_state(raw, number, target, to_waiting)
            refused += 1
    assert moved > 50 and refused > 20
    assert _replay(raw) == _current(raw)
