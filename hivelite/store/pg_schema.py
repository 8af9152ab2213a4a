"""The schema on PostgreSQL: the same tables, indexes and rules as on SQLite, in PL/pgSQL.

Generated from the same sources as the SQLite schema (``schema.py``): the protocol module
(moves, states, priorities), the tables of refusals and kept keys, the lease length, the
modes and rights. Every refusal raises the same ``code:reason`` text, so the same error
classes come out whichever engine refused.

Columns keep SQLite's types (``text`` and ``bigint``, JSON as text, times as RFC 3339
text), so a row reads the same from either engine and an export of one imports into
the other unchanged.

What differs, and why:

- PostgreSQL's ``CREATE TRIGGER … WHEN`` takes no subquery, so each rule is a trigger
  function that checks its condition and raises. Triggers of one event fire in name
  order; each name starts with its place (``hl10_``, ``hl20_``, …), which is the order
  the rules are listed here.
- A function call costs tens of microseconds, a ``WHEN`` is evaluated by the server
  itself: so the rules most moves cannot break (:data:`FILTERED`) have the ``WHEN`` their
  condition implies (:func:`guard`, its leading test without a subquery) and are called
  only for writes they could refuse; the function still checks the whole condition
  (migration 15).
- A row-level ``DELETE`` trigger does not see ``TRUNCATE``: every kept table refuses it
  with a statement-level trigger.
- ``INSERT … ON CONFLICT DO UPDATE`` (PostgreSQL's upsert, SQLite's ``REPLACE``) is
  refused before it can rewrite a row: a kept key's insert trigger refuses a key that
  exists, and the conflict never arises.
- The journal, the updates and the controls number their rows in a trigger (one more
  than the last), under the store's write lock: no gaps, and commit order.
- Every function runs with the store's own ``search_path`` (``SET search_path FROM
  CURRENT``, fixed when the store is made): a session with another path, or a table of
  the same name in another schema, never changes what a rule reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import Any

from ..core.protocol import PRIORITIES, SUBMITTED_VIA, TERMINAL, State, WaitingOn
from .schema import (
    DRAFT_KINDS,
    ENROLMENT_RIGHTS,
    KEPT_KEYS,
    LEASE_MINUTES,
    MODES,
    OWNER,
    OWNER_ROWS,
    PROPOSALS,
    PROPOSING,
    RIGHTS,
    _in_list,
    _quote,
    by_verifier_too,
    insert_moves_sql,
    owner_decides,
    passage_sql,
    usage_out_of_bounds,
)
from .schema import ONE_ROW_SUBMISSIONS as ONE_ROW_SUBMISSIONS_SQLITE

SCHEMA = "hivelite"
"""The PostgreSQL schema (namespace) that holds a store's tables in its database, unless
its URL names another (``?schema=NAME``: several stores in one database)."""

TERMINAL_SQL = _in_list(s.value for s in TERMINAL)
LEASED = _in_list(s.value for s in (State.accepted, State.working))
WITH_RESULT = _in_list(s.value for s in (State.verifying, State.approval, State.completed))
WAITING_VALUES = _in_list(w.value for w in WaitingOn)

RANK = ("(CASE priority " + " ".join(f"WHEN {_quote(p)} THEN {n}" for n, p in
                                    enumerate(PRIORITIES[:-1]))
        + f" ELSE {len(PRIORITIES) - 1} END)")
"""A priority's rank (0 most pressing): the queue index and ``next`` sort by it."""
READY = "state = 'routed' AND waits = 0 AND attempts < attempt_limit"


def instance_key(column: str) -> str:
    """An instance name compared as the caller's are (``schema.instance_key``)."""
    return f"lower(rtrim(btrim({column}, ' '), '.'))"


def _owner_of(agent: str) -> str:
    """The owner half of an ``owner/agent`` name ('' when there is no ``/``)."""
    return (f"(CASE WHEN strpos({agent}, '/') > 0"
            f" THEN substr({agent}, 1, strpos({agent}, '/') - 1) ELSE '' END)")


def _closed(row: str) -> str:
    return f"(SELECT state FROM tasks WHERE number = {row}.task) IN {TERMINAL_SQL}"


def via(row: str = "NEW", source: str = "OLD.state") -> str:
    """A move's or journal row's ``via`` (``schema.via``) as jsonb, read only on a move out
    of a holder's state (``source``): NULL on every other row, on a detail that is no
    JSON, and on a via that is no array (as SQLite reads it). A task row keeps its last
    move's detail, so a later move that does not set its own (raw SQL) is not read as a
    submission."""
    return (f"CASE WHEN {source} IN {_in_list(s.value for s in SUBMITTED_VIA)}"
            f" AND jsonb_typeof(hl_json({row}.detail) -> 'via') = 'array'"
            f" THEN hl_json({row}.detail) -> 'via' END")


def passage(source: str, passed: str, target: str) -> str:
    """True when a row from ``source`` through ``passed`` to ``target`` is a submission's
    (``schema.passage_sql``, its vias written as jsonb)."""
    return passage_sql(source, passed, target, literal=lambda text: f"'{text}'::jsonb")


TABLES = """
CREATE TABLE meta(
    key text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE moves(
    number bigint NOT NULL UNIQUE,
    name text NOT NULL UNIQUE,
    from_state text NOT NULL,
    from_waiting text,
    to_state text NOT NULL,
    to_waiting text,
    PRIMARY KEY (from_state, to_state)
);

CREATE TABLE tasks(
    number bigint PRIMARY KEY,
    id text NOT NULL UNIQUE,
    state text NOT NULL,
    waiting_on text,
    project text NOT NULL,
    requester text NOT NULL,
    assignee text NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    lease_id text,
    lease_token bigint NOT NULL DEFAULT 0,
    lease_holder text,
    lease_instance text,
    lease_session text,
    lease_expires text,
    priority text NOT NULL DEFAULT 'normal',
    labels text NOT NULL DEFAULT '[]',
    fields_version bigint NOT NULL DEFAULT 1,
    depends bigint NOT NULL DEFAULT 0,
    actor text,
    reason text,
    detail text,
    chain text,
    waits bigint NOT NULL DEFAULT 0,
    attempts bigint NOT NULL DEFAULT 0,
    attempt_limit bigint NOT NULL DEFAULT 3,
    role text,
    lease_scope bigint
);

CREATE TABLE packets(
    task bigint PRIMARY KEY REFERENCES tasks(number),
    body text NOT NULL
);

CREATE TABLE checkpoints(
    task bigint PRIMARY KEY REFERENCES tasks(number),
    body text NOT NULL
);

CREATE TABLE results(
    task bigint PRIMARY KEY REFERENCES tasks(number),
    body text NOT NULL,
    worker text NOT NULL,
    instance text NOT NULL,
    session text,
    outcome text NOT NULL DEFAULT 'completed',
    version bigint NOT NULL DEFAULT 1,
    threshold bigint,
    merge_commit text,
    merged_by text,
    draft text,
    receipts text
);

CREATE TABLE confirmations(
    task bigint NOT NULL REFERENCES tasks(number),
    version bigint NOT NULL,
    reviewer text NOT NULL,
    instance text NOT NULL,
    session text,
    verdict text NOT NULL,
    reason text,
    at text NOT NULL,
    counted bigint NOT NULL,
    why text,
    PRIMARY KEY (task, version, reviewer)
);

CREATE TABLE updates(
    seq bigint PRIMARY KEY,
    task bigint NOT NULL REFERENCES tasks(number),
    at text NOT NULL,
    actor text NOT NULL,
    summary text NOT NULL,
    tokens bigint,
    usd_micros bigint
);
CREATE INDEX updates_by_task ON updates(task, seq);

CREATE INDEX tasks_live_leases ON tasks((lease_expires COLLATE "C")) WHERE lease_id IS NOT NULL;

CREATE TABLE journal(
    seq bigint PRIMARY KEY,
    task bigint REFERENCES tasks(number),
    at text NOT NULL,
    actor text,
    from_state text,
    to_state text,
    waiting_on text,
    reason text,
    detail text,
    hash text,
    glink text
);
CREATE INDEX journal_by_task ON journal(task, seq);

CREATE TABLE deps(
    task bigint NOT NULL REFERENCES tasks(number),
    on_task bigint NOT NULL REFERENCES tasks(number),
    PRIMARY KEY (task, on_task)
);
CREATE INDEX deps_by_dependency ON deps(on_task);

CREATE INDEX tasks_queue ON tasks(assignee, """ + RANK + """, number) WHERE """ + READY + """;

CREATE TABLE requests(
    caller text NOT NULL,
    id text NOT NULL,
    verb text NOT NULL,
    digest text NOT NULL,
    answer text NOT NULL,
    at text NOT NULL,
    PRIMARY KEY (caller, id)
);
CREATE INDEX requests_by_age ON requests(at);

CREATE TABLE policy(
    key text PRIMARY KEY,
    value text NOT NULL,
    at text NOT NULL,
    by text NOT NULL
);

CREATE TABLE required_plugins(
    name text PRIMARY KEY,
    kind text NOT NULL,
    digest text NOT NULL,
    settings text NOT NULL,
    at text NOT NULL,
    by text NOT NULL
);

CREATE TABLE controls(
    id bigint PRIMARY KEY,
    kind text NOT NULL,
    agent text,
    instance text,
    task bigint REFERENCES tasks(number),
    at text NOT NULL,
    by text NOT NULL,
    reason text,
    lifted_at text,
    lifted_by text
);
CREATE INDEX controls_live ON controls(kind) WHERE lifted_at IS NULL;

CREATE TABLE budgets(
    agent text PRIMARY KEY,
    tasks bigint,
    tokens bigint,
    usd_micros bigint,
    at text NOT NULL,
    by text NOT NULL
);

CREATE INDEX journal_claims ON journal(actor, at)
WHERE from_state = 'routed' AND to_state = 'accepted';
CREATE INDEX updates_usage ON updates(actor, at)
WHERE tokens IS NOT NULL OR usd_micros IS NOT NULL;

CREATE TABLE tokens(
    id text PRIMARY KEY,
    agent text,
    instance text,
    rights text NOT NULL,
    hash text NOT NULL,
    created_at text NOT NULL,
    expires_at text,
    revoked_at text,
    by text NOT NULL
);

CREATE TABLE enrolments(
    agent text PRIMARY KEY,
    projects text NOT NULL,
    roles text NOT NULL,
    rights text NOT NULL,
    active bigint NOT NULL,
    seq bigint NOT NULL,
    at text NOT NULL,
    by text NOT NULL
);
"""

HELPERS = """
-- JSON text as jsonb, or NULL when it is not JSON (SQLite's json_valid, then json_extract).
CREATE FUNCTION hl_json(body text) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE
SET search_path FROM CURRENT AS $$
BEGIN
    RETURN body::jsonb;
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;

-- An RFC 3339 time as seconds since the epoch, or NULL when it is not one, as SQLite's
-- julianday reads it: a time without a zone is UTC, and words ('infinity') are no time.
CREATE FUNCTION hl_seconds(at text) RETURNS double precision LANGUAGE plpgsql IMMUTABLE
SET search_path FROM CURRENT AS $$
BEGIN
    IF at !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}' THEN
        RETURN NULL;
    END IF;
    IF at ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' THEN
        at := at || 'T00:00:00Z';
    ELSIF at !~ '([Zz]|[+-][0-9]{2}(:?[0-9]{2})?)$' THEN
        at := at || 'Z';
    END IF;
    RETURN extract(epoch FROM at::timestamptz);
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;
"""

TASK_BOARD = """
CREATE VIEW task_board AS
SELECT t.number, hl_json(p.body) ->> 'task' AS title,
       t.state, t.waiting_on, t.assignee, t.requester, t.project, t.priority, t.labels,
       t.lease_holder AS holder, t.lease_instance AS instance,
       t.lease_expires AS claim_expires, t.created_at, t.updated_at
FROM tasks t JOIN packets p ON p.task = t.number;
"""


class Rule:
    """One trigger: when it fires, and the PL/pgSQL that decides (raising to refuse).

    ``when`` (optional) is the trigger's ``WHEN`` condition: a filter PostgreSQL evaluates
    in C before it would call the function, so a write the rule cannot refuse skips the
    call. The function still checks the whole condition, and ``when`` is only ever what
    that condition implies (:func:`guard`): it skips calls, never a refusal."""

    def __init__(self, name: str, timing: str, event: str, table: str, body: str,
                 *, each: str = "ROW", when: str | None = None) -> None:
        self.name, self.timing, self.event, self.table = name, timing, event, table
        self.body, self.each, self.when = body, each, when


class Check(str):
    """A rule's body, with the ``WHEN`` its condition implies (None: none cheaper than
    calling the function)."""

    when: str | None = None


def _checked(body: str, when: str | None) -> Check:
    made = Check(body)
    made.when = when
    return made


_WORD = {word: re.compile(rf"\s+{word}\s+") for word in ("AND", "OR")}
_COSTLY = re.compile(r"\bSELECT\b|\bhl_\w+\(")
"""What a ``WHEN`` cannot hold (a subquery) or should not (a call of one of the store's
own PL/pgSQL helpers, which costs what the rule's call would)."""


def _top_level(sql: str, word: str) -> list[str]:
    """``sql`` cut at each ``word`` (``AND``, ``OR``) outside parentheses and quotes; one
    piece when a ``BETWEEN … AND`` or a ``CASE`` stands at that level too."""
    pieces, depth, start, quoted, at = [], 0, 0, False, 0
    while at < len(sql):
        char = sql[at]
        if char == "'":
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif not quoted and depth == 0 and (cut := _WORD[word].match(sql, at)):
            pieces.append(sql[start:at])
            at = start = cut.end()
            continue
        at += 1
    pieces.append(sql[start:])
    if re.search(r"\b(BETWEEN|CASE)\b", _outside(sql)):
        return [sql.strip()]
    return [p.strip() for p in pieces]


def _outside(sql: str) -> str:
    """``sql`` with everything inside parentheses or quotes taken out."""
    kept, depth, quoted = [], 0, False
    for char in sql:
        if char == "'":
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif not quoted and depth == 0:
            kept.append(char)
    return "".join(kept)


def _wrapped(sql: str) -> bool:
    """Whether one pair of parentheses holds all of ``sql``."""
    if not (sql.startswith("(") and sql.endswith(")")):
        return False
    depth, quoted = 0, False
    for at, char in enumerate(sql):
        if char == "'":
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
            if depth == 0 and at < len(sql) - 1:
                return False
    return True


def guard(condition: str) -> str | None:
    """What ``condition`` implies that a trigger's ``WHEN`` can test (None: nothing).

    The condition's own text, weakened and kept short: of a conjunction, the guard of its
    first conjunct that has one (its leading test); of a disjunction, every disjunct's
    guard (none when one has none); of a piece with a subquery or a call of the store's
    helpers (``NOT EXISTS …``), none. Whenever ``condition`` is true, so is its guard: a
    rule filtered by it is still called for every write it would refuse."""
    condition = condition.strip()
    disjuncts = _top_level(condition, "OR")
    if len(disjuncts) > 1:
        return _any(*(guard(d) for d in disjuncts))
    conjuncts = _top_level(condition, "AND")
    if len(conjuncts) > 1:
        return _first(*(guard(c) for c in conjuncts))
    if _wrapped(condition):
        return guard(condition[1:-1])
    return None if _COSTLY.search(condition) else condition


def _any(*guards: str | None) -> str | None:
    if not guards or any(g is None for g in guards):
        return None
    kept = [g for n, g in enumerate(guards) if g not in guards[:n]]
    return str(kept[0]) if len(kept) == 1 else " OR ".join(f"({g})" for g in kept)


def _first(*guards: str | None) -> str | None:
    """The first guard there is: a ``WHEN`` is compiled for every statement that fires its
    trigger, so one short test is worth more than all of them."""
    return next((g for g in guards if g is not None), None)


def _refuse(message: str, when: str | None = None) -> str:
    raise_ = f"RAISE EXCEPTION '{message}';"
    return raise_ if when is None else _checked(
        f"IF {when} THEN\n        {raise_}\n    END IF;", guard(when))


def _cases(*pairs: tuple[str, str]) -> Check:
    """``IF a THEN raise ELSIF b THEN raise … END IF``: the first rule broken is named."""
    parts = []
    for n, (when, message) in enumerate(pairs):
        parts.append(f"{'IF' if n == 0 else 'ELSIF'} {when} THEN\n"
                     f"        RAISE EXCEPTION '{message}';")
    return _checked("\n    ".join(parts) + "\n    END IF;",
                    _any(*(guard(when) for when, _ in pairs)))


def _only_if(condition: str, then: str) -> Check:
    """``IF condition THEN … END IF``: a body that does nothing unless ``condition``, so
    its guard is the condition's, and the inner body's (a :class:`Check`) too."""
    return _checked(f"IF {condition} THEN\n    {then}\n    END IF;",
                    _first(guard(condition), getattr(then, "when", None)))


FILTERED = frozenset({
    "task_completion_decided", "task_decided_by", "task_claim_ready", "task_unblocks",
    "task_attempt_failed", "task_holder_enrolled", "task_lease_controlled",
    "task_lease_enrolled", "task_role_fixed", "results_receipts_shape", "results_draft_shape",
    "results_receipts_fixed", "results_draft_fixed", "results_draft_reshaped",
    "journal_answered", "journal_enrolled",
})
"""The rules whose trigger carries their :func:`guard` as a ``WHEN``: those whose guard
skips most of a task's moves (a claim, a submission, a decision), or that a cycle never
reaches. A ``WHEN`` is not free: the server compiles it for every statement that fires
its trigger, so a rule whose guard is long (``task_update``) or passes nearly every move
(``task_move``, ``task_lease_taken``, ``task_lease_length``: a live task, a lease set)
costs more filtered than called (``python -m bench.rule_filters``: the server's CPU a
claim -> submit cycle, with these, with none and with every rule's)."""


NUMBERS_LOCK = ("('x' || left(encode(sha256(convert_to('hivelite-chain:' || TG_TABLE_SCHEMA,"
                " 'UTF8')), 'hex'), 16))::bit(64)::bigint")
"""The numbers lock (``postgres.numbers_lock``: the same 64 bits of the same SHA-256): the
rule that numbers a journal or usage row takes it, and holds it to the commit, so rows are
numbered one more than the last in the order their writes commit; a handoff takes it for
its task's number. A write takes it at its first numbered row, after every row lock it
takes (a task's moves come last), and it is the only lock a numbered row waits for."""
GLINK = """
    NEW.glink := left(encode(sha256(convert_to(coalesce((SELECT coalesce(glink, hash)
        FROM journal WHERE seq = NEW.seq - 1), (SELECT value FROM meta
        WHERE key = 'store_id'), '') || '|' || NEW.seq || '|' || coalesce(NEW.hash, '~'),
        'UTF8')), 'hex'), 32);"""
"""A journal row's global link (``chain.global_link``), from the row before it: its own
global link, or its hash when it predates chains per task (the first, the store's
identity)."""


def rules() -> list[Rule]:
    """Every trigger of the store, in the order they fire within one event."""
    shortest, longest = (m * 60 for m in LEASE_MINUTES)
    mode = "coalesce((SELECT value FROM policy WHERE key = 'mode'), 'personal')"
    live = "SELECT 1 FROM controls WHERE lifted_at IS NULL"
    reviewer_owner = _owner_of("NEW.reviewer")
    out: list[Rule] = []

    def add(name: str, timing: str, event: str, table: str, body: str,
            each: str = "ROW") -> None:
        out.append(Rule(name, timing, event, table, body, each=each,
                        when=getattr(body, "when", None) if name in FILTERED else None))

    # -- the protocol's fixed tables and kept rows ------------------------------------
    for event in ("INSERT", "UPDATE", "DELETE"):
        add(f"moves_fixed_{event.lower()}", "BEFORE", event, "moves",
            _refuse("forbidden_right:protocol_fixed"))
    add("moves_fixed_truncate", "BEFORE", "TRUNCATE", "moves",
        _refuse("forbidden_right:protocol_fixed"), each="STATEMENT")
    for table in ("journal", "updates"):  # numbered under the numbers lock, to the commit
        add(f"{table}_number", "BEFORE", "INSERT", table, f"""PERFORM pg_advisory_xact_lock(
        {NUMBERS_LOCK});
    IF NEW.seq IS NULL THEN
        NEW.seq := (SELECT coalesce(max(seq), 0) + 1 FROM {table});
    END IF;""" + (GLINK if table == "journal" else ""))
    add("controls_number", "BEFORE", "INSERT", "controls", """IF NEW.id IS NULL THEN
        NEW.id := (SELECT coalesce(max(id), 0) + 1 FROM controls);
    END IF;""")  # before its kept-key rule: SQLite's INTEGER PRIMARY KEY (store-wide rows)
    for table, match in KEPT_KEYS:
        add(f"{table}_keys_kept", "BEFORE", "INSERT", table, _refuse(
            "forbidden_right:rows_are_kept", f"EXISTS (SELECT 1 FROM {table} WHERE {match})"))
    for table in ("deps", "controls", "tokens"):
        add(f"{table}_keys_kept", "BEFORE", "INSERT", table, _refuse(
            "forbidden_right:rows_are_kept",
            {"deps": "EXISTS (SELECT 1 FROM deps WHERE task = NEW.task"
                     " AND on_task = NEW.on_task)",
             "controls": "EXISTS (SELECT 1 FROM controls WHERE id = NEW.id)",
             "tokens": "EXISTS (SELECT 1 FROM tokens WHERE id = NEW.id)"}[table]))
    kept_messages = {
        "tasks": "forbidden_right:tasks_are_kept", "packets": "forbidden_right:packet_fixed",
        "results": "forbidden_right:results_are_kept",
        "checkpoints": "forbidden_right:checkpoints_are_kept",
        "confirmations": "forbidden_right:append_only", "updates": "forbidden_right:append_only",
        "journal": "forbidden_right:append_only", "deps": "forbidden_right:append_only",
        "meta": "forbidden_right:owner_fixed", "controls": "forbidden_right:controls_kept",
        "tokens": "forbidden_right:tokens_kept", "policy": "forbidden_right:append_only",
        "budgets": "forbidden_right:append_only",
        "required_plugins": "forbidden_right:append_only",
        "enrolments": "forbidden_right:append_only",
    }
    for table, message in kept_messages.items():
        add(f"{table}_no_truncate", "BEFORE", "TRUNCATE", table, _refuse(message),
            each="STATEMENT")
    add("task_delete", "BEFORE", "DELETE", "tasks", _refuse("forbidden_right:tasks_are_kept"))
    for event in ("UPDATE", "DELETE"):
        add(f"packets_fixed_{event.lower()}", "BEFORE", event, "packets",
            _refuse("forbidden_right:packet_fixed"))
    add("results_kept", "BEFORE", "DELETE", "results", _refuse("forbidden_right:results_are_kept"))
    for table in ("confirmations", "updates", "journal", "deps"):
        for event in ("UPDATE", "DELETE"):
            name = f"deps_fixed_{event.lower()}" if table == "deps" else (
                f"{table}_no_{event.lower()}")
            add(name, "BEFORE", event, table, _refuse("forbidden_right:append_only"))
    add("checkpoints_no_delete", "BEFORE", "DELETE", "checkpoints",
        _refuse("forbidden_right:checkpoints_are_kept"))
    add("checkpoints_update", "BEFORE", "UPDATE", "checkpoints",
        _refuse("invalid_state:task_closed", _closed("OLD")))
    add("checkpoints_fixed", "BEFORE", "UPDATE", "checkpoints",
        _refuse("forbidden_right:rows_are_kept", "NEW.task IS DISTINCT FROM OLD.task"))
    add("checkpoints_insert", "BEFORE", "INSERT", "checkpoints",
        _refuse("invalid_state:task_closed", _closed("NEW")))
    add("meta_owner_fixed", "BEFORE", "UPDATE", "meta", _refuse(
        "forbidden_right:owner_fixed", "OLD.key = 'owner' OR NEW.key IS DISTINCT FROM OLD.key"))
    add("meta_identity_fixed", "BEFORE", "UPDATE", "meta",
        _refuse("forbidden_right:identity_fixed", "OLD.key = 'store_id'"))
    add("meta_kept", "BEFORE", "DELETE", "meta", _refuse("forbidden_right:owner_fixed"))

    # -- tasks: insert, update, moves, leases, fields -----------------------------------
    add("task_insert", "BEFORE", "INSERT", "tasks", _refuse(
        "invalid_state:insert_not_requested",
        f"NEW.state IS DISTINCT FROM {_quote(State.requested.value)}"
        " OR NEW.waiting_on IS NOT NULL OR NEW.lease_id IS NOT NULL"))
    add("task_update", "BEFORE", "UPDATE", "tasks", _cases(
        (f"OLD.state IN {TERMINAL_SQL} AND NOT (NEW.chain IS DISTINCT FROM OLD.chain"
         " AND to_jsonb(NEW) - 'chain' = to_jsonb(OLD) - 'chain'"
         " AND NEW.chain IS NOT DISTINCT FROM (SELECT hash FROM journal"
         " WHERE task = NEW.number ORDER BY seq DESC LIMIT 1))",  # (its chain's head
         "invalid_state:task_closed"),  # follows an event journaled about it)
        ("NEW.number IS DISTINCT FROM OLD.number OR NEW.id IS DISTINCT FROM OLD.id"
         " OR NEW.created_at IS DISTINCT FROM OLD.created_at"
         " OR NEW.requester IS DISTINCT FROM OLD.requester"
         " OR NEW.assignee IS DISTINCT FROM OLD.assignee"
         " OR NEW.project IS DISTINCT FROM OLD.project", "invalid_input:immutable_field"),
        ("(NEW.state = 'waiting') = (NEW.waiting_on IS NULL)"
         f" OR (NEW.waiting_on IS NOT NULL AND NEW.waiting_on NOT IN {WAITING_VALUES})",
         "invalid_state:waiting_on_mismatch"),
        ("NEW.lease_token < OLD.lease_token OR (NEW.lease_id IS NOT NULL"
         " AND NEW.lease_id IS DISTINCT FROM OLD.lease_id"
         " AND NEW.lease_token <= OLD.lease_token)", "invalid_state:fencing_token"),
        (f"NEW.lease_id IS NOT NULL AND NEW.state NOT IN {LEASED}",
         "invalid_state:claim_outlives_state"),
        (f"NEW.lease_id IS NULL AND NEW.state IN {LEASED}", "invalid_state:claim_missing"),
        (f"NEW.state IS DISTINCT FROM OLD.state AND NEW.state IN {WITH_RESULT}"
         " AND NOT EXISTS (SELECT 1 FROM results WHERE task = NEW.number)",
         "invalid_state:result_missing")))
    # The rules below fire, as on SQLite, when their columns are SET (changed or not).
    add("task_move", "BEFORE", "UPDATE OF state, waiting_on", "tasks", task_move_rule())
    add("task_completion_decided", "BEFORE", "UPDATE OF state", "tasks", completion_decided_rule())
    add("task_lease_taken", "BEFORE", "UPDATE OF lease_id, lease_token, lease_holder,"
        " lease_instance, lease_session, lease_expires", "tasks", _refuse(
            "forbidden_right:lease_by_claim_only",
            f"OLD.state NOT IN {TERMINAL_SQL} AND NEW.state IN {LEASED}"
            " AND NEW.lease_id IS NOT NULL AND NEW.lease_token > OLD.lease_token"
            " - (CASE WHEN NEW.lease_id IS NOT DISTINCT FROM OLD.lease_id THEN 1 ELSE 0 END)"
            " AND (NEW.state IS NOT DISTINCT FROM OLD.state OR EXISTS (SELECT 1 FROM moves"
            " WHERE from_state = OLD.state AND to_state = NEW.state)) AND ("
            "NEW.lease_id IS DISTINCT FROM OLD.lease_id"
            " OR NEW.lease_token IS DISTINCT FROM OLD.lease_token"
            " OR NEW.lease_holder IS DISTINCT FROM OLD.lease_holder"
            " OR NEW.lease_instance IS DISTINCT FROM OLD.lease_instance"
            " OR NEW.lease_session IS DISTINCT FROM OLD.lease_session) AND NOT ("
            "((OLD.state = 'routed' AND NEW.state = 'accepted')"
            " OR (OLD.state = 'waiting' AND NEW.state = 'working'))"
            " AND OLD.lease_id IS NULL AND NEW.lease_holder IS NOT DISTINCT FROM NEW.assignee"
            " AND NEW.lease_instance IS NOT NULL AND NEW.lease_token = OLD.lease_token + 1)"))
    add("task_lease_length", "BEFORE", "UPDATE OF lease_expires", "tasks", _refuse(
        "invalid_input:lease_length",
        f"OLD.state NOT IN {TERMINAL_SQL} AND NEW.lease_expires IS NOT NULL"
        " AND NOT ((hl_seconds(NEW.lease_expires) - hl_seconds(NEW.updated_at))"
        f" BETWEEN {shortest} - 0.001 AND {longest} + 0.001)"))
    add("task_claim_ready", "BEFORE", "UPDATE OF state", "tasks", _cases(
        ("OLD.state = 'routed' AND NEW.state = 'accepted' AND EXISTS (SELECT 1 FROM deps d"
         " JOIN tasks o ON o.number = d.on_task WHERE d.task = NEW.number"
         " AND o.state IS DISTINCT FROM 'completed')", "invalid_state:blocked"),
        ("OLD.state = 'routed' AND NEW.state = 'accepted'"
         " AND NEW.attempts >= NEW.attempt_limit", "invalid_state:attempts_exhausted")))
    add("task_fields", "BEFORE", "UPDATE OF priority, labels, fields_version, attempts,"
        " attempt_limit", "tasks", _only_if(f"OLD.state NOT IN {TERMINAL_SQL}", _cases(
            (f"NEW.priority NOT IN {_in_list(PRIORITIES)}", "invalid_input:invalid_priority"),
            ("(NEW.priority IS DISTINCT FROM OLD.priority"
             " OR NEW.labels IS DISTINCT FROM OLD.labels"
             " OR NEW.attempt_limit IS DISTINCT FROM OLD.attempt_limit"
             " OR NEW.fields_version IS DISTINCT FROM OLD.fields_version)"
             " AND NEW.fields_version IS DISTINCT FROM OLD.fields_version + 1",
             "invalid_state:stale_base"),
            ("NEW.attempts < OLD.attempts", "forbidden_right:attempts_only_grow"))))
    add("task_lease_controlled", "BEFORE", "UPDATE OF lease_id", "tasks", _only_if(
        "NEW.lease_id IS NOT NULL AND NEW.lease_id IS DISTINCT FROM OLD.lease_id", _cases(
            (f"EXISTS ({live} AND kind = 'stop' AND (agent IS NOT DISTINCT FROM"
             " NEW.lease_holder OR instance IS NOT DISTINCT FROM"
             f" {instance_key('NEW.lease_instance')} OR (agent IS NULL AND instance IS NULL)))",
             "forbidden_right:vetoed"),
            (f"EXISTS ({live} AND kind = 'hold' AND (agent IS NOT DISTINCT FROM"
             " NEW.lease_holder OR instance IS NOT DISTINCT FROM"
             f" {instance_key('NEW.lease_instance')}))", "forbidden_right:held"),
            (f"EXISTS ({live} AND kind = 'veto' AND agent IS NOT DISTINCT FROM"
             " NEW.lease_holder AND task IS NOT DISTINCT FROM NEW.number)",
             "forbidden_right:vetoed"))))
    add("task_created", "AFTER", "INSERT", "tasks", """INSERT INTO journal(task, at, actor,
        from_state, to_state, waiting_on, reason, detail, hash)
    VALUES (NEW.number, NEW.created_at, NEW.actor, NULL, NEW.state, NULL, NEW.reason,
            NEW.detail, NEW.chain);""")
    add("task_journal", "AFTER", "UPDATE OF state", "tasks", """INSERT INTO journal(task, at,
        actor, from_state, to_state, waiting_on, reason, detail, hash)
    VALUES (NEW.number, NEW.updated_at, NEW.actor, OLD.state, NEW.state, NEW.waiting_on,
            NEW.reason, NEW.detail, NEW.chain);""")
    completed = "NEW.state = 'completed'"
    add("task_unblocks", "AFTER", "UPDATE OF state", "tasks", _checked(f"""IF {completed} THEN
        UPDATE tasks SET waits = waits - 1
        WHERE number IN (SELECT task FROM deps WHERE on_task = NEW.number)
          AND state NOT IN {TERMINAL_SQL};
    END IF;""", guard(completed)))
    add("task_attempt_failed", "AFTER", "UPDATE OF state", "tasks", attempt_counted_rule())

    # -- side tables -------------------------------------------------------------------
    add("deps_with_task", "BEFORE", "INSERT", "deps", _refuse(
        "invalid_input:dependency_fixed",
        "(SELECT state FROM tasks WHERE number = NEW.task) IS DISTINCT FROM 'requested'"
        " OR NEW.task <= NEW.on_task"))
    add("results_insert", "BEFORE", "INSERT", "results",
        _refuse("invalid_state:task_closed", _closed("NEW")))
    add("results_from_holder", "BEFORE", "INSERT", "results", _refuse(
        "forbidden_right:result_by_holder_only",
        f"(SELECT state FROM tasks WHERE number = NEW.task) NOT IN {TERMINAL_SQL}"
        " AND NOT EXISTS (SELECT 1 FROM tasks WHERE number = NEW.task"
        " AND state IN ('accepted', 'working')"
        " AND lease_holder IS NOT DISTINCT FROM NEW.worker"
        " AND lease_instance IS NOT DISTINCT FROM NEW.instance)"))
    add("results_update", "BEFORE", "UPDATE", "results", _cases(
        (f"(SELECT state FROM tasks WHERE number = OLD.task) IN {TERMINAL_SQL}"
         " AND NOT (OLD.merge_commit IS NULL AND NEW.merge_commit IS NOT NULL"
         " AND NEW.task IS NOT DISTINCT FROM OLD.task AND NEW.body IS NOT DISTINCT FROM OLD.body"
         " AND NEW.version IS NOT DISTINCT FROM OLD.version"
         " AND NEW.worker IS NOT DISTINCT FROM OLD.worker"
         " AND NEW.instance IS NOT DISTINCT FROM OLD.instance"
         " AND NEW.session IS NOT DISTINCT FROM OLD.session"
         " AND NEW.outcome IS NOT DISTINCT FROM OLD.outcome"
         " AND NEW.threshold IS NOT DISTINCT FROM OLD.threshold)", "invalid_state:task_closed"),
        ("NEW.body IS DISTINCT FROM OLD.body AND NEW.version <= OLD.version",
         "invalid_state:result_version")))
    add("results_fixed", "BEFORE", "UPDATE", "results", _refuse(
        "forbidden_right:result_fixed",
        f"(SELECT state FROM tasks WHERE number = OLD.task) NOT IN {TERMINAL_SQL} AND ("
         "NEW.task IS DISTINCT FROM OLD.task"
         " OR ((NEW.worker IS DISTINCT FROM OLD.worker"
         " OR NEW.instance IS DISTINCT FROM OLD.instance"
         " OR NEW.session IS DISTINCT FROM OLD.session"
         " OR NEW.outcome IS DISTINCT FROM OLD.outcome"
         " OR NEW.threshold IS DISTINCT FROM OLD.threshold)"
         " AND NOT (NEW.version > OLD.version AND EXISTS (SELECT 1 FROM tasks"
         " WHERE number = NEW.task AND state IN ('accepted', 'working')"
         " AND lease_holder IS NOT DISTINCT FROM NEW.worker"
         " AND lease_instance IS NOT DISTINCT FROM NEW.instance)))"
         " OR (NEW.merge_commit IS NOT NULL AND NEW.merge_commit IS DISTINCT FROM"
         " OLD.merge_commit AND (SELECT state FROM tasks WHERE number = NEW.task)"
         " IS DISTINCT FROM 'completed'))"))
    add("confirmations_insert", "BEFORE", "INSERT", "confirmations", _refuse(
        "invalid_state:not_submitted",
        "(SELECT state FROM tasks WHERE number = NEW.task) IS DISTINCT FROM 'approval'"))
    add("confirmations_counted", "BEFORE", "INSERT", "confirmations", _refuse(
        "invalid_state:reviewer_not_independent",
        "(SELECT state FROM tasks WHERE number = NEW.task) IS NOT DISTINCT FROM 'approval'"
        " AND (NEW.version IS DISTINCT FROM (SELECT version FROM results WHERE task = NEW.task)"
         " OR (NEW.counted <> 0 AND ("
         "EXISTS (SELECT 1 FROM results WHERE task = NEW.task AND (worker = NEW.reviewer"
         f" OR {instance_key('instance')} = {instance_key('NEW.instance')}))"
         f" OR CASE {mode}"
         f" WHEN 'team' THEN {reviewer_owner} = (SELECT {_owner_of('worker')} FROM results"
         " WHERE task = NEW.task)"
         " OR EXISTS (SELECT 1 FROM confirmations c WHERE c.task = NEW.task"
         " AND c.version = NEW.version AND c.counted <> 0"
         f" AND {_owner_of('c.reviewer')} = {reviewer_owner})"
         f" ELSE {reviewer_owner} IS DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner')"
         " OR EXISTS (SELECT 1 FROM confirmations c WHERE c.task = NEW.task"
         " AND c.version = NEW.version AND c.counted <> 0"
         f" AND {instance_key('c.instance')} = {instance_key('NEW.instance')})"
         " END)))"))
    add("confirmations_why", "BEFORE", "INSERT", "confirmations", _refuse(
        "invalid_input:uncounted_needs_why",
        "(NEW.counted <> 0 AND NEW.why IS NOT NULL) OR (NEW.counted = 0 AND NEW.why IS NULL)"))
    add("updates_insert", "BEFORE", "INSERT", "updates",
        _refuse("invalid_state:task_closed", _closed("NEW")))
    add("journal_insert", "BEFORE", "INSERT", "journal", journal_insert_rule())
    add("journal_answered", "BEFORE", "INSERT", "journal", ANSWERED)
    add("journal_enrolled", "BEFORE", "INSERT", "journal", ENROLLED)
    add("watches_made", "BEFORE", "INSERT", "watches", _refuse(
        "forbidden_right:watch_kept", "NEW.answer IS NOT NULL OR NEW.cancelled_at IS NOT NULL"))
    add("watches_kept", "BEFORE", "UPDATE", "watches", _refuse(
        "forbidden_right:watch_kept",
        " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in WATCH_FIXED)
        + "".join(f" OR (OLD.{c} IS NOT NULL AND NEW.{c} IS DISTINCT FROM OLD.{c})"
                  for c in ("number", "answer", "cancelled_at"))))

    # -- the owner's authority -----------------------------------------------------------
    add("policy_values", "BEFORE", "INSERT", "policy", _refuse(
        "invalid_input:invalid_policy",
        f"NOT ((NEW.key = 'mode' AND NEW.value IN {_in_list(MODES)})"
        f" OR (NEW.key = 'proposals' AND NEW.value IN {_in_list(PROPOSALS)})"
        " OR (NEW.key = 'timezone' AND length(NEW.value) BETWEEN 1 AND 64)"
        " OR ((NEW.key = 'threshold' OR (NEW.key ~ '^threshold:.' AND length(NEW.key) <= 80))"
        " AND NEW.value ~ '^[0-9]{1,4}$' AND NEW.value::integer <= 1000)"
        " OR (NEW.key ~ '^plugin:[A-Za-z0-9_.-]{1,64}$' AND NEW.value = 'enabled')"
        " OR (NEW.key = 'plugins_notice' AND NEW.value = 'due'))"))
    add("policy_no_update", "BEFORE", "UPDATE", "policy", _refuse("forbidden_right:append_only"))
    add("required_plugins_no_update", "BEFORE", "UPDATE", "required_plugins",
        _refuse("forbidden_right:append_only"))
    add("required_plugins_kind", "BEFORE", "INSERT", "required_plugins", _refuse(
        "invalid_input:invalid_requirement",
        "NEW.kind NOT IN ('entry_point', 'file', 'given') OR hl_json(NEW.settings) IS NULL"))
    add("controls_scope", "BEFORE", "INSERT", "controls", _refuse(
        "invalid_input:invalid_control",
        "NEW.lifted_at IS NOT NULL OR NEW.lifted_by IS NOT NULL"
        f" OR NEW.instance IS DISTINCT FROM {instance_key('NEW.instance')} OR NOT ("
        "(NEW.kind = 'hold' AND NEW.task IS NULL AND (NEW.agent IS NULL) <> (NEW.instance IS NULL))"
        " OR (NEW.kind = 'veto' AND NEW.task IS NOT NULL AND NEW.agent IS NOT NULL"
        " AND NEW.instance IS NULL)"
        " OR (NEW.kind = 'stop' AND NEW.task IS NULL"
        " AND (NEW.agent IS NULL OR NEW.instance IS NULL)))"))
    add("controls_lifted_once", "BEFORE", "UPDATE", "controls", _refuse(
        "forbidden_right:controls_kept",
        "OLD.lifted_at IS NOT NULL OR NEW.lifted_at IS NULL OR NEW.lifted_by IS NULL"
        " OR NEW.id IS DISTINCT FROM OLD.id OR NEW.kind IS DISTINCT FROM OLD.kind"
        " OR NEW.agent IS DISTINCT FROM OLD.agent OR NEW.instance IS DISTINCT FROM OLD.instance"
        " OR NEW.task IS DISTINCT FROM OLD.task OR NEW.at IS DISTINCT FROM OLD.at"
        " OR NEW.\"by\" IS DISTINCT FROM OLD.\"by\" OR NEW.reason IS DISTINCT FROM OLD.reason"))
    add("controls_kept", "BEFORE", "DELETE", "controls", _refuse("forbidden_right:controls_kept"))
    add("budgets_values", "BEFORE", "INSERT", "budgets", _refuse(
        "invalid_input:invalid_budget",
        "NEW.tasks < 0 OR NEW.tokens < 0 OR NEW.usd_micros < 0"))
    add("budgets_no_update", "BEFORE", "UPDATE", "budgets", _refuse("forbidden_right:append_only"))
    add("tokens_shape", "BEFORE", "INSERT", "tokens", _refuse(
        "invalid_input:invalid_token",
        "NEW.revoked_at IS NOT NULL OR length(NEW.hash) <> 64 OR NEW.hash ~ '[^0-9a-f]'"
        " OR NOT ((NEW.agent IS NULL AND NEW.instance IS NULL AND NEW.rights = 'owner')"
        " OR (NEW.agent IS NOT NULL AND NEW.instance IS NOT NULL AND NEW.rights <> ''"
        f" AND NEW.instance = {instance_key('NEW.instance')}"
        f" AND string_to_array(NEW.rights, ',') <@ ARRAY{list(RIGHTS)}::text[]))"))
    add("tokens_revoked_once", "BEFORE", "UPDATE", "tokens", _refuse(
        "forbidden_right:tokens_kept",
        "OLD.revoked_at IS NOT NULL OR NEW.revoked_at IS NULL OR NEW.id IS DISTINCT FROM OLD.id"
        " OR NEW.agent IS DISTINCT FROM OLD.agent OR NEW.instance IS DISTINCT FROM OLD.instance"
        " OR NEW.rights IS DISTINCT FROM OLD.rights OR NEW.hash IS DISTINCT FROM OLD.hash"
        " OR NEW.created_at IS DISTINCT FROM OLD.created_at"
        " OR NEW.expires_at IS DISTINCT FROM OLD.expires_at"
        " OR NEW.\"by\" IS DISTINCT FROM OLD.\"by\""))
    add("tokens_kept", "BEFORE", "DELETE", "tokens", _refuse("forbidden_right:tokens_kept"))

    # -- who decides, and what decides, written only by its verb (migration 11) ----------
    state = "(SELECT state FROM tasks WHERE number = OLD.task)"
    holder = ("EXISTS (SELECT 1 FROM tasks WHERE number = NEW.task"
              f" AND state IN {LEASED} AND lease_holder IS NOT DISTINCT FROM NEW.worker"
              " AND lease_instance IS NOT DISTINCT FROM NEW.instance)")
    same = " AND ".join(f"NEW.{c} IS NOT DISTINCT FROM OLD.{c}" for c in (
        "task", "worker", "instance", "session", "outcome", "threshold"))
    grown = "NEW.version IS NOT DISTINCT FROM OLD.version + 1"

    def newest(condition: str) -> str:
        return ("EXISTS (SELECT 1 FROM (SELECT to_state, actor, reason, hl_json(detail) AS"
                " detail FROM journal WHERE task = OLD.task ORDER BY seq DESC LIMIT 1) j"
                f" WHERE {condition})")

    add("results_amended", "BEFORE", "UPDATE OF body, version", "results",
        "IF (NEW.body IS DISTINCT FROM OLD.body OR NEW.version IS DISTINCT FROM OLD.version)"
        f"\n        AND {state} NOT IN {TERMINAL_SQL}"
        f"\n        AND NOT ({grown} AND {holder})"
        f"\n        AND (({same}) OR {holder})"
        f"\n        AND NOT ({grown} AND " + newest(
            "j.to_state = 'approval' AND j.reason = 'amended'"
            " AND j.actor IS NOT DISTINCT FROM OLD.worker"
            " AND j.detail ->> 'version' = NEW.version::text") + ") THEN\n    "
        + _refuse("invalid_state:result_version", "NEW.version IS DISTINCT FROM OLD.version + 1")
        + "\n    " + _refuse("forbidden_right:amend_not_journaled") + "\n    END IF;")
    merger = (f"(NEW.merged_by IS NOT DISTINCT FROM {OWNER}"
              " OR NEW.merged_by IS NOT DISTINCT FROM OLD.worker)")
    add("results_merged", "BEFORE", "UPDATE OF merge_commit, merged_by", "results",
        "IF (NEW.merge_commit IS DISTINCT FROM OLD.merge_commit"
        " OR NEW.merged_by IS DISTINCT FROM OLD.merged_by)"
        f"\n        AND NOT (OLD.merge_commit IS NOT NULL AND {state} IN {TERMINAL_SQL})"
        f"\n        AND NOT (NEW.merge_commit IS NOT NULL AND {state} NOT IN {TERMINAL_SQL})"
        "\n        AND NOT (OLD.merge_commit IS NULL AND NEW.merge_commit IS NOT NULL"
        f" AND {merger} AND " + newest(
            "j.to_state = 'completed' AND j.reason = 'merge_recorded'"
            " AND j.actor IS NOT DISTINCT FROM NEW.merged_by"
            " AND j.detail ->> 'merge_commit' = NEW.merge_commit") + ") THEN\n    "
        + _cases((f"NEW.merge_commit IS NULL OR {state} IS DISTINCT FROM 'completed'",
                  "invalid_state:not_amendable"),
                 (f"NOT {merger}", "forbidden_right:not_submitter"))
        + "\n    " + _refuse("forbidden_right:merge_not_journaled") + "\n    END IF;")
    add("updates_bounded", "BEFORE", "INSERT", "updates", _refuse(
        "invalid_input:invalid_usage", usage_out_of_bounds("NEW.tokens", False)
        + " OR " + usage_out_of_bounds("NEW.usd_micros", False)))
    for name, table, column in OWNER_ROWS:
        add(name, "BEFORE", "INSERT", table, _refuse(
            "forbidden_right:not_owner", f'NEW."{column}" IS DISTINCT FROM {OWNER}'))
    add("controls_lifted_by_owner", "BEFORE", "UPDATE OF lifted_by", "controls", _refuse(
        "forbidden_right:not_owner",
        "NEW.lifted_by IS NOT NULL AND NEW.lifted_by IS DISTINCT FROM OLD.lifted_by"
        f" AND NEW.lifted_by IS DISTINCT FROM {OWNER}"))
    scope_rules(add)
    draft_rules(add)
    return _in_firing_order(out)


ROLE = "'^[a-z][a-z0-9-]{0,63}$'"
SLUG = "'^[a-z0-9][a-z0-9-]{0,38}$'"


def _slugs_ok(column: str, pattern: str) -> str:
    return (f"(jsonb_typeof(hl_json({column})) = 'array' AND NOT EXISTS (SELECT 1 FROM"
            f" jsonb_array_elements(hl_json({column})) v WHERE jsonb_typeof(v) <> 'string'"
            f" OR NOT (v #>> '{{}}') ~ {pattern}))")


def scope_rules(add: Any) -> None:
    """Migration 12's rules (``schema.scope_sql``): roles, enrolments, the enrolment a lease
    is taken and worked under, and who withdraws a guest's request."""
    mode = "coalesce((SELECT value FROM policy WHERE key = 'mode'), 'personal')"
    enrolment = "SELECT 1 FROM enrolments e WHERE e.agent = NEW.lease_holder"
    scope = "(SELECT seq FROM enrolments WHERE agent = {who})"

    def newest(condition: str) -> str:
        return ("EXISTS (SELECT 1 FROM (SELECT seq, actor, reason, hl_json(detail) AS detail"
                f" FROM journal ORDER BY seq DESC LIMIT 1) j WHERE {condition})")

    add("task_role", "BEFORE", "INSERT", "tasks", _refuse(
        "invalid_input:invalid_role", f"NEW.role IS NOT NULL AND NEW.role !~ {ROLE}"))
    add("task_role_fixed", "BEFORE", "UPDATE OF role", "tasks", _refuse(
        "invalid_input:immutable_field", "NEW.role IS DISTINCT FROM OLD.role"))
    add("enrolments_by_owner", "BEFORE", "INSERT", "enrolments", _refuse(
        "forbidden_right:not_owner", f'NEW."by" IS DISTINCT FROM {OWNER}'))
    add("enrolments_shape", "BEFORE", "INSERT", "enrolments", _refuse(
        "invalid_input:invalid_enrolment",
        "NEW.active NOT IN (0, 1) OR NEW.rights = ''"
        f" OR NOT {_slugs_ok('NEW.projects', SLUG)} OR NOT {_slugs_ok('NEW.roles', ROLE)}"
        f" OR NOT string_to_array(NEW.rights, ',') <@ ARRAY{list(ENROLMENT_RIGHTS)}::text[]"))
    add("enrolments_journaled", "BEFORE", "INSERT", "enrolments", _refuse(
        "forbidden_right:enrolment_not_journaled", "NOT " + newest(
            "j.seq = NEW.seq AND j.reason = 'enrolment'"
            ' AND j.actor IS NOT DISTINCT FROM NEW."by"'
            " AND j.detail ->> 'agent' = NEW.agent"
            " AND j.detail -> 'projects' = hl_json(NEW.projects)"
            " AND j.detail -> 'roles' = hl_json(NEW.roles)"
            " AND j.detail ->> 'rights' = NEW.rights"
            " AND j.detail ->> 'active' = NEW.active::text")))
    add("enrolments_no_update", "BEFORE", "UPDATE", "enrolments",
        _refuse("forbidden_right:append_only"))
    add("enrolments_replaced", "BEFORE", "DELETE", "enrolments", _refuse(
        "forbidden_right:enrolment_not_journaled", "NOT " + newest(
            "j.seq > OLD.seq AND j.reason = 'enrolment' AND j.detail ->> 'agent' = OLD.agent")))
    add("task_lease_enrolled", "BEFORE", "UPDATE OF lease_id, lease_scope", "tasks", _only_if(
        "NEW.lease_id IS NOT NULL AND (NEW.lease_id IS DISTINCT FROM OLD.lease_id"
        " OR NEW.lease_scope IS DISTINCT FROM OLD.lease_scope)", _cases(
            ("NEW.lease_id IS NOT DISTINCT FROM OLD.lease_id", "invalid_input:immutable_field"),
            (f"EXISTS ({enrolment} AND e.active = 0)", "invalid_state:optin_inactive"),
            ("NEW.lease_scope IS DISTINCT FROM " + scope.format(who="NEW.lease_holder"),
             "invalid_state:optin_changed"),
            (f"EXISTS ({enrolment} AND (NOT 'tasks.work' = ANY(string_to_array(e.rights, ','))"
             " OR (jsonb_array_length(hl_json(e.projects)) > 0 AND NOT EXISTS (SELECT 1 FROM"
             " jsonb_array_elements_text("
             "hl_json(e.projects)) p WHERE p = NEW.project))))", "forbidden_right:optin_scope"),
            (f"NEW.role IS NOT NULL AND NOT EXISTS ({enrolment} AND EXISTS (SELECT 1 FROM"
             " jsonb_array_elements_text(hl_json(e.roles)) r WHERE r = NEW.role))",
             "forbidden_right:not_permitted"))))
    add("task_holder_enrolled", "BEFORE", "UPDATE OF state", "tasks", holder_enrolled_rule())
    add("task_decided_by", "BEFORE", "UPDATE OF state", "tasks", _only_if(
        f"{owner_decides()}\n    AND NEW.actor IS DISTINCT FROM {OWNER}"
        f"\n    AND NOT (NEW.state = 'cancelled' AND {mode} = 'team'"
        f" AND strpos(NEW.actor, '/') > 0"
        f" AND {_owner_of('NEW.actor')} = {_owner_of('OLD.requester')}"
        f" AND {_owner_of('OLD.requester')} IS DISTINCT FROM {OWNER})", _cases(
            (f"OLD.state NOT IN {by_verifier_too()}", "forbidden_right:not_owner"),
            ("NOT EXISTS (SELECT 1 FROM confirmations c JOIN results r ON r.task = c.task"
             " AND r.version = c.version WHERE c.task = NEW.number"
             " AND c.reviewer = NEW.actor AND c.verdict = 'reject' AND c.counted <> 0)",
             "forbidden_right:not_decided"))))


def draft_rules(add: Any) -> None:
    """Migration 12's rules on a result's draft and receipts (``schema.draft_sql``)."""
    holder = ("EXISTS (SELECT 1 FROM tasks WHERE number = NEW.task"
              f" AND state IN {LEASED} AND lease_holder IS NOT DISTINCT FROM NEW.worker"
              " AND lease_instance IS NOT DISTINCT FROM NEW.instance)")
    shape = ("NEW.draft IS NOT NULL AND (jsonb_typeof(hl_json(NEW.draft)) IS DISTINCT FROM"
             " 'object'"
             f" OR (hl_json(NEW.draft) ->> 'kind') IS NULL"
             f" OR (hl_json(NEW.draft) ->> 'kind') NOT IN {_in_list(DRAFT_KINDS)}"
             " OR jsonb_typeof(hl_json(NEW.draft) -> 'content') IS DISTINCT FROM 'string'"
             " OR NEW.outcome IS DISTINCT FROM 'completed')")
    add("results_draft_shape", "BEFORE", "INSERT", "results",
        _refuse("invalid_input:invalid_draft", shape))
    add("results_draft_reshaped", "BEFORE", "UPDATE OF draft, outcome", "results",
        _refuse("invalid_input:invalid_draft", shape))
    add("results_draft_fixed", "BEFORE", "UPDATE OF draft", "results", _refuse(
        "forbidden_right:draft_fixed", "NEW.draft IS DISTINCT FROM OLD.draft AND NOT"
        f" (NEW.version IS NOT DISTINCT FROM OLD.version + 1 AND {holder})"))
    receipts = ("(NEW.receipts IS NOT NULL AND (jsonb_typeof(hl_json(NEW.receipts))"
                " IS DISTINCT FROM 'array' OR EXISTS (SELECT 1 FROM jsonb_array_elements("
                "hl_json(NEW.receipts)) v WHERE jsonb_typeof(v) NOT IN ('null', 'object'))))")
    add("results_receipts_shape", "BEFORE", "INSERT", "results",
        _refuse("invalid_input:invalid_receipt", receipts))
    add("results_receipts_fixed", "BEFORE", "UPDATE OF receipts", "results",
        _only_if("NEW.receipts IS DISTINCT FROM OLD.receipts", _cases(
            ("NEW.version IS DISTINCT FROM OLD.version + 1", "forbidden_right:receipts_fixed"),
            (receipts, "invalid_input:invalid_receipt"))))


def task_move_rule() -> str:
    """The rule on a task's moves (``schema.task_move_sql``; migration 19 added the
    submission's row): a move is one of the protocol's, or a submission's passage with the
    task's result kept. (The ``CASE`` stands in parentheses: PL/pgSQL reads an ``IF``'s
    condition up to its first ``THEN`` outside them.)"""
    passed = via()
    return _refuse(
        "invalid_state:no_such_move",
        f"OLD.state NOT IN {TERMINAL_SQL}"
        " AND (NEW.state = 'waiting') = (NEW.waiting_on IS NOT NULL)"
        f" AND (NEW.waiting_on IS NULL OR NEW.waiting_on IN {WAITING_VALUES})"
        f" AND (CASE WHEN {passed} IS NULL THEN NOT EXISTS (SELECT 1 FROM moves m"
        " WHERE m.from_state = OLD.state AND m.to_state = NEW.state"
        " AND (m.from_waiting IS NULL"
        " OR strpos(m.from_waiting, '|' || OLD.waiting_on || '|') > 0)"
        " AND (m.to_waiting IS NULL"
        " OR strpos(m.to_waiting, '|' || NEW.waiting_on || '|') > 0))"
        f" ELSE NOT ({passage('OLD.state', passed, 'NEW.state')}"
        " AND EXISTS (SELECT 1 FROM results WHERE task = NEW.number)) END)")


ANSWERED = _only_if(
    "NEW.reason = 'answered' AND NEW.task IS NOT NULL AND NEW.from_state = 'waiting'"
    " AND NEW.to_state = 'waiting'", _cases(
        ("(SELECT waiting_on FROM tasks WHERE number = NEW.task) NOT IN ('human', 'agent')",
         "invalid_state:not_asking"),
        ("NEW.actor IS DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner')"
         " AND (SELECT waiting_on FROM tasks WHERE number = NEW.task) = 'human'",
         "forbidden_right:not_permitted"),
        ("NEW.actor IS DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner')"
         " AND NEW.actor = (SELECT assignee FROM tasks WHERE number = NEW.task)",
         "forbidden_right:self_answer")))
"""Who answers which question (migration 20, ``schema.ANSWERS``): a task paused on a
question, a person's answered by the owner alone, an agent's by the owner or another agent
than its assignee."""


ENROLLED = _only_if(
    "NEW.task IS NOT NULL AND EXISTS (SELECT 1 FROM enrolments WHERE agent = NEW.actor)"
    " AND NOT (coalesce(NEW.from_state, '') IN ('accepted', 'working')"
    f" AND NEW.to_state = 'routed' AND {via('NEW', 'NEW.from_state')} IS NULL)", _cases(
        ("EXISTS (SELECT 1 FROM enrolments WHERE agent = NEW.actor AND active = 0)",
         "invalid_state:optin_inactive"),
        ("EXISTS (SELECT 1 FROM enrolments WHERE agent = NEW.actor AND NOT (CASE WHEN"
         f" {PROPOSING} THEN 'tasks.propose' ELSE 'tasks.work' END)"
         " = ANY(string_to_array(rights, ',')))", "forbidden_right:optin_scope"),
        ("EXISTS (SELECT 1 FROM enrolments e, tasks t WHERE e.agent = NEW.actor"
         " AND t.number = NEW.task AND jsonb_array_length(hl_json(e.projects)) > 0"
         " AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(hl_json(e.projects)) p"
         " WHERE p = t.project))", "forbidden_right:optin_scope"),
        ("EXISTS (SELECT 1 FROM tasks t WHERE t.number = NEW.task"
         " AND t.lease_holder = NEW.actor AND t.lease_scope IS DISTINCT FROM"
         " (SELECT seq FROM enrolments WHERE agent = NEW.actor))",
         "invalid_state:optin_changed")))
"""An enrolled agent's writes within its enrolment (migration 21, ``schema.ENROLLED``): a
journal row of its own about a task, but a claim given back, is refused when the enrolment
ended, lacks the right the row needs, leaves out the task's project, or is newer than the
claim the agent holds the task under."""


def journal_insert_rule() -> str:
    """The rule on every journal row (``schema.journal_insert_sql``; migration 19 added the
    submission's row): it ends in its task's state, and a row that changes state is one of
    the moves, a submission's passage or the creation."""
    passed = via("NEW", "NEW.from_state")
    return f"""IF NEW.task IS NOT NULL AND (
        NEW.to_state IS DISTINCT FROM (SELECT state FROM tasks WHERE number = NEW.task)
        OR (NEW.from_state IS DISTINCT FROM NEW.to_state
            AND NOT (NEW.from_state IS NULL AND NEW.to_state = 'requested')
            AND CASE WHEN {passed} IS NULL THEN NOT EXISTS (
                SELECT 1 FROM moves m WHERE m.from_state = NEW.from_state
                                        AND m.to_state = NEW.to_state)
            ELSE NOT {passage('NEW.from_state', passed, 'NEW.to_state')} END)) THEN
        RAISE EXCEPTION 'forbidden_right:journal_forged';
    END IF;"""


def completion_decided_rule() -> str:
    """A completion is decided (``schema.completion_decided_sql``): a submission's row
    passes ``verifying`` on its way."""
    passed = via()
    return _refuse(
        "forbidden_right:not_decided",
        f"NEW.state = 'completed' AND (OLD.state IN ('approval', 'verifying')"
        f" OR {passed} IS NOT NULL)"
        " AND EXISTS (SELECT 1 FROM results WHERE task = NEW.number) AND NOT ("
        "(OLD.state = 'approval' AND ("
        "NEW.actor IS NOT DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner')"
        " OR (SELECT count(*) FROM confirmations c JOIN results r ON r.task = c.task"
        " WHERE c.task = NEW.number AND c.version = r.version AND c.verdict = 'accept'"
        " AND c.counted <> 0) >= (SELECT coalesce(threshold, 1) FROM results"
        " WHERE task = NEW.number)))"
        f" OR ((OLD.state = 'verifying' OR {passed} IS NOT NULL) AND EXISTS (SELECT 1"
        " FROM results WHERE task = NEW.number AND threshold = 0 AND outcome = 'completed')))")


def attempt_counted_rule() -> Check:
    """Every result that comes back counts an attempt (``schema.attempt_counted_sql``:
    migration 18; from migration 19 a submission's row ending in ``routed`` too)."""
    failed = (f"NEW.state = 'routed' AND (OLD.state IN ('verifying', 'approval')"
              f" OR {via()} IS NOT NULL)")
    return _checked(f"""IF {failed} THEN
        UPDATE tasks SET attempts = attempts + 1 WHERE number = NEW.number;
    END IF;""", guard(failed))


def holder_enrolled_rule() -> Check:
    """The holder works on under its claim's enrolment (``schema.holder_enrolled_sql``; a
    submission's row included)."""
    return _only_if(
        "OLD.lease_id IS NOT NULL AND NEW.state IS DISTINCT FROM OLD.state"
        f" AND (NEW.state IN ('verifying', 'waiting', 'working') OR {via()} IS NOT NULL)"
        " AND OLD.lease_scope IS DISTINCT FROM"
        " (SELECT seq FROM enrolments WHERE agent = OLD.lease_holder)",
        _cases(
            ("EXISTS (SELECT 1 FROM enrolments WHERE agent = OLD.lease_holder AND active = 0)",
             "invalid_state:optin_inactive"),
            ("TRUE", "invalid_state:optin_changed")))


PG_ONLY_COLUMNS = frozenset({("journal", "glink")})
"""Columns an SQLite store does without: each journal row's global link, which a store
chained per task keeps (:mod:`.chain`; an SQLite store's journal is one chain, each
row's hash its global link). An export leaves it out; an import computes it again."""
PG_ONLY = ("_number", "_truncate")
"""Rules SQLite has no trigger for, by the end of their names: numbering the journal, the
updates and the controls (SQLite's ``INTEGER PRIMARY KEY`` does it), and refusing
``TRUNCATE`` (which SQLite does not have)."""


@cache
def sqlite_triggers(upto: int | None = None) -> tuple[str, ...]:
    """SQLite's triggers in the order its migrations (up to version ``upto``; None: all)
    make them, which is the reverse of the order SQLite runs them in (each one loaded goes
    first)."""
    import apsw

    from .migrations import MIGRATIONS

    conn = apsw.Connection(":memory:")
    try:
        for migration in MIGRATIONS:
            if upto is None or migration.version <= upto:
                migration.apply(conn)
        return tuple(str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'trigger' ORDER BY rowid"))
    finally:
        conn.close()


MADE_IN: dict[str, int] = {"journal_answered": 20, "journal_enrolled": 21,
                           "watches_made": 22, "watches_kept": 22}
"""The rules a migration after the first PostgreSQL one made, by its version: a store at
an earlier version has none of them."""


def _in_firing_order(items: list[Rule], upto: int | None = None) -> list[Rule]:
    """``items`` a store at version ``upto`` (None: today's) has, in the order PostgreSQL
    should run them (it runs a table's triggers by name, and each name starts with its
    place here): the numbering first, then SQLite's triggers in the order SQLite runs
    them at that version, so a write breaking two rules names the same one on both
    engines; ``TRUNCATE`` last."""
    made = {name: n for n, name in enumerate(sqlite_triggers(upto))}
    if upto is not None:
        items = [rule for rule in items if MADE_IN.get(rule.name, 0) <= upto]

    def place(rule: Rule) -> tuple[int, int]:
        if rule.name.endswith("_number"):
            return (0, 0)
        if rule.name.endswith("_truncate"):
            return (2, 0)
        if rule.name not in made:
            raise ValueError(f"rule {rule.name} has no SQLite trigger of that name")
        return (1, -made[rule.name])

    return sorted(items, key=place)


def rule_functions(items: Iterable[Rule]) -> list[tuple[str, Rule, str]]:
    """Each rule's trigger function as :func:`trigger_sql` makes it: its name
    (``hl<place>_<name>``), the rule, and its body as PostgreSQL keeps it
    (``pg_proc.prosrc``, the text between the ``$$``), which the store's guard compares."""
    made = []
    for place, rule in enumerate(items, start=1):
        returns = ("RETURN NULL;" if rule.each == "STATEMENT"
                   else "RETURN OLD;" if rule.event == "DELETE" else "RETURN NEW;")
        made.append((f"hl{place:03d}_{rule.name}", rule,
                     f"\nBEGIN\n    {rule.body}\n    {returns}\nEND "))
    return made


def trigger_sql(items: Iterable[Rule]) -> str:
    """Each rule as a trigger function and its trigger, named ``hl<place>_<name>``."""
    return "\n".join(
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql"
        f" SET search_path FROM CURRENT AS $${body}$$;\n"
        f"{trigger_of(name, rule)};\n" for name, rule, body in rule_functions(items))


def trigger_of(name: str, rule: Rule) -> str:
    """The ``CREATE TRIGGER`` of a rule whose function is ``name`` (its ``WHEN`` too)."""
    when = "" if rule.when is None else f" WHEN ({rule.when})"
    return (f"CREATE TRIGGER {name} {rule.timing} {rule.event} ON {rule.table}"
            f" FOR EACH {rule.each}{when} EXECUTE FUNCTION {name}()")


def target_sql() -> str:
    """The whole schema on PostgreSQL, moves included (run inside schema ``hivelite``).

    The moves are inserted before the triggers exist (the ``moves`` table refuses every
    change once they do)."""
    return (TABLES + HELPERS + TASK_BOARD + insert_moves_sql() + IDENTITY + WATCHES
            + WATCH_SEAL + trigger_sql(rules()))


WATCH_FIXED = ("id", "caller", "token", "verb", "asked", "created_at", "expires_at",
               "poll_ms")
"""A watch's columns no write changes (migration 22, ``schema.KEPT_WATCHES``)."""
WATCH_SEAL = "ALTER TABLE watches ADD COLUMN seal text;\n"
"""A watch's seal under the owner's key (migration 22)."""

WATCHES = """
CREATE TABLE watches(
    id text PRIMARY KEY CHECK (length(id) >= 26),
    caller text NOT NULL,
    token text,
    verb text NOT NULL,
    number bigint,
    asked text NOT NULL,
    answer text,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    expires_at text NOT NULL,
    poll_ms bigint NOT NULL CHECK (poll_ms > 0),
    cancelled_at text
);
CREATE INDEX watches_by_expiry ON watches((expires_at COLLATE "C"));
"""
"""Watches (migration 17), as SQLite's ``schema.WATCHES``: the MCP face's durable tasks.
Their expiry is compared in the "C" collation, as every time the store compares."""


IDENTITY = ("INSERT INTO meta(key, value)"
            " VALUES ('store_id', replace(gen_random_uuid()::text, '-', ''));\n")
"""The store's identity: 32 random hex digits, as on SQLite (the journal chain starts
from it)."""


RETURNS_BACKFILL = """
UPDATE tasks SET attempts = greatest(attempts, (
    SELECT count(*) FROM journal j WHERE j.task = tasks.number
      AND j.from_state IN ('verifying', 'approval') AND j.to_state = 'routed'))
WHERE state NOT IN ('cancelled', 'completed', 'rejected');
UPDATE tasks SET attempt_limit = attempts + 1, fields_version = fields_version + 1
WHERE state NOT IN ('cancelled', 'completed', 'rejected') AND attempts >= attempt_limit
  AND attempt_limit > (SELECT count(*) FROM journal j WHERE j.task = tasks.number
      AND j.from_state = 'verifying' AND j.to_state = 'routed'
      AND hl_json(j.detail) ->> 'outcome' = 'failed');
"""
"""SQLite's ``schema.RETURNS_BACKFILL`` on PostgreSQL: migration 18's own text holds these
statements verbatim, and an import of an export from before it runs them."""


PLUGINS_NOTICE = """
INSERT INTO policy(key, value, at, by)
SELECT 'plugins_notice', 'due',
       to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), value
FROM meta WHERE key = 'owner';
"""
"""SQLite's ``schema.PLUGINS_NOTICE`` on PostgreSQL (migration 18)."""


ONE_ROW_SUBMISSIONS = frozenset(name for name, _ in ONE_ROW_SUBMISSIONS_SQLITE)
"""The rules migration 19 changes (``schema.ONE_ROW_SUBMISSIONS``), so that a submission is
one journal row: each reads a row's ``via`` as the seed moves it stands for."""


def replaced_sql(before: int, after: int, changed: Iterable[str]) -> str:
    """A migration's statements on PostgreSQL when SQLite's migration ``after`` changes the
    rules ``changed`` or makes new ones (:data:`MADE_IN`), and makes triggers again, which
    moves them in SQLite's order: each rule whose place differs from the one it had at
    version ``before`` is renamed to its new one (trigger and function, by way of ``hlx``
    names: no two at once), then each changed rule's function is replaced and its trigger
    made again, its ``WHEN`` too (as migration 18 did by hand), and each new rule is
    made."""
    fresh = {name for name, version in MADE_IN.items() if version == after}
    was = {rule.name: name for name, rule, _ in rule_functions(_in_firing_order(
        rules(), before))}
    made = rule_functions(_in_firing_order(rules(), after))
    moved = sorted((was[rule.name], name, rule) for name, rule, _ in made
                   if rule.name not in fresh and was[rule.name] != name)
    lines = []
    for old, _, rule in moved:
        lines.append(f"ALTER TRIGGER {old} ON {rule.table} RENAME TO hlx{old[2:]};")
        lines.append(f"ALTER FUNCTION {old}() RENAME TO hlx{old[2:]};")
    for old, new, rule in moved:
        lines.append(f"ALTER TRIGGER hlx{old[2:]} ON {rule.table} RENAME TO {new};")
        lines.append(f"ALTER FUNCTION hlx{old[2:]}() RENAME TO {new};")
    wanted = set(changed)
    for name, rule, body in made:
        if rule.name in fresh:
            lines.append(f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql"
                         f" SET search_path FROM CURRENT AS $${body}$$;")
            lines.append(f"{trigger_of(name, rule)};")
        elif rule.name in wanted:
            lines.append(f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE"
                         f" plpgsql SET search_path FROM CURRENT AS $${body}$$;")
            lines.append(f"DROP TRIGGER {name} ON {rule.table};")
            lines.append(f"{trigger_of(name, rule)};")
    return "".join(f"{line}\n" for line in lines)


def one_row_submissions_sql() -> str:
    """Migration 19's statements on PostgreSQL (SQLite's: ``schema.remade_in_order``): the
    rules of :data:`ONE_ROW_SUBMISSIONS` made again as the code defines them, and every
    rule renamed to its place in SQLite's order at 19 (each keeps its order among its
    table's rules, as SQLite's migration keeps it)."""
    return replaced_sql(18, 19, ONE_ROW_SUBMISSIONS)


def new_rule_sql(version: int) -> str:
    """The statements on PostgreSQL of a migration that makes a new rule (:data:`MADE_IN`:
    20, who answers which question, :data:`ANSWERED`; 21, an enrolled agent's writes,
    :data:`ENROLLED`): the rule made, and every rule renamed to the place SQLite's order at
    that version gives it (SQLite makes the journal's rules again after it)."""
    return replaced_sql(version - 1, version, ())
