"""A key is never taken twice (issue 48, item 1): the owner's keys folder records each
store its key sealed, and a store it knows that stops naming its key refuses every write
and fails ``doctor``; the key's seal of the tokens from before it takes only tokens the
journal shows issued.

The forger here holds the store (the file, or the PostgreSQL role) but not the keys
folder: they remove the store's name of its key, so that the next process holding the
key would take it afresh and seal what they wrote.
"""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from hivelite import Hive, ManualClock
from hivelite.core.errors import StoreError, Unauthenticated
from hivelite.store.doctor import diagnose_file
from hivelite.store.keys import key_path, keyed, keyed_path, make_key
from hivelite.verbs.tokens import _hash

from .conftest import OWNER, START, own_task
from .test_doctor import cli
from .test_keyed_chain import identity_of, rechained

SECRET = "f" * 43
FORGED = "f0f0f0f0f0f0"
TOKEN_ROW = ("INSERT INTO tokens(id, agent, instance, rights, hash, created_at, by) VALUES"
             f" ('{FORGED}', NULL, NULL, 'owner', '{_hash(SECRET)}', '{START}', 'ana')")


def launder(path: Path) -> None:
    """The downgrade: the store's name of its key removed (its refusal set aside, then put
    back, so the schema reads as before), and an owner's token with no journaled issue."""
    conn = apsw.Connection(str(path))
    kept = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'meta_kept'").get
    with conn:
        conn.execute("DROP TRIGGER meta_kept")
        conn.execute("DELETE FROM meta WHERE key = 'chain_key'")
        conn.execute(kept)
        conn.execute(TOKEN_ROW)
    conn.close()


def test_a_store_that_drops_its_key_s_name_is_refused_and_its_forged_token_never_works(
        tmp_path: Path) -> None:
    path = tmp_path / "kept.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
        issued = hive.add_token(OWNER)
    record = keyed(identity_of(path))
    assert record is not None and record.first_sealed == 1  # recorded by the first write
    launder(path)
    with Hive.open(path, clock=ManualClock(START)) as hive:
        before = hive.last_seq()
        for call in (lambda: hive.authenticate(f"hl_{FORGED}_{SECRET}"),
                     lambda: hive.authenticate(issued.token)):
            with pytest.raises(StoreError) as refused:
                call()
            assert refused.value.reason == "schema_tampered"
        with pytest.raises(StoreError) as refused:
            own_task(hive)
        assert refused.value.reason == "schema_tampered"
        assert "no longer names it" in refused.value.message
        assert str(keyed_path(identity_of(path))) in refused.value.message
        assert hive.last_seq() == before
        assert hive.get(1).number == 1  # reads go on
        assert hive.info().key_state == "dropped"
    found = {f.check: f for f in diagnose_file(path)}
    assert not found["hash chain"].ok
    assert "no longer names its chain key" in found["hash chain"].detail


def test_doctor_names_a_dropped_key_name_on_the_cli_with_a_failing_exit(
        tmp_path: Path) -> None:
    path = tmp_path / "kept.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
    launder(path)
    done = cli(path, "doctor")
    assert done.returncode != 0, done.stdout
    assert "no longer names its chain key" in done.stdout


def test_a_key_made_by_a_write_that_was_undone_is_taken_by_the_next(tmp_path: Path) -> None:
    """The key is made inside the write that first names it: one undone after that (a
    crash, a refusal) leaves the key file with no record, and the store takes that key
    with its next write."""
    path = tmp_path / "old.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
        tip = hive.last_seq()
    identity = identity_of(path)
    unkey(path)
    key_path(identity).unlink()
    keyed_path(identity).unlink()
    made = make_key(identity, tip + 1)  # as the undone write left it
    with Hive.open(path, clock=ManualClock(START)) as hive:
        own_task(hive)
        record = keyed(identity)
        assert record is not None and record.fingerprint == made.fingerprint
        assert hive.info().chain_key == str(key_path(identity))
        assert hive.info().key_state == "sealed"
    assert all(f.ok for f in diagnose_file(path))


def unkey(path: Path) -> None:
    """The store as one from before the key looks: no key named, every row unsealed."""
    rechained(path, "DELETE FROM meta WHERE key = 'chain_key'",
              "UPDATE journal SET detail = json_remove(detail, '$.hash')"
              " WHERE reason = 'token add'")


def test_the_key_s_seal_takes_only_tokens_the_journal_issues(tmp_path: Path) -> None:
    """A store from before the key, holding a token its owner issued and a row in
    ``tokens`` that no journal row issues: the key's first write seals the first alone."""
    path = tmp_path / "old.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        issued = hive.add_token(OWNER, "ana/coder", instance="laptop")
    identity = identity_of(path)
    unkey(path)
    conn = apsw.Connection(str(path))
    conn.execute(TOKEN_ROW)
    conn.close()
    key_path(identity).unlink()
    keyed_path(identity).unlink()
    with Hive.open(path, clock=ManualClock(START)) as hive:
        own_task(hive)  # the first write under the key: what came before is sealed
        sealed = [e.detail for e in hive.journal() if e.reason == "token seal"]
        assert sealed[0] is not None
        assert [t["token"] for t in sealed[0]["tokens"]] == [issued.id]
        assert hive.authenticate(issued.token).caller.name == "ana/coder"
        with pytest.raises(Unauthenticated) as refused:
            hive.authenticate(f"hl_{FORGED}_{SECRET}")
        assert refused.value.reason == "unissued_token"


def test_a_postgresql_store_that_drops_its_key_s_name_is_refused() -> None:
    from . import pg

    if not pg.available():
        pytest.skip("no PostgreSQL server")
    schema = pg.new_schema()
    url = pg.store_url(schema)
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
    with pg.connect() as conn:
        conn.execute("SET session_replication_role = replica")  # the rules aside
        conn.execute(f"DELETE FROM {schema}.meta WHERE key = 'chain_key'")
        conn.execute(f"INSERT INTO {schema}.{TOKEN_ROW.removeprefix('INSERT INTO ')}")
    with Hive.open(url, clock=ManualClock(START)) as hive:
        before = hive.last_seq()
        with pytest.raises(StoreError) as refused:
            own_task(hive)
        assert refused.value.reason == "schema_tampered"
        with pytest.raises(StoreError):
            hive.authenticate(f"hl_{FORGED}_{SECRET}")
        assert hive.last_seq() == before
    from hivelite.store.pg_doctor import diagnose_url

    found = {f.check: f for f in diagnose_url(url)}
    assert not found["hash chain"].ok
    assert "no longer names its chain key" in found["hash chain"].detail
