"""Who decides, and what decides, against raw SQL on both engines (issue 30, parts 2 and 3):
the owner's moves by the owner, a decline by the owner or a counted rejection, a result
changed only by its holder or its worker's journaled amend, a merge recorded once and
journaled, usage bounded, the owner's tables written by the owner. One list of cases,
run on SQLite and on PostgreSQL; each refusal names its reason and leaves every row as it
was. Raw SQL that names the owner, or writes the journal row first, gets through: that is
what the keyed journal chain (part 1) and ``doctor`` are for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hivelite import Caller, ForbiddenRight, Hive, InvalidInput, InvalidState, ManualClock
from hivelite.core.errors import from_trigger
from hivelite.core.protocol import MAX_USAGE, State

from . import pg, rawsql
from .conftest import CODER, GUEST, OWNER, REVIEWER, START, held_task, own_task

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]
AT = "2026-12-02T10:00:00.000Z"
TESTER = Caller.agent("ana/tester", "tablet")
"""A second independent reviewer, on a third instance."""
ENGINES = ("sqlite", "postgres")


def scenario(hive: Hive) -> dict[str, int]:
    """The tasks and rows the attacks aim at, made by the library: a routed task, a claimed
    one, one held for the owner, one awaiting a decision (no verdict yet), a completed one
    with no merge yet, a cancelled one with a result, and a live hold."""
    n: dict[str, int] = {"routed": own_task(hive)}
    n["claimed"] = own_task(hive)
    hive.claim(CODER, n["claimed"])
    n["held"] = held_task(hive)
    for name in ("approval", "completed"):
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)
        n[name] = number
    hive.verify(REVIEWER, n["completed"], verdict="accept")
    n["cancelled"] = own_task(hive)
    lease = hive.claim(CODER, n["cancelled"])
    hive.submit(CODER, n["cancelled"], lease_id=lease.lease_id, token=lease.fencing_token,
                summary="could not", evidence=EVIDENCE, outcome="failed")
    hive.cancel(OWNER, n["cancelled"], reason="not needed")
    n["hold"] = hive.hold(OWNER, agent="ana/tester").id
    assert hive.get(n["approval"]).task.state is State.approval
    assert hive.get(n["completed"]).task.state is State.completed
    assert hive.get(n["cancelled"]).task.state is State.cancelled
    return n


class Raw:
    """A plain connection to one store on either engine, no hivelite in between."""

    def __init__(self, engine: str, where: str) -> None:
        self.engine = engine
        if engine == "sqlite":
            self.conn: Any = rawsql.connect(Path(where))
        else:
            self.conn = pg.connect()
            self.conn.execute(f"SET search_path = {where}")
        self.where = where

    def execute(self, sql: str) -> None:
        self.conn.execute(sql)

    def value(self, sql: str) -> Any:
        row = self.conn.execute(sql).fetchone()
        return None if row is None else row[0]

    def snapshot(self) -> dict[str, list[tuple[object, ...]]]:
        return (rawsql.snapshot(self.conn) if self.engine == "sqlite"
                else pg.snapshot(self.where))

    def refused(self, expected: str, sql: str) -> BaseException:
        """``sql`` fails with ``expected`` (``code:reason``) and changes nothing."""
        before = self.snapshot()
        with pytest.raises(Exception) as info:
            self.conn.execute(sql)
        assert expected in str(info.value), f"expected {expected!r}, got {info.value!r}"
        assert self.snapshot() == before
        return info.value

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(params=ENGINES)
def store(request: pytest.FixtureRequest, tmp_path: Path
          ) -> Iterator[tuple[Raw, dict[str, int]]]:
    """The scenario's store on one engine, reached through a raw connection."""
    if request.param == "postgres" and not pg.available():
        pytest.skip("no PostgreSQL server")
    where = str(tmp_path / "s.db") if request.param == "sqlite" else pg.new_schema()
    target = where if request.param == "sqlite" else pg.store_url(where)
    with Hive.open(target, owner="ana", clock=ManualClock(START)) as hive:
        numbers = scenario(hive)
    raw = Raw(request.param, where)
    yield raw, numbers
    raw.close()
    if request.param == "postgres":
        pg.drop(where)


def journal_row(task: int, state: str, actor: str, reason: str, detail: str) -> str:
    """A raw journal row of an event (no move) on ``task``: the store takes it, as it takes
    any row that tells the truth about its task's state."""
    return ("INSERT INTO journal(task, at, actor, from_state, to_state, reason, detail)"
            f" VALUES ({task}, '{AT}', '{actor}', '{state}', '{state}', '{reason}',"
            f" '{detail}')")


LIFT = "UPDATE controls SET lifted_at = '" + AT + "', lifted_by = '{who}' WHERE id = {hold}"
USAGE = ("INSERT INTO updates(task, at, actor, summary, tokens, usd_micros)"
         " VALUES ({claimed}, '" + AT + "', 'ana/coder', 'spent', {tokens}, {usd})")
SWAPPED = '{"summary": "swapped", "evidence": [], "provenance": "agent_generated"}'
SWAP = ("UPDATE results SET body = '" + SWAPPED.replace("{", "{{").replace("}", "}}")
        + "', version = version + {by} WHERE task = {task}")


def swap(task: str, by: int = 1) -> str:
    """The attack that swaps the result of the case's ``task`` and raises its version."""
    return SWAP.replace("{by}", str(by)).replace("{task}", "{" + task + "}")


CASES: list[tuple[str, list[str], str, str]] = [
    # (id, statements run first, the attack, the refusal)
    # -- part 2: the owner's moves are the owner's ---------------------------------------
    ("agent cancels a routed task", [],
     "UPDATE tasks SET state = 'cancelled', actor = 'ana/coder' WHERE number = {routed}",
     "forbidden_right:not_owner"),
    ("agent cancels its claimed task", [],
     "UPDATE tasks SET state = 'cancelled', actor = 'ana/coder', lease_id = NULL,"
     " lease_holder = NULL, lease_instance = NULL, lease_session = NULL,"
     " lease_expires = NULL WHERE number = {claimed}", "forbidden_right:not_owner"),
    ("cancel with no actor", [],
     "UPDATE tasks SET state = 'cancelled', actor = NULL WHERE number = {routed}",
     "forbidden_right:not_owner"),
    ("guest approves its held task", [],
     "UPDATE tasks SET state = 'routed', waiting_on = NULL, actor = 'guest/scout'"
     " WHERE number = {held}", "forbidden_right:not_owner"),
    ("gate approves a held task", [],
     "UPDATE tasks SET state = 'routed', waiting_on = NULL, actor = 'gate'"
     " WHERE number = {held}", "forbidden_right:not_owner"),
    ("guest denies a held task", [],
     "UPDATE tasks SET state = 'rejected', waiting_on = NULL, actor = 'guest/scout'"
     " WHERE number = {held}", "forbidden_right:not_owner"),
    ("worker declines its own result", [],
     "UPDATE tasks SET state = 'routed', actor = 'ana/coder' WHERE number = {approval}",
     "forbidden_right:not_decided"),
    ("reviewer with no verdict declines", [],
     "UPDATE tasks SET state = 'routed', actor = 'ana/reviewer' WHERE number = {approval}",
     "forbidden_right:not_decided"),
    ("reviewer declines after a counted accept",
     ["INSERT INTO confirmations(task, version, reviewer, instance, verdict, at, counted)"
      " VALUES ({approval}, 1, 'ana/reviewer', 'desktop', 'accept', '" + AT + "', 1)"],
     "UPDATE tasks SET state = 'routed', actor = 'ana/reviewer' WHERE number = {approval}",
     "forbidden_right:not_decided"),
    ("reviewer declines with an uncounted reject",
     ["INSERT INTO confirmations(task, version, reviewer, instance, verdict, reason, at,"
      " counted, why) VALUES ({approval}, 1, 'guest/scout', 'elsewhere', 'reject', 'no',"
      " '" + AT + "', 0, 'another owner''s agent')"],
     "UPDATE tasks SET state = 'routed', actor = 'guest/scout' WHERE number = {approval}",
     "forbidden_right:not_decided"),
    # -- part 3: a result changes only by its holder or a journaled amend ------------------
    ("result swapped in approval", [],
     swap("approval"), "forbidden_right:amend_not_journaled"),
    ("result version raised alone", [],
     "UPDATE results SET version = version + 1 WHERE task = {approval}",
     "forbidden_right:amend_not_journaled"),
    ("result version lowered", [],
     "UPDATE results SET version = version - 1 WHERE task = {approval}",
     "invalid_state:result_version"),
    ("result swapped by two versions",
     [journal_row(0, "approval", "ana/coder", "amended", '{{"version": 3}}')],
     swap("approval", 2), "invalid_state:result_version"),
    ("result swapped after a stranger's amend row",
     [journal_row(0, "approval", "ana/reviewer", "amended", '{{"version": 2}}')],
     swap("approval"), "forbidden_right:amend_not_journaled"),
    ("result swapped after an amend row of another version",
     [journal_row(0, "approval", "ana/coder", "amended", '{{"version": 5}}')],
     swap("approval"), "forbidden_right:amend_not_journaled"),
    ("result swapped after the amend row is no longer the newest",
     [journal_row(0, "approval", "ana/coder", "amended", '{{"version": 2}}'),
      journal_row(0, "approval", "ana/reviewer", "confirmed", '{{}}')],
     swap("approval"), "forbidden_right:amend_not_journaled"),
    ("result of a cancelled task swapped", [],
     swap("cancelled"), "invalid_state:task_closed"),
    # -- part 3: a merge is recorded once, journaled, by the worker or the owner ----------
    ("merge recorded with no journal row", [],
     "UPDATE results SET merge_commit = 'abc1234', merged_by = 'ana' WHERE task = {completed}",
     "forbidden_right:merge_not_journaled"),
    ("merge recorded by the reviewer",
     [journal_row(0, "completed", "ana/reviewer", "merge_recorded",
                  '{{"merge_commit": "abc1234"}}')],
     "UPDATE results SET merge_commit = 'abc1234', merged_by = 'ana/reviewer'"
     " WHERE task = {completed}", "forbidden_right:not_submitter"),
    ("merge recorded by no one", [],
     "UPDATE results SET merge_commit = 'abc1234' WHERE task = {completed}",
     "forbidden_right:not_submitter"),
    ("merge recorded with another commit's row",
     [journal_row(0, "completed", "ana", "merge_recorded", '{{"merge_commit": "fff0000"}}')],
     "UPDATE results SET merge_commit = 'abc1234', merged_by = 'ana' WHERE task = {completed}",
     "forbidden_right:merge_not_journaled"),
    ("merge recorded on a cancelled task",
     [journal_row(0, "cancelled", "ana", "merge_recorded", '{{"merge_commit": "abc1234"}}')],
     "UPDATE results SET merge_commit = 'abc1234', merged_by = 'ana' WHERE task = {cancelled}",
     "invalid_state:not_amendable"),
    ("merger named on an open task", [],
     "UPDATE results SET merged_by = 'ana' WHERE task = {approval}",
     "invalid_state:not_amendable"),
    # -- part 3: usage is whole, non-negative and bounded ---------------------------------
    ("negative tokens", [], USAGE.replace("{tokens}", "-5").replace("{usd}", "NULL"),
     "invalid_input:invalid_usage"),
    ("negative usd_micros", [], USAGE.replace("{tokens}", "NULL").replace("{usd}", "-1"),
     "invalid_input:invalid_usage"),
    ("tokens over the bound", [],
     USAGE.replace("{tokens}", str(MAX_USAGE["tokens"] + 1)).replace("{usd}", "NULL"),
     "invalid_input:invalid_usage"),
    ("usd_micros of 2^62", [], USAGE.replace("{tokens}", "NULL").replace("{usd}", str(2**62)),
     "invalid_input:invalid_usage"),
    # -- part 2: the owner's tables are written by the owner ------------------------------
    ("control by an agent", [],
     "INSERT INTO controls(kind, agent, at, by) VALUES ('stop', 'ana/reviewer', '" + AT
     + "', 'ana/coder')", "forbidden_right:not_owner"),
    ("control lifted by an agent", [], LIFT.replace("{who}", "ana/tester"),
     "forbidden_right:not_owner"),
    ("policy by an agent", [],
     "INSERT INTO policy(key, value, at, by) VALUES ('mode', 'team', '" + AT
     + "', 'ana/coder')", "forbidden_right:not_owner"),
    ("budget by an agent", [],
     "INSERT INTO budgets(agent, tasks, at, by) VALUES ('ana/tester', 1000, '" + AT
     + "', 'ana/tester')", "forbidden_right:not_owner"),
    ("required plugin by an agent", [],
     "INSERT INTO required_plugins(name, kind, digest, settings, at, by) VALUES ('x', 'given',"
     " 'x', '{{}}', '" + AT + "', 'ana/coder')", "forbidden_right:not_owner"),
    ("token by an agent", [],
     "INSERT INTO tokens(id, agent, instance, rights, hash, created_at, by) VALUES"
     " ('feedface', NULL, NULL, 'owner', '" + "0" * 64 + "', '" + AT + "', 'ana/coder')",
     "forbidden_right:not_owner"),
]


def _task_of(case: str, numbers: dict[str, int]) -> int:
    """The task a case's journal rows are about (the one its attack names)."""
    for name in ("approval", "completed", "cancelled"):
        if "{" + name + "}" in case:
            return numbers[name]
    raise AssertionError(case)


@pytest.mark.parametrize(("before", "sql", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_raw_sql_cannot_decide_behind_the_protocols_back(
        store: tuple[Raw, dict[str, int]], before: list[str], sql: str,
        expected: str) -> None:
    raw, n = store
    for statement in before:  # (journal rows of the attacked task: the store takes them)
        raw.execute(statement.replace("(0, ", f"({_task_of(sql, n)}, ").format(**n))
    error = raw.refused(expected, sql.format(**n))
    mapped = from_trigger(error)  # the library reports it as its own error
    code, reason = expected.split(":")
    assert mapped is not None and (mapped.code, mapped.reason) == (code, reason)


def test_what_the_owner_names_gets_through(store: tuple[Raw, dict[str, int]]) -> None:
    """Raw SQL that names the owner, or writes the amend's or the merge's journal row
    first, passes the store: the database cannot tell who typed it. The journal then says
    so, and the keyed chain and ``doctor`` are what catch it."""
    raw, n = store
    raw.execute(f"UPDATE tasks SET state = 'routed', waiting_on = NULL, actor = 'ana'"
                f" WHERE number = {n['held']}")
    raw.execute(journal_row(n["approval"], "approval", "ana/coder", "amended",
                            '{"version": 2, "dismissed": 1}'))
    raw.execute(f"UPDATE results SET body = '{SWAPPED}', version = version + 1"
                f" WHERE task = {n['approval']}")
    raw.execute(journal_row(n["completed"], "completed", "ana/coder", "merge_recorded",
                            '{"merge_commit": "abc1234"}'))
    raw.execute("UPDATE results SET merge_commit = 'abc1234', merged_by = 'ana/coder'"
                f" WHERE task = {n['completed']}")
    raw.execute(LIFT.format(who="ana", hold=n["hold"]))
    assert raw.value(f"SELECT version FROM results WHERE task = {n['approval']}") == 2
    assert raw.value(f"SELECT state FROM tasks WHERE number = {n['held']}") == "routed"
    # a second merge, even journaled, is refused (the older rule names it)
    raw.execute(journal_row(n["completed"], "completed", "ana", "merge_recorded",
                            '{"merge_commit": "fff0000"}'))
    raw.refused("invalid_state:task_closed", "UPDATE results SET merge_commit = 'fff0000',"
                f" merged_by = 'ana' WHERE task = {n['completed']}")


@pytest.mark.parametrize("engine", ENGINES)
def test_every_decision_the_library_makes_passes_the_store(tmp_path: Path,
                                                           engine: str) -> None:
    """Approve, deny, cancel (from each open state), sign-off, decline, a verifier's
    rejection, two amends, a merge by the worker and one by the owner, expiry, controls
    and their lifts, usage at its bound: the new rules let every one through."""
    if engine == "postgres" and not pg.available():
        pytest.skip("no PostgreSQL server")
    schema = pg.new_schema() if engine == "postgres" else ""
    target = pg.store_url(schema) if engine == "postgres" else tmp_path / "s.db"
    clock = ManualClock(START)
    try:
        with Hive.open(target, owner="ana", clock=clock) as hive:
            hive.approve(OWNER, held_task(hive))
            hive.deny(OWNER, held_task(hive), reason="no")
            hive.cancel(OWNER, held_task(hive))

            def submitted() -> int:
                number = own_task(hive)
                lease = hive.claim(CODER, number)
                hive.submit(CODER, number, lease_id=lease.lease_id,
                            token=lease.fencing_token, summary="done", evidence=EVIDENCE,
                            tokens=MAX_USAGE["tokens"], usd_micros=0)
                return number

            signed, declined, rejected, merged = [submitted() for _ in range(4)]
            hive.amend(CODER, signed, summary="better")
            hive.amend(CODER, signed, evidence=[{"kind": "note", "summary": "again"}])
            hive.sign_off(OWNER, signed)
            hive.amend(OWNER, signed, merge_commit="abc1234")
            hive.decline(OWNER, declined, reason="not yet")
            hive.verify(REVIEWER, rejected, verdict="reject", reason="wrong")
            assert hive.get(rejected).task.state is State.routed
            hive.verify(REVIEWER, merged, verdict="accept")
            hive.amend(CODER, merged, merge_commit="def5678")
            for state in ("routed", "accepted", "working"):
                number = own_task(hive)
                if state != "routed":
                    lease = hive.claim(CODER, number)
                if state == "working":
                    hive.update(CODER, number, lease_id=lease.lease_id,
                                token=lease.fencing_token, summary="half", tokens=0,
                                usd_micros=MAX_USAGE["usd_micros"])
                hive.cancel(OWNER, number)
            expiring = own_task(hive)
            hive.claim(CODER, expiring)
            clock.advance(minutes=11)
            hive.expire(OWNER)
            stop = hive.stop(OWNER, agent=CODER.name)
            hive.lift(OWNER, stop.id)
            veto = hive.veto(OWNER, expiring, agent=CODER.name)
            hive.lift(OWNER, veto.id)
            hive.set_budget(OWNER, CODER.name, tokens=MAX_USAGE["tokens"])
            hive.set_policy(OWNER, "mode", "personal")
            hive.add_token(OWNER, TESTER.name, instance="tablet")
            task = hive.get(signed).task
            assert task.state is State.completed
            assert task.result is not None and task.result.summary == "better"
            assert [e.reason for e in hive.history(signed) if e.reason == "amended"] == [
                "amended", "amended"]
    finally:
        if engine == "postgres":
            pg.drop(schema)


def test_the_guard_refuses_first_with_its_own_reason(tmp_path: Path) -> None:
    """The database is the second line: the verbs refuse an agent's owner move before
    any write, with the precise error (``not_permitted``), and an amend or a merge by the
    wrong agent with theirs."""
    with Hive.open(tmp_path / "s.db", owner="ana", clock=ManualClock(START)) as hive:
        held = held_task(hive)
        for call in (lambda: hive.approve(GUEST, held), lambda: hive.deny(GUEST, held),
                     lambda: hive.cancel(CODER, held)):
            with pytest.raises(ForbiddenRight) as err:
                call()
            assert err.value.reason == "not_permitted"
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)
        for call in (lambda: hive.sign_off(CODER, number),
                     lambda: hive.decline(REVIEWER, number, reason="no")):
            with pytest.raises(ForbiddenRight) as err:
                call()
            assert err.value.reason == "not_permitted"
        with pytest.raises(ForbiddenRight) as err:
            hive.amend(REVIEWER, number, summary="mine now")
        assert err.value.reason == "not_submitter"
        with pytest.raises(InvalidState) as state:
            hive.amend(CODER, number, merge_commit="abc1234")
        assert state.value.reason == "not_amendable"
        with pytest.raises(InvalidInput) as bad:
            hive.update(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                        summary="x", tokens=-1)
        assert bad.value.reason == "invalid_usage"


def test_sqlite_takes_only_whole_usage(tmp_path: Path) -> None:
    """SQLite keeps any value in any column: a usage row of 1.5 tokens or of text is
    refused as well (PostgreSQL's bigint columns refuse them by type)."""
    path = tmp_path / "s.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        number = own_task(hive)
        hive.claim(CODER, number)
    conn = rawsql.connect(path)
    try:
        for value in ("1.5", "'twelve'", "x'00'"):
            rawsql.refused(conn, "invalid_input:invalid_usage",
                           USAGE.format(claimed=number, tokens=value, usd="NULL"))
    finally:
        conn.close()
