"""``doctor`` holds the rows' own values to the ones hivelite writes (issue 48, item 6): an
extra ``meta`` key, a row naming a row that is not there (written with the foreign-key
checks off), a task's labels that are not JSON, a time that is no time. Each is written
here with the rules that would refuse it set aside, then put back."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from hivelite import Hive, ManualClock
from hivelite.store.doctor import diagnose_file

from . import pg
from .conftest import START, own_task


def written(path: Path, *statements: str) -> None:
    """``statements`` run on the file with every trigger set aside and the foreign-key
    checks off, the triggers put back after."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA foreign_keys = OFF")
    triggers = conn.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'trigger'"
                            " ORDER BY rowid").fetchall()
    with conn:
        for name, _ in triggers:
            conn.execute(f"DROP TRIGGER {name}")
        for statement in statements:
            conn.execute(statement)
        for _, sql in triggers:
            conn.execute(sql)
    conn.close()


CHANGES = {
    "an extra meta key": ("INSERT INTO meta(key, value) VALUES ('evil', '1')",
                          "meta holds a key hivelite never writes ('evil')"),
    "an orphan packet": ("INSERT INTO packets(task, body) VALUES (999, '{}')",
                         "a row of packets names a row of tasks that is not there"),
    "labels that are not JSON": ("UPDATE tasks SET labels = 'not json' WHERE number = 1",
                                 "task 1's labels are not a JSON array of text"),
    "a time that is no time": ("UPDATE tasks SET updated_at = 'garbage' WHERE number = 1",
                               "task 1's times are not RFC 3339 times in UTC"),
    "a priority of no one's": ("UPDATE tasks SET priority = 'whenever' WHERE number = 1",
                               "task 1's priority is not one of the protocol's"),
}


@pytest.mark.parametrize("change", CHANGES)
def test_doctor_names_a_value_hivelite_never_writes(tmp_path: Path, change: str) -> None:
    path = tmp_path / "s.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
    assert all(f.ok for f in diagnose_file(path))
    statement, said = CHANGES[change]
    written(path, statement)
    found = {f.check: f for f in diagnose_file(path)}["stored values"]
    assert not found.ok and said in found.detail, found


def test_doctor_on_postgresql_names_labels_that_are_not_json() -> None:
    """PostgreSQL's rows are copied to a scratch file, where the same check reads them."""
    if not pg.available():
        pytest.skip("no PostgreSQL server")
    from hivelite.store.pg_doctor import diagnose_url

    schema = pg.new_schema()
    try:
        with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
            own_task(hive)
        with pg.connect() as conn:
            conn.execute("SET session_replication_role = replica")  # the rules aside
            conn.execute(f"UPDATE {schema}.tasks SET labels = 'not json' WHERE number = 1")
        found = {f.check: f for f in diagnose_url(pg.store_url(schema))}
        assert not all(f.ok for f in found.values())
        values = found.get("stored values")
        assert values is not None and not values.ok, found
        assert "task 1's labels are not a JSON array of text" in values.detail
    finally:
        pg.drop(schema)
