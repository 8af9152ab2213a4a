"""``Hive``: the Python API, one method per verb, each verb one ``BEGIN IMMEDIATE`` transaction.

The verbs are grouped by stage (``handoff``, ``claims``, ``results``); this
module puts them together and opens a store.
"""

from __future__ import annotations

import getpass
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from .budgets import BudgetVerbs
from .caller import Caller
from .claims import ClaimVerbs
from .clock import Clock, system_clock
from .controls import ControlVerbs
from .errors import InvalidInput
from .fields import FieldVerbs
from .handoff import HandoffVerbs
from .plugins import call_each, get_plugin_manager
from .policy import PolicyVerbs
from .results import ResultVerbs
from .settings import load_settings
from .store import SqliteStore, Store
from .store.sqlite import Synchronous
from .tokens import TokenVerbs

if TYPE_CHECKING:
    from .work import Body, WorkReport

_OWNER_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def _default_owner() -> str:
    name = os.environ.get("HIVELITE_OWNER") or getpass.getuser()
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:39].strip("-")
    return slug or "owner"


class Hive(HandoffVerbs, ClaimVerbs, ResultVerbs, FieldVerbs, ControlVerbs, BudgetVerbs,
           PolicyVerbs, TokenVerbs):
    """One store, its owner and its plugins. Open with :meth:`open`; use as a context manager.

    One ``Hive`` may be shared by threads: each thread gets its own connection.
    """

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        store: Store | None = None,
        owner: str | None = None,
        plugins_dir: str | os.PathLike[str] | None = None,
        plugins: Iterable[object] = (),
        clock: Clock = system_clock,
        synchronous: Synchronous = "NORMAL",
        create: bool = True,
        allow_network_fs: bool = False,
    ) -> Hive:
        """Open (or create) the store at ``path``, or use an open ``store`` (any backend
        that keeps the store contract); expired claims are returned first.

        A new store records ``owner`` (default ``$HIVELITE_OWNER`` or the login
        name); an existing one keeps its owner, and a different ``owner`` is refused.
        """
        if (path is None) == (store is None):
            raise InvalidInput("store_required", "give a path or a store (one of them)",
                               field="path")
        if owner is not None and (not _OWNER_RE.fullmatch(owner) or len(owner) > 39):
            raise InvalidInput("invalid_owner", f"owner {owner!r} must be a slug like 'ana'",
                               field="owner")
        manager = get_plugin_manager(plugins_dir, extra=plugins)
        file = Path(path) if path is not None else getattr(store, "path", None)
        # settings before the file: a refusal leaves no store behind
        config = load_settings(file) if file is not None else {}
        if store is None:
            store = SqliteStore(Path(str(path)), create=create, synchronous=synchronous,
                                allow_network_fs=allow_network_fs)
        try:
            stored = _record_owner(store, owner)
            if owner is not None and owner != stored:
                raise InvalidInput(
                    "owner_mismatch", f"this store belongs to {stored!r}, not {owner!r}:"
                    " a store's owner is set when it is made and never changes (hivelite"
                    f" info shows it). Open it as {stored!r} (or without an owner), or make"
                    f" a new store for {owner!r}: hivelite --db NEW.db init --owner {owner}",
                    field="owner")
            hive = cls(store, stored, manager, clock, config, file)
            try:
                call_each(manager, "hivelite_startup", hive=hive)
            except BaseException:
                if store.created and _empty(store):
                    store.discard()  # a store refused at start-up leaves no file behind
                raise
            hive._expire_on_open()
        except BaseException:
            store.close()
            raise
        return hive

    def __enter__(self) -> Hive:
        return self

    def work(self, caller: Caller, body: Body, *, minutes: int = 10,
             project: str | None = None, label: str | None = None, limit: int | None = None,
             renew_every: float | None = None) -> WorkReport:
        """Run ``body`` on this agent's ready tasks, one at a time, keeping each lease
        alive while it runs: see :func:`hivelite.work.work`."""
        from .work import work

        return work(self, caller, body, minutes=minutes, project=project, label=label,
                    limit=limit, renew_every=renew_every)


def _record_owner(store: Store, owner: str | None) -> str:
    """The store's owner, recording ``owner`` (or the default) in a new store."""
    with store.read() as reader:
        stored = reader.meta("owner")
    if stored is None:
        with store.write() as writer:  # decide under the lock: two first opens may race
            stored = writer.meta("owner")
            if stored is None:
                stored = owner or _default_owner()
                writer.set_meta("owner", stored)
    return stored


def _empty(store: Store) -> bool:
    with store.read() as reader:
        return reader.task(1) is None
