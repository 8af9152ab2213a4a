"""PostgreSQL's rules, guarded against the role that owns them.

On SQLite a dropped or edited trigger changes the schema text, which every open compares
with the migrations'. On PostgreSQL the role that owns the tables can switch every rule
off without touching a table (``ALTER TABLE … DISABLE TRIGGER USER``), drop a rule
function (``DROP FUNCTION … CASCADE`` takes its trigger along), or replace its body
(``CREATE OR REPLACE FUNCTION``). So a store checks its own rules in the catalogs:

- **in full** (every trigger present, enabled and on its table, each calling its function
  under its ``WHEN``, each function's body the one :mod:`.pg_schema` generates, nothing
  added) when it opens,
  and again at most once a second while it writes (``FULL_EVERY_S``);
- **cheaply, before every write**: in the write's first round trip, a stamp of the
  triggers on the store's tables (their state and row versions) and of the tables
  themselves, compared with the stamp the last full check saw. A different stamp means a
  full check now.

A failed check refuses every write with ``invalid_input/schema_tampered``, as SQLite's
does, naming what differs. Tables owned by a role nobody logs in as, with hivelite's role
granted only what it needs (``docs/postgres.md``), keep the rules out of its reach in the
first place.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from .pg_schema import HELPERS, rule_functions, rules
from .pg_schema import TABLES as TABLES_SQL
from .schema import move_rows

FULL_EVERY_S = 1.0
"""How often at most a writing store checks its rules in full (function bodies too)."""

_HELPER = re.compile(r"CREATE FUNCTION (\w+)\((.*?)AS \$\$(.*?)\$\$;", re.DOTALL)

RULES = """
SELECT c.relname, t.tgname, t.tgenabled::text, p.proname, md5(p.prosrc),
       pg_get_triggerdef(t.oid)
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_proc p ON p.oid = t.tgfoid
WHERE c.relnamespace = %(schema)s::regnamespace AND NOT t.tgisinternal
ORDER BY c.relname, t.tgname
"""
FUNCTIONS = """
SELECT p.proname, md5(p.prosrc), coalesce(array_to_string(p.proconfig, ';'), ''),
       p.prosecdef, l.lanname, p.proisstrict, p.provolatile::text, p.oid
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = %(schema)s::regnamespace ORDER BY p.proname
"""
KINDS = """
SELECT c.relname, c.relpersistence::text,
       (SELECT string_agg(i.inhrelid::regclass::text, ', ' ORDER BY i.inhrelid::regclass::text)
        FROM pg_inherits i WHERE i.inhparent = c.oid)
FROM pg_class c
WHERE c.relnamespace = %(schema)s::regnamespace AND c.relkind IN ('r', 'p')
ORDER BY c.relname
"""
"""Each table's persistence (``p``: logged; ``u``: unlogged, which a crash empties; ``t``:
temporary), and the tables that inherit from it (whose rows a read of it returns and no
rule of its guards)."""
REWRITES = """
SELECT c.relname, r.rulename FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
WHERE c.relnamespace = %(schema)s::regnamespace AND r.rulename <> '_RETURN'
UNION ALL
SELECT c.relname, 'row security' FROM pg_class c
WHERE c.relnamespace = %(schema)s::regnamespace
  AND (c.relrowsecurity OR c.relforcerowsecurity)
UNION ALL
SELECT c.relname, 'policy ' || p.polname FROM pg_policy p JOIN pg_class c
    ON c.oid = p.polrelid
WHERE c.relnamespace = %(schema)s::regnamespace
ORDER BY 1, 2
"""
SHAPE = """
SELECT 'column', c.relname, a.attname,
       format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' not null'
                                                  ELSE '' END
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relnamespace = %(schema)s::regnamespace AND c.relkind IN ('r', 'p', 'v')
  AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint', c.relname, k.conname, pg_get_constraintdef(k.oid)
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
WHERE c.relnamespace = %(schema)s::regnamespace
UNION ALL
SELECT 'index', c.relname, i.relname, pg_get_indexdef(i.oid)
FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
WHERE c.relnamespace = %(schema)s::regnamespace
ORDER BY 1, 2, 3
"""
SHAPE_DIGEST = "3f3acef0b1a9a6d8e3614b0e0b814f2bbf030b95cf57d456497ea605739f1bba"
"""The digest of :data:`SHAPE` on a store of this version, its schema's name taken out
(``tests/test_postgres_guard`` holds it to a new store's): a column renamed, added,
dropped or retyped, a constraint or an index dropped or changed, changes it."""
TABLES = """
SELECT c.oid, c.relname FROM pg_class c
WHERE c.relnamespace = %(schema)s::regnamespace AND c.relkind IN ('r', 'p')
"""


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def _plain(text: str, schema: str) -> str:
    """A catalog's SQL text with its spacing and the store's schema name taken out."""
    plain = re.sub(r"\s+", " ", text).strip()
    return plain.replace(f'"{schema}".', "").replace(f"{schema}.", "") if schema else plain


@dataclass(frozen=True)
class Expected:
    """The rules a current store has: each trigger's table, definition and function body."""

    triggers: dict[str, tuple[str, str, str]]
    """Trigger name: (table, its definition as ``pg_get_triggerdef`` gives it, its schema
    taken out, and the md5 of its function's body); the function has its name."""
    helpers: dict[str, str]
    """Helper function name: md5 of its body."""
    tables: frozenset[str]
    whens: dict[str, str] = field(default_factory=dict)
    """Trigger name: its ``WHEN`` condition as :mod:`.pg_schema` writes it (its definition
    above has none: the server writes it back in its own words, :func:`when_clauses`)."""
    kinds: dict[str, tuple[bool, str]] = field(default_factory=dict)
    """Function name (rule or helper): whether it is ``STRICT``, and its volatility as
    ``pg_proc.provolatile`` says it (``i``, ``s`` or ``v``). A rule helper made strict
    answers NULL for a NULL argument without running; one made immutable may be folded
    into a plan once; either changes what a rule decides without touching its body."""


@cache
def expected() -> Expected:
    """What :mod:`.pg_schema` makes (the migrations are held to it by the tests)."""
    made = rule_functions(rules())
    found = _HELPER.findall(HELPERS)
    helpers = {name: _md5(body) for name, _, body in found}
    kinds = {name: _kind(header) for name, header, _ in found}
    kinds.update({name: (False, "v") for name, _, _ in made})  # (trigger_sql's header)
    return Expected(
        {name: (rule.table, _plain(f"CREATE TRIGGER {name} {rule.timing} {rule.event} ON"
                                   f" {rule.table} FOR EACH {rule.each} EXECUTE FUNCTION"
                                   f" {name}()", ""), _md5(body))
         for name, rule, body in made}, helpers, frozenset(rule.table for _, rule, _ in made),
        {name: rule.when for name, rule, _ in made if rule.when is not None}, kinds)


def _kind(header: str) -> tuple[bool, str]:
    """A ``CREATE FUNCTION``'s strictness and volatility, from the words of its header."""
    words = set(re.findall(r"[A-Z]+", header))
    strict = "STRICT" in words or "NULL ON NULL INPUT" in header
    return strict, "i" if "IMMUTABLE" in words else "s" if "STABLE" in words else "v"


_WHEN = re.compile(r" FOR EACH ROW (WHEN \(.*\)) EXECUTE FUNCTION ", re.DOTALL)
_DEPARSED: dict[int, dict[str, str]] = {}


def when_clauses(conn: Any) -> dict[str, str]:
    """Each rule's ``WHEN (…)`` as this server writes it back (``pg_get_triggerdef``), to
    hold the store's triggers to.

    PostgreSQL keeps a ``WHEN`` parsed and writes it back in its own words (casts,
    parentheses, ``= ANY (ARRAY[…])``), which may differ between its versions; so the
    rules' conditions are given to this server, on scratch tables of the same columns
    (``pg_temp``, hivelite's own ``TABLES``, not the store's, which a tamperer could
    change) in a subtransaction rolled back: nothing stays. Once a process and server
    version. Raises ``psycopg.Error`` when the role cannot make temporary tables."""
    version = int(conn.info.server_version)
    if version not in _DEPARSED:
        _DEPARSED[version] = _deparse(conn, expected())
    return _DEPARSED[version]


def _columns(table: str) -> str:
    block = re.search(rf"CREATE TABLE {table}\((.*?)\n\);", TABLES_SQL, re.DOTALL)
    if block is None:
        raise ValueError(f"no table {table} in pg_schema.TABLES")
    return ", ".join(f'"{m[1]}" {m[2]}' for m in re.finditer(
        r"^\s+(\w+) (text|bigint)\b", block[1], re.MULTILINE))


def _deparse(conn: Any, want: Expected) -> dict[str, str]:
    import psycopg

    found: dict[str, str] = {}
    made = ["CREATE FUNCTION pg_temp.hl_when() RETURNS trigger LANGUAGE plpgsql"
            " AS $$BEGIN RETURN NULL; END $$"]
    made += [f"CREATE TEMP TABLE hl_when_{table} ({_columns(table)})"
             for table in sorted({want.triggers[name][0] for name in want.whens})]
    for name, when in want.whens.items():
        table, definition, _ = want.triggers[name]
        made.append(f"{definition.partition(' ON ')[0]} ON pg_temp.hl_when_{table} FOR EACH"
                    f" ROW WHEN ({when}) EXECUTE FUNCTION pg_temp.hl_when()")
    with conn.transaction():
        conn.execute(";\n".join(made).encode("utf-8"))  # one round trip
        for name, written in conn.execute(
                "SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c"
                " ON c.oid = t.tgrelid WHERE c.relnamespace = pg_my_temp_schema()"
                " AND c.relname LIKE 'hl\\_when\\_%'").fetchall():
            match = _WHEN.search(str(written))
            if match is not None:
                found[str(name)] = _plain(match[1], "")
        raise psycopg.Rollback()
    return found


def problems(conn: Any, schema: str) -> list[str]:
    """What differs between the store's rules in the catalogs and the code's (none: [])."""
    import psycopg

    want = expected()
    args = {"schema": schema}
    found: list[str] = []
    try:
        whens = when_clauses(conn) if want.whens else {}
    except psycopg.Error as exc:  # (a role that may not make temporary tables)
        whens = {}
        found.append(f"the triggers' WHEN conditions cannot be checked ({exc})")
    tables = {str(r[1]) for r in conn.execute(TABLES, args).fetchall()}
    found += [f"table {t} is missing" for t in sorted(want.tables - tables)]
    for table, persistence, children in conn.execute(KINDS, args).fetchall():
        if persistence != "p":
            found.append(f"table {table} is {_PERSISTENCE.get(persistence, persistence)}"
                         " (a crash or a restart of the server empties it)")
        if children:
            found.append(f"table {table} has tables inheriting from it ({children}), whose"
                         " rows a read of it returns and no rule of its guards")
    have: dict[str, tuple[str, str, str, str, str]] = {
        str(r[1]): (str(r[0]), str(r[2]), str(r[3]), str(r[4]), _plain(str(r[5]), schema))
        for r in conn.execute(RULES, args).fetchall()}
    for name, (table, definition, body) in sorted(want.triggers.items()):
        got = have.get(name)
        if got is None:
            found.append(f"trigger {name} is missing (its function dropped?)")
            continue
        on, enabled, function, digest, made = got
        if enabled != "O":
            found.append(f"trigger {name} is disabled ({_ENABLED.get(enabled, enabled)})")
        if on != table or function != name:
            found.append(f"trigger {name} is on {on} calling {function}, not on {table}"
                         f" calling {name}")
            continue
        if name in want.whens:
            definition = definition.replace(
                " EXECUTE FUNCTION ", f" {whens.get(name, 'WHEN (?)')} EXECUTE FUNCTION ", 1)
        if made != definition:
            found.append(f"trigger {name} is not defined as hivelite made it ({made})")
        if digest != body:
            found.append(f"function {name}'s body is not the one hivelite made")
    found += [f"trigger {name} on {have[name][0]} is not hivelite's"
              for name in sorted(set(have) - set(want.triggers))]
    settings = {f"search_path={schema}, pg_temp",  # (a keyword as a schema's name is
                f'search_path="{schema}", pg_temp'}  # kept quoted)
    functions = {str(r[0]): (str(r[1]), str(r[2]), bool(r[3]), str(r[4]), bool(r[5]),
                             str(r[6])) for r in conn.execute(FUNCTIONS, args).fetchall()}
    for name in sorted(set(want.triggers) | set(want.helpers)):
        got_function = functions.get(name)
        if got_function is None:
            if name in want.helpers:
                found.append(f"function {name} is missing")
            continue
        digest, config, definer, language, strict, volatility = got_function
        if name in want.helpers and digest != want.helpers[name]:
            found.append(f"function {name}'s body is not the one hivelite made")
        if (config not in settings or definer or language != "plpgsql"
                or (strict, volatility) != want.kinds.get(name, (False, "v"))):
            found.append(f"function {name} does not run as hivelite made it (settings"
                         f" {config or 'none'}{', security definer' if definer else ''},"
                         f"{' strict,' if strict else ''}"
                         f" {_VOLATILITY.get(volatility, volatility)}, {language})")
    found += [f"{what} on {table} is not hivelite's" for table, what in
              conn.execute(REWRITES, args).fetchall()]
    if shape_digest(conn, schema) != SHAPE_DIGEST:
        found.append("the tables are not the ones hivelite made (a column, constraint or"
                     " index renamed, added, dropped or changed)")
    if "moves" in tables and moves_of(conn, schema) != [tuple(r) for r in move_rows()]:
        found.append("the moves table differs from the protocol's 22 moves")
    return found


def moves_of(conn: Any, schema: str) -> list[tuple[object, ...]]:
    """The store's ``moves`` rows, which its trigger keeps fixed (an owner who sets the
    trigger aside, edits a move and puts the trigger back leaves no other trace)."""
    table = '"' + schema.replace('"', '""') + '".moves'
    return [tuple(r) for r in conn.execute(
        "SELECT number, name, from_state, from_waiting, to_state, to_waiting"
        f" FROM {table} ORDER BY number").fetchall()]


def shape_digest(conn: Any, schema: str) -> str:
    """The digest of the store's tables: columns, constraints, indexes (:data:`SHAPE`)."""
    rows = [[str(v) if i < 3 else _plain(str(v), schema) for i, v in enumerate(r)]
            for r in conn.execute(SHAPE, {"schema": schema}).fetchall()]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


_ENABLED = {"D": "DISABLE TRIGGER", "R": "ENABLE REPLICA TRIGGER", "A": "ENABLE ALWAYS"}
_PERSISTENCE = {"u": "unlogged", "t": "temporary"}
_VOLATILITY = {"i": "immutable", "s": "stable", "v": "volatile"}


def stamp_sql(table_oids: Iterable[int], function_oids: Iterable[int] = ()) -> str:
    """One query whose answer changes whenever a trigger on these tables is disabled,
    dropped, added or replaced, a table renamed or altered (made unlogged, given a table
    that inherits from it), or one of these functions replaced or altered (its body, its
    settings, security definer, strict, its volatility): cheap enough for every write. A
    changed catalog row gets a newer ``xmin`` (transaction ids only grow), so the sums of
    the rows' ``xmin`` grow with any change, whatever else it does; a function dropped
    and made again has another oid, which finds no row.

    Each table is found by its oid and its triggers by ``tgrelid``, each function by its
    oid (the catalogs' indexes): a join on ``pg_class`` would scan it whole, and its cost
    would grow with every other table in the database (about 0.4 ms a write with twenty
    stores in one)."""
    oids = ", ".join(str(int(o)) for o in sorted(table_oids)) or "0"
    functions = ", ".join(str(int(o)) for o in sorted(function_oids)) or "0"
    return ("SELECT count(*), sum(x.n), sum(x.xs), bool_and(x.enabled), sum(x.f),"
            " sum(c.xmin::text::bigint), (SELECT count(p.xmin) || ':'"
            " || sum(p.xmin::text::bigint) FROM unnest(ARRAY[" + functions + "]::oid[])"
            " f(oid) LEFT JOIN LATERAL (SELECT p.xmin FROM pg_proc p WHERE p.oid = f.oid"
            " OFFSET 0) p ON true) FROM unnest(ARRAY[" + oids + "]::oid[]) o(oid)"
            " CROSS JOIN LATERAL (SELECT c.xmin FROM pg_class c WHERE c.oid = o.oid"
            " OFFSET 0) c CROSS JOIN LATERAL (SELECT count(*) n, sum(t.xmin::text::bigint)"
            " xs, bool_and(t.tgenabled = 'O') enabled, sum(t.tgfoid::bigint) f"
            " FROM pg_trigger t WHERE t.tgrelid = o.oid AND NOT t.tgisinternal) x")


@dataclass
class Guard:
    """One store's watch on its rules: the stamp of the last full check, and when."""

    schema: str
    problem: str | None = None
    stamp: tuple[Any, ...] | None = None
    sql: str = "SELECT NULL"
    checked_at: float = field(default=-1e9)

    def check(self, conn: Any) -> str | None:
        """A full check now; remembers its stamp when the rules hold. Returns the
        problem (None: the rules are hivelite's)."""
        found = problems(conn, self.schema)
        self.problem = "; ".join(found) if found else None
        self.checked_at = time.monotonic()
        if self.problem is None:
            args = {"schema": self.schema}
            oids = [int(r[0]) for r in conn.execute(TABLES, args)]
            self.sql = stamp_sql(oids, [int(r[7]) for r in conn.execute(FUNCTIONS, args)])
            self.stamp = tuple(conn.execute(self.sql).fetchone() or ())
        else:
            self.stamp = None
        return self.problem

    def before_write(self, conn: Any, stamp: tuple[Any, ...]) -> str | None:
        """Given the stamp the write's first round trip read: the problem, if any (a full
        check when the stamp moved or a second has passed)."""
        if (self.problem is None and stamp == self.stamp
                and time.monotonic() - self.checked_at < FULL_EVERY_S):
            return None
        return self.check(conn)


__all__ = ["FULL_EVERY_S", "Guard", "expected", "problems", "shape_digest", "stamp_sql"]
