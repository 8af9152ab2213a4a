"""``doctor`` on a PostgreSQL store: the same checks as on an SQLite file.

The store's rules are checked in the server's catalogs (:mod:`.pg_guard`: every trigger
present and enabled, every function's body hivelite's). Every other check reads the
rows: they are copied, in one snapshot, into a scratch SQLite store that nobody else
sees, and :func:`.doctor.diagnose` runs there, so both engines answer to one set of
checks (the hash chain with the owner's key, the replay, the actors, the tokens, leases,
queue, controls, policy, results, usage, kept answers, and the heads witnessed). Nothing
is written to the store; its pages are the server's to check (``pg_amcheck``).
"""

from __future__ import annotations

from ..core.errors import StoreError
from ..core.progress import Progress
from .columns import WATCH
from .doctor import Finding, answers_finding, key_held, watches_finding, witness_sound
from .keys import RESTORED, load_key, witness
from .pg_tables import rows_findings, rules_finding
from .postgres import PostgresStore


def diagnose_url(url: str, *, head: str | None = None, older_copy: bool = False,
                 progress: Progress | None = None, at: str | None = None,
                 restored: bool = False, no_key: bool = False) -> list[Finding]:
    """Every check of :func:`.doctor.diagnose` on the PostgreSQL store at ``url``; a
    sound store's head is witnessed (at ``at``) beside the owner's key. A store that names
    the owner's key fails without it, unless ``no_key`` (:func:`.doctor.key_held`)."""
    store = PostgresStore(url, create=False, upgrade=False)
    try:
        if restored:  # the owner says so: the journal as it stands is the yardstick
            with store.read() as reader:
                identity, tip = reader.meta("store_id"), reader.head()
            if identity is not None and tip is not None:
                witness(identity, tip, at or "", RESTORED)
        findings = [rules_finding(store), *rows_findings(
            store.tables(), head=head, older_copy=older_copy, progress=progress,
            place=store.place)]
        if not any(f.check == "rows" for f in findings):  # (rows it could read)
            kept = {f.check: f for f in _kept_findings(store)}
            findings = [kept.get(f.check, f) for f in findings]
    finally:
        store.close()
    findings = key_held(findings, no_key)
    witness_sound(findings, at)
    return findings


def _kept_findings(store: PostgresStore) -> list[Finding]:
    """The kept answers' and the watches' findings, read from the server: an export (and
    so the copy the other checks read) leaves both out."""
    with store.read() as reader:
        identity = reader.meta("store_id")
        answers = store.conn.execute("SELECT caller, id, verb, digest, answer, at FROM"
                                     " requests ORDER BY at, caller, id").fetchall()
        watches = store.conn.execute(f"SELECT {WATCH}, seal FROM watches ORDER BY"
                                     " created_at, id").fetchall()
    try:
        key = load_key(identity) if identity is not None else None
    except StoreError as exc:
        return [Finding("kept answers", False, exc.message),
                Finding("watches", False, exc.message)]
    return [answers_finding(answers, key), watches_finding(watches, key)]


def journal_heads_url(url: str, seqs: list[int]) -> tuple[dict[int, str], tuple[int, str],
                                                          bool]:
    """:func:`.doctor.journal_heads` of the PostgreSQL store at ``url``."""
    store = PostgresStore(url, create=False, upgrade=False)
    try:
        with store.read():
            rows = store.conn.execute("SELECT seq, coalesce(glink, hash) FROM journal"
                                      " WHERE seq = ANY(%s)", (seqs,)).fetchall()
            tip = store.conn.execute("SELECT seq, coalesce(glink, hash) FROM journal"
                                     " ORDER BY seq DESC LIMIT 1").fetchone()
    finally:
        store.close()
    chain = next((f for f in diagnose_url(url, no_key=True) if f.check == "hash chain"),
                 None)
    return ({int(s): str(h) for s, h in rows}, (int(tip[0]), str(tip[1])) if tip else (0, ""),
            chain is not None and chain.ok)


__all__ = ["diagnose_url", "journal_heads_url"]
