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

from ..core.progress import Progress
from .doctor import Finding, key_held, witness_sound
from .keys import RESTORED, witness
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
    finally:
        store.close()
    findings = key_held(findings, no_key)
    witness_sound(findings, at)
    return findings


__all__ = ["diagnose_url"]
