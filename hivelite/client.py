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
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal
from urllib.parse import quote, urlencode, urlsplit

from .caller import Caller, require_caller
from .clock import Clock, system_clock
from .errors import (
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
from .models import (
    ClaimReceipt,
    Evidence,
    HandoffRequest,
    History,
    Identity,
    JournalEntry,
    NextClaim,
    Page,
    Receipt,
    TaskView,
)
from .retries import request_id as checked_request_id
from .work import WorkLoop

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


def _evidence(items: Sequence[Evidence | Mapping[str, Any]]) -> builtins.list[dict[str, Any]]:
    return [e.model_dump(exclude_none=True) if isinstance(e, Evidence) else dict(e)
            for e in items]


class Client(WorkLoop):
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
              session: str | None = None) -> Any:
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

    # -- reading -----------------------------------------------------------------

    def get(self, ref: str | int) -> TaskView:
        """One task by number: the full view."""
        return TaskView.model_validate(self._call("GET", self._task(ref)))

    def list(self, *, state: str | Sequence[str] | None = None, mine: bool = False,
             role: str = "assignee", priority: str | None = None, ready: bool = False,
             limit: int = 50, cursor: int | None = None) -> Page:
        """Tasks, filtered as the seed's list route filters them."""
        query = {"state": state if isinstance(state, str) or state is None else ",".join(state),
                 "mine": "true" if mine else None, "role": role, "priority": priority,
                 "ready": "true" if ready else None, "limit": limit, "after": cursor}
        return Page.model_validate(self._call("GET", self._tasks, query=query))

    def history(self, ref: str | int) -> History:
        return History(JournalEntry.model_validate(e)
                       for e in self._call("GET", self._task(ref) + "/history"))

    def lease(self, caller: Caller | None, ref: str | int) -> ClaimReceipt:
        """The live claim again, for its holder alone: the token's agent on its instance."""
        session = self._as(caller, "see the lease of", ref, None)
        return ClaimReceipt.model_validate(self._call("GET", self._task(ref) + "/claim",
                                                      session=session))

    # -- writing -----------------------------------------------------------------

    def handoff(self, caller: Caller | None, request: HandoffRequest | None = None, *,
                request_id: str | None = None, **fields: Any) -> Receipt:
        session = self._as(caller, "hand off", None, request_id)
        body = (request.model_dump(mode="json", exclude_none=True) if request is not None
                else HandoffRequest.model_validate(fields).model_dump(mode="json",
                                                                      exclude_none=True))
        return Receipt.model_validate(self._call("POST", self._tasks, body,
                                                 request_id=request_id, session=session))

    def claim(self, caller: Caller | None, ref: str | int, *, minutes: int = 10,
              request_id: str | None = None) -> ClaimReceipt:
        session = self._as(caller, "claim", ref, request_id)
        return ClaimReceipt.model_validate(self._call(
            "POST", self._task(ref) + "/claim", {"minutes": minutes},
            request_id=request_id, session=session))

    def claim_next(self, caller: Caller | None, *, minutes: int = 10,
                   project: str | None = None, label: str | None = None,
                   request_id: str | None = None) -> NextClaim:
        session = self._as(caller, "claim next", None, request_id)
        return NextClaim.model_validate(self._call(
            "POST", self._tasks + "/next", {"minutes": minutes, "project": project,
                                            "label": label},
            request_id=request_id, session=session))

    def resume(self, caller: Caller | None, ref: str | int, *, minutes: int = 10,
               request_id: str | None = None) -> ClaimReceipt:
        session = self._as(caller, "resume", ref, request_id)
        return ClaimReceipt.model_validate(self._call(
            "POST", self._task(ref) + "/resume", {"minutes": minutes},
            request_id=request_id, session=session))

    def renew(self, caller: Caller | None, ref: str | int, *, lease_id: str, token: int,
              minutes: int = 10, request_id: str | None = None) -> ClaimReceipt:
        session = self._as(caller, "renew", ref, request_id)
        return ClaimReceipt.model_validate(self._call(
            "POST", self._task(ref) + "/claim/renew",
            {"lease_id": lease_id, "token": token, "minutes": minutes},
            request_id=request_id, session=session))

    def release(self, caller: Caller | None, ref: str | int, *, lease_id: str | None = None,
                token: int | None = None, reason: str | None = None,
                request_id: str | None = None) -> Receipt:
        session = self._as(caller, "release", ref, request_id)
        return Receipt.model_validate(self._call(
            "POST", self._task(ref) + "/release",
            {"lease_id": lease_id, "token": token, "reason": reason},
            request_id=request_id, session=session))

    def checkpoint(self, caller: Caller | None, ref: str | int, *, lease_id: str, token: int,
                   progress: str, decisions: builtins.list[str] | None = None,
                   files_touched: builtins.list[str] | None = None,
                   next_steps: builtins.list[str] | None = None,
                   open_questions: builtins.list[str] | None = None,
                   request_id: str | None = None) -> Receipt:
        session = self._as(caller, "checkpoint", ref, request_id)
        return Receipt.model_validate(self._call(
            "POST", self._task(ref) + "/checkpoint",
            {"lease_id": lease_id, "token": token, "progress": progress,
             "decisions": decisions or [], "files_touched": files_touched or [],
             "next_steps": next_steps or [], "open_questions": open_questions or []},
            request_id=request_id, session=session))

    def update(self, caller: Caller | None, ref: str | int, *, lease_id: str, token: int,
               summary: str, tokens: int | None = None, usd_micros: int | None = None,
               request_id: str | None = None) -> Receipt:
        session = self._as(caller, "update", ref, request_id)
        return Receipt.model_validate(self._call(
            "POST", self._task(ref) + "/updates",
            {"lease_id": lease_id, "token": token, "summary": summary, "tokens": tokens,
             "usd_micros": usd_micros}, request_id=request_id, session=session))

    def pause(self, caller: Caller | None, ref: str | int, *, lease_id: str, token: int,
              on: str, reason: str, request_id: str | None = None) -> Receipt:
        session = self._as(caller, "pause", ref, request_id)
        return Receipt.model_validate(self._call(
            "POST", self._task(ref) + "/pause",
            {"lease_id": lease_id, "token": token, "on": on, "reason": reason},
            request_id=request_id, session=session))

    def submit(self, caller: Caller | None, ref: str | int, *, lease_id: str, token: int,
               summary: str, evidence: Sequence[Evidence | Mapping[str, Any]],
               provenance: str = "agent_generated",
               outcome: Literal["completed", "failed"] = "completed",
               tokens: int | None = None, usd_micros: int | None = None,
               request_id: str | None = None) -> Receipt:
        session = self._as(caller, "submit", ref, request_id)
        return Receipt.model_validate(self._call(
            "POST", self._task(ref) + "/result",
            {"lease_id": lease_id, "token": token, "summary": summary,
             "evidence": _evidence(evidence), "provenance": provenance, "outcome": outcome,
             "tokens": tokens, "usd_micros": usd_micros}, request_id=request_id, session=session))

    def verify(self, caller: Caller | None, ref: str | int, *,
               verdict: Literal["accept", "reject"] = "accept",
               reason: str | None = None, request_id: str | None = None) -> Receipt:
        session = self._as(caller, "verify", ref, request_id)
        return Receipt.model_validate(self._call(
            "POST", self._task(ref) + "/verify", {"verdict": verdict, "reason": reason},
            request_id=request_id, session=session))

    def set_fields(self, caller: Caller | None, ref: str | int, *, base_version: int,
                   priority: str | None = None, labels: Sequence[str] | None = None,
                   add_labels: Sequence[str] = (), remove_labels: Sequence[str] = (),
                   max_attempts: int | None = None,
                   request_id: str | None = None) -> Receipt:
        session = self._as(caller, "set fields", ref, request_id)
        return Receipt.model_validate(self._call(
            "PATCH", self._task(ref),
            {"base_version": base_version, "priority": priority,
             "labels": builtins.list(labels) if labels is not None else None,
             "add_labels": builtins.list(add_labels),
             "remove_labels": builtins.list(remove_labels), "max_attempts": max_attempts},
            request_id=request_id, session=session))

    def amend(self, caller: Caller | None, ref: str | int, *, summary: str | None = None,
              evidence: Sequence[Evidence | Mapping[str, Any]] | None = None,
              merge_commit: str | None = None, request_id: str | None = None) -> Receipt:
        session = self._as(caller, "amend", ref, request_id)
        return Receipt.model_validate(self._call(
            "POST", self._task(ref) + "/amend",
            {"summary": summary, "evidence": _evidence(evidence) if evidence is not None
             else None, "merge_commit": merge_commit}, request_id=request_id, session=session))

    def _decide(self, verb: str, caller: Caller | None, ref: str | int, reason: str | None,
                request_id: str | None) -> Receipt:
        session = self._as(caller, verb, ref, request_id)
        return Receipt.model_validate(self._call(
            "POST", self._task(ref) + "/" + verb.replace("_", "-"), {"reason": reason},
            request_id=request_id, session=session))

    def approve(self, caller: Caller | None, ref: str | int, *, reason: str | None = None,
                request_id: str | None = None) -> Receipt:
        return self._decide("approve", caller, ref, reason, request_id)

    def deny(self, caller: Caller | None, ref: str | int, *, reason: str | None = None,
             request_id: str | None = None) -> Receipt:
        return self._decide("deny", caller, ref, reason, request_id)

    def cancel(self, caller: Caller | None, ref: str | int, *, reason: str | None = None,
               request_id: str | None = None) -> Receipt:
        return self._decide("cancel", caller, ref, reason, request_id)

    def sign_off(self, caller: Caller | None, ref: str | int, *, reason: str | None = None,
                 request_id: str | None = None) -> Receipt:
        return self._decide("sign_off", caller, ref, reason, request_id)

    def decline(self, caller: Caller | None, ref: str | int, *, reason: str,
                request_id: str | None = None) -> Receipt:
        return self._decide("decline", caller, ref, reason, request_id)


__all__ = ["Client", "error_from"]
