"""``Hive``: the Python API, one method per verb, each verb one ``BEGIN IMMEDIATE`` transaction.

The verbs are grouped by stage (``handoff``, ``claims``, ``results``); this
module puts them together and opens a store.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from .core.caller import Caller
from .core.clock import Clock, system_clock
from .core.errors import InvalidInput
from .store import SqliteStore, Store
from .store.engines import open_url
from .store.sqlite import Synchronous
from .store.urls import is_url
from .verbs import awaiting as _awaiting
from .verbs import budgets as _budgets
from .verbs import claims as _claims
from .verbs import controls as _controls
from .verbs import enrolments as _enrolments
from .verbs import fields as _fields
from .verbs import handoff as _handoff
from .verbs import policy as _policy
from .verbs import questions as _questions
from .verbs import results as _results
from .verbs import signers as _signers
from .verbs import tokens as _tokens
from .verbs import watches as _watches
from .verbs.authority import enabled_names
from .verbs.base import HiveBase
from .verbs.plugins import call_each, get_plugin_manager, load_installed
from .verbs.settings import load_settings
from .verbs.work import Body, WorkReport, work

_OWNER_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def _checked_owner(owner: str, where: str = "owner") -> str:
    if not _OWNER_RE.fullmatch(owner) or len(owner) > 39:
        raise InvalidInput("invalid_owner", f"{where} {owner!r} is not an owner's name: names"
                           " are lowercase letters, digits and single hyphens, e.g. ana",
                           field="owner")
    return owner


def _new_store_owner(owner: str | None) -> str:
    """Whom a new store records as its owner: the one named, or ``$HIVELITE_OWNER``; never
    a guess (a login name like ``root`` or ``jovyan`` would hold every handoff of the
    person's own agents)."""
    if owner is not None:
        return owner
    named = os.environ.get("HIVELITE_OWNER")
    if named:
        return _checked_owner(named, "$HIVELITE_OWNER")
    raise InvalidInput("owner_required", "a new store needs its owner, the person whose"
                       " agents it serves: Hive.open(path, owner='ana'), $HIVELITE_OWNER, or"
                       " hivelite --db PATH init --owner NAME. Nothing was created",
                       field="owner")


class Hive(HiveBase):
    """One store, its owner and its plugins. Open with :meth:`open`; use as a context manager.

    One ``Hive`` may be shared by threads: each thread gets its own connection.

    Each verb is a plain function of the module named for its stage (``handoff``,
    ``claims``, ``results``, ...), which its row of the verb table names; here it is a
    method, the function itself.
    """

    # handing off, and the owner's word on a handoff
    handoff = _handoff.handoff
    handoff_many = _handoff.handoff_many
    approve = _handoff.approve
    deny = _handoff.deny
    cancel = _handoff.cancel
    max_attempts = _handoff.max_attempts
    # working under a claim
    claim = _claims.claim
    claim_next = _claims.claim_next
    resume = _claims.resume
    lease = _claims.lease
    renew = _claims.renew
    release = _claims.release
    checkpoint = _claims.checkpoint
    update = _claims.update
    pause = _claims.pause
    answer = _questions.answer
    await_task = _awaiting.await_task
    # results, verdicts, the owner's sign-off
    submit = _results.submit
    verify = _results.verify
    sign_off = _results.sign_off
    decline = _results.decline
    amend = _results.amend
    set_fields = _fields.set_fields
    # the owner's authority
    hold = _controls.hold
    veto = _controls.veto
    stop = _controls.stop
    lift = _controls.lift
    controls = _controls.controls
    set_budget = _budgets.set_budget
    clear_budget = _budgets.clear_budget
    budgets = _budgets.budgets
    enrol = _enrolments.enrol
    end_enrolment = _enrolments.end_enrolment
    enrolments = _enrolments.enrolments
    add_signer = _signers.add_signer
    remove_signer = _signers.remove_signer
    signers = _signers.signers
    set_policy = _policy.set_policy
    require_plugin = _policy.require_plugin
    enable_plugin = _policy.enable_plugin
    disable_plugin = _policy.disable_plugin
    unrequire_plugin = _policy.unrequire_plugin
    plugin_status = _policy.plugin_status
    add_token = _tokens.add_token
    tokens = _tokens.tokens
    revoke_token = _tokens.revoke_token
    authenticate = _tokens.authenticate
    # durable waits (the MCP face's tasks)
    watch = _watches.watch
    watched = _watches.watched
    settle_watch = _watches.settle_watch

    def work(self, caller: Caller, body: Body, *, minutes: int = 10,
             project: str | None = None, label: str | None = None, limit: int | None = None,
             renew_every: float | None = None, wait: float = 0) -> WorkReport:
        """Run ``body`` on this agent's ready tasks, one at a time, keeping each lease
        alive while it runs: see :func:`hivelite.verbs.work.work`."""
        return work(self, caller, body, minutes=minutes, project=project, label=label,
                    limit=limit, renew_every=renew_every, wait=wait)

    def _tell_plugins_notice(self) -> None:
        """Say once, on a store made before installing stopped enabling, which installed
        plugins no longer act on it (a warning of the ``hivelite`` logger: the CLI prints
        it on stderr). A store this process cannot write keeps its mark for the next."""
        import logging

        from .core.errors import HiveliteError

        try:
            told = _policy.tell_plugins_notice(self)
        except HiveliteError:
            return
        if told is not None:
            logging.getLogger("hivelite").warning(told)

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
        parents: bool = False,
    ) -> Hive:
        """Open (or create) the store at ``path``, or use an open ``store`` (any backend
        that keeps the store contract); expired claims are returned first.

        A new store records ``owner`` (or ``$HIVELITE_OWNER``; with neither it is refused,
        ``owner_required``); an existing one keeps its owner, and a different ``owner`` is
        refused. A new store's folder must exist, unless ``parents=True`` makes it.
        """
        if (path is None) == (store is None):
            raise InvalidInput("store_required", "give a path or a store (one of them)",
                               field="path")
        if owner is not None:
            _checked_owner(owner)
        manager = get_plugin_manager(plugins_dir, extra=plugins)
        url = str(path) if is_url(str(path)) else None
        file = (None if url is not None else Path(path) if path is not None
                else getattr(store, "path", None))
        # settings before the file: a refusal leaves no store behind
        config = load_settings(file)
        if store is None and url is not None:
            store = open_url(url, create=create)
        elif store is None:
            store = SqliteStore(Path(str(path)), create=create, synchronous=synchronous,
                                allow_network_fs=allow_network_fs, parents=parents)
        try:
            try:
                stored, values, named = _record_owner(store, owner)
            except BaseException:
                if store.created and _empty(store):
                    store.discard()  # a store refused before it had an owner leaves no file
                raise
            if owner is not None and owner != stored:
                raise InvalidInput(
                    "owner_mismatch", f"this store belongs to {stored!r}, not {owner!r}:"
                    " a store's owner is set when it is made and never changes (hivelite"
                    f" info shows it). Open it as {stored!r} (or without an owner), or make"
                    f" a new store for {owner!r}: hivelite --db NEW.db init --owner {owner}",
                    field="owner")
            load_installed(manager, named)
            hive = cls(store, stored, manager, clock, config, file)
            try:
                call_each(manager, "hivelite_startup", hive=hive)
            except BaseException:
                if store.created and _empty(store):
                    store.discard()  # a store refused at start-up leaves no file behind
                raise
            if values.get(_policy.NOTICE) is not None:
                hive._tell_plugins_notice()
            hive._expire_on_open()
        except BaseException:
            store.close()
            raise
        return hive

    def __enter__(self) -> Hive:
        return self

def _record_owner(store: Store, owner: str | None
                  ) -> tuple[str, dict[str, str], list[str]]:
    """The store's owner, recording ``owner`` (or the default) in a new store; with its
    policy and the installed plugins it enables or requires (those load: installing
    enables none), read in the same snapshot."""
    with store.read() as reader:
        stored = reader.meta("owner")
        values = reader.policy()
        named = [*enabled_names(values), *(r.name for r in reader.required_plugins()
                                           if r.kind == "entry_point")]
    if stored is None:
        with store.write() as writer:  # decide under the lock: two first opens may race
            stored = writer.meta("owner")
            if stored is None:
                stored = _new_store_owner(owner)
                writer.set_meta("owner", stored)
    return stored, values, named


def _empty(store: Store) -> bool:
    with store.read() as reader:
        return reader.task(1) is None
