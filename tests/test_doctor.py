"""``doctor`` (issue 14): a sound store passes every check; each kind of damage fails the
check that looks for it, naming what it found."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest

from hivelite import Hive, ManualClock, StoreError
from hivelite.core.receipts import digest_of
from hivelite.store.doctor import diagnose, schema_problem

from . import pg, rawsql
from .conftest import CODER, HANG_S, OWNER, REVIEWER, START, held_task, own_task

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]
CHECKS = ["integrity_check", "schema", "hash chain", "replay", "actors", "fencing tokens",
          "leases and results", "queue", "controls", "policy", "results", "usage",
          "kept answers", "watches", "stored values",
          "witnesses"]


def busy_store(path: Path) -> None:
    """Tasks in most states, an expiry, a failed attempt, a held and a denied handoff."""
    clock = ManualClock(START)
    with Hive.open(path, owner="ana", clock=clock) as hive:
        done = own_task(hive)
        lease = hive.claim(CODER, done)
        hive.checkpoint(CODER, done, lease_id=lease.lease_id, token=lease.fencing_token,
                        progress="half")
        hive.update(CODER, done, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="more", tokens=1200, usd_micros=3400)
        clock.advance(minutes=11)
        hive.expire(OWNER)
        lease = hive.claim(CODER, done)
        hive.submit(CODER, done, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)
        hive.verify(REVIEWER, done, verdict="accept")
        hive.amend(OWNER, done, merge_commit="3f2a9c1")
        failed = own_task(hive)
        lease = hive.claim(CODER, failed)
        hive.submit(CODER, failed, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="no", evidence=EVIDENCE, outcome="failed")
        hive.claim(CODER, failed)
        hive.deny(OWNER, held_task(hive), reason="no")
        held_task(hive)
        paused = own_task(hive)
        lease = hive.claim(CODER, paused)
        hive.pause(CODER, paused, lease_id=lease.lease_id, token=lease.fencing_token,
                   on="human", reason="which API?")
        hive.resume(CODER, paused)
        # the owner's authority: a lifted veto, a live hold elsewhere, a budget, a policy
        veto = hive.veto(OWNER, paused, agent="ana/tester")
        hive.lift(OWNER, veto.id)
        hive.hold(OWNER, agent="ana/tester", reason="resting")
        hive.set_budget(OWNER, CODER.name, tasks=50, usd_micros=2_000_000)
        hive.set_policy(OWNER, "threshold", 2, project="web")
        spent = hive.add_token(OWNER, "ana/tester", instance="box")
        hive.revoke_token(OWNER, spent.id)
        hive.add_token(OWNER)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    made = tmp_path / "doctor.db"
    busy_store(made)
    return made


def findings(path: Path, quick: bool = False) -> dict[str, tuple[bool, str]]:
    conn = apsw.Connection(str(path))
    try:
        return {f.check: (f.ok, f.detail) for f in diagnose(conn, quick=quick)}
    finally:
        conn.close()


def test_a_sound_store_passes_every_check(path: Path) -> None:
    found = findings(path)
    assert list(found) == CHECKS
    assert all(ok for ok, _ in found.values()), found
    assert "5 task(s)" in found["replay"][1]
    assert next(iter(findings(path, quick=True))) == "quick_check"


def test_a_dropped_trigger_is_found(path: Path) -> None:
    conn = rawsql.connect(path)
    conn.execute("DROP TRIGGER task_move")
    assert schema_problem(conn) == "trigger task_move is missing"
    conn.close()
    ok, detail = findings(path)["schema"]
    assert not ok and "task_move is missing" in detail


def test_an_edited_trigger_and_a_foreign_index_are_found(path: Path) -> None:
    conn = rawsql.connect(path)
    conn.execute("DROP TRIGGER meta_kept")
    conn.execute("CREATE TRIGGER meta_kept BEFORE DELETE ON meta BEGIN SELECT 1; END")
    conn.execute("CREATE INDEX mine ON tasks(project)")
    conn.close()
    ok, detail = findings(path)["schema"]
    assert not ok
    assert "trigger meta_kept was changed" in detail and "index mine is not hivelite's" in detail


def test_a_state_changed_behind_the_journals_back_is_found(path: Path) -> None:
    conn = rawsql.connect(path)
    conn.execute("DROP TRIGGER task_journal")  # the journal no longer hears of moves
    conn.execute("UPDATE tasks SET state = 'cancelled', waiting_on = NULL, actor = 'ana'"
                 " WHERE state = 'waiting' AND waiting_on = 'owner_approval'")
    conn.close()
    found = findings(path)
    assert not found["replay"][0]
    assert "is cancelled; its journal leads to waiting" in found["replay"][1]


def test_queue_counts_that_lie_are_found(path: Path) -> None:
    """An open-dependency count or an attempt count that raw SQL changed would make next
    hand out a blocked task or skip a good one; doctor names each."""
    with Hive.open(path, clock=ManualClock(START)) as hive:
        blocked = own_task(hive, packet={"task": "Write the parser", "deliverable_type":
                                         "code", "acceptance_criteria": ["tests pass"],
                                         "depends_on": ["2"]})
    conn = rawsql.connect(path)
    conn.execute("UPDATE tasks SET waits = 0 WHERE number = ?", (blocked,))
    conn.execute("DROP TRIGGER task_fields")  # attempts only grow: set that aside
    conn.execute("UPDATE tasks SET attempts = 0 WHERE number = 2")
    conn.close()
    ok, detail = findings(path)["queue"]
    assert not ok
    assert f"task {blocked} counts 0 open dependencies; it has 1" in detail
    assert "task 2 counts 0 attempts; its journal has 1 results sent back" in detail


def test_a_lease_against_a_control_and_an_unjournaled_control_are_found(
        path: Path) -> None:
    """Raw SQL can slip a hold in behind a live lease, or record a control with no
    journal row; doctor names both (the write path and the lease trigger never would)."""
    conn = rawsql.connect(path)
    leased = conn.execute("SELECT number, lease_holder FROM tasks"
                          " WHERE lease_id IS NOT NULL ORDER BY number").fetchall()
    assert leased
    number, holder = leased[0]
    conn.execute("INSERT INTO controls(kind, agent, at, by) VALUES ('stop', ?,"
                 " '2026-12-02T10:00:00.000Z', 'ana')", (holder,))
    control = conn.last_insert_rowid()
    conn.close()
    ok, detail = findings(path)["controls"]
    assert not ok
    assert f"task {number} is leased to {holder}, whom control {control} (stop) binds" in detail
    assert f"control {control} (stop) has no journal row" in detail


def test_policy_budgets_and_requirements_changed_by_raw_sql_are_found(path: Path) -> None:
    """The library changes these tables by delete and insert, each change journaled; raw
    SQL that does the same leaves no journal row, and doctor compares the two."""
    conn = rawsql.connect(path)
    conn.execute("DELETE FROM budgets")
    conn.execute("INSERT OR REPLACE INTO policy(key, value, at, by)"
                 " VALUES ('mode', 'team', '2026-12-02T10:00:00.000Z', 'ana')")
    conn.execute("INSERT INTO required_plugins(name, kind, digest, settings, at, by) VALUES"
                 " ('sneaky', 'given', 'x', '{}', '2026-12-02T10:00:00.000Z', 'ana')")
    conn.execute("INSERT INTO tokens(id, agent, instance, rights, hash, created_at, by)"
                 " VALUES ('feedfacecafe', 'ana/coder', 'laptop', 'tasks.work', ?,"
                 " '2026-12-02T10:00:00.000Z', 'ana')", ("0" * 64,))
    conn.close()
    ok, detail = findings(path)["policy"]
    assert not ok
    assert "budget of ana/coder: the store has None" in detail
    assert "policy mode: the store has 'team', the owner's journaled changes None" in detail
    assert "required plugin sneaky" in detail
    assert "token feedfacecafe: the store has ('ana/coder'" in detail


ENROLMENT_EVENT = ("INSERT INTO journal(task, at, actor, reason, detail) VALUES (NULL,"
                   " '2026-12-02T10:00:00.000Z', 'ana', 'enrolment', ?)")
"""An enrolment's journal row written by raw SQL (as the owner, who alone may)."""


def enrolled(path: Path) -> None:
    with Hive.open(path, clock=ManualClock(START)) as hive:
        hive.enrol(OWNER, CODER.name, projects=["demo"], roles=["writer"],
                   rights=["tasks.work"])


def test_an_enrolment_is_what_the_owners_journaled_changes_made_it(path: Path) -> None:
    """The library journals each change of an enrolment, then replaces the row; raw SQL
    that does the same, as the owner, is a change doctor takes (the journal has it)."""
    enrolled(path)
    assert findings(path)["policy"] == (True, "1 policy value(s), 0 required plugin(s),"
                                        " 1 budget(s), 1 enrolment(s), each as the owner's"
                                        " journal has it")
    detail = {"agent": "ana/coder", "projects": [], "roles": [], "rights": "tasks.work",
              "active": 0, "why": "by hand"}
    conn = rawsql.connect(path)
    with conn:
        conn.execute(ENROLMENT_EVENT, (json.dumps(detail),))
        seq = conn.last_insert_rowid()
        conn.execute("DELETE FROM enrolments WHERE agent = 'ana/coder'")
        conn.execute("INSERT INTO enrolments(agent, projects, roles, rights, active, seq, at,"
                     " by) VALUES ('ana/coder', '[]', '[]', 'tasks.work', 0, ?,"
                     " '2026-12-02T10:00:00.000Z', 'ana')", (seq,))
    conn.close()
    ok, detail_text = findings(path)["policy"]
    assert ok, detail_text


@pytest.mark.parametrize(("statements", "found"), [
    (["UPDATE enrolments SET projects = '[]'"],
     "enrolment of ana/coder: the store has ('[]', "),
    (["UPDATE enrolments SET rights = 'tasks.propose,tasks.work'"],
     "'tasks.propose,tasks.work', 1,"),
    (["UPDATE enrolments SET active = 0"], "'tasks.work', 0,"),
    (["UPDATE enrolments SET seq = 1"], "'tasks.work', 1, 1,"),
    (["UPDATE enrolments SET projects = 'demo'"], "the store has ('demo', "),
    (["DELETE FROM enrolments"], "enrolment of ana/coder: the store has None"),
    (["INSERT INTO enrolments(agent, projects, roles, rights, active, seq, at, by) VALUES"
      " ('ana/tester', '[]', '[]', 'tasks.work', 1, 1, '2026-12-02T10:00:00.000Z', 'ana')"],
     "enrolment of ana/tester: the store has ('[]', '[]', 'tasks.work', 1, 1,"),
])
def test_an_enrolment_changed_behind_the_journals_back_is_found(
        path: Path, statements: list[str], found: str) -> None:
    """An enrolment widened, revived, renumbered, removed or slipped in with the store's
    rules set aside (as an import or a hand with the file can) has no journal row to
    match."""
    from .test_doctor_decisions import behind_the_rules

    enrolled(path)
    behind_the_rules(path, *statements)
    found_now = findings(path)
    assert found_now["schema"][0]
    ok, detail = found_now["policy"]
    assert not ok and found in detail, detail


def test_an_enrolment_ended_by_its_journal_row_alone_is_found(path: Path) -> None:
    """The store lets an enrolment go once a newer journal row names its agent; one that
    is not written again differs from what that row says."""
    enrolled(path)
    detail = {"agent": "ana/coder", "projects": [], "roles": [], "rights": "tasks.work",
              "active": 1}
    conn = rawsql.connect(path)
    conn.execute(ENROLMENT_EVENT, (json.dumps(detail),))
    conn.execute("DELETE FROM enrolments")
    conn.close()
    ok, found = findings(path)["policy"]
    assert not ok and "enrolment of ana/coder: the store has None, the owner's journaled" \
        " changes ('[]', '[]', 'tasks.work', 1," in found


def test_an_unreadable_enrolment_row_is_named(path: Path) -> None:
    enrolled(path)
    conn = rawsql.connect(path)
    conn.execute(ENROLMENT_EVENT, ('{"agent": "ana/coder"}',))
    seq = conn.last_insert_rowid()
    conn.close()
    assert findings(path)["policy"] == (False, f"journal row {seq} (enrolment) cannot be read")


OUTPUT = "14 passed in 0.31s"
DRAFT = {"kind": "patch", "content": "--- a/parser.py\n+++ b/parser.py\n", "title": "the fix"}


def receipted(*verifies: bool) -> list[dict[str, Any]]:
    """Evidence whose receipts hivelite verifies (the digest of its content) or not."""
    return [{"kind": "test_output", "summary": f"run {i}", "content": OUTPUT,
             "receipt": {"digest": digest_of(OUTPUT.encode() if good else b"another run")}}
            for i, good in enumerate(verifies)]


def drafted(hive: Hive) -> int:
    """A result with a draft and receipts (the first piece verified), amended by its
    worker with a new summary (the receipts kept), then with new evidence (the second
    piece verified, the third not); it awaits a decision. Returns its task's number."""
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=receipted(True, False), draft=DRAFT)
    hive.amend(CODER, number, summary="done, and checked twice")
    hive.amend(CODER, number, evidence=[{"kind": "note", "summary": "by hand"},
                                        *receipted(True, False)])
    return number


def test_a_results_draft_and_receipts_are_what_the_journal_sealed(path: Path) -> None:
    with Hive.open(path, clock=ManualClock(START)) as hive:
        number = drafted(hive)
        submission = next(e.seq for e in hive.history(number) if e.move == 12)
        amend = hive.history(number)[-1].seq
    found = findings(path)
    assert all(ok for ok, _ in found.values()), found
    assert "each draft and verified receipt as the journal sealed it" in found["results"][1]
    sealed = hashlib.sha256(json.dumps(DRAFT, separators=(",", ":")).encode()).hexdigest()
    replaced = hashlib.sha256(b'{"kind":"document","content":"another"}').hexdigest()
    for statement, finding in (
            ("UPDATE results SET draft = '{\"kind\":\"document\",\"content\":\"another\"}'",
             f"task {number}'s draft is {replaced[:16]}...; its submission (journal row"
             f" {submission}) sealed {sealed[:16]}..."),
            ("UPDATE results SET draft = NULL", f"task {number}'s result has no draft; its"
             f" submission (journal row {submission}) sealed draft {sealed[:16]}..."),
            ("UPDATE results SET receipts = json_set(receipts, '$[2].verified', json('true'))",
             f"task {number}'s receipts mark evidence [1, 2] verified; its amend to version 3"
             f" (journal row {amend}) sealed [1]"),
            ("UPDATE results SET receipts = json_set(receipts, '$[0]', json("
             "'{\"digest\":\"sha256:00\",\"signer\":null,\"verified\":true,\"why\":null}'))",
             f"task {number}'s receipts mark evidence [0, 1] verified; its amend to version 3"
             f" (journal row {amend}) sealed [1]"),
            ("UPDATE results SET receipts = json_set(receipts, '$[1].verified', json('false'))",
             f"task {number}'s receipts mark evidence [] verified; its amend to version 3"
             f" (journal row {amend}) sealed [1]"),
            ("UPDATE results SET receipts = NULL", f"task {number}'s receipts mark evidence []"
             " verified"),
            ("UPDATE results SET receipts = '{'", f"task {number}'s receipts cannot be read")):
        copy = path.with_name("forged.db")  # each forgery on a fresh copy of the store
        copy.unlink(missing_ok=True)
        conn = rawsql.connect(path)
        conn.execute(f"VACUUM INTO '{copy}'")
        conn.close()
        forged_in(copy, f"{statement} WHERE task = {number}")
        found = findings(copy)
        assert found["schema"][0] and found["hash chain"][0], found
        ok, detail = found["results"]
        assert not ok and finding in detail, (statement, detail)


def forged_in(path: Path, statement: str) -> None:
    """``statement`` run with the store's rules set aside, then put back as they were."""
    from .test_doctor_decisions import behind_the_rules

    behind_the_rules(path, statement)


def test_a_draft_or_receipts_the_submission_did_not_seal_are_found(path: Path) -> None:
    """A result that came with neither: a draft slipped in, a receipt's ``verified``
    marked where the submission sealed none."""
    with Hive.open(path, clock=ManualClock(START)) as hive:
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)
        submission = next(e.seq for e in hive.history(number) if e.move == 12)
    assert findings(path)["results"][0]
    forged_in(path, "UPDATE results SET draft = '{\"kind\":\"decision\",\"content\":\"yes\"}',"
              " receipts = '[{\"digest\":\"sha256:00\",\"signer\":null,\"verified\":true,"
              f"\"why\":null}}]' WHERE task = {number}")
    ok, detail = findings(path)["results"]
    assert not ok
    assert f"task {number}'s result has draft " in detail
    assert f"; its submission (journal row {submission}) sealed none" in detail
    assert (f"task {number}'s receipts mark evidence [0] verified; its submission (journal"
            f" row {submission}) sealed []") in detail


@pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")
def test_a_forged_draft_and_receipt_are_found_on_postgresql() -> None:
    """The same check on a PostgreSQL store (doctor reads its rows in a scratch copy): a
    draft replaced and a receipt's ``verified`` flipped with the store's rules set aside."""
    from hivelite.store.pg_doctor import diagnose_url

    schema = pg.new_schema()
    try:
        with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
            number = drafted(hive)
            amend = hive.history(number)[-1].seq
        found = {f.check: f for f in diagnose_url(pg.store_url(schema))}
        assert all(f.ok for f in found.values()), found
        with pg.connect() as raw:
            raw.execute(f"SET search_path = {schema}")
            raw.execute("SET session_replication_role = replica")  # the store's rules aside
            raw.execute("UPDATE results SET draft = %s, receipts = jsonb_set(receipts::jsonb,"
                        " '{2,verified}', 'true')::text WHERE task = %s",
                        ('{"kind":"document","content":"another"}', number))
        found = {f.check: f for f in diagnose_url(pg.store_url(schema))}
        assert found["schema"].ok, found["schema"]
        detail = found["results"].detail
        assert not found["results"].ok
        assert f"task {number}'s draft is " in detail
        assert (f"task {number}'s receipts mark evidence [1, 2] verified; its amend to"
                f" version 3 (journal row {amend}) sealed [1]") in detail
    finally:
        pg.drop(schema)


def test_a_claim_that_skipped_a_token_is_found(path: Path) -> None:
    conn = rawsql.connect(path)
    for name in ("task_update", "task_lease_taken"):  # the guards against it
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("UPDATE tasks SET lease_token = 9 WHERE state = 'working'")
    conn.close()
    ok, detail = findings(path)["fencing tokens"]
    assert not ok and "keeps token 9" in detail


def test_damaged_pages_are_found(path: Path) -> None:
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").get
    root = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'journal'").get
    conn.close()
    data = bytearray(path.read_bytes())
    start = (root - 1) * page_size + 100 if root == 1 else (root - 1) * page_size
    data[start:start + 8] = b"\xff" * 8  # the journal's b-tree page header
    path.write_bytes(bytes(data))
    found = findings(path)
    assert list(found) == ["integrity_check"]
    assert not found["integrity_check"][0]


def test_doctor_reads_a_file_as_it_is(path: Path, tmp_path: Path) -> None:
    from hivelite import StoreError
    from hivelite.store.doctor import diagnose_file

    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = path.read_bytes()
    assert all(f.ok for f in diagnose_file(path))
    assert path.read_bytes() == before  # read-only: nothing migrated, swept or written
    other = tmp_path / "other.db"
    apsw.Connection(str(other)).execute("CREATE TABLE t(x)")
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all")
    for wrong, says in ((other, "not a hivelite store"), (text, "not an SQLite database")):
        [finding] = diagnose_file(wrong)
        assert not finding.ok and says in finding.detail
    with pytest.raises(StoreError) as err:
        diagnose_file(tmp_path / "missing.db")
    assert err.value.reason == "no_store"


def test_a_changed_move_is_found(path: Path) -> None:
    conn = rawsql.connect(path)
    conn.execute("DROP TRIGGER moves_fixed_update")
    conn.execute("UPDATE moves SET name = 'bounced' WHERE name = 'bounce'")
    conn.close()
    ok, detail = findings(path)["schema"]
    assert not ok and "the moves table differs" in detail


def test_a_claim_that_took_a_token_out_of_turn_is_found(path: Path) -> None:
    conn = rawsql.connect(path)
    for name in ("journal_no_update", "journal_keys_kept"):
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("UPDATE journal SET detail = json_set(detail, '$.fencing_token', 7)"
                 " WHERE seq = (SELECT min(seq) FROM journal WHERE to_state = 'accepted')")
    conn.close()
    ok, detail = findings(path)["fencing tokens"]
    assert not ok and "took token 7 after 0" in detail


def test_an_index_that_disagrees_with_its_table_is_found(path: Path) -> None:
    """Damage SQLite can still read: the check names it instead of crashing."""
    conn = rawsql.connect(path)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_schema SET sql = 'CREATE INDEX updates_by_task ON"
                 " updates(tokens)' WHERE name = 'updates_by_task'")
    conn.close()
    ok, detail = findings(path)["integrity_check"]
    assert not ok and "updates_by_task" in detail


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env.update(HIVELITE_LOAD_PLUGINS="", HIVELITE_NOW=START)
    return subprocess.run([sys.executable, "-m", "hivelite", "--db", str(db), *args],
                          capture_output=True, text=True, env=env, timeout=HANG_S)


@pytest.mark.slow
def test_the_cli_doctor_backup_export_import(path: Path, tmp_path: Path) -> None:
    done = cli(path, "--json", "doctor")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and [c["check"] for c in report["checks"]] == CHECKS
    assert cli(path, "backup", str(tmp_path / "b.db")).returncode == 0
    assert cli(path, "backup", str(tmp_path / "b.db")).returncode == 6  # never over a file
    assert cli(tmp_path / "b.db", "doctor").returncode == 0
    exported = cli(path, "export")
    assert exported.returncode == 0
    (tmp_path / "e.jsonl").write_text(exported.stdout)
    assert cli(tmp_path / "c.db", "import", str(tmp_path / "e.jsonl")).returncode == 0
    assert cli(tmp_path / "c.db", "export").stdout == exported.stdout
    again = cli(tmp_path / "c.db", "--json", "import", str(tmp_path / "e.jsonl"))
    assert again.returncode == 6
    assert json.loads(again.stdout)["error"]["reason"] == "store_not_empty"


@pytest.mark.slow
def test_a_tampered_store_reads_but_refuses_writes(path: Path) -> None:
    conn = rawsql.connect(path)
    conn.execute("DROP TRIGGER task_move")
    conn.close()
    done = cli(path, "--json", "doctor")
    assert done.returncode == 6
    assert "failed: schema" in done.stderr
    assert not json.loads(done.stdout)["ok"]
    assert cli(path, "list").returncode == 0
    refused = cli(path, "--json", "cancel", "3")
    assert refused.returncode == 6
    error = json.loads(refused.stdout)["error"]
    assert error["reason"] == "schema_tampered" and "hivelite doctor" in error["message"]
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        assert hive.get(1).number == 1
        with pytest.raises(StoreError) as err:
            hive.cancel(OWNER, 3)
        assert err.value.reason == "schema_tampered"
