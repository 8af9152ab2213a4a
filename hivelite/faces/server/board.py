"""The board's routes: the owner's view of each vault, in a browser.

A browser cannot send a bearer header, so the owner signs in once with an owner token
(``POST /login``, a form, from this origin only). The server keeps the token and gives
the browser a random session id in an ``HttpOnly``, ``SameSite=Strict`` cookie: the
cookie is worth nothing elsewhere (cookies are shared across a host's ports), and every
request checks the token again, so revoking it ends the session. Tokens never travel in
a URL (where logs and history would keep them). When the owner chooses (``hivelite
serve --board-on-loopback``), requests from this machine, addressed to a loopback name
and not relayed by a proxy, see the board without signing in.

The owner decides on the board too (``decisions.py``): each decision is a form posted
back to ``/board/{vault}/tasks/{n}/{verb}`` or ``/board/{vault}/agents/{verb}``, refused
unless it comes from this server's own page (``Sec-Fetch-Site``, and a form token tied
to the sign-in), then run through its verb of the verb table as the signed-in owner,
exactly as HTTP runs it. A refusal shows the page again with the refusal's words.
"""

from __future__ import annotations

import hashlib
import hmac
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

from ...core.caller import Caller
from ...core.errors import (
    ForbiddenRight,
    HiveliteError,
    InvalidInput,
    InvalidState,
    NotFound,
    Unauthenticated,
)
from ...core.ids import number_of
from ...core.models import Budget
from ...core.protocol import TERMINAL, WaitingOn
from ...hive import Hive
from ...verbs.table import BY_NAME, Verb
from . import decisions, pages
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
MAX_DECISION = 64 * 1024
"""A decision's form at most (an answer of 4000 characters, each sent as up to 9 bytes)."""
NEARLY_SPENT = 0.8
"""The share of a daily budget past which "needs you" names it."""
NEEDS_PAGE = 500
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
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    """Keys the forms' tokens: one per sign-in, unknown outside this server."""

    # -- who may look ---------------------------------------------------------

    def _owner_of(self, token: str | None) -> tuple[str, Caller]:
        """The vault whose owner ``token`` proves, and that owner as a caller with the
        token's rights (``401``/``403`` otherwise)."""
        if token is None:
            raise Unauthenticated("no_token", "sign in with an owner token")
        vault_id, auth = self.vaults.authenticate(token, None)
        if not auth.caller.is_owner:
            raise ForbiddenRight("not_permitted", "the board is the owner's: this token is"
                                 f" {auth.caller}'s")
        return str(vault_id), auth.caller

    def _owner_vault(self, token: str | None) -> str:
        return self._owner_of(token)[0]

    def _signed_in(self, request: Request) -> str | None:
        return self.sessions.token(request.cookies.get(COOKIE))

    async def _admit(self, request: Request, vault_id: str) -> tuple[Hive, Caller]:
        """The vault's ``Hive`` and the owner acting on it: signed in, or on loopback
        when the owner opened it so."""
        hive: Hive = self.vaults[vault_id]
        if self.on_loopback and from_this_machine(request):
            return hive, hive.as_owner()
        signed_in, caller = await run_in_threadpool(self._owner_of, self._signed_in(request))
        request.state.who = hive.owner  # for the access log
        if signed_in != vault_id:
            raise ForbiddenRight("not_permitted", "this board belongs to another vault's"
                                 " owner")
        return hive, caller

    def form_token(self, request: Request, vault_id: str) -> str:
        """The token this page's forms carry: tied to the sign-in (or, open on loopback,
        to the vault), so a form from another session or another site is refused."""
        session = request.cookies.get(COOKIE) or ""
        if self.on_loopback and from_this_machine(request):
            session = "loopback"
        return hmac.new(self.secret, f"{vault_id}\0{session}".encode(),
                        hashlib.sha256).hexdigest()

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
        head = info.head
        return pages.Vault(info.vault_id, info.owner, info.tasks,
                           int(head.partition(":")[0]) if head else 0, head,
                           tuple(sorted({*info.enabled_plugins, *info.required_plugins})),
                           tuple(info.installed_not_enabled))

    @staticmethod
    def _needs(hive: Hive) -> pages.NeedsYou:
        waiting = hive.list(state="waiting", sort="priority", limit=NEEDS_PAGE).items
        return pages.NeedsYou(
            held=[v for v in waiting if v.task.waiting_on is WaitingOn.owner_approval],
            sign_off=hive.list(state="approval", sort="priority", limit=NEEDS_PAGE).items,
            questions=[v for v in waiting if v.task.waiting_on is WaitingOn.human
                       and v.question is not None and not v.question.answered],
            controls=[c for c in hive.controls() if c.kind in ("hold", "stop")],
            budgets=[(b, share) for b in hive.budgets() if (share := spent(b))])

    def _board(self, hive: Hive, filters: pages.Filters, forms: decisions.Forms,
               notice: pages.Notice | None = None) -> str:
        vault, now = self._vault(hive), hive.clock()
        columns = {}
        for state in pages.COLUMNS:
            done = state in TERMINAL
            if done and not filters.closed:
                continue
            columns[state] = hive.list(
                state=state, search=filters.search or None,
                sort="updated" if done else "priority",
                limit=pages.DONE_CARDS if done else pages.OPEN_CARDS).items
        return pages.board(vault, columns, now, needs=self._needs(hive), filters=filters,
                           forms=forms, notice=notice)

    def _task(self, hive: Hive, ref: int | str, forms: decisions.Forms,
              notice: pages.Notice | None = None) -> str:
        view = hive.get(ref)
        controls = [c for c in hive.controls()
                    if c.agent in (None, view.task.assignee) and c.task is None]
        return pages.task_page(view, hive.history(view.number), self._vault(hive),
                               hive.clock(), forms=forms, controls=controls, notice=notice)

    def _forms(self, request: Request, vault_id: str) -> decisions.Forms:
        return decisions.Forms(f"/board/{quote(vault_id)}",
                               self.form_token(request, vault_id))

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
            vault_id = request.path_params["vault_id"]
            hive, _ = await self._admit(request, vault_id)
            query = request.query_params
            filters = pages.Filters(search=query.get("q", "").strip()[:200],
                                    closed=query.get("closed") == "1")
            return html(await run_in_threadpool(self._board, hive, filters,
                                                self._forms(request, vault_id),
                                                _done(query.get("done"))))
        return await self._guarded(request, make)

    async def task(self, request: Request) -> Response:
        async def make() -> Response:
            vault_id = request.path_params["vault_id"]
            hive, _ = await self._admit(request, vault_id)
            return html(await run_in_threadpool(
                self._task, hive, task_ref(request.path_params["number"]),
                self._forms(request, vault_id), _done(request.query_params.get("done"))))
        return await self._guarded(request, make)

    async def changes(self, request: Request) -> Response:
        """The journal's newest row, which the page polls to know when to reload."""
        try:
            hive, _ = await self._admit(request, request.path_params["vault_id"])
        except HiveliteError as error:
            return JSONResponse({"error": error.to_dict()}, status_code=error.status)
        seq = await run_in_threadpool(hive.last_seq)
        return JSONResponse({"seq": seq}, headers={"Cache-Control": "no-store"})

    # -- the owner's decisions ------------------------------------------------

    async def decide(self, request: Request) -> Response:
        """A decision posted from a page of the board: on a task
        (``/tasks/{number}/{verb}``) or on an agent (``/agents/{verb}``)."""
        vault_id = request.path_params["vault_id"]
        number = request.path_params.get("number")
        verb = decisions.verb_of(request.path_params["verb"], on_task=number is not None)
        if verb is None:
            return html(pages.refusal("the board makes no such decision"), 404)
        if not from_this_origin(request):
            return html(pages.refusal("decide from this server's own page"), 403)

        async def make() -> Response:
            hive, caller = await self._admit(request, vault_id)
            try:
                raw = await read_body(request, MAX_DECISION)
            except InvalidInput as error:
                return html(pages.refusal(error.message), 413)
            form = parse_qs(raw.decode("utf-8", "replace"))
            given = (form.get("form") or [""])[0]
            forms = self._forms(request, vault_id)
            if not secrets.compare_digest(forms.token, given):
                return html(pages.refusal("this page was out of date or not this server's:"
                                          " open the board again and decide there"), 403)
            ref = task_ref(number) if number is not None else None
            back = (f"{forms.base}/tasks/{ref}" if ref is not None
                    else decisions.back_to(forms.base, (form.get("back") or [""])[0]))
            try:
                await run_in_threadpool(self._decide, hive, caller, verb, ref, form)
            except HiveliteError as error:
                if isinstance(error, NotFound) and ref is not None:
                    raise
                notice = pages.Notice(error.message, refused=True)
                again = (await run_in_threadpool(self._task, hive, ref, forms, notice)
                         if ref is not None else
                         await run_in_threadpool(self._board, hive, pages.Filters(), forms,
                                                 notice))
                return html(again, error.status)
            return _to(back + f"?done={quote(verb.name)}")
        return await self._guarded(request, make)

    @staticmethod
    def _decide(hive: Hive, caller: Caller, verb: Verb, ref: int | str | None,
                form: dict[str, list[str]]) -> None:
        """Run the decision: its verb, as the owner, with the form's fields, once."""
        seen = (form.get("seen") or [""])[0]
        if ref is not None and seen and str(hive.history(ref)[-1].seq) != seen:
            state = hive.get(ref).task.state.value
            raise InvalidState("stale_view", f"task {ref} changed since this page was drawn"
                               f" (it is {state} now): look at it again before you decide",
                               number=ref)
        request_id = (form.get("request") or [""])[0] or None
        hive.call(verb, caller, ref, request_id, **decisions.fields_of(verb, form))

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
            Route("/board/{vault_id}/tasks/{number}/{verb}", self.decide, methods=["POST"]),
            Route("/board/{vault_id}/agents/{verb}", self.decide, methods=["POST"]),
        ]


def task_ref(text: str) -> int | str:
    """The task a board path names: its number (``404`` past any number), or its id."""
    number = number_of(text)
    if number is None:
        return text
    if not 0 < number < 2**63:
        raise NotFound("no_such_task", f"no task {text!r} in this vault")
    return number


def spent(budget: Budget) -> str | None:
    """What of ``budget`` is nearly spent today ("92% of its tokens"), or None."""
    shares = [(used / limit, what) for used, limit, what in (
        (budget.used_tasks, budget.tasks, "tasks"),
        (budget.used_tokens, budget.tokens, "tokens"),
        (budget.used_usd_micros, budget.usd_micros, "money")) if limit]
    share, what = max(shares, default=(0.0, ""))
    return f"{min(round(share * 100), 100)}% of its {what}" if share >= NEARLY_SPENT else None


def _done(name: str | None) -> pages.Notice | None:
    """The line a page shows after a decision went through (only a verb's own words,
    never text from the address)."""
    verb = BY_NAME.get(name or "")
    if verb is None or verb.name not in decisions.DONE:
        return None
    return pages.Notice(f"Done: {decisions.DONE[verb.name]}.")


def _to(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303, headers={"Cache-Control": "no-store"})


__all__ = ["COOKIE", "Board", "from_this_machine"]
