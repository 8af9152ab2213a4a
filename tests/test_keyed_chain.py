"""The keyed chain (issue 30, part 1): each journal row is sealed with an HMAC under the
owner's key, which lives outside the store; heads are witnessed outside the file.

A forger here holds the store file and has read ``store/chain.py``: every row they write
carries the hash hivelite would give it, but not the seal. Each forgery passes every check
of ``doctor`` without the key (as it did before the key existed), and fails with it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import apsw
import pytest

from hivelite import Hive, ManualClock
from hivelite.core.errors import InvalidInput, StoreError, Unauthenticated
from hivelite.store.chain import CONTENT, global_link, link
from hivelite.store.doctor import Finding, diagnose_file
from hivelite.store.keys import heads_path, key_path, keyed_path, load_key, witness, witnesses
from hivelite.store.transfer import backup, export_lines, import_lines
from hivelite.verbs.tokens import _hash

from .conftest import CODER, HANG_S, OWNER, REVIEWER, START, own_task
from .test_chain import rechain, rewrite
from .test_doctor import EVIDENCE, busy_store

SECRET = "f" * 43


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """A busy store, plus a task awaiting the owner's sign-off (a threshold of 2)."""
    made = tmp_path / "keyed.db"
    busy_store(made)
    with Hive.open(made, clock=ManualClock(START)) as hive:
        hive.set_policy(OWNER, "threshold", 2)
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)
        hive.verify(REVIEWER, number, verdict="accept")
        assert hive.get(number).task.state == "approval"
    return made


def checks(path: Path, **given: object) -> dict[str, Finding]:
    return {f.check: f for f in diagnose_file(path, **given)}  # type: ignore[arg-type]


def identity_of(path: Path) -> str:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return str(conn.execute("SELECT value FROM meta WHERE key = 'store_id'").get)
    finally:
        conn.close()


def forge(path: Path, *statements: str) -> int:
    """Run ``statements`` as the file's holder (the rules let a legal move through from any
    connection), then give every new journal row the hash ``chain.py`` would: what passed
    ``doctor`` before the key. Returns the first forged row."""
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(5000)
    tip = conn.execute("SELECT max(seq) FROM journal").get
    refusal = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'journal_no_update'").get
    with conn:
        for statement in statements:
            conn.execute(statement)
        conn.execute("DROP TRIGGER journal_no_update")
        before = conn.execute("SELECT hash FROM journal WHERE seq = ?", (tip,)).get
        for seq, *content in conn.execute(
                f"SELECT seq, {CONTENT} FROM journal WHERE seq > ? ORDER BY seq",
                (tip,)).fetchall():
            before = link(before, content)
            conn.execute("UPDATE journal SET hash = ? WHERE seq = ?", (before, seq))
        conn.execute(refusal)
    conn.close()
    return int(tip) + 1


def event(reason: str, detail: dict[str, object]) -> str:
    """A journal row of the owner's, about no task, as raw SQL writes it."""
    return ("INSERT INTO journal(task, at, actor, from_state, to_state, reason, detail)"
            f" VALUES (NULL, '{START}', 'ana', NULL, NULL, '{reason}',"
            f" '{json.dumps(detail)}')")


def rechained(path: Path, *statements: str,
              aside: tuple[str, ...] = ("meta_kept", "journal_no_update")) -> None:
    """``statements`` run on the file with the rules ``aside`` set aside, then every row's
    hash recomputed without the key, as a forger without it would, and the rules put
    back: what a store from before the key, or a forged one, looks like."""
    from hivelite.store.chain import chain_all

    conn = apsw.Connection(str(path))
    kept = [r[0] for r in conn.execute("SELECT sql FROM sqlite_schema WHERE name IN"
                                       f" ({', '.join('?' * len(aside))})", aside)]
    with conn:
        for name in aside:
            conn.execute(f"DROP TRIGGER {name}")
        for statement in statements:
            conn.execute(statement)
        chain_all(conn)
        for sql in kept:
            conn.execute(sql)
    conn.close()


FORGERIES = {
    "a guest's held handoff approved": (
        "UPDATE tasks SET state = 'routed', waiting_on = NULL, actor = 'ana', reason = NULL"
        " WHERE number = (SELECT max(number) FROM tasks WHERE state = 'waiting'"
        " AND waiting_on = 'owner_approval')",),
    "the owner's sign-off": (
        "UPDATE tasks SET state = 'completed', actor = 'ana', reason = 'signed off'"
        " WHERE state = 'approval'",),
    "a task cancelled": (
        "UPDATE tasks SET state = 'cancelled', actor = 'ana', reason = 'withdrawn',"
        " lease_id = NULL, lease_holder = NULL, lease_instance = NULL,"
        " lease_session = NULL, lease_expires = NULL"
        " WHERE number = (SELECT min(number) FROM tasks WHERE state = 'accepted')",),
    "an owner token, issued": (
        "INSERT INTO tokens(id, agent, instance, rights, hash, created_at, by) VALUES"
        f" ('f0f0f0f0f0f0', NULL, NULL, 'owner', '{_hash(SECRET)}', '{START}', 'ana')",
        event("token add", {"token": "f0f0f0f0f0f0", "agent": None, "instance": None,
                            "rights": ["owner"], "expires_at": None})),
    "a budget cleared": (
        "DELETE FROM budgets WHERE agent = 'ana/coder'",
        event("budget", {"agent": "ana/coder", "cleared": True})),
    "a hold lifted": (
        f"UPDATE controls SET lifted_at = '{START}', lifted_by = 'ana'"
        " WHERE kind = 'hold' AND lifted_at IS NULL",
        event("lift", {"control": 2})),
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forgery_with_every_unkeyed_hash_right_is_found_with_the_key(
        path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forgery: str) -> None:
    first = forge(path, *FORGERIES[forgery])
    with monkeypatch.context() as away:  # the key elsewhere: what doctor saw before it
        away.setenv("HIVELITE_KEYS", str(tmp_path / "no-keys"))
        unkeyed = checks(path, no_key=True)  # asked for: consistency only
        assert all(f.ok for f in unkeyed.values()), [f for f in unkeyed.values() if not f.ok]
        assert "checked for consistency only" in unkeyed["hash chain"].detail
        keyless = checks(path)["hash chain"]  # else the missing key fails doctor
        assert not keyless.ok and "doctor --no-key" in keyless.detail
    found = checks(path)
    assert not found["hash chain"].ok
    assert found["hash chain"].detail.startswith(
        f"journal row {first} is not sealed with the owner's key"), found["hash chain"]


def test_a_forged_owner_token_never_authenticates(path: Path) -> None:
    forge(path, *FORGERIES["an owner token, issued"])
    with Hive.open(path, clock=ManualClock(START)) as hive:
        with pytest.raises(Unauthenticated) as refused:
            hive.authenticate(f"hl_f0f0f0f0f0f0_{SECRET}")
        assert refused.value.reason == "unissued_token"
        issued = hive.add_token(OWNER)  # one the owner issued works
        assert hive.authenticate(issued.token).caller.kind == "owner"


def test_a_token_row_with_no_journaled_issue_never_authenticates(path: Path) -> None:
    conn = apsw.Connection(str(path))
    conn.execute("INSERT INTO tokens(id, agent, instance, rights, hash, created_at, by)"
                 f" VALUES ('0a0a0a0a0a0a', NULL, NULL, 'owner', '{_hash(SECRET)}',"
                 f" '{START}', 'ana')")
    conn.close()
    with Hive.open(path, clock=ManualClock(START)) as hive, \
            pytest.raises(Unauthenticated) as refused:
        hive.authenticate(f"hl_0a0a0a0a0a0a_{SECRET}")
    assert refused.value.reason == "unissued_token"


def test_a_recomputed_history_is_found(path: Path) -> None:
    rewrite(path, "UPDATE journal SET actor = 'ana/thief' WHERE seq = 3")
    rechain(path)  # every hash recomputed as chain.py does, without the key
    found = checks(path)
    assert not found["hash chain"].ok
    assert found["hash chain"].detail.startswith(
        "journal row 1 is not sealed with the owner's key"), found["hash chain"]


def test_a_history_rewritten_with_the_key_too_is_found_by_the_witnesses(path: Path) -> None:
    """One who holds the file and the key can reseal a rewritten history: a head witnessed
    outside the file before (here by a sound doctor) tells."""
    assert all(f.ok for f in checks(path, at=START).values())
    assert witnesses(identity_of(path))
    rewrite(path, "UPDATE journal SET actor = 'ana/thief' WHERE seq = 3")
    rechain(path, keyed=True)
    found = checks(path)
    assert found["hash chain"].ok  # sealed with the right key: only a witness can tell
    assert not found["witnesses"].ok
    assert "the history up to it was rewritten" in found["witnesses"].detail


def test_dropping_the_newest_rows_is_found_by_the_witnesses(path: Path) -> None:
    """Each row left is sealed, so the chain alone cannot tell a journal cut short."""
    assert all(f.ok for f in checks(path, at=START).values())
    rewrite(path, "DELETE FROM journal WHERE seq > (SELECT max(seq) - 3 FROM journal)")
    found = checks(path)
    assert found["hash chain"].ok and not found["witnesses"].ok
    assert "the newest rows were dropped" in found["witnesses"].detail


def test_a_backup_is_witnessed_and_an_older_copy_passes_as_one(path: Path,
                                                               tmp_path: Path) -> None:
    copy = tmp_path / "backup.db"
    conn = apsw.Connection(str(path))
    head = backup(conn, copy)
    conn.close()
    assert head is not None and head in [w.head for w in witnesses(identity_of(path))]
    with Hive.open(path, clock=ManualClock(START)) as hive:  # the store moves on
        own_task(hive)
    assert all(f.ok for f in checks(path, at=START).values())  # witnesses the newer head
    older = checks(copy)
    assert not older["witnesses"].ok and "older copy" in older["witnesses"].detail
    assert all(f.ok for f in checks(copy, older_copy=True).values())


def test_an_export_names_its_head_sealed_and_a_cut_export_is_refused(
        path: Path, tmp_path: Path) -> None:
    from hivelite.store import SqliteStore

    conn = apsw.Connection(str(path))
    lines = list(export_lines(conn))
    conn.close()
    header = json.loads(lines[0])
    key = load_key(identity_of(path))
    assert key is not None and header["head_seal"] == key.mac(f"head {header['head']}")
    journal = [i for i, line in enumerate(lines) if '"table": "journal"' in line]
    for name, cut in {"its last journal rows dropped": [
                          line for i, line in enumerate(lines) if i not in journal[-2:]],
                      "and its header's head to fit": [
                          json.dumps({**header, "head": None}), *[
                              line for i, line in enumerate(lines[1:], 1)
                              if i not in journal[-2:]]]}.items():
        store = SqliteStore(tmp_path / f"{len(name)}.db")
        try:
            with pytest.raises(InvalidInput) as refused:
                import_lines(store.conn, cut)
            assert refused.value.reason == "import_unsound", name
            assert any(p.startswith("head: ") for p in refused.value.extra["problems"]), name
        finally:
            store.close()


def test_a_cut_export_is_refused_where_the_owner_s_key_is_not(
        path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An export whose head is sealed cannot be told from a cut one without the key: its
    import is refused there, naming where the key should be (a deliberate bug once let a
    cut export in when the key was absent)."""
    from hivelite.store import SqliteStore

    conn = apsw.Connection(str(path))
    lines = list(export_lines(conn))
    conn.close()
    header = json.loads(lines[0])
    journal = [i for i, line in enumerate(lines) if '"table": "journal"' in line]
    cut = [json.dumps({**header, "head": None}),
           *[line for i, line in enumerate(lines[1:], 1) if i not in journal[-2:]]]
    monkeypatch.setenv("HIVELITE_KEYS", str(tmp_path / "no-keys"))
    for given in (cut, lines):  # cut, and whole: neither can be checked here
        store = SqliteStore(tmp_path / f"{len(given)}.db")
        try:
            with pytest.raises(InvalidInput) as refused:
                import_lines(store.conn, given)
            assert refused.value.reason == "import_unsound"
            assert any("Copy the store's key file there" in p
                       for p in refused.value.extra["problems"]), refused.value.extra
        finally:
            store.close()


def test_the_key_is_the_owners_alone_and_a_store_refuses_writes_without_it(
        path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    identity = identity_of(path)
    where = key_path(identity)
    assert stat.S_IMODE(where.stat().st_mode) == 0o600
    assert stat.S_IMODE(where.parent.stat().st_mode) == 0o700
    monkeypatch.setenv("HIVELITE_KEYS", str(tmp_path / "no-keys"))
    with Hive.open(path, clock=ManualClock(START)) as hive:
        assert hive.get(1).number == 1  # reads work
        before = hive.last_seq()
        with pytest.raises(StoreError) as refused:
            own_task(hive)
        assert refused.value.reason == "key_missing" and str(key_path(identity)) in str(
            refused.value.message)
        assert hive.last_seq() == before
        assert hive.info().chain_key is None
    other = tmp_path / "other-keys"
    other.mkdir()
    (other / where.name).write_text(json.dumps(
        {"store_id": identity, "key": "00" * 32, "keyed_from": 1}))
    monkeypatch.setenv("HIVELITE_KEYS", str(other))
    with Hive.open(path, clock=ManualClock(START)) as hive, \
            pytest.raises(StoreError) as refused:
        own_task(hive)
    assert refused.value.reason == "key_mismatch"


def test_a_store_from_before_the_key_is_sealed_from_its_next_write_and_all_before(
        tmp_path: Path) -> None:
    """The first sealed row's link covers the history before it: an old row changed and
    every link recomputed breaks that row's seal."""
    old = tmp_path / "old.db"
    clock = ManualClock(START)
    with Hive.open(old, owner="ana", clock=clock) as hive:
        own_task(hive)
        hive.claim(CODER, own_task(hive))
    identity = identity_of(old)
    key = key_path(identity)
    conn = apsw.Connection(str(old))  # as a store made before the key looks
    rows = conn.execute("SELECT max(seq) FROM journal").get
    refusal = [r[0] for r in conn.execute("SELECT sql FROM sqlite_schema WHERE name IN"
                                          " ('meta_kept', 'journal_no_update')")]
    with conn:
        conn.execute("DROP TRIGGER meta_kept")
        conn.execute("DROP TRIGGER journal_no_update")
        conn.execute("DELETE FROM meta WHERE key = 'chain_key'")
        conn.execute("UPDATE journal SET hash = substr(hash, 1, 32)")
        from hivelite.store.chain import chain_all
        chain_all(conn)
        for sql in refusal:
            conn.execute(sql)
    conn.close()
    key.unlink()  # (and the folder's record of having keyed it: a store from before both)
    keyed_path(identity).unlink()
    with Hive.open(old, clock=clock) as hive:
        own_task(hive)
    sealed = load_key(identity)
    assert sealed is not None and sealed.keyed_from == rows + 1
    assert all(f.ok for f in checks(old).values())
    rewrite(old, "UPDATE journal SET reason = 'forged' WHERE seq = 2")
    rechain(old)  # unkeyed, as before the key: the older rows pass, the sealed one not
    found = checks(old)["hash chain"]
    assert found.detail.startswith(f"journal row {rows + 1} "), found


def test_a_witness_file_is_the_owners_and_reads_what_it_can(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setenv("HIVELITE_KEYS", str(tmp_path / "keys"))
    identity = "ab" * 16
    assert witness(identity, "7:" + "c" * 64, START, "backup x.db") is not None
    with heads_path(identity).open("a") as handle:
        handle.write("not a head\n")
    assert [w.head for w in witnesses(identity)] == ["7:" + "c" * 64]
    assert stat.S_IMODE(os.stat(heads_path(identity)).st_mode) == 0o600


def test_an_identity_that_is_no_name_never_reaches_a_path() -> None:
    with pytest.raises(StoreError) as refused:
        key_path("../../etc/passwd")
    assert refused.value.reason == "invalid_identity"


@pytest.mark.slow
def test_hivelite_serve_refuses_a_forged_owner_token_and_witnesses_its_start(
        path: Path, tmp_path: Path) -> None:
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("uvicorn")
    from .test_serve import serving

    forge(path, *FORGERIES["an owner token, issued"])
    with Hive.open(path, clock=ManualClock(START)) as hive:
        issued = hive.add_token(OWNER).token
    with serving(tmp_path, [str(path)]) as (url, _, log):
        def whoami(token: str) -> Any:
            return httpx.get(f"{url}/v1/whoami", headers={"Authorization": f"Bearer {token}"},
                             timeout=HANG_S)
        forged = whoami(f"hl_f0f0f0f0f0f0_{SECRET}")
        assert forged.status_code == 401, forged.text
        assert forged.json()["error"]["reason"] == "unissued_token"
        assert whoami(issued).status_code == 200
    assert any(w.by == "serve" for w in witnesses(identity_of(path))), log.read_text()


@pytest.mark.slow
def test_hivelite_serve_does_not_start_without_the_key(path: Path, tmp_path: Path) -> None:
    import subprocess

    from .test_cli_e2e import hivelite_command

    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    done = subprocess.run([*hivelite_command(), "serve", str(path), "--port", "0"],
                          capture_output=True, text=True, timeout=HANG_S,
                          env={**env, "HIVELITE_KEYS": str(tmp_path / "none")})
    assert done.returncode == 6, done.stderr
    assert "invalid_input/key_missing" in done.stderr


def test_a_postgresql_store_seals_its_journal_and_a_forged_row_shows(tmp_path: Path) -> None:
    from . import pg

    if not pg.available():
        pytest.skip("no PostgreSQL server")
    schema = pg.new_schema()
    with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
        hive.claim(CODER, own_task(hive))
        key = hive.store.chain_key()
        assert key is not None and key.keyed_from == 1
        assert hive.store.chain_sound()  # type: ignore[attr-defined]
        conn = pg.connect()
        conn.execute(f"SET search_path = {schema}")
        rows = conn.execute(f"SELECT seq, hash, {CONTENT} FROM journal ORDER BY seq"
                            ).fetchall()
        # chained per task: each row sealed over its task, and its global link the
        # server's, from the store's identity through every row's seq and hash
        assert all(len(r[1]) == 64 and key.task_sealed(r[2], r[1]) for r in rows)
        assert not any(key.sealed(r[0], r[1]) for r in rows)
        glink = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0]
        for (seq, stored, *_), (found,) in zip(rows, conn.execute(
                "SELECT glink FROM journal ORDER BY seq").fetchall(), strict=True):
            glink = global_link(glink, seq, stored)
            assert found == glink
        before = conn.execute(  # a row with the hash chain.py gives it, without the key
            "SELECT coalesce((SELECT hash FROM journal WHERE task IS NULL ORDER BY seq DESC"
            " LIMIT 1), (SELECT value FROM meta WHERE key = 'store_id'))").fetchone()[0]
        content = [None, START, "ana", None, None, None, "budget",
                   '{"agent": "ana/coder", "cleared": true}']
        conn.execute("INSERT INTO journal(task, at, actor, from_state, to_state, waiting_on,"
                     " reason, detail, hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                     (*content, link(before, content)))
        conn.close()
        assert not hive.store.chain_sound()  # type: ignore[attr-defined]


def test_a_kept_answer_rewritten_behind_hivelites_back_is_never_replayed(
        path: Path) -> None:
    """A retry replays the first answer it kept; one rewritten by raw SQL (here: another
    task's number, so the caller would act on the wrong task) is refused, and doctor names
    it."""
    with Hive.open(path, clock=ManualClock(START)) as hive:
        first = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                             project="demo", packet={"task": "Write the parser",
                                                     "deliverable_type": "code",
                                                     "acceptance_criteria": ["tests pass"]},
                             request_id="req-1")
        again = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                             project="demo", packet={"task": "Write the parser",
                                                     "deliverable_type": "code",
                                                     "acceptance_criteria": ["tests pass"]},
                             request_id="req-1")
        assert again.number == first.number
    assert checks(path)["kept answers"].ok
    conn = apsw.Connection(str(path))
    conn.execute("UPDATE requests SET answer = replace(answer, ?, ?) WHERE id = 'req-1'",
                 (f'"number":{first.number},', '"number":1,'))
    assert '"number":1,' in conn.execute("SELECT answer FROM requests").get
    conn.close()
    found = checks(path)["kept answers"]
    assert not found.ok and "'req-1'" in found.detail, found
    for fresh in (True, False):  # a new process (no key read yet), and one that wrote
        with Hive.open(path, clock=ManualClock(START)) as hive:
            if not fresh:
                own_task(hive)
            with pytest.raises(StoreError) as refused:
                hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                             project="demo", packet={"task": "Write the parser",
                                                     "deliverable_type": "code",
                                                     "acceptance_criteria": ["tests pass"]},
                             request_id="req-1")
            assert refused.value.reason == "answer_tampered"


def test_a_new_identity_with_every_hash_recomputed_does_not_shed_the_key(
        path: Path) -> None:
    """A forger gives the store a new identity (so no key file is found for it), drops
    its key's name, and rechains every row from the new identity: the store's place still
    names its old identity, and its key."""
    with Hive.open(path, clock=ManualClock(START)) as hive:
        own_task(hive)  # the place is recorded by a write
    rechained(path, f"UPDATE meta SET value = '{'ee' * 16}' WHERE key = 'store_id'",
              "DELETE FROM meta WHERE key = 'chain_key'",
              aside=("meta_kept", "meta_identity_fixed", "journal_no_update"))
    found = checks(path)
    assert not found["witnesses"].ok and "it now says it is eeee" in found["witnesses"].detail
    with Hive.open(path, clock=ManualClock(START)) as hive, \
            pytest.raises(StoreError) as refused:
        own_task(hive)
    assert refused.value.reason == "identity_changed"


def test_rows_renumbered_to_slip_under_the_key_are_found(path: Path) -> None:
    """The seal covers a row's place: rows moved below the key's first row, and a forged
    row after them, show."""
    rewrite(path, "UPDATE journal SET seq = seq - 1000000")
    first = forge(path, event("budget", {"agent": "ana/coder", "cleared": True}))
    found = checks(path)["hash chain"]
    assert not found.ok and "is not in its place" in found.detail, found
    assert first  # the forged row was written


def test_a_token_issued_at_row_zero_never_authenticates(path: Path) -> None:
    conn = apsw.Connection(str(path))
    identity = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").get
    content = [None, START, "ana", None, None, None, "token add",
               json.dumps({"token": "0b0b0b0b0b0b", "agent": None, "instance": None,
                           "rights": ["owner"], "expires_at": None})]
    conn.execute(f"INSERT INTO journal(seq, {CONTENT}, hash) VALUES (0, ?, ?, ?, ?, ?, ?,"
                 " ?, ?, ?)", (*content, link(identity, content)))
    conn.execute("INSERT INTO tokens(id, agent, instance, rights, hash, created_at, by)"
                 f" VALUES ('0b0b0b0b0b0b', NULL, NULL, 'owner', '{_hash(SECRET)}',"
                 f" '{START}', 'ana')")
    conn.close()
    with Hive.open(path, clock=ManualClock(START)) as hive, \
            pytest.raises(Unauthenticated) as refused:
        hive.authenticate(f"hl_0b0b0b0b0b0b_{SECRET}")
    assert refused.value.reason == "unissued_token"


@pytest.mark.parametrize("change", [
    "UPDATE tokens SET hash = '{mine}' WHERE id = '{id}'",  # the owner's token, my secret
    "UPDATE tokens SET rights = 'owner', agent = NULL, instance = NULL WHERE id = '{agent}'",
    "UPDATE tokens SET revoked_at = NULL WHERE id = '{revoked}'",
])
def test_a_token_row_changed_behind_the_journals_back_proves_nothing_new(
        path: Path, change: str) -> None:
    """With the key, a token's secret hash, agent, rights and revocation are the sealed
    journal's, not the table's."""
    with Hive.open(path, clock=ManualClock(START)) as hive:
        owner = hive.add_token(OWNER)
        agent = hive.add_token(OWNER, "ana/coder", instance="laptop", rights=["tasks.read"])
        revoked = hive.add_token(OWNER, "ana/coder", instance="laptop")
        hive.revoke_token(OWNER, revoked.id)
    conn = apsw.Connection(str(path))  # the tokens' refusal set aside, then put back
    kept = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'tokens_revoked_once'").get
    conn.execute("DROP TRIGGER tokens_revoked_once")
    conn.execute(change.format(mine=_hash(SECRET), id=owner.id, agent=agent.id,
                               revoked=revoked.id))
    conn.execute(kept)
    conn.close()
    with Hive.open(path, clock=ManualClock(START)) as hive:
        if "hash" in change:  # neither the forger's secret nor, now, the owner's
            for token in (f"hl_{owner.id}_{SECRET}", owner.token):
                with pytest.raises(Unauthenticated):
                    hive.authenticate(token)
        elif "rights" in change:
            proved = hive.authenticate(agent.token)
            assert proved.caller.kind == "agent" and proved.rights == {"tasks.read"}
        else:
            with pytest.raises(Unauthenticated) as refused:
                hive.authenticate(revoked.token)
            assert refused.value.reason == "revoked_token"
    assert not checks(path)["policy"].ok  # and doctor names the row


def test_tokens_and_kept_answers_from_before_the_key_are_sealed_when_it_is_made(
        path: Path) -> None:
    """A store from before the key: its first write under the key journals the tokens
    issued before (with their secrets' hashes) in a sealed row, and seals the kept answers,
    so both still work and neither can be changed unseen."""
    with Hive.open(path, clock=ManualClock(START)) as hive:
        issued = hive.add_token(OWNER, "ana/coder", instance="laptop")
        hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
                     packet={"task": "Write the parser", "deliverable_type": "code",
                             "acceptance_criteria": ["tests pass"]}, request_id="old-1")
    identity = identity_of(path)
    rechained(path, "DELETE FROM meta WHERE key = 'chain_key'",  # as one from before the key
              "UPDATE requests SET digest = substr(digest, 1, instr(digest, '.') - 1)",
              "UPDATE journal SET detail = json_remove(detail, '$.hash')"
              " WHERE reason = 'token add'")
    key_path(identity).unlink()
    keyed_path(identity).unlink()
    with Hive.open(path, clock=ManualClock(START)) as hive:
        own_task(hive)  # the first write: the key is made, what came before sealed
        assert hive.authenticate(issued.token).caller.name == "ana/coder"
        again = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                             project="demo", packet={"task": "Write the parser",
                                                     "deliverable_type": "code",
                                                     "acceptance_criteria": ["tests pass"]},
                             request_id="old-1")
        assert again.number  # the kept answer, replayed
    found = checks(path)
    assert all(f.ok for f in found.values()), [f for f in found.values() if not f.ok]


def test_a_backup_put_back_on_purpose_is_recorded_and_held_to_from_then_on(
        path: Path, tmp_path: Path) -> None:
    copy = tmp_path / "backup.db"
    conn = apsw.Connection(str(path))
    backup(conn, copy)
    conn.close()
    with Hive.open(path, clock=ManualClock(START)) as hive:
        own_task(hive)
    assert all(f.ok for f in checks(path, at=START).values())  # witnesses the newer head
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    copy.rename(path)  # the backup put back in the store's place, and written on
    with Hive.open(path, clock=ManualClock("2026-12-02T10:00:00.000Z")) as hive:
        own_task(hive)
    found = checks(path)
    assert not found["witnesses"].ok and "rewritten" in found["witnesses"].detail
    assert all(f.ok for f in checks(path, restored=True, at=START).values())
    assert all(f.ok for f in checks(path).values())  # from then on
    rewrite(path, "DELETE FROM journal WHERE seq = (SELECT max(seq) FROM journal)")
    assert not checks(path)["witnesses"].ok  # and held to what was witnessed since


def test_a_decline_by_an_agent_with_no_counted_rejection_is_found(path: Path) -> None:
    """The store lets an agent decline only after its counted rejection; doctor holds
    the journal to the same rule (here the rule was set aside, and put back)."""
    conn = apsw.Connection(str(path))
    kept = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'task_decided_by'").get
    with conn:
        conn.execute("DROP TRIGGER task_decided_by")
        conn.execute("UPDATE tasks SET state = 'routed', actor = 'ana/tester',"
                     " reason = 'not good' WHERE state = 'approval'")
        conn.execute(kept)
    conn.close()
    found = checks(path)["actors"]
    assert not found.ok and "ana/tester declined with no counted rejection" in found.detail


def test_a_postgresql_journal_is_sealed_every_so_often_and_a_dropped_tail_shows() -> None:
    """Chains per task (docs/postgres.md, "A chain per task"): every task's rows link to
    its own earlier rows, so one task's newest rows dropped (and its row put back as it
    was) leave every chain consistent; the seal rows, which name a seq and the global
    link through every row up to it, sealed with the owner's key, no longer agree."""
    from hivelite.store.chain import SEAL
    from hivelite.store.pg_doctor import diagnose_url
    from hivelite.store.postgres import SEAL_EVERY

    from . import pg

    if not pg.available():
        pytest.skip("no PostgreSQL server")
    schema = pg.new_schema()
    try:
        with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
            hive.add_token(OWNER)  # a row about no task: a seal's chain follows it
            first = own_task(hive)
            hive.claim(CODER, first)
            while hive.last_seq() < SEAL_EVERY + 4:
                own_task(hive)
            seals = [r for r in hive.journal() if r.reason == SEAL]
            assert seals and all(r.number is None and r.actor == "guard" for r in seals)
            assert all(r.detail is not None and r.detail["seq"] < r.seq for r in seals)
            assert hive.store.chain_sound()  # type: ignore[attr-defined]
        found = diagnose_url(pg.store_url(schema))
        assert all(f.ok for f in found), [f for f in found if not f.ok]
        with pg.connect() as conn:  # the owner of the tables sets the rules aside
            conn.execute(f"SET search_path = {schema}")
            conn.execute("ALTER TABLE journal DISABLE TRIGGER USER")
            conn.execute("ALTER TABLE tasks DISABLE TRIGGER USER")
            last = conn.execute("SELECT seq, hash FROM journal WHERE task = %s"
                                " ORDER BY seq DESC LIMIT 2", (first,)).fetchall()
            conn.execute("DELETE FROM journal WHERE seq = %s", (last[0][0],))  # the claim
            conn.execute("UPDATE tasks SET state = 'routed', lease_id = NULL, lease_token = 0,"
                         " lease_holder = NULL, lease_instance = NULL, lease_session = NULL,"
                         " lease_expires = NULL, chain = %s WHERE number = %s",
                         (last[1][1], first))
            after = conn.execute("SELECT seq FROM journal WHERE seq > %s ORDER BY seq",
                                 (last[0][0],)).fetchall()
            for (seq,) in after:  # the numbers closed up again, each global link redone
                conn.execute("UPDATE journal SET seq = seq - 1 WHERE seq = %s", (seq,))
            conn.execute("ALTER TABLE journal ENABLE TRIGGER USER")
            conn.execute("ALTER TABLE tasks ENABLE TRIGGER USER")
        found = {f.check: f for f in diagnose_url(pg.store_url(schema))}
        chain = found["hash chain"]
        assert not chain.ok and "seals row" in chain.detail, chain
    finally:
        pg.drop(schema)


@pytest.mark.parametrize(("change", "found"), [
    ("UPDATE journal SET reason = 'nothing to see' WHERE seq = {mid}",
     "does not follow from the row before it of its task"),
    ("DELETE FROM journal WHERE seq = {mid}", "is not in its place"),
    ("UPDATE journal SET task = {other} WHERE seq = {mid}",
     "does not follow from the row before it of its task"),
])
def test_a_postgresql_journal_chained_per_task_shows_each_change(change: str,
                                                                 found: str) -> None:
    """An edited row, a removed one and one moved to another task, each made by the
    tables' owner with the rules set aside: doctor names the row."""
    from hivelite.store.pg_doctor import diagnose_url

    from . import pg

    if not pg.available():
        pytest.skip("no PostgreSQL server")
    schema = pg.new_schema()
    try:
        with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
            first, other = own_task(hive), own_task(hive)
            lease = hive.claim(CODER, first)
            hive.submit(CODER, first, lease_id=lease.lease_id, token=lease.fencing_token,
                        summary="done", evidence=EVIDENCE)
            rows = list(dict.fromkeys(r.seq for r in hive.journal() if r.number == first))
        with pg.connect() as conn:
            conn.execute(f"SET search_path = {schema}")
            conn.execute("ALTER TABLE journal DISABLE TRIGGER USER")
            conn.execute(change.format(mid=rows[len(rows) // 2], other=other))
            conn.execute("ALTER TABLE journal ENABLE TRIGGER USER")
        chain = {f.check: f for f in diagnose_url(pg.store_url(schema))}["hash chain"]
        assert not chain.ok and found in chain.detail, chain
    finally:
        pg.drop(schema)


def test_doctor_names_a_dropped_key_name_when_the_key_sealed_one_row_alone(
        tmp_path: Path) -> None:
    """The boundary: a store whose one sealed row is its newest (the key's first row is
    the tip) that no longer names its key is named by doctor."""
    from .test_key_taken_once import unkey

    old = tmp_path / "old.db"
    with Hive.open(old, owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
    identity = identity_of(old)
    unkey(old)
    key_path(identity).unlink()
    keyed_path(identity).unlink()
    with Hive.open(old, clock=ManualClock(START)) as hive:
        hive.set_policy(OWNER, "mode", "team")  # the key's first write: one row
        tip = hive.last_seq()
    sealed = load_key(identity)
    assert sealed is not None and sealed.keyed_from == tip
    unkey(old)  # its name dropped (and the rows rechained, as a keyless forger would)
    found = checks(old)["hash chain"]
    assert not found.ok and "no longer names its chain key" in found.detail, found


def test_doctor_names_a_key_file_that_is_not_the_key_the_store_names(
        path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    identity = identity_of(path)
    other = tmp_path / "other-keys"
    other.mkdir()
    (other / key_path(identity).name).write_text(json.dumps(
        {"store_id": identity, "key": "00" * 32, "keyed_from": 1}))
    monkeypatch.setenv("HIVELITE_KEYS", str(other))
    found = checks(path)["hash chain"]
    assert not found.ok and "the store names the chain key" in found.detail, found
