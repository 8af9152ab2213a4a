"""Damage and the edges of the machine end in documented errors (issue 30, part 6).

Each case of ``docs/reliability.md``'s "A bad day" table that issue 30 added: a backup or
an export into a full disk, ``doctor`` on a read-only filesystem and on a damaged header,
a clock past the year 9999 (or before the year 1), a damaged page that a write does not
touch (the quick check at the first open), a table or column renamed behind hivelite's
back, and bytes that are not UTF-8 on standard input. Each gives its error code and exit
code, never ``internal/unexpected`` nor a traceback, and leaves the store as it was.

On real files: a full disk is a real small tmpfs, a read-only filesystem a real
read-only mount (both need root, as CI has; skipped elsewhere), the damage real bytes
overwritten in a real store, the renames real ``ALTER TABLE`` statements; one smoke case
of each runs the real command line in a subprocess, the rest runs in the library.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import apsw
import pytest

from hivelite import Hive, ManualClock
from hivelite.core import clock as clock_module
from hivelite.core.errors import InvalidInput, StoreCorrupt, StoreError, StoreFull
from hivelite.store import quickcheck
from hivelite.store.doctor import diagnose_file
from hivelite.store.sqlite import SqliteStore
from hivelite.store.transfer import backup

from . import rawsql
from .conftest import CODER, HANG_S, OWNER, START, own_task
from .test_bad_day import (
    AGENT,
    OWN,
    TASK,
    Ran,
    files_of,
    fill,
    hivelite,
    listed,
    make_store,
    refused,
    small_disk,
)

pytestmark = pytest.mark.slow

PAGE = 4096


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return make_store(tmp_path / "store.db", tasks=2)


def no_traceback(ran: Ran) -> None:
    assert "Traceback" not in ran.err and "internal/unexpected" not in ran.err, ran.err


# -- a backup or an export into a full disk --------------------------------------------


def test_a_backup_into_a_full_disk_is_disk_full_and_leaves_nothing(store: Path,
                                                                   tmp_path: Path) -> None:
    """The copy's disk fills while SQLite copies the pages (``SQLITE_FULL``): exit 1,
    ``store_full/disk_full`` naming the copy, no copy nor its ``-wal`` left, the store as
    it was."""
    before = rawsql.snapshot_file(store)
    with small_disk(tmp_path / "small", size="64k") as disk:
        with Hive.open(store, clock=ManualClock(START)) as hive:
            for _ in range(40):  # more pages than 64 KiB hold
                own_task(hive, packet={"task": "Fill the copy " + "x" * 400,
                                       "deliverable_type": "doc",
                                       "acceptance_criteria": ["y" * 400] * 5})
        before = rawsql.snapshot_file(store)
        error = refused(hivelite(store, "--json", "backup", str(disk / "copy.db")), 1,
                        "store_full", "disk_full")
        assert f"{disk / 'copy.db'}" in error["message"] and "nothing of it" in error["message"]
        assert error["status"] == 507
        assert files_of(disk) == {}
        # the library says the same, and nothing of the copy is left either
        sqlite = SqliteStore(store, create=False)
        try:
            with pytest.raises(StoreFull) as err:
                backup(sqlite.conn, disk / "again.db")
        finally:
            sqlite.close()
        assert err.value.reason == "disk_full" and files_of(disk) == {}
    assert rawsql.snapshot_file(store) == before


def test_a_backup_where_no_file_can_be_made_is_disk_full(store: Path, tmp_path: Path) -> None:
    """A filesystem out of inodes refuses even the empty copy (``ENOSPC`` at create)."""
    where = tmp_path / "noinodes"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,nr_inodes=1", "tmpfs",
                           str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.strip()}")
    try:
        with pytest.raises(OSError) as full:  # the filesystem's one inode is its root
            os.open(where / "probe", os.O_CREAT | os.O_WRONLY, 0o600)
        assert full.value.errno == errno.ENOSPC
        refused(hivelite(store, "--json", "backup", str(where / "copy.db")), 1,
                "store_full", "disk_full")
        refused(hivelite(store, "--json", "export", "--out", str(where / "out.jsonl")), 1,
                "store_full", "disk_full")
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_an_export_into_a_full_disk_is_disk_full_and_leaves_no_part(store: Path,
                                                                    tmp_path: Path) -> None:
    """``export --out`` on a disk that fills midway: the part written is removed; to
    standard output (a file the shell opened, on that disk), what was written stays,
    and the error says it is incomplete. Exit 1 either way, no traceback."""
    before = rawsql.snapshot_file(store)
    with small_disk(tmp_path / "small", size="64k") as disk:
        filler = fill(disk)
        out = disk / "work.jsonl"
        error = refused(hivelite(store, "--json", "export", "--out", str(out)), 1,
                        "store_full", "disk_full")
        assert str(out) in error["message"]
        assert files_of(disk) == {"filler": filler.read_bytes()}
        filler.unlink()
        with (disk / "piped.jsonl").open("wb") as piped:
            fill(disk)
            env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
            done = subprocess.run([sys.executable, "-m", "hivelite", "--db", str(store),
                                   "export"], stdout=piped, stderr=subprocess.PIPE,
                                  timeout=HANG_S, env={**env, "HIVELITE_NOW": START,
                                                   "HIVELITE_LOAD_PLUGINS": ""})
        err = done.stderr.decode()
        assert done.returncode == 1 and "Traceback" not in err, err
        assert err.startswith("error: store_full/disk_full: the disk holding standard"
                              " output is full"), err
        assert "incomplete" in err and err.count("\n") == 1
    assert rawsql.snapshot_file(store) == before


# -- doctor on a read-only filesystem, and on a damaged header ------------------------------


def read_only_mount(disk: Path) -> None:
    done = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


def test_doctor_on_a_read_only_filesystem_checks_the_store(tmp_path: Path) -> None:
    """No ``-shm`` can be made there: a store whose every write is in the file is read
    as an immutable file; doctor runs every check and writes nothing."""
    with small_disk(tmp_path / "mnt", size="4m") as disk:
        path = make_store(disk / "store.db", tasks=3)
        before = files_of(disk)
        read_only_mount(disk)
        ran = hivelite(path, "--json", "doctor")
        no_traceback(ran)
        assert ran.code == 0, (ran.out, ran.err)
        report = ran.doc()
        assert report["ok"] and len(report["checks"]) > 10
        assert files_of(disk) == before  # no -wal, no -shm
        found = diagnose_file(path)
        assert all(f.ok for f in found)


def wal_copy(source: Path, folder: Path, shm: bool) -> Path:
    """A copy of ``source`` as a writer holding it open leaves it: its ``-wal`` holds a
    write not yet in the file (and its ``-shm`` beside it, when ``shm``)."""
    holder = rawsql.connect(source)
    try:
        holder.execute("SELECT count(*) FROM tasks").fetchall()  # holds the -wal open
        with Hive.open(source, clock=ManualClock(START)) as hive:
            own_task(hive)  # a third task: in the -wal only
        for suffix in ("", "-wal", "-shm") if shm else ("", "-wal"):
            shutil.copyfile(f"{source}{suffix}", folder / f"store.db{suffix}")
    finally:
        holder.close()
    assert (folder / "store.db-wal").stat().st_size > 0
    return folder / "store.db"


def test_doctor_on_a_read_only_filesystem_with_a_wal(store: Path, tmp_path: Path) -> None:
    """A ``-wal`` that holds writes cannot be read without a ``-shm``: with one left
    beside it (a writer that stopped), doctor reads both; without, it is
    ``store_readonly`` saying what to do (exit 6), never ``internal``."""
    with small_disk(tmp_path / "mnt", size="4m") as disk:
        (disk / "with").mkdir()
        (disk / "without").mkdir()
        both = wal_copy(store, disk / "with", shm=True)
        alone = wal_copy(store, disk / "without", shm=False)
        read_only_mount(disk)
        ran = hivelite(both, "--json", "doctor")
        assert ran.code == 0, ran.out
        replay = next(c for c in ran.doc()["checks"] if c["check"] == "replay")
        assert "3 task(s)" in replay["detail"]  # the third is in the -wal
        error = refused(hivelite(alone, "--json", "doctor"), 6, "invalid_input",
                        "store_readonly")
        assert "store.db-wal" in error["message"] and "Copy" in error["message"]


def damaged_header(store: Path, offset: int, pattern: bytes, folder: Path,
                   width: int = 8) -> Path:
    copy = folder / f"header-{offset}-{pattern[0]:02x}-{width}.db"
    data = bytearray(store.read_bytes())
    data[offset:offset + width] = pattern * width
    copy.write_bytes(bytes(data))
    return copy


@pytest.mark.parametrize("pattern", [b"\xff", b"\x00", b"\xa5"])
def test_doctor_on_any_damaged_header_reports_it(store: Path, tmp_path: Path,
                                                 pattern: bytes) -> None:
    """Eight bytes overwritten at every offset of the 100-byte header: doctor returns its
    findings (a failed first check naming what SQLite could not read, a schema version it
    does not know, or nothing wrong where SQLite does not need the field), never raises;
    the file is left as it was."""
    failed: dict[int, str] = {}
    for offset in range(0, 100):
        copy = damaged_header(store, offset, pattern, tmp_path)
        data = copy.read_bytes()
        found = diagnose_file(copy)
        bad = [f for f in found if not f.ok]
        if bad:
            failed[offset] = f"{bad[0].check}: {bad[0].detail}"
        assert copy.read_bytes() == data, offset
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
    if pattern != b"\x00":  # zeros are a valid value of most fields
        assert "unsupported file format" in failed[40]  # the schema cookie and format
        # bytes 60-67 are the schema version and the incremental-vacuum flag: SQLite's
        # own check may name the flag first (it does on a store of 44 pages, not 43)
        assert "schema version" in failed[60] or "incremental_vacuum" in failed[60]
        version = damaged_header(store, 60, pattern, tmp_path, width=4)  # the version alone
        bad = [f for f in diagnose_file(version) if not f.ok]
        assert "schema version" in bad[0].detail and "not one this hivelite" in bad[0].detail
    assert 0 in failed and 16 in failed


def test_doctor_on_a_damaged_header_is_a_finding_on_the_command_line(store: Path,
                                                                     tmp_path: Path) -> None:
    for offset, said in ((44, "unsupported file format"),
                         (60, "schema version -1 is not one this hivelite knows")):
        copy = damaged_header(store, offset, b"\xff", tmp_path, width=4)
        data = copy.read_bytes()
        ran = hivelite(copy, "--json", "doctor")
        no_traceback(ran)
        assert ran.code == 6 and not ran.doc()["ok"], ran.out
        assert said in ran.out
        assert ran.err.startswith("error: invalid_input/store_unsound: failed:")
        assert copy.read_bytes() == data


# -- a clock past the year 9999 (or before the year 1) -------------------------------------


def test_budgets_at_the_end_of_time_are_time_out_of_range(store: Path) -> None:
    """The budgets' day on 9999-12-31 has no next day to reset at: setting, showing and
    claiming under a budget are ``time_out_of_range`` (exit 6), nothing is written."""
    assert hivelite(store, "--json", "budget", "set", "--agent", "ana/coder", "--tasks",
                    "5").code == 0
    before = rawsql.snapshot_file(store)
    end = "9999-12-31T23:40:00Z"
    for verb in (("budget", "show"), ("budget", "set", "--agent", "ana/coder", "--tasks",
                                      "9"), ("claim", "1", *AGENT)):
        error = refused(hivelite(store, "--json", *verb, now=end), 6, "invalid_input",
                        "time_out_of_range")
        assert "year 9999" in error["message"] and error["field"] == "now"
    assert rawsql.snapshot_file(store) == before
    assert hivelite(store, "--json", "list", now=end).code == 0


def test_the_first_day_of_the_year_1(tmp_path: Path) -> None:
    """At 0001-01-01T00:00Z a retry's window of 24 hours starts before time did (it is
    clamped, and the retry answered); a time zone west of UTC puts the budgets' day in
    the year 0, and the demo's story before the year 1: ``time_out_of_range``."""
    path = make_store(tmp_path / "store.db")
    first = "0001-01-01T00:00:00Z"
    claim = ("claim", "1", *AGENT, "--request-id", "once")
    done = hivelite(path, "--json", *claim, now=first)
    assert done.code == 0, done.err
    again = hivelite(path, "--json", *claim, now=first)
    assert again.code == 0 and again.doc() == done.doc()
    assert hivelite(path, "--json", "policy", "set", "timezone", "America/New_York",
                    now=first).code == 0
    error = refused(hivelite(path, "--json", "budget", "show", now=first), 6,
                    "invalid_input", "time_out_of_range")
    assert "before the year 1" in error["message"]
    refused(hivelite(path, "--json", "demo", now=first), 6, "invalid_input",
            "time_out_of_range")


class FarClock(datetime):
    """``datetime`` whose ``now`` reads a system clock 8,000 years ahead: the real
    conversion of a time past the year 9999, which Python refuses."""

    @classmethod
    def now(cls, tz: object = None) -> FarClock:  # type: ignore[override]
        import time

        ahead = time.time() + 8000 * 365.25 * 86400
        return cls.fromtimestamp(ahead, UTC)  # type: ignore[return-value]


def test_a_system_clock_past_9999_is_clock_out_of_range(store: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    with pytest.raises((ValueError, OverflowError)):
        FarClock.now(UTC)
    monkeypatch.setattr(clock_module, "datetime", FarClock)
    before = rawsql.snapshot_file(store)
    with pytest.raises(InvalidInput) as err:
        Hive.open(store)  # its first read asks the clock (expired claims)
    assert err.value.reason == "clock_out_of_range" and err.value.exit_code == 6
    assert rawsql.snapshot_file(store) == before


def test_a_system_clock_past_9999_on_the_command_line(store: Path) -> None:
    code = ("import datetime, time\n"
            "from hivelite.core import clock\n"
            "class Far(datetime.datetime):\n"
            "    @classmethod\n"
            "    def now(cls, tz=None):\n"
            "        return cls.fromtimestamp(time.time() + 8000 * 365.25 * 86400, tz)\n"
            "clock.datetime = Far\n"
            "from hivelite.faces.cli.main import main\n"
            "main()\n")
    before = rawsql.snapshot_file(store)
    env = {"HIVELITE_NOW": ""}
    for verb in (("list",), ("claim", "1", *AGENT)):
        error = refused(hivelite(store, "--json", *verb, code=code, env=env), 6,
                        "invalid_input", "clock_out_of_range")
        assert "system clock" in error["message"]
    assert rawsql.snapshot_file(store) == before


# -- a damaged page a write does not touch: the quick check at the first open -------------


def leaf_pages(path: Path, table: str) -> list[int]:
    """The leaf pages of ``table``'s b-tree, from its smallest keys to its largest."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [int(r[0]) for r in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY path",
            (table,))]
    finally:
        conn.close()


def damaged_of(path: Path) -> str | None:
    """What the first open of ``path`` found wrong (None: nothing)."""
    store = SqliteStore(path, create=False)
    try:
        return store.damaged
    finally:
        store.close()


def damage_page(path: Path, page: int) -> None:
    """Eight bytes over the page's b-tree header (its type, its cells): ``quick_check``
    finds it; only a statement that reads the page would."""
    with path.open("r+b") as handle:
        handle.seek((page - 1) * PAGE)
        handle.write(b"\xa5" * 8)


@pytest.fixture
def big_store(tmp_path: Path) -> Path:
    """60 tasks with long packets: the packets fill many leaf pages (and the file stays
    well under the bound of the whole check)."""
    path = tmp_path / "store.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        for n in range(60):
            own_task(hive, packet={"task": f"Task {n} " + "x" * 400,
                                   "deliverable_type": "code",
                                   "acceptance_criteria": ["y" * 400] * 3})
    pages = leaf_pages(path, "packets")
    assert len(pages) > 10
    assert damaged_of(path) is None
    return path


def test_a_damaged_page_no_claim_reads_refuses_the_first_write(big_store: Path) -> None:
    """Damage on the packets' last page: a claim of task 1 never reads it (it went
    through before this check, and only doctor found the damage). The first open's
    quick check finds it: the claim is ``store_corrupt``, reads go on, nothing is
    written."""
    damage_page(big_store, leaf_pages(big_store, "packets")[-1])
    data = big_store.read_bytes()
    with Hive.open(big_store, clock=ManualClock(START)) as hive:
        assert isinstance(hive.store, SqliteStore) and hive.store.damaged is not None
        assert hive.get(1).number == 1  # reads go on
        with pytest.raises(StoreCorrupt) as err:
            hive.claim(CODER, 1)
        assert str(big_store) in err.value.message and "writes are refused" in err.value.message
        with pytest.raises(StoreCorrupt):
            hive.cancel(OWNER, 2)
    assert big_store.read_bytes() == data


def test_a_damaged_page_refuses_the_first_write_on_the_command_line(big_store: Path) -> None:
    damage_page(big_store, leaf_pages(big_store, "packets")[-1])
    data = big_store.read_bytes()
    error = refused(hivelite(big_store, "--json", "claim", "1", *AGENT), 6,
                    "invalid_input", "store_corrupt")
    assert "btreeInitPage" in error["message"] or "malformed" in error["message"]
    assert hivelite(big_store, "--json", "show", "1").code == 0
    refused(hivelite(big_store, "--json", "handoff", *OWN, *TASK), 6, "invalid_input",
            "store_corrupt")
    assert big_store.read_bytes() == data


def test_an_overdue_lease_on_a_damaged_store_is_left_for_reads(big_store: Path) -> None:
    """Opening a store returns overdue claims (a write): on a damaged file it does not,
    so reads still open it; ``expire`` itself is refused."""
    clock = ManualClock(START)
    with Hive.open(big_store, clock=clock) as hive:
        hive.claim(CODER, 1)
    damage_page(big_store, leaf_pages(big_store, "packets")[-1])
    data = big_store.read_bytes()
    clock.advance(hours=1)
    with Hive.open(big_store, clock=clock) as hive:
        assert hive.get(1).task.state == "accepted"
        with pytest.raises(StoreCorrupt):
            hive.expire(OWNER)
    assert big_store.read_bytes() == data


@contextmanager
def bounded(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The check of a file beyond the bound (every file here is), reading the newest
    four rows (of 60 tasks: the old ones are out of its reach, as in a large store)."""
    monkeypatch.setattr(quickcheck, "OPEN_CHECK_PAGES", 0)
    monkeypatch.setattr(quickcheck, "NEWEST_ROWS", 4)
    yield


def test_the_bounded_check_of_a_large_file(big_store: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond the bound the check reads the owner's small tables whole and the newest
    rows of the growing ones: damage there is found; damage in an old task's page is
    not, until that page is read (``store_corrupt``) or doctor runs."""
    pristine = big_store.read_bytes()
    with bounded(monkeypatch):
        for table, index in (("packets", -1), ("journal", -1)):
            big_store.write_bytes(pristine)
            damage_page(big_store, leaf_pages(big_store, table)[index])
            assert damaged_of(big_store) is not None, table
        for table in ("policy", "enrolments"):  # two of the owner's small tables
            big_store.write_bytes(pristine)
            conn = apsw.Connection(str(big_store), flags=apsw.SQLITE_OPEN_READONLY)
            root = int(conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = ?",
                                    (table,)).get)
            conn.close()
            damage_page(big_store, root)
            assert damaged_of(big_store) is not None, table
        # the bound: an old task's page is not read at open
        big_store.write_bytes(pristine)
        damage_page(big_store, leaf_pages(big_store, "packets")[0])
        with Hive.open(big_store, clock=ManualClock(START)) as hive:
            assert hive.store.damaged is None  # type: ignore[attr-defined]
            hive.claim(CODER, 60)
            with pytest.raises(StoreCorrupt):
                hive.get(1)
    assert not all(f.ok for f in diagnose_file(big_store))


# -- a table or a column renamed behind hivelite's back ----------------------------------

RENAMES = ("ALTER TABLE tasks RENAME TO x", "ALTER TABLE journal RENAME TO x",
           "ALTER TABLE meta RENAME TO x", "ALTER TABLE moves RENAME TO x",
           "ALTER TABLE tasks RENAME COLUMN state TO x",
           "ALTER TABLE journal RENAME COLUMN seq TO x",
           "ALTER TABLE results RENAME COLUMN version TO x",
           "ALTER TABLE packets RENAME COLUMN body TO x",
           "ALTER TABLE moves RENAME COLUMN number TO x")


def renamed(store: Path, sql: str) -> Path:
    conn = rawsql.connect(store)
    conn.execute(sql)
    conn.close()
    return store


@pytest.mark.parametrize("sql", RENAMES)
def test_doctor_reports_a_rename_and_skips_what_cannot_run(store: Path, sql: str) -> None:
    renamed(store, sql)
    found = diagnose_file(store)
    checks = {f.check: f for f in found}
    assert checks["integrity_check"].ok
    assert not checks["schema"].ok and ("x is not hivelite's" in checks["schema"].detail
                                        or "was changed" in checks["schema"].detail)
    skipped = [f for f in found if f.data and f.data.get("skipped")]
    for finding in skipped:
        assert not finding.ok and finding.detail.startswith("skipped: the schema is not"
                                                             " hivelite's (see the schema")
    assert len({f.check for f in found}) == len(found)  # each check once, by its name


@pytest.mark.parametrize("sql", RENAMES)
def test_a_renamed_store_is_schema_tampered_for_reads_and_writes(store: Path,
                                                                 sql: str) -> None:
    """Writes are refused; a read that cannot run on the renamed schema is
    ``schema_tampered`` too (not ``internal``); a read that can, works."""
    renamed(store, sql)
    before = rawsql.snapshot_file(store)
    try:
        hive = Hive.open(store, clock=ManualClock(START))
    except StoreError as error:
        assert error.reason == "schema_tampered", error
    else:
        with hive:
            with pytest.raises(StoreError) as err:
                own_task(hive)
            assert err.value.reason == "schema_tampered"
            for read in (hive.list, lambda: hive.get(1), lambda: hive.history(1)):
                try:
                    read()
                except StoreError as error:
                    assert error.reason == "schema_tampered", error
    assert rawsql.snapshot_file(store) == before


def test_a_renamed_table_on_the_command_line(store: Path, tmp_path: Path) -> None:
    renamed(store, "ALTER TABLE tasks RENAME TO x")
    before = rawsql.snapshot_file(store)
    ran = hivelite(store, "doctor")
    no_traceback(ran)
    assert ran.code == 6
    assert "table tasks is missing; table x is not hivelite's" in ran.out
    assert "skipped: the schema is not hivelite's" in ran.out
    assert "no such table: tasks" in ran.out
    for verb in (("list",), ("show", "1"), ("claim", "1", *AGENT), ("export",)):
        error = refused(hivelite(store, "--json", *verb), 6, "invalid_input",
                        "schema_tampered")
        assert "hivelite doctor" in error["message"]
    copy = tmp_path / "copy.db"
    assert hivelite(store, "--json", "backup", str(copy)).code == 0  # copied as it is
    assert rawsql.snapshot_file(copy) == before
    assert rawsql.snapshot_file(store) == before


# -- bytes that are not UTF-8 on standard input -------------------------------------------


def fed(db: Path, stdin: bytes, *args: str) -> Ran:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    done = subprocess.run([sys.executable, "-m", "hivelite", "--db", str(db), "--json", *args],
                          input=stdin, capture_output=True, timeout=HANG_S,
                          env={**env, "HIVELITE_NOW": START, "HIVELITE_LOAD_PLUGINS": ""})
    return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())


def test_stdin_that_is_not_utf8_is_invalid_utf8(store: Path, tmp_path: Path) -> None:
    task = {"requester": "ana/planner", "assignee": "ana/coder", "project": "site",
            "packet": {"task": "Fix \udcff the bug", "deliverable_type": "code",
                       "acceptance_criteria": ["tests pass"]}}
    line = json.dumps(task, ensure_ascii=False).encode("utf-8", "surrogateescape")
    assert b"\xff" in line
    before = rawsql.snapshot_file(store)
    error = refused(fed(store, line + b"\n", "handoff", "--from-jsonl", "-"), 6,
                    "invalid_input", "invalid_utf8")
    assert error["line"] == 1
    packet = json.dumps(task["packet"], ensure_ascii=False).encode("utf-8", "surrogateescape")
    refused(fed(store, packet, "handoff", "--requester", "ana/planner", "--assignee",
                "ana/coder", "--project", "site", "--packet", "-"), 6, "invalid_input",
            "invalid_utf8")
    claim = fed(store, b"", "claim", "1", *AGENT)
    assert claim.code == 0, claim.err
    lease = json.loads(claim.out)
    before = rawsql.snapshot_file(store)
    evidence = b'[{"kind": "test_output", "summary": "14 passed \xff"}]'
    refused(fed(store, evidence, "submit", "1", *AGENT, "--lease", lease["lease_id"],
                "--token", str(lease["fencing_token"]), "--summary", "done",
                "--evidence-file", "-"), 6, "invalid_input", "invalid_utf8")
    assert rawsql.snapshot_file(store) == before
    new = tmp_path / "new.db"
    refused(fed(new, b"\xff\xfe\n", "import", "-"), 6, "invalid_input", "invalid_utf8")
    assert not new.exists()
    assert listed(hivelite(store, "--json", "list")) == [1, 2]
