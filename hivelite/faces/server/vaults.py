"""The stores a server holds, by vault id, which of them a token belongs to, the threads
that write to each, and whether this process may write to them at all (the policy
plugins each requires)."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib.metadata
import shlex
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ...core.errors import ForbiddenRight, NotFound, Unauthenticated
from ...hive import Hive
from ...store import RequiredPlugin
from ...verbs.authority import short
from ...verbs.tokens import Authenticated, parse_token

T = TypeVar("T")
WRITERS = 1
"""Threads that run a vault's write verbs, by default: one, taking the writes in the order
they came. More threads' writes share transactions (the store's group commit) but make
the server no faster, whose own Python is what it spends; they help a plugin slow after
each move (docs/serve.md)."""


class Vaults:
    """The served stores by vault id."""

    def __init__(self, hives: Sequence[Hive], *, writers: int = WRITERS) -> None:
        if writers < 1:
            raise ValueError(f"a vault needs at least one writer thread, not {writers}")
        self.by_id: dict[str, Hive] = {}
        self.writers = writers
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._lock = threading.Lock()
        for hive in hives:
            self.add(hive)

    def add(self, hive: Hive) -> str:
        """Serve ``hive`` too; its vault id."""
        vault_id = hive.info().vault_id
        self.by_id[vault_id] = hive
        return vault_id

    def discard(self, vault_id: str) -> None:
        """Stop serving a vault (its store stays open: whoever added it closes it)."""
        self.by_id.pop(vault_id, None)
        pool = self._pools.pop(vault_id, None)
        if pool is not None:
            pool.shutdown(wait=False)

    async def write(self, vault_id: str, call: Callable[..., T], *args: object) -> T:
        """``call(*args)`` on one of the vault's writer threads, after the writes that came
        before it (a write verb through the one write path, as from any other face)."""
        run = functools.partial(contextvars.copy_context().run, call, *args)
        return await asyncio.get_running_loop().run_in_executor(self._pool(vault_id), run)

    def write_now(self, vault_id: str, call: Callable[..., T], *args: object) -> T:
        """:meth:`write`, from a thread outside the event loop (one waiting for work between
        its writes): its answer once the writer thread ran it."""
        run = functools.partial(contextvars.copy_context().run, call, *args)
        return self._pool(vault_id).submit(run).result()

    def _pool(self, vault_id: str) -> ThreadPoolExecutor:
        """The vault's writer threads (started on its first write)."""
        with self._lock:
            pool = self._pools.get(vault_id)
            if pool is None:
                pool = self._pools[vault_id] = ThreadPoolExecutor(
                    self.writers, thread_name_prefix=f"hivelite-writer-{vault_id}")
            return pool

    def close(self) -> None:
        """End the writer threads once their writes are done (the stores stay open)."""
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.shutdown(wait=True)

    def authenticate(self, token: str | None, session: str | None) -> tuple[str, Authenticated]:
        """The vault whose store issued ``token``, and who it proves (``401`` when none
        did: a token is one store's)."""
        token_id, _ = parse_token(token)
        for vault_id, hive in self.by_id.items():
            with hive.store.read() as reader:
                known = reader.token(token_id) is not None
            if known:
                return vault_id, hive.authenticate(token, session=session)
        raise Unauthenticated("invalid_token", "unknown token")

    def __getitem__(self, vault_id: str) -> Hive:
        hive = self.by_id.get(vault_id)
        if hive is None:
            raise NotFound("no_such_vault", f"this server has no vault {vault_id!r}")
        return hive


BLOCKING = ("missing", "changed", "settings_differ", "not_required")
"""The plugin statuses (``hivelite plugins``) under which every write to the store is
refused: a required plugin not loaded here, loaded as other code or with other settings,
or a policy plugin loaded here that the store does not require."""


def writes_refused(hives: Sequence[Hive]) -> ForbiddenRight | None:
    """Why every write from this process to one of ``hives`` would be refused, or None:
    the plugins whose status (``plugin_status``) refuses every write, each named with its
    store and how to mend it. ``hivelite serve`` asks this before it listens: a server
    whose every write fails is no server. The reason is the write's own:
    ``policy_missing`` when a required plugin is missing, else ``policy_changed``, else
    ``policy_unapproved``."""
    problems: list[tuple[str, str, str]] = []  # (status, plugin, words)
    refused: list[str] = []  # the stores, in the order served
    for hive in hives:
        where = hive.store.location
        with hive.store.read() as reader:
            required = {r.name: r for r in reader.required_plugins()}
        for row in hive.plugin_status():
            if row.status in BLOCKING:
                problems.append((row.status, row.name,
                                 _mend(where, row.name, row.status, row.detail,
                                       required.get(row.name))))
                if where not in refused:
                    refused.append(where)
    if not problems:
        return None
    statuses = {status for status, _, _ in problems}
    reason = ("policy_missing" if "missing" in statuses else "policy_unapproved"
              if statuses == {"not_required"} else "policy_changed")
    names = sorted({name for _, name, _ in problems})
    return ForbiddenRight(
        reason, f"hivelite serve did not start: every write to {' and '.join(refused)}"
        " would be refused. " + "; ".join(words for _, _, words in problems),
        plugins=names, stores=refused)


def _installed(dist: str) -> bool:
    """Whether the distribution ``dist`` is installed (its metadata is found)."""
    try:
        importlib.metadata.distribution(dist)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return True


def _mend(where: str, name: str, status: str, detail: str | None,
          row: RequiredPlugin | None) -> str:
    """One plugin's refusal in words: what is wrong, and the two ways to mend it."""
    drop = f"hivelite --db {shlex.quote(where)} policy unrequire {name}"
    again = f"hivelite --db {shlex.quote(where)} policy require {name}"
    if status == "missing":
        kind, digest = (row.kind, row.digest) if row else ("file", "")
        if kind == "entry_point":
            dist = digest.split(" ")[0]
            lacks, load = ("which is not installed here",
                           f"install the distribution {dist} (pip install {dist}; the owner"
                           f" approved {digest})")
            if _installed(dist):
                lacks, load = (f"which this process did not load ({dist} is installed)",
                               "load it ($HIVELITE_LOAD_PLUGINS names the plugins loaded;"
                               f" the owner approved {digest})")
        elif kind == "file":
            lacks = "which is in no plugins folder this process loads"
            load = (f"put {name}.py ({short(digest)}) in the folder that --plugins-dir or"
                    " $HIVELITE_PLUGINS_DIR names")
        else:
            lacks = "which was given to Hive.open(plugins=...) in Python"
            load = "serve it from Python, giving it as it was given"
        return (f"{where} requires the policy plugin {name!r}, {lacks}: {load}, or the"
                f" owner stops requiring it: {drop}")
    if status == "not_required":
        return (f"this process loads the policy plugin {name!r}, which {where} does not"
                f" require: leave it out, or the owner requires it: {again}")
    what = "other code" if status == "changed" else "other settings"
    return (f"{where} requires the policy plugin {name!r}, which runs here with {what}"
            f" ({detail}): load the one the owner approved, or the owner approves this"
            f" one: {again} (or stops requiring it: {drop})")


__all__ = ["BLOCKING", "Vaults", "writes_refused"]
