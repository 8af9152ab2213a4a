"""The store file: how it is created, opened, refused, migrated and shared (DESIGN §4, §4a).

Every test works on a real file in ``tmp_path``; the process tests start real
second processes and bound every wait with a timeout.
"""

from __future__ import annotations

import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import apsw
import pytest

import hivelite
from hivelite import ForbiddenRight, Hive, InvalidInput, ManualClock, StoreError
from hivelite.store import APPLICATION_ID, SCHEMA_VERSION, NewTask, SqliteStore
from hivelite.store import sqlite as sqlite_store

from .conftest import HANG_S, START, own_task

PROCESS_TIMEOUT_S = HANG_S

# The code a second process runs: the same store, its own Hive, one handoff.
HANDOFF_SCRIPT = textwrap.dedent(
    """
    import sys
    sys._hivelite_under_test = True
    from hivelite import Hive
    with Hive.open(sys.argv[1], owner="ana") as hive:
        receipt = hive.handoff(hive.as_owner(), requester="ana/planner", assignee="ana/coder",
                               project="demo",
                               packet={"task": "From the other process",
                                       "deliverable_type": "code",
                                       "acceptance_criteria": ["tests pass"]})
        print(receipt.id, flush=True)
    """
)

# The code of a second process that holds the write lock for about a second.
LOCK_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import apsw
    conn = apsw.Connection(sys.argv[1])
    conn.set_busy_timeout(5000)
    conn.execute("BEGIN IMMEDIATE")
    if sys.argv[2:] == ["write"]:
        conn.execute("INSERT INTO meta(key, value) VALUES ('held_by', 'other process')")
    print("locked", flush=True)
    time.sleep(1.0)
    conn.execute("COMMIT")
    conn.close()
    print("released", flush=True)
    """
)


# -- helpers -----------------------------------------------------------------


def sqlite_of(hive: Hive) -> SqliteStore:
    """The hive's store, which these tests know to be the SQLite one."""
    assert isinstance(hive.store, SqliteStore)
    return hive.store


def pragma(hive: Hive, name: str) -> object:
    return sqlite_of(hive).conn.execute(f"PRAGMA {name}").get


def meta(hive: Hive, key: str) -> str | None:
    with hive.store.read() as reader:
        return reader.meta(key)


def raw_pragma(path: Path, name: str) -> object:
    conn = apsw.Connection(str(path))
    try:
        return conn.execute(f"PRAGMA {name}").get
    finally:
        conn.close()


def schema_rows(path: Path) -> list[tuple[object, ...]]:
    conn = apsw.Connection(str(path))
    try:
        return list(conn.execute(
            "SELECT type, name, tbl_name, rootpage, sql FROM sqlite_schema ORDER BY type, name"))
    finally:
        conn.close()


@dataclass(frozen=True)
class FileState:
    """What must not change when a file is refused: its bytes, its mtime, its neighbours."""

    data: bytes | None
    mtime_ns: int
    mode: int
    neighbours: tuple[str, ...]

    @classmethod
    def of(cls, path: Path) -> FileState:
        info = path.stat()
        data = None if path.is_dir() else path.read_bytes()
        neighbours = tuple(sorted(p.name for p in path.parent.iterdir()))
        return cls(data, info.st_mtime_ns, stat.S_IMODE(info.st_mode), neighbours)


def assert_untouched(path: Path, before: FileState) -> None:
    after = FileState.of(path)
    assert after.data == before.data, "the refused file's bytes changed"
    assert after.mtime_ns == before.mtime_ns, "the refused file's mtime changed"
    assert after.mode == before.mode
    assert after.neighbours == before.neighbours, "files appeared next to the refused file"
    for suffix in ("-wal", "-shm", "-journal"):
        assert not path.with_name(path.name + suffix).exists()


def refuse(path: Path, reason: str, **kwargs: object) -> StoreError:
    with pytest.raises(StoreError) as err:
        Hive.open(path, owner="ana", **kwargs)  # type: ignore[arg-type]
    assert err.value.reason == reason
    assert isinstance(err.value, InvalidInput)
    assert err.value.status == 422
    return err.value


@pytest.fixture
def made(db_path: Path, clock: ManualClock) -> Path:
    """A hivelite store that exists and is closed."""
    Hive.open(db_path, owner="ana", clock=clock).close()
    return db_path


# -- a new store ---------------------------------------------------------------


def test_new_store_is_private_to_its_user(hive: Hive, db_path: Path) -> None:
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600


def test_new_store_is_marked_as_hivelite(hive: Hive) -> None:
    assert pragma(hive, "application_id") == APPLICATION_ID == hivelite.store.APPLICATION_ID
    assert pragma(hive, "user_version") == SCHEMA_VERSION == hivelite.store.SCHEMA_VERSION
    assert hive.store.schema_version == SCHEMA_VERSION


def test_new_store_connection_settings(hive: Hive) -> None:
    assert str(pragma(hive, "journal_mode")).lower() == "wal"
    assert pragma(hive, "foreign_keys") == 1
    assert pragma(hive, "synchronous") == 1  # NORMAL by default
    busy_ms = pragma(hive, "busy_timeout")
    assert isinstance(busy_ms, int)
    assert busy_ms >= 3000, f"busy timeout is only {busy_ms} ms"


def test_marks_survive_on_disk(made: Path) -> None:
    assert raw_pragma(made, "application_id") == APPLICATION_ID
    assert raw_pragma(made, "user_version") == SCHEMA_VERSION
    assert str(raw_pragma(made, "journal_mode")).lower() == "wal"


def test_synchronous_full_is_honoured(db_path: Path) -> None:
    with Hive.open(db_path, owner="ana", synchronous="FULL") as hive:
        assert pragma(hive, "synchronous") == 2


def test_owner_is_recorded_and_kept(db_path: Path, clock: ManualClock) -> None:
    with Hive.open(db_path, owner="ana", clock=clock) as hive:
        assert hive.owner == "ana"
        assert meta(hive, "owner") == "ana"
    with Hive.open(db_path, clock=clock) as hive:
        assert hive.owner == "ana"
        assert meta(hive, "owner") == "ana"
    with Hive.open(db_path, owner="ana", clock=clock) as hive:
        assert hive.owner == "ana"


def test_other_owner_is_refused(made: Path) -> None:
    with pytest.raises(InvalidInput) as err:
        Hive.open(made, owner="bob")
    assert err.value.reason == "owner_mismatch"
    with Hive.open(made) as hive:  # the refusal changed nothing
        assert hive.owner == "ana"


@pytest.mark.parametrize("owner", ["Ana", "ana smith", "-ana", "ana-", "ana_b", "", "a" * 40])
def test_invalid_owner_slug_is_refused(tmp_path: Path, owner: str) -> None:
    path = tmp_path / "store.db"
    with pytest.raises(InvalidInput) as err:
        Hive.open(path, owner=owner)
    assert err.value.reason == "invalid_owner"
    assert not path.exists()


def test_empty_file_is_initialised(db_path: Path) -> None:
    db_path.touch()
    assert db_path.stat().st_size == 0
    with Hive.open(db_path, owner="ana") as hive:
        assert pragma(hive, "application_id") == APPLICATION_ID
        assert pragma(hive, "user_version") == SCHEMA_VERSION
        assert str(pragma(hive, "journal_mode")).lower() == "wal"
        assert sqlite_of(hive).conn.execute("SELECT count(*) FROM moves").get == 22
        assert hive.owner == "ana"
        assert hive.get(own_task(hive)).number == 1


def test_parent_directories_are_created_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "store.db"
    with Hive.open(path, owner="ana", parents=True):
        pass
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# -- opening again (migrations are idempotent) -----------------------------------


def test_reopening_leaves_the_schema_alone(made: Path, clock: ManualClock) -> None:
    first = schema_rows(made)
    assert {r[1] for r in first} >= {"meta", "moves", "tasks", "packets", "results",
                                      "checkpoints", "journal", "journal_events",
                                      "task_delete"}
    for _ in range(2):
        with Hive.open(made, owner="ana", clock=clock) as hive:
            assert sqlite_of(hive).conn.execute("SELECT count(*) FROM moves").get == 22
            assert pragma(hive, "user_version") == SCHEMA_VERSION
            assert pragma(hive, "application_id") == APPLICATION_ID
        assert schema_rows(made) == first


def test_reopening_keeps_the_tasks(made: Path, clock: ManualClock) -> None:
    with Hive.open(made, owner="ana", clock=clock) as hive:
        task_id = hive.get(own_task(hive)).task.id
    with Hive.open(made, clock=clock) as hive:
        assert hive.get(task_id).number == 1
        assert sqlite_of(hive).conn.execute("SELECT count(*) FROM moves").get == 22


# -- refusals that leave the file untouched ------------------------------------------


def test_text_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("shopping list\n- milk\n- eggs\n")
    before = FileState.of(path)
    err = refuse(path, "not_a_store")
    assert str(path) in err.message
    assert_untouched(path, before)


def test_directory_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    path.mkdir()
    before = FileState.of(path)
    refuse(path, "not_a_store")
    assert path.is_dir()
    assert list(path.iterdir()) == []
    assert_untouched(path, before)


def test_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE recipes(id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO recipes(name) VALUES ('bread')")
    conn.commit()
    conn.close()
    before = FileState.of(path)
    err = refuse(path, "foreign_database")
    assert str(path) in err.message
    assert_untouched(path, before)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT name FROM recipes").fetchall() == [("bread",)]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


def test_newer_schema_is_refused_untouched(made: Path) -> None:
    conn = apsw.Connection(str(made))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = FileState.of(made)
    err = refuse(made, "newer_schema")
    assert str(SCHEMA_VERSION + 1) in err.message
    assert_untouched(made, before)
    assert raw_pragma(made, "user_version") == SCHEMA_VERSION + 1


def test_damaged_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    """An SQLite header over garbage is refused as a StoreError, not a raw apsw error."""
    path = tmp_path / "damaged.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4080)
    before = FileState.of(path)
    with pytest.raises(StoreError) as err:
        Hive.open(path, owner="ana")
    assert err.value.reason
    assert_untouched(path, before)


def test_missing_store_without_create_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "store.db"
    before = sorted(p.name for p in tmp_path.iterdir())
    refuse(path, "no_store", create=False)
    assert not path.exists()
    assert not path.parent.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_store_error_is_invalid_input() -> None:
    assert issubclass(StoreError, InvalidInput)
    assert StoreError("no_store").to_dict()["code"] == "invalid_input"


def test_store_created_by_another_opener_meanwhile_is_opened(
    db_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two first opens race: the other one creates the file after this one found none.

    The loser must open the store the winner made, not fail with a raw FileExistsError
    (seen for real with six processes opening one new path at the same instant).
    """
    create = sqlite_store._create_private

    def other_opener_first(path: Path, parents: bool = False) -> bool:
        monkeypatch.setattr(sqlite_store, "_create_private", create)
        Hive.open(path, owner="ana", clock=clock).close()  # the winner
        return create(path, parents)

    monkeypatch.setattr(sqlite_store, "_create_private", other_opener_first)
    with Hive.open(db_path, owner="ana", clock=clock) as hive:
        assert hive.owner == "ana"
        assert pragma(hive, "user_version") == SCHEMA_VERSION
        assert hive.get(own_task(hive)).number == 1


class OtherOpener:
    """Another opener of the same store, run in a thread of this process.

    The tests start it at an awkward moment of an open in progress and give it a
    short while to finish. A library that holds a lock at that moment makes it wait
    instead; either way both opens must end consistently.
    """

    def __init__(self, path: Path, owner: str, clock: ManualClock) -> None:
        self.path, self.owner, self.clock = path, owner, clock
        self.result: str | BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            with Hive.open(self.path, owner=self.owner, clock=self.clock) as hive:
                self.result = hive.owner
        except BaseException as exc:
            self.result = exc

    def start(self, grace_s: float = 1.0) -> None:
        self.thread.start()
        self.thread.join(timeout=grace_s)

    def finish(self) -> str | BaseException | None:
        self.thread.join(timeout=PROCESS_TIMEOUT_S)
        assert not self.thread.is_alive(), "the other opener never finished"
        return self.result


def test_identity_is_read_from_one_snapshot(
    db_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another opener initialises the new file between this opener's identity reads.

    Reading ``application_id`` (still 0), then finding tables, must not make our own
    store look foreign: the identity has to be read in one snapshot. The other opener
    starts right after our connection read ``application_id``, before its next statement.
    """
    original = sqlite_store.SqliteStore._connect
    other = OtherOpener(db_path, "ana", clock)

    def racing_connect(self: sqlite_store.SqliteStore) -> apsw.Connection:
        monkeypatch.setattr(sqlite_store.SqliteStore, "_connect", original)  # only ours
        conn = original(self)
        seen: list[str] = []

        def trace(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
            if seen and seen[-1] == "PRAGMA application_id":
                conn.exec_trace = None
                other.start()
            seen.append(sql.strip())
            return True

        conn.exec_trace = trace
        return conn

    monkeypatch.setattr(sqlite_store.SqliteStore, "_connect", racing_connect)
    try:
        with Hive.open(db_path, owner="ana", clock=clock) as hive:
            assert hive.owner == "ana"
            assert pragma(hive, "application_id") == APPLICATION_ID
    finally:
        theirs = other.finish()
    assert theirs == "ana"


def test_owner_recorded_meanwhile_is_not_overwritten(
    db_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two first opens with different owners: exactly one wins, the other is refused.

    ``bob`` opens while ``ana``'s open has just looked for a recorded owner and found
    none. Whoever records first owns the store; the other must get owner_mismatch,
    not silently overwrite the owner (or believe in an owner the store does not hold).
    """
    original = sqlite_store.SqliteTx.meta
    other = OtherOpener(db_path, "bob", clock)

    def racing_meta(self: sqlite_store.SqliteTx, key: str) -> str | None:
        value = original(self, key)
        if key == "owner":
            monkeypatch.setattr(sqlite_store.SqliteTx, "meta", original)
            other.start()
        return value

    monkeypatch.setattr(sqlite_store.SqliteTx, "meta", racing_meta)
    mine: str | BaseException
    try:
        with Hive.open(db_path, owner="ana", clock=clock) as hive:
            mine = hive.owner
    except InvalidInput as exc:
        mine = exc
    finally:
        theirs = other.finish()
    with Hive.open(db_path, clock=clock) as hive:
        recorded = hive.owner
    winners = [o for o in (mine, theirs) if isinstance(o, str)]
    losers = [o for o in (mine, theirs) if not isinstance(o, str)]
    assert winners == [recorded], (
        f"ana's open -> {mine!r}, bob's open -> {theirs!r}, store records {recorded!r}")
    assert len(losers) == 1
    assert isinstance(losers[0], InvalidInput)
    assert losers[0].reason == "owner_mismatch"


def test_simultaneous_first_opens_all_succeed(tmp_path: Path) -> None:
    """Real processes opening one new path at the same instant (several rounds)."""
    script = textwrap.dedent(
        """
        import sys, time
        sys._hivelite_under_test = True
        from hivelite import Hive
        start = float(sys.argv[2])
        while time.time() < start:
            time.sleep(0.001)
        with Hive.open(sys.argv[1], owner="ana") as hive:
            print(hive.owner, flush=True)
        """
    )
    failures = []
    for round_ in range(3):
        path = tmp_path / f"store{round_}.db"
        start = time.time() + 1.0  # after every process has imported hivelite
        procs = [subprocess.Popen([sys.executable, "-c", script, str(path), str(start)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(6)]
        try:
            for proc in procs:
                out, err = proc.communicate(timeout=PROCESS_TIMEOUT_S)
                if proc.returncode != 0 or out.strip() != "ana":
                    failures.append(f"round {round_}: " + (err.strip().splitlines() or ["?"])[-1])
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=PROCESS_TIMEOUT_S)
        with Hive.open(path) as hive:
            assert hive.owner == "ana"
            assert pragma(hive, "user_version") == SCHEMA_VERSION
    assert failures == []


# -- transactions -------------------------------------------------------------------


def test_error_inside_write_rolls_back(hive: Hive) -> None:
    store = sqlite_of(hive)
    task = NewTask(id="rolled-back", project="demo", requester="ana/planner",
                   assignee="ana/coder", at=START, priority="normal", labels="[]", depends=0,
                   packet='{"task": "x"}')

    class Boom(Exception):
        pass

    with pytest.raises(Boom), store.write() as tx:
        number = tx.insert_task(task, actor="ana", reason=None)
        tx.set_meta("half_done", "yes")
        assert tx.task(number) is not None  # visible inside the transaction
        raise Boom
    assert not store.conn.in_transaction
    with store.read() as reader:
        assert reader.task("rolled-back") is None
        assert reader.meta("half_done") is None
        assert reader.journal() == []
    assert store.conn.execute("SELECT count(*) FROM packets").get == 0
    # The store still works after the rollback.
    assert hive.get(own_task(hive)).number >= 1


def test_trigger_abort_inside_write_is_a_hivelite_error(hive: Hive) -> None:
    number = own_task(hive)
    store = sqlite_of(hive)
    with pytest.raises(ForbiddenRight) as err, store.write() as tx:
        tx.conn.execute("DELETE FROM tasks")
    assert err.value.reason == "tasks_are_kept"
    assert err.value.status == 403
    assert isinstance(err.value.__cause__, apsw.Error)
    assert not store.conn.in_transaction
    assert hive.get(number).number == number


def test_trigger_abort_undoes_earlier_statements_of_the_write(hive: Hive) -> None:
    number = own_task(hive)
    with pytest.raises(ForbiddenRight) as err, sqlite_of(hive).write() as tx:
        tx.set_meta("before_abort", "yes")
        tx.conn.execute("DELETE FROM journal")
    assert err.value.reason == "append_only"
    assert meta(hive, "before_abort") is None
    with hive.store.read() as reader:
        kept = reader.journal(number)
    assert len(hive.history(number)) == len(kept) >= 1


def test_write_commits(hive: Hive, db_path: Path) -> None:
    with hive.store.write() as tx:
        tx.set_meta("kept", "yes")
    conn = apsw.Connection(str(db_path))
    try:
        assert conn.execute("SELECT value FROM meta WHERE key = 'kept'").get == "yes"
    finally:
        conn.close()


# -- two processes -------------------------------------------------------------------


@pytest.fixture
def other_process() -> Iterator[list[subprocess.Popen[str]]]:
    """Started processes, killed at the end if a test left one running."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=PROCESS_TIMEOUT_S)


def test_second_process_writes_while_first_is_open(hive: Hive, db_path: Path) -> None:
    mine = own_task(hive)
    done = subprocess.run(
        [sys.executable, "-c", HANDOFF_SCRIPT, str(db_path)],
        capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S, check=False,
    )
    assert done.returncode == 0, done.stderr
    their_id = done.stdout.strip()
    assert their_id
    view = hive.get(their_id)
    assert view.number == mine + 1
    assert view.task.packet.task == "From the other process"
    assert hive.history(their_id)[0].actor == "ana"  # the caller: the owner
    assert [t.task.id for t in hive.list().items][-1] == their_id


def test_open_and_write_wait_for_another_writer(
    made: Path, clock: ManualClock, other_process: list[subprocess.Popen[str]],
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCK_SCRIPT, str(made), "write"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    other_process.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # EOF (an empty line) if the process died
    assert line.strip() == "locked", proc.stderr.read() if proc.stderr else ""
    started = time.monotonic()
    with Hive.open(made, owner="ana", clock=clock) as hive:
        number = own_task(hive)
        waited = time.monotonic() - started
        assert hive.get(number).number == 1
        assert meta(hive, "held_by") == "other process"  # it committed first
    _, err = proc.communicate(timeout=PROCESS_TIMEOUT_S)
    assert proc.returncode == 0, err
    assert waited >= 0.3, f"did not wait for the other writer ({waited:.2f} s)"


def test_new_file_open_waits_for_another_writer(
    db_path: Path, clock: ManualClock, other_process: list[subprocess.Popen[str]],
) -> None:
    """A brand-new (still rollback-journal) file whose write lock another process holds.

    This is what a second opener meets while the first is still initialising the file:
    switching to WAL must wait out the busy timeout, not fail at once with
    'database is locked'.
    """
    db_path.touch()
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCK_SCRIPT, str(db_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    other_process.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "locked", proc.stderr.read() if proc.stderr else ""
    with Hive.open(db_path, owner="ana", clock=clock) as hive:
        assert str(pragma(hive, "journal_mode")).lower() == "wal"
        assert hive.get(own_task(hive)).number == 1
    _, err = proc.communicate(timeout=PROCESS_TIMEOUT_S)
    assert proc.returncode == 0, err
