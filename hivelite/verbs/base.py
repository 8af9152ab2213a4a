"""What every verb stands on: the store, the owner, the plugins, the clock, and the one
write path.

A ``Hive`` holds no connection of its own: its store gives each thread one, so
one ``Hive`` serves many threads. A write verb runs as its statements where the store
writes it so and the case is plain (:meth:`_statement`), else through :meth:`_write`
(see ``unit``), which also explains every refusal; reading (views, listing, history)
lives here too.
"""

from __future__ import annotations

import builtins
import json
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from pydantic import ValidationError

from ..core.caller import Caller, require_caller, require_right
from ..core.clock import Clock, format_ts
from ..core.errors import (
    ForbiddenRight,
    HiveliteError,
    InvalidInput,
    InvalidState,
    PluginError,
    StoreBusy,
    StoreCorrupt,
    StoreError,
)
from ..core.models import (
    DamagedRow,
    ExpiredClaim,
    History,
    JournalEntry,
    Page,
    Receipt,
    StoreInfo,
    StorePolicy,
    TaskView,
)
from ..core.protocol import MOVES_BY_PAIR, PRIORITIES, SORTS, Mode, Right, State
from ..store import ControlRow, ListFilter, Reader, RequestRow, Store, TaskRow, Writer
from ..store.contract import Pick, store_wide, vetoed_tasks
from ..store.doctor import UNSIGNED, unsigned_at
from ..store.keys import META_KEY
from ..store.notes import own_vkey
from . import guard
from .authority import (
    USAGE_LIMITS,
    Loaded,
    admit_controls,
    bearing_on,
    binding_refusal,
    budget_view,
    day_of,
    enabled_names,
    over_budget,
    refuse_veto,
    store_policy,
    vetoed,
)
from .inputs import MAX_PAGE, MAX_SEARCH
from .installed import entry_points
from .plugins import PluginManager, call_all, inside_hook, refuse_write_in_hook
from .retries import PENDING, Pending, dump_answer, idempotent, kept_since, load_answer
from .scope import inactive, outside_rights
from .settings import settings_path
from .table import BY_NAME, ROLE, Verb, mode_of, right_of
from .unit import Unit, receipt
from .views import PacketCache, task_of, view_of

log = logging.getLogger("hivelite")

NOTIFY_WINDOW = 1000
"""Journal rows read at a time to tell transition plugins after a write."""
MAX_NOTIFY_FAILURES = 100
UNREADABLE = (ValueError, TypeError, KeyError, AttributeError)
"""What building a view raises on a row raw SQL wrote: JSON that is not JSON, a state or a
count of the wrong kind, a body of the wrong shape (pydantic's errors are ValueErrors)."""
T = TypeVar("T")


def invalid(exc: ValidationError, what: str) -> InvalidInput:
    """A pydantic error as ``422 invalid_input``, each failed check in words (what the
    field needs, with an example, and what it got); ``field`` keeps the first one's
    location for programs."""
    from ..core.wording import sentence

    problems = [sentence(err, what) for err in exc.errors()]
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or what
    return InvalidInput("invalid_" + what, f"invalid {what}: " + "; ".join(problems),
                        field=field, problems=problems)


def unreadable(exc: Exception) -> str:
    """Why a row could not be read, in one line."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{exc.title}.{where}: {first['msg']}"
    return f"{type(exc).__name__}: {exc}"


_POLICY_HELD: ContextVar[dict[int, StorePolicy] | None] = ContextVar(
    "hivelite_policy_held", default=None)
"""The policy :meth:`HiveBase._policy_once` holds, by hive."""

class _NotPlain(Exception):
    """A verb's statement did not take the write: undo it, and run the full path (which
    decides, and says why it refuses). ``refusal``: the write it refuses, which the full run
    then only explains (None: the statement does not take this case)."""

    def __init__(self, refusal: HiveliteError | None = None) -> None:
        super().__init__()
        self.refusal = refusal


Refusals = builtins.list[HiveliteError]
"""Where :meth:`HiveBase._statement` puts the refusal of the verb's statement (by a rule of
the store's, or a veto), which the full run that follows only explains: handed from the
one to the other by the verb, never left where another write could find it."""


class _Explained(Exception):
    """The full run's answer after a refusal, carried out of its transaction so that
    nothing it wrote is kept."""

    def __init__(self, answer: object, as_it_is: bool) -> None:
        self.answer, self.as_it_is = answer, as_it_is


WRITE_ATTEMPTS = 3
"""How many times a write that only met other writes (a deadlock) is tried."""


def _retried(attempt: Callable[[], T]) -> T:
    """``attempt`` (one write transaction), again when the store gave it up as meeting
    other writes (PostgreSQL's deadlock or serialization failure: ``StoreBusy`` with
    ``retry``; nothing was written), at most :data:`WRITE_ATTEMPTS` times."""
    for tried in range(1, WRITE_ATTEMPTS + 1):
        try:
            return attempt()
        except StoreBusy as error:
            if not error.extra.get("retry") or tried == WRITE_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


class HiveBase:
    """One open store with its owner, plugins and clock; shared by threads."""

    def __init__(self, store: Store, owner: str, plugins: PluginManager, clock: Clock,
                 config: dict[str, Any] | None = None, path: Path | None = None) -> None:
        self.store = store
        self.owner = owner
        self.plugins = plugins
        self.clock = clock
        self.config: dict[str, Any] = config or {}
        self.path = path
        """The store's file, when it has one (settings and plugins find their files by it)."""
        self.notify_failures: deque[PluginError] = deque(maxlen=MAX_NOTIFY_FAILURES)
        """The newest notifier failures (a move is committed whatever its notifiers do)."""
        self.expired_on_open: builtins.list[ExpiredClaim] = []
        self.settings_read: dict[str, dict[str, Any]] = {}
        """What each plugin read at start-up, by plugin and then by what it was (a settings
        section, a file it names): the store's required policy binds it."""
        self._loaded_plugins: dict[str, Loaded] | None = None
        self._expired_lock = threading.Lock()
        self._packets = PacketCache()

    def close(self) -> None:
        self.store.close()

    def __repr__(self) -> str:
        return f"<Hive {self.store.location} owner={self.owner}>"

    def _repr_html_(self) -> str:
        from ..core.notebook import store

        return store(self.info())

    def __enter__(self) -> HiveBase:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def now(self) -> datetime:
        """The store's time, as its verbs read it (UTC): the clock a plugin should ask,
        never ``datetime.now()``, so a test's clock or ``$HIVELITE_NOW`` moves it too."""
        return self.clock()

    def as_owner(self) -> Caller:
        """The store's owner as a caller, for code that acts as the owner on purpose."""
        return Caller.owner(self.owner)

    def settings(self, section: str) -> dict[str, Any]:
        """A plugin's table from the settings file (``hivelite.toml`` beside the store)."""
        value = self.config.get(section, {})
        if isinstance(value, dict):
            self.runs_with(section, value)
        if not isinstance(value, dict):
            file = settings_path(self.path)
            where = file.absolute() if file is not None else "(no file)"
            raise InvalidInput("invalid_config", f"[{section}] in the settings file must be"
                               f" a table, not {type(value).__name__} ({where})",
                               field=section)
        return value

    # -- the one write path ----------------------------------------------------

    def _caller(self, caller: object, verb: str | Verb) -> Caller:
        """The caller, checked against this store: an owner caller must be its owner, a
        token's caller must carry the verb's right.

        Every write verb starts here, so a write from inside a hook is refused before the
        verb asks any hook of its own."""
        name = verb.name if isinstance(verb, Verb) else verb
        refuse_write_in_hook(name)
        checked = require_caller(caller, name)
        require_right(checked, name, verb.right if isinstance(verb, Verb) else right_of(name))
        if checked.is_owner and checked.name != self.owner:
            raise ForbiddenRight("not_owner", f"this store belongs to {self.owner!r};"
                                 f" {checked.name!r} is not its owner")
        return checked

    def _write(self, caller: Caller, verb: str | Verb, body: Callable[[Unit], T], *,
               about: str | int | Pick | None = None, refused: Refusals | None = None) -> T:
        """Run one write verb (a row of the verb table, or its name): check the caller,
        then :meth:`_run` its body, admitted as the row's mode says (a name no row has is
        a programming error, never a write admitted by no rule). ``about``: the task the
        body takes first (``unit.task(about)``), or the pick of ``next``, when the verb
        knows it before the write (``Store.write``). ``refused``: what
        :meth:`_statement` found refused, which this run then only explains."""
        name, mode = (verb.name, verb.mode) if isinstance(verb, Verb) else (verb, mode_of(verb))
        right = verb.right if isinstance(verb, Verb) else right_of(name)
        return self._run(self._caller(caller, verb), body, name, mode, right, about=about,
                         refused=refused[-1] if refused else None)

    def _verb(self, caller: Caller, verb: str,
              statement: Callable[[Writer, datetime, str], T | None],
              explain: Callable[[Unit], T], *, about: str | int | Pick | None = None,
              swept: builtins.list[TaskRow] | None = None) -> T:
        """One write verb of the verb table, named once: its ``statement``
        (:meth:`_statement`), else its full run, ``explain``, which decides a case the
        statement does not take, and after a refusal by a rule of the store's only
        explains it (:meth:`_write`). ``about``: the task (or pick) both take first."""
        refused: Refusals = []
        done = self._statement(caller, verb, statement, about=about, swept=swept,
                               refused=refused)
        return done if done is not None else self._write(caller, verb, explain, about=about,
                                                         refused=refused)

    def _run(self, caller: Caller | None, body: Callable[[Unit], T], verb: str = "write",
             mode: Mode = Mode.write, right: Right | None = None, *,
             about: str | int | Pick | None = None,
             refused: HiveliteError | None = None) -> T:
        """:meth:`_attempt`, again when the store gave up a write that only met others
        (PostgreSQL's deadlock or serialization failure: ``StoreBusy`` with ``retry``;
        nothing was written, and the verb decides afresh), at most
        :data:`WRITE_ATTEMPTS` times. After a refusal of the verb's statement
        (``refused``), it only explains it."""
        return _retried(lambda: self._attempt(caller, body, verb, mode, right, about=about,
                                              refused=refused))

    def _attempt(self, caller: Caller | None, body: Callable[[Unit], T], verb: str,
                 mode: Mode, right: Right | None, *,
                 about: str | int | Pick | None = None,
                 refused: HiveliteError | None = None) -> T:
        """One transaction: the time under the lock, the expiry sweep, the admission checks,
        the verb's body; after the commit, the moves it journaled are announced.

        ``refused``: the store refused the verb's statement, and this run explains why: its
        transaction is undone whatever the body does. The body's error is the answer; a
        body that returns finds no words for the refusal, which is then the answer as the
        store said it, unless it answers with what the store holds as it is, writing
        nothing (``Unit.as_it_is``: a handoff whose id another write took, that task).

        Never from inside a hook (a hook may read, not write): that is refused here too,
        whatever way a write arrived.

        Where this write's journal rows begin and end is asked after the body (for the
        receipt and the notifications) and known at the latest with the commit: a kept
        answer, which holds the receipt, waits for it before."""
        refuse_write_in_hook(verb)
        notifiers = bool(self.plugins.hook.hivelite_on_transition.get_hookimpls())
        pending = PENDING.get() if caller is not None else None

        def job(tx: Writer) -> tuple[T, Callable[[], tuple[int, int]] | None, bool]:
            unit = Unit(tx, caller, self.clock(), verb=verb, mode=mode, right=right)
            self._sweep(unit)
            self._admit(unit)
            if pending is not None and caller is not None:  # a retry raced its first call
                answered = self._kept(tx, caller, pending, unit.now)
                if answered is not None:
                    return answered, None, False  # type: ignore[return-value]
            try:
                result = body(unit)
            except HiveliteError as error:  # an error about one task names it (seed 004)
                error.about(unit.subject)
                raise
            if refused is not None:  # it explains: nothing it wrote is kept
                raise _Explained(result, unit.as_it_is)
            ends = tx.journal_end() if notifiers or unit.journaled else None
            receipted = unit.journaled and isinstance(result, Receipt)
            if pending is not None and caller is not None:
                if receipted and ends is not None:  # the kept answer holds the receipt's seq
                    result.seq = ends()[1]  # type: ignore[attr-defined]
                _keep(tx, caller, pending, result, unit.now)
            return result, ends, receipted

        try:
            with store_wide(mode is Mode.authority):
                result, ends, receipted = self.store.transact(job, about=about)
        except _Explained as explained:
            assert refused is not None
            if not explained.as_it_is:  # the guard has no words for the store's refusal
                raise refused from None
            return explained.answer  # type: ignore[return-value]  # (nothing to write)
        if ends is not None:
            first, last = ends()
            if receipted:  # the task's own rows are the last this write added
                result.seq = last  # type: ignore[attr-defined]
            if notifiers and last > first:
                self._notify(first, last)
        return result

    def _statement(self, caller: Caller, verb: str,
                   statements: Callable[[Writer, datetime, str], T | None], *,
                   about: str | int | Pick | None,
                   swept: builtins.list[TaskRow] | None = None,
                   refused: Refusals | None = None) -> T | None:
        """``verb`` as its ``statements`` (the store's, in one transaction); None when they
        do not take its case, and the caller runs :meth:`_write`, whose full run decides and
        says precisely why it refuses.

        The owner's controls are asked here, in the transaction, of an agent's verb (the
        caller's instance is what the store cannot know), but of a claim and a holder's
        write, whose statements ask them in their own SQL (:data:`FOLDED`): a stop, or a
        hold of a claim or a holder's write, is refused in the full run's words
        (:func:`admit_controls`), and a write about a task the owner vetoed the caller on
        is left to the full run, which refuses it. The rest is the database's: a statement
        the store's rules refuse is undone, and the full run explains it. ``statements``
        may answer with an error that needs no explaining (``next``'s ``queue_empty``):
        nothing they wrote is kept, and the error is the verb's answer. ``about``: the task
        (or the pick) they take, which an engine may take with the ``BEGIN`` (None: a task
        they make). A transaction the store gave up as meeting others is run again, as in
        :meth:`_run`.

        Every lease that ran out is ended first, in the same transaction, as the full run's
        sweep ends it (:func:`expired`); ``swept`` (when given) holds the claims it ended.
        A call with a request id (``PENDING``) is answered with the answer kept for it, if
        any, before anything is written; else its answer is kept with its writes, as the
        full run keeps it. A process that does not run the plugins the store requires is
        refused before anything is written (an agent's verbs; the owner's authority is
        bound by none), as in the full run's admission. That refusal, a kept answer's and
        a claim's daily budget are the full run's to say, after the controls and the
        enrolment it asks first, in its order.

        ``refused``: where a refusal of the statement goes (by a rule of the store's, or a
        veto), for the full run that follows to explain (:meth:`_write`)."""
        mode = mode_of(verb)
        if verb not in self.store.statements:
            return None
        notifiers = bool(self.plugins.hook.hivelite_on_transition.get_hookimpls())
        authority = mode is Mode.authority  # (no plugin bears on the owner's word)
        controlled = not caller.is_owner and mode not in FOLDED  # (none bears on the owner)
        charged = mode is Mode.claiming and not caller.is_owner  # (a claim: the budget's)
        pending = PENDING.get()

        def job(tx: Writer) -> tuple[T, Callable[[], tuple[int, int]] | None]:
            now = self.clock()  # under the lock: a lease that ran out while this
            at = format_ts(now)  # verb waited for it is stale, as in the full run
            vetoes = controls_on(tx.controls(), caller, mode) if controlled else ()
            try:
                if not authority:  # the plugins the store requires: this process runs
                    self._bound(tx)  # them? (what the store cannot know)
                if pending is not None:  # a retry: its first answer, kept, if there is one
                    kept = self._kept(tx, caller, pending, now)
                    if kept is not None:
                        return kept, None  # type: ignore[return-value]
                ended = expired(tx, at)
                if swept is not None:
                    swept[:] = ended
                if charged:  # a day's claims, counted by the claim's own write
                    charge(tx, now, caller.name)
            except HiveliteError as error:  # said by the full run, after what it asks first
                raise _NotPlain(error) from None  # (a control, the enrolment)
            answer = statements(tx, now, at)
            if answer is None:
                raise _NotPlain  # undo what it wrote: the full run decides
            number = answer.number if isinstance(answer, Receipt) else None
            if number in vetoes:  # a write about the task: the full run refuses it
                raise _NotPlain(ForbiddenRight("vetoed", f"the owner vetoed {caller.name} on"
                                               f" task {number}", number=number))
            ends = tx.journal_end()  # (known at the commit at the latest)
            if pending is not None:  # the answer kept with the write, its seq named
                if isinstance(answer, Receipt) and not answer.seq:
                    first, last = ends()
                    if last > first:
                        answer.seq = last
                _keep(tx, caller, pending, answer, now)
            return answer, ends

        def transact() -> tuple[T, Callable[[], tuple[int, int]] | None]:
            return _retried(lambda: self.store.transact(job, about=about))

        try:
            if authority:  # (an agent's verb, the common one, sets nothing)
                with store_wide(True):
                    answer, ends = transact()
            else:
                answer, ends = transact()
        except _NotPlain as undone:
            if refused is not None and undone.refusal is not None:
                refused.append(undone.refusal)
            return None
        except HiveliteError as error:
            if not error.by_store:  # said in words already (or the store itself failed)
                raise
            log.debug("%s: the store refused its statement (%s); the full run explains",
                      verb, error)
            if refused is not None:
                refused.append(error)
            return None
        if ends is None:  # a retry answered as it was first
            return answer
        first, last = ends()
        if last > first:  # it journaled: the answer names its task's last row
            if isinstance(answer, Receipt) and not answer.seq:  # (unless it named it)
                answer.seq = last
            if notifiers:
                self._notify(first, last)
        return answer

    def _moved_by_owner(self, owner: Caller, verb: str, ref: str | int, target: State, *,
                        reason: str, explain: Callable[[Unit], Receipt],
                        accepts: Callable[[TaskRow], bool] | None = None,
                        detail: dict[str, Any] | None = None) -> Receipt:
        """The owner's move of task ``ref`` to ``target`` as its statement (see
        :meth:`_verb`; no control, enrolment or budget bears on the owner). The store's
        rules check the move; ``accepts`` narrows it to the state the verb moves from where
        the protocol has the same move for another verb (the owner's release moves a
        claimed task to ``routed`` too, not a decline). Else ``explain``, the full run,
        decides, and says why it refuses."""
        def statement(tx: Writer, now: datetime, at: str) -> Receipt | None:
            row = tx.lock_task(ref)
            if row is None or (accepts is not None and not accepts(row)):
                return None
            tx.move(row.number, row.state, target.value, at=at, actor=owner.name,
                    reason=reason, detail=detail, end_lease=row.lease_id is not None)
            return receipt(row.number, row.id, target, at)

        return self._verb(owner, verb, statement, explain, about=ref)

    def _replay(self, caller: object, pending: Pending) -> object | None:
        """The first answer to this request, read when the verb's own checks before its
        write refused it (its first call changed what they check: a submitted result has
        no lease left to fence), or None when there is none. A retry those checks pass
        finds its answer under the write's lock instead."""
        checked = self._caller(caller, pending.verb)
        try:
            self.store.chain_key()  # the reads check the record's seal with it
        except StoreError:  # no key to check it with: no replay (the write says why)
            return None
        now = self.clock()
        with self.store.read() as reader:
            row = reader.request(checked.name, pending.id, since=kept_since(now))
        return self._answered(row, pending, now)

    def _answered(self, row: RequestRow | None, pending: Pending,
                  now: datetime) -> object | None:
        """A kept record's answer if it is this request's; a record of the same id with
        other arguments is ``409 idempotency_conflict``; an expired one is no answer."""
        if row is None or row.at < kept_since(now):
            return None
        if row.sealed is False:
            raise StoreError("answer_tampered", f"the kept answer to request {pending.id!r}"
                             " is not sealed with the owner's chain key: it was written"
                             " outside hivelite, and is not replayed. Run: hivelite doctor")
        if (row.verb, row.digest) != (pending.verb, pending.digest):
            raise InvalidState(
                "idempotency_conflict", f"request id {pending.id!r} was used at {row.at} for"
                f" {row.verb} with other arguments; a retry repeats the same call, and a new"
                " call takes a new request id", request_id=pending.id)
        answer: object = load_answer(row.answer)
        return answer

    def _kept(self, tx: Writer, caller: Caller, pending: Pending,
              now: datetime) -> object | None:
        """The answer kept for this request, read under the write lock (:meth:`_answered`)."""
        return self._answered(tx.request(caller.name, pending.id, since=kept_since(now)),
                              pending, now)

    def _bound(self, tx: Writer) -> None:
        """``403 policy_missing`` or ``policy_changed`` when this process does not run the
        policy plugins the store requires, as they were approved (``binding_refusal``)."""
        required = tx.required_plugins()
        refusal = binding_refusal(required, self._loaded(), enabled_names(
            tx.policy())) if required else None
        if refusal is not None:
            raise refusal

    def _admit(self, unit: Unit) -> None:
        """What every write passes before its body runs, in its transaction: the policy
        plugins the store requires, the owner's controls (hold, veto, stop) and the daily
        budgets. So no write slips between the owner's word and its effect."""
        caller = unit.caller
        if caller is None:  # the library's own sweep
            return
        if not caller.is_owner:  # the owner's word first: a stop is named as a stop
            unit.controls = unit.tx.controls()
            admit_controls(unit.controls, caller, unit.mode)
            if unit.verb != "release":  # a claim is always given back
                enrolment = unit.enrolment()
                refusal = inactive(enrolment, caller.name) or (  # a holder's: after its claim
                    None if unit.mode is Mode.holder else outside_rights(
                        enrolment, caller.name, unit.verb,
                        unit.right.value if unit.right else None))
                if refusal is not None:
                    raise refusal
        if unit.mode is not Mode.authority:
            self._bound(unit.tx)
        if not caller.is_owner and unit.mode is Mode.claiming:
            self._charge(unit)

    def _controlled(self, reader: Reader, agent: Caller, verb: str, row: TaskRow) -> None:
        """The owner's controls, asked of a snapshot before the write lock by a verb whose
        early fence check failed (submit): a control that ended the lease is named as such,
        not as a stale claim. (A control ends the claims it bears on, so a fence that holds
        needs no such question; the write path asks the controls again under the lock.)"""
        live = reader.controls()
        admit_controls(live, agent, mode_of(verb))
        veto = vetoed(live, agent.name, row.number)
        if veto is not None:
            raise refuse_veto(veto, agent.name, row.number)

    def _charge(self, unit: Unit, *, usage: bool = False) -> None:
        """:func:`charge` in the full run."""
        assert unit.caller is not None
        charge(unit.tx, unit.now, unit.caller.name, usage=usage)

    def _loaded(self) -> dict[str, Loaded]:
        """This process's policy plugins as a store's requirements compare them."""
        if self._loaded_plugins is None:
            self._loaded_plugins = {
                name: Loaded(*self.plugins.identities.get(name, ("given", name)),
                             self.settings_json(name))
                for name in self.plugins.policy_plugins()}
        return self._loaded_plugins

    def runs_with(self, what: str, value: Any) -> None:
        """A plugin declares, in its ``hivelite_startup``, an input it runs with: a settings
        table (``settings`` and ``plugin_settings`` declare theirs), or the content of a
        file it reads (a rules file). A store that requires the plugin binds these, so a
        process that runs it with other inputs is refused (``policy_changed``). Outside
        start-up nothing is recorded: what a hook reads later is not bound."""
        call = inside_hook()
        if call is not None and call.hook == "hivelite_startup":
            self.settings_read.setdefault(call.plugin, {})[what] = value

    def settings_json(self, name: str) -> str:
        """What plugin ``name`` runs with, as canonical JSON: its ``[name]`` table of the
        settings file and every input it declared at start-up (:meth:`runs_with`)."""
        table = self.config.get(name, {})
        inputs = {name: table if isinstance(table, dict) else {},
                  **self.settings_read.get(name, {})}
        return json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)

    def _sweep(self, unit: Unit) -> None:
        """Every claim whose lease ran out goes back to ``routed`` first (moves 8/9)."""
        unit.swept.extend(expired(unit.tx, unit.at))

    def _notify(self, after: int, upto: int) -> None:
        """After the commit: tell ``hivelite_on_transition`` plugins of each move journaled
        in (after, upto], read by seq (an outbox cursor), with the task as it is now.

        Read a window of rows at a time, so a bulk handoff's hundred thousand moves are
        never all in memory at once. The moves are committed whatever the plugins do: a
        failing notifier is logged and kept in ``notify_failures``, never raised.
        """
        for start in range(after, upto, NOTIFY_WINDOW):
            self._notify_window(start, min(start + NOTIFY_WINDOW, upto))

    def _notify_window(self, after: int, upto: int) -> None:
        with self.store.read() as reader:
            rows = [r for r in reader.journal_after(after, upto=upto)
                    if r.number is not None and r.from_state is not None and r.is_move]
            tasks = {}
            for number in {r.number for r in rows if r.number is not None}:
                found = reader.task_with_bodies(number)
                if found is not None:
                    tasks[number] = task_of(*found, self._packets)
        for row in rows:
            assert row.number is not None and row.from_state and row.to_state
            move = MOVES_BY_PAIR[(State(row.from_state), State(row.to_state))]
            entry = JournalEntry.model_validate(row.fields())
            for error in call_all(self.plugins, "hivelite_on_transition",
                                  task=tasks[row.number], move=move, actor=row.actor or "",
                                  hive=self, entry=entry):
                self.notify_failures.append(error)
                log.warning("%s (task %s, move %s)", error.message, row.number, move.number)

    def _fence(self, unit: Unit, row: TaskRow, lease_id: str, token: int) -> str:
        """The holder check (lease id, token, the caller is the holder on its instance),
        saying "expired"
        when the clock ended this very claim."""
        agent = unit.caller.name if unit.caller is not None else None
        instance = unit.caller.instance if unit.caller is not None else None
        try:
            return guard.holder(row, lease_id, token, agent, unit.at, instance)
        except InvalidState as error:
            if error.reason != "stale_claim" or row.lease_id is not None:
                raise
            ended = unit.tx.last_expiry(row.number)
            if ended is None or ended.token != token:
                raise
            again = ("it is routed again: claim it to take it back, with a new lease and"
                     " token" if row.state == State.routed.value else f"it is {row.state} now")
            raise InvalidState("stale_claim", f"the claim with token {token} on task"
                               f" {row.number} expired at {ended.expired_at}; {again}"
                               ) from None

    def call(self, verb: Verb | str, caller: Caller | None, ref: str | int | None = None,
             request_id: str | None = None, **fields: Any) -> Any:
        """Any verb of the verb table, by its row or its name, with its input's fields:
        what every face calls (the typed methods are this, one verb each)."""
        row = BY_NAME[verb] if isinstance(verb, str) else verb
        try:
            given = row.input.model_validate(fields)
        except ValidationError as exc:
            raise invalid(exc, row.name) from None
        return row.call(self, caller, ref, given, request_id)  # type: ignore[arg-type]

    # -- reading -------------------------------------------------------------

    def info(self) -> StoreInfo:
        """Which store this is (its vault id, owner, schema) and how it stands."""
        now = format_ts(self.clock())
        state: str | None = None
        try:
            key = self.store.chain_key()
        except StoreError as refused:  # reads work without the key: info says how it stands
            key, state = None, KEY_STATES.get(refused.reason, "missing")
        with self.store.read() as reader:
            if state is None:
                state = "sealed" if reader.meta(META_KEY) is not None else "new_here"
            policy = store_policy(reader.policy(), reader.required_plugins())
            return StoreInfo(
                location=self.store.location, vault_id=reader.meta("store_id") or "",
                owner=self.owner, schema_version=self.store.schema_version,
                tasks=reader.state_counts(), mode=policy.mode,
                live_controls=len(reader.controls()),
                required_plugins=[r.name for r in policy.required_plugins],
                enabled_plugins=policy.enabled_plugins,
                installed_not_enabled=sorted(
                    {ep.name for ep in entry_points()} - set(policy.enabled_plugins)
                    - {r.name for r in policy.required_plugins}),
                live_tokens=sum(1 for t in reader.tokens() if t.revoked_at is None
                                and (t.expires_at is None or t.expires_at > now)),
                head=reader.head(), chain_key=None if key is None else str(key.path),
                key_state=state, imported_unsigned=unsigned_at(reader.meta(UNSIGNED)),
                signing_vkey=own_vkey())

    def last_seq(self) -> int:
        """The journal's newest row: it moves whenever anything in the store changes, so a
        watcher (the board) polls this one number instead of the tasks."""
        with self.store.read() as reader:
            return reader.last_seq()

    def policy(self) -> StorePolicy:
        """The store's policy as its owner set it (defaults for what they did not)."""
        held = _POLICY_HELD.get()  # read once within _policy_once
        if held is not None and id(self) in held:
            return held[id(self)]
        with self.store.read() as reader:
            found = store_policy(reader.policy(), reader.required_plugins())
        if held is not None:
            held[id(self)] = found
        return found

    @contextmanager
    def _policy_once(self) -> Iterator[None]:
        """Within it, :meth:`policy` reads the store's policy once: a verb that asks its
        plugins several questions about one call (submit: the evidence, the threshold and
        who set it) pays one read, and every answer sees the same policy."""
        token = _POLICY_HELD.set({})
        try:
            yield
        finally:
            _POLICY_HELD.reset(token)

    def get(self, ref: str | int) -> TaskView:
        """One task by id or number: the full view (seed object, claim, verdicts, usage)."""
        now = format_ts(self.clock())
        with self.store.read() as reader:
            found = guard.found(reader.view(ref), ref)
            controls = reader.controls()
        try:
            return view_of(found, now, self._packets, bearing_on(controls, found.task))
        except UNREADABLE as exc:
            raise StoreCorrupt(f"task {found.task.number} ({found.task.id}) cannot be read:"
                               f" {unreadable(exc)}", number=found.task.number) from exc

    def list(
        self,
        *,
        state: State | str | Sequence[State | str] | None = None,
        assignee: str | None = None,
        requester: str | None = None,
        project: str | None = None,
        ready: bool = False,
        blocked: bool = False,
        labels: Sequence[str] = (),
        priority: str | Sequence[str] | None = None,
        search: str | None = None,
        sort: str = "age",
        limit: int = 50,
        cursor: int | None = None,
        role: str | None = None,
    ) -> Page:
        """Tasks, filtered, oldest first (``sort="priority"``: most pressing first, then
        oldest; ``"updated"``: most recently changed first); ``cursor`` is the last page's
        ``next_cursor``.

        ``ready=True`` keeps only tasks an agent could claim now: routed, every
        ``packet.depends_on`` task completed, attempts left; ``blocked=True`` only open
        tasks still waiting on a dependency; ``labels`` tasks carrying each of them;
        ``search`` tasks whose title, assignee or a label holds the text (ignoring case);
        ``role`` tasks needing that role.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            raise InvalidInput("invalid_limit", f"limit must be an integer 1..{MAX_PAGE}",
                               field="limit")
        if cursor is not None and (isinstance(cursor, bool) or not isinstance(cursor, int)):
            raise InvalidInput("invalid_cursor", "cursor is the next_cursor of a page",
                               field="cursor")
        states: builtins.list[str] = []
        if state is not None:
            wanted = [state] if isinstance(state, str | State) else builtins.list(state)
            try:
                states = [State(s).value for s in wanted]
            except ValueError as exc:
                raise InvalidInput("invalid_state_filter", str(exc), field="state") from None
        if role is not None and (not isinstance(role, str) or not ROLE.match(role)):
            raise InvalidInput("invalid_role", f"a role is 1-64 of a-z, 0-9 and -, from a"
                               f" letter, not {role!r}", field="role")
        if sort not in SORTS:
            raise InvalidInput("invalid_sort", f"sort is one of {', '.join(SORTS)}, not"
                               f" {sort!r}", field="sort")
        priorities = ([priority] if isinstance(priority, str)
                      else builtins.list(priority or ()))
        unknown = [p for p in priorities if p not in PRIORITIES]
        if unknown:
            raise InvalidInput("invalid_priority", f"priority is one of"
                               f" {', '.join(reversed(PRIORITIES))}, not {unknown[0]!r}",
                               field="priority")
        where = ListFilter(states=tuple(states), assignee=assignee, requester=requester,
                           project=project, ready=ready, blocked=blocked,
                           labels=tuple([labels] if isinstance(labels, str) else labels),
                           priorities=tuple(priorities), sort=sort,
                           search=_search(search), role=role)
        now = format_ts(self.clock())
        with self.store.read() as reader:
            rows = reader.views(where, after=cursor, limit=limit + 1)
            controls = reader.controls()
        items: builtins.list[TaskView] = []
        damaged: builtins.list[DamagedRow] = []
        for row in rows[:limit]:  # one unreadable row is reported, not the whole page lost
            try:
                items.append(view_of(row, now, self._packets, bearing_on(controls, row.task)))
            except UNREADABLE as exc:
                damaged.append(DamagedRow.model_construct(
                    number=row.task.number, id=str(row.task.id), error=unreadable(exc)))
        next_cursor = None
        if len(rows) > limit:  # by number in creation order, else how many were shown
            next_cursor = (rows[limit - 1].task.number if sort == "age"
                           else (cursor or 0) + limit)
        return Page.model_construct(items=items, next_cursor=next_cursor, damaged=damaged)

    def history(self, ref: str | int) -> History:
        """The journal rows of one task, oldest first: every move, who made it and why."""
        with self.store.read() as reader:
            row = guard.found(reader.task(ref), ref)
            return History(JournalEntry.model_validate(r.fields())
                           for r in reader.journal(row.number))

    def journal(self) -> builtins.list[JournalEntry]:
        """The whole journal, oldest first."""
        with self.store.read() as reader:
            return [JournalEntry.model_validate(r.fields()) for r in reader.journal()]

    # -- the clock -----------------------------------------------------------

    @idempotent
    def expire(self, caller: Caller, *,
               request_id: str | None = None) -> builtins.list[ExpiredClaim]:
        """Return every task whose claim has expired to ``routed`` now; report what reopened
        (including what opening this store already reopened). Any caller may."""
        checked = self._caller(caller, "expire")
        swept: builtins.list[TaskRow] = []

        def statement(tx: Writer, now: datetime, at: str) -> builtins.list[ExpiredClaim] | None:
            if not checked.is_owner and any(  # an ended enrolment's sweep: the full run
                    inactive(e, checked.name) for e in tx.enrolments(checked.name)):
                return None  # refuses it (the sweep names no task of the agent's)
            return _claims(swept, at)

        reopened = self._verb(checked, "expire", statement, _reopened, swept=swept)
        with self._expired_lock:
            earlier, self.expired_on_open = self.expired_on_open, []
        return earlier + reopened

    def _expire_on_open(self) -> None:
        """Opening a store returns expired claims' tasks first (only writes when there are;
        never from inside a hook, which may open a store to read it). Only where the
        store's writes are sealed here: with the key the store names. Without it (a reader
        on another machine, a store with no key yet) opening writes nothing, and a read
        shows an expired claim as expired; the next write sweeps it, under the key."""
        if inside_hook() is not None:
            return
        if self.store.tampered is not None or getattr(self.store, "damaged", None):
            return  # writes are refused (a schema not hivelite's may not even run the read)
        with self.store.read() as reader:
            overdue = reader.overdue(format_ts(self.clock()))
            named = reader.meta(META_KEY) is not None
        if not overdue or not named:  # (a key taken by a write, never by opening)
            return
        try:
            self.store.chain_key()
        except StoreError:  # the key is not here, or not the one named: reads only
            return
        self.expired_on_open = self._run(None, _reopened)


def _search(text: object) -> str | None:
    """A listing's search text, as the stores compare it (lower case; blank: none)."""
    if text is None:
        return None
    if not isinstance(text, str) or len(text) > MAX_SEARCH:
        raise InvalidInput("invalid_search", f"search is text of at most {MAX_SEARCH}"
                           " characters", field="search")
    return text.strip().lower() or None


KEY_STATES = {"key_missing": "missing", "key_mismatch": "other",
              "schema_tampered": "dropped"}
"""``StoreInfo.key_state`` from the refusal of the store's key (another refusal, such as
a store that is not the one last written at its place: ``missing``)."""


FOLDED = frozenset({Mode.claiming, Mode.holder})
"""The verbs whose statements ask the owner's controls in their own SQL: a claim's lease
(the store's rule refuses one a control forbids, and ``next`` passes over a vetoed task), a
holder's fence (``sqlite.UNBOUND``); :meth:`HiveBase._statement` asks them of every other
verb of an agent's."""


def controls_on(controls: Sequence[ControlRow], caller: Caller, mode: Mode) -> frozenset[int]:
    """The tasks the owner vetoed ``caller`` on, among the live ``controls``; ``403
    forbidden_right`` first when a stop binds it, or a hold does and ``mode`` claims or
    writes under a claim (:func:`admit_controls`)."""
    if not controls:
        return frozenset()
    admit_controls(controls, caller, mode)
    return frozenset(vetoed_tasks(controls, caller.name))


def charge(tx: Writer, now: datetime, agent: str, *, usage: bool = False) -> None:
    """``429 rate_limited daily_budget`` when ``agent`` has used up a daily limit: any of
    them before a claim; tokens or money before it reports usage (``usage=True``: the
    report that crosses a limit is kept, the next is refused). An agent with no budget is
    never refused, and costs one read of what is known."""
    rows = tx.budgets(agent)
    if not rows:
        return
    day = day_of(now, store_policy(tx.policy()).timezone)
    budget = budget_view(rows[0], tx.spend(rows[0].agent, day.start, day.end), day)
    refusal = over_budget(budget, now, day.reset,
                          limits=USAGE_LIMITS if usage else ("tasks", *USAGE_LIMITS))
    if refusal is not None:
        raise refusal


def expired(tx: Writer, at: str) -> builtins.list[TaskRow]:
    """The sweep: every claim whose lease ran out by ``at`` ends, its task routed again
    (moves 8/9, the clock's), before anything else the write does; the claims it ended."""
    found = tx.lock_overdue(at)
    for row in found:
        tx.move(row.number, row.state, State.routed.value, at=at, actor="clock",
                reason="expired", end_lease=True,
                detail={"holder": row.lease_holder, "fencing_token": row.lease_token,
                        "expired_at": row.lease_expires})
    return found


def _keep(tx: Writer, caller: Caller, pending: Pending, answer: object,
          now: datetime) -> None:
    """Keep ``answer`` as this request's, with the write that made it (a retry within
    ``KEEP`` is answered with it); a batch of day-old records leaves."""
    tx.save_request(RequestRow(caller.name, pending.id, pending.verb, pending.digest,
                               dump_answer(answer), format_ts(now)),
                    prune_before=kept_since(now))


def _reopened(unit: Unit) -> builtins.list[ExpiredClaim]:
    """The body of a write that only sweeps: what it reopened."""
    return _claims(unit.swept, unit.at)


def _claims(swept: builtins.list[TaskRow], at: str) -> builtins.list[ExpiredClaim]:
    """The claims a sweep at ``at`` ended, as ``expire`` answers them."""
    return [ExpiredClaim(number=r.number, id=r.id, holder=r.lease_holder or "",
                         from_state=State(r.state), expired_at=r.lease_expires or at)
            for r in swept]
