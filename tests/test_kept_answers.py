"""First answers kept for retries, by day (migration 14, SQLite): one B-tree keyed by the
UTC day, the caller and the request id, read by its key, and pruned from its front a batch
a write; the records an older store kept move across."""

from __future__ import annotations

from pathlib import Path

import apsw

from hivelite import Hive
from hivelite.core.clock import ManualClock
from hivelite.store.sqlite import PRUNE_BATCH, day_of

from .conftest import CODER, START, own_task
from .downgrade import to_version
from .test_claims import fence

DAY = 24 * 60


def kept(path: Path) -> list[tuple[int, str, str]]:
    conn = apsw.Connection(str(path))
    try:
        return [(int(d), str(c), str(i)) for d, c, i in conn.execute(
            "SELECT day, caller, id FROM requests ORDER BY day, id")]
    finally:
        conn.close()


def test_a_record_is_keyed_by_its_day_and_read_by_its_key(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        hive.claim(CODER, own_task(hive), request_id="first")
        plan = " ".join(str(r[3]) for r in hive.store.conn.execute(  # type: ignore[attr-defined]
            "EXPLAIN QUERY PLAN SELECT caller, id, verb, digest, answer, at FROM requests"
            " WHERE day IN (?, ?) AND caller = ? AND id = ? ORDER BY day DESC LIMIT 1",
            (1, 2, "a", "b")))
    assert kept(path) == [(day_of(START), "ana/coder", "first")]
    assert day_of(START) == 20789  # 2026-12-02, days after 1970-01-01
    assert "USING PRIMARY KEY (day=? AND caller=? AND id=?)" in plan


def test_a_retry_on_the_next_day_still_gets_its_answer(tmp_path: Path) -> None:
    clock = ManualClock("2026-12-02T23:59:00.000Z")
    with Hive.open(tmp_path / "s.db", owner="ana", clock=clock) as hive:
        number = own_task(hive)
        lease = hive.claim(CODER, number, request_id="late", minutes=15)
        clock.advance(minutes=2)  # past midnight: the record is on the day before
        assert hive.claim(CODER, number, request_id="late", minutes=15) == lease


def test_expired_records_leave_a_batch_a_write(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    clock = ManualClock(START)
    count = PRUNE_BATCH + PRUNE_BATCH // 2
    with Hive.open(path, owner="ana", clock=clock) as hive:
        number = own_task(hive)
        for n in range(count):
            lease = hive.claim(CODER, number, request_id=f"c{n}")
            hive.release(CODER, number, **fence(lease))
        clock.advance(minutes=2 * DAY)  # two days on: the first day's records are expired
        lease = hive.claim(CODER, number, request_id="now-1")
        assert len(kept(path)) == count - PRUNE_BATCH + 1
        hive.release(CODER, number, **fence(lease), request_id="now-2")
        assert kept(path) == [(day_of(START) + 2, "ana/coder", "now-1"),
                              (day_of(START) + 2, "ana/coder", "now-2")]


def test_records_kept_by_an_older_store_move_across(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        number = own_task(hive)
        lease = hive.claim(CODER, number, request_id="before")
    conn = apsw.Connection(str(path))
    with conn:
        to_version(conn, 13)
    assert next(iter(conn.execute("PRAGMA table_info(requests)")))[1] == "caller"
    conn.close()
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        assert hive.claim(CODER, number, request_id="before") == lease  # still answers
    assert kept(path) == [(day_of(START), "ana/coder", "before")]
