"""The contract suite's second transport: a test's ``Hive`` served by a real uvicorn
server on a loopback port, its verbs called through :class:`hivelite.faces.client.Client`.

Tests marked ``contract`` in the modules that cross the transport (``conftest.OVER_HTTP``)
run twice, once on the file and once here: the ``hive`` fixture
is then a :class:`ServedHive`, whose verbs go over HTTP with a token for each caller (the
caller's own agent and instance, or the owner's), and whose other attributes (``store``,
``clock``, ``journal``, …) are the served ``Hive``'s, so a test still inspects the very
file the server writes. The server runs in a thread of the test process so that it
shares the test's :class:`~hivelite.ManualClock`: moving the clock moves the server's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn

from hivelite import Caller, Hive
from hivelite.core.models import JournalEntry
from hivelite.core.protocol import Mode
from hivelite.faces.client import Client
from hivelite.faces.server.app import create_app
from hivelite.faces.server.vaults import Vaults
from hivelite.verbs.inputs import ListInput
from hivelite.verbs.table import VERBS

from .conftest import HANG_S, ready
from .test_serve import free_port

THROUGH_CLIENT = frozenset(v.method for v in VERBS
                           if (v.by_caller and v.on_task) or v.mode is not Mode.read)
"""The verbs that take a caller and go over HTTP as that caller (the verb table's)."""
READS = frozenset(v.method for v in VERBS
                  if not v.by_caller and v.on_task and v.http is not None)
"""Reads that go over HTTP with the owner's token."""
LIST_ARGS = frozenset(ListInput.model_fields) - {"mine", "mine_as"}
"""What the served list route filters by (all a ``Hive``'s list does)."""
ON_FILE = frozenset({
    "controls", "set_budget", "clear_budget", "budgets",
    "set_policy", "policy", "expire", "as_owner", "store", "owner", "clock", "plugins",
    "info", "last_seq", "add_token", "tokens", "revoke_token", "expired_on_open",
    "enrol", "end_enrolment", "enrolments", "add_signer", "remove_signer", "signers"})
"""What a served test still does on the file: the owner's verbs on the store itself
(budgets, policy, tokens: no route serves them), the expiry sweep, and the store's own
attributes. Anything else is an error, so no verb slips past the transport."""


class LoopbackServer:
    """One uvicorn server in a thread, serving whichever hives the tests add."""

    def __init__(self, app: Any = None) -> None:
        self.app = app if app is not None else create_app([])
        self.vaults: Vaults = self.app.state.vaults
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning",
                                access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)
        self.thread.start()
        def started() -> bool:
            if not self.thread.is_alive() and not self.server.started:
                raise AssertionError("the loopback server ended before it started")
            return bool(self.server.started)

        ready(started, "the loopback server")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=HANG_S)


class ServedHive:
    """A ``Hive`` whose verbs go through a ``Client`` per caller, over real HTTP."""

    def __init__(self, hive: Hive, server: LoopbackServer, callers: Iterator[Caller]) -> None:
        self._hive = hive
        self._server = server
        self._tokens: dict[tuple[str, str | None, str | None], str] = {}
        self._token_ids: set[str] = set()
        self._clients: dict[tuple[str, str, str | None, str | None, str], Client] = {}
        self.vault_id = server.vaults.add(hive)
        for caller in callers:  # tokens made before the test, so its snapshots hold them
            self._token(caller)

    def __repr__(self) -> str:
        return f"ServedHive({self._hive!r} at {self._server.url})"

    def _token(self, caller: Caller) -> str:
        """A token for the caller's agent and instance, with the caller's rights when it
        names some (else all three), or the owner's."""
        rights = sorted(caller.rights) if caller.rights is not None else None
        key = (("owner", None, None) if caller.is_owner else
               (caller.name, caller.instance, ",".join(rights or ())))
        if key not in self._tokens:
            owner = self._hive.as_owner()
            issued = (self._hive.add_token(owner) if caller.is_owner else
                      self._hive.add_token(owner, caller.name, instance=caller.instance,
                                           rights=rights))
            self._tokens[key] = issued.token
            self._token_ids.add(issued.id)
        return self._tokens[key]

    def client(self, caller: Caller) -> Client:
        """The client that calls as ``caller`` (its agent and instance, or the owner)."""
        key = (caller.kind, caller.name, caller.instance, caller.session,
               ",".join(sorted(caller.rights or ())))
        if key not in self._clients:
            self._clients[key] = Client(self._server.url, self._token(caller),
                                        session=caller.session)
        return self._clients[key]

    def _owner(self) -> Client:
        return self.client(self._hive.as_owner())

    @property
    def issued(self) -> frozenset[str]:
        """The ids of the tokens this transport issued for the test's callers."""
        return frozenset(self._token_ids)

    def own_rows(self, row: JournalEntry) -> bool:
        """A journal row this transport wrote (issuing a caller's token), not the test."""
        return (row.reason == "token add" and row.detail is not None
                and row.detail.get("token") in self._token_ids)

    def journal(self) -> list[JournalEntry]:
        """The store's journal as the test made it: without the transport's token rows."""
        return [row for row in self._hive.journal() if not self.own_rows(row)]

    def list(self, **query: Any) -> Any:
        if set(query) <= LIST_ARGS:
            return self._owner().list(**query)
        return self._hive.list(**query)

    def __getattr__(self, name: str) -> Any:
        if name in THROUGH_CLIENT:
            def verb(caller: Caller, *args: Any, **kwargs: Any) -> Any:
                return getattr(self.client(caller), name)(caller, *args, **kwargs)
            return verb
        if name in READS:
            method: Callable[..., Any] = getattr(self._owner(), name)
            return method
        if name in ON_FILE:
            return getattr(self._hive, name)
        raise AttributeError(f"ServedHive does not know whether {name!r} goes over HTTP:"
                             " add it to THROUGH_CLIENT, READS or ON_FILE")

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._server.vaults.discard(self.vault_id)
        self._hive.close()

    def __enter__(self) -> ServedHive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
