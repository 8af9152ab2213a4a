"""``doctor``: is this store file sound? Each check says what it looked at and what it found.

The checks read only: the file's own integrity (SQLite's ``integrity_check``, or the
faster ``quick_check``), the schema against the frozen migrations (a dropped or edited
trigger shows here), the journal's hash chain sealed with the owner's key (:mod:`.keys`),
the heads witnessed outside the file (and, given one, a head noted earlier), and
the protocol's invariants: every task's state is the replay of
its journal, every claim in the journal took the next fencing token, a live lease only on a
claimed state, a result from ``verifying`` on.
"""

from __future__ import annotations

import hashlib
import json
import os
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import apsw

from ..core.clock import format_ts
from ..core.errors import StoreBusy, StoreError, StoreReadonly
from ..core.progress import Progress
from ..core.protocol import MOVES_BY_PAIR, PRIORITIES, Actor, State
from .chain import CONTENT, HASH_CHARS, SEAL, TASKS_FROM, Walk
from .columns import SUBMISSION, WATCH, seed_rows
from .cosign import cosigned_heads
from .keys import (
    META_KEY,
    RESTORED,
    ChainKey,
    Witness,
    key_path,
    load_key,
    place_of,
    read_watch,
    unsealed,
    witness,
    witnesses,
)
from .migrations import APPLICATION_ID, MIGRATIONS, SCHEMA_DIGEST, SCHEMA_VERSION
from .rows import JournalRow
from .schema import instance_key, usage_out_of_bounds, via

SQLITE_HEADER = b"SQLite format 3\x00"

SCHEMA_QUERY = ("SELECT type, name, tbl_name, sql FROM sqlite_schema"
                " WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name")
MOVES_QUERY = "SELECT * FROM moves ORDER BY number"
SHOWN = 5
"""How many examples a failed check names."""
SUBMITTED = ("((j.from_state = 'working' AND j.to_state = 'verifying')"
             f" OR {SUBMISSION.format(via=via('j', 'j.from_state'))})")
"""A submission's journal row (``j``): move 12, or the one row a submission is since
migration 19."""

Schema = tuple[tuple[tuple[object, ...], ...], tuple[tuple[object, ...], ...]]


@dataclass(frozen=True)
class Finding:
    """One check's outcome: what was checked, whether it holds, and what was found."""

    check: str
    ok: bool
    detail: str
    data: dict[str, Any] | None = None
    """Facts for a machine reader (the chain's head), beside the sentence."""


@cache
def expected_schema(version: int) -> Schema:
    """The schema that running the migrations up to ``version`` gives (built once, in
    memory)."""
    conn = apsw.Connection(":memory:")
    for migration in MIGRATIONS:
        if migration.version <= version:
            migration.apply(conn)
    return schema_of(conn)


def schema_of(conn: apsw.Connection) -> Schema:
    objects = tuple(tuple(r) for r in conn.execute(SCHEMA_QUERY))
    try:
        moves = tuple(tuple(r) for r in conn.execute(MOVES_QUERY))
    except apsw.SQLError:  # no moves table, or not its columns (renamed): the objects
        moves = ()  # name the difference, and the moves differ
    return objects, moves


def digest(schema: Schema) -> str:
    """A schema's fingerprint (``migrations.SCHEMA_DIGEST`` is the current version's)."""
    return hashlib.sha256(json.dumps(schema).encode()).hexdigest()


def schema_problem(conn: apsw.Connection) -> str | None:
    """What differs between the file's schema and its migrations' (None: nothing).

    A current store is checked against a fingerprint (fast enough for every open); the
    migrations are only run in memory to say what differs."""
    version = int(conn.execute("PRAGMA user_version").get)
    have_objects, have_moves = schema_of(conn)
    if version == SCHEMA_VERSION and digest((have_objects, have_moves)) == SCHEMA_DIGEST:
        return None
    want_objects, want_moves = expected_schema(version)
    if have_objects == want_objects and have_moves == want_moves:
        return None
    want = {(r[0], r[1]): r for r in want_objects}
    have = {(r[0], r[1]): r for r in have_objects}
    problems = [f"{kind} {name} is missing" for kind, name in sorted(want.keys() - have.keys())]
    problems += [f"{kind} {name} is not hivelite's"
                 for kind, name in sorted(have.keys() - want.keys())]
    problems += [f"{kind} {name} was changed" for kind, name in sorted(want.keys() & have.keys())
                 if want[(kind, name)] != have[(kind, name)]]
    if have_moves != want_moves:
        problems.append("the moves table differs from the protocol's 22 moves")
    return "; ".join(problems)


def _examples(items: Iterable[str]) -> str:
    shown = list(items)
    more = f" (and {len(shown) - SHOWN} more)" if len(shown) > SHOWN else ""
    return "; ".join(shown[:SHOWN]) + more


def _integrity(conn: apsw.Connection, quick: bool) -> Finding:
    pragma = "quick_check" if quick else "integrity_check"
    rows = [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}")]
    ok = rows == ["ok"]
    return Finding(pragma, ok, "the file's pages and indexes are sound" if ok
                   else _examples(rows))


def _schema(conn: apsw.Connection) -> Finding:
    version = conn.execute("PRAGMA user_version").get
    if not 1 <= version <= SCHEMA_VERSION:
        return Finding("schema", False, f"schema version {version} is not one this hivelite"
                       f" knows (1 to {SCHEMA_VERSION}): "
                       + ("a newer hivelite made it" if version > SCHEMA_VERSION
                          else "the header is damaged"), {"unknown_version": version})
    problem = schema_problem(conn)
    return Finding("schema", problem is None,
                   f"tables, indexes, triggers and moves are migration {version}'s"
                   if problem is None else problem)


def _replay(conn: apsw.Connection) -> Finding:
    """Every task's state and ``waiting_on`` is where its journal's moves lead; from
    migration 13, each row links to its task's row before it and the task to its newest
    (the links a task's history is read through)."""
    linked = conn.execute("PRAGMA user_version").get >= LINKS_SINCE
    head = "last_seq" if linked else "NULL"
    tasks = {r[0]: (r[1], r[2], r[3]) for r in conn.execute(
        f"SELECT number, state, waiting_on, {head} FROM tasks")}
    reached: dict[int, tuple[str | None, str | None]] = {}
    newest: dict[int, int] = {}
    problems = []
    for task, seq, from_state, to_state, waiting_on, prev in conn.execute(
            "SELECT task, seq, from_state, to_state, waiting_on,"
            f" {'prev' if linked else 'NULL'} FROM journal"
            " WHERE task IS NOT NULL ORDER BY task, seq"):
        state = reached.get(task, (None, None))[0]
        if from_state != state:
            problems.append(f"task {task}: journal row {seq} starts from {from_state},"
                            f" not {state}")
        if linked and prev != newest.get(task):
            problems.append(f"task {task}: journal row {seq} links to row {prev}, not to"
                            f" the task's row before it ({newest.get(task)})")
        newest[task] = seq
        if from_state != to_state or task not in reached:
            reached[task] = (to_state, waiting_on)
    for number, (state, waiting_on, last) in sorted(tasks.items()):
        if linked and last != newest.get(number):
            problems.append(f"task {number} names journal row {last} as its newest, not"
                            f" {newest.get(number)}")
        if number not in reached:
            problems.append(f"task {number} has no journal")
        elif reached[number][0] != state:
            problems.append(f"task {number} is {state}; its journal leads to"
                            f" {reached[number][0]}")
        elif state == "waiting" and reached[number][1] != waiting_on:
            problems.append(f"task {number} waits on {waiting_on}; its journal says"
                            f" {reached[number][1]}")
    return Finding("replay", not problems,
                   f"{len(tasks)} task(s) are where their journal's moves lead" if not problems
                   else _examples(problems))


LINKS_SINCE = 13
"""The schema version that links each task's journal rows (``tasks.last_seq``,
``journal.prev``) instead of indexing them, and counts a budgeted agent's claims in a
row (``claim_counts``)."""


def _steps(seq: int, task: int, actor: str | None, source: str | None,
           target: str | None, detail: object) -> list[JournalRow]:
    """A journal row as the seed moves it stands for (a submission's row since migration
    19 stands for moves 7, 12 and the judgement's, each by its own actor)."""
    try:
        parsed = json.loads(detail) if isinstance(detail, str) else None
    except ValueError:
        parsed = None
    return seed_rows(JournalRow(seq=seq, task=None, number=task, at="", actor=actor,
                                from_state=source, to_state=target, waiting_on=None,
                                move=None, reason=None,
                                detail=parsed if isinstance(parsed, dict) else None))


def _moves_made(conn: apsw.Connection) -> Iterator[tuple[int, int, str | None, str, str,
                                                        str, str]]:
    """Each move the journal records (seq, task, actor, from, to, and the task's assignee
    and requester), a submission's one row as the seed moves it stands for."""
    for *row, assignee, requester in conn.execute(
            "SELECT j.seq, j.task, j.actor, j.from_state, j.to_state, j.detail, t.assignee,"
            " t.requester FROM journal j JOIN tasks t ON t.number = j.task"
            " WHERE j.from_state IS NOT NULL AND j.from_state <> j.to_state ORDER BY j.seq"):
        for step in _steps(*row):
            assert step.from_state is not None and step.to_state is not None
            yield (step.seq, row[1], step.actor, step.from_state, step.to_state, assignee,
                   requester)


def _actors(conn: apsw.Connection) -> Finding:
    """Each move was made by one who may make it (the protocol's actors): the owner's
    decisions by the store's owner, the gate's and the guard's by them, a claim, a resume
    and the holder's moves by the task's assignee, a completion or a decline by the owner
    or an agent other than the assignee (a confirmation; a decline, only by a verifier
    whose rejection counted, as the store's rule says). A cancel by another than the
    owner stands only as the store's rule lets it (:func:`_guest_withdraws`)."""
    owner = conn.execute("SELECT value FROM meta WHERE key = 'owner'").get
    modes = _modes(conn)
    problems = []
    for seq, task, actor, source, target, assignee, requester in _moves_made(conn):
        move = MOVES_BY_PAIR.get((State(source), State(target)))
        if move is None:  # replay names it
            continue
        if not any(_may(kind, actor, owner, assignee) for kind in move.actors) and not (
                move.target is State.cancelled
                and _guest_withdraws(actor, requester, owner, _mode_at(modes, seq))):
            problems.append(f"journal row {seq} (task {task}, {move.name}) was made by"
                            f" {actor}, who may not make it")
        elif (source, target) == ("approval", "routed") and actor != owner and not (
                conn.execute("SELECT 1 FROM confirmations WHERE task = ? AND reviewer = ?"
                             " AND verdict = 'reject' AND counted", (task, actor)).get):
            problems.append(f"journal row {seq} (task {task}, {move.name}): {actor}"
                            " declined with no counted rejection of the result")
    return Finding("actors", not problems, "every move was made by one who may make it"
                   if not problems else _examples(problems))


def _owner_part(name: str | None) -> str | None:
    """The owner half of an ``owner/agent`` name, as the store's rules take it ('' when
    there is no ``/``)."""
    if name is None:
        return None
    return name[:name.index("/")] if "/" in name else ""


def _guest_withdraws(actor: str | None, requester: str | None, owner: str | None,
                     mode: str | None) -> bool:
    """Whether ``actor``'s cancel is a guest's own request withdrawn, as the store's rule
    ``task_decided_by`` (migration 12) lets it: in team mode, by an agent (a name with a
    ``/``) whose owner is the requester's, when that owner is not the store's."""
    return (mode == "team" and actor is not None and "/" in actor
            and _owner_part(actor) == _owner_part(requester)
            and _owner_part(requester) != owner)


def _modes(conn: apsw.Connection) -> list[tuple[int, str | None]]:
    """Each change of the policy's ``mode`` in the owner's journaled changes, in order:
    the row's seq and the mode from then on (None: a row that cannot be read, so no mode
    is known until the next)."""
    if conn.execute("PRAGMA user_version").get < AUTHORITY_SINCE:
        return []
    changes: list[tuple[int, str | None]] = []
    for seq, text in conn.execute("SELECT seq, detail FROM journal WHERE task IS NULL"
                                  " AND reason = 'policy' ORDER BY seq"):
        try:
            d = json.loads(text)
            if d["key"] != "mode":
                continue
            changes.append((seq, DEFAULT_MODE if d["value"] is None else str(d["value"])))
        except (ValueError, TypeError, KeyError):
            changes.append((seq, None))
    return changes


def _mode_at(modes: list[tuple[int, str | None]], seq: int) -> str | None:
    """The policy's mode when journal row ``seq`` was written: the last change before it
    (personal, the default, before any)."""
    before = bisect_left(modes, seq, key=lambda change: change[0])
    return modes[before - 1][1] if before else DEFAULT_MODE


def _may(kind: Actor, actor: str | None, owner: str | None, assignee: str) -> bool:
    """Whether ``actor`` acts as ``kind`` on a task assigned to ``assignee``."""
    if kind is Actor.person:  # the one person hivelite knows: the store's owner
        return actor is not None and actor == owner
    if kind in (Actor.assignee, Actor.holder):  # only the assignee claims
        return actor == assignee
    if kind in (Actor.verifier, Actor.threshold):  # a confirming or rejecting agent
        return actor is not None and "/" in actor and actor != assignee
    return actor == kind.value  # gate, guard, clock: the parts of hivelite that decide


def _tokens(conn: apsw.Connection) -> Finding:
    """Each claim (and resume) took the next fencing token; the task row keeps the last."""
    last: dict[int, int] = {}
    problems = []
    for task, seq, detail in conn.execute(
            "SELECT task, seq, detail FROM journal WHERE (from_state, to_state) IN"
            " (VALUES ('routed', 'accepted'), ('waiting', 'working')) ORDER BY task, seq"):
        try:
            token = json.loads(detail)["fencing_token"] if detail else None
        except (ValueError, KeyError, TypeError):
            token = None
        if not isinstance(token, int):
            problems.append(f"task {task}: the claim at journal row {seq} names no token")
            continue
        if token != last.get(task, 0) + 1:
            problems.append(f"task {task}: the claim at journal row {seq} took token {token}"
                            f" after {last.get(task, 0)}")
        last[task] = token
    for number, token in conn.execute("SELECT number, lease_token FROM tasks"):
        if token != last.get(number, 0):
            problems.append(f"task {number} keeps token {token}; its claims reached"
                            f" {last.get(number, 0)}")
    return Finding("fencing tokens", not problems,
                   "every claim took the next token" if not problems else _examples(problems))


def _leases_and_results(conn: apsw.Connection) -> Finding:
    problems = [f"task {n} is {s} with a lease" for n, s in conn.execute(
        "SELECT number, state FROM tasks WHERE lease_id IS NOT NULL"
        " AND state NOT IN ('accepted', 'working')")]
    problems += [f"task {n} is {s} without a lease" for n, s in conn.execute(
        "SELECT number, state FROM tasks WHERE lease_id IS NULL"
        " AND state IN ('accepted', 'working')")]
    problems += [f"task {n} is {s} without a result" for n, s in conn.execute(
        "SELECT number, state FROM tasks t WHERE state IN ('verifying', 'approval',"
        " 'completed') AND NOT EXISTS (SELECT 1 FROM results r WHERE r.task = t.number)")]
    return Finding("leases and results", not problems,
                   "leases only on claimed tasks, results from verifying on" if not problems
                   else _examples(problems))


def _queue(conn: apsw.Connection) -> Finding:
    """What ``next`` reads agrees with what it stands for: each open task's count of open
    dependencies and of attempts (results that came back), as its dependencies and its
    journal say (a task closed before the queue existed keeps the counts it had then:
    none)."""
    if conn.execute("PRAGMA user_version").get < 5:
        return Finding("queue", True, "the store predates the queue (schema 5)")
    problems = [f"task {n} counts {w} open dependencies; it has {o}" for n, w, o in
                conn.execute(
        "SELECT t.number, t.waits, (SELECT count(*) FROM deps d JOIN tasks o"
        " ON o.number = d.on_task WHERE d.task = t.number AND o.state IS NOT 'completed')"
        " AS open FROM tasks t WHERE t.state NOT IN ('cancelled', 'completed', 'rejected')"
        " AND t.waits IS NOT open")]
    problems += [f"task {n} counts {a} attempts; its journal has {f} results sent back"
                 for n, a, f in conn.execute(
        "SELECT t.number, t.attempts, coalesce(f.n, 0) AS failed FROM tasks t LEFT JOIN"
        " (SELECT task, count(*) AS n FROM journal j WHERE j.to_state = 'routed'"
        f" AND (j.from_state IN ('verifying', 'approval')"
        f" OR {via('j', 'j.from_state')} IS NOT NULL)"
        " GROUP BY task) f ON f.task = t.number"
        " WHERE t.state NOT IN ('cancelled', 'completed', 'rejected')"
        " AND t.attempts IS NOT failed")]
    return Finding("queue", not problems, "open dependencies and attempts are counted"
                   " right" if not problems else _examples(problems))


AUTHORITY_SINCE = 7
"""The schema version that keeps the owner's controls and budgets."""
TOKENS_SINCE = 8
"""The schema version that keeps access tokens."""
SCOPE_SINCE = 12
"""The schema version that keeps enrolments (and lets a guest withdraw its request)."""
DEFAULT_MODE = "personal"
"""The policy's mode when none is set, as the store's rules take it."""


def _controls(conn: apsw.Connection) -> Finding:
    """The owner's controls hold: no live lease belongs to an agent a live hold or stop
    binds (by name, by instance, or all) or that is vetoed on its task; each control, and
    each lift, has its journal row; a counted verdict gives no reason it does not count."""
    if conn.execute("PRAGMA user_version").get < AUTHORITY_SINCE:
        return Finding("controls", True, "the store predates the owner's controls (schema 7)")
    instance = instance_key("t.lease_instance")
    problems = [f"task {n} is leased to {h}, whom control {c} ({k}) binds" for n, h, c, k in
                conn.execute(
        "SELECT t.number, t.lease_holder, c.id, c.kind FROM tasks t JOIN controls c"
        " ON c.lifted_at IS NULL WHERE t.lease_id IS NOT NULL AND ("
        f"(c.kind IN ('hold', 'stop') AND (c.agent = t.lease_holder OR c.instance = {instance}"
        " OR (c.kind = 'stop' AND c.agent IS NULL AND c.instance IS NULL)))"
        " OR (c.kind = 'veto' AND c.agent = t.lease_holder AND c.task = t.number))")]
    problems += [f"control {c} ({k}) has no journal row" for c, k in conn.execute(
        "SELECT id, kind FROM controls c WHERE NOT EXISTS (SELECT 1 FROM journal j"
        " WHERE j.task IS NULL AND j.reason = c.kind AND json_valid(j.detail)"
        " AND json_extract(j.detail, '$.control') = c.id)")]
    problems += [f"the lift of control {c} has no journal row" for (c,) in conn.execute(
        "SELECT id FROM controls c WHERE lifted_at IS NOT NULL AND NOT EXISTS (SELECT 1"
        " FROM journal j WHERE j.task IS NULL AND j.reason = 'lift' AND json_valid(j.detail)"
        " AND json_extract(j.detail, '$.control') = c.id)")]
    problems += [f"a verdict by {r} on task {n} counts, yet says why it does not" for n, r in
                 conn.execute("SELECT task, reviewer FROM confirmations"
                              " WHERE counted AND why IS NOT NULL")]
    live = conn.execute("SELECT count(*) FROM controls WHERE lifted_at IS NULL").get
    return Finding("controls", not problems, f"{live} live control(s); no lease against"
                   " one, each journaled" if not problems else _examples(problems))


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _policy(conn: apsw.Connection) -> Finding:
    """The store's policy, required plugins, budgets, tokens and enrolments are what the
    owner's journaled changes made them: a row changed by raw SQL (a requirement dropped,
    a budget lifted, the mode switched, a token slipped in, an enrolment widened) has no
    journal row to match."""
    if conn.execute("PRAGMA user_version").get < AUTHORITY_SINCE:
        return Finding("policy", True, "the store predates the owner's policy (schema 7)")
    policy: dict[str, str] = {}
    required: dict[str, tuple[str, str, str]] = {}
    budgets: dict[str, tuple[object, object, object]] = {}
    for seq, reason, text in conn.execute(
            "SELECT seq, reason, detail FROM journal WHERE task IS NULL AND reason IN"
            " ('policy', 'policy require', 'policy unrequire', 'budget') ORDER BY seq"):
        try:
            d = json.loads(text)
            if reason == "policy":
                if d["value"] is None:
                    policy.pop(d["key"], None)
                else:
                    policy[d["key"]] = d["value"]
            elif reason == "policy require":
                required[d["plugin"]] = (d["kind"], d["digest"], _canonical(d["settings"]))
            elif reason == "policy unrequire":
                required.pop(d["plugin"], None)
            elif d.get("cleared"):
                budgets.pop(d["agent"], None)
            else:
                budgets[d["agent"]] = (d.get("tasks"), d.get("tokens"), d.get("usd_micros"))
        except (ValueError, TypeError, KeyError):
            return Finding("policy", False, f"journal row {seq} ({reason}) cannot be read")
    problems: list[str] = []

    def compare(what: str, kept: dict[str, object], journaled: dict[str, object]) -> None:
        for key in sorted(set(kept) | set(journaled)):
            if kept.get(key) != journaled.get(key):
                problems.append(f"{what} {key}: the store has {kept.get(key)!r}, the owner's"
                                f" journaled changes {journaled.get(key)!r}")

    compare("policy", {str(k): v for k, v in conn.execute(  # but migration 18's mark
        "SELECT key, value FROM policy WHERE key <> 'plugins_notice'")},
        {k: v for k, v in policy.items() if k != "plugins_notice"})
    compare("required plugin", {str(n): (k, d, _canonical(json.loads(st))) for n, k, d, st in
                                conn.execute("SELECT name, kind, digest, settings"
                                             " FROM required_plugins")}, dict(required))
    compare("budget of", {str(a): (t, k, u) for a, t, k, u in conn.execute(
        "SELECT agent, tasks, tokens, usd_micros FROM budgets")}, dict(budgets))
    if conn.execute("PRAGMA user_version").get >= TOKENS_SINCE:
        issued: dict[str, tuple[object, ...]] = {}
        hashes: dict[str, object] = {}  # a token's secret hash, where the journal has it
        for text, reason in conn.execute(
                "SELECT detail, reason FROM journal WHERE task IS NULL AND reason IN"
                " ('token add', 'token seal', 'token revoke') ORDER BY seq"):
            d = json.loads(text)
            for t in d["tokens"] if reason == "token seal" else [d]:
                if reason == "token revoke":
                    if t["token"] in issued:
                        issued[t["token"]] = (*issued[t["token"]][:4], True)
                    continue
                issued[t["token"]] = (t["agent"], t["instance"], ",".join(t["rights"]),
                                      t["expires_at"], False)
                if "hash" in t:
                    hashes[t["token"]] = t["hash"]
        compare("token", {str(i): (a, n, r, e, v is not None) for i, a, n, r, e, v in
                          conn.execute("SELECT id, agent, instance, rights, expires_at,"
                                       " revoked_at FROM tokens")}, dict(issued))
        compare("secret hash of token", {str(i): h for i, h in conn.execute(
            "SELECT id, hash FROM tokens") if i in hashes}, hashes)
    enrolled = ""
    if conn.execute("PRAGMA user_version").get >= SCOPE_SINCE:
        journaled = _enrolments(conn)
        if isinstance(journaled, Finding):
            return journaled
        kept = {str(row[0]): _enrolment(*row[1:]) for row in conn.execute(
            "SELECT agent, projects, roles, rights, active, seq, at, by FROM enrolments")}
        compare("enrolment of", dict(kept), dict(journaled))
        enrolled = f", {len(journaled)} enrolment(s)"
    return Finding("policy", not problems, f"{len(policy)} policy value(s),"
                   f" {len(required)} required plugin(s), {len(budgets)} budget(s){enrolled},"
                   " each as the owner's journal has it" if not problems
                   else _examples(problems))


Enrolled = tuple[object, object, object, object, object, object, object]
"""An enrolment as doctor compares it: its projects and roles (read from their JSON),
rights, whether active, the seq of its journal row, when and by whom."""


def _enrolment(projects: object, roles: object, rights: object, active: object, seq: object,
               at: object, by: object) -> Enrolled:
    """An enrolment row of the store as doctor compares it (a projects or roles text that
    is no JSON is kept as the text, which no journal row matches)."""
    def parsed(text: object) -> object:
        try:
            return _canonical(json.loads(str(text)))
        except ValueError:
            return text
    return (parsed(projects), parsed(roles), rights, active, seq, at, by)


def _enrolments(conn: apsw.Connection) -> dict[str, Enrolled] | Finding:
    """Each agent's enrolment as the owner's journaled changes made it: the newest
    ``enrolment`` event naming the agent (its seq is the enrolment's); a Finding when a
    row cannot be read."""
    enrolled: dict[str, Enrolled] = {}
    for seq, at, actor, text in conn.execute(
            "SELECT seq, at, actor, detail FROM journal WHERE task IS NULL"
            " AND reason = 'enrolment' ORDER BY seq"):
        try:
            d = json.loads(text)
            enrolled[str(d["agent"])] = (
                _canonical(d["projects"]), _canonical(d["roles"]), d["rights"],
                int(d["active"]), seq, at, actor)
        except (ValueError, TypeError, KeyError):
            return Finding("policy", False, f"journal row {seq} (enrolment) cannot be read")
    return enrolled


def _results(conn: apsw.Connection) -> Finding:
    """Each result is what the verbs made it: its version counts its submissions and its
    worker's amends in the journal (a body swapped behind the protocol's back has neither),
    a merge record is on a completed task, by its worker or the owner, with the journal
    row of that merge (and each journaled merge is on its result), and its draft and the
    evidence its receipts verified are what the journal sealed (:func:`_sealed`)."""
    owner = conn.execute("SELECT value FROM meta WHERE key = 'owner'").get
    problems = [f"task {t}'s result is version {v}; its journal has {n} submission(s) and"
                " amend(s)" for t, v, n in conn.execute(
        "SELECT task, version, made FROM (SELECT r.task, r.version,"
        " coalesce(s.n, 0) + coalesce(a.n, 0) AS made FROM results r"
        f" LEFT JOIN (SELECT task, count(*) AS n FROM journal j WHERE {SUBMITTED}"
        " GROUP BY task) s ON s.task = r.task"
        " LEFT JOIN (SELECT task, actor, count(*) AS n FROM journal"
        " WHERE from_state = 'approval' AND to_state = 'approval' AND reason = 'amended'"
        " GROUP BY task, actor) a ON a.task = r.task AND a.actor IS r.worker)"
        " WHERE version IS NOT made ORDER BY task")]
    merged = ("CASE WHEN json_valid(j.detail)"
              " THEN json_extract(j.detail, '$.merge_commit') END")
    for task, commit, by, worker, state, journaled in conn.execute(
            "WITH merges AS MATERIALIZED (SELECT j.task, j.actor, "
            f"{merged} AS commit_ FROM journal j WHERE j.from_state = 'completed'"
            " AND j.to_state = 'completed' AND j.reason = 'merge_recorded')"
            " SELECT r.task, r.merge_commit, r.merged_by, r.worker, t.state, EXISTS (SELECT 1"
            " FROM merges m WHERE m.task = r.task AND m.actor IS r.merged_by"
            " AND m.commit_ IS r.merge_commit)"
            " FROM results r JOIN tasks t ON t.number = r.task"
            " WHERE r.merge_commit IS NOT NULL OR r.merged_by IS NOT NULL ORDER BY r.task"):
        if state != State.completed.value:
            problems.append(f"task {task} is {state}, yet its result has a merge record")
        if by is None or by not in (owner, worker):
            problems.append(f"the merge of task {task} was recorded by {by}, neither its"
                            " worker nor the owner")
        if not journaled:
            problems.append(f"the merge {commit} of task {task} has no journal row")
    problems += [f"journal row {seq} records merge {c} of task {t}, which its result does not"
                 " have" for seq, t, c in conn.execute(
        f"SELECT j.seq, j.task, {merged} FROM journal j WHERE j.reason = 'merge_recorded'"
        " AND j.from_state = 'completed' AND j.to_state = 'completed' AND NOT EXISTS"
        f" (SELECT 1 FROM results r WHERE r.task = j.task AND r.merge_commit IS {merged})"
        " ORDER BY j.seq")]
    sealed = conn.execute("PRAGMA user_version").get >= DRAFTS_SINCE
    if sealed:
        problems += _sealed(conn)
    count = conn.execute("SELECT count(*) FROM results").get
    return Finding("results", not problems, f"{count} result(s), each at the version its"
                   " submissions and amends made it, each merge journaled"
                   + (", each draft and verified receipt as the journal sealed it" if sealed
                      else "") if not problems else _examples(problems))


DRAFTS_SINCE = 12
"""The schema version that keeps a result's draft and its evidence's receipts."""

Sealing = tuple[int, str, Any]
"""A journal row that sealed a result: its seq, what it was (the submission, an amend)
and its detail (read from its JSON; None when it is no JSON object)."""


def _sealed(conn: apsw.Connection) -> list[str]:
    """Each task's current result keeps the draft whose digest its last submission's
    journal row (move 12) sealed, and its receipts mark verified the pieces of evidence
    the newest row that recorded its version sealed (that submission, or its worker's
    later amend to this version): a draft or a ``verified`` rewritten behind the verbs'
    back differs from the journal, which the hash chain holds."""
    submitted: dict[int, Sealing] = {}
    amended: dict[int, list[tuple[Sealing, object]]] = {}  # since the last submission
    for task, seq, submission, actor, text in conn.execute(
            f"SELECT j.task, j.seq, {SUBMITTED}, j.actor, j.detail FROM journal j"
            f" WHERE j.task IS NOT NULL AND ({SUBMITTED} OR (j.from_state = 'approval'"
            " AND j.to_state = 'approval' AND j.reason = 'amended')) ORDER BY j.seq"):
        try:
            detail = json.loads(text) if text is not None else None
        except ValueError:
            detail = None
        if not isinstance(detail, dict):
            detail = None
        elif submission and "via" in detail:  # one row (migration 19): what move 12 sealed
            returned = detail.get("returned")
            detail = returned if isinstance(returned, dict) else None
        if submission:
            submitted[task] = (seq, "its submission", detail)
            amended[task] = []
        elif task in submitted:
            version = detail.get("version") if detail is not None else None
            amended[task].append(((seq, f"its amend to version {version}", detail), actor))
    problems: list[str] = []
    for task, version, worker, draft, receipts in conn.execute(
            "SELECT task, version, worker, draft, receipts FROM results ORDER BY task"):
        submission = submitted.get(task)
        if submission is None:
            kept = " and ".join(name for name, value in (("a draft", draft),
                                                         ("receipts", receipts)) if value)
            if kept:
                problems.append(f"task {task}'s result has {kept}; its journal has no"
                                " submission to seal them")
            continue
        seq, _, detail = submission
        if detail is None:
            problems.append(f"journal row {seq} (task {task}'s submission) cannot be read")
            continue
        sealed_draft = detail.get("draft")
        if draft is None and sealed_draft is not None:
            problems.append(f"task {task}'s result has no draft; its submission (journal row"
                            f" {seq}) sealed draft {_short(sealed_draft)}")
        elif draft is not None:
            kept = hashlib.sha256(str(draft).encode("utf-8")).hexdigest()
            if sealed_draft is None:
                problems.append(f"task {task}'s result has draft {_short(kept)}; its"
                                f" submission (journal row {seq}) sealed none")
            elif kept != sealed_draft:
                problems.append(f"task {task}'s draft is {_short(kept)}; its submission"
                                f" (journal row {seq}) sealed {_short(sealed_draft)}")
        newest = next((row for row, actor in reversed(amended[task]) if actor == worker
                       and row[2] is not None and row[2].get("version") == version),
                      submission)
        verified = _verified(receipts)
        if verified is None:
            problems.append(f"task {task}'s receipts cannot be read")
            continue
        journaled = newest[2].get("verified", [])
        if journaled != verified:
            problems.append(f"task {task}'s receipts mark evidence {verified} verified;"
                            f" {newest[1]} (journal row {newest[0]}) sealed {journaled}")
    return problems


def _verified(receipts: object) -> list[int] | None:
    """Which pieces of evidence (by place, from 0) the stored receipts mark verified, as
    the journal seals them; None for receipts that are no JSON array."""
    if receipts is None:
        return []
    try:
        kept = json.loads(str(receipts))
    except ValueError:
        return None
    if not isinstance(kept, list):
        return None
    return [i for i, r in enumerate(kept) if isinstance(r, dict) and r.get("verified") is True]


def _short(digest: object) -> str:
    """A draft's digest as a finding names it: enough to tell drafts apart."""
    return f"{digest[:16]}..." if isinstance(digest, str) and len(digest) > 16 else repr(digest)


def _usage(conn: apsw.Connection) -> Finding:
    """Every usage row reports whole numbers from 0 to the bound a write may report
    (``MAX_USAGE``): a negative or huge row would lower or break a day's budget."""
    problems = [f"update {seq} of task {task} reports {tokens!r} tokens and {usd!r}"
                " usd_micros" for seq, task, tokens, usd in conn.execute(
        "SELECT seq, task, tokens, usd_micros FROM updates"
        f" WHERE {usage_out_of_bounds('tokens', True)}"
        f" OR {usage_out_of_bounds('usd_micros', True)} ORDER BY seq")]
    counted = conn.execute("PRAGMA user_version").get >= LINKS_SINCE
    if counted:  # a count behind the journal would let a budget's agent claim past it
        problems += [f"{agent}'s claims since {day} are counted as {n}; the journal has"
                     f" {found}" for agent, day, n, found in conn.execute(
            "SELECT c.agent, c.day, c.claims, (SELECT count(*) FROM journal j"
            " WHERE j.actor = c.agent AND j.at >= c.day AND j.from_state = 'routed'"
            " AND j.to_state = 'accepted') AS found FROM claim_counts c"
            " WHERE c.claims IS NOT found ORDER BY c.agent")]
    return Finding("usage", not problems, "every usage row is within its bounds"
                   + (", each day's claims counted as the journal has them" if counted
                      else "") if not problems else _examples(problems))


UNSIGNED = "imported_unsigned"
"""The meta row of a store imported from an export no known key's checkpoint vouched for:
when, and why not (JSON). No write removes it."""
META_KEYS = frozenset({"store_id", "owner", META_KEY, TASKS_FROM, UNSIGNED})
"""Every key of ``meta`` hivelite writes: the store's identity and owner, the name of its
chain key, the journal's first row chained per task, an unsigned import's record."""


def unsigned_at(value: str | None) -> str | None:
    """When an unsigned import's record says it was made (its text, if it reads no time)."""
    if value is None:
        return None
    try:
        found = json.loads(value)
    except ValueError:
        return value[:80]
    return str(found.get("at")) if isinstance(found, dict) else value[:80]
TIME = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]*Z"
"""A time as hivelite writes it (RFC 3339, UTC), as a ``GLOB``; SQLite must read it too."""


def _values(conn: apsw.Connection) -> Finding:
    """The rows' own values are ones hivelite writes: ``meta`` holds only its keys; no
    row names a row that is not there (SQLite's ``foreign_key_check``: a row written with
    the checks switched off); each task's priority is one of the protocol's, its labels a
    JSON array of text, its times RFC 3339 in UTC."""
    problems = [f"meta holds a key hivelite never writes ({str(key)[:80]!r})"
                for (key,) in conn.execute("SELECT key FROM meta ORDER BY key")
                if key not in META_KEYS]
    problems += [f"a row of {table} names a row of {parent} that is not there"
                 f" (row {rowid})" for table, rowid, parent, _ in conn.execute(
                     "PRAGMA foreign_key_check")]
    problems += [f"task {number}'s {what}" for number, what in conn.execute(
        "SELECT number, CASE"
        f" WHEN priority NOT IN {_listed(PRIORITIES)} THEN 'priority is not one of the"
        " protocol''s'"
        " WHEN NOT json_valid(labels) OR json_type(labels) IS NOT 'array'"
        "  OR EXISTS (SELECT 1 FROM json_each(labels) WHERE type IS NOT 'text')"
        "  THEN 'labels are not a JSON array of text'"
        " WHEN NOT (created_at GLOB ?1 AND updated_at GLOB ?1)"
        "  OR julianday(created_at) IS NULL OR julianday(updated_at) IS NULL"
        "  THEN 'times are not RFC 3339 times in UTC' END AS what"
        " FROM tasks WHERE what IS NOT NULL ORDER BY number", (TIME,))]
    return Finding("stored values", not problems, "meta holds hivelite's keys alone, every"
                   " row's references are there, and every task's priority, labels and"
                   " times are ones hivelite writes" if not problems else _examples(problems))


def _listed(values: Iterable[str]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


CHAIN_SINCE = 4
"""The schema version that made the journal a hash chain."""


def _chain(conn: apsw.Connection) -> Finding:
    """:func:`_chain_walk`, saying also, for good, that the store was imported from an
    export no signature vouched for (``hivelite import --unsigned``)."""
    found = _chain_walk(conn)
    record = conn.execute("SELECT value FROM meta WHERE key = ?", (UNSIGNED,)).get
    if record is None:
        return found
    return Finding(found.check, found.ok, f"{found.detail}; imported unsigned at"
                   f" {unsigned_at(str(record))}: no signature vouched for the history it"
                   " came with", {**(found.data or {}), "imported_unsigned": True})


def _chain_walk(conn: apsw.Connection) -> Finding:
    """Every journal row's hash follows from the row before it, the first from the store's
    identity, and (given the owner's key, :mod:`.keys`) every row the key seals carries its
    MAC: without the key the chain is checked for consistency only, and the detail says
    so. The detail names the head to note elsewhere (``--head`` checks it later)."""
    if conn.execute("PRAGMA user_version").get < CHAIN_SINCE:
        return Finding("hash chain", True, "the store predates the chain (schema"
                       f" {CHAIN_SINCE}); hivelite chains its journal when it next opens it")
    identity = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").get
    if identity is None:
        return Finding("hash chain", False, "the store has no identity (meta.store_id) to"
                       " start its chain from")
    named = conn.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).get
    try:
        key = load_key(str(identity))
    except StoreError as exc:
        return Finding("hash chain", False, exc.message)
    problems: list[str] = []
    broken = 0
    split = tasks_from(conn)
    walk = Walk(identity, key, split)
    for seq, why in walk.problems(conn.execute(
            f"SELECT seq, hash, {CONTENT} FROM journal ORDER BY seq")):
        broken += 1
        if len(problems) <= SHOWN:
            problems.append(f"journal row {seq} {why}")
    tip = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    rows = conn.execute("SELECT count(*) FROM journal").get
    if split is not None and tip is not None and walk.head is not None and not broken:
        tip = walk.head  # chained per task: the head is the last row's global link
    head = f"{tip[0]}:{tip[1]}" if tip is not None else None
    if key is not None and named is not None and named != key.fingerprint:
        problems.insert(0, f"the store names the chain key {named}; {key.path} holds"
                        f" {key.fingerprint}")
        broken += 1
    elif key is not None and named is None and tip is not None and tip[0] >= key.keyed_from:
        problems.insert(0, f"the store no longer names its chain key ({key.path})")
        broken += 1
    data = {"rows": rows, "head": head, "store_id": identity, "keyed": key is not None,
            "key": str(key.path) if key is not None else None, "named": named is not None}
    if broken:
        more = f" (and {broken - SHOWN} more)" if broken > SHOWN else ""
        return Finding("hash chain", False, "; ".join(problems[:SHOWN]) + more, data)
    if key is None and named is None and conn.execute(
            "SELECT 1 FROM journal WHERE length(hash) > ? LIMIT 1", (HASH_CHARS,)).get:
        return Finding("hash chain", False, "the journal's rows are sealed with a key, but"
                       " the store names none, and no key of its identity"
                       f" ({identity}) is here: its identity or its key's name was"
                       " rewritten", data)
    if key is None:
        where = key_path(str(identity))
        why = (f"the owner's key is not at {where}" if named is not None
               else "the store has no chain key yet (its next write makes one)")
        return Finding("hash chain", True, f"{rows} journal row(s) chained from the store's"
                       f" identity{_per_task(conn, split)}, checked for consistency only:"
                       f" {why}; head"
                       f" {head or '(empty)'}", data)
    return Finding("hash chain", True, f"{rows} journal row(s) chained from the store's"
                   f" identity{_per_task(conn, split)}, sealed with the owner's key from row"
                   f" {key.keyed_from} on; head {head or '(empty)'}", data)


def _per_task(conn: apsw.Connection, split: int | None) -> str:
    """How a journal chained per task is chained, for the chain's finding."""
    if split is None:
        return ""
    seals = conn.execute("SELECT count(*) FROM journal WHERE task IS NULL AND reason = ?"
                         " AND seq >= ?", (SEAL, split)).get
    return (f" (from row {split} on, each task's rows a chain of their own, and {seals}"
            " seal(s) over every row before them, each agreeing)")


def tasks_from(conn: apsw.Connection) -> int | None:
    """The first journal row chained per task (:mod:`.chain`), or None: one chain."""
    value = conn.execute("SELECT value FROM meta WHERE key = ?", (TASKS_FROM,)).get
    return int(value) if isinstance(value, str) and value.isdigit() else None


def links_at(conn: apsw.Connection, seqs: Iterable[int]) -> dict[int, str]:
    """The global link of each journal row of ``seqs`` that the journal has: its hash, or
    in a store chained per task from there on, the link computed from every row up to
    it (:class:`.chain.Walk`), as a head names it."""
    wanted = sorted(set(seqs))
    split = tasks_from(conn)
    if split is None or not wanted or wanted[-1] < split:
        found = {}
        for seq in wanted:
            row = conn.execute("SELECT hash FROM journal WHERE seq = ?", (seq,)).fetchone()
            if row is not None:
                found[seq] = row[0]
        return found
    identity = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").get
    walk = Walk(identity, None, split, wanted)
    for _ in walk.problems(conn.execute(
            f"SELECT seq, hash, {CONTENT} FROM journal WHERE seq <= ? ORDER BY seq",
            (wanted[-1],))):
        pass  # (the chain check names what is wrong; here only the links count)
    return walk.links


def _witnessed(conn: apsw.Connection, older_copy: bool, place: str | None = None
               ) -> Finding:
    """The journal holds every head witnessed outside the file (:func:`.keys.witness`: at
    each backup, export, server start and sound doctor): a row witnessed and since changed
    means a rewritten history, even one whose every hash and MAC was recomputed; a
    witnessed row that is gone means the newest rows were dropped (or an older copy put in
    the store's place; ``older_copy`` says the file is one, a backup)."""
    identity = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").get
    recorded = place_of(place) if place is not None else None
    if recorded is not None and recorded != identity and key_path(recorded).exists():
        return Finding("witnesses", False, f"the store at {place} was store {recorded} (its"
                       f" key is {key_path(recorded)}); it now says it is {identity}: the"
                       " file was replaced by another store's, or its identity rewritten")
    seen = witnesses(str(identity)) if identity is not None else []
    cosigned = cosigned_heads(str(identity)) if identity is not None else []
    if any(c.problem for c in cosigned):
        return Finding("witnesses", False, _examples(c.problem for c in cosigned
                                                     if c.problem))
    seen += [Witness(c.seq, c.hash, format_ts(datetime.fromtimestamp(c.at, UTC)), c.by)
             for c in cosigned]
    if not seen:
        return Finding("witnesses", True, "no head of this store was witnessed outside the"
                       " file yet (backup, export, serve and doctor witness one)")
    last = conn.execute("SELECT coalesce(max(seq), 0) FROM journal").get
    problems = []
    missing = [w for w in seen if w.seq > last]
    links = links_at(conn, (w.seq for w in seen if w.seq <= last))
    for w in seen:
        if w.seq > last:
            continue
        if links.get(w.seq) != w.hash:
            problems.append(f"journal row {w.seq} is not the one {w.by} witnessed at {w.at}:"
                            " the history up to it was rewritten")
    if missing and not older_copy:
        newest = max(missing, key=lambda w: w.seq)
        problems.append(f"the journal ends at row {last}, but {newest.by} witnessed row"
                        f" {newest.seq} at {newest.at}: the newest rows were dropped, or an"
                        " older copy took the store's place (doctor --older-copy for a"
                        " backup; doctor --restored when you put it there on purpose)")
    held = len(seen) - len(missing)
    return Finding("witnesses", not problems, f"the journal holds the {held} head(s)"
                   " witnessed outside the file" + (f"; {len(missing)} witnessed after this"
                                                    " copy was taken" if missing else "")
                   if not problems else _examples(problems))


def _head(conn: apsw.Connection, head: str) -> Finding:
    """The journal still holds a head noted earlier (``SEQ:HASH``): nothing up to it was
    rewritten, even with every later hash recomputed."""
    seq_text, _, wanted = head.partition(":")
    if not seq_text.isdigit() or not wanted:
        return Finding("head", False, f"{head!r} is not a head as doctor prints it (SEQ:HASH)")
    found = links_at(conn, (int(seq_text),)).get(int(seq_text))
    if found is None:
        return Finding("head", False, f"the journal has no row {seq_text}: rows were removed")
    if found != wanted:
        return Finding("head", False, f"journal row {seq_text} now has hash {found}, not"
                       f" {wanted}: the history up to it was rewritten")
    return Finding("head", True, f"the journal still holds {head}: nothing up to it was"
                   " rewritten")


REQUESTS_SINCE = 6
"""The schema version that keeps first answers for retries."""


def _answers(conn: apsw.Connection) -> Finding:
    """Each first answer kept for retries (``requests``) carries the seal of the owner's
    key: an answer rewritten behind hivelite's back would be replayed to the caller."""
    if conn.execute("PRAGMA user_version").get < REQUESTS_SINCE:
        return Finding("kept answers", True, "the store predates kept answers (schema 6)")
    identity = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").get
    try:
        key = load_key(str(identity)) if identity is not None else None
    except StoreError as exc:
        return Finding("kept answers", False, exc.message)
    return answers_finding(conn.execute("SELECT caller, id, verb, digest, answer, at FROM"
                                        " requests ORDER BY at, caller, id").fetchall(), key)


def answers_finding(rows: Sequence[Sequence[Any]], key: ChainKey | None) -> Finding:
    """The kept answers' finding on their rows (caller, id, verb, digest, answer, at), on
    either engine (PostgreSQL's are read from the server: an export leaves them out)."""
    if key is None:
        return Finding("kept answers", True, f"{len(rows)} kept answer(s), not checked:"
                       " no owner's key here")
    problems = [f"the answer kept for {caller}'s request {rid!r} ({verb}, {at}) is not sealed"
                " with the owner's key" for caller, rid, verb, kept, answer, at in rows
                if not unsealed(key, *(str(v) for v in (caller, rid, verb, kept, answer,
                                                          at)))[1]]
    return Finding("kept answers", not problems, f"{len(rows)} kept answer(s), each sealed"
                   " with the owner's key" if not problems else _examples(problems))


WATCHES_SINCE = 22
"""The schema version that seals each watch."""


def _watches(conn: apsw.Connection) -> Finding:
    """Each watch carries the seal of the owner's key: one handed to another caller,
    extended, answered or made outside hivelite would be answered as its caller's."""
    if conn.execute("PRAGMA user_version").get < WATCHES_SINCE:
        return Finding("watches", True, f"the store predates sealed watches (schema"
                       f" {WATCHES_SINCE})")
    identity = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").get
    try:
        key = load_key(str(identity)) if identity is not None else None
    except StoreError as exc:
        return Finding("watches", False, exc.message)
    return watches_finding(conn.execute(f"SELECT {WATCH}, seal FROM watches ORDER BY"
                                        " created_at, id").fetchall(), key)


def watches_finding(rows: Sequence[Sequence[Any]], key: ChainKey | None) -> Finding:
    """The watches' finding on their rows (their columns, then the seal), on either
    engine (PostgreSQL's are read from the server: an export leaves them out)."""
    if key is None:
        return Finding("watches", True, f"{len(rows)} watch(es), not checked: no owner's"
                       " key here")
    problems = [f"watch {str(row[0])[:80]!r} of {row[1]} is not sealed with the owner's key"
                " (written outside hivelite)" for row in rows
                if not read_watch(row, key).sealed]
    return Finding("watches", not problems, f"{len(rows)} watch(es), each sealed with the"
                   " owner's key" if not problems else _examples(problems))


CHECKS: tuple[tuple[str, Callable[[apsw.Connection], Finding]], ...] = (
    ("schema", _schema), ("hash chain", _chain), ("replay", _replay), ("actors", _actors),
    ("tokens", _tokens),
    ("leases and results", _leases_and_results), ("queue", _queue),
    ("controls", _controls), ("policy", _policy), ("results", _results), ("usage", _usage),
    ("kept answers", _answers), ("watches", _watches), ("stored values", _values))
"""The checks after SQLite's own, in order (each named as progress tells it)."""


SKIPPED = {"tokens": "fencing tokens"}
"""A check's finding by another name than its progress note."""


def _run(name: str, check: Callable[[apsw.Connection], Finding], conn: apsw.Connection,
         before: list[Finding]) -> Finding:
    """One check; a check that cannot run on this schema (a table or column renamed or
    dropped: ``no such table``) is reported as skipped, failed, naming why, never as a
    traceback. The schema check (in ``before``) names what differs."""
    schema = next((f for f in before if f.check == "schema"), None)
    if schema is not None and schema.data and "unknown_version" in schema.data:
        return Finding(SKIPPED.get(name, name), False, "skipped: the schema version is not"
                       " one this hivelite knows", {"skipped": True})
    try:
        return check(conn)
    except apsw.SQLError as exc:
        why = ("the schema is not hivelite's (see the schema check)"
               if schema is not None and not schema.ok else "the schema is not hivelite's")
        return Finding(SKIPPED.get(name, name), False, f"skipped: {why}: {exc}",
                       {"skipped": True})


def diagnose(conn: apsw.Connection, *, quick: bool = False, head: str | None = None,
             older_copy: bool = False, progress: Progress | None = None,
             place: str | None = None) -> list[Finding]:
    """Every check, in order; the store is sound when each is ``ok``. Read in one snapshot.
    A file SQLite cannot read at all fails the first check, and the others are not run.
    ``older_copy``: the file is a backup, so heads witnessed after it are not missing
    rows; ``place``: where the store lives (its identity is held to the one last written
    there). ``progress`` hears the checks done, each named as it starts."""
    pragma = "quick_check" if quick else "integrity_check"
    told = progress or (lambda done, total, note="": None)
    total = 2 + len(CHECKS) + (head is not None)
    inside = conn.in_transaction  # an import's own, before it commits
    try:
        if not inside:
            conn.execute("BEGIN")
        try:
            told(0, total, pragma)
            findings = [_integrity(conn, quick)]
            if findings[0].ok:  # on a damaged file the other checks would read garbage
                for done, (name, check) in enumerate(CHECKS, start=1):
                    told(done, total, name)
                    findings.append(_run(name, check, conn, findings[1:]))
                told(total - 1 - (head is not None), total, "witnesses")
                findings.append(_run("witnesses",
                                     lambda c: _witnessed(c, older_copy, place),
                                     conn, findings[1:]))
                if head is not None:
                    told(total - 1, total, "head")
                    findings.append(_run("head", lambda c: _head(c, head), conn,
                                         findings[1:]))
            told(total, total)
            return findings
        finally:
            if not inside and conn.in_transaction:
                conn.execute("COMMIT")
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        return [Finding(pragma, False, f"SQLite cannot read the file: {exc}")]


def _open_readonly(path: Path) -> apsw.Connection:
    """The store file opened read-only, its header read. A reader of a WAL store needs
    its ``-shm`` file, which SQLite creates beside the store: in a folder (or on a
    filesystem) that cannot be written it cannot, so a store with no ``-wal`` to read
    (every write is in the file itself) is opened as an immutable file instead, and one
    whose ``-wal`` holds writes is ``store_readonly``, saying what to do."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.execute("PRAGMA application_id").fetchall()  # opens the file, and its -shm
        return conn
    except (apsw.CantOpenError, apsw.ReadOnlyError) as exc:
        conn.close()
        wal = Path(f"{path}-wal")
        if wal.is_file() and wal.stat().st_size > 0:
            raise StoreReadonly(
                f"doctor cannot read {path} here: {wal.name} beside it holds writes not yet"
                f" in the file, and SQLite must create {path.name}-shm to read them, in a"
                f" folder it cannot write ({exc}). Copy {path.name} and {wal.name} to a"
                " writable folder and run doctor on the copy; nothing was written") from exc
    except BaseException:
        conn.close()
        raise
    immutable = apsw.Connection(f"file:{quote(str(path.absolute()))}?immutable=1",
                                flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    try:
        immutable.execute("PRAGMA application_id").fetchall()
    except BaseException:
        immutable.close()
        raise
    return immutable


def restore(conn: apsw.Connection, at: str | None) -> None:
    """Record that the owner put this copy in the store's place on purpose (a backup
    restored, rows dropped and written again): the heads witnessed before are history."""
    identity = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").get
    tip = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    if identity is not None and tip is not None:
        witness(str(identity), f"{tip[0]}:{tip[1]}", at or "", RESTORED)


def witness_sound(findings: list[Finding], at: str | None) -> None:
    """A doctor's witness: when every finding is ``ok`` and ``at`` is given, the head the
    hash chain check read is witnessed (at ``at``) beside the owner's key, for later
    doctors to hold the store to. Nothing is witnessed for an unsound store."""
    chain = next((f for f in findings if f.check == "hash chain"), None)
    if (at is not None and all(f.ok for f in findings) and chain and chain.data
            and chain.data.get("head")):
        witness(str(chain.data["store_id"]), str(chain.data["head"]), at, "doctor")


def key_held(findings: list[Finding], no_key: bool) -> list[Finding]:
    """``findings`` with the hash chain's failing when the store names the owner's key and
    the key is not here: without it a forged row cannot be told from the owner's, so a
    check of consistency only is what the owner asks for (``no_key``), never what doctor
    passes by itself."""
    if no_key:
        return findings
    return [Finding(f.check, False, f"{f.detail}. Without the key a forged row cannot be"
                    " told from the owner's: put the key file there (or set"
                    " $HIVELITE_KEYS to its folder), or run doctor --no-key to check"
                    " consistency only", f.data)
            if f.check == "hash chain" and f.ok and f.data and f.data.get("named")
            and not f.data.get("keyed") else f for f in findings]


def diagnose_file(path: Path, *, quick: bool = False, head: str | None = None,
                  older_copy: bool = False, progress: Progress | None = None,
                  at: str | None = None, restored: bool = False,
                  no_key: bool = False) -> list[Finding]:
    """:func:`diagnose` on a store file, opened read-only: nothing is migrated, swept or
    written, so a damaged or tampered store can be looked at as it is. A sound store's
    head is witnessed (at ``at``) beside its key, for later doctors to hold it to. A store
    that names the owner's key fails without it, unless ``no_key`` (:func:`key_held`)."""
    if not path.is_file():
        raise StoreError("no_store", f"no store at {path}; create it first (hivelite --db"
                         f" {path} init, or Hive.open(path))")
    with path.open("rb") as handle:
        if handle.read(len(SQLITE_HEADER)) not in (SQLITE_HEADER, b""):
            return [Finding("integrity_check", False, f"{path} is not an SQLite database")]
    try:
        conn = _open_readonly(path)
    except apsw.BusyError as exc:
        raise StoreBusy("busy", f"another program holds {path} locked ({exc}); try again"
                        ) from exc
    except (apsw.CorruptError, apsw.NotADBError, apsw.SQLError) as exc:
        return [Finding("integrity_check", False, f"SQLite cannot read the file: {exc}")]
    except apsw.Error as exc:
        return [Finding("integrity_check", False, f"SQLite cannot open the file: {exc}")]
    try:
        app_id = conn.execute("PRAGMA application_id").get
        if app_id != APPLICATION_ID:
            tables = {str(r[0]) for r in conn.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table'")}
            if tables >= {"meta", "moves", "tasks", "packets", "journal"}:
                return [Finding("integrity_check", False, f"{path} has hivelite's tables but"
                                f" not its application id ({app_id}): its header is damaged")]
            return [Finding("integrity_check", False,
                            f"{path} is not a hivelite store (another program's database)")]
        if restored:  # the owner says so: the journal as it stands is the yardstick
            restore(conn, at)
        found = diagnose(conn, quick=quick, head=head, older_copy=older_copy,
                         progress=progress, place=os.path.realpath(path))
    except apsw.BusyError as exc:
        raise StoreBusy("busy", f"another program holds {path} locked ({exc}); try again"
                        ) from exc
    except (apsw.CorruptError, apsw.NotADBError, apsw.SQLError) as exc:
        # a header SQLite refuses ("unsupported file format"), a schema it cannot parse
        return [Finding("integrity_check", False, f"SQLite cannot read the file: {exc}")]
    finally:
        conn.close()
    found = key_held(found, no_key)
    witness_sound(found, at)
    return found


def journal_heads(path: Path, seqs: Iterable[int]) -> tuple[dict[int, str], tuple[int, str],
                                                            bool]:
    """A store file's journal as a witness reads it (:mod:`.cosign`): the hash at each of
    ``seqs`` (as doctor and the witnesses read a head), its head, and whether its chain is
    consistent from its start (a witness has no chain key)."""
    if not path.is_file():
        raise StoreError("no_store", f"no store at {path}: a witness reads the store it"
                         " cosigns for")
    conn = _open_readonly(path)
    try:
        found = links_at(conn, list(seqs))
        last = conn.execute("SELECT max(seq) FROM journal").get
        tip = (int(last), str(links_at(conn, (int(last),))[int(last)])) if last else (0, "")
    finally:
        conn.close()
    chain = next((f for f in diagnose_file(path, no_key=True) if f.check == "hash chain"),
                 None)
    return ({int(k): str(v) for k, v in found.items()}, tip,
            chain is not None and chain.ok)
