"""The board's routes: the owner's view of each vault, in a browser.

A browser cannot send a bearer header, so the owner signs in once with an owner token
(``POST /login``, a form) and the board keeps it in an ``HttpOnly``, ``SameSite=Strict``
cookie; tokens never travel in a URL (where logs and history would keep them). When the
owner chooses (``hivelite serve --board-on-loopback``), requests from this machine,
addressed to a loopback name, see the board without signing in. Every page is read-only.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from urllib.parse import parse_qs, quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import ForbiddenRight, HiveliteError, NotFound, Unauthenticated
from ..hive import Hive
from ..protocol import TERMINAL
from . import pages
from .vaults import Vaults

COOKIE = "hivelite_board"
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
FORWARDED = ("forwarded", "x-forwarded-for", "x-real-ip")


def _loopback_name(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
    name = name.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def from_this_machine(request: Request) -> bool:
    """Sent from loopback, to a loopback name (a page on a rebound DNS name is not), and not
    relayed by a proxy (whose visitors would all look local)."""
    client = request.client
    return (client is not None and _loopback_name(client.host)
            and _loopback_name(request.headers.get("host", ""))
            and not any(h in request.headers for h in FORWARDED))


def html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=HEADERS)


@dataclass
class Board:
    """The board over the served vaults (``vaults`` maps vault id to its ``Hive``)."""

    vaults: Vaults
    on_loopback: bool = False

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

    async def _admit(self, request: Request, vault_id: str) -> Hive:
        hive: Hive = self.vaults[vault_id]
        if self.on_loopback and from_this_machine(request):
            return hive
        signed_in = await run_in_threadpool(self._owner_vault, request.cookies.get(COOKIE))
        if signed_in != vault_id:
            raise ForbiddenRight("not_permitted", "this board belongs to another vault's"
                                 " owner")
        return hive

    async def _guarded(self, request: Request,
                       make: Callable[[], Awaitable[Response]]) -> Response:
        try:
            return await make()
        except Unauthenticated as error:
            return html(pages.login(error.message if error.reason != "no_token" else ""), 401)
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

    def _task(self, hive: Hive, number: str) -> str:
        if not (number.isascii() and number.isdigit()) or not 0 < int(number) < 2**63:
            raise NotFound("no_such_task", f"no task {number!r} in this vault")
        view = hive.get(int(number))
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
            vault_id = await run_in_threadpool(self._owner_vault, request.cookies.get(COOKIE))
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

    async def login_form(self, request: Request) -> Response:
        return html(pages.login())

    async def login(self, request: Request) -> Response:
        """Trade an owner token (a form field) for the board's cookie."""
        raw = await request.body()
        if len(raw) > MAX_FORM:
            return html(pages.login("that is not a token"), 400)
        form = parse_qs(raw.decode("utf-8", "replace"))
        token = (form.get("token") or [""])[0].strip() or None

        async def make() -> Response:
            vault_id = await run_in_threadpool(self._owner_vault, token)
            answer = _to(f"/board/{quote(vault_id)}")
            answer.set_cookie(COOKIE, token or "", httponly=True, samesite="strict",
                              secure=request.url.scheme == "https", path="/")
            return answer
        return await self._guarded(request, make)

    async def logout(self, request: Request) -> Response:
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
