"""``python -m bench.rule_filters``: what the rules' ``WHEN`` filters save on PostgreSQL.

Migration 15 gives some rule triggers a ``WHEN`` (``pg_schema.FILTERED``), so the server
skips the rule's PL/pgSQL call for a write it could not refuse. A ``WHEN`` is not free:
the server compiles it for every statement that fires its trigger. Three stores of the
same code take turns running claim -> submit cycles, ``--block`` at a time:

- **as made**: the triggers as the migrations make them;
- **no WHEN**: every trigger made again without its ``WHEN``;
- **every WHEN**: every rule with a guard (``pg_schema.guard``) given it, not only those
  in ``FILTERED``.

The guard of all three is set aside (the last two differ from hivelite's rules on
purpose). What is read is the server's CPU for each store's connection (its backend's
``utime + stime``: the server must run on this machine), per cycle, and its ratio to
"no WHEN". Figures only: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from hivelite import Caller, Hive
from hivelite.store import pg_guard, pg_schema

from .lib import ZeroThreshold

PACKET = {"task": "Write the parser", "deliverable_type": "code",
          "acceptance_criteria": ["tests pass"]}
EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]
CODER = Caller.agent("ana/coder", "laptop")
SIDES = ("as made", "no WHEN", "every WHEN")


def _retrigger(server: str, schema: str, every: bool) -> None:
    """Each rule's trigger made again: without its ``WHEN``, or (``every``) with its guard."""
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn, conn.transaction():
        conn.execute(f'SET LOCAL search_path = "{schema}"')
        for name, rule, _ in pg_schema.rule_functions(pg_schema.rules()):
            when = getattr(rule.body, "when", None) if every else None  # (a Check's guard)
            if when is None and rule.when is None:
                continue
            conn.execute(f"DROP TRIGGER {name} ON {rule.table}")
            conn.execute(pg_schema.trigger_of(name, pg_schema.Rule(
                rule.name, rule.timing, rule.event, rule.table, rule.body, each=rule.each,
                when=when)))


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cycles(hive: Hive, count: int) -> None:
    for _ in range(count):
        lease = hive.claim_next(CODER)
        assert lease is not None
        hive.submit(CODER, lease.number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.rule_filters", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--postgres", default=os.environ.get("HIVELITE_TEST_POSTGRES", ""),
                        help="a libpq connection string (default: $HIVELITE_TEST_POSTGRES)")
    args = parser.parse_args()
    if not args.postgres:
        parser.error("no PostgreSQL server: --postgres or $HIVELITE_TEST_POSTGRES")
    params = dict(item.split("=", 1) for item in args.postgres.split())
    schemas = {side: f"bench_when_{n}_{os.getpid()}" for n, side in enumerate(SIDES)}
    hives: dict[str, Hive] = {}
    guard: Any = pg_guard.Guard
    check, before = guard.check, guard.before_write
    try:
        for side, schema in schemas.items():
            url = (f"postgresql://{params.get('user', 'postgres')}@/"
                   f"{params.get('dbname', 'postgres')}?host={params['host']}&schema={schema}")
            with Hive.open(url, owner="ana", plugins=[ZeroThreshold()]) as hive:
                me = hive.as_owner()
                for _ in range(args.items + 1):
                    hive.handoff(me, requester="ana/planner", assignee="ana/coder",
                                 project="bench", packet=PACKET)
            if side != "as made":
                _retrigger(args.postgres, schema, every=side == "every WHEN")
            guard.check = lambda self, conn: None
            guard.before_write = lambda self, conn, stamp: None
            hives[side] = Hive.open(url, plugins=[ZeroThreshold()])
            _cycles(hives[side], 1)  # the connection made, the rules' plans cached
        pids = {side: hive.store.conn.info.backend_pid  # type: ignore[attr-defined]
                for side, hive in hives.items()}
        spent = dict.fromkeys(SIDES, 0.0)
        for turn in range(args.items // args.block):
            order = SIDES[turn % 3:] + SIDES[:turn % 3]  # each side first in turn
            for side in order:
                start = _cpu(pids[side])
                _cycles(hives[side], args.block)
                spent[side] += _cpu(pids[side]) - start
        done = args.items // args.block * args.block
        print(f"claim -> submit, {done} cycles a side, {args.block} at a time; the server's"
              f" CPU per cycle, and its ratio to 'no WHEN'")
        for side in SIDES:
            print(f"{side:<12} {spent[side] / done * 1e3:7.3f} ms"
                  f" {spent[side] / spent['no WHEN']:7.3f}")
    finally:
        guard.check, guard.before_write = check, before
        for hive in hives.values():
            hive.close()
        import psycopg

        with psycopg.connect(args.postgres, autocommit=True) as conn:
            for schema in schemas.values():
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


if __name__ == "__main__":
    main()
