"""The HTTP service: one Starlette app, each store a vault, every route from ``routes``.

A request names its vault (the store's id, ``hivelite info``) and carries a token
(``Authorization: Bearer hl_…``); the token, looked up in that vault alone, says who
calls. The verb then runs on the vault's ``Hive`` through the one write path like any
other caller: a read in a worker thread (a ``Hive`` gives each thread its own
connection), a write on the vault's writer thread, in the order the writes came. A
``next`` that waits for work waits in a worker thread (at most ``SERVED_WAIT``), each of
its looks a write on the writer thread: no write queues behind a waiting worker.
Errors are seed 004's: the HTTP status, ``code``, ``reason`` and the task ``number``;
``429`` carries ``Retry-After``; ``401`` carries ``WWW-Authenticate``.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route as StarletteRoute

from ...core.errors import (
    ForbiddenRight,
    HiveliteError,
    InvalidInput,
    NotFound,
    NotJson,
    UnexpectedError,
)
from ...core.ids import number_of
from ...core.models import Identity, NextClaim
from ...hive import Hive
from ...verbs.base import invalid
from ...verbs.claims import served_wait, until_ready
from ...verbs.table import VERBS, Verb
from ...verbs.tokens import Authenticated
from ..terminal import printable
from .board import Board
from .bodies import read_body
from .hosts import LOOPBACK
from .mcp_calls import Acting
from .mcp_tools import build_mcp
from .openapi import openapi_document
from .routes import Route, query_input, routes_of
from .vaults import WRITERS, Vaults

log = logging.getLogger("hivelite.faces.server")
PREFIX = "/v1/vaults/{vault_id}/tasks"
SESSION_HEADER = "x-hivelite-session"
"""Which session of its instance the agent calls from (its identity is the token's)."""
REQUEST_ID_HEADER = "idempotency-key"
"""A retry with the same key gets the first answer (the write verbs' request id)."""


def plain(data: Any) -> Any:
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json")
    if isinstance(data, list | tuple):
        return [plain(d) for d in data]
    return data


def error_response(error: HiveliteError, number: object = None) -> JSONResponse:
    """Seed 004's error: status, code, reason, message, the task number when there is one
    (the verb names it; a path's own number covers an error raised before the verb ran)."""
    body = error.about(number).to_dict()
    headers = {}
    if error.status == 429 and isinstance(error.extra.get("retry_after_s"), int):
        headers["Retry-After"] = str(error.extra["retry_after_s"])
    if error.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="hivelite"'
    return JSONResponse({"error": body}, status_code=error.status, headers=headers)


def bearer(request: Request) -> str | None:
    value = request.headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _ref(request: Request) -> int | str | None:
    """The task the path names: its number, or its id (``Hive`` takes either)."""
    text = request.path_params.get("number")
    if text is None:
        return None
    number = number_of(text)
    if number is None:
        return str(text)
    if not 0 < number < 2**63:
        raise NotFound("no_such_task", f"no task {text!r} in this vault")
    return number


def is_json(content_type: str) -> bool:
    """Whether a ``Content-Type`` names JSON: ``application/json`` or a ``+json`` type,
    with any parameters (``; charset=utf-8``)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/")
                                            and media.endswith("+json"))


async def _body(request: Request) -> bytes | HiveliteError:
    """A write's body as sent (its refusal, when it is too large, is kept to be told after
    the token's: a caller learns nothing of a body before proving who it is)."""
    try:
        return await read_body(request)
    except HiveliteError as error:
        return error


def _input(request: Request, route: Route, body: bytes | HiveliteError | None) -> Any:
    """The verb's input: a read's from its query string, a write's from its JSON body,
    validated by the verb's input model."""
    model = route.verb.input
    if body is None:
        data: Any = query_input(model, request.query_params,
                                {k: request.query_params.getlist(k)
                                 for k in request.query_params})
    else:
        if isinstance(body, HiveliteError):
            raise body
        if body.strip() and not is_json(request.headers.get("content-type", "")):
            raise NotJson("not_json", "a request body is JSON, sent as Content-Type:"
                          " application/json", field="content-type")
        try:
            data = json.loads(body) if body.strip() else {}
        except (ValueError, RecursionError):  # not JSON, or nested past what Python parses
            raise InvalidInput("invalid_json", "the request body is not JSON",
                               field="body") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid(exc, route.verb.name) from None


def _may_wait(body: bytes | HiveliteError | None) -> bool:
    """Whether a body may ask to wait for work (it names ``wait``, or escapes a character
    that could spell it): only such a call takes the longer way round, through a thread
    that waits (looked at before the token, only to choose the thread; nothing is told)."""
    return isinstance(body, bytes) and (b"wait" in body or b"\\" in body)


def endpoint(route: Route, vaults: Vaults) -> Any:
    """The Starlette endpoint of one route: past its path and body, the whole request (the
    token, the right, the input, the verb) runs in one thread, a write's on the vault's
    writer thread, so a request crosses to a thread and back once; ``next``'s answer, whose
    task view is read when it is shown, crosses once more, to be shown off the loop."""
    async def serve(request: Request) -> Response:
        number: int | str | None = None
        try:
            vault_id = request.path_params["vault_id"]
            hive = vaults[vault_id]
            number = _ref(request)
            body = None if route.method == "GET" else await _body(request)

            def allowed() -> Authenticated:
                auth: Authenticated = hive.authenticate(
                    bearer(request), session=request.headers.get(SESSION_HEADER))
                request.state.who = auth.caller.name  # for the access log
                if not auth.may(route.right):
                    raise ForbiddenRight("not_permitted", f"{route.name} needs the right"
                                         f" {route.right}; this token carries"
                                         f" {', '.join(sorted(auth.rights))}",
                                         right=route.right)
                return auth

            def act(auth: Authenticated, given: Any) -> Any:
                return route.verb.call(hive, auth.caller, number, given,
                                       request.headers.get(REQUEST_ID_HEADER))

            def run() -> Any:
                auth, given = allowed(), _input(request, route, body)
                if route.verb.waits and route.verb.reads:  # waits in this worker thread,
                    # which holds no write up: at most SERVED_WAIT a request
                    given = given.model_copy(update={"wait": served_wait(given.wait)})
                return act(auth, given)

            def wait_then_run() -> Any:
                """A verb that may wait for work: each look on the writer thread, in
                turn with the other writes; the waiting here, where it holds none up."""
                auth, given = allowed(), _input(request, route, body)
                seconds = served_wait(given.wait)
                once = given.model_copy(update={"wait": 0})
                return until_ready(hive.store, seconds,
                                   lambda: vaults.write_now(vault_id, act, auth, once))

            if route.verb.waits and _may_wait(body):
                answer = await run_in_threadpool(wait_then_run)
            else:
                answer = await (run_in_threadpool(run) if route.verb.reads
                                else vaults.write(vault_id, run))
            if isinstance(answer, NextClaim):  # its task's view is read as it is shown:
                # in a worker thread, after the write, never on the event loop or the
                # vault's writer thread (which the next write waits for)
                return JSONResponse(await run_in_threadpool(plain, answer))
            return JSONResponse(plain(answer))
        except HiveliteError as error:
            return error_response(error, number)
        except Exception:  # never a traceback to the caller; the log has it
            log.exception("%s %s failed", route.method, route.name)
            return error_response(UnexpectedError("unexpected", "the server failed; its log"
                                                  " says why"), number)
    serve.__name__ = route.name
    return serve


def transport_security(allowed_hosts: Sequence[str]) -> TransportSecuritySettings:
    """What ``/mcp`` accepts as its Host and Origin (DNS-rebinding protection, which the MCP
    specification requires): loopback on any port, and each host the owner names for a
    proxy in front."""
    names = [*LOOPBACK, *allowed_hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[h for name in names for h in (name, f"{name}:*")],
        allowed_origins=[f"{scheme}://{h}" for name in names for scheme in ("http", "https")
                         for h in (name, f"{name}:*")])


def create_app(hives: Sequence[Hive], *, allowed_hosts: Sequence[str] = (),
               board_on_loopback: bool = False, verbs: Sequence[Verb] = VERBS,
               writers: int = WRITERS) -> Starlette:
    """The app serving ``hives``, each as the vault of its store id; ``/mcp`` answers only
    requests addressed to loopback or to one of ``allowed_hosts``; the board (``/``) needs
    an owner's sign-in, or with ``board_on_loopback`` only a request from this machine;
    each vault's write routes run on ``writers`` threads of its own."""
    vaults = Vaults(hives, writers=writers)
    routes = [StarletteRoute(PREFIX + route.path, endpoint(route, vaults),
                             methods=[route.method], name=route.name)
              for route in routes_of(verbs)]

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document())

    async def whoami(request: Request) -> Response:
        """Which vault a token belongs to and whom it proves (what a client asks first)."""
        try:
            vault_id, auth = await run_in_threadpool(
                vaults.authenticate, bearer(request), request.headers.get(SESSION_HEADER))
        except HiveliteError as error:
            return error_response(error)
        caller = auth.caller
        return JSONResponse(Identity(
            vault_id=vault_id, kind=caller.kind, name=caller.name, instance=caller.instance,
            session=caller.session, rights=sorted(auth.rights),
            token_id=auth.token_id).model_dump(mode="json"))

    routes.append(StarletteRoute("/openapi.json", openapi, methods=["GET"]))
    routes.append(StarletteRoute("/v1/whoami", whoami, methods=["GET"]))
    routes.extend(Board(vaults, on_loopback=board_on_loopback).routes())
    servers = {kind: build_mcp(_mcp_identity, kind, verbs=verbs)
               for kind in ("agent", "owner")}
    served: dict[str, dict[str, StarletteRoute]] = {}
    for kind, mcp_server in servers.items():  # an agent's tools, and the owner's
        mcp_app = mcp_server.streamable_http_app(
            stateless_http=True, json_response=True,
            transport_security=transport_security(allowed_hosts))
        served[kind] = {r.path: r for r in mcp_app.routes if isinstance(r, StarletteRoute)}
    for path, route in served["agent"].items():  # /mcp, behind the token gate
        routes.append(StarletteRoute(path, TokenGate(
            {kind: paths[path].app for kind, paths in served.items()}, vaults),
            methods=route.methods))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for mcp_server in servers.values():
                await stack.enter_async_context(mcp_server.session_manager.run())
            try:
                yield
            finally:
                vaults.close()

    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(AccessLog)])
    app.state.vaults = vaults
    return app


ACCESS = logging.getLogger("hivelite.access")
"""One line a request, for the owner to see who called what: hivelite serve prints it."""


class AccessLog:
    """``client "METHOD /path" status who ms``: never a header, a body or a query string,
    so never a token; ``who`` is the caller a token proved (``-`` before one did)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not ACCESS.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started, status = time.monotonic(), 0

        async def sent(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            client = scope.get("client") or ("-", 0)
            who = scope.get("state", {}).get("who") or "-"
            ACCESS.info('%s "%s %s" %s %s %.1f ms', client[0], scope["method"],
                        printable(scope["path"]), status or 500, who,
                        (time.monotonic() - started) * 1000)


_MCP_CALLER: contextvars.ContextVar[Acting] = contextvars.ContextVar("mcp_caller")
"""The store, caller and token of the MCP request being served (set by
:class:`TokenGate`)."""


def _mcp_identity() -> Acting:
    return _MCP_CALLER.get()


class TokenGate:
    """In front of ``/mcp``: the request's token decides the vault and the caller every tool
    of that request acts as (``401`` without a good one), as on every other route, and
    whose tools it sees: an agent's, or the owner's."""

    def __init__(self, apps: dict[str, Any], vaults: Vaults) -> None:
        self.apps = apps
        self.vaults = vaults

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope)
        try:
            vault_id, auth = await run_in_threadpool(
                self.vaults.authenticate, bearer(request),
                request.headers.get(SESSION_HEADER))
        except HiveliteError as error:
            await error_response(error)(scope, receive, send)
            return
        scope.setdefault("state", {})["who"] = auth.caller.name  # for the access log
        token = _MCP_CALLER.set(Acting(self.vaults[vault_id], auth.caller, auth.token_id))
        try:
            await self.apps[auth.caller.kind](scope, receive, send)
        finally:
            _MCP_CALLER.reset(token)


__all__ = ["create_app", "error_response"]
