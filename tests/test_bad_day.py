"""A bad day: every failure of the machine, the file or the input is a documented error.

Issue 14, item 6. A full disk, a read-only file or folder, another program holding the
store locked, a damaged file, JSON nested 100,000 deep, numbers beyond 64 bits, a clock
at the end of year 9999, usage that would overflow a sum, a row raw SQL left unreadable,
bytes that are not UTF-8, a store made through a symlink or onto an empty file: each
ends with its error code, its exit code and one ``--json`` error document, never a
traceback, and leaves the store as it was (``docs/reliability.md``, "A bad day").

The command line runs in real processes. The full disk is a real small filesystem (a
tmpfs mounted by root; SQLite's ``max_page_count`` makes the library test portable), the
read-only store a real immutable file or read-only mount (``chmod`` when not root), the
lock a second process in ``locking_mode=EXCLUSIVE``. What a machine cannot do here is
skipped with its reason.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import pytest

from hivelite import Hive, ManualClock, hookimpl
from hivelite.core.errors import (
    HiveliteError,
    InvalidInput,
    PluginError,
    StoreBusy,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreReadonly,
)
from hivelite.core.jsontext import MAX_JSON_DEPTH, json_depth
from hivelite.core.protocol import MAX_USAGE
from hivelite.faces.render import printable
from hivelite.store import SqliteStore

from . import rawsql
from .conftest import CODER, HANG_S, START, own_task

pytestmark = pytest.mark.slow

TIMEOUT = HANG_S
OWN = ("--requester", "ana/planner", "--assignee", "ana/coder", "--project", "site")
TASK = ("--task", "Fix the login bug", "--type", "code", "--accept", "tests pass")
AGENT = ("--agent", "ana/coder", "--instance", "laptop")
SHORT_BUSY = ("import hivelite.store.sqlite as s; s.BUSY_TIMEOUT_MS = 300;"
              " from hivelite.faces.cli.main import main; main()")
"""The real CLI with a 0.3 s busy timeout instead of 10 s (``test_gaps`` times the 10 s)."""
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


# -- running the command line ----------------------------------------------------------


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def doc(self) -> Any:
        """stdout as exactly one JSON document."""
        return json.loads(self.out)


def hivelite(db: Path | str | bytes, *args: str | bytes, now: str = START,
             env: dict[str, str] | None = None, code: str | None = None,
             umask: int | None = None) -> Ran:
    """``python -m hivelite --db DB ARGS`` in a clean environment (``code`` runs instead of
    ``-m hivelite``; ``umask`` is the process's)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    clean.update({"HIVELITE_NOW": now, "HIVELITE_LOAD_PLUGINS": "", **(env or {})})
    start = [sys.executable, "-c", code] if code else [sys.executable, "-m", "hivelite"]
    argv: list[str | bytes] = [*start, "--db", db, *args]
    done = subprocess.run(argv, capture_output=True, timeout=TIMEOUT, env=clean,
                          preexec_fn=None if umask is None else lambda: os.umask(umask))
    return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())


def refused(ran: Ran, exit_code: int, code: str, reason: str) -> dict[str, Any]:
    """A ``--json`` call refused with ``code/reason``: its exit code, one JSON error
    document on stdout, the same error on stderr (escaped), no traceback."""
    assert ran.code == exit_code, (ran.code, ran.out, ran.err)
    assert "Traceback" not in ran.err
    doc = ran.doc()
    assert set(doc) == {"error"}, ran.out
    error: dict[str, Any] = doc["error"]
    assert (error["code"], error["reason"]) == (code, reason), error
    assert ran.err == printable(f"error: {code}/{reason}: {error['message']}") + "\n"
    return error


def listed(ran: Ran) -> list[int]:
    assert ran.code == 0, ran.err
    return [item["number"] for item in ran.doc()["items"]]


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def make_store(path: Path, tasks: int = 1) -> Path:
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        for _ in range(tasks):
            own_task(hive)
    return path


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return make_store(tmp_path / "store.db", tasks=2)


# -- a full disk -----------------------------------------------------------------------


@contextmanager
def small_disk(where: Path, size: str = "1m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (root only; skipped elsewhere)."""
    where.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a small filesystem")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                           str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(folder: Path) -> Path:
    """Fill the filesystem holding ``folder`` to the last byte; the filler file."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        chunk = b"\0" * 4096
        while True:
            os.write(fd, chunk)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


@pytest.mark.parametrize("held_open", [True, False], ids=["wal-cannot-grow", "shm-cannot-be-made"])
def test_a_full_disk_is_store_full_with_one_json_document(tmp_path: Path,
                                                          held_open: bool) -> None:
    """Writing when the disk is full: ``store_full`` (exit 1), one JSON document, the write
    rolled back. Another process holding the store open keeps its ``-shm`` and ``-wal``,
    so the write fails growing the WAL (SQLITE_FULL); with nothing open, SQLite cannot
    even make the ``-shm`` (an I/O error whose errno is ENOSPC). Both are a full disk."""
    with small_disk(tmp_path / "small") as disk:
        path = make_store(disk / "store.db")
        reader = rawsql.connect(path)
        try:
            before = rawsql.snapshot(reader)
            if not held_open:
                reader.close()
            filler = fill(disk)
            for verb in (("handoff", *OWN, *TASK), ("claim", "1", *AGENT)):
                error = refused(hivelite(path, "--json", *verb), 1, "store_full", "disk_full")
                assert str(path) in error["message"] and "full" in error["message"]
                assert error["status"] == 507
            if held_open:  # reading needs no new space
                assert listed(hivelite(path, "--json", "list")) == [1]
            filler.unlink()
            if not held_open:
                reader = rawsql.connect(path)
            assert rawsql.snapshot(reader) == before
            assert reader.execute("PRAGMA integrity_check").get == "ok"
        finally:
            reader.close()
        # space again: the same store takes the write
        assert hivelite(path, "--json", "handoff", *OWN, *TASK).code == 0
        assert listed(hivelite(path, "--json", "list")) == [1, 2]


def test_init_on_a_full_disk_is_store_full(tmp_path: Path) -> None:
    with small_disk(tmp_path / "small") as disk:
        filler = fill(disk)
        path = disk / "new.db"
        refused(hivelite(path, "--json", "init", "--owner", "ana"), 1, "store_full",
                "disk_full")
        filler.unlink()
        assert hivelite(path, "--json", "init", "--owner", "ana").code == 0
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_full_database_is_store_full_in_the_library(tmp_path: Path) -> None:
    """SQLite's own page limit raises SQLITE_FULL for real, on any machine: the library
    raises ``StoreFull`` and the rows are as they were."""
    path = make_store(tmp_path / "store.db")
    with Hive.open(path, clock=ManualClock(START)) as hive:
        store = hive.store
        assert isinstance(store, SqliteStore)
        pages = store.writer.execute("PRAGMA page_count").get  # the verbs' write connection
        store.writer.execute(f"PRAGMA max_page_count = {pages}")
        before = rawsql.snapshot_file(path)
        with pytest.raises(StoreFull) as err:
            for _ in range(50):  # the free pages inside the file go first
                own_task(hive, packet={"task": "Fill the file " + "x" * 400,
                                       "deliverable_type": "doc",
                                       "acceptance_criteria": ["y" * 400] * 20})
        assert (err.value.code, err.value.reason, err.value.exit_code) == (
            "store_full", "disk_full", 1)
        assert not store.writer.in_transaction
        numbers = [v.number for v in hive.list(limit=500).items]
    after = rawsql.snapshot_file(path)
    # every write before the full one committed; the full one left nothing behind
    assert after["tasks"][: len(before["tasks"])] == before["tasks"]
    assert [r[0] for r in after["tasks"]] == numbers


# -- a read-only store ------------------------------------------------------------------


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` (a file or a folder) made read-only for this process: immutable as root
    (``chmod`` does not stop root), ``chmod a-w`` otherwise."""
    mode = path.stat().st_mode
    if ROOT:
        if shutil.which("chattr") is None:
            pytest.skip("root, and no chattr to make a file immutable")
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"chattr +i is not supported here: {done.stderr.strip()}")
    else:
        path.chmod(stat.S_IMODE(mode) & ~0o222)
    try:
        yield
    finally:
        if ROOT:
            subprocess.run(["chattr", "-i", str(path)], capture_output=True)
        path.chmod(stat.S_IMODE(mode))


def test_a_read_only_file_refuses_writes_and_still_reads(store: Path) -> None:
    before = rawsql.snapshot_file(store)
    data = store.read_bytes()
    with read_only(store):
        for verb in (("handoff", *OWN, *TASK), ("claim", "1", *AGENT), ("cancel", "2")):
            error = refused(hivelite(store, "--json", *verb), 6, "invalid_input",
                            "store_readonly")
            assert f"{store} is read-only" in error["message"]
            assert error["status"] == 422
        assert listed(hivelite(store, "--json", "list")) == [1, 2]
        assert store.read_bytes() == data
    assert rawsql.snapshot_file(store) == before


def test_a_read_only_folder_is_store_readonly_naming_the_folder(store: Path) -> None:
    """SQLite keeps ``-wal`` and ``-shm`` beside the store: a folder it cannot write in is
    a read-only store, even for reading, and the message says the folder."""
    before = files_of(store.parent)
    with read_only(store.parent):
        for verb in (("list",), ("handoff", *OWN, *TASK)):
            error = refused(hivelite(store, "--json", *verb), 6, "invalid_input",
                            "store_readonly")
            assert f"the folder {store.parent} is read-only" in error["message"]
        refused(hivelite(store.parent / "new.db", "--json", "init"), 6, "invalid_input",
                "store_readonly")
    assert files_of(store.parent) == before


def test_a_read_only_filesystem_is_store_readonly(tmp_path: Path) -> None:
    with small_disk(tmp_path / "mnt") as disk:
        path = make_store(disk / "store.db")
        before = files_of(disk)
        done = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr
        for verb in (("list",), ("handoff", *OWN, *TASK)):
            refused(hivelite(path, "--json", *verb), 6, "invalid_input", "store_readonly")
        for new, more in ((disk / "new.db", ()), (disk / "sub" / "new.db", ("--parents",))):
            error = refused(hivelite(new, "--json", "init", *more), 6, "invalid_input",
                            "store_readonly")
            assert "Read-only file system" in error["message"]
        assert files_of(disk) == before


def test_the_library_raises_store_readonly(store: Path) -> None:
    with read_only(store), Hive.open(store, clock=ManualClock(START)) as hive:
        assert [v.number for v in hive.list().items] == [1, 2]
        with pytest.raises(StoreReadonly) as err:
            own_task(hive)
    assert isinstance(err.value, StoreError) and err.value.exit_code == 6


# -- another program holding the store -------------------------------------------------

HOLDER = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.execute("PRAGMA locking_mode = EXCLUSIVE")
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE meta SET value = value WHERE key = 'no such key'")
conn.execute("COMMIT")  # in EXCLUSIVE mode the lock outlives the transaction
print("holding", flush=True)
sys.stdin.read()
"""


@contextmanager
def held_exclusively(path: Path) -> Iterator[None]:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=TIMEOUT)


def test_a_store_held_exclusively_is_store_busy_at_open(store: Path) -> None:
    """Another program in ``locking_mode=EXCLUSIVE`` holds the file from its first write:
    opening the store, to read or to write, is ``store_busy`` (exit 1) once the busy
    timeout has passed."""
    before = rawsql.snapshot_file(store)
    with held_exclusively(store):
        for verb in (("list",), ("show", "1"), ("handoff", *OWN, *TASK)):
            error = refused(hivelite(store, "--json", *verb, code=SHORT_BUSY), 1,
                            "store_busy", "busy")
            assert f"another program holds {store} locked" in error["message"]
            assert error["status"] == 503
    assert rawsql.snapshot_file(store) == before
    assert listed(hivelite(store, "--json", "list")) == [1, 2]


def test_the_library_raises_store_busy_at_open(store: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from hivelite.store import sqlite as store_module

    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 300)
    with held_exclusively(store), pytest.raises(StoreBusy) as err:
        Hive.open(store)
    assert not isinstance(err.value, StoreError)


# -- a damaged file ----------------------------------------------------------------------

HEADER_DAMAGE = {
    0: "not_a_store",  # the magic string
    8: "not_a_store",
    16: "store_corrupt",  # page size, format versions
    24: None,  # change counter, size in pages (size 0 falls back to the file's size)
    28: "store_corrupt",  # size in pages, first freelist page
    32: None,  # freelist, schema cookie (stale cookies are re-read)
    40: "store_corrupt",  # schema cookie, schema format
    48: None,  # cache size, largest root page (0 when not auto-vacuum is checked elsewhere)
    56: "store_corrupt",  # text encoding, user_version
    64: "store_corrupt",  # incremental vacuum, application id
    72: None,  # reserved
    80: None,  # reserved
    88: None,  # reserved, version-valid-for
    96: "store_corrupt",  # SQLite version, first page's b-tree header
}


def damaged_copy(store: Path, offset: int, folder: Path) -> Path:
    copy = folder / f"damaged-{offset}.db"
    data = bytearray(store.read_bytes())
    data[offset:offset + 8] = b"\xa5" * 8
    copy.write_bytes(bytes(data))
    return copy


@pytest.mark.parametrize("offset", sorted(HEADER_DAMAGE))
def test_eight_damaged_bytes_in_the_header(store: Path, tmp_path: Path, offset: int) -> None:
    """Eight bytes of the 100-byte header overwritten: a file SQLite cannot read is
    ``store_corrupt`` (``not_a_store`` when the magic string itself is gone), a field SQLite
    does not need changes nothing; either way the file is left exactly as it was."""
    copy = damaged_copy(store, offset, tmp_path)
    data = copy.read_bytes()
    ran = hivelite(copy, "--json", "list")
    expected = HEADER_DAMAGE[offset]
    if expected is None:
        assert listed(ran) == [1, 2]
    else:
        error = refused(ran, 6, "invalid_input", expected)
        assert str(copy) in error["message"] and "left it untouched" in error["message"]
    assert copy.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["store.db", copy.name])


def test_damage_anywhere_is_a_store_error_or_nothing(store: Path, tmp_path: Path) -> None:
    """Eight bytes overwritten every 4 bytes of the header, and at the start and in the
    middle of every page: opening the store and reading every task either works or raises
    a hivelite error (never a raw SQLite error); in the header only ``not_a_store`` or
    ``store_corrupt``; the file is left as it was."""
    size = store.stat().st_size
    page = 4096
    header = range(0, 100, 4)
    offsets = sorted({*header, *range(page, size, page), *range(page + 2048, size, page)})
    reasons: dict[int, str | None] = {}
    for offset in offsets:
        copy = damaged_copy(store, offset, tmp_path)
        data = copy.read_bytes()
        reasons[offset] = None
        try:
            with Hive.open(copy, clock=ManualClock(START)) as hive:
                hive.list()
                for number in (1, 2):
                    hive.get(number)
                    hive.history(number)
        except HiveliteError as error:  # a damaged index may hide a task: not_found
            reasons[offset] = error.reason
        assert copy.read_bytes() == data, offset
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
    assert {reasons[o] for o in header} == {None, "not_a_store", "store_corrupt"}, reasons
    assert list(reasons.values()).count("store_corrupt") >= 10, reasons


def test_a_damaged_page_found_while_reading_is_store_corrupt(store: Path) -> None:
    """The damage is past the header and the schema: the store opens, and the read that
    meets the page is ``store_corrupt`` (a StoreError: the file, not the caller)."""
    with Hive.open(store, clock=ManualClock(START)) as hive:
        root = hive.store.conn.execute(  # type: ignore[attr-defined]
            "SELECT rootpage FROM sqlite_schema WHERE name = 'packets'").get
    data = bytearray(store.read_bytes())
    start = (root - 1) * 4096
    data[start:start + 8] = b"\xa5" * 8
    store.write_bytes(bytes(data))
    with Hive.open(store, clock=ManualClock(START)) as hive, \
            pytest.raises(StoreCorrupt) as err:
        hive.list()
    assert err.value.reason == "store_corrupt" and str(store) in err.value.message
    error = refused(hivelite(store, "--json", "show", "1"), 6, "invalid_input",
                    "store_corrupt")
    assert "malformed" in error["message"]


# -- JSON nested too deep ------------------------------------------------------------------


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_json_depth_counts_nesting_not_brackets_in_strings() -> None:
    assert json_depth('{"a": [1, {"b": []}]}') == 4
    assert json_depth('"[[["') == 0 and json_depth("") == 0
    assert json_depth('{"a": "[[[[{{{{", "b": "\\"[[[", "c": "\\\\"}') == 1
    assert json_depth('["\\\\", [["x"]]]') == 3
    assert json_depth(deep(MAX_JSON_DEPTH)) == MAX_JSON_DEPTH
    assert json_depth(deep(MAX_JSON_DEPTH + 1)) == MAX_JSON_DEPTH + 1
    assert json_depth(deep(100_000)) == MAX_JSON_DEPTH + 1  # it stops counting there


def test_a_packet_nested_100000_deep_is_refused_naming_the_option(store: Path,
                                                                   tmp_path: Path) -> None:
    before = rawsql.snapshot_file(store)
    packet = tmp_path / "packet.json"
    packet.write_text(deep(100_000))
    error = refused(hivelite(store, "--json", "handoff", *OWN, "--packet", str(packet)), 6,
                    "invalid_input", "too_deep")
    assert error["field"] == "--packet" and "--packet" in error["message"]
    nested = {"task": "Fix the login bug", "deliverable_type": "code",
              "acceptance_criteria": ["ok"], "context": ""}
    packet.write_text(json.dumps(nested)[:-1] + ', "extra": ' + deep(65) + "}")
    refused(hivelite(store, "--json", "handoff", *OWN, "--packet", str(packet)), 6,
            "invalid_input", "too_deep")
    assert rawsql.snapshot_file(store) == before


def test_evidence_nested_100000_deep_is_refused_naming_the_option(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        lease = hive.claim(CODER, own_task(hive))
    before = rawsql.snapshot_file(path)
    evidence = tmp_path / "evidence.json"
    evidence.write_text(deep(100_000))
    error = refused(hivelite(path, "--json", "submit", "1", *AGENT, "--lease", lease.lease_id,
                             "--token", str(lease.fencing_token), "--summary", "done",
                             "--evidence-file", str(evidence)),
                    6, "invalid_input", "too_deep")
    assert error["field"] == "--evidence-file"
    assert rawsql.snapshot_file(path) == before


# -- numbers and times beyond their range -----------------------------------------------


def test_list_after_a_number_beyond_64_bits_is_a_usage_error(store: Path) -> None:
    for after in ("99999999999999999999", "-1"):
        ran = hivelite(store, "--json", "list", "--after", after)
        assert ran.code == 2, ran.err
        assert ran.doc()["error"]["code"] == "usage"
        assert "--after" in ran.doc()["error"]["message"] and "Traceback" not in ran.err
    assert listed(hivelite(store, "--json", "list", "--after", str(2**63 - 1))) == []
    refused(hivelite(store, "--json", "show", "99999999999999999999"), 5, "not_found",
            "invalid_ref")  # more digits than any task number has
    refused(hivelite(store, "--json", "show", "9" * 5000), 5, "not_found", "invalid_ref")
    refused(hivelite(store, "--json", "show", "9999999999999999999"), 5, "not_found",
            "no_such_task")


def test_the_library_lists_after_any_integer(store: Path) -> None:
    with Hive.open(store, clock=ManualClock(START)) as hive:
        assert hive.list(cursor=10**20).items == []
        assert hive.list(cursor=2**63 - 1).items == []
        assert [v.number for v in hive.list(cursor=-(10**20)).items] == [1, 2]


def test_a_lease_ending_after_year_9999_is_invalid_input(store: Path) -> None:
    before = rawsql.snapshot_file(store)
    for verb in (("claim", "1", *AGENT), ("claim", "1", *AGENT, "--minutes", "5")):
        error = refused(hivelite(store, "--json", *verb, now="9999-12-31T23:56:00Z"), 6,
                        "invalid_input", "time_out_of_range")
        assert "year 9999" in error["message"]
    assert rawsql.snapshot_file(store) == before
    # 23:50 plus ten minutes still fits in the year
    assert hivelite(store, "--json", "claim", "1", *AGENT, now="9999-12-31T23:49:59Z").code == 0


def test_renew_and_resume_past_year_9999_are_invalid_input(tmp_path: Path) -> None:
    clock = ManualClock("9999-12-31T23:40:00Z")
    path = tmp_path / "store.db"
    with Hive.open(path, owner="ana", clock=clock) as hive:
        number = own_task(hive)
        lease = hive.claim(CODER, number, minutes=15)
        hive.checkpoint(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                        progress="started")
        hive.pause(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                   on="human", reason="which colour?")
        clock.advance(minutes=10)
        before = rawsql.snapshot_file(path)
        for call in (lambda: hive.resume(CODER, number, minutes=15),
                     lambda: hive.resume(CODER, number, minutes=10)):
            with pytest.raises(InvalidInput) as err:
                call()
            assert err.value.reason == "time_out_of_range"
        assert rawsql.snapshot_file(path) == before
        lease = hive.resume(CODER, number, minutes=5)
        clock.advance(minutes=4)
        with pytest.raises(InvalidInput) as err:
            hive.renew(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                       minutes=15)
        assert err.value.reason == "time_out_of_range"


def test_hivelite_now_beyond_year_9999_in_utc_is_invalid_now(store: Path) -> None:
    error = refused(hivelite(store, "--json", "list", now="9999-12-31T23:00:00-05:00"), 6,
                    "invalid_input", "invalid_now")
    assert error["field"] == "HIVELITE_NOW"


# -- usage that would overflow ------------------------------------------------------------


@pytest.mark.parametrize(("field", "value"), [
    ("tokens", 2**63), ("tokens", MAX_USAGE["tokens"] + 1),
    ("usd_micros", 2**64), ("usd_micros", MAX_USAGE["usd_micros"] + 1)])
def test_usage_beyond_its_bound_is_refused_naming_the_field(tmp_path: Path, field: str,
                                                            value: int) -> None:
    path = tmp_path / "store.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        before = rawsql.snapshot_file(path)
        fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
        for call in (lambda: hive.update(CODER, number, **fence, summary="x",
                                         **{field: value}),
                     lambda: hive.submit(CODER, number, **fence, summary="done",
                                         evidence=[{"kind": "note", "summary": "ok"}],
                                         **{field: value})):
            with pytest.raises(InvalidInput) as err:
                call()
            assert (err.value.reason, err.value.extra["field"]) == ("invalid_usage", field)
        assert rawsql.snapshot_file(path) == before
        option = "--" + field.replace("_", "-")
        error = refused(hivelite(path, "--json", "update", "1", *AGENT, "--lease",
                                 lease.lease_id, "--token", str(lease.fencing_token),
                                 "--summary", "x", option, str(value)),
                        6, "invalid_input", "invalid_usage")
        assert error["field"] == field and field in error["message"]
        assert rawsql.snapshot_file(path) == before
        hive.update(CODER, number, **fence, summary="at the bound",
                    **{field: MAX_USAGE[field]})


@contextmanager
def usage_rule_aside(raw: apsw.Connection) -> Iterator[None]:
    """The store's bounds on usage rows (migration 11) set aside, and put back as they
    were: the rows an older store, or a hand with the file, may hold."""
    rule = raw.execute("SELECT sql FROM sqlite_schema WHERE name = 'updates_bounded'").get
    raw.execute("DROP TRIGGER updates_bounded")
    try:
        yield
    finally:
        raw.execute(rule)


@pytest.mark.parametrize("updates", [3, 22])
def test_sums_of_huge_usage_written_by_raw_sql_read_exactly(store: Path, updates: int) -> None:
    """Rows of 2^62 tokens written by raw SQL (the library refuses them, and since
    migration 11 the store too, unless its rule is set aside): 22 of them overflow
    SQLite's sum, so the view adds them exactly in Python instead; ``list`` and ``show``
    keep working."""
    raw = rawsql.connect(store)
    with usage_rule_aside(raw):
        for _ in range(updates):
            raw.execute("INSERT INTO updates(task, at, actor, summary, tokens, usd_micros)"
                        " VALUES (1, ?, 'ana/coder', 'huge', ?, ?)", (START, 2**62, 2**62))
    raw.close()
    ran = hivelite(store, "--json", "show", "1")
    assert ran.code == 0, ran.err
    assert ran.doc()["usage"] == {"tokens": updates * 2**62, "usd_micros": updates * 2**62}
    assert listed(hivelite(store, "--json", "list")) == [1, 2]
    assert hivelite(store, "list").code == 0


# -- a row raw SQL left unreadable ----------------------------------------------------------

@pytest.fixture(params=["not json", '{"bug": 1}', "[1, 2]", '["ok", null]'])
def damaged_row(store: Path, request: pytest.FixtureRequest) -> Path:
    """Task 2's labels overwritten by raw SQL with text that is not JSON, or JSON that is
    not a list of labels (views are built without validating, so the view checks what
    the triggers do not); task 3 fine."""
    with Hive.open(store, clock=ManualClock(START)) as hive:
        own_task(hive)
    raw = rawsql.connect(store)
    raw.execute("UPDATE tasks SET labels = ?, fields_version = fields_version + 1"
                " WHERE number = 2", (request.param,))
    raw.close()
    return store


def test_a_damaged_row_is_reported_and_the_rest_listed(damaged_row: Path) -> None:
    ran = hivelite(damaged_row, "--json", "list")
    assert listed(ran) == [1, 3]
    damaged = ran.doc()["damaged"]
    assert [d["number"] for d in damaged] == [2] and damaged[0]["error"]
    assert "task 2" in ran.err and "cannot be read" in ran.err
    human = hivelite(damaged_row, "list")
    assert human.code == 0 and "task 2" in human.err
    assert [line.split()[0] for line in human.out.splitlines()[1:]] == ["1", "3"]


def test_showing_a_damaged_row_is_store_corrupt_naming_it(damaged_row: Path) -> None:
    error = refused(hivelite(damaged_row, "--json", "show", "2"), 6, "invalid_input",
                    "store_corrupt")
    assert "task 2" in error["message"]
    assert hivelite(damaged_row, "--json", "show", "3").code == 0


def test_a_non_integer_usage_row_does_not_break_the_sums(store: Path) -> None:
    """Text where a count belongs (raw SQL) is left out of the task's total; the store's
    reads go on (the row's own view reports it: see the damaged-row tests)."""
    raw = rawsql.connect(store)
    for _ in range(21):
        raw.execute("INSERT INTO updates(task, at, actor, summary, tokens) VALUES"
                    " (1, ?, 'ana/coder', 'n', 5)", (START,))
    with usage_rule_aside(raw):
        for odd in ("many", 2.5):
            raw.execute("INSERT INTO updates(task, at, actor, summary, tokens) VALUES"
                        " (1, ?, 'ana/coder', 'odd', ?)", (START, odd))
        for tokens in (7, "lots", 2.5):
            raw.execute("INSERT INTO updates(task, at, actor, summary, tokens) VALUES"
                        " (2, ?, 'ana/coder', 'n', ?)", (START, tokens))
    raw.close()
    sqlite = SqliteStore(store, create=False)
    try:
        with sqlite.read() as reader:
            many, few = (reader.view(n) for n in (1, 2))
    finally:
        sqlite.close()
    assert many is not None and few is not None
    assert (len(many.updates), many.tokens) == (20, 21 * 5)  # past 20 updates: SQLite sums
    assert (len(few.updates), few.tokens) == (3, 7)


# -- text that is not UTF-8, and control characters ----------------------------------------


def test_an_argument_that_is_not_utf8_is_invalid_input(store: Path) -> None:
    before = rawsql.snapshot_file(store)
    # the command line is --db STORE ARGS: the bad argument is the 6th, the 12th
    for args, where, shown in (
            ((b"--json", b"list", b"--project", b"\xff"), 6, "\\xff"),
            ((b"--json", b"handoff", *(a.encode() for a in OWN), b"--task",
              b"Fix the \xfe\x1b bug", b"--accept", b"ok"), 12, "Fix the \\xfe\\x1b bug")):
        error = refused(hivelite(store, *args), 6, "invalid_input", "invalid_utf8")
        assert error["field"] == f"argument {where}"
        assert error["message"] == f"argument {where} ({shown}) is not UTF-8 text"
    error = refused(hivelite(store, "--json", "list", env={"HIVELITE_AGENT": "\udcfe"}), 6,
                    "invalid_input", "invalid_utf8")
    assert error["field"] == "$HIVELITE_AGENT"
    assert rawsql.snapshot_file(store) == before


def test_error_messages_on_stderr_escape_control_characters(tmp_path: Path) -> None:
    """A path, an argument or a row may carry BEL, CR or ESC: stderr shows them escaped;
    the JSON document keeps the text as it is (escaped by JSON itself)."""
    nasty = tmp_path / "notes\x1b]0;pwned\x07\r.txt"
    nasty.write_text("not a database\n")
    ran = hivelite(nasty, "--json", "list")
    error = refused(ran, 6, "invalid_input", "not_a_store")
    assert str(nasty) in error["message"]
    assert "\\x1b]0;pwned\\x07\\r.txt" in ran.err
    assert not set(ran.err) & {"\x1b", "\x07", "\r"}
    usage = hivelite(tmp_path / "store.db", "list", "extra\x1b[2J\x07")
    assert usage.code == 2 and "extra\\x1b[2J\\x07" in usage.err
    assert not set(usage.err) & {"\x1b", "\x07"}


# -- stores are made private --------------------------------------------------------------


def test_init_through_a_dangling_symlink_makes_a_private_store(tmp_path: Path) -> None:
    link = tmp_path / "link.db"
    target = tmp_path / "elsewhere" / "real.db"
    link.symlink_to(target)
    ran = hivelite(link, "--json", "init", "--owner", "ana", "--parents", umask=0)
    assert ran.code == 0, ran.err
    assert link.is_symlink() and target.is_file()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


class Refuser:
    @hookimpl
    def hivelite_startup(self, hive: Any) -> None:
        raise RuntimeError("not today")


def test_a_store_refused_at_startup_through_a_symlink_leaves_the_link(tmp_path: Path) -> None:
    """The store a refused start-up takes away again is the file the link points to."""
    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "real.db")
    with pytest.raises(PluginError):
        Hive.open(link, owner="ana", plugins=[Refuser()])
    assert link.is_symlink() and not link.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.db"]


@pytest.mark.parametrize("through_link", [False, True])
def test_init_onto_an_existing_empty_file_makes_it_private(tmp_path: Path,
                                                          through_link: bool) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    empty.chmod(0o644)
    path = empty
    if through_link:
        path = tmp_path / "link.db"
        path.symlink_to(empty)
    assert hivelite(path, "--json", "init", "--owner", "ana", umask=0).code == 0
    assert stat.S_IMODE(empty.stat().st_mode) == 0o600
    assert listed(hivelite(path, "--json", "list")) == []


def test_a_store_made_under_umask_0_is_private(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        with Hive.open(tmp_path / "open.db", owner="ana"):
            pass
        (tmp_path / "empty.db").touch()
        with Hive.open(tmp_path / "empty.db", owner="ana"):
            pass
    finally:
        os.umask(old)
    for name in ("open.db", "empty.db"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600


def test_an_empty_file_that_cannot_be_made_private_is_refused(tmp_path: Path) -> None:
    """Someone else's empty file, writable by all: this user cannot chmod it, so it does
    not become a store readable by its owner (``not_private``), and stays as it was."""
    if not ROOT:
        pytest.skip("needs root, to act as another user on root's file")
    try:
        import pwd
        nobody = pwd.getpwnam("nobody")
    except (ImportError, KeyError):
        pytest.skip("no user 'nobody'")
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o777)
    folder.chmod(0o1777)
    tmp_path.chmod(0o755)
    empty = folder / "empty.db"
    empty.touch()
    empty.chmod(0o666)

    def as_nobody() -> None:
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)

    clean = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    try:
        done = subprocess.run([sys.executable, "-m", "hivelite", "--db", str(empty), "--json",
                               "init", "--owner", "ana"], capture_output=True, text=True,
                              env={**clean, "HIVELITE_NOW": START}, timeout=TIMEOUT,
                              preexec_fn=as_nobody, cwd=folder)
    except PermissionError as exc:
        pytest.skip(f"user nobody cannot run this python: {exc}")
    if "ModuleNotFoundError" in done.stderr or "Permission denied" in done.stderr:
        pytest.skip(f"user nobody cannot run this checkout's python: {done.stderr[-200:]}")
    ran = Ran(done.returncode, done.stdout, done.stderr)
    error = refused(ran, 6, "invalid_input", "not_private")
    assert "0600" in error["message"]
    assert empty.stat().st_size == 0 and stat.S_IMODE(empty.stat().st_mode) == 0o666
    assert sorted(p.name for p in folder.iterdir()) == ["empty.db"]


def test_an_immutable_empty_file_is_store_readonly(tmp_path: Path) -> None:
    """An empty file this process cannot write (nor chmod) is not made a store."""
    empty = tmp_path / "empty.db"
    empty.touch()
    empty.chmod(0o644)
    with read_only(empty):
        error = refused(hivelite(empty, "--json", "init", "--owner", "ana"), 6,
                        "invalid_input", "store_readonly")
        assert f"{empty} is read-only" in error["message"]
        assert empty.stat().st_size == 0
    assert stat.S_IMODE(empty.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def test_the_reasons_are_in_the_hierarchy() -> None:
    assert issubclass(StoreReadonly, StoreError) and issubclass(StoreCorrupt, StoreError)
    assert not issubclass(StoreFull, StoreError)
    assert StoreReadonly("x").to_dict() == {"status": 422, "code": "invalid_input",
                                            "reason": "store_readonly", "message": "x"}
    assert StoreCorrupt("y").reason == "store_corrupt"
    assert (StoreFull("disk_full").status, StoreFull("disk_full").exit_code) == (507, 1)


def test_a_file_that_is_not_utf8_is_invalid_utf8_naming_its_line(store: Path,
                                                                 tmp_path: Path) -> None:
    """Bulk handoff, import and --packet read bytes, so a stray byte is a documented
    refusal naming the line, not a decoder's traceback; nothing is written."""
    bad = tmp_path / "bad.jsonl"
    good = json.dumps({"requester": "ana/planner", "assignee": "ana/coder",
                       "project": "demo", "packet": {"task": "Write it",
                                                     "deliverable_type": "code",
                                                     "acceptance_criteria": ["ok"]}})
    bad.write_bytes(good.encode() + b'\n{"task": "caf\xe9"}\n')
    before = listed(hivelite(store, "--json", "list"))
    ran = hivelite(store, "--json", "handoff", "--from-jsonl", str(bad))
    error = refused(ran, 6, "invalid_input", "invalid_utf8")
    assert "line 2 is not UTF-8 text" in error["message"] and "0xe9" in error["message"]
    assert listed(hivelite(store, "--json", "list")) == before
    bad.write_bytes(b"\xff\xfe\n")
    ran = hivelite(tmp_path / "new.db", "--json", "import", str(bad))
    refused(ran, 6, "invalid_input", "invalid_utf8")
    assert not (tmp_path / "new.db").exists()
    packet = tmp_path / "packet.json"
    packet.write_bytes(b'{"task": "\xff"}')
    ran = hivelite(store, "--json", "handoff", "--packet", str(packet), "--requester",
                   "ana/planner", "--assignee", "ana/coder", "--project", "demo")
    assert "--packet is not UTF-8" in refused(ran, 6, "invalid_input", "invalid_utf8")[
        "message"]
