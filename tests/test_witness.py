"""A witness (issue 48, item 3): another key holder cosigns the owner's checkpoint only when
the journal extends the last one it cosigned; doctor holds the store to every head a
trusted witness cosigned. The witness runs as ``hivelite witness`` with a keys folder of
its own, as another user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from hivelite import Hive, ManualClock
from hivelite.store import notes
from hivelite.store.cosign import cosigned_path
from hivelite.store.doctor import diagnose_file
from hivelite.store.keys import heads_path

from .conftest import HANG_S, START, own_task


def hivelite(*args: str, keys: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env.update(HIVELITE_LOAD_PLUGINS="", HIVELITE_NOW=START, HIVELITE_KEYS=str(keys))
    return subprocess.run([sys.executable, "-m", "hivelite", *args], capture_output=True,
                          text=True, env=env, timeout=HANG_S)


@pytest.fixture
def owner_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "owner-keys"
    monkeypatch.setenv("HIVELITE_KEYS", str(folder))
    return folder


def test_a_witness_cosigns_a_grown_journal_and_refuses_a_rewritten_one(
        tmp_path: Path, owner_keys: Path) -> None:
    path = tmp_path / "s.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
        identity = hive.info().vault_id
    assert all(f.ok for f in diagnose_file(path, at=START))  # signs the head
    with Hive.open(path, clock=ManualClock(START)) as hive:
        owner = hive.info().signing_vkey
    assert owner is not None
    checkpoint = notes.checkpoint_path(identity)
    kept = cosigned_path(identity) / "w.checkpoint"
    kept.parent.mkdir()
    witness_keys = tmp_path / "witness-keys"

    def witness() -> subprocess.CompletedProcess[str]:
        return hivelite("--db", str(path), "--json", "witness", str(checkpoint), "--owner",
                        owner, "--out", str(kept), keys=witness_keys)

    done = witness()
    assert done.returncode == 0, done.stderr
    cosigner = json.loads(done.stdout)["witness"]
    notes.trusted_path().write_text(cosigner + "\n")  # the owner trusts the witness
    found = {f.check: f for f in diagnose_file(path)}["witnesses"]
    assert found.ok, found
    good = kept.read_text()  # a cosignature whose signature does not verify proves nothing
    line = good.rstrip("\n").rpartition("\n")[2]
    bad = kept.with_name("bad.checkpoint")
    bad.write_text(good.replace(line, line[:-8] + ("A" if line[-8] != "A" else "B")
                                + line[-7:]))
    found = {f.check: f for f in diagnose_file(path)}["witnesses"]
    assert not found.ok and "cosigned by a witness trusted here" in found.detail, found
    bad.unlink()

    with Hive.open(path, clock=ManualClock(START)) as hive:  # the journal grows
        own_task(hive)
    assert all(f.ok for f in diagnose_file(path, at=START))
    done = witness()
    assert done.returncode == 0, done.stderr

    key = notes.known_keys()  # the owner, holding the file and the key, rewrites history
    conn = apsw.Connection(str(path))
    kept_rule = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'journal_no_update'"
                             ).get
    from hivelite.store.chain import chain_all
    from hivelite.store.keys import load_key

    with conn:
        conn.execute("DROP TRIGGER journal_no_update")
        conn.execute("UPDATE journal SET reason = 'rewritten' WHERE seq = 2")
        chain_all(conn, load_key(identity))  # resealed with the key
        conn.execute(kept_rule)
        tip = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1"
                           ).fetchone()
    conn.close()
    assert key
    checkpoint.write_text(notes.sign_head(identity, f"{tip[0]}:{tip[1]}"))  # signed anew
    done = witness()
    assert done.returncode == 6, done.stdout
    assert "not_witnessed" in done.stderr and "the history was rewritten" in done.stderr
    heads_path(identity).unlink()  # the owner's own witness lines gone: the cosigned head
    found = {f.check: f for f in diagnose_file(path)}["witnesses"]  # still holds it
    name = cosigner.partition("+")[0]
    assert not found.ok and f"witness {name}" in found.detail, found


def test_a_checkpoint_the_owner_did_not_sign_is_not_cosigned(tmp_path: Path,
                                                            owner_keys: Path) -> None:
    path = tmp_path / "s.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
        identity, head = hive.info().vault_id, hive.info().head
    assert head is not None
    stranger = notes.Signer("mallory@elsewhere", b"\x05" * 32)
    forged = tmp_path / "forged.checkpoint"
    forged.write_text(stranger.sign(notes.checkpoint_text(identity, head)))
    assert all(f.ok for f in diagnose_file(path, at=START))
    with Hive.open(path, clock=ManualClock(START)) as hive:
        owner = hive.info().signing_vkey
    assert owner is not None
    done = hivelite("--db", str(path), "witness", str(forged), "--owner", owner,
                    keys=tmp_path / "witness-keys")
    assert done.returncode == 6 and "not signed by an owner's key" in done.stderr


def test_a_witness_of_no_store_exits_6_and_makes_none(tmp_path: Path, owner_keys: Path) -> None:
    checkpoint = tmp_path / "c.checkpoint"
    checkpoint.write_text(notes.Signer("a@b", b"\x01" * 32).sign(
        notes.checkpoint_text("ab" * 16, "1:" + "c" * 64)))
    done = hivelite("--db", str(tmp_path / "none.db"), "witness", str(checkpoint), "--owner",
                    notes.Signer("a@b", b"\x01" * 32).verifier.vkey,
                    keys=tmp_path / "witness-keys")
    assert done.returncode == 6 and "no_store" in done.stderr, done.stderr
    assert not (tmp_path / "none.db").exists()
