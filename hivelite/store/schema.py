"""The schema this code expects: tables and triggers, the protocol's generated from ``protocol``.

Layout follows DESIGN §4a: the columns that change on every move (state, the
live lease, the last move's actor and reason) sit on one narrow ``tasks`` row;
the large JSON that rarely changes (packet, result, checkpoint) lives in
tables of its own, so a move dirties as few pages as possible. The live lease
on the task row makes "at most one active claim per task" true by
construction; claim history is in the journal.

The journal's ``hash`` and the task's ``chain`` (the hash a move hands to its journal
trigger) were added by migration 4's ``ALTER TABLE``; their table texts below are what
SQLite keeps after that (``, hash TEXT)``), so a new store and an upgraded one match.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..core.protocol import (
    JUDGEMENTS,
    MAX_USAGE,
    MOVES,
    PRIORITIES,
    SUBMITTED_VIA,
    TERMINAL,
    TOKEN_RIGHTS,
    Actor,
    Move,
    State,
    WaitingOn,
)


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"

def _in_list(values: Iterable[str]) -> str:
    return "(" + ", ".join(_quote(v) for v in sorted(values)) + ")"

def _waiting_set(values: tuple[WaitingOn, ...]) -> str | None:
    """A ``waiting_on`` set as the ``moves`` table stores it: ``|human|agent|`` (NULL: any)."""
    return "|" + "|".join(v.value for v in values) + "|" if values else None

def via(row: str = "NEW", source: str = "OLD.state") -> str:
    """A move's or journal row's ``via`` (the states a submission passed through: its
    detail's ``via``, a JSON array) as JSON text, read only on a move out of a holder's
    state (``source``): NULL on every other row, and on a detail that is no JSON or whose
    via is no array (raw SQL can write them). A task row keeps its last move's detail, so
    a later move that does not set its own (raw SQL) is not read as a submission."""
    detail = f"CASE WHEN json_valid({row}.detail) THEN {row}.detail END"
    return (f"CASE WHEN {source} IN {_in_list(s.value for s in SUBMITTED_VIA)}"
            f" AND json_type({detail}, '$.via') = 'array'"
            f" THEN json_extract({row}.detail, '$.via') END")


def passage_sql(source: str, passed: str, target: str,
                literal: Callable[[str], str] = _quote) -> str:
    """SQL true when a row from ``source`` through ``passed`` (its via as the engine reads
    it; ``literal`` writes a via there) to ``target`` is a submission's
    (``protocol.passage``): plain SQL, the same on both engines."""
    paths = " OR ".join(
        f"({source} = {_quote(state.value)} AND {passed} = "
        f"{literal(json.dumps([s.value for s in path], separators=(',', ':')))})"
        for state, path in SUBMITTED_VIA.items())
    return f"(({paths}) AND {target} IN {_in_list(s.value for s in JUDGEMENTS)})"


def move_rows(moves: Iterable[Move] = MOVES) -> list[tuple[object, ...]]:
    """The rows of the ``moves`` table, straight from the protocol module."""
    return [
        (m.number, m.name, m.source.value, _waiting_set(m.from_waiting),
         m.target.value, _waiting_set(m.to_waiting))
        for m in moves
    ]

TABLES = ("""
CREATE TABLE meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE moves(
    number INTEGER NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    from_state TEXT NOT NULL,
    from_waiting TEXT,
    to_state TEXT NOT NULL,
    to_waiting TEXT,
    PRIMARY KEY (from_state, to_state)
) WITHOUT ROWID;

CREATE TABLE tasks(
    number INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL,
    waiting_on TEXT,
    project TEXT NOT NULL,
    requester TEXT NOT NULL,
    assignee TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    lease_id TEXT,
    lease_token INTEGER NOT NULL DEFAULT 0,
    lease_holder TEXT,
    lease_instance TEXT,
    lease_session TEXT,
    lease_expires TEXT,
    priority TEXT NOT NULL DEFAULT 'normal',
    labels TEXT NOT NULL DEFAULT '[]',
    fields_version INTEGER NOT NULL DEFAULT 1,
    depends INTEGER NOT NULL DEFAULT 0,
    actor TEXT,
    reason TEXT,
    detail TEXT
, chain TEXT, waits INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0,"""
""" attempt_limit INTEGER NOT NULL DEFAULT 3);

CREATE TABLE packets(
    task INTEGER PRIMARY KEY REFERENCES tasks(number),
    body TEXT NOT NULL
);

CREATE TABLE checkpoints(
    task INTEGER PRIMARY KEY REFERENCES tasks(number),
    body TEXT NOT NULL
);

CREATE TABLE results(
    task INTEGER PRIMARY KEY REFERENCES tasks(number),
    body TEXT NOT NULL,
    worker TEXT NOT NULL,
    instance TEXT NOT NULL,
    session TEXT,
    outcome TEXT NOT NULL DEFAULT 'completed',
    version INTEGER NOT NULL DEFAULT 1,
    threshold INTEGER,
    merge_commit TEXT,
    merged_by TEXT
);

CREATE TABLE confirmations(
    task INTEGER NOT NULL REFERENCES tasks(number),
    version INTEGER NOT NULL,
    reviewer TEXT NOT NULL,
    instance TEXT NOT NULL,
    session TEXT,
    verdict TEXT NOT NULL,
    reason TEXT,
    at TEXT NOT NULL,
    counted INTEGER NOT NULL, why TEXT,
    PRIMARY KEY (task, version, reviewer)
) WITHOUT ROWID;

CREATE TABLE updates(
    seq INTEGER PRIMARY KEY,
    task INTEGER NOT NULL REFERENCES tasks(number),
    at TEXT NOT NULL,
    actor TEXT NOT NULL,
    summary TEXT NOT NULL,
    tokens INTEGER,
    usd_micros INTEGER
);
CREATE INDEX updates_by_task ON updates(task, seq);

-- Only live leases are indexed: the expiry sweep on every write reads this, not the table.
CREATE INDEX tasks_live_leases ON tasks(lease_expires) WHERE lease_id IS NOT NULL;

CREATE TABLE journal(
    seq INTEGER PRIMARY KEY,
    task INTEGER REFERENCES tasks(number),
    at TEXT NOT NULL,
    actor TEXT,
    from_state TEXT,
    to_state TEXT,
    waiting_on TEXT,
    reason TEXT,
    detail TEXT
, hash TEXT);
""")

def _closed(row: str) -> str:
    """``row``'s task is closed (``row`` is NEW or OLD of a side table)."""
    return (f"(SELECT state FROM tasks WHERE number = {row}.task)"
            f" IN {_in_list(s.value for s in TERMINAL)}")


# Triggers that only refuse: (name, event, table, "code:reason", when; None is always).
REFUSALS: tuple[tuple[str, str, str, str, str | None], ...] = (
    *((f"moves_fixed_{e.lower()}", e, "moves", "forbidden_right:protocol_fixed", None)
      for e in ("INSERT", "UPDATE", "DELETE")),
    ("task_delete", "DELETE", "tasks", "forbidden_right:tasks_are_kept", None),
    *((f"packets_fixed_{e.lower()}", e, "packets", "forbidden_right:packet_fixed", None)
      for e in ("UPDATE", "DELETE")),
    ("results_kept", "DELETE", "results", "forbidden_right:results_are_kept", None),
    ("results_insert", "INSERT", "results", "invalid_state:task_closed", _closed("NEW")),
    ("confirmations_insert", "INSERT", "confirmations", "invalid_state:not_submitted",
     "(SELECT state FROM tasks WHERE number = NEW.task) IS NOT 'approval'"),
    ("updates_insert", "INSERT", "updates", "invalid_state:task_closed", _closed("NEW")),
    *((f"{table}_no_{e.lower()}", e, table, "forbidden_right:append_only", None)
      for table in ("confirmations", "updates", "journal") for e in ("UPDATE", "DELETE")),
    ("checkpoints_insert", "INSERT", "checkpoints", "invalid_state:task_closed",
     _closed("NEW")),
    ("checkpoints_update", "UPDATE", "checkpoints", "invalid_state:task_closed",
     _closed("OLD")),
    ("checkpoints_no_delete", "DELETE", "checkpoints",
     "forbidden_right:checkpoints_are_kept", None),
)


def refusal_triggers() -> str:
    """The triggers of :data:`REFUSALS`: what the store's tables never take."""
    return "\n".join(
        f"CREATE TRIGGER {name} BEFORE {event} ON {table}"
        + (f"\nWHEN {when}" if when else "")
        + f"\nBEGIN SELECT RAISE(ABORT, '{message}'); END;"
        for name, event, table, message, when in REFUSALS
    )


def protocol_triggers() -> str:
    """The triggers that enforce the protocol, generated from the protocol module.

    Messages are ``code:reason`` so the guard can map an abort to its own classes.
    ``task_move`` leaves terminal tasks to ``task_update``, so any change to one
    reads ``task_closed`` whichever trigger SQLite runs first; it also fires on
    ``waiting_on`` alone, so a paused task cannot pose as one held for the owner,
    and leaves a ``waiting_on`` that does not fit the state to ``task_update``'s
    clearer ``waiting_on_mismatch``.
    """
    terminal = _in_list(s.value for s in TERMINAL)
    waiting_values = _in_list(w.value for w in WaitingOn)
    with_result = _in_list(
        s.value for s in (State.verifying, State.approval, State.completed)
    )
    leased = _in_list(s.value for s in (State.accepted, State.working))
    guarded = textwrap.fill(", ".join(TASK_COLUMNS_BUT_HEAD), 84, initial_indent=" " * 32,
                            subsequent_indent="    ").strip()
    return f"""

CREATE TRIGGER task_insert BEFORE INSERT ON tasks
WHEN NEW.state IS NOT {_quote(State.requested.value)} OR NEW.waiting_on IS NOT NULL
    OR NEW.lease_id IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'invalid_state:insert_not_requested'); END;

-- A new task's journal row takes the seq its write named (or the next), and heads it.
CREATE TRIGGER task_created AFTER INSERT ON tasks
BEGIN
    INSERT INTO journal(seq, task, at, actor, from_state, to_state, waiting_on, reason,
                        detail, hash, prev)
    VALUES (NEW.last_seq, NEW.number, NEW.created_at, NEW.actor, NULL, NEW.state, NULL,
            NEW.reason, NEW.detail, NEW.chain, NULL);
END;

-- Every column but the head: the head alone moves on a closed task (an event journaled
-- about it), and only as task_head allows.
CREATE TRIGGER task_update BEFORE UPDATE OF {guarded} ON tasks
BEGIN
    SELECT CASE
        WHEN OLD.state IN {terminal}
            THEN RAISE(ABORT, 'invalid_state:task_closed')
        WHEN NEW.number IS NOT OLD.number OR NEW.id IS NOT OLD.id
            OR NEW.created_at IS NOT OLD.created_at OR NEW.requester IS NOT OLD.requester
            OR NEW.assignee IS NOT OLD.assignee OR NEW.project IS NOT OLD.project
            THEN RAISE(ABORT, 'invalid_input:immutable_field')
        WHEN (NEW.state = 'waiting') = (NEW.waiting_on IS NULL)
            OR (NEW.waiting_on IS NOT NULL AND NEW.waiting_on NOT IN {waiting_values})
            THEN RAISE(ABORT, 'invalid_state:waiting_on_mismatch')
        WHEN NEW.lease_token < OLD.lease_token
            OR (NEW.lease_id IS NOT NULL AND NEW.lease_id IS NOT OLD.lease_id
                AND NEW.lease_token <= OLD.lease_token)
            THEN RAISE(ABORT, 'invalid_state:fencing_token')
        WHEN NEW.lease_id IS NOT NULL AND NEW.state NOT IN {leased}
            THEN RAISE(ABORT, 'invalid_state:claim_outlives_state')
        WHEN NEW.lease_id IS NULL AND NEW.state IN {leased}
            THEN RAISE(ABORT, 'invalid_state:claim_missing')
        WHEN NEW.state IS NOT OLD.state AND NEW.state IN {with_result}
            AND NOT EXISTS (SELECT 1 FROM results WHERE task = NEW.number)
            THEN RAISE(ABORT, 'invalid_state:result_missing')
    END;
END;

{task_move_sql()}
-- A move's journal row: at the seq the write named with the move (else the next), linked
-- to the task's row before it.
CREATE TRIGGER task_journal AFTER UPDATE OF state ON tasks
BEGIN
    INSERT INTO journal(seq, task, at, actor, from_state, to_state, waiting_on, reason,
                        detail, hash, prev)
    VALUES (CASE WHEN NEW.last_seq IS NOT OLD.last_seq THEN NEW.last_seq END, NEW.number,
            NEW.updated_at, NEW.actor, OLD.state, NEW.state, NEW.waiting_on, NEW.reason,
            NEW.detail, NEW.chain, OLD.last_seq);
END;

CREATE TRIGGER results_update BEFORE UPDATE ON results
BEGIN
    SELECT CASE
        WHEN (SELECT state FROM tasks WHERE number = OLD.task) IN {terminal}
            AND NOT (OLD.merge_commit IS NULL AND NEW.merge_commit IS NOT NULL
                     AND NEW.task IS OLD.task AND NEW.body IS OLD.body
                     AND NEW.version IS OLD.version AND NEW.worker IS OLD.worker
                     AND NEW.instance IS OLD.instance AND NEW.session IS OLD.session
                     AND NEW.outcome IS OLD.outcome AND NEW.threshold IS OLD.threshold)
            THEN RAISE(ABORT, 'invalid_state:task_closed')
        WHEN NEW.body IS NOT OLD.body AND NEW.version <= OLD.version
            THEN RAISE(ABORT, 'invalid_state:result_version')
    END;
END;

{journal_insert_sql()}
"""


def task_move_sql() -> str:
    """The rule on a task's moves (migration 19 added the submission's row): a move is one
    of the protocol's, or a submission's passage with the task's result kept."""
    terminal = _in_list(s.value for s in TERMINAL)
    waiting_values = _in_list(w.value for w in WaitingOn)
    passed = via()
    return f"""CREATE TRIGGER task_move BEFORE UPDATE OF state, waiting_on ON tasks
WHEN OLD.state NOT IN {terminal}
    AND (NEW.state = 'waiting') = (NEW.waiting_on IS NOT NULL)
    AND (NEW.waiting_on IS NULL OR NEW.waiting_on IN {waiting_values})
    AND CASE WHEN {passed} IS NULL THEN NOT EXISTS (
    SELECT 1 FROM moves m
    WHERE m.from_state = OLD.state AND m.to_state = NEW.state
      AND (m.from_waiting IS NULL OR instr(m.from_waiting, '|' || OLD.waiting_on || '|'))
      AND (m.to_waiting IS NULL OR instr(m.to_waiting, '|' || NEW.waiting_on || '|'))
    ) ELSE NOT ({passage_sql("OLD.state", passed, "NEW.state")}
               AND EXISTS (SELECT 1 FROM results WHERE task = NEW.number)) END
BEGIN SELECT RAISE(ABORT, 'invalid_state:no_such_move'); END;
"""


def journal_insert_sql() -> str:
    """The rule on every journal row (migration 19 added the submission's row)."""
    passed = via("NEW", "NEW.from_state")
    return f"""\
-- A journal row tells the truth about its task: it ends in the task's state, a row that
-- changes state is one of the moves, a submission's passage or the creation, and it
-- follows its task's head (or is the row the head already names: the move writing it).
-- No seq is skipped, and a store-wide row links to nothing.
CREATE TRIGGER journal_insert BEFORE INSERT ON journal
WHEN (NEW.seq > 0 AND NEW.seq IS NOT (SELECT coalesce(max(seq), 0) FROM journal) + 1)
    OR (NEW.task IS NULL AND NEW.prev IS NOT NULL)
    OR (NEW.task IS NOT NULL AND (
    NOT EXISTS (SELECT 1 FROM tasks t WHERE t.number = NEW.task
                AND t.state IS NEW.to_state
                AND (t.last_seq IS NEW.seq OR t.last_seq IS NEW.prev))
    OR (NEW.from_state IS NOT NEW.to_state
        AND NOT (NEW.from_state IS NULL AND NEW.to_state = 'requested')
        AND CASE WHEN {passed} IS NULL THEN NOT EXISTS (
            SELECT 1 FROM moves m WHERE m.from_state = NEW.from_state
                                    AND m.to_state = NEW.to_state)
        ELSE NOT {passage_sql("NEW.from_state", passed, "NEW.to_state")} END)))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:journal_forged'); END;
"""

# The tables whose rows are kept: a key is written once. REPLACE (which deletes the old row
# without firing DELETE triggers unless recursive_triggers is on) and a second INSERT of a
# key are refused whatever the connection's settings.
KEPT_KEYS: tuple[tuple[str, str], ...] = (
    ("tasks", "number = NEW.number OR id = NEW.id"),
    ("packets", "task = NEW.task"),
    ("checkpoints", "task = NEW.task"),
    ("results", "task = NEW.task"),
    ("confirmations", "task = NEW.task AND version = NEW.version AND reviewer = NEW.reviewer"),
    ("updates", "seq = NEW.seq"),
    ("journal", "seq = NEW.seq"),
    ("meta", "key = NEW.key"),
)
LEASE_MINUTES = (5, 15)
"""A lease lasts 5 to 15 minutes (DESIGN §5); the store holds every lease to it."""


def integrity_triggers() -> str:
    """The rules that make a move legal, not only possible (migration 3): who decides a
    completion, which verdict counts, who holds a lease and for how long, which rows and
    keys are fixed. Messages are ``code:reason`` like every trigger's."""
    kept = "\n".join(
        f"CREATE TRIGGER {table}_keys_kept BEFORE INSERT ON {table}\n"
        f"WHEN EXISTS (SELECT 1 FROM {table} WHERE {match})\n"
        "BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;"
        for table, match in KEPT_KEYS)
    shortest, longest = (m * 60 for m in LEASE_MINUTES)
    terminal = _in_list(s.value for s in TERMINAL)
    leased = _in_list(s.value for s in (State.accepted, State.working))
    return kept + f"""

CREATE TRIGGER meta_owner_fixed BEFORE UPDATE ON meta
WHEN OLD.key = 'owner' OR NEW.key IS NOT OLD.key
BEGIN SELECT RAISE(ABORT, 'forbidden_right:owner_fixed'); END;

CREATE TRIGGER meta_kept BEFORE DELETE ON meta
BEGIN SELECT RAISE(ABORT, 'forbidden_right:owner_fixed'); END;

CREATE TRIGGER meta_identity_fixed BEFORE UPDATE ON meta
WHEN OLD.key = 'store_id'
BEGIN SELECT RAISE(ABORT, 'forbidden_right:identity_fixed'); END;

{completion_decided_sql()}
-- A lease is taken only by a claim (routed -> accepted) or a resume (waiting -> working),
-- by the assignee, with the next fencing token, for 5 to 15 minutes from the move; later
-- it may only be extended (by 5 to 15 minutes from the renewal) or ended. (A lease on
-- another state, a token that does not grow or a pair that is no move are refused by the
-- older triggers, with their own reasons.)
CREATE TRIGGER task_lease_taken BEFORE UPDATE OF lease_id, lease_token, lease_holder,
    lease_instance, lease_session, lease_expires ON tasks
WHEN OLD.state NOT IN {terminal} AND NEW.state IN {leased} AND NEW.lease_id IS NOT NULL
    AND NEW.lease_token > OLD.lease_token - (NEW.lease_id IS OLD.lease_id)
    AND (NEW.state IS OLD.state OR EXISTS (
        SELECT 1 FROM moves WHERE from_state = OLD.state AND to_state = NEW.state)) AND (
    NEW.lease_id IS NOT OLD.lease_id OR NEW.lease_token IS NOT OLD.lease_token
    OR NEW.lease_holder IS NOT OLD.lease_holder OR NEW.lease_instance IS NOT OLD.lease_instance
    OR NEW.lease_session IS NOT OLD.lease_session)
    AND NOT (
    ((OLD.state = 'routed' AND NEW.state = 'accepted')
     OR (OLD.state = 'waiting' AND NEW.state = 'working'))
    AND OLD.lease_id IS NULL AND NEW.lease_holder IS NEW.assignee
    AND NEW.lease_instance IS NOT NULL AND NEW.lease_token = OLD.lease_token + 1)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:lease_by_claim_only'); END;

CREATE TRIGGER task_lease_length BEFORE UPDATE OF lease_expires ON tasks
WHEN OLD.state NOT IN {terminal} AND NEW.lease_expires IS NOT NULL AND NOT (
    (julianday(NEW.lease_expires) - julianday(NEW.updated_at)) * 86400
        BETWEEN {shortest} - 0.001 AND {longest} + 0.001)
BEGIN SELECT RAISE(ABORT, 'invalid_input:lease_length'); END;

-- A result comes from the task's holder, under its live claim.
CREATE TRIGGER results_from_holder BEFORE INSERT ON results
WHEN (SELECT state FROM tasks WHERE number = NEW.task) NOT IN {terminal} AND NOT EXISTS (
    SELECT 1 FROM tasks WHERE number = NEW.task
    AND state IN ('accepted', 'working') AND lease_holder IS NEW.worker
    AND lease_instance IS NEW.instance)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:result_by_holder_only'); END;

-- Who returned a result, from where, and its threshold change only with a new submission
-- by the holder; a merge is recorded only on a completed task; a result stays its task's.
CREATE TRIGGER results_fixed BEFORE UPDATE ON results
WHEN (SELECT state FROM tasks WHERE number = OLD.task) NOT IN {terminal} AND (
    NEW.task IS NOT OLD.task
    OR ((NEW.worker IS NOT OLD.worker OR NEW.instance IS NOT OLD.instance
         OR NEW.session IS NOT OLD.session OR NEW.outcome IS NOT OLD.outcome
         OR NEW.threshold IS NOT OLD.threshold)
        AND NOT (NEW.version > OLD.version AND EXISTS (
            SELECT 1 FROM tasks WHERE number = NEW.task AND state IN ('accepted', 'working')
              AND lease_holder IS NEW.worker AND lease_instance IS NEW.instance)))
    OR (NEW.merge_commit IS NOT NULL AND NEW.merge_commit IS NOT OLD.merge_commit
        AND (SELECT state FROM tasks WHERE number = NEW.task) IS NOT 'completed'))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:result_fixed'); END;

CREATE TRIGGER checkpoints_fixed BEFORE UPDATE ON checkpoints
WHEN NEW.task IS NOT OLD.task
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;
"""


RANK = ("CASE priority " + " ".join(f"WHEN {_quote(p)} THEN {n}" for n, p in
                                   enumerate(PRIORITIES[:-1])) + f" ELSE {len(PRIORITIES) - 1} END")
"""A priority's rank (0 most pressing), as SQL: the queue index and ``next`` sort by it."""
READY = "state = 'routed' AND waits = 0 AND attempts < attempt_limit"
"""A task an agent could claim now: routed, no dependency open, attempts left. The queue
index holds exactly these; a query that names this text can read it."""


def attempt_counted_sql() -> str:
    """Every result that comes back counts an attempt (migration 18): a failed outcome,
    evidence refused, a verifier's reject, the owner's decline (moves 15 and 17; from
    migration 19 a submission's row ending in ``routed`` too). Before migration 18 only a
    failed outcome counted, and a worker whose result was sent back at once could be
    handed the same task again and again."""
    return f"""CREATE TRIGGER task_attempt_failed AFTER UPDATE OF state ON tasks
WHEN NEW.state = 'routed' AND (OLD.state IN ('verifying', 'approval') OR {via()} IS NOT NULL)
BEGIN
    UPDATE tasks SET attempts = attempts + 1 WHERE number = NEW.number;
END;
"""


def completion_decided_sql() -> str:
    """A completion is decided (a submission's row passes ``verifying`` on its way)."""
    passed = via()
    return f"""\
-- A completion is decided: by the owner's sign-off, by enough counted confirmations of the
-- current result, or (from verifying, or a submission's row through it) by a threshold of 0.
CREATE TRIGGER task_completion_decided BEFORE UPDATE OF state ON tasks
WHEN NEW.state = 'completed' AND (OLD.state IN ('approval', 'verifying') OR {passed} IS NOT NULL)
    AND EXISTS (SELECT 1 FROM results WHERE task = NEW.number) AND NOT (
    (OLD.state = 'approval' AND (
        NEW.actor IS (SELECT value FROM meta WHERE key = 'owner')
        OR (SELECT count(*) FROM confirmations c JOIN results r ON r.task = c.task
            WHERE c.task = NEW.number AND c.version = r.version AND c.verdict = 'accept'
              AND c.counted) >= (SELECT coalesce(threshold, 1) FROM results
                                 WHERE task = NEW.number)))
    OR ((OLD.state = 'verifying' OR {passed} IS NOT NULL) AND EXISTS (
        SELECT 1 FROM results WHERE task = NEW.number AND threshold = 0
          AND outcome = 'completed')))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:not_decided'); END;
"""

RETURNS_BACKFILL = """
UPDATE tasks SET attempts = max(attempts, (
    SELECT count(*) FROM journal j WHERE j.task = tasks.number
      AND j.from_state IN ('verifying', 'approval') AND j.to_state = 'routed'))
WHERE state NOT IN ('cancelled', 'completed', 'rejected');
UPDATE tasks SET attempt_limit = attempts + 1, fields_version = fields_version + 1
WHERE state NOT IN ('cancelled', 'completed', 'rejected') AND attempts >= attempt_limit
  AND attempt_limit > (SELECT count(*) FROM journal j WHERE j.task = tasks.number
      AND j.from_state = 'verifying' AND j.to_state = 'routed'
      AND json_extract(CASE WHEN json_valid(j.detail) THEN j.detail END, '$.outcome')
          = 'failed');
"""
"""What migration 18 derives for tasks made before it (its own text holds these statements
verbatim): every result that came back counted as an attempt, and one more attempt for an
open task the recount alone would retire (an upgrade stops no task mid-flight). An import
of an export from before migration 18 runs them too."""


def queue_sql() -> str:
    """The work queue (migration 5): dependencies as rows, the ready index, and the rules
    that keep claims to ready tasks, attempts growing, and fields versioned."""
    terminal = _in_list(s.value for s in TERMINAL)
    return f"""
CREATE TABLE deps(
    task INTEGER NOT NULL REFERENCES tasks(number),
    on_task INTEGER NOT NULL REFERENCES tasks(number),
    PRIMARY KEY (task, on_task)
) WITHOUT ROWID;
CREATE INDEX deps_by_dependency ON deps(on_task);

CREATE INDEX tasks_queue ON tasks(assignee,
    {RANK},
    number)
WHERE {READY};

CREATE TRIGGER deps_fixed_update BEFORE UPDATE ON deps
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;
CREATE TRIGGER deps_fixed_delete BEFORE DELETE ON deps
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;
CREATE TRIGGER deps_keys_kept BEFORE INSERT ON deps
WHEN EXISTS (SELECT 1 FROM deps WHERE task = NEW.task AND on_task = NEW.on_task)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;
CREATE TRIGGER deps_with_task BEFORE INSERT ON deps
WHEN (SELECT state FROM tasks WHERE number = NEW.task) IS NOT 'requested'
    OR NEW.task <= NEW.on_task
BEGIN SELECT RAISE(ABORT, 'invalid_input:dependency_fixed'); END;

CREATE TRIGGER task_unblocks AFTER UPDATE OF state ON tasks
WHEN NEW.state = 'completed'
BEGIN
    UPDATE tasks SET waits = waits - 1
    WHERE number IN (SELECT task FROM deps WHERE on_task = NEW.number)
      AND state NOT IN {terminal};
END;

{attempt_counted_sql()}
CREATE TRIGGER task_claim_ready BEFORE UPDATE OF state ON tasks
WHEN OLD.state = 'routed' AND NEW.state = 'accepted'
BEGIN
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM deps d JOIN tasks o ON o.number = d.on_task
                     WHERE d.task = NEW.number AND o.state IS NOT 'completed')
            THEN RAISE(ABORT, 'invalid_state:blocked')
        WHEN NEW.attempts >= NEW.attempt_limit
            THEN RAISE(ABORT, 'invalid_state:attempts_exhausted')
    END;
END;

CREATE TRIGGER task_fields BEFORE UPDATE OF priority, labels, fields_version, attempts,
    attempt_limit ON tasks
WHEN OLD.state NOT IN {terminal}
BEGIN
    SELECT CASE
        WHEN NEW.priority NOT IN {_in_list(PRIORITIES)}
            THEN RAISE(ABORT, 'invalid_input:invalid_priority')
        WHEN (NEW.priority IS NOT OLD.priority OR NEW.labels IS NOT OLD.labels
              OR NEW.attempt_limit IS NOT OLD.attempt_limit
              OR NEW.fields_version IS NOT OLD.fields_version)
            AND NEW.fields_version IS NOT OLD.fields_version + 1
            THEN RAISE(ABORT, 'invalid_state:stale_base')
        WHEN NEW.attempts < OLD.attempts
            THEN RAISE(ABORT, 'forbidden_right:attempts_only_grow')
    END;
END;
"""


QUEUE_BACKFILL = """
INSERT INTO deps(task, on_task)
SELECT DISTINCT p.task, t.number FROM packets p,
    json_each(CASE WHEN json_valid(p.body) THEN p.body END, '$.depends_on') d
    JOIN tasks t ON t.id = d.value;
UPDATE tasks SET waits = (
    SELECT count(*) FROM deps d JOIN tasks o ON o.number = d.on_task
    WHERE d.task = tasks.number AND o.state IS NOT 'completed')
WHERE state NOT IN ('cancelled', 'completed', 'rejected')
  AND EXISTS (SELECT 1 FROM deps d WHERE d.task = tasks.number);
UPDATE tasks SET attempts = (
    SELECT count(*) FROM journal j WHERE j.task = tasks.number
      AND j.from_state = 'verifying' AND j.to_state = 'routed'
      AND json_extract(CASE WHEN json_valid(j.detail) THEN j.detail END, '$.outcome') = 'failed')
WHERE state NOT IN ('cancelled', 'completed', 'rejected');
UPDATE tasks SET attempt_limit = max(attempts + 1, 3)
WHERE state = 'routed' AND attempts >= 3;
"""
"""What migration 5 derives for tasks made before the queue (its own text holds these
statements verbatim): dependency rows from the packets, the open counts, the failed
attempts from the journal, and one more attempt for a task that had used up three. An
import of an export from before the queue runs them too."""


REQUESTS = """
CREATE TABLE requests(
    caller TEXT NOT NULL,
    id TEXT NOT NULL,
    verb TEXT NOT NULL,
    digest TEXT NOT NULL,
    answer TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (caller, id)
) WITHOUT ROWID;
CREATE INDEX requests_by_age ON requests(at);
"""
"""Request records for idempotent retries (migration 6): a cache of first answers, not
history, so pruned after a day and neither journaled nor exported."""


TASK_BOARD = """
CREATE VIEW task_board AS
SELECT t.number,
       CASE WHEN json_valid(p.body) THEN json_extract(p.body, '$.task') END AS title,
       t.state, t.waiting_on, t.assignee, t.requester, t.project, t.priority, t.labels,
       t.lease_holder AS holder, t.lease_instance AS instance,
       t.lease_expires AS claim_expires, t.created_at, t.updated_at
FROM tasks t JOIN packets p ON p.task = t.number;
"""
"""One row per task for other tools on the file (migration 9: the ``sqlite3`` shell,
datasette): its number (migration 10: not its id, the widest column), its title out of the
packet's JSON, where it stands and who holds it, never a lease id or a fencing token. A
view: it can be read, not written."""


OWNER_DECIDES: tuple[Move, ...] = tuple(
    m for m in MOVES if Actor.person in m.actors and set(m.actors) <= {Actor.person,
                                                                       Actor.verifier})
"""The moves only the store's owner makes (approve, deny, cancel), and the decline, which
a verifier's counted rejection makes too. (The sign-off, which enough confirmations make
too, is ``task_completion_decided``'s.)"""
OWNER = "(SELECT value FROM meta WHERE key = 'owner')"
"""The store's owner, as SQL."""
OWNER_ROWS: tuple[tuple[str, str, str], ...] = (
    ("controls_by_owner", "controls", "by"),
    ("policy_by_owner", "policy", "by"),
    ("required_plugins_by_owner", "required_plugins", "by"),
    ("budgets_by_owner", "budgets", "by"),
    ("tokens_by_owner", "tokens", "by"),
)
"""The owner's own tables (name of the rule, table, column naming who wrote the row): a
row is written by the store's owner, or refused."""


def owner_decides(old: str = "OLD", new: str = "NEW") -> str:
    """SQL true when the change from ``old`` to ``new`` (a task's rows) is one of
    :data:`OWNER_DECIDES`; plain SQL, the same on both engines."""
    groups: dict[tuple[State, tuple[WaitingOn, ...]], list[State]] = {}
    for move in OWNER_DECIDES:
        groups.setdefault((move.target, move.from_waiting), []).append(move.source)
    parts = []
    for (target, waiting), sources in groups.items():
        part = (f"({new}.state = {_quote(target.value)}"
                f" AND {old}.state IN {_in_list(s.value for s in sources)}")
        if waiting:
            part += f" AND {old}.waiting_on IN {_in_list(w.value for w in waiting)}"
        parts.append(part + ")")
    targets = _in_list({m.target.value for m in OWNER_DECIDES})
    return f"{new}.state IN {targets} AND (\n    " + "\n    OR ".join(parts) + ")"


def by_verifier_too() -> str:
    """The states a move of :data:`OWNER_DECIDES` that a verifier may make leaves from."""
    return _in_list({m.source.value for m in OWNER_DECIDES if Actor.verifier in m.actors})


def usage_out_of_bounds(column: str, typed: bool) -> str:
    """SQL true when a usage value is not an integer from 0 to :data:`MAX_USAGE` (``typed``:
    also check SQLite's storage class, which takes any value in any column)."""
    kind = f"typeof({column}) != 'integer' OR " if typed else ""
    return (f"({column} IS NOT NULL AND ({kind}{column} < 0"
            f" OR {column} > {MAX_USAGE[column.split('.')[-1]]}))")


def decisions_sql() -> str:
    """Who decides, and what decides, written only by its verb (migration 11): the owner's
    moves by the owner, a decline by the owner or a counted rejection; a result changed
    only by its holder's submission or its worker's journaled amend; a merge recorded
    once, journaled, by the worker or the owner; usage within bounds; the owner's tables
    written by the owner. Messages are ``code:reason`` like every trigger's. (The
    amend's and the merge's journal row is the task's head since migration 13.)"""
    terminal = _in_list(s.value for s in TERMINAL)
    leased = _in_list(s.value for s in (State.accepted, State.working))
    state = "(SELECT state FROM tasks WHERE number = OLD.task)"
    holder = ("EXISTS (\n        SELECT 1 FROM tasks WHERE number = NEW.task"
              f" AND state IN {leased}\n          AND lease_holder IS NEW.worker"
              " AND lease_instance IS NEW.instance)")
    same = ("NEW.task IS OLD.task AND NEW.worker IS OLD.worker AND NEW.instance IS OLD.instance"
            "\n          AND NEW.session IS OLD.session AND NEW.outcome IS OLD.outcome"
            " AND NEW.threshold IS OLD.threshold")

    def newest(condition: str) -> str:  # through the task's head (migration 13)
        return ("EXISTS (\n        SELECT 1 FROM (SELECT to_state, actor, reason, CASE WHEN"
                " json_valid(detail) THEN detail END AS detail\n"
                "                       FROM journal WHERE seq ="
                " (SELECT last_seq FROM tasks WHERE number = OLD.task)) j\n"
                "        WHERE " + condition + ")")

    amended = newest("j.to_state = 'approval' AND j.reason = 'amended'"
                     " AND j.actor IS OLD.worker\n"
                     "          AND json_extract(j.detail, '$.version') IS NEW.version")
    merged = newest("j.to_state = 'completed' AND j.reason = 'merge_recorded'"
                    " AND j.actor IS NEW.merged_by\n"
                    "          AND json_extract(j.detail, '$.merge_commit') IS NEW.merge_commit")
    owner_rows = "\n".join(
        f"CREATE TRIGGER {name} BEFORE INSERT ON {table}\n"
        f"WHEN NEW.{column} IS NOT {OWNER}\n"
        "BEGIN SELECT RAISE(ABORT, 'forbidden_right:not_owner'); END;\n"
        for name, table, column in OWNER_ROWS)
    return f"""
-- A result's body and version change one version at a time, by a new submission of the
-- task's holder, or by its worker's amend journaled just before (the task's newest journal
-- row names the new version). A change of who returned it is results_fixed's to refuse.
CREATE TRIGGER results_amended BEFORE UPDATE OF body, version ON results
WHEN (NEW.body IS NOT OLD.body OR NEW.version IS NOT OLD.version)
    AND {state} NOT IN {terminal}
    AND NOT (NEW.version IS OLD.version + 1 AND {holder})
    AND (({same}) OR {holder})
    AND NOT (NEW.version IS OLD.version + 1 AND {amended})
BEGIN
    SELECT CASE
        WHEN NEW.version IS NOT OLD.version + 1
            THEN RAISE(ABORT, 'invalid_state:result_version')
        ELSE RAISE(ABORT, 'forbidden_right:amend_not_journaled')
    END;
END;

-- A merge is recorded once, on a completed task, by the result's worker or the owner,
-- with its journal row written just before (the task's newest names the commit; a row
-- ending in 'completed' is only ever written on a completed task). A second record is
-- results_update's to refuse, one on an open task results_fixed's.
CREATE TRIGGER results_merged BEFORE UPDATE OF merge_commit, merged_by ON results
WHEN (NEW.merge_commit IS NOT OLD.merge_commit OR NEW.merged_by IS NOT OLD.merged_by)
    AND NOT (OLD.merge_commit IS NOT NULL AND {state} IN {terminal})
    AND NOT (NEW.merge_commit IS NOT NULL AND {state} NOT IN {terminal})
    AND NOT (OLD.merge_commit IS NULL AND NEW.merge_commit IS NOT NULL
             AND (NEW.merged_by IS {OWNER} OR NEW.merged_by IS OLD.worker)
             AND {merged})
BEGIN
    SELECT CASE
        WHEN NEW.merge_commit IS NULL OR {state} IS NOT 'completed'
            THEN RAISE(ABORT, 'invalid_state:not_amendable')
        WHEN NEW.merged_by IS NOT {OWNER}
            AND NEW.merged_by IS NOT OLD.worker
            THEN RAISE(ABORT, 'forbidden_right:not_submitter')
        ELSE RAISE(ABORT, 'forbidden_right:merge_not_journaled')
    END;
END;

-- Usage is whole, non-negative and bounded: no row lowers or overflows a day's budget.
CREATE TRIGGER updates_bounded BEFORE INSERT ON updates
WHEN {usage_out_of_bounds("NEW.tokens", True)}
    OR {usage_out_of_bounds("NEW.usd_micros", True)}
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_usage'); END;

-- The owner's tables are written by the owner: a control, and its lift; the policy, the
-- required plugins, the budgets, the tokens.
{owner_rows}
CREATE TRIGGER controls_lifted_by_owner BEFORE UPDATE OF lifted_by ON controls
WHEN NEW.lifted_by IS NOT NULL AND NEW.lifted_by IS NOT OLD.lifted_by
    AND NEW.lifted_by IS NOT {OWNER}
BEGIN SELECT RAISE(ABORT, 'forbidden_right:not_owner'); END;
"""


KEPT_COUNTS = """
-- A day's count of an agent's claims (migration 22) starts from the journal and grows by
-- one a claim: a count set lower lets a budgeted agent claim past its daily budget. A row
-- starts a day with the claims the journal holds since that day began; on the same day it
-- only ever grows by one. Removing a row loses nothing: the next claim counts the journal.
CREATE TRIGGER claim_counts_started BEFORE INSERT ON claim_counts
WHEN NEW.claims IS NOT (SELECT count(*) FROM journal WHERE actor = NEW.agent
                        AND at >= NEW.day AND from_state = 'routed' AND to_state = 'accepted')
BEGIN SELECT RAISE(ABORT, 'forbidden_right:count_forged'); END;

CREATE TRIGGER claim_counts_grown BEFORE UPDATE ON claim_counts
WHEN NEW.agent IS NOT OLD.agent
    OR (NEW.day IS OLD.day AND NEW.claims IS NOT OLD.claims + 1)
    OR (NEW.day IS NOT OLD.day AND NEW.claims IS NOT (
        SELECT count(*) FROM journal WHERE actor = NEW.agent AND at >= NEW.day
        AND from_state = 'routed' AND to_state = 'accepted'))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:count_forged'); END"""
"""A day's claim count held to the journal by the store (migration 22, issue 48): the
count ``charge`` reads before a claim, which a row set lower would have let a budgeted
agent claim past."""

KEPT_WATCHES = """
-- A watch (migration 22) is made unanswered and never handed on: its caller, token, task,
-- question and expiry stay as made, an answer or a cancel once kept stays; its seal, under
-- the owner's key, shows an answer or a watch written outside hivelite.
ALTER TABLE watches ADD COLUMN seal TEXT;

CREATE TRIGGER watches_made BEFORE INSERT ON watches
WHEN NEW.answer IS NOT NULL OR NEW.cancelled_at IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'forbidden_right:watch_kept'); END;

CREATE TRIGGER watches_kept BEFORE UPDATE ON watches
WHEN NEW.id IS NOT OLD.id OR NEW.caller IS NOT OLD.caller OR NEW.token IS NOT OLD.token
    OR NEW.verb IS NOT OLD.verb OR NEW.asked IS NOT OLD.asked
    OR NEW.created_at IS NOT OLD.created_at OR NEW.expires_at IS NOT OLD.expires_at
    OR NEW.poll_ms IS NOT OLD.poll_ms
    OR (OLD.number IS NOT NULL AND NEW.number IS NOT OLD.number)
    OR (OLD.answer IS NOT NULL AND NEW.answer IS NOT OLD.answer)
    OR (OLD.cancelled_at IS NOT NULL AND NEW.cancelled_at IS NOT OLD.cancelled_at)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:watch_kept'); END"""
"""A watch held by the store (migration 22, issue 48): made unanswered, never handed to
another caller or token, moved to another task or extended; an answer or a cancel, once
kept, kept. Its seal (``keys.watch_seal``) covers the rest: the first answer, and a watch
inserted outside hivelite."""


def target_sql() -> str:
    """The whole schema as this version of the code defines it, moves included.

    Not run by stores (they run the frozen migrations); the migration test holds
    a store built by the migrations to exactly this.
    """
    return (TABLES + "\n" + insert_moves_sql() + protocol_triggers() + "\n"
            + refusal_triggers() + "\n" + integrity_triggers() + "\n" + queue_sql()
            + REQUESTS + authority_sql() + TOKENS + TASK_BOARD + decisions_sql()
            + scope_sql() + draft_sql() + lean_sql() + KEPT_BY_DAY + WATCHES + ANSWERS
            + ";\n" + ENROLLED + ";\n" + KEPT_COUNTS + ";\n" + KEPT_WATCHES + ";\n")


def insert_moves_sql(moves: Iterable[Move] = MOVES) -> str:
    """One INSERT of the ``moves`` rows, as literal SQL."""
    def literal(value: object) -> str:
        if value is None:
            return "NULL"
        return str(value) if isinstance(value, int) else _quote(str(value))
    values = ",\n".join("    (" + ", ".join(literal(v) for v in row) + ")"
                         for row in move_rows(moves))
    return ("INSERT INTO moves(number, name, from_state, from_waiting, to_state, to_waiting)"
            " VALUES\n" + values + ";\n")


def policy_values_sql() -> str:
    """The values a policy row may hold (migration 18 added the plugins a store's owner
    enabled, ``plugin:NAME`` = ``enabled``, and the notice owed to a store made before
    installing stopped enabling, ``plugins_notice`` = ``due``)."""
    return f"""CREATE TRIGGER policy_values BEFORE INSERT ON policy
WHEN NOT (
    (NEW.key = 'mode' AND NEW.value IN {_in_list(MODES)})
    OR (NEW.key = 'proposals' AND NEW.value IN {_in_list(PROPOSALS)})
    OR (NEW.key = 'timezone' AND length(NEW.value) BETWEEN 1 AND 64)
    OR ((NEW.key = 'threshold' OR (NEW.key GLOB 'threshold:?*'
                                   AND length(NEW.key) <= 80))
        AND NEW.value GLOB '[0-9]*' AND NEW.value NOT GLOB '*[^0-9]*'
        AND length(NEW.value) <= 4 AND CAST(NEW.value AS INTEGER) <= 1000)
    OR (NEW.key GLOB 'plugin:?*' AND NEW.key NOT GLOB 'plugin:*[^A-Za-z0-9_.-]*'
        AND length(NEW.key) <= {len(ENABLED_PREFIX) + 64} AND NEW.value = 'enabled')
    OR (NEW.key = 'plugins_notice' AND NEW.value = 'due'))
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_policy'); END;
"""


ENABLED_PREFIX = "plugin:"
"""A policy row ``plugin:NAME`` = ``enabled``: the owner enabled that installed plugin on
this store (installing one enables it nowhere)."""
PLUGINS_NOTICE = """
INSERT INTO policy(key, value, at, by)
SELECT 'plugins_notice', 'due', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), value
FROM meta WHERE key = 'owner';
"""
"""Migration 18's mark on a store made before installing stopped enabling: its first open
tells the owner which installed plugins no longer act on it until enabled."""


MODES = ("personal", "team")
"""Whose confirmations count (seed 004): ``personal``, the owner's own agents, one per
instance; ``team``, people and agents of other owners than the worker's, one per owner."""
PROPOSALS = ("gate", "owner")
"""What becomes of a task an agent hands off: the gate decides (``gate``), or it waits for
the owner whatever the gate says (``owner``, seed 004's rule)."""
CONTROLS = ("hold", "veto", "stop")


def _owner_of(agent: str) -> str:
    """The owner half of an ``owner/agent`` name, as SQL."""
    return f"substr({agent}, 1, instr({agent}, '/') - 1)"


def instance_key(column: str) -> str:
    """An instance name compared as the caller's are: surrounding spaces, case and trailing
    dots aside (``models.normal_instance``)."""
    return f"lower(rtrim(trim({column}, ' '), '.'))"


def authority_sql() -> str:
    """The owner's authority in the store (migration 7): the store's policy (independence
    mode, thresholds, time zone, agent proposals), the policy plugins every writer must
    load, hold / veto / stop controls, daily budgets, and the indexes that count a day's
    claims and usage. Its triggers keep controls append-only (a lift is recorded once),
    refuse a lease to a held, vetoed or stopped agent, and count a verdict only when it is
    independent under the store's mode."""
    mode = "coalesce((SELECT value FROM policy WHERE key = 'mode'), 'personal')"
    live = "SELECT 1 FROM controls WHERE lifted_at IS NULL"
    reviewer_owner = _owner_of("NEW.reviewer")
    return f"""
CREATE TABLE policy(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    at TEXT NOT NULL,
    by TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE required_plugins(
    name TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    digest TEXT NOT NULL,
    settings TEXT NOT NULL,
    at TEXT NOT NULL,
    by TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE controls(
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    agent TEXT,
    instance TEXT,
    task INTEGER REFERENCES tasks(number),
    at TEXT NOT NULL,
    by TEXT NOT NULL,
    reason TEXT,
    lifted_at TEXT,
    lifted_by TEXT
);
CREATE INDEX controls_live ON controls(kind) WHERE lifted_at IS NULL;

CREATE TABLE budgets(
    agent TEXT PRIMARY KEY,
    tasks INTEGER,
    tokens INTEGER,
    usd_micros INTEGER,
    at TEXT NOT NULL,
    by TEXT NOT NULL
) WITHOUT ROWID;

-- A day's reported usage per agent, read by the daily budgets (its claims: claim_counts).
CREATE INDEX updates_usage ON updates(actor, at)
WHERE tokens IS NOT NULL OR usd_micros IS NOT NULL;

{policy_values_sql()}
CREATE TRIGGER policy_no_update BEFORE UPDATE ON policy
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER required_plugins_no_update BEFORE UPDATE ON required_plugins
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER required_plugins_kind BEFORE INSERT ON required_plugins
WHEN NEW.kind NOT IN ('entry_point', 'file', 'given') OR NOT json_valid(NEW.settings)
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_requirement'); END;

-- A control names an instance as every comparison spells it (lowercase, no trailing dot).
CREATE TRIGGER controls_scope BEFORE INSERT ON controls
WHEN NEW.lifted_at IS NOT NULL OR NEW.lifted_by IS NOT NULL
    OR NEW.instance IS NOT {instance_key("NEW.instance")} OR NOT (
    (NEW.kind = 'hold' AND NEW.task IS NULL AND (NEW.agent IS NULL) != (NEW.instance IS NULL))
    OR (NEW.kind = 'veto' AND NEW.task IS NOT NULL AND NEW.agent IS NOT NULL
        AND NEW.instance IS NULL)
    OR (NEW.kind = 'stop' AND NEW.task IS NULL
        AND (NEW.agent IS NULL OR NEW.instance IS NULL)))
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_control'); END;

CREATE TRIGGER controls_keys_kept BEFORE INSERT ON controls
WHEN EXISTS (SELECT 1 FROM controls WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

-- A control is lifted once, explicitly; nothing else about it changes.
CREATE TRIGGER controls_lifted_once BEFORE UPDATE ON controls
WHEN OLD.lifted_at IS NOT NULL OR NEW.lifted_at IS NULL OR NEW.lifted_by IS NULL
    OR NEW.id IS NOT OLD.id OR NEW.kind IS NOT OLD.kind OR NEW.agent IS NOT OLD.agent
    OR NEW.instance IS NOT OLD.instance OR NEW.task IS NOT OLD.task OR NEW.at IS NOT OLD.at
    OR NEW.by IS NOT OLD.by OR NEW.reason IS NOT OLD.reason
BEGIN SELECT RAISE(ABORT, 'forbidden_right:controls_kept'); END;

CREATE TRIGGER controls_kept BEFORE DELETE ON controls
BEGIN SELECT RAISE(ABORT, 'forbidden_right:controls_kept'); END;

CREATE TRIGGER budgets_values BEFORE INSERT ON budgets
WHEN (NEW.tasks IS NOT NULL AND (typeof(NEW.tasks) != 'integer' OR NEW.tasks < 0))
    OR (NEW.tokens IS NOT NULL AND (typeof(NEW.tokens) != 'integer' OR NEW.tokens < 0))
    OR (NEW.usd_micros IS NOT NULL
        AND (typeof(NEW.usd_micros) != 'integer' OR NEW.usd_micros < 0))
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_budget'); END;

CREATE TRIGGER budgets_no_update BEFORE UPDATE ON budgets
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

-- No lease for an agent the owner stopped, held, or vetoed on this task.
CREATE TRIGGER task_lease_controlled BEFORE UPDATE OF lease_id ON tasks
WHEN NEW.lease_id IS NOT NULL AND NEW.lease_id IS NOT OLD.lease_id
BEGIN
    SELECT CASE
        WHEN EXISTS ({live} AND kind = 'stop' AND (agent IS NEW.lease_holder
                     OR instance IS {instance_key("NEW.lease_instance")}
                     OR (agent IS NULL AND instance IS NULL)))
            THEN RAISE(ABORT, 'forbidden_right:vetoed')
        WHEN EXISTS ({live} AND kind = 'hold' AND (agent IS NEW.lease_holder
                     OR instance IS {instance_key("NEW.lease_instance")}))
            THEN RAISE(ABORT, 'forbidden_right:held')
        WHEN EXISTS ({live} AND kind = 'veto' AND agent IS NEW.lease_holder
                     AND task IS NEW.number)
            THEN RAISE(ABORT, 'forbidden_right:vetoed')
    END;
END;

-- A verdict counts only on the current version of the result, from another agent on
-- another instance than the result's, and only as the store's mode says: personal, the
-- owner's own agents, one per instance; team, other owners than the worker's, one per
-- owner. A verdict that does not count says why.
CREATE TRIGGER confirmations_counted BEFORE INSERT ON confirmations
WHEN (SELECT state FROM tasks WHERE number = NEW.task) IS 'approval' AND (
    NEW.version IS NOT (SELECT version FROM results WHERE task = NEW.task)
    OR (NEW.counted AND (
        EXISTS (SELECT 1 FROM results WHERE task = NEW.task AND (worker = NEW.reviewer
                OR {instance_key("instance")} = {instance_key("NEW.instance")}))
        OR CASE {mode}
            WHEN 'team' THEN {reviewer_owner} = (SELECT {_owner_of("worker")} FROM results
                                                  WHERE task = NEW.task)
                OR EXISTS (SELECT 1 FROM confirmations c WHERE c.task = NEW.task
                           AND c.version = NEW.version AND c.counted
                           AND {_owner_of("c.reviewer")} = {reviewer_owner})
            ELSE {reviewer_owner} IS NOT (SELECT value FROM meta WHERE key = 'owner')
                OR EXISTS (SELECT 1 FROM confirmations c WHERE c.task = NEW.task
                           AND c.version = NEW.version AND c.counted
                           AND {instance_key("c.instance")} = {instance_key("NEW.instance")})
        END)))
BEGIN SELECT RAISE(ABORT, 'invalid_state:reviewer_not_independent'); END;

CREATE TRIGGER confirmations_why BEFORE INSERT ON confirmations
WHEN (NEW.counted AND NEW.why IS NOT NULL) OR (NOT NEW.counted AND NEW.why IS NULL)
BEGIN SELECT RAISE(ABORT, 'invalid_input:uncounted_needs_why'); END;
"""


ENROLMENT_RIGHTS = ("tasks.propose", "tasks.work")
"""The rights an enrolment's scope may give: the writes it covers (reads follow the token)."""
ROLE_GLOB = "[a-z]*"
"""A role (seed 004's ``validate_role``): 1-64 of ``[a-z0-9-]``, starting with a letter."""


def _role_ok(column: str) -> str:
    return (f"({column} GLOB '{ROLE_GLOB}' AND {column} NOT GLOB '*[^a-z0-9-]*'"
            f" AND length({column}) <= 64)")


def _slugs_ok(column: str, role: bool) -> str:
    """SQL true when ``column`` is a JSON array of project slugs (or roles)."""
    check = _role_ok("value") if role else (
        "(value GLOB '[a-z0-9]*' AND value NOT GLOB '*[^a-z0-9-]*' AND length(value) <= 39)")
    return (f"(json_valid({column}) AND json_type({column}) = 'array'"
            f" AND NOT EXISTS (SELECT 1 FROM json_each({column})"
            f" WHERE type != 'text' OR NOT {check}))")


def scope_sql() -> str:
    """Who may work where (migration 12): a task's role, and each agent's enrolment (seed
    004's opt-in: the projects, roles and rights it covers), written by the owner and
    journaled first; a lease only within its holder's enrolment, and holder moves only
    under the enrolment the claim was taken under. A guest's own request is withdrawn by
    an agent of the guest's owner in team mode; every other owner's move stays the
    owner's."""
    mode = "coalesce((SELECT value FROM policy WHERE key = 'mode'), 'personal')"
    enrolment = "SELECT 1 FROM enrolments e WHERE e.agent = NEW.lease_holder"
    newest = ("SELECT seq AS seq, actor AS actor, reason AS reason, CASE WHEN"
              " json_valid(detail) THEN detail END AS detail FROM journal ORDER BY seq DESC"
              " LIMIT 1")  # named: SQLite re-reads triggers on a column's rename
    rights = ("NOT EXISTS (SELECT 1 FROM json_each('[\"' || replace(NEW.rights, ',', '\",\"')"
              f" || '\"]') WHERE value NOT IN {_in_list(ENROLMENT_RIGHTS)})")
    return f"""
ALTER TABLE tasks ADD COLUMN role TEXT;
ALTER TABLE tasks ADD COLUMN lease_scope INTEGER;

CREATE TABLE enrolments(
    agent TEXT PRIMARY KEY,
    projects TEXT NOT NULL,
    roles TEXT NOT NULL,
    rights TEXT NOT NULL,
    active INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    at TEXT NOT NULL,
    by TEXT NOT NULL
) WITHOUT ROWID;

-- A role is seed 004's slug, and a task keeps the role it was handed off with.
CREATE TRIGGER task_role BEFORE INSERT ON tasks
WHEN NEW.role IS NOT NULL AND NOT {_role_ok("NEW.role")}
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_role'); END;

CREATE TRIGGER task_role_fixed BEFORE UPDATE OF role ON tasks
WHEN NEW.role IS NOT OLD.role
BEGIN SELECT RAISE(ABORT, 'invalid_input:immutable_field'); END;

-- An enrolment is the owner's, written whole (its projects and roles JSON arrays of slugs,
-- [] for every project; some of the write rights), right after the journal row that
-- records exactly it; it is replaced, never edited, and only after a newer such row.
CREATE TRIGGER enrolments_by_owner BEFORE INSERT ON enrolments
WHEN NEW.by IS NOT {OWNER}
BEGIN SELECT RAISE(ABORT, 'forbidden_right:not_owner'); END;

CREATE TRIGGER enrolments_shape BEFORE INSERT ON enrolments
WHEN NEW.active NOT IN (0, 1) OR typeof(NEW.seq) != 'integer' OR NEW.rights = ''
    OR NOT {_slugs_ok("NEW.projects", False)} OR NOT {_slugs_ok("NEW.roles", True)}
    OR NOT {rights}
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_enrolment'); END;

CREATE TRIGGER enrolments_journaled BEFORE INSERT ON enrolments
WHEN NOT EXISTS (SELECT 1 FROM ({newest}) j
                 WHERE j.seq = NEW.seq AND j.reason = 'enrolment' AND j.actor IS NEW.by
                   AND json_extract(j.detail, '$.agent') IS NEW.agent
                   AND json_extract(j.detail, '$.projects') IS NEW.projects
                   AND json_extract(j.detail, '$.roles') IS NEW.roles
                   AND json_extract(j.detail, '$.rights') IS NEW.rights
                   AND json_extract(j.detail, '$.active') IS NEW.active)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:enrolment_not_journaled'); END;

CREATE TRIGGER enrolments_no_update BEFORE UPDATE ON enrolments
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER enrolments_replaced BEFORE DELETE ON enrolments
WHEN NOT EXISTS (SELECT 1 FROM ({newest}) j
                 WHERE j.seq > OLD.seq AND j.reason = 'enrolment'
                   AND json_extract(j.detail, '$.agent') IS OLD.agent)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:enrolment_not_journaled'); END;

-- A lease is taken within its holder's enrolment, which it names (lease_scope: the seq of
-- the enrolment's journal row; NULL for an agent with none), and a task with a role only
-- by an agent enrolled in that role.
CREATE TRIGGER task_lease_enrolled BEFORE UPDATE OF lease_id, lease_scope ON tasks
WHEN NEW.lease_id IS NOT NULL AND (NEW.lease_id IS NOT OLD.lease_id
                                   OR NEW.lease_scope IS NOT OLD.lease_scope)
BEGIN
    SELECT CASE
        WHEN NEW.lease_id IS OLD.lease_id
            THEN RAISE(ABORT, 'invalid_input:immutable_field')
        WHEN EXISTS ({enrolment} AND NOT e.active)
            THEN RAISE(ABORT, 'invalid_state:optin_inactive')
        WHEN NEW.lease_scope IS NOT (SELECT seq FROM enrolments WHERE agent = NEW.lease_holder)
            THEN RAISE(ABORT, 'invalid_state:optin_changed')
        WHEN EXISTS ({enrolment} AND (instr(',' || e.rights || ',', ',tasks.work,') = 0
                     OR (json_array_length(e.projects) > 0 AND NOT EXISTS (
                         SELECT 1 FROM json_each(e.projects) WHERE value = NEW.project))))
            THEN RAISE(ABORT, 'forbidden_right:optin_scope')
        WHEN NEW.role IS NOT NULL AND NOT EXISTS (
                {enrolment} AND EXISTS (SELECT 1 FROM json_each(e.roles) WHERE value = NEW.role))
            THEN RAISE(ABORT, 'forbidden_right:not_permitted')
    END;
END;

{holder_enrolled_sql()}
-- The owner's decisions are the owner's: approve, deny and cancel are made by the store's
-- owner; a decline by the owner, or by a verifier whose counted rejection of the current
-- result it is; in team mode, a guest's own request is also withdrawn by an agent of the
-- guest's owner (the requester's).
CREATE TRIGGER task_decided_by BEFORE UPDATE OF state ON tasks
WHEN {owner_decides()}
    AND NEW.actor IS NOT {OWNER}
    AND NOT (NEW.state = 'cancelled' AND {mode} = 'team' AND instr(NEW.actor, '/') > 0
             AND {_owner_of("NEW.actor")} = {_owner_of("OLD.requester")}
             AND {_owner_of("OLD.requester")} IS NOT {OWNER})
BEGIN
    SELECT CASE
        WHEN OLD.state NOT IN {by_verifier_too()}
            THEN RAISE(ABORT, 'forbidden_right:not_owner')
        WHEN NOT EXISTS (SELECT 1 FROM confirmations c JOIN results r ON r.task = c.task
                         AND r.version = c.version WHERE c.task = NEW.number
                         AND c.reviewer = NEW.actor AND c.verdict = 'reject' AND c.counted)
            THEN RAISE(ABORT, 'forbidden_right:not_decided')
    END;
END;
"""


def holder_enrolled_sql() -> str:
    """The holder works on under its claim's enrolment (a submission's row included)."""
    return f"""\
-- The holder works on under the enrolment its claim was taken under: after a change of
-- it, the holder's next move is refused (it may still give the task back).
CREATE TRIGGER task_holder_enrolled BEFORE UPDATE OF state ON tasks
WHEN OLD.lease_id IS NOT NULL AND NEW.state IS NOT OLD.state
    AND (NEW.state IN ('verifying', 'waiting', 'working') OR {via()} IS NOT NULL)
    AND OLD.lease_scope IS NOT (SELECT seq FROM enrolments WHERE agent = OLD.lease_holder)
BEGIN
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM enrolments WHERE agent = OLD.lease_holder AND NOT active)
            THEN RAISE(ABORT, 'invalid_state:optin_inactive')
        ELSE RAISE(ABORT, 'invalid_state:optin_changed')
    END;
END;
"""


ONE_ROW_SUBMISSIONS: tuple[tuple[str, Callable[[], str]], ...] = (
    ("task_move", task_move_sql), ("journal_insert", journal_insert_sql),
    ("task_completion_decided", completion_decided_sql),
    ("task_attempt_failed", attempt_counted_sql), ("task_holder_enrolled", holder_enrolled_sql))
"""The rules migration 19 changes, so that a submission is one journal row: each reads a
row's ``via`` as the seed moves it stands for (:func:`remade_in_order` makes them)."""


def remade_in_order(before: Sequence[tuple[str, str]], made: Mapping[str, str],
                    changed: Iterable[str]) -> str:
    """The statements that make the rules ``changed`` again as ``made`` has them (name:
    text), given the rules of their tables as a store has them (``before``: name and
    table, oldest first). SQLite runs a table's rules newest first, so each rule of those
    tables from the first one changed is dropped and made again in the order it was,
    changed or not: every rule then fires in the order it did, and a write two rules
    refuse is refused with the same reason."""
    changed = set(changed)
    tables = {table for name, table in before if name in changed}
    out, remaking = [], set()
    for name, table in before:
        if name in changed:
            remaking.add(table)
        if table in tables and table in remaking:
            out.append(f"DROP TRIGGER {name};\n{made[name]};\n")
    return "".join(out)


DRAFT_KINDS = ("decision", "document", "patch")
"""What a result's draft may be (seed 004: a result with its knowledge change)."""


def draft_sql() -> str:
    """A result's draft and its evidence's receipts (migration 12): the draft is its
    knowledge change (a patch, a document or a decision), kept with it as JSON, set only
    by the holder's submission (an amend keeps it), and never with a failed outcome, which
    brings none; the receipts, as hivelite checked them (a JSON array, one entry per piece
    of evidence), change only with a new version of the result."""
    holder = ("EXISTS (SELECT 1 FROM tasks WHERE number = NEW.task"
              " AND state IN ('accepted', 'working') AND lease_holder IS NEW.worker"
              " AND lease_instance IS NEW.instance)")
    shape = ("NEW.draft IS NOT NULL AND (NOT json_valid(NEW.draft)"
             " OR json_type(NEW.draft) IS NOT 'object'"
             f" OR coalesce(json_extract(NEW.draft, '$.kind'), '') NOT IN"
             f" {_in_list(DRAFT_KINDS)}"
             " OR json_type(NEW.draft, '$.content') IS NOT 'text'"
             " OR NEW.outcome IS NOT 'completed')")
    receipts = ("(NEW.receipts IS NOT NULL AND (NOT json_valid(NEW.receipts)"
                " OR json_type(NEW.receipts) IS NOT 'array' OR EXISTS (SELECT 1 FROM"
                " json_each(NEW.receipts) WHERE type NOT IN ('null', 'object'))))")
    return f"""
ALTER TABLE results ADD COLUMN draft TEXT;
ALTER TABLE results ADD COLUMN receipts TEXT;

-- A draft is an object with its kind and its content, and only with a completed outcome.
CREATE TRIGGER results_draft_shape BEFORE INSERT ON results
WHEN {shape}
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_draft'); END;

CREATE TRIGGER results_draft_reshaped BEFORE UPDATE OF draft, outcome ON results
WHEN {shape}
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_draft'); END;

-- It changes only with a new submission by the task's holder.
CREATE TRIGGER results_draft_fixed BEFORE UPDATE OF draft ON results
WHEN NEW.draft IS NOT OLD.draft AND NOT (NEW.version IS OLD.version + 1 AND {holder})
BEGIN SELECT RAISE(ABORT, 'forbidden_right:draft_fixed'); END;

-- Receipts are a JSON array of nulls and objects, written with a new version alone.
CREATE TRIGGER results_receipts_shape BEFORE INSERT ON results
WHEN {receipts}
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_receipt'); END;

CREATE TRIGGER results_receipts_fixed BEFORE UPDATE OF receipts ON results
WHEN NEW.receipts IS NOT OLD.receipts
BEGIN
    SELECT CASE
        WHEN NEW.version IS NOT OLD.version + 1
            THEN RAISE(ABORT, 'forbidden_right:receipts_fixed')
        WHEN {receipts}
            THEN RAISE(ABORT, 'invalid_input:invalid_receipt')
    END;
END;
"""


RIGHTS = tuple(r.value for r in TOKEN_RIGHTS)
"""Seed 004's lease rights an agent's token carries (an owner token carries ``owner``)."""

TOKENS = f"""
CREATE TABLE tokens(
    id TEXT PRIMARY KEY,
    agent TEXT,
    instance TEXT,
    rights TEXT NOT NULL,
    hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    revoked_at TEXT,
    by TEXT NOT NULL
) WITHOUT ROWID;

-- A token is an owner's (no agent, no instance, the right 'owner') or an agent's (both
-- named, some of the lease rights); only its hash is kept, and it is never taken back
-- except by revoking it once.
CREATE TRIGGER tokens_shape BEFORE INSERT ON tokens
WHEN NEW.revoked_at IS NOT NULL OR length(NEW.hash) != 64 OR NEW.hash GLOB '*[^0-9a-f]*'
    OR NOT ((NEW.agent IS NULL AND NEW.instance IS NULL AND NEW.rights = 'owner')
            OR (NEW.agent IS NOT NULL AND NEW.instance IS NOT NULL AND NEW.rights != ''
                AND NEW.instance = {instance_key("NEW.instance")}
                AND NOT EXISTS (SELECT 1 FROM json_each('["' || replace(NEW.rights, ',',
                                '","') || '"]') WHERE value NOT IN {_in_list(RIGHTS)})))
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_token'); END;

CREATE TRIGGER tokens_keys_kept BEFORE INSERT ON tokens
WHEN EXISTS (SELECT 1 FROM tokens WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

CREATE TRIGGER tokens_revoked_once BEFORE UPDATE ON tokens
WHEN OLD.revoked_at IS NOT NULL OR NEW.revoked_at IS NULL OR NEW.id IS NOT OLD.id
    OR NEW.agent IS NOT OLD.agent OR NEW.instance IS NOT OLD.instance
    OR NEW.rights IS NOT OLD.rights OR NEW.hash IS NOT OLD.hash
    OR NEW.created_at IS NOT OLD.created_at OR NEW.expires_at IS NOT OLD.expires_at
    OR NEW.by IS NOT OLD.by
BEGIN SELECT RAISE(ABORT, 'forbidden_right:tokens_kept'); END;

CREATE TRIGGER tokens_kept BEFORE DELETE ON tokens
BEGIN SELECT RAISE(ABORT, 'forbidden_right:tokens_kept'); END;
"""
"""Access tokens for the HTTP service and MCP (migration 8): a token's id and the SHA-256
of its secret, bound to an agent and an instance (or to the owner), with its rights."""


TASK_COLUMNS_BUT_HEAD = (
    "number", "id", "state", "waiting_on", "project", "requester", "assignee", "created_at",
    "updated_at", "lease_id", "lease_token", "lease_holder", "lease_instance",
    "lease_session", "lease_expires", "priority", "labels", "fields_version", "depends",
    "actor", "reason", "detail", "chain", "waits", "attempts", "attempt_limit", "role",
    "lease_scope")
"""Every column of ``tasks`` but ``last_seq``: what ``task_update`` guards. A column a
later migration adds joins this list (``tests/test_lean_moves.py`` holds it to the
table)."""


@dataclass(frozen=True)
class EngineOnly:
    """What one engine's schema has that the other's does not: its page layout, not the
    contract (the same moves, journal rows and refusals on both)."""

    tables: frozenset[str]
    columns: frozenset[tuple[str, str]]
    triggers: frozenset[str]


SQLITE_ONLY = EngineOnly(
    tables=frozenset({"claim_counts"}),
    columns=frozenset({("tasks", "last_seq"), ("journal", "prev"), ("requests", "day")}),
    triggers=frozenset({"task_head", "journal_head", "claim_counts_started",
                        "claim_counts_grown"}))
"""SQLite's links of each task's journal and its claim counts (migration 13), which a
PostgreSQL store does without: it keeps its indexes ``journal_by_task`` and
``journal_claims`` (a claim counts the journal under the agent's lock: no count to hold,
migration 22), where the pages a move writes matter less than SQLite's one writer;
and the day that keys a kept answer (migration 14), where PostgreSQL keeps its index by
age."""


def lean_sql() -> str:
    """Fewer pages a move (migration 13, DESIGN §4a): each task's journal as a list
    linked from its task row, in place of an index on ``journal(task, seq)``; and a
    day's claims counted in a row per budgeted agent, in place of an index on every claim.

    ``tasks.last_seq`` is the task's newest journal row and ``journal.prev`` the task's
    row before each; a task's history is a walk back from its head. A write names the seq
    its move's row takes (it knows the chain's tip under the write lock), so the move and
    the head are one ``UPDATE``; a row written any other way (an event, raw SQL) moves the
    head after it. The rules keep the list true whoever writes: a row's ``prev`` is its
    task's head, a head is the newest row or the one its move is about to write, and no
    seq is skipped. Store-wide rows (no task) keep a small index of their own, which a
    move never touches. The rules that write and check the links, and those on a
    result's amend and merge that read a task's newest row through its head, keep their
    places among the triggers (:func:`protocol_triggers`, :func:`decisions_sql`): the
    migration makes them again in the order they were, so every rule fires as before.

    ``claim_counts`` holds, for each agent with a daily budget, the day it counts (the
    day's first instant in the owner's time zone) and its claims in that day. A claim by
    an agent with a row adds one; the guard, which reads the count before a claim, starts a
    day's row (counted from the journal when it has none). Without a budget an agent has no
    row, and its claim writes nothing more."""
    return """
ALTER TABLE tasks ADD COLUMN last_seq INTEGER;
ALTER TABLE journal ADD COLUMN prev INTEGER;

CREATE INDEX journal_events ON journal(reason, seq) WHERE task IS NULL;

CREATE TABLE claim_counts(
    agent TEXT PRIMARY KEY,
    day TEXT NOT NULL,
    claims INTEGER NOT NULL
) WITHOUT ROWID;

-- A head is the journal's newest row, about this task, or the row a move of this task is
-- about to write (the next seq).
CREATE TRIGGER task_head BEFORE UPDATE OF last_seq ON tasks
WHEN NEW.last_seq IS NOT OLD.last_seq AND NOT (
    (NEW.state IS NOT OLD.state
     AND NEW.last_seq IS (SELECT coalesce(max(seq), 0) FROM journal) + 1)
    OR (NEW.last_seq IS (SELECT max(seq) FROM journal)
        AND (SELECT task FROM journal WHERE seq = NEW.last_seq) IS NEW.number))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:journal_head'); END;

-- A row about a task that its write did not name as the head (an event; raw SQL) heads it.
CREATE TRIGGER journal_head AFTER INSERT ON journal
WHEN NEW.task IS NOT NULL
BEGIN
    UPDATE tasks SET last_seq = NEW.seq WHERE number = NEW.task AND last_seq IS NOT NEW.seq;
END;

"""


KEPT_BY_DAY = """
CREATE TEMP TABLE requests_kept AS SELECT * FROM requests;
DROP TABLE requests;
CREATE TABLE requests(
    day INTEGER NOT NULL,
    caller TEXT NOT NULL,
    id TEXT NOT NULL,
    verb TEXT NOT NULL,
    digest TEXT NOT NULL,
    answer TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (day, caller, id)
) WITHOUT ROWID;
INSERT INTO requests(day, caller, id, verb, digest, answer, at)
    SELECT unixepoch(substr(at, 1, 10)) / 86400, caller, id, verb, digest, answer, at
    FROM requests_kept;
DROP TABLE temp.requests_kept;
"""
"""Kept first answers by day (migration 14, DESIGN §4a): one B-tree keyed by the UTC day
of the answer (days since 1970-01-01), then caller and request id, in place of a table
keyed by caller and id beside an index by age. A record then costs one leaf, and the
records a day old leave from the front of the tree, a batch at a time (a lookup asks
for the day before and the day itself, so a record answers for its whole ``KEEP``). The
records kept so far move across unchanged."""


WATCHES = """
CREATE TABLE watches(
    id TEXT PRIMARY KEY CHECK (length(id) >= 26),
    caller TEXT NOT NULL,
    token TEXT,
    verb TEXT NOT NULL,
    number INTEGER,
    asked TEXT NOT NULL,
    answer TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    poll_ms INTEGER NOT NULL CHECK (poll_ms > 0),
    cancelled_at TEXT
) WITHOUT ROWID;
CREATE INDEX watches_by_expiry ON watches(expires_at);
"""
"""Watches (migration 17): a caller's durable wait on a task's outcome, on its result's
verdict, or on its own queue, which the MCP face serves as an MCP task. Its id is the
task's ``taskId`` (random, never a task number), bound to the caller and the token that
made it; what it waits for is read from the task each time it is asked, so a watch keeps
only what was asked and, for the queue, the claim that answered it. It is face state,
not the protocol's: an export leaves it out, and it is deleted once it expires. Since
migration 22 the store holds it (:data:`KEPT_WATCHES`)."""


ANSWERS = f"""
-- An answer (migration 20) is a journal row that leaves its task waiting, reason
-- 'answered': only a task paused on a question takes one, a question to a person only
-- from the owner, one to an agent from the owner or another agent than its assignee (who
-- asked it). A row that is no journal row of the task's (journal_insert) is refused as such
-- first: this rule is older than the journal's others, so SQLite runs it after them.
CREATE TRIGGER journal_answered BEFORE INSERT ON journal
WHEN NEW.reason = 'answered' AND NEW.task IS NOT NULL AND NEW.from_state IS 'waiting'
    AND NEW.to_state IS 'waiting'
BEGIN
    SELECT CASE
        WHEN (SELECT waiting_on FROM tasks WHERE number = NEW.task) NOT IN ('human', 'agent')
            THEN RAISE(ABORT, 'invalid_state:not_asking')
        WHEN NEW.actor IS {OWNER} THEN NULL
        WHEN (SELECT waiting_on FROM tasks WHERE number = NEW.task) = 'human'
            THEN RAISE(ABORT, 'forbidden_right:not_permitted')
        WHEN NEW.actor IS (SELECT assignee FROM tasks WHERE number = NEW.task)
            THEN RAISE(ABORT, 'forbidden_right:self_answer')
    END;
END"""
"""Who answers which question, held by the store (migration 20): the rule ``answer``'s
statement counts on, as the guard's ``asking`` says it to people."""


PROPOSING = ("(NEW.from_state IS NULL AND NEW.to_state = 'requested')"
             " OR NEW.to_state = 'cancelled'"
             " OR (NEW.from_state = NEW.to_state AND NEW.reason = 'fields')")
"""The journal rows an enrolment's ``tasks.propose`` right covers (a task handed off, one
withdrawn, a change of its fields), in SQL both engines read alike; every other row of an
agent's needs ``tasks.work``."""

ENROLLED = f"""
-- An enrolled agent writes within its enrolment (migration 21), whatever the verb: a
-- journal row of its own about a task is refused when the enrolment ended, when it needs
-- a right the enrolment does not give (tasks.propose to hand off, withdraw or change
-- fields; tasks.work for the rest), when the task's project is outside it, and while the
-- agent holds the task under a claim taken under an earlier enrolment. A claim given back
-- (the holder's move to routed that is no submission) is never refused. This rule is older
-- than the journal's others, so SQLite runs it after them.
CREATE TRIGGER journal_enrolled BEFORE INSERT ON journal
WHEN NEW.task IS NOT NULL AND EXISTS (SELECT 1 FROM enrolments WHERE agent = NEW.actor)
    AND NOT (coalesce(NEW.from_state, '') IN ('accepted', 'working') AND NEW.to_state IS 'routed'
             AND {via("NEW", "NEW.from_state")} IS NULL)
BEGIN
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM enrolments WHERE agent = NEW.actor AND NOT active)
            THEN RAISE(ABORT, 'invalid_state:optin_inactive')
        WHEN EXISTS (SELECT 1 FROM enrolments WHERE agent = NEW.actor
                     AND instr(',' || rights || ',', CASE WHEN {PROPOSING}
                               THEN ',tasks.propose,' ELSE ',tasks.work,' END) = 0)
            THEN RAISE(ABORT, 'forbidden_right:optin_scope')
        WHEN EXISTS (SELECT 1 FROM enrolments e, tasks t
                     WHERE e.agent = NEW.actor AND t.number = NEW.task
                       AND json_array_length(e.projects) > 0
                       AND NOT EXISTS (SELECT 1 FROM json_each(e.projects) WHERE value = t.project))
            THEN RAISE(ABORT, 'forbidden_right:optin_scope')
        WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.number = NEW.task AND t.lease_holder = NEW.actor
                     AND t.lease_scope IS NOT (SELECT seq FROM enrolments WHERE agent = NEW.actor))
            THEN RAISE(ABORT, 'invalid_state:optin_changed')
    END;
END"""
"""An enrolled agent's writes within its enrolment, held by the store (migration 21): the
rule that lets every verb of an enrolled agent's be its statement, as the write path's
``check_scope`` says it to people."""
