"""The stores a server holds, by vault id, which of them a token belongs to, and the
threads that write to each."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ...core.errors import NotFound, Unauthenticated
from ...hive import Hive
from ...verbs.tokens import Authenticated, parse_token

T = TypeVar("T")
WRITERS = 1
"""Threads that run a vault's write verbs, by default. SQLite takes one writer at a time,
so more threads only queue inside SQLite's busy wait, which sleeps in steps of up to
100 ms and wakes in no order: one thread taking the writes in the order they came keeps
the waiting in a queue of its own, first come first served (docs/serve.md)."""


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


__all__ = ["Vaults"]
