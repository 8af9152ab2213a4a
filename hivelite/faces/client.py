"""``Client``: the ``Hive`` verbs over HTTP, for an agent that has a token, not the file.

The same method names, arguments and answers as :class:`hivelite.Hive` (``claim``,
``submit``, ``get``, …), sent to ``hivelite serve``. Who calls is the token's agent on the
token's instance (or the owner): a method given a ``caller`` checks that it is that one,
so code written against ``Hive`` runs unchanged, and naming another agent or instance is
``403 forbidden_right`` before anything is sent. Errors arrive as the same exception
classes ``Hive`` raises. Only the standard library: a connection per thread, kept open.
"""

from __future__ import annotations

import builtins
import http.client
import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal
from urllib.parse import quote, urlencode, urlsplit

from pydantic import BaseModel

from ..core.caller import Caller, require_caller
from ..core.clock import Clock, system_clock
from ..core.errors import (
    ERROR_CLASSES,
    ForbiddenRight,
    HiveliteError,
    InvalidInput,
    NotFound,
    PluginError,
    StoreBusy,
    StoreFull,
    UnexpectedError,
)
from ..core.models import (
    Awaited,
    ClaimReceipt,
    Control,
    Evidence,
    HandoffRequest,
    History,
    Identity,
    NextClaim,
    Page,
    Receipt,
    TaskView,
)
from ..core.protocol import SERVED_WAIT
from ..verbs.claims import wait_seconds
from ..verbs.retries import request_id as checked_request_id
from ..verbs.table import BY_NAME, Verb
from ..verbs.work import Body, WorkReport, work

_REF = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
"""What a task reference can look like: a number or an id (nothing that moves the path)."""
OTHER_ERRORS: dict[str, type[HiveliteError]] = {
    "store_busy": StoreBusy, "store_full": StoreFull, "internal": UnexpectedError}


def error_from(status: int, document: object) -> HiveliteError:
    """The exception an error answer stands for (the class ``Hive`` would have raised)."""
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict):
        return UnexpectedError("bad_answer", f"the server answered {status} without an error"
                               " document")
    code, reason = str(error.get("code", "")), str(error.get("reason", "unexpected"))
    message = str(error.get("message", reason))
    extra = {k: v for k, v in error.items() if k not in ("status", "code", "reason",
                                                         "message")}
    if code == "plugin_error":
        return PluginError(str(extra.get("plugin", "?")), str(extra.get("hook", "?")), message)
    kind = ERROR_CLASSES.get(code) or OTHER_ERRORS.get(code) or UnexpectedError
    return kind(reason, message, **extra)


class Client:
    """One token's view of one vault on a ``hivelite serve``."""

    def __init__(self, url: str, token: str, *, session: str | None = None,
                 timeout: float = 30.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidInput("invalid_url", f"the server's URL is http(s)://host[:port],"
                               f" not {url!r}", field="url")
        self.url = url.rstrip("/")
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        self._base = parts.path.rstrip("/")
        self._token = token
        self._session = session
        self._timeout = timeout
        self._local = threading.local()
        self.identity = Identity.model_validate(self._call("GET", "/v1/whoami"))
        """Who the token proves and in which vault."""
        found = self.identity
        self.caller = (Caller.owner(found.name) if found.kind == "owner" else
                       Caller.agent(found.name, str(found.instance), session))
        self._tasks = f"/v1/vaults/{quote(found.vault_id)}/tasks"
        self.clock: Clock = system_clock
        """This machine's clock (for showing how long ago; the server's decides)."""

    def __repr__(self) -> str:
        return f"Client({self.url!r}, as {self.caller}, vault {self.identity.vault_id})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def as_owner(self) -> Caller:
        """The owner, when the token is the owner's; else ``403 forbidden_right``."""
        if not self.caller.is_owner:
            raise ForbiddenRight("not_permitted", f"this token proves {self.caller}; the"
                                 " owner's verbs need an owner token (hivelite token add"
                                 " --owner)")
        return self.caller

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- the wire ----------------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            kind = (http.client.HTTPSConnection if self._scheme == "https"
                    else http.client.HTTPConnection)
            conn = kind(self._host, self._port, timeout=self._timeout)
            self._local.conn = conn
        return conn

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None, *,
              query: Mapping[str, Any] | None = None, request_id: str | None = None,
              session: str | None = None, waits: float = 0) -> Any:
        """One request; ``waits``: seconds the server may hold it waiting for work, given
        on top of the client's timeout."""
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        if session or self._session:
            headers["X-Hivelite-Session"] = str(session or self._session)
        if request_id is not None:
            headers["Idempotency-Key"] = request_id
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        target = self._base + path
        if query:
            target += "?" + urlencode({k: v for k, v in query.items() if v is not None},
                                      doseq=True)
        for attempt in (1, 2):  # a kept-alive connection the server closed: once more
            conn = self._connection()
            conn.timeout = self._timeout + waits  # a kept connection: its socket too
            if conn.sock is not None:
                conn.sock.settimeout(conn.timeout)
            try:
                conn.request(method, target, body=data, headers=headers)
                response = conn.getresponse()
                raw = response.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt == 2:
                    raise
            except OSError as exc:
                self.close()
                raise UnexpectedError("unreachable", f"cannot reach {self.url}: {exc}") from None
        try:
            document = json.loads(raw) if raw else None
        except ValueError:
            document = None
        if response.status >= 400:
            raise error_from(response.status, document)
        return document

    def _as(self, caller: Caller | None, verb: str, ref: str | int | None,
            request_id: str | None) -> str | None:
        """Refuse before sending what ``Hive`` would refuse of the arguments, with the same
        reasons, naming the task: a caller that is not a ``Caller`` (``caller_required``),
        another owner (``not_owner``), another agent or instance than the token's
        (``not_permitted``: a token never acts as anyone else), a bad request id. The
        session to call from: the caller's, else the client's."""
        try:
            if request_id is not None:
                checked_request_id(request_id)
            if caller is None:
                return self._session
            caller = require_caller(caller, verb)
            mine = self.caller
            if (caller.kind, caller.name, caller.instance) == (
                    mine.kind, mine.name, mine.instance):
                return caller.session or self._session
            if caller.is_owner and mine.is_owner:
                raise ForbiddenRight("not_owner", f"this store belongs to {mine.name!r};"
                                     f" {caller.name!r} is not its owner")
            raise ForbiddenRight("not_permitted", f"this client's token proves {mine};"
                                 f" it cannot {verb} as {caller}")
        except HiveliteError as error:
            raise error.about(ref) from None

    def _task(self, ref: str | int) -> str:
        """The path of one task: a number or an id is one path segment (a reference with
        ``/`` or ``?`` in it names no task, and never another route)."""
        text = str(ref)
        if not _REF.fullmatch(text):
            raise NotFound("no_such_task", f"no task {ref!r} in this vault")
        return f"{self._tasks}/{quote(text, safe='')}"

    def work(self, caller: Caller, body: Body, *, minutes: int = 10,
             project: str | None = None, label: str | None = None, limit: int | None = None,
             renew_every: float | None = None, wait: float = 0) -> WorkReport:
        """Run ``body`` on this agent's ready tasks, one at a time, keeping each lease
        alive while it runs, every call over HTTP: see :func:`hivelite.verbs.work.work`."""
        return work(self, caller, body, minutes=minutes, project=project, label=label,
                    limit=limit, renew_every=renew_every, wait=wait)

    # -- the verbs: one call path, from the verb table -------------------------------

    def call(self, verb: Verb | str, caller: Caller | None, ref: str | int | None = None,
             request_id: str | None = None, **fields: Any) -> Any:
        """Call a verb of the table (a row, or its name) as its row says HTTP serves it:
        the task in the path, a read's input in the query, a write's in the body; its
        answer as its model. The typed methods below are this, one verb each."""
        verb = BY_NAME[verb] if isinstance(verb, str) else verb
        if verb.http is None:
            raise InvalidInput("not_served", f"{verb.name} is not served over HTTP",
                               field="verb")
        session = (self._as(caller, verb.words, ref, request_id) if verb.by_caller
                   else self._session)
        path = self._tasks + verb.http.path.replace(
            "/{number}", "" if ref is None else self._task(ref)[len(self._tasks):])
        given = {k: _jsonable(v) for k, v in fields.items()}
        if verb.http.method == "GET":
            query = {k: ",".join(v) if isinstance(v, list) else _query(v)
                     for k, v in given.items() if v is not None and v is not False
                     and v != []}
            waits = given.get("wait") if verb.waits else 0
            document = self._call("GET", path, query=query or None, session=session,
                                  waits=float(waits or 0))
        else:
            waits = given.get("wait") if verb.waits else 0
            document = self._call(verb.http.method, path, given, request_id=request_id,
                                  session=session, waits=float(waits or 0))
        if verb.many:
            return [verb.answer.model_validate(item) for item in document]
        return verb.answer.model_validate(document)

    # -- reading -----------------------------------------------------------------

    def get(self, ref: str | int) -> TaskView:
        """One task by number: the full view."""
        view: TaskView = self.call("show", None, ref)
        return view

    def list(self, *, state: str | Sequence[str] | None = None, mine: bool = False,
             mine_as: str = "assignee", role: str | None = None, assignee: str | None = None,
             requester: str | None = None, project: str | None = None, ready: bool = False,
             blocked: bool = False, labels: Sequence[str] = (),
             priority: str | Sequence[str] | None = None, search: str | None = None,
             sort: str = "age", limit: int = 50, cursor: int | None = None) -> Page:
        """Tasks, filtered and sorted as :meth:`Hive.list` filters them; ``mine`` keeps the
        token's agent's own (as assignee, or with ``mine_as="requester"`` as requester);
        ``role`` those needing that role."""
        page: Page = self.call(
            "list", None, None, state=_many(state), mine=mine, mine_as=mine_as, role=role,
            assignee=assignee,
            requester=requester, project=project, ready=ready, blocked=blocked,
            labels=_many(labels), priority=_many(priority), search=search, sort=sort,
            limit=limit, cursor=cursor)
        return page

    def history(self, ref: str | int) -> History:
        return History(self.call("history", None, ref))

    def lease(self, caller: Caller | None, ref: str | int) -> ClaimReceipt:
        """The live claim again, for its holder alone: the token's agent on its instance."""
        lease: ClaimReceipt = self.call("lease", caller, ref)
        return lease

    def await_task(self, caller: Caller | None, ref: str | int, *, until: str = "outcome",
                   since: int | None = None, wait: float = 0) -> Awaited:
        """Where a task stands against what the caller waits for (its outcome, or the
        verdict on its result), waiting up to ``wait`` seconds (the server grants at most
        ``SERVED_WAIT`` a call) for it to settle."""
        awaited: Awaited = self.call("await", caller, ref, until=until, since=since,
                                     wait=wait)
        return awaited

    # -- writing -----------------------------------------------------------------

    def handoff(self, caller: Caller | None, request: HandoffRequest | None = None, *,
                depends_on: Sequence[int | str] | None = None, request_id: str | None = None,
                **fields: Any) -> Receipt:
        """As :meth:`Hive.handoff`: ``depends_on`` (task numbers or ids) beside the packet
        or in it, sent in the packet as the seed has it."""
        from ..verbs.handoff import requested, said_where

        # refused as the library refuses it: 422 invalid_handoff, naming the field
        body, where = requested(request if request is not None else fields, depends_on)
        try:
            receipt: Receipt = self.call("handoff", caller, None, request_id,
                                          **body.model_dump(mode="json", exclude_none=True))
        except HiveliteError as error:
            raise said_where(error, where) from None
        return receipt

    def claim(self, caller: Caller | None, ref: str | int, *, minutes: int = 10,
              request_id: str | None = None) -> ClaimReceipt:
        lease: ClaimReceipt = self.call("claim", caller, ref, request_id, minutes=minutes)
        return lease

    def claim_next(self, caller: Caller | None, *, minutes: int = 10,
                   project: str | None = None, label: str | None = None,
                   skip: Sequence[int] = (), wait: float = 0,
                   request_id: str | None = None) -> NextClaim:
        """The best ready task, claimed; with ``wait``, waited for up to that many seconds
        as :meth:`Hive.claim_next` waits, asking the server for at most ``SERVED_WAIT`` at a
        time (what it grants one request)."""
        deadline = time.monotonic() + wait_seconds(wait)
        while True:
            ask = min(float(SERVED_WAIT), max(0.0, deadline - time.monotonic()))
            try:
                claimed: NextClaim = self.call("next", caller, None, request_id,
                                               minutes=minutes, project=project, label=label,
                                               skip=list(skip), **({"wait": ask} if ask else {}))
                return claimed
            except NotFound as error:
                if error.reason != "queue_empty" or time.monotonic() >= deadline:
                    raise

    def resume(self, caller: Caller | None, ref: str | int, *, minutes: int = 10,
               request_id: str | None = None) -> ClaimReceipt:
        lease: ClaimReceipt = self.call("resume", caller, ref, request_id, minutes=minutes)
        return lease

    def renew(self, caller: Caller | None, ref: str | int, *, lease_id: str, token: int,
              minutes: int = 10, request_id: str | None = None) -> ClaimReceipt:
        lease: ClaimReceipt = self.call("renew", caller, ref, request_id, lease_id=lease_id,
                                         token=token, minutes=minutes)
        return lease

    def release(self, caller: Caller | None, ref: str | int, *, lease_id: str | None = None,
                token: int | None = None, reason: str | None = None,
                request_id: str | None = None) -> Receipt:
        return self._receipt("release", caller, ref, request_id, lease_id=lease_id,
                             token=token, reason=reason)

    def checkpoint(self, caller: Caller | None, ref: str | int, *, lease_id: str, token: int,
                   progress: str, decisions: builtins.list[str] | None = None,
                   files_touched: builtins.list[str] | None = None,
                   next_steps: builtins.list[str] | None = None,
                   open_questions: builtins.list[str] | None = None,
                   request_id: str | None = None) -> Receipt:
        return self._receipt("checkpoint", caller, ref, request_id, lease_id=lease_id,
                             token=token, progress=progress, decisions=decisions or [],
                             files_touched=files_touched or [], next_steps=next_steps or [],
                             open_questions=open_questions or [])

    def update(self, caller: Caller | None, ref: str | int, *, lease_id: str, token: int,
               summary: str, tokens: int | None = None, usd_micros: int | None = None,
               request_id: str | None = None) -> Receipt:
        return self._receipt("update", caller, ref, request_id, lease_id=lease_id,
                             token=token, summary=summary, tokens=tokens,
                             usd_micros=usd_micros)

    def pause(self, caller: Caller | None, ref: str | int, *, lease_id: str, token: int,
              on: str, reason: str, request_id: str | None = None) -> Receipt:
        return self._receipt("pause", caller, ref, request_id, lease_id=lease_id, token=token,
                             on=on, reason=reason)

    def submit(self, caller: Caller | None, ref: str | int, *, lease_id: str, token: int,
               summary: str, evidence: Sequence[Evidence | Mapping[str, Any]],
               provenance: str = "agent_generated",
               outcome: Literal["completed", "failed"] = "completed",
               tokens: int | None = None, usd_micros: int | None = None,
               draft: Mapping[str, Any] | None = None,
               request_id: str | None = None) -> Receipt:
        return self._receipt("submit", caller, ref, request_id, lease_id=lease_id,
                             token=token, summary=summary, evidence=evidence,
                             provenance=provenance, outcome=outcome, tokens=tokens,
                             usd_micros=usd_micros,
                             draft=draft.model_dump(exclude_none=True)
                             if isinstance(draft, BaseModel) else draft)

    def verify(self, caller: Caller | None, ref: str | int, *,
               verdict: Literal["accept", "reject"] = "accept",
               reason: str | None = None, request_id: str | None = None) -> Receipt:
        return self._receipt("verify", caller, ref, request_id, verdict=verdict,
                             reason=reason)

    def set_fields(self, caller: Caller | None, ref: str | int, *, base_version: int,
                   priority: str | None = None, labels: Sequence[str] | None = None,
                   add_labels: Sequence[str] = (), remove_labels: Sequence[str] = (),
                   max_attempts: int | None = None,
                   request_id: str | None = None) -> Receipt:
        return self._receipt("fields", caller, ref, request_id, base_version=base_version,
                             priority=priority, labels=labels, add_labels=add_labels,
                             remove_labels=remove_labels, max_attempts=max_attempts)

    def amend(self, caller: Caller | None, ref: str | int, *, summary: str | None = None,
              evidence: Sequence[Evidence | Mapping[str, Any]] | None = None,
              merge_commit: str | None = None, request_id: str | None = None) -> Receipt:
        return self._receipt("amend", caller, ref, request_id, summary=summary,
                             evidence=evidence, merge_commit=merge_commit)

    def answer(self, caller: Caller | None, ref: str | int, *, text: str,
               request_id: str | None = None) -> Receipt:
        return self._receipt("answer", caller, ref, request_id, text=text)

    def approve(self, caller: Caller | None, ref: str | int, *, reason: str | None = None,
                request_id: str | None = None) -> Receipt:
        return self._receipt("approve", caller, ref, request_id, reason=reason)

    def deny(self, caller: Caller | None, ref: str | int, *, reason: str | None = None,
             request_id: str | None = None) -> Receipt:
        return self._receipt("deny", caller, ref, request_id, reason=reason)

    def cancel(self, caller: Caller | None, ref: str | int, *, reason: str | None = None,
               request_id: str | None = None) -> Receipt:
        return self._receipt("cancel", caller, ref, request_id, reason=reason)

    def sign_off(self, caller: Caller | None, ref: str | int, *, reason: str | None = None,
                 request_id: str | None = None) -> Receipt:
        return self._receipt("sign_off", caller, ref, request_id, reason=reason)

    def decline(self, caller: Caller | None, ref: str | int, *, reason: str,
                request_id: str | None = None) -> Receipt:
        return self._receipt("decline", caller, ref, request_id, reason=reason)

    def hold(self, caller: Caller | None, *, agent: str | None = None,
             instance: str | None = None, reason: str | None = None) -> Control:
        return self._control("hold", caller, None, agent=agent, instance=instance,
                             reason=reason)

    def veto(self, caller: Caller | None, ref: str | int, *, agent: str,
             reason: str | None = None) -> Control:
        return self._control("veto", caller, ref, agent=agent, reason=reason)

    def stop(self, caller: Caller | None, *, agent: str | None = None,
             instance: str | None = None, everyone: bool = False,
             reason: str | None = None) -> Control:
        return self._control("stop", caller, None, agent=agent, instance=instance,
                             everyone=everyone, reason=reason)

    def lift(self, caller: Caller | None, control: int | None = None, *,
             kind: str | None = None, agent: str | None = None, instance: str | None = None,
             task: str | int | None = None, everyone: bool = False,
             reason: str | None = None) -> builtins.list[Control]:
        lifted: builtins.list[Control] = self.call(
            "lift", caller, None, None, control=control, kind=kind, agent=agent,
            instance=instance, task=task, everyone=everyone, reason=reason)
        return lifted

    def _control(self, name: str, caller: Caller | None, ref: str | int | None,
                 **fields: Any) -> Control:
        control: Control = self.call(name, caller, ref, None, **fields)
        return control

    def _receipt(self, name: str, caller: Caller | None, ref: str | int,
                 request_id: str | None, **fields: Any) -> Receipt:
        receipt: Receipt = self.call(name, caller, ref, request_id, **fields)
        return receipt


def _jsonable(value: Any) -> Any:
    """A method's argument as the request sends it: models as their JSON, sequences as
    lists (what is not JSON is the server's to refuse)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple | builtins.list):
        return [_jsonable(v) for v in value]
    return value


def _many(value: str | Sequence[str] | None) -> builtins.list[str] | None:
    """A filter's values as a list: ``"routed,working"`` or ``["routed"]``."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else builtins.list(value)
    return [v for v in items if v] or None


def _query(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


__all__ = ["Client", "error_from"]
