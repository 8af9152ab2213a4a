"""The board (issue 17): a real ``hivelite serve`` process, read by headless Chromium.

Chromium's ``--dump-dom`` shows each seeded task in its state's column and a task's
journal as a timeline; ``--screenshot`` keeps PNGs in ``.artifacts/`` (no golden images:
the browser moves with security updates). Over httpx: the board is the owner's (sign-in
with an owner token, kept in an HttpOnly cookie), opens without one only to this machine
when the owner asked, and never to a rebound host name or a proxied request.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import apsw
import pytest

from hivelite import Hive, ManualClock
from hivelite.core.receipts import digest_of

from .conftest import CODER, GUEST, HANG_S, OWNER, REVIEWER, START, at, packet
from .test_cli_e2e import hivelite_command
from .test_serve import ROOT, hivelite, serving

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

ARTIFACTS = ROOT / ".artifacts"
WINDOW = (1600, 900)
NOW = at(5)  # the server's clock: five minutes after the seeding
SCRIPT_TITLE = '<script>alert("board")</script> & <b>bold</b>'
EVIDENCE = [{"kind": "test_output", "summary": "12 passed"}]
RECEIPTED = [{"kind": "test_output", "summary": "12 passed", "content": "12 passed",
              "receipt": {"digest": digest_of(b"12 passed")}}]
"""Evidence hivelite verifies: its receipt is the digest of its content."""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("HIVELITE_NEED_BROWSER"):
            pytest.fail("chromium is not installed (.ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def browse(profile: Path, url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on ``url`` with a fresh profile and no network of its own."""
    args = [chromium(), "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}", *flags, url]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.insert(1, "--no-sandbox")  # Chromium's sandbox refuses to run as root
    return subprocess.run(args, capture_output=True, text=True, timeout=HANG_S, check=True)


class Board(HTMLParser):
    """Which column (``data-state``) each card (``data-number``) sits in; the timeline's
    rows (``data-seq``) in page order; every ``<script>`` element's source."""

    def __init__(self) -> None:
        super().__init__()
        self.column: str | None = None
        self.cards: dict[int, str] = {}
        self.columns: list[str] = []
        self.timeline: list[int] = []
        self.scripts: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "section" and found.get("data-state"):
            self.column = found["data-state"]
            self.columns.append(str(self.column))
        elif tag == "li" and found.get("data-number") and self.column:
            self.cards[int(str(found["data-number"]))] = self.column
        elif tag == "li" and found.get("data-seq"):
            self.timeline.append(int(str(found["data-seq"])))
        elif tag == "script":
            self.scripts.append(found.get("src"))


def text_of(page: str) -> str:
    """The page's text, tags removed (what a reader sees, give or take spacing)."""
    return re.sub(r"<[^>]*>", "", page)


def parsed(text: str) -> Board:
    board = Board()
    board.feed(text)
    return board


@dataclass
class Seeded:
    url: str
    vault: str
    db: Path
    states: dict[int, str]
    """Each seeded task's number and the column it belongs in."""
    owner_token: str
    agent_token: str


def seed(db: Path) -> dict[int, str]:
    """A task in every state a board shows (and one whose title is markup)."""
    states: dict[int, str] = {}
    with Hive.open(db, owner="ana", clock=ManualClock(START)) as hive:
        def task(title: str, **fields: object) -> int:
            return hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                                project="site", packet=packet(task=title), **fields).number

        def claimed(title: str) -> tuple[int, dict[str, object]]:
            n = task(title)
            lease = hive.claim(CODER, n, minutes=15)
            return n, {"lease_id": lease.lease_id, "token": lease.fencing_token}

        states[task("Write the parser", priority="high")] = "routed"
        markup = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                              project="site", labels=["web"],
                              packet=packet(task=SCRIPT_TITLE, context=SCRIPT_TITLE,
                                            acceptance_criteria=[SCRIPT_TITLE]))
        states[markup.number] = "routed"
        held = hive.handoff(GUEST, requester=GUEST.name, assignee="ana/coder",
                            project="site", packet=packet(task="A stranger's request"))
        states[held.number] = "waiting"
        denied = hive.handoff(GUEST, requester=GUEST.name, assignee="ana/coder",
                              project="site", packet=packet(task="Another stranger's"))
        hive.deny(OWNER, denied.number, reason="not now")
        states[denied.number] = "rejected"
        n, _ = claimed("Profile the claim path")
        states[n] = "accepted"
        n, fence = claimed("Port the exporter")
        hive.checkpoint(CODER, n, progress="half the tables", **fence)  # type: ignore[arg-type]
        states[n] = "working"
        n, fence = claimed("Document the board")
        hive.checkpoint(CODER, n, progress="drafted", **fence)  # type: ignore[arg-type]
        hive.submit(CODER, n, summary="written", evidence=EVIDENCE,
                    **fence)  # type: ignore[arg-type]
        states[n] = "approval"
        n, fence = claimed("Fix the login bug")
        hive.checkpoint(CODER, n, progress="found it", **fence)  # type: ignore[arg-type]
        hive.submit(CODER, n, summary="fixed", evidence=RECEIPTED,
                    **fence)  # type: ignore[arg-type]
        hive.verify(REVIEWER, n)
        states[n] = "completed"
        n = task("An idea dropped")
        hive.cancel(OWNER, n, reason="done elsewhere")
        states[n] = "cancelled"
    return states


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    folder = tmp_path_factory.mktemp("board")
    db = folder / "store.db"
    states = seed(db)
    owner = hivelite(db, "token", "add", "--owner")["token"]
    agent = hivelite(db, "token", "add", "ana/coder", "--instance", "laptop")["token"]
    vault = hivelite(db, "info")["vault_id"]
    with serving(folder, [str(db), "--board-on-loopback"], now=NOW) as (url, _, _log):
        yield Seeded(url, vault, db, states, owner, agent)


def test_the_board_shows_each_task_in_its_state_s_column(seeded: Seeded,
                                                         tmp_path: Path) -> None:
    """The closed states only when asked (a link, ``closed=1``), the open ones always; a
    column with no task collapses to its heading."""
    shown = browse(tmp_path, seeded.url + "/", "--dump-dom").stdout  # / goes to the board
    board = parsed(shown)
    closed = ("completed", "rejected", "cancelled")
    assert board.cards == {n: s for n, s in seeded.states.items() if s not in closed}
    assert board.columns == ["waiting", "routed", "accepted", "working", "verifying",
                             "approval"]
    assert re.search(r'class="column state-verifying empty"[^>]*><h2[^>]*>verifying'
                     r' <span class="count">0</span></h2></section>', shown)
    assert "held by ana/coder on laptop, expires in 10m" in text_of(shown)
    assert "show closed (3)" in text_of(shown)
    assert board.scripts == ["/static/board.js"]  # the only script is the page's own
    conn = apsw.Connection(str(seeded.db), flags=apsw.SQLITE_OPEN_READONLY)
    seq, value = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1"
                              ).fetchone()
    conn.close()  # the journal's head, to note (doctor --head checks it later)
    assert f'data-head="{seq}:{value}"' in shown and f"head {seq}:{value[:12]}…" in text_of(
        shown)
    every = parsed(browse(tmp_path / "closed", f"{seeded.url}/board/{seeded.vault}?closed=1",
                          "--dump-dom").stdout)
    assert every.cards == seeded.states
    assert every.columns == [*board.columns, *closed]


def test_text_from_the_store_is_shown_as_text(seeded: Seeded, tmp_path: Path) -> None:
    """Markup in a title, a context and a criterion reaches the board and the task page as
    text: no element of its own, no script but the page's."""
    number = next(n for n, state in seeded.states.items() if state == "routed"
                  and n != min(seeded.states))  # the second routed task: the markup one
    escaped = "&lt;script&gt;alert(\"board\")&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;"
    for path, times in ((f"/board/{seeded.vault}", 1),
                        (f"/board/{seeded.vault}/tasks/{number}", 4)):  # h1, title, ctx, list
        shown = browse(tmp_path / str(times), seeded.url + path, "--dump-dom").stdout
        assert shown.count(escaped) >= times, path
        assert "<b>bold</b>" not in shown and parsed(shown).scripts == ["/static/board.js"]
    board = parsed(browse(tmp_path / "again", f"{seeded.url}/board/{seeded.vault}",
                          "--dump-dom").stdout)
    assert board.cards[number] == "routed"


def test_a_task_page_shows_its_journal_as_a_timeline(seeded: Seeded, tmp_path: Path) -> None:
    number = next(n for n, state in seeded.states.items() if state == "completed")
    shown = browse(tmp_path, f"{seeded.url}/board/{seeded.vault}/tasks/{number}",
                   "--dump-dom").stdout
    with Hive.open(seeded.db, owner="ana", create=False, clock=ManualClock(NOW)) as hive:
        history = hive.history(number)
    assert parsed(shown).timeline == [row.seq for row in reversed(history)]  # newest first
    submitted = [row.seq for row in history if row.move in (12, 14)]
    assert len(submitted) == 2 and len(set(submitted)) == 1  # one row, shown as its moves
    for text in ("Fix the login bug", "routed → accepted", "working → verifying",
                 "verifying → approval", "approval → completed",
                 "accept by ana/reviewer on desktop", "12 passed", "found it"):
        assert text in text_of(shown), text
    assert shown.count('class="verified"') == 1  # its one piece carried a checked receipt
    unverified = next(n for n, state in seeded.states.items() if state == "approval")
    other = browse(tmp_path / "other", f"{seeded.url}/board/{seeded.vault}/tasks/{unverified}",
                   "--dump-dom").stdout
    assert "12 passed" in text_of(other) and 'class="verified"' not in other


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_screenshots_of_the_board_and_a_task(seeded: Seeded, tmp_path: Path) -> None:
    """Kept in .artifacts/ for a person to look at; checked only for being whole PNGs."""
    ARTIFACTS.mkdir(exist_ok=True)
    number = next(n for n, state in seeded.states.items() if state == "working")
    for name, path in (("board", f"/board/{seeded.vault}"),
                       ("task", f"/board/{seeded.vault}/tasks/{number}")):
        shot = ARTIFACTS / f"{name}.png"
        shot.unlink(missing_ok=True)
        browse(tmp_path / name, seeded.url + path, f"--screenshot={shot}",
               "--window-size={},{}".format(*WINDOW))
        assert png_size(shot) == WINDOW
        assert shot.stat().st_size > 10_000  # a drawn page, not an empty one


def test_the_page_reloads_itself_when_the_store_changes(seeded: Seeded) -> None:
    """``…/changes`` is the journal's newest row: any write moves it (here a control, so
    the board's cards stay as the other tests expect)."""
    changes = f"{seeded.url}/board/{seeded.vault}/changes"
    before = httpx.get(changes).json()["seq"]
    page = httpx.get(f"{seeded.url}/board/{seeded.vault}").text
    assert f'data-seq="{before}"' in page and f'data-changes="/board/{seeded.vault}/changes"' in (
        page)
    with Hive.open(seeded.db, owner="ana", create=False, clock=ManualClock(NOW)) as hive:
        hive.hold(OWNER, agent="ana/ghost", reason="moves the journal")
    assert httpx.get(changes).json()["seq"] > before
    script = httpx.get(seeded.url + "/static/board.js")
    assert script.status_code == 200 and "data-changes" in script.text
    assert script.headers["content-type"].startswith("text/javascript")


@pytest.mark.parametrize("header", [
    {"Host": "evil.example"}, {"Host": "127.0.0.1.evil.example"},
    {"X-Forwarded-For": "203.0.113.9"}, {"Forwarded": "for=203.0.113.9"},
    {"X-Real-IP": "203.0.113.9"}, {"Via": "1.1 proxy"},
    {"X-Forwarded-Host": "hive.example.org"}, {"CF-Connecting-IP": "203.0.113.9"},
])
def test_open_on_loopback_is_not_open_to_a_rebound_name_or_a_proxy(
        seeded: Seeded, header: dict[str, str]) -> None:
    board = f"{seeded.url}/board/{seeded.vault}"
    assert httpx.get(board).status_code == 200
    refused = httpx.get(board, headers=header)
    assert refused.status_code == 401 and 'action="/login"' in refused.text
    assert "Write the parser" not in refused.text
    assert httpx.get(f"{board}/changes", headers=header).status_code == 401


@pytest.mark.parametrize(("host", "local"), [
    ("127.0.0.1:8377", True), ("localhost", True), ("[::1]:8377", True), ("[::1]", True),
    ("127.0.0.2", True), ("evil.example", False), ("LOCALHOST.", False), ("", False),
    ("10.0.0.1:8377", False), ("[::ffff:10.0.0.1]:80", False),
])
def test_which_host_names_are_loopback(host: str, local: bool) -> None:
    from hivelite.faces.server.hosts import names_loopback

    assert names_loopback(host) is local


def test_pages_forbid_scripts_frames_and_caching(seeded: Seeded) -> None:
    page = httpx.get(f"{seeded.url}/board/{seeded.vault}")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert httpx.get(f"{seeded.url}/board/{seeded.vault}/tasks/999").status_code == 404
    assert httpx.get(f"{seeded.url}/board/{seeded.vault}/tasks/x1").status_code == 404
    assert httpx.get(f"{seeded.url}/board/nope").status_code == 404
    for name in ("app.py", "board.css.bak", "__init__.py"):
        missing = httpx.get(f"{seeded.url}/static/{name}")
        assert missing.status_code == 404 and missing.text == "not found"  # the handler's


@pytest.fixture(scope="module")
def guarded(seeded: Seeded, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[str, str]]:
    """The same store served without --board-on-loopback beside a second store; yields the
    URL and the second store's vault id."""
    folder = tmp_path_factory.mktemp("guarded")
    other = folder / "other.db"
    hivelite(other, "init", "--owner", "bob")
    with serving(folder, [str(seeded.db), str(other)], now=NOW) as (url, _, _log):
        yield url, hivelite(other, "info")["vault_id"]


def sign_in(url: str, token: str, **headers: str) -> httpx.Response:
    """The sign-in form as a browser fills it: the page first (its form token and the
    cookie beside it), then the post."""
    page = httpx.get(url + "/login")
    found = re.search(r'name="form" value="([^"]+)"', page.text)
    assert found, page.text
    return httpx.post(url + "/login", data={"token": token, "form": found.group(1)},
                      headers=headers, cookies=page.cookies)


def test_a_sign_in_without_its_pages_form_token_is_refused(
        seeded: Seeded, guarded: tuple[str, str]) -> None:
    """A post with no form token, or with a token its cookie does not match (another
    page's, another browser's), signs nobody in: what a page of another site can send."""
    url, _ = guarded
    bare = httpx.post(url + "/login", data={"token": seeded.owner_token})
    assert bare.status_code == 403 and "hivelite_board" not in bare.headers.get(
        "set-cookie", "")
    page = httpx.get(url + "/login")
    other = httpx.get(url + "/login")
    form = re.search(r'name="form" value="([^"]+)"', other.text)
    assert form
    mixed = httpx.post(url + "/login", data={"token": seeded.owner_token,
                                             "form": form.group(1)}, cookies=page.cookies)
    assert mixed.status_code == 403 and "out of date" in mixed.text
    assert "hivelite_board" not in mixed.headers.get("set-cookie", "")
    assert sign_in(url, seeded.owner_token, Origin="null").status_code == 303


def test_the_board_is_the_owner_s(seeded: Seeded, guarded: tuple[str, str]) -> None:
    guarded, other = guarded
    board = f"{guarded}/board/{seeded.vault}"
    nobody = httpx.get(board)
    assert nobody.status_code == 401 and 'action="/login"' in nobody.text
    assert "Write the parser" not in nobody.text
    home = httpx.get(guarded + "/")
    assert home.status_code == 401 and 'action="/login"' in home.text
    assert 'http-equiv="refresh"' not in home.text  # the form keeps what is typed in it

    agent = sign_in(guarded, seeded.agent_token)
    assert agent.status_code == 403 and "hivelite_board" not in agent.headers.get("set-cookie", "")
    wrong = sign_in(guarded, "hl_000000000000_nothing")
    assert wrong.status_code == 401 and "hivelite_board" not in wrong.headers.get("set-cookie", "")

    signed = sign_in(guarded, seeded.owner_token)
    assert signed.status_code == 303 and signed.headers["location"] == (
        f"/board/{seeded.vault}")
    cookie = signed.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    session = signed.cookies["hivelite_board"]
    assert session and seeded.owner_token.split("_", 2)[2] not in cookie  # never the token
    with httpx.Client(base_url=guarded, cookies=signed.cookies) as browser:
        page = browser.get(f"/board/{seeded.vault}")
        assert page.status_code == 200 and "Write the parser" in page.text
        assert browser.get("/").headers["location"] == f"/board/{seeded.vault}"
        assert browser.get(f"/board/{seeded.vault}/changes").json()["seq"] > 0
        assert browser.get(f"/board/{other}").status_code == 403  # bob's, not ana's
        out = browser.post("/logout")
        assert out.status_code == 303 and 'hivelite_board=""' in out.headers["set-cookie"]
    after = httpx.get(board, cookies={"hivelite_board": session})
    assert after.status_code == 401  # the session ended with the sign-out


def test_a_revoked_token_ends_its_board_sessions(seeded: Seeded,
                                                 guarded: tuple[str, str]) -> None:
    url, _ = guarded
    token = hivelite(seeded.db, "token", "add", "--owner")["token"]
    signed = sign_in(url, token)
    board = f"{url}/board/{seeded.vault}"
    assert httpx.get(board, cookies=signed.cookies).status_code == 200
    hivelite(seeded.db, "token", "revoke", token.split("_")[1])
    assert httpx.get(board, cookies=signed.cookies).status_code == 401


@pytest.mark.parametrize("header", [
    {"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},
])
def test_another_site_cannot_sign_in_or_out(seeded: Seeded, guarded: tuple[str, str],
                                             header: dict[str, str]) -> None:
    url, _ = guarded
    forged = sign_in(url, seeded.owner_token, **header)
    assert forged.status_code == 403
    assert "hivelite_board" not in forged.headers.get("set-cookie", "")
    signed = sign_in(url, seeded.owner_token, Origin=url, **{"Sec-Fetch-Site": "same-origin"})
    assert signed.status_code == 303
    assert httpx.post(url + "/logout", cookies=signed.cookies,
                      headers=header).status_code == 403
    board = f"{url}/board/{seeded.vault}"
    assert httpx.get(board, cookies=signed.cookies).status_code == 200  # still signed in


def test_a_sign_in_form_past_its_size_is_refused(guarded: tuple[str, str]) -> None:
    url, _ = guarded
    answer = httpx.post(url + "/login", content=b"token=" + b"x" * 10_000,
                        headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert answer.status_code == 413
    assert "hivelite_board" not in answer.headers.get("set-cookie", "")


def test_the_board_on_loopback_refuses_a_host_beyond_it(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    hivelite(db, "init", "--owner", "ana")
    for extra in (["--host", "0.0.0.0"], ["--allowed-host", "hive.example"],
                  ["--socket", str(tmp_path / "s.sock")]):
        ran = subprocess.run([*hivelite_command(), "--db", str(db), "serve",
                              "--board-on-loopback", *extra], capture_output=True,
                             text=True, timeout=HANG_S)
        assert ran.returncode == 2, ran.stderr
        assert "--board-on-loopback needs a loopback --host" in ran.stderr


@pytest.mark.slow
def test_a_real_browser_signs_in_by_clicking_and_another_site_cannot(
        seeded: Seeded, guarded: tuple[str, str], tmp_path: Path) -> None:
    """Headless Chromium on the board in its default mode (no --board-on-loopback): a page
    of another site that posts the sign-in form with a stolen token is refused, and the
    owner who types the token into the real page and clicks lands on the board. (A
    sign-in tested through httpx once passed while every real browser was refused: the
    page's no-referrer policy makes Chromium send ``Origin: null``.)"""
    from .webdriver import another_site, chromium

    url, _ = guarded  # http://127.0.0.1:PORT; the board by the name localhost
    board = url.replace("127.0.0.1", "localhost")
    evil = (f'<form method="post" action="{board}/login">'
            f'<input name="token" value="{seeded.owner_token}">'
            '<input name="form" value="guessed"></form>'
            "<script>document.forms[0].submit()</script>").encode()

    with another_site(evil) as elsewhere, chromium(tmp_path / "profile") as browser:
        browser.go(elsewhere)  # another site
        browser.wait_for(lambda: browser.url.startswith(board))
        browser.wait_for(lambda: "own page" in browser.source)
        assert "hivelite_board" not in browser.cookies()

        browser.go(board + "/login")
        browser.type('input[name="token"]', seeded.owner_token)
        browser.click('button[type="submit"]')
        browser.wait_for(lambda: "/board/" in browser.url)
        assert browser.url == f"{board}/board/{seeded.vault}"
        assert "Write the parser" in browser.source
        assert "hivelite_board" in browser.cookies()


def test_the_board_says_which_installed_plugins_act_on_the_store(tmp_path: Path) -> None:
    """Installing is not enabling (issue 46): the owner signs in by clicking, in the
    board's default mode, and the header names the plugins enabled on the store and those
    installed beside the server that do not act there."""
    from .webdriver import chromium as webdriver_chromium

    db = tmp_path / "store.db"
    with Hive.open(db, owner="ana", clock=ManualClock(START)) as hive:
        hive.enable_plugin(OWNER, "evidence")
    token = hivelite(db, "token", "add", "--owner")["token"]
    with serving(tmp_path, [str(db)], now=NOW) as (url, _, _log), \
            webdriver_chromium(tmp_path / "profile") as browser:
        board = url.replace("127.0.0.1", "localhost")
        browser.go(board + "/login")
        browser.type('input[name="token"]', token)
        browser.click('button[type="submit"]')
        browser.wait_for(lambda: "/board/" in browser.url)
        shown = text_of(browser.source)
    assert "plugins evidence (installed, not enabled: notify, policy, quorum)" in shown
