"""``doctor``: is this store file sound? Each check says what it looked at and what it found.

The checks read only: the file's own integrity (SQLite's ``integrity_check``, or the
faster ``quick_check``), the schema against the frozen migrations (a dropped or edited
trigger shows here), the journal's hash chain (and, given one, a head noted earlier), and
the protocol's invariants: every task's state is the replay of
its journal, every claim in the journal took the next fencing token, a live lease only on a
claimed state, a result from ``verifying`` on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import apsw

from ..core.errors import StoreError
from ..core.progress import Progress
from ..core.protocol import MOVES_BY_PAIR, Actor, State
from .chain import CONTENT, broken_links
from .migrations import APPLICATION_ID, MIGRATIONS, SCHEMA_DIGEST, SCHEMA_VERSION
from .schema import instance_key

SQLITE_HEADER = b"SQLite format 3\x00"

SCHEMA_QUERY = ("SELECT type, name, tbl_name, sql FROM sqlite_schema"
                " WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name")
MOVES_QUERY = "SELECT * FROM moves ORDER BY number"
SHOWN = 5
"""How many examples a failed check names."""

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
    return (tuple(tuple(r) for r in conn.execute(SCHEMA_QUERY)),
            tuple(tuple(r) for r in conn.execute(MOVES_QUERY)))


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
    problem = schema_problem(conn)
    version = conn.execute("PRAGMA user_version").get
    return Finding("schema", problem is None,
                   f"tables, indexes, triggers and moves are migration {version}'s"
                   if problem is None else problem)


def _replay(conn: apsw.Connection) -> Finding:
    """Every task's state and ``waiting_on`` is where its journal's moves lead."""
    tasks = {r[0]: (r[1], r[2]) for r in conn.execute(
        "SELECT number, state, waiting_on FROM tasks")}
    reached: dict[int, tuple[str | None, str | None]] = {}
    problems = []
    for task, seq, from_state, to_state, waiting_on in conn.execute(
            "SELECT task, seq, from_state, to_state, waiting_on FROM journal"
            " WHERE task IS NOT NULL ORDER BY task, seq"):
        state = reached.get(task, (None, None))[0]
        if from_state != state:
            problems.append(f"task {task}: journal row {seq} starts from {from_state},"
                            f" not {state}")
        if from_state != to_state or task not in reached:
            reached[task] = (to_state, waiting_on)
    for number, (state, waiting_on) in sorted(tasks.items()):
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


def _actors(conn: apsw.Connection) -> Finding:
    """Each move was made by one who may make it (the protocol's actors): the owner's
    decisions by the store's owner, the gate's and the guard's by them, a claim, a resume
    and the holder's moves by the task's assignee, a completion or a decline by the owner
    or an agent other than the assignee (a confirmation, a verifier's rejection)."""
    owner = conn.execute("SELECT value FROM meta WHERE key = 'owner'").get
    problems = []
    for seq, task, actor, source, target, assignee in conn.execute(
            "SELECT j.seq, j.task, j.actor, j.from_state, j.to_state, t.assignee"
            " FROM journal j JOIN tasks t ON t.number = j.task"
            " WHERE j.from_state IS NOT NULL AND j.from_state <> j.to_state ORDER BY j.seq"):
        move = MOVES_BY_PAIR.get((State(source), State(target)))
        if move is None:  # replay names it
            continue
        if not any(_may(kind, actor, owner, assignee) for kind in move.actors):
            problems.append(f"journal row {seq} (task {task}, {move.name}) was made by"
                            f" {actor}, who may not make it")
    return Finding("actors", not problems, "every move was made by one who may make it"
                   if not problems else _examples(problems))


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
    dependencies and of failed attempts, as its dependencies and its journal say (a task
    closed before the queue existed keeps the counts it had then: none)."""
    if conn.execute("PRAGMA user_version").get < 5:
        return Finding("queue", True, "the store predates the queue (schema 5)")
    problems = [f"task {n} counts {w} open dependencies; it has {o}" for n, w, o in
                conn.execute(
        "SELECT t.number, t.waits, (SELECT count(*) FROM deps d JOIN tasks o"
        " ON o.number = d.on_task WHERE d.task = t.number AND o.state IS NOT 'completed')"
        " AS open FROM tasks t WHERE t.state NOT IN ('cancelled', 'completed', 'rejected')"
        " AND t.waits IS NOT open")]
    problems += [f"task {n} counts {a} failed attempts; its journal has {f}" for n, a, f in
                 conn.execute(
        "SELECT t.number, t.attempts, (SELECT count(*) FROM journal j WHERE j.task = t.number"
        " AND j.from_state = 'verifying' AND j.to_state = 'routed' AND json_extract(CASE WHEN"
        " json_valid(j.detail) THEN j.detail END, '$.outcome') = 'failed') AS failed"
        " FROM tasks t WHERE t.state NOT IN ('cancelled', 'completed', 'rejected')"
        " AND t.attempts IS NOT failed")]
    return Finding("queue", not problems, "open dependencies and failed attempts are counted"
                   " right" if not problems else _examples(problems))


AUTHORITY_SINCE = 7
"""The schema version that keeps the owner's controls and budgets."""
TOKENS_SINCE = 8
"""The schema version that keeps access tokens."""


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
    """The store's policy, required plugins, budgets and tokens are what the owner's
    journaled changes made them: a row changed by raw SQL (a requirement dropped, a budget
    lifted, the mode switched, a token slipped in) has no journal row to match."""
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

    compare("policy", {str(k): v for k, v in conn.execute("SELECT key, value FROM policy")},
            dict(policy))
    compare("required plugin", {str(n): (k, d, _canonical(json.loads(st))) for n, k, d, st in
                                conn.execute("SELECT name, kind, digest, settings"
                                             " FROM required_plugins")}, dict(required))
    compare("budget of", {str(a): (t, k, u) for a, t, k, u in conn.execute(
        "SELECT agent, tasks, tokens, usd_micros FROM budgets")}, dict(budgets))
    if conn.execute("PRAGMA user_version").get >= TOKENS_SINCE:
        issued: dict[str, tuple[object, ...]] = {}
        for text, reason in conn.execute(
                "SELECT detail, reason FROM journal WHERE task IS NULL AND reason IN"
                " ('token add', 'token revoke') ORDER BY seq"):
            d = json.loads(text)
            if reason == "token add":
                issued[d["token"]] = (d["agent"], d["instance"], ",".join(d["rights"]),
                                      d["expires_at"], False)
            elif d["token"] in issued:
                issued[d["token"]] = (*issued[d["token"]][:4], True)
        compare("token", {str(i): (a, n, r, e, v is not None) for i, a, n, r, e, v in
                          conn.execute("SELECT id, agent, instance, rights, expires_at,"
                                       " revoked_at FROM tokens")}, dict(issued))
    return Finding("policy", not problems, f"{len(policy)} policy value(s),"
                   f" {len(required)} required plugin(s), {len(budgets)} budget(s), each as"
                   " the owner's journal has it" if not problems else _examples(problems))


CHAIN_SINCE = 4
"""The schema version that made the journal a hash chain."""


def _chain(conn: apsw.Connection) -> Finding:
    """Every journal row's hash follows from the row before it, the first from the store's
    identity; the detail names the head to note elsewhere (``--head`` checks it later)."""
    if conn.execute("PRAGMA user_version").get < CHAIN_SINCE:
        return Finding("hash chain", True, "the store predates the chain (schema"
                       f" {CHAIN_SINCE}); hivelite chains its journal when it next opens it")
    identity = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").get
    if identity is None:
        return Finding("hash chain", False, "the store has no identity (meta.store_id) to"
                       " start its chain from")
    problems: list[str] = []
    broken = 0
    for seq, why in broken_links(identity, conn.execute(
            f"SELECT seq, hash, {CONTENT} FROM journal ORDER BY seq")):
        broken += 1
        if len(problems) <= SHOWN:
            problems.append(f"journal row {seq} {why}")
    tip = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    rows = conn.execute("SELECT count(*) FROM journal").get
    head = f"{tip[0]}:{tip[1]}" if tip is not None else None
    data = {"rows": rows, "head": head, "store_id": identity}
    if broken:
        more = f" (and {broken - SHOWN} more)" if broken > SHOWN else ""
        return Finding("hash chain", False, "; ".join(problems[:SHOWN]) + more, data)
    return Finding("hash chain", True, f"{rows} journal row(s) chained from the store's"
                   f" identity; head {head or '(empty)'}", data)


def _head(conn: apsw.Connection, head: str) -> Finding:
    """The journal still holds a head noted earlier (``SEQ:HASH``): nothing up to it was
    rewritten, even with every later hash recomputed."""
    seq_text, _, wanted = head.partition(":")
    if not seq_text.isdigit() or not wanted:
        return Finding("head", False, f"{head!r} is not a head as doctor prints it (SEQ:HASH)")
    found = conn.execute("SELECT hash FROM journal WHERE seq = ?", (int(seq_text),)).fetchone()
    if found is None:
        return Finding("head", False, f"the journal has no row {seq_text}: rows were removed")
    if found[0] != wanted:
        return Finding("head", False, f"journal row {seq_text} now has hash {found[0]}, not"
                       f" {wanted}: the history up to it was rewritten")
    return Finding("head", True, f"the journal still holds {head}: nothing up to it was"
                   " rewritten")


CHECKS: tuple[tuple[str, Callable[[apsw.Connection], Finding]], ...] = (
    ("schema", _schema), ("hash chain", _chain), ("replay", _replay), ("actors", _actors),
    ("tokens", _tokens),
    ("leases and results", _leases_and_results), ("queue", _queue),
    ("controls", _controls), ("policy", _policy))
"""The checks after SQLite's own, in order (each named as progress tells it)."""


def diagnose(conn: apsw.Connection, *, quick: bool = False, head: str | None = None,
             progress: Progress | None = None) -> list[Finding]:
    """Every check, in order; the store is sound when each is ``ok``. Read in one snapshot.
    A file SQLite cannot read at all fails the first check, and the others are not run.
    ``progress`` hears the checks done, each named as it starts."""
    pragma = "quick_check" if quick else "integrity_check"
    told = progress or (lambda done, total, note="": None)
    total = 1 + len(CHECKS) + (head is not None)
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
                    findings.append(check(conn))
                if head is not None:
                    told(total - 1, total, "head")
                    findings.append(_head(conn, head))
            told(total, total)
            return findings
        finally:
            if not inside and conn.in_transaction:
                conn.execute("COMMIT")
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        return [Finding(pragma, False, f"SQLite cannot read the file: {exc}")]


def diagnose_file(path: Path, *, quick: bool = False, head: str | None = None,
                  progress: Progress | None = None) -> list[Finding]:
    """:func:`diagnose` on a store file, opened read-only: nothing is migrated, swept or
    written, so a damaged or tampered store can be looked at as it is."""
    if not path.is_file():
        raise StoreError("no_store", f"no store at {path}; create it first (hivelite --db"
                         f" {path} init, or Hive.open(path))")
    with path.open("rb") as handle:
        if handle.read(len(SQLITE_HEADER)) not in (SQLITE_HEADER, b""):
            return [Finding("integrity_check", False, f"{path} is not an SQLite database")]
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as exc:
        return [Finding("integrity_check", False, f"SQLite cannot open the file: {exc}")]
    try:
        if conn.execute("PRAGMA application_id").get != APPLICATION_ID:
            return [Finding("integrity_check", False,
                            f"{path} is not a hivelite store (another program's database)")]
        return diagnose(conn, quick=quick, head=head, progress=progress)
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        return [Finding("integrity_check", False, f"SQLite cannot read the file: {exc}")]
    finally:
        conn.close()
