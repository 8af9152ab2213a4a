"""Backup, export and import (issue 14): a backup is a consistent, sound store even while
another process writes; an export imported into a new store exports the same again and
passes doctor; import refuses what it must."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from hivelite import Hive, InvalidInput, ManualClock, StoreError
from hivelite.store import SCHEMA_VERSION, SqliteStore, transfer
from hivelite.store.doctor import diagnose
from hivelite.store.transfer import FORMAT_VERSION, backup, export_lines, import_lines

from .conftest import HANG_S, START, own_task, packet
from .test_doctor import busy_store


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "source.db"
    busy_store(path)
    with Hive.open(path, clock=ManualClock(START)) as hive:  # and a dependency
        own_task(hive, packet=packet(depends_on=["1", "2"]))
    return path


def lines_of(path: Path) -> list[str]:
    conn = apsw.Connection(str(path))
    try:
        return list(export_lines(conn))
    finally:
        conn.close()


def sound(path: Path) -> None:
    conn = apsw.Connection(str(path))
    try:
        found = diagnose(conn)
    finally:
        conn.close()
    assert all(f.ok for f in found), found


def imported(lines: list[str], path: Path) -> int:
    store = SqliteStore(path)
    try:
        return import_lines(store.conn, lines)
    finally:
        store.close()


def test_an_export_round_trips(source: Path, tmp_path: Path) -> None:
    lines = lines_of(source)
    header = json.loads(lines[0])
    head, seal = header.pop("head"), header.pop("head_seal")
    signed = header.pop("signed_checkpoint")  # (tests/test_signed_checkpoints.py)
    assert header == {"format": "hivelite-export", "version": FORMAT_VERSION,
                      "schema_version": SCHEMA_VERSION}
    assert signed.startswith("hivelite/")
    journal = sum(json.loads(line)["table"] == "journal" for line in lines[1:])
    assert head.startswith(f"{journal}:")
    assert len(seal) == 32  # the head, sealed with the owner's key
    tables = {json.loads(line)["table"] for line in lines[1:]}
    assert tables == {"meta", "tasks", "deps", "packets", "checkpoints", "results",
                      "confirmations", "updates", "journal", "policy", "controls", "budgets",
                      "tokens"}
    assert imported(lines, tmp_path / "copy.db") == len(lines) - 1
    assert lines_of(tmp_path / "copy.db") == lines
    sound(tmp_path / "copy.db")


def test_import_refuses_a_store_that_is_not_empty(source: Path) -> None:
    lines = lines_of(source)
    before = source.read_bytes()
    with pytest.raises(StoreError) as err:
        imported(lines, source)
    assert err.value.reason == "store_not_empty"
    assert lines_of(source) == lines and len(before) > 0


@pytest.mark.parametrize(("mutate", "reason"), [
    (lambda ls: [json.dumps({"format": "hivelite-export", "version": FORMAT_VERSION + 1,
                             "schema_version": SCHEMA_VERSION}), *ls[1:]], "newer_export"),
    (lambda ls: [json.dumps({"format": "hivelite-export", "version": FORMAT_VERSION,
                             "schema_version": 99}), *ls[1:]], "newer_export"),
    (lambda ls: ["{}", *ls[1:]], "invalid_export"),
    (lambda ls: [ls[0], "not json", *ls[1:]], "invalid_export"),
    (lambda ls: [ls[0], json.dumps({"table": "sqlite_schema", "row": {"x": 1}})],
     "invalid_export"),
    (lambda ls: [ls[0], json.dumps({"table": "tasks", "row": {"nope": 1}})], "invalid_export"),
    (lambda ls: [ls[0], "[" * 100_000 + "]" * 100_000], "invalid_export"),
    (lambda ls: [*ls, next(line for line in ls if '"table": "tasks"' in line)],
     "invalid_export"),  # a row twice
])
def test_import_refuses_a_bad_file_and_writes_nothing(source: Path, tmp_path: Path,
                                                      mutate: object, reason: str) -> None:
    lines = mutate(lines_of(source))  # type: ignore[operator]
    target = tmp_path / "new.db"
    with pytest.raises(InvalidInput) as err:
        imported(lines, target)
    assert err.value.reason == reason
    conn = apsw.Connection(str(target))
    assert conn.execute("SELECT count(*) FROM tasks").get == 0
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'").get > 40


def test_a_backup_is_a_sound_copy(source: Path, tmp_path: Path) -> None:
    conn = apsw.Connection(str(source))
    dest = tmp_path / "backup.db"
    backup(conn, dest)
    assert dest.stat().st_mode & 0o777 == 0o600
    assert lines_of(dest) == lines_of(source)
    sound(dest)
    with pytest.raises(InvalidInput) as err:
        backup(conn, dest)
    assert err.value.reason == "backup_exists"


WRITER = """
import sys
from hivelite import Caller, Hive
owner, coder = Caller.owner("ana"), Caller.agent("ana/writer", "laptop")  # no budget
with Hive.open(sys.argv[1], owner="ana") as hive:
    print("ready", flush=True)
    while True:
        n = hive.handoff(owner, requester="ana/planner", assignee="ana/writer",
                         project="demo", packet={"task": "Write it", "deliverable_type": "code",
                                                 "acceptance_criteria": ["ok"]}).number
        lease = hive.claim(coder, n)
        hive.submit(coder, n, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=[{"kind": "note", "summary": "ok"}])
"""


@pytest.mark.slow
def test_a_backup_while_another_process_writes_is_consistent(
        source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copied a page a step, each step between the writer's commits: every copy is still
    the one snapshot it started from (and ends, rather than starting over at each write)."""
    monkeypatch.setattr(transfer, "BACKUP_STEP", 8)
    env = {**os.environ, "HIVELITE_LOAD_PLUGINS": ""}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(source)],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        conn = apsw.Connection(str(source))
        conn.set_busy_timeout(10_000)
        for k in range(3):
            dest = tmp_path / f"backup-{k}.db"
            heard: list[tuple[int, int | None]] = []

            def told(done: int, total: int | None, note: str = "",
                     heard: list[tuple[int, int | None]] = heard) -> None:
                assert not heard or done > heard[-1][0], "the backup started over"
                heard.append((done, total))
                time.sleep(0.005)  # the writer commits between two steps

            backup(conn, dest, told)
            sound(dest)
            pages = heard[-1][1]
            assert pages is not None and pages > 10 and heard[-1] == (pages, pages)
            assert len(heard) == -(-pages // 8)  # eight pages a step, each told
        assert writer.poll() is None  # it wrote all along
        conn.close()
    finally:
        writer.kill()
        writer.wait(timeout=HANG_S)
    sound(source)


def test_export_writes_through_a_text_stream(source: Path) -> None:
    from hivelite.store.transfer import export

    out = io.StringIO()
    conn = apsw.Connection(str(source))
    count = export(conn, out)
    assert out.getvalue().splitlines() == lines_of(source)
    assert count == len(out.getvalue().splitlines()) - 1


def scoped_store(path: Path) -> dict[str, int]:
    """Enrolments (one changed, one ended), a task with a role claimed under its holder's
    enrolment, and in team mode a guest's request withdrawn by its owner's agent."""
    from hivelite import Caller

    from .conftest import CODER, GUEST, OWNER

    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        hive.enrol(OWNER, CODER.name, roles=["writer"], tasks=10)
        hive.enrol(OWNER, CODER.name, projects=["demo"], roles=["writer"])
        role = own_task(hive, role="writer")
        hive.claim(CODER, role)
        hive.enrol(OWNER, "ana/reviewer", rights=["tasks.propose"])
        hive.end_enrolment(OWNER, "ana/reviewer", reason="on leave")
        hive.set_policy(OWNER, "mode", "team")
        guests = hive.handoff(GUEST, requester=GUEST.name, assignee=CODER.name,
                              project="demo", packet=packet()).number
        hive.cancel(Caller.agent("guest/planner", "elsewhere"), guests, reason="withdrawn")
    return {"role": role, "guests": guests}


def test_enrolments_roles_and_scoped_leases_travel_and_stay_sound(tmp_path: Path) -> None:
    from . import pg

    source = tmp_path / "scoped.db"
    n = scoped_store(source)
    sound(source)
    lines = lines_of(source)
    rows = [json.loads(line) for line in lines[1:]]
    enrolments = {r["row"]["agent"]: r["row"] for r in rows if r["table"] == "enrolments"}
    assert {a: (e["projects"], e["active"]) for a, e in enrolments.items()} == {
        "ana/coder": ('["demo"]', 1), "ana/reviewer": ("[]", 0)}
    task = next(r["row"] for r in rows if r["table"] == "tasks" and r["row"]["number"]
                == n["role"])
    assert (task["role"], task["lease_scope"]) == ("writer", enrolments["ana/coder"]["seq"])
    assert imported(lines, tmp_path / "copy.db") == len(lines) - 1
    assert lines_of(tmp_path / "copy.db") == lines
    sound(tmp_path / "copy.db")
    if not pg.available():
        return
    from hivelite.store.pg_doctor import diagnose_url
    from hivelite.store.postgres import PostgresStore

    schema = pg.new_schema()
    try:
        server = PostgresStore(pg.store_url(schema))
        try:
            assert import_lines(server.tables(), lines) == len(lines) - 1
            exported = list(export_lines(server.tables()))  # the server's one line more
            assert [line for line in exported if "tasks_chained_from" not in line] == lines
        finally:
            server.close()
        found = diagnose_url(pg.store_url(schema))
        assert all(f.ok for f in found), found
        assert "2 enrolment(s)" in next(f.detail for f in found if f.check == "policy")
    finally:
        pg.drop(schema)
