"""The board's routes: the owner's view of each vault, in a browser.

A browser cannot send a bearer header, so the owner signs in once with an owner token
(``POST /login``, a form, from this origin only). The server keeps the token and gives
the browser a random session id in an ``HttpOnly``, ``SameSite=Strict`` cookie: the
cookie is worth nothing elsewhere (cookies are shared across a host's ports), and every
request checks the token again, so revoking it ends the session. Tokens never travel in
a URL (where logs and history would keep them). When the owner chooses (``hivelite
serve --board-on-loopback``), requests from this machine, addressed to a loopback name
and not relayed by a proxy, see the board without signing in. Every page is read-only.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from urllib.parse import parse_qs, quote, urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ...core.errors import ForbiddenRight, HiveliteError, InvalidInput, NotFound, Unauthenticated
from ...core.protocol import TERMINAL
from ...hive import Hive
from . import pages
from .bodies import read_body
from .hosts import is_loopback, names_loopback
from .vaults import Vaults

COOKIE = "hivelite_board"
SESSION_SECONDS = 12 * 3600
"""How long a sign-in lasts (the token is checked again on every request regardless)."""
MAX_SESSIONS = 1000
FORM_COOKIE = "hivelite_form"
"""The cookie that a sign-in form's token must match."""
FORM_SECONDS = 3600
"""How long a sign-in page's form stays good."""
MAX_FORM = 4096
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self';"
        " img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
STATIC = {"board.css": "text/css; charset=utf-8",
          "board.js": "text/javascript; charset=utf-8"}
FORWARDED = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip", "via",
             "cf-connecting-ip", "true-client-ip")
"""Headers a proxy adds: a request carrying one came through a proxy, not from a browser
on this machine (a proxy that adds none cannot be told apart: docs/serve.md)."""


def from_this_machine(request: Request) -> bool:
    """Sent from loopback, to a loopback name (a page on a rebound DNS name is not), and not
    relayed by a proxy (whose visitors would all look local)."""
    client = request.client
    return (client is not None and is_loopback(client.host)
            and names_loopback(request.headers.get("host", ""))
            and not any(h in request.headers for h in FORWARDED))


def from_this_origin(request: Request) -> bool:
    """A form posted by a page of this server, not by another site (no login CSRF).

    ``Sec-Fetch-Site`` decides when the browser sends it (every current one does): this
    server's own page is ``same-origin``. Without it, an ``Origin`` must name this host.
    ``Origin: null`` names nothing: a browser sends it for a form posted from a page
    whose referrer policy is ``no-referrer``, as this server's pages are, so it is no
    refusal by itself. The form's own token (:func:`form_token_fits`) is checked besides."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    return origin in (None, "null") or urlsplit(origin).netloc == request.headers.get("host")


def new_form_token() -> str:
    """The token a sign-in form carries, and the cookie beside it (a double submit): a
    page of another site can post the form, but it can neither read this token nor send
    the cookie (``SameSite=Strict``)."""
    return secrets.token_urlsafe(24)


def form_token_fits(request: Request, given: str | None) -> bool:
    kept = request.cookies.get(FORM_COOKIE)
    return bool(kept and given and secrets.compare_digest(kept, given))


def with_form_token(response: Response, token: str, request: Request) -> Response:
    response.set_cookie(FORM_COOKIE, token, max_age=FORM_SECONDS, httponly=True,
                        samesite="strict", secure=request.url.scheme == "https", path="/")
    return response


def html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=HEADERS)


@dataclass
class Sessions:
    """Signed-in browsers: a random id each, mapped to the vault and the owner token."""

    by_id: dict[str, tuple[str, str, float]] = field(default_factory=dict)

    def start(self, vault_id: str, token: str) -> str:
        now = time.monotonic()
        for key in [k for k, (_, _, ends) in self.by_id.items() if ends <= now]:
            del self.by_id[key]
        while len(self.by_id) >= MAX_SESSIONS:  # the oldest sign-in goes first
            del self.by_id[next(iter(self.by_id))]
        session = secrets.token_urlsafe(32)
        self.by_id[session] = (vault_id, token, now + SESSION_SECONDS)
        return session

    def token(self, session: str | None) -> str | None:
        found = self.by_id.get(session or "")
        if found is None or found[2] <= time.monotonic():
            return None
        return found[1]

    def end(self, session: str | None) -> None:
        self.by_id.pop(session or "", None)


@dataclass
class Board:
    """The board over the served vaults (``vaults`` maps vault id to its ``Hive``)."""

    vaults: Vaults
    on_loopback: bool = False
    sessions: Sessions = field(default_factory=Sessions)

    # -- who may look ---------------------------------------------------------

    def _owner_vault(self, token: str | None) -> str:
        """The vault whose owner ``token`` proves (``401``/``403`` otherwise)."""
        if token is None:
            raise Unauthenticated("no_token", "sign in with an owner token")
        vault_id, auth = self.vaults.authenticate(token, None)
        if not auth.caller.is_owner:
            raise ForbiddenRight("not_permitted", "the board is the owner's: this token is"
                                 f" {auth.caller}'s")
        return str(vault_id)

    def _signed_in(self, request: Request) -> str | None:
        return self.sessions.token(request.cookies.get(COOKIE))

    async def _admit(self, request: Request, vault_id: str) -> Hive:
        hive: Hive = self.vaults[vault_id]
        if self.on_loopback and from_this_machine(request):
            return hive
        signed_in = await run_in_threadpool(self._owner_vault, self._signed_in(request))
        request.state.who = hive.owner  # for the access log
        if signed_in != vault_id:
            raise ForbiddenRight("not_permitted", "this board belongs to another vault's"
                                 " owner")
        return hive

    async def _guarded(self, request: Request,
                       make: Callable[[], Awaitable[Response]]) -> Response:
        try:
            return await make()
        except Unauthenticated as error:
            return self._login_page(request, error.message if error.reason != "no_token"
                                    else "", 401)
        except ForbiddenRight as error:
            return html(pages.refusal(error.message), 403)
        except NotFound as error:
            return html(pages.refusal(error.message), 404)
        except HiveliteError as error:
            return html(pages.refusal(error.message), error.status)

    # -- the pages ------------------------------------------------------------

    @staticmethod
    def _vault(hive: Hive) -> pages.Vault:
        info = hive.info()
        return pages.Vault(info.vault_id, info.owner, info.tasks, hive.last_seq())

    def _board(self, hive: Hive) -> str:
        vault, now = self._vault(hive), hive.clock()
        columns = {}
        for state in pages.COLUMNS:
            done = state in TERMINAL
            columns[state] = hive.list(
                state=state, sort="updated" if done else "priority",
                limit=pages.DONE_CARDS if done else pages.OPEN_CARDS).items
        return pages.board(vault, columns, now)

    def _task(self, hive: Hive, ref: str) -> str:
        view = hive.get(int(ref) if ref.isascii() and ref.isdigit() else ref)
        return pages.task_page(view, hive.history(view.number), self._vault(hive),
                               hive.clock())

    async def home(self, request: Request) -> Response:
        """``/``: the signed-in owner's board; on loopback (when open) the only vault's
        board, or the list of vaults; else the sign-in form."""
        async def make() -> Response:
            if self.on_loopback and from_this_machine(request):
                hives = list(self.vaults.by_id.values())
                if len(hives) == 1:
                    return _to(f"/board/{quote(next(iter(self.vaults.by_id)))}")
                listed = await run_in_threadpool(lambda: [self._vault(h) for h in hives])
                return html(pages.vault_index(listed))
            vault_id = await run_in_threadpool(self._owner_vault, self._signed_in(request))
            return _to(f"/board/{quote(vault_id)}")
        return await self._guarded(request, make)

    async def board(self, request: Request) -> Response:
        async def make() -> Response:
            hive = await self._admit(request, request.path_params["vault_id"])
            return html(await run_in_threadpool(self._board, hive))
        return await self._guarded(request, make)

    async def task(self, request: Request) -> Response:
        async def make() -> Response:
            hive = await self._admit(request, request.path_params["vault_id"])
            return html(await run_in_threadpool(self._task, hive,
                                                request.path_params["number"]))
        return await self._guarded(request, make)

    async def changes(self, request: Request) -> Response:
        """The journal's newest row, which the page polls to know when to reload."""
        try:
            hive = await self._admit(request, request.path_params["vault_id"])
        except HiveliteError as error:
            return JSONResponse({"error": error.to_dict()}, status_code=error.status)
        seq = await run_in_threadpool(hive.last_seq)
        return JSONResponse({"seq": seq}, headers={"Cache-Control": "no-store"})

    # -- signing in -----------------------------------------------------------

    @staticmethod
    def _login_page(request: Request, message: str = "", status: int = 200) -> Response:
        """The sign-in form, with a fresh form token and its cookie."""
        token = new_form_token()
        return with_form_token(html(pages.login(message, token), status), token, request)

    async def login_form(self, request: Request) -> Response:
        return self._login_page(request)

    async def login(self, request: Request) -> Response:
        """Trade an owner token (a form field) for a session of the board."""
        if not from_this_origin(request):
            return html(pages.refusal("sign in from this server's own page"), 403)
        try:
            raw = await read_body(request, MAX_FORM)
        except InvalidInput:
            return self._login_page(request, "that is not a token", 413)
        form = parse_qs(raw.decode("utf-8", "replace"))
        token = (form.get("token") or [""])[0].strip() or None
        if not form_token_fits(request, (form.get("form") or [""])[0]):
            return self._login_page(request, "this sign-in page was out of date or not"
                                    " this server's: sign in again here", 403)

        async def make() -> Response:
            vault_id = await run_in_threadpool(self._owner_vault, token)
            session = self.sessions.start(vault_id, token or "")
            answer = _to(f"/board/{quote(vault_id)}")
            answer.set_cookie(COOKIE, session, max_age=SESSION_SECONDS, httponly=True,
                              samesite="strict", secure=request.url.scheme == "https",
                              path="/")
            return answer
        return await self._guarded(request, make)

    async def logout(self, request: Request) -> Response:
        if not from_this_origin(request):
            return html(pages.refusal("sign out from this server's own page"), 403)
        self.sessions.end(request.cookies.get(COOKIE))
        answer = _to("/login")
        answer.delete_cookie(COOKIE, path="/")
        return answer

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return Response("not found", status_code=404, media_type="text/plain")
        text = resources.files(__package__).joinpath("static", name).read_text("utf-8")
        return Response(text, media_type=STATIC[name],
                        headers={"Cache-Control": "max-age=300",
                                 "X-Content-Type-Options": "nosniff"})

    def routes(self) -> list[Route]:
        return [
            Route("/", self.home, methods=["GET"]),
            Route("/login", self.login_form, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/static/{name}", self.static, methods=["GET"]),
            Route("/board/{vault_id}", self.board, methods=["GET"]),
            Route("/board/{vault_id}/changes", self.changes, methods=["GET"]),
            Route("/board/{vault_id}/tasks/{number}", self.task, methods=["GET"]),
        ]


def _to(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303, headers={"Cache-Control": "no-store"})


__all__ = ["COOKIE", "Board", "from_this_machine"]
