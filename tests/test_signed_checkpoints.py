"""Signed checkpoints (issue 48, item 2): the owner's Ed25519 key signs the journal's head
in C2SP's signed-note checkpoint format at every backup, export, server start and sound
doctor; an import takes only an export whose checkpoint a key it knows signed, or, told
``--unsigned``, says so for good."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from hivelite import Hive, ManualClock
from hivelite.core.errors import InvalidInput
from hivelite.store import SqliteStore, notes
from hivelite.store.doctor import diagnose_file
from hivelite.store.transfer import export_lines, import_lines

from .conftest import HANG_S, START, own_task
from .test_keyed_chain import event, rechained

GO_SIGNER = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = ("If you think cryptography is the answer to your problem,\n"
           "then you don't know what your problem is.\n")
GO_NOTE = GO_TEXT + ("\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIu"
                     "GUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n")
"""The signed-note reference implementation's own example (Go's ``note`` package)."""


def test_a_note_is_signed_and_opened_as_the_reference_implementation_does() -> None:
    signer = notes.signer(GO_SIGNER)
    assert signer.sign(GO_TEXT) == GO_NOTE
    assert signer.verifier.vkey == GO_VKEY
    known = [notes.verifier(GO_VKEY)]
    assert notes.opened(GO_NOTE, known) == (GO_TEXT, known[0])
    assert notes.opened(GO_NOTE.replace("cryptography", "encryption"), known) is None
    other = notes.Signer("PeterNeumann", b"\x07" * 32)  # same name, another key: its line
    both = GO_NOTE + other.sign(GO_TEXT).rpartition("\n\n")[2]  # is left alone
    assert notes.opened(both, known) == (GO_TEXT, known[0])
    assert notes.opened(GO_NOTE, [other.verifier]) is None  # known to none
    forged = GO_NOTE.replace("InNIu", "InNIv")  # a known key's line that does not verify
    assert notes.opened(forged + other.sign(GO_TEXT).rpartition("\n\n")[2],
                        [*known, other.verifier]) is None


def made(path: Path) -> str:
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
        return hive.info().vault_id


def exported(path: Path) -> list[str]:
    conn = apsw.Connection(str(path))
    try:
        return list(export_lines(conn))
    finally:
        conn.close()


def imported(tmp_path: Path, lines: list[str], name: str, **given: bool) -> Path:
    target = tmp_path / name
    store = SqliteStore(target)
    try:
        import_lines(store.conn, lines, **given)
    finally:
        store.close()
    return target


def test_an_export_carries_its_head_signed_and_imports_where_the_key_is_known(
        tmp_path: Path) -> None:
    identity = made(tmp_path / "s.db")
    lines = exported(tmp_path / "s.db")
    header = json.loads(lines[0])
    found = notes.read_checkpoint(header["signed_checkpoint"], notes.known_keys())
    seq, _, value = header["head"].partition(":")
    assert found is not None and (found.store_id, found.size, found.hash) == (
        identity, int(seq), value)
    assert found.signer == notes.machine_name()
    target = imported(tmp_path, lines, "copy.db")
    with Hive.open(target, clock=ManualClock(START)) as hive:
        assert hive.info().imported_unsigned is None


def unsigned(lines: list[str]) -> list[str]:
    """The export with its signed checkpoint dropped."""
    return [json.dumps({**json.loads(lines[0]), "signed_checkpoint": None}), *lines[1:]]


def test_an_export_no_known_key_signed_is_refused_unless_unsigned_and_then_said_for_good(
        tmp_path: Path) -> None:
    made(tmp_path / "s.db")
    lines = exported(tmp_path / "s.db")
    header = json.loads(lines[0])
    stranger = notes.Signer("mallory@elsewhere", b"\x05" * 32)
    resigned = [json.dumps({**header, "signed_checkpoint": stranger.sign(
        header["signed_checkpoint"].rpartition("\n\n")[0] + "\n")}), *lines[1:]]
    other_store = [json.dumps({**header, "signed_checkpoint": notes.sign_head(
        "ab" * 16, header["head"])}), *lines[1:]]
    for name, given in (("none", unsigned(lines)), ("a stranger's", resigned),
                        ("another store's", other_store)):
        with pytest.raises(InvalidInput) as refused:
            imported(tmp_path, given, f"{len(name)}.db")
        assert refused.value.reason == "import_unsigned", name
        assert "--unsigned" in refused.value.message
    target = imported(tmp_path, resigned, "taken.db", unsigned=True)
    with Hive.open(target, clock=ManualClock(START)) as hive:
        assert hive.info().imported_unsigned is not None
    chain = {f.check: f for f in diagnose_file(target)}["hash chain"]
    assert chain.ok and "imported unsigned at" in chain.detail
    conn = apsw.Connection(str(target))  # no write removes the record
    with pytest.raises(apsw.ConstraintError):
        conn.execute("DELETE FROM meta WHERE key = 'imported_unsigned'")
    conn.close()
    trusted = notes.trusted_path()  # once the stranger's key is trusted, it vouches
    trusted.write_text(stranger.verifier.vkey + "\n")
    try:
        target = imported(tmp_path, resigned, "trusted.db")
        with Hive.open(target, clock=ManualClock(START)) as hive:
            assert hive.info().imported_unsigned is None
    finally:
        trusted.unlink()


def test_the_new_identity_forgery_is_refused(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's forgery: a copy of the store given a new identity, its key's name
    dropped, a forged row added and every hash recomputed without the key, exported by
    the forger (signed with the forger's own key). It passes doctor's consistency; no key
    this machine knows vouches for it."""
    path = tmp_path / "s.db"
    made(path)
    rechained(path, f"UPDATE meta SET value = '{'ee' * 16}' WHERE key = 'store_id'",
              "DELETE FROM meta WHERE key = 'chain_key'",
              event("budget", {"agent": "ana/coder", "cleared": True}),
              aside=("meta_kept", "meta_identity_fixed", "journal_no_update"))
    with monkeypatch.context() as forger:
        forger.setenv("HIVELITE_KEYS", str(tmp_path / "forger-keys"))
        lines = exported(path)
    assert json.loads(lines[0])["signed_checkpoint"]  # signed, by the forger's key
    with pytest.raises(InvalidInput) as refused:
        imported(tmp_path, lines, "forged.db")
    assert refused.value.reason == "import_unsigned"


def test_a_sound_doctor_keeps_the_head_signed_beside_the_keys_and_the_cli_says_unsigned(
        tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    identity = made(path)
    assert all(f.ok for f in diagnose_file(path, at=START))
    kept = notes.checkpoint_path(identity).read_text(encoding="utf-8")
    found = notes.read_checkpoint(kept, notes.known_keys())
    assert found is not None and found.store_id == identity
    export = tmp_path / "s.jsonl"
    lines = exported(path)
    export.write_text("\n".join([json.dumps({**json.loads(lines[0]), "signed_checkpoint": None}),
                                 *lines[1:]]) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env.update(HIVELITE_LOAD_PLUGINS="", HIVELITE_NOW=START)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hivelite", *args], capture_output=True,
                              text=True, env=env, timeout=HANG_S)

    done = cli("--db", str(tmp_path / "a.db"), "import", str(export))
    assert done.returncode == 6 and "import_unsigned" in done.stderr, done.stderr
    assert not (tmp_path / "a.db").exists()
    done = cli("--db", str(tmp_path / "b.db"), "import", "--unsigned", str(export))
    assert done.returncode == 0, done.stderr
    done = cli("--db", str(tmp_path / "b.db"), "info")
    assert "imported   unsigned, at" in done.stdout, done.stdout


def test_an_import_into_postgresql_takes_only_a_vouched_export_or_says_so(
        tmp_path: Path) -> None:
    """The same gate on the other engine: an export with no signed checkpoint is refused
    by a PostgreSQL store, and taken with ``unsigned``, which its info then says."""
    from . import pg

    if not pg.available():
        pytest.skip("no PostgreSQL server")
    from hivelite.store.postgres import PostgresStore

    made(tmp_path / "s.db")
    lines = exported(tmp_path / "s.db")
    schema = pg.new_schema()
    store = PostgresStore(pg.store_url(schema))
    try:
        with pytest.raises(InvalidInput) as refused:
            import_lines(store.tables(), unsigned(lines))
        assert refused.value.reason == "import_unsigned"
        import_lines(store.tables(), unsigned(lines), unsigned=True)  # (nothing was left)
    finally:
        store.close()
    try:
        with Hive.open(pg.store_url(schema), clock=ManualClock(START)) as hive:
            assert hive.info().imported_unsigned is not None
    finally:
        pg.drop(schema)
