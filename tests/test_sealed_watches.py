"""A watch is sealed with the owner's key (issue 48, item 6): the store's rules keep its
caller, token, task and expiry as made and an answer once kept (``tests/test_attacks.py``);
its seal shows what the rules cannot tell from hivelite's own write, a first answer or a
whole watch written outside hivelite, which is then never answered, and ``doctor`` names
it on both engines. PostgreSQL's doctor reads the kept answers and the watches from the
server, which an export leaves out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hivelite import Hive, ManualClock
from hivelite.core.errors import StoreError

from . import pg, rawsql
from .conftest import CODER, OWNER, START, own_task

ENGINES = ("sqlite", "postgres")


@pytest.fixture(params=ENGINES)
def target(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[tuple[str, str]]:
    """A store on each engine: its engine, and what opens it."""
    if request.param == "postgres":
        if not pg.available():
            pytest.skip("no PostgreSQL server")
        schema = pg.new_schema()
        yield "postgres", pg.store_url(schema)
        pg.drop(schema)
    else:
        yield "sqlite", str(tmp_path / "s.db")


def raw(engine: str, where: str, sql: str) -> None:
    """``sql`` run as the store's holder, with no hivelite in between."""
    if engine == "postgres":
        schema = where.rsplit("schema=", 1)[1]
        with pg.connect() as conn:
            conn.execute(f"SET search_path = {schema}")
            conn.execute(sql)
    else:
        conn = rawsql.connect(Path(where))
        try:
            conn.execute(sql)
        finally:
            conn.close()


def doctor(engine: str, where: str) -> dict[str, Any]:
    if engine == "postgres":
        from hivelite.store.pg_doctor import diagnose_url

        return {f.check: f for f in diagnose_url(where)}
    from hivelite.store.doctor import diagnose_file

    return {f.check: f for f in diagnose_file(Path(where))}


def test_a_watch_answered_outside_hivelite_is_never_answered(target: tuple[str, str]) -> None:
    engine, where = target
    with Hive.open(where, owner="ana", clock=ManualClock(START)) as hive:
        kept = hive.watch(CODER, "handoff", number=own_task(hive))
        answered = hive.watch(CODER, "next")
        hive.settle_watch(CODER, answered.id, answer='{"number": 1}')
        assert hive.watched(CODER, answered.id).answer == '{"number": 1}'  # sealed by hivelite
        assert doctor(engine, where)["watches"].ok
        raw(engine, where, f"UPDATE watches SET answer = '{{\"number\": 7}}'"
                           f" WHERE id = '{kept.id}'")
        with pytest.raises(StoreError) as refused:
            hive.watched(CODER, kept.id)
        assert refused.value.reason == "watch_tampered"
        assert hive.watched(CODER, answered.id).answer == '{"number": 1}'  # the other stands
    found = doctor(engine, where)["watches"]
    assert not found.ok and kept.id[:20] in found.detail, found


def test_a_watch_made_outside_hivelite_is_never_answered(target: tuple[str, str]) -> None:
    engine, where = target
    with Hive.open(where, owner="ana", clock=ManualClock(START)) as hive:
        number = own_task(hive)
        forged = "hlw_" + "x" * 32
        raw(engine, where, "INSERT INTO watches(id, caller, token, verb, number, asked, answer,"
            " created_at, updated_at, expires_at, poll_ms, cancelled_at) VALUES"
            f" ('{forged}', 'ana/coder', NULL, 'handoff', {number}, '{{}}', NULL, '{START}',"
            f" '{START}', '2026-12-03T09:00:00.000Z', 2000, NULL)")
        with pytest.raises(StoreError) as refused:
            hive.watched(CODER, forged)
        assert refused.value.reason == "watch_tampered"
    assert not doctor(engine, where)["watches"].ok


def test_postgresql_s_doctor_names_a_kept_answer_rewritten() -> None:
    """An export leaves the kept answers out, so doctor's copy of the rows never saw them:
    PostgreSQL's doctor reads them from the server."""
    if not pg.available():
        pytest.skip("no PostgreSQL server")
    schema = pg.new_schema()
    where = pg.store_url(schema)
    try:
        with Hive.open(where, owner="ana", clock=ManualClock(START)) as hive:
            hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
                         packet={"task": "Write the parser", "deliverable_type": "code",
                                 "acceptance_criteria": ["tests pass"]}, request_id="req-1")
        assert doctor("postgres", where)["kept answers"].ok
        raw("postgres", where, "UPDATE requests SET answer = replace(answer, '\"number\":1',"
                               " '\"number\":2')")
        found = doctor("postgres", where)["kept answers"]
        assert not found.ok and "'req-1'" in found.detail, found
    finally:
        pg.drop(schema)
