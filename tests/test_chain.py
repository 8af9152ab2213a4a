"""The journal as a hash chain (issue 14, item 3): every row carries the hash of the row
before it and of its own content, the first from the store's identity; ``doctor`` finds a
changed, removed, inserted or foreign row, and a head noted earlier finds a rewritten
history whose hashes were all recomputed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from hivelite import Hive, ManualClock
from hivelite.store.chain import CONTENT, HASH_CHARS, chain_all, link
from hivelite.store.doctor import Finding, diagnose, diagnose_file
from hivelite.store.keys import load_key
from hivelite.store.transfer import export_lines, import_lines

from .conftest import CODER, HANG_S, START, own_task
from .test_doctor import busy_store

DATA = Path(__file__).parent / "data"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    made = tmp_path / "chain.db"
    busy_store(made)
    return made


def chain_finding(path: Path, head: str | None = None) -> dict[str, Finding]:
    return {f.check: f for f in diagnose_file(path, head=head)}


def rewrite(path: Path, *statements: str) -> None:
    """Raw SQL with the journal's refusals set aside and put back exactly as they were: the
    schema check then sees nothing, so only the chain can tell."""
    conn = apsw.Connection(str(path))
    kept = list(conn.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'trigger'"
                             " AND tbl_name = 'journal'"))
    with conn:
        for name, _ in kept:
            conn.execute(f"DROP TRIGGER {name}")
        for statement in statements:
            conn.execute(statement)
        for _, sql in kept:
            conn.execute(sql)
    conn.close()


def rechain(path: Path, keyed: bool = False) -> None:
    """What a careful forger does after an edit: recompute every hash (with the owner's
    key when ``keyed``: one who holds the file and the key)."""
    conn = apsw.Connection(str(path))
    kept = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'journal_no_update'").get
    key = load_key(conn.execute("SELECT value FROM meta WHERE key = 'store_id'").get)
    with conn:
        conn.execute("DROP TRIGGER journal_no_update")
        chain_all(conn, key if keyed else None)
        conn.execute(kept)
    conn.close()


def head_of(path: Path) -> str:
    data = chain_finding(path)["hash chain"].data
    assert data is not None
    return str(data["head"])


def test_every_row_follows_from_the_one_before_the_first_from_the_store_identity(
        path: Path) -> None:
    conn = apsw.Connection(str(path))
    identity = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").get
    rows = list(conn.execute(f"SELECT seq, hash, {CONTENT} FROM journal ORDER BY seq"))
    assert len(identity) == 32 and len(rows) > 20
    key = load_key(identity)
    assert key is not None and key.keyed_from == 1
    before = identity
    for _seq, stored, *content in rows:  # the link, then its seal under the owner's key
        assert stored[:HASH_CHARS] == link(before, content) and len(stored) == 2 * HASH_CHARS
        assert stored == key.seal(_seq, stored[:HASH_CHARS])
        before = stored
    found = chain_finding(path)["hash chain"]
    assert found.ok and f"{len(rows)} journal row(s)" in found.detail
    assert "sealed with the owner's key from row 1 on" in found.detail
    assert found.data == {"rows": len(rows), "head": f"{rows[-1][0]}:{rows[-1][1]}",
                          "store_id": identity, "keyed": True, "key": str(key.path),
                          "named": True}


def test_two_stores_have_two_identities_and_so_two_chains(tmp_path: Path) -> None:
    hashes = []
    for name in ("a.db", "b.db"):
        with Hive.open(tmp_path / name, owner="ana", clock=ManualClock(START)) as hive:
            own_task(hive)
        conn = apsw.Connection(str(tmp_path / name))
        hashes.append(conn.execute("SELECT hash FROM journal WHERE seq = 1").get)
    assert hashes[0] != hashes[1]  # the same handoff at the same time, another store


@pytest.mark.parametrize(("name", "change", "at"), [
    ("a reason rewritten", "UPDATE journal SET reason = 'approved' WHERE seq = 5", 5),
    ("an actor renamed", "UPDATE journal SET actor = 'ana/thief' WHERE seq = 7", 7),
    ("a row removed", "DELETE FROM journal WHERE seq = 6", 7),
    ("a row inserted", "INSERT INTO journal(seq, task, at, actor, from_state, to_state,"
     " reason, hash) SELECT 5000, task, at, actor, to_state, to_state, 'note',"
     " hash FROM journal WHERE seq = (SELECT max(seq) FROM journal)", 5000),
    ("two rows swapped", "UPDATE journal SET seq = -seq WHERE seq IN (8, 9);"
     " UPDATE journal SET seq = CASE seq WHEN -8 THEN 9 ELSE 8 END WHERE seq < 0", 8),
    ("a hash replaced", "UPDATE journal SET hash = CASE substr(hash, 1, 1) WHEN '0' THEN '1'"
     " ELSE '0' END || substr(hash, 2) WHERE seq = 3", 3),
    ("the identity replaced", "DROP TRIGGER meta_identity_fixed; UPDATE meta SET value ="
     " 'ffffffffffffffffffffffffffffffff' WHERE key = 'store_id'", 1),
])
def test_a_changed_history_breaks_the_chain_where_it_was_changed(
        path: Path, name: str, change: str, at: int) -> None:
    assert chain_finding(path)["hash chain"].ok
    if "meta_identity_fixed" in change:  # not a journal trigger: restore it by hand
        conn = apsw.Connection(str(path))
        sql = conn.execute("SELECT sql FROM sqlite_schema WHERE name ="
                           " 'meta_identity_fixed'").get
        with conn:
            conn.execute(change)
            conn.execute(sql)
        conn.close()
    else:
        rewrite(path, *change.split(";"))
    found = chain_finding(path)
    assert found["schema"].ok, name  # the triggers are all back: only the chain can tell
    assert not found["hash chain"].ok, name
    assert found["hash chain"].detail.startswith(f"journal row {at} "), found["hash chain"]


def test_a_row_changed_with_its_own_hash_recomputed_breaks_at_the_next(path: Path) -> None:
    conn = apsw.Connection(str(path))
    before = conn.execute("SELECT hash FROM journal WHERE seq = 4").get
    content = list(conn.execute(f"SELECT {CONTENT} FROM journal WHERE seq = 5").fetchone())
    conn.close()
    content[list(map(str.strip, CONTENT.split(","))).index("reason")] = "approved"
    forged = link(before, content) + "0" * HASH_CHARS  # a seal made up: the key is not known
    rewrite(path, f"UPDATE journal SET reason = 'approved', hash = '{forged}' WHERE seq = 5")
    detail = chain_finding(path)["hash chain"].detail
    assert detail.startswith("journal row 5 is sealed with another key"), detail
    assert "journal row 6 does not follow" in detail


def test_without_the_key_a_row_changed_with_its_own_hash_recomputed_breaks_at_the_next(
        path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = apsw.Connection(str(path))
    before = conn.execute("SELECT hash FROM journal WHERE seq = 4").get
    content = list(conn.execute(f"SELECT {CONTENT} FROM journal WHERE seq = 5").fetchone())
    conn.close()
    content[list(map(str.strip, CONTENT.split(","))).index("reason")] = "approved"
    forged = link(before, content) + "0" * HASH_CHARS
    rewrite(path, f"UPDATE journal SET reason = 'approved', hash = '{forged}' WHERE seq = 5")
    monkeypatch.setenv("HIVELITE_KEYS", str(tmp_path / "elsewhere"))  # no key here
    found = chain_finding(path)["hash chain"]
    assert found.detail.startswith("journal row 6 does not follow"), found.detail
    assert "journal row 5" not in found.detail


def test_a_rewritten_history_with_every_hash_recomputed_fails_against_a_noted_head(
        path: Path) -> None:
    noted = head_of(path)
    assert chain_finding(path, head=noted)["head"].ok
    rewrite(path, "UPDATE journal SET actor = 'ana/thief' WHERE seq = 2")
    rechain(path, keyed=True)  # a forger who holds the owner's key too
    found = chain_finding(path, head=noted)
    assert found["hash chain"].ok  # sealed and self-consistent: only a noted head can tell
    assert not found["head"].ok
    assert "the history up to it was rewritten" in found["head"].detail


def test_a_noted_head_outlives_later_writes(path: Path) -> None:
    noted = head_of(path)
    with Hive.open(path, clock=ManualClock(START)) as hive:
        own_task(hive)
        hive.claim(CODER, own_task(hive))
    found = chain_finding(path, head=noted)
    assert found["hash chain"].ok and found["head"].ok
    assert head_of(path) != noted


@pytest.mark.parametrize(("head", "says"), [
    ("nonsense", "is not a head as doctor prints it"),
    ("99999:" + "0" * 32, "has no row 99999"),
    ("3:" + "0" * 32, "now has hash"),
])
def test_a_head_that_does_not_fit_is_named(path: Path, head: str, says: str) -> None:
    found = chain_finding(path, head=head)["head"]
    assert not found.ok and says in found.detail


@pytest.mark.parametrize("write", [
    "INSERT INTO journal(task, at, actor, from_state, to_state, reason, prev) SELECT"
    " number, updated_at, 'ana', state, state, 'note', last_seq FROM tasks WHERE number = 1",
    "UPDATE tasks SET state = 'cancelled', waiting_on = NULL, actor = 'ana', reason = 'raw'"
    " WHERE state = 'waiting' AND waiting_on = 'owner_approval'",
])
def test_a_legal_write_by_raw_sql_shows_as_written_outside_hivelite(
        path: Path, write: str) -> None:
    """The triggers let a legal move through from any connection; the chain still says the
    row did not come from hivelite."""
    conn = apsw.Connection(str(path))
    last = conn.execute("SELECT max(seq) FROM journal").get
    conn.execute(write)
    conn.close()
    found = chain_finding(path)
    assert found["replay"].ok and found["schema"].ok
    assert not found["hash chain"].ok
    assert found["hash chain"].detail.startswith(f"journal row {last + 1} ")


def test_writes_after_a_raw_row_chain_on_from_it(path: Path) -> None:
    """One foreign row is reported once: hivelite's later rows follow from its hash."""
    conn = apsw.Connection(str(path))
    conn.execute("INSERT INTO journal(task, at, actor, from_state, to_state, reason, prev)"
                 " SELECT number, updated_at, 'ana', state, state, 'note', last_seq FROM tasks"
                 " WHERE number = 1")
    foreign = conn.execute("SELECT max(seq) FROM journal").get
    conn.close()
    with Hive.open(path, clock=ManualClock(START)) as hive:
        own_task(hive)
    detail = chain_finding(path)["hash chain"].detail
    assert detail == f"journal row {foreign} carries no hash (written outside hivelite)"


def test_the_identity_and_the_chain_column_hold(path: Path) -> None:
    conn = apsw.Connection(str(path))
    for statement, reason in [
            ("UPDATE meta SET value = 'x' WHERE key = 'store_id'", "identity_fixed"),
            ("DELETE FROM meta WHERE key = 'store_id'", "owner_fixed"),
            ("INSERT OR REPLACE INTO meta(key, value) VALUES ('store_id', 'x')",
             "rows_are_kept"),
            ("UPDATE journal SET hash = NULL WHERE seq = 1", "append_only")]:
        with pytest.raises(apsw.ConstraintError, match=reason):
            conn.execute(statement)
    conn.close()


def test_an_upgraded_store_chains_the_journal_it_had(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    shutil.copyfile(DATA / "store-schema1.db", old)
    with Hive.open(old, clock=ManualClock("2026-11-30T11:01:00Z")):
        pass
    found = chain_finding(old)
    assert found["hash chain"].ok and found["replay"].ok, found


def test_an_export_from_before_the_chain_is_chained_on_import(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    shutil.copyfile(DATA / "store-schema1.db", old)
    source = apsw.Connection(str(old), flags=apsw.SQLITE_OPEN_READONLY)
    lines = list(export_lines(source))
    source.close()
    assert json.loads(lines[0])["schema_version"] == 1
    new = tmp_path / "new.db"
    from hivelite.store import SqliteStore
    store = SqliteStore(new)
    rows = import_lines(store.conn, lines, unsigned=True)  # (no head to sign then)
    store.close()
    assert rows == len(lines) - 1
    found = chain_finding(new)
    assert found["hash chain"].ok, found["hash chain"]
    assert "imported unsigned at" in found["hash chain"].detail


def test_an_import_keeps_the_exported_store_identity_and_head(path: Path,
                                                             tmp_path: Path) -> None:
    source = apsw.Connection(str(path))
    lines = list(export_lines(source))
    source.close()
    new = tmp_path / "copy.db"
    from hivelite.store import SqliteStore
    store = SqliteStore(new)
    import_lines(store.conn, lines)
    store.close()
    assert head_of(new) == head_of(path)
    assert chain_finding(new, head=head_of(path))["head"].ok


def test_concurrent_writers_keep_one_chain(tmp_path: Path) -> None:
    """Two processes handing off and claiming at once: each write takes the tip under the
    write lock, so the journal stays one chain."""
    store = tmp_path / "race.db"
    Hive.open(store, owner="ana").close()
    script = (
        "import sys\n"
        "from hivelite import Caller, Hive\n"
        "me = Caller.agent('ana/coder', sys.argv[2])\n"
        "packet = {'task': 'Write the parser', 'deliverable_type': 'code',"
        " 'acceptance_criteria': ['tests pass']}\n"
        "with Hive.open(sys.argv[1]) as hive:\n"
        "    for i in range(40):\n"
        "        r = hive.handoff(Caller.owner('ana'), requester='ana/planner',"
        " assignee='ana/coder', project='demo', packet=packet)\n"
        "        hive.claim(me, r.number)\n")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    workers = [subprocess.Popen([sys.executable, "-c", script, str(store), name], env=env)
               for name in ("laptop", "desktop")]
    assert [w.wait(timeout=HANG_S) for w in workers] == [0, 0]
    conn = apsw.Connection(str(store))
    found = {f.check: f for f in diagnose(conn)}
    assert conn.execute("SELECT count(*) FROM journal").get == 2 * 40 * 3
    assert found["hash chain"].ok, found["hash chain"]


def test_the_cli_prints_the_head_and_checks_one(path: Path) -> None:
    def doctor(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hivelite", "--db", str(path), *args,
                               "doctor"], capture_output=True, text=True, timeout=HANG_S)
    shown = doctor("--json")
    assert shown.returncode == 0, shown.stderr
    chain = {c["check"]: c for c in json.loads(shown.stdout)["checks"]}["hash chain"]
    noted = chain["head"]
    assert noted == head_of(path) and noted in doctor().stdout
    assert subprocess.run([sys.executable, "-m", "hivelite", "--db", str(path), "doctor",
                           "--head", noted], timeout=HANG_S).returncode == 0
    rewrite(path, "UPDATE journal SET reason = 'approved' WHERE seq = 5")
    rechain(path, keyed=True)
    failed = subprocess.run([sys.executable, "-m", "hivelite", "--db", str(path), "doctor",
                             "--head", noted], capture_output=True, text=True, timeout=HANG_S)
    assert failed.returncode == 6
    assert "failed: witnesses, head" in failed.stderr and "rewritten" in failed.stdout



FORGERIES = {
    "a guest approves its own held handoff": (
        "UPDATE tasks SET state = 'routed', waiting_on = NULL, actor = 'guest/scout',"
        " reason = NULL WHERE state = 'waiting' AND waiting_on = 'owner_approval'",
        "approve) was made by guest/scout"),
    "an agent cancels a task": (
        "UPDATE tasks SET state = 'cancelled', actor = 'ana/coder', reason = 'mine now',"
        " lease_id = NULL, lease_holder = NULL, lease_instance = NULL, lease_session = NULL,"
        " lease_expires = NULL"
        " WHERE number = (SELECT min(number) FROM tasks WHERE state = 'accepted')",
        "cancel_accepted) was made by ana/coder"),
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_move_made_by_one_who_may_not_make_it_fails_doctor_even_rechained(
        path: Path, forgery: str) -> None:
    statement, named = FORGERIES[forgery]
    conn = apsw.Connection(str(path))
    with pytest.raises(apsw.ConstraintError, match="forbidden_right:not_owner"):
        conn.execute(statement)  # the store refuses it (migration 11) ...
    rule = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'task_decided_by'").get
    conn.execute("DROP TRIGGER task_decided_by")  # ... unless its rule is set aside
    conn.execute(statement)
    conn.execute(rule)  # and put back as it was: the actor is doctor's to check
    conn.close()
    rechain(path, keyed=True)  # even by one who holds the key
    found = chain_finding(path)
    assert found["hash chain"].ok and found["replay"].ok
    assert not found["actors"].ok and named in found["actors"].detail, found["actors"]


def chained(lines: list[str]) -> list[str]:
    """An export's journal rows hashed again from its store's identity, as a forger who
    read ``store/chain.py`` does after editing the file."""
    items = [json.loads(line) for line in lines]
    before = next(i["row"]["value"] for i in items[1:]
                  if i["table"] == "meta" and i["row"]["key"] == "store_id")
    for item in items[1:]:
        if item["table"] == "journal":
            row = item["row"]
            row["hash"] = before = link(before, [row[c.strip()] for c in CONTENT.split(",")])
    return [json.dumps(i, sort_keys=True, ensure_ascii=False) for i in items]


def owner_changed(lines: list[str]) -> list[str]:
    """The export with another owner named in its facts, every hash right."""
    return chained([line.replace('"value": "ana"', '"value": "eve"')
                    if '"key": "owner"' in line else line for line in lines])


def test_an_export_whose_owner_was_changed_is_refused_and_nothing_is_imported(
        path: Path, tmp_path: Path) -> None:
    from hivelite.core.errors import InvalidInput
    from hivelite.store import SqliteStore

    lines = owner_changed(list(export_lines(apsw.Connection(str(path)))))
    assert any('"value": "eve"' in line for line in lines)
    store = SqliteStore(tmp_path / "copy.db")
    try:
        with pytest.raises(InvalidInput) as refused:
            import_lines(store.conn, lines)
        assert refused.value.reason == "import_unsound"
        assert "nothing was imported" in refused.value.message
        assert any(p.startswith("actors: ") and "made by ana, who may not" in p
                   for p in refused.value.extra["problems"])
        assert store.conn.execute("SELECT count(*) FROM journal").get == 0
        assert store.conn.execute("SELECT count(*) FROM tasks").get == 0
        with pytest.raises(InvalidInput) as kept:
            import_lines(store.conn, lines, keep_failed=True)
        assert kept.value.extra["kept"] is True and "--keep-failed" in kept.value.message
        assert store.conn.execute("SELECT count(*) FROM tasks").get > 0  # for a look
    finally:
        store.close()


@pytest.mark.slow
def test_the_cli_import_of_a_tampered_export_exits_6_and_leaves_no_store(
        path: Path, tmp_path: Path) -> None:
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join(owner_changed(list(export_lines(
        apsw.Connection(str(path)))))) + "\n")

    def imported(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hivelite", "--db", str(db), "import",
                               str(tampered), *args], capture_output=True, text=True,
                              timeout=HANG_S)

    refused = imported(tmp_path / "copy.db")
    assert refused.returncode == 6, refused.stderr
    assert "invalid_input/import_unsound" in refused.stderr and "actors" in refused.stderr
    assert not list(tmp_path.glob("copy.db*"))  # no store, no -wal, no -shm
    kept = imported(tmp_path / "kept.db", "--keep-failed")
    assert kept.returncode == 6 and "do not serve it" in kept.stderr
    assert (tmp_path / "kept.db").is_file()
