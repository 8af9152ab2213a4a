"""The owner's board in a real browser (issue 29): what needs the owner comes first, a
phone's screen never scrolls sideways, and every decision the owner makes by a click goes
through its verb, journaled as the same verb from the CLI.

One ``hivelite serve`` in its default mode (a sign-in, no ``--board-on-loopback``) and
one headless Chromium, driven over WebDriver: the owner types the token, clicks, and
clicks each decision; the store is then read to see what the click did.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hivelite import Hive, ManualClock

from .conftest import CODER, GUEST, OWNER, START, packet
from .test_board import ARTIFACTS, png_size
from .test_serve import ROOT, hivelite, serving
from .webdriver import another_site

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

pytestmark = pytest.mark.slow

SHOTS = ROOT / "docs" / "images"
SIZES = {"desk": (1280, 800), "phone": (390, 844)}
NOW = "2026-12-02T10:05:00.000Z"  # the server's clock (five minutes after START)


@dataclass
class Store:
    db: Path
    url: str
    vault: str
    owner_token: str
    tasks: dict[str, int]
    """The seeded tasks by what the tests do with them."""

    @property
    def board(self) -> str:
        return f"{self.url}/board/{self.vault}"

    def hive(self) -> Hive:
        return Hive.open(self.db, owner="ana", create=False, clock=ManualClock(NOW))


def seed(db: Path) -> dict[str, int]:
    tasks: dict[str, int] = {}
    with Hive.open(db, owner="ana", clock=ManualClock(START)) as hive:
        def own(title: str, **more: Any) -> int:
            return hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                                project="site", packet=packet(task=title), **more).number

        def held(title: str) -> int:
            return hive.handoff(GUEST, requester=GUEST.name, assignee="ana/coder",
                                project="site", packet=packet(task=title)).number

        def submitted(title: str) -> int:
            n = own(title)
            lease = hive.claim(CODER, n)
            fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
            hive.checkpoint(CODER, n, progress="done", **fence)  # type: ignore[arg-type]
            hive.submit(CODER, n, summary=f"{title}: done", evidence=[
                {"kind": "test_output", "summary": "41 passed", "content": "41 passed in 2s"},
                {"kind": "link", "summary": "the diff", "url": "https://example.org/diff/1"},
            ], **fence)  # type: ignore[arg-type]
            return n

        tasks["approve"] = held("A guest's request to approve")
        tasks["deny"] = held("A guest's request to deny")
        tasks["deny_cli"] = held("A guest's request the CLI denies")
        tasks["sign_off"] = submitted("A result to sign off")
        tasks["decline"] = submitted("A result to decline")
        tasks["sign_off_cli"] = submitted("A result the CLI signs off")
        n = own("Pick the database")
        lease = hive.claim(CODER, n)
        fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
        hive.checkpoint(CODER, n, progress="comparing", **fence)  # type: ignore[arg-type]
        hive.pause(CODER, n, on="human", reason="which database: SQLite or PostgreSQL?",
                   **fence)  # type: ignore[arg-type]
        tasks["answer"] = n
        tasks["cancel"] = own("An idea to cancel")
        tasks["cancel_cli"] = own("An idea the CLI cancels")
        tasks["stale"] = held("A request someone else decides first")
        n = own("Spend the budget")
        lease = hive.claim(CODER, n)
        hive.update(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="spent", tokens=9_000)
        tasks["budget"] = n
        hive.set_budget(OWNER, "ana/coder", tokens=10_000)
    return tasks


@contextmanager
def seeded_board(folder: Path) -> Iterator[Store]:
    """A store seeded with the tasks the tests decide on, served in ``folder``."""
    db = folder / "store.db"
    tasks = seed(db)
    owner = hivelite(db, "token", "add", "--owner")["token"]
    vault = hivelite(db, "info")["vault_id"]
    with serving(folder, [str(db)], now=NOW) as (url, _, _log):
        yield Store(db, url.replace("127.0.0.1", "localhost"), vault, owner, tasks)


@contextmanager
def signed_in(store: Store, profile: Path) -> Iterator[Any]:
    """Chromium, signed in as the owner by typing the token and clicking."""
    from .webdriver import chromium

    with chromium(profile) as driven:
        driven.go(store.url + "/login")
        driven.type('input[name="token"]', store.owner_token)
        driven.click('button[type="submit"]')
        driven.wait_for(lambda: driven.url == store.board)
        yield driven


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """The module's store: its tests decide on its tasks, each on tasks of its own."""
    with seeded_board(tmp_path_factory.mktemp("decisions")) as seeded:
        yield seeded


@pytest.fixture(scope="module")
def browser(store: Store, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with signed_in(store, tmp_path_factory.mktemp("chromium") / "profile") as driven:
        yield driven


def moves(store: Store, number: int) -> list[tuple[Any, ...]]:
    """The task's journal as what a decision writes: move, actor, reason, detail."""
    with store.hive() as hive:
        return [(r.from_state, r.to_state, r.move, r.actor, r.reason, r.detail)
                for r in hive.history(number)]


def open_task(browser: Any, store: Store, number: int) -> None:
    browser.go(f"{store.board}/tasks/{number}")
    browser.wait_for(lambda: f"#{number}" in browser.run("return document.title"))


def decide(browser: Any, verb: str, *, reason: str = "", text: str = "") -> None:
    """Click a decision on the open task page as a person would: open it first when it
    is one for good, type what it asks, click its button, wait for the page after."""
    form = f'form.decide[data-verb="{verb}"]'
    if browser.run(f"return !!document.querySelector('details.confirm[data-verb=\"{verb}\"]')"):
        browser.click(f'details.confirm[data-verb="{verb}"] summary')
    if reason:
        browser.type(f'{form} input[name="reason"]', reason)
    if text:
        browser.type(f'{form} textarea[name="text"]', text)
    before = browser.url
    browser.click(f"{form} button")
    browser.wait_for(lambda: browser.url != before or "notice" in browser.source)


def test_needs_you_comes_first_with_counts_and_links(tmp_path: Path) -> None:
    """On a store of its own, as seeded: the module's store is the other tests' to decide
    on, in whatever order they run."""
    (tmp_path / "seeded").mkdir()
    with seeded_board(tmp_path / "seeded") as store, \
            signed_in(store, tmp_path / "profile") as browser:
        needs_you_first(store, browser)


def needs_you_first(store: Store, browser: Any) -> None:
    browser.go(store.board)
    order = browser.run(
        "return [...document.querySelectorAll('section.needs, main.board')]"
        ".map(e => e.tagName + '.' + e.className)")
    assert order == ["SECTION.needs", "MAIN.board"]
    counts = browser.run(
        "return Object.fromEntries([...document.querySelectorAll('li.need')].map("
        "e => [e.dataset.need, e.querySelector('.count').textContent]))")
    assert counts == {"held": "4", "sign_off": "3", "questions": "1", "budgets": "1"}
    links = browser.run(
        "return [...document.querySelectorAll('li.need[data-need=held] a')]"
        ".map(a => a.getAttribute('href'))")
    assert f"/board/{store.vault}/tasks/{store.tasks['approve']}" in links
    assert "which database" in browser.run(
        "return document.querySelector('li.need[data-need=questions]').textContent")
    assert "90% of its tokens" in browser.source
    assert browser.run("return document.title").startswith("(9) ")


def test_a_phone_never_scrolls_sideways_and_both_sizes_are_pictured(
        store: Store, browser: Any) -> None:
    """At 390 px the board and a task page are no wider than the screen; the pictures at
    a desk's and a phone's size are kept in .artifacts/ and shown in docs/serve.md."""
    ARTIFACTS.mkdir(exist_ok=True)
    pages = {"board": store.board, "task": f"{store.board}/tasks/{store.tasks['sign_off']}"}
    try:
        for size, (width, height) in SIZES.items():
            browser.viewport(width, height, mobile=size == "phone")
            for name, url in pages.items():
                browser.go(url)
                widths = browser.run("return [document.documentElement.scrollWidth,"
                                     " window.innerWidth]")
                assert widths[1] == width
                assert widths[0] <= widths[1], (name, size, widths)
                shot = ARTIFACTS / f"{name}-{size}.png"
                browser.screenshot(shot)
                assert png_size(shot) == (width, height)
    finally:
        browser.viewport(*SIZES["desk"])
    page = (ROOT / "docs" / "serve.md").read_text()
    for size, wanted in SIZES.items():
        picture = SHOTS / f"board-{size}.png"
        assert f"images/board-{size}.png" in page and png_size(picture) == wanted


def test_search_finds_titles_assignees_and_labels(store: Store, browser: Any) -> None:
    browser.go(store.board)
    browser.type('form.filters input[name="q"]', "DATABASE")
    browser.click("form.filters button")
    browser.wait_for(lambda: "q=DATABASE" in browser.url)
    cards = browser.run("return [...document.querySelectorAll('li.card')]"
                        ".map(c => +c.dataset.number)")
    assert cards == [store.tasks["answer"]]


def test_each_decision_by_a_click_is_journaled_as_the_cli_s(store: Store,
                                                             browser: Any) -> None:
    """Approve, deny, sign off, decline, cancel and answer, each clicked on its task's
    page: the store moved, and the journal row is the one the same verb from the CLI
    writes (deny, sign off and cancel run by the CLI on twin tasks to compare)."""
    t = store.tasks
    hivelite(store.db, "deny", str(t["deny_cli"]), "--reason", "not ours")
    hivelite(store.db, "sign-off", str(t["sign_off_cli"]), "--reason", "good")
    hivelite(store.db, "cancel", str(t["cancel_cli"]), "--reason", "dropped")
    for verb, reason, twin in (("approve", "fine", None), ("deny", "not ours", "deny_cli"),
                               ("sign_off", "good", "sign_off_cli"),
                               ("decline", "the diff is missing", None),
                               ("cancel", "dropped", "cancel_cli")):
        open_task(browser, store, t[verb])
        if verb == "sign_off":  # the evidence is on the page the owner decides on
            assert "41 passed in 2s" in browser.source and "the diff" in browser.source
        decide(browser, verb, reason=reason)
        assert browser.url.endswith(f"/tasks/{t[verb]}?done={verb}")
        assert "Done:" in browser.run("return document.querySelector('.notice').textContent")
        last = moves(store, t[verb])[-1]
        assert last[3] == "ana" and last[4] == reason, (verb, last)
        if twin is not None:
            assert last == moves(store, t[twin])[-1], verb
    with store.hive() as hive:
        states = {verb: hive.get(t[verb]).task.state.value
                  for verb in ("approve", "deny", "sign_off", "decline", "cancel")}
    assert states == {"approve": "routed", "deny": "rejected", "sign_off": "completed",
                      "decline": "routed", "cancel": "cancelled"}


def test_an_answer_from_the_board_reaches_the_holder_on_resume(store: Store,
                                                               browser: Any) -> None:
    number = store.tasks["answer"]
    open_task(browser, store, number)
    assert "which database: SQLite or PostgreSQL?" in browser.source
    decide(browser, "answer", text="PostgreSQL 16, please")
    assert "PostgreSQL 16, please" in browser.source  # shown on the task's page
    with store.hive() as hive:
        assert hive.get(number).task.state.value == "waiting"  # an answer moves nothing
        resumed = hive.resume(CODER, number)
    assert resumed.question is not None
    assert [(a.text, a.by) for a in resumed.question.answers] == [
        ("PostgreSQL 16, please", "ana")]


def test_hold_stop_and_lift_an_agent_by_a_click(store: Store, browser: Any) -> None:
    number = store.tasks["budget"]
    open_task(browser, store, number)
    browser.click('section.agent form.decide[data-verb="hold"] button')
    browser.wait_for(lambda: "?done=hold" in browser.url)
    with store.hive() as hive:
        live = [(c.kind, c.agent, c.by) for c in hive.controls()]
        assert live == [("hold", "ana/coder", "ana")]
        assert hive.get(number).claim is None  # the hold ended the agent's claim
    browser.go(store.board)  # held agents are in "needs you", with a lift at hand
    assert browser.run("return document.querySelector("
                       "'li.need[data-need=controls] .count').textContent") == "1"
    browser.click('li.need[data-need=controls] form.decide[data-verb="lift"] button')
    browser.wait_for(lambda: "?done=lift" in browser.url)
    open_task(browser, store, number)
    browser.click('section.agent form.decide[data-verb="stop"] button')
    browser.wait_for(lambda: "?done=stop" in browser.url)
    with store.hive() as hive:
        assert [(c.kind, c.agent) for c in hive.controls()] == [("stop", "ana/coder")]
    browser.click('section.agent form.decide[data-verb="lift"] button')
    browser.wait_for(lambda: "?done=lift" in browser.url)
    with store.hive() as hive:
        assert hive.controls() == []
        kinds = [c.kind for c in hive.controls(live=False) if c.agent == "ana/coder"]
    assert kinds == ["hold", "stop"]  # the other tests' controls (on ana/ghost) aside


def test_a_stale_view_is_refused_in_the_protocol_s_words(store: Store,
                                                         browser: Any) -> None:
    """Someone else decided while the page was open: the click is refused, the page says
    why, and the store keeps the first decision."""
    number = store.tasks["stale"]
    open_task(browser, store, number)
    hivelite(store.db, "approve", str(number), "--reason", "the CLI was faster")
    decide(browser, "deny", reason="too late")
    notice = browser.run("return document.querySelector('.notice.refused').textContent")
    assert f"task {number} changed since this page was drawn (it is routed now)" in notice
    assert moves(store, number)[-1][4] == "the CLI was faster"
    # the page drawn again offers what the task allows now: no approve, no deny
    assert 'data-verb="approve"' not in browser.source
    assert 'data-verb="cancel"' in browser.source


def test_the_page_does_not_reload_under_a_typed_answer(store: Store, browser: Any,
                                                       tmp_path: Path) -> None:
    """While the owner types, a change in the store shows a line with a link instead of
    reloading the page (the typed text stays); untouched, the page reloads itself."""
    with store.hive() as hive:  # a question of its own (the hold above ended the claims)
        number = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                              project="site", packet=packet(task="Pick a version")).number
        lease = hive.claim(CODER, number)
        hive.pause(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                   on="human", reason="and which version?")
    open_task(browser, store, number)
    browser.type('form.decide[data-verb="answer"] textarea', "half typed")
    with store.hive() as hive:
        hive.hold(OWNER, agent="ana/ghost", reason="moves the journal")
    browser.wait_for(lambda: browser.run("return !!document.querySelector('p.stale')"))
    assert browser.run("return document.querySelector('textarea').value") == "half typed"
    with store.hive() as hive:
        hive.lift(OWNER, agent="ana/ghost")
        seq = hive.last_seq()
    browser.go(store.board)
    browser.wait_for(lambda: browser.run("return document.body.dataset.seq") == str(seq))
    with store.hive() as hive:
        hive.hold(OWNER, agent="ana/ghost", reason="moves it again")
        hive.lift(OWNER, agent="ana/ghost")
        moved = hive.last_seq()
    browser.wait_for(lambda: browser.run("return document.body.dataset.seq") == str(moved))


def test_a_decision_from_another_site_is_refused_and_changes_nothing(
        store: Store, browser: Any) -> None:
    """A page of another site that posts a decision: the browser sends no board cookie
    (``SameSite=Strict``) and says ``cross-site``; a post with the cookie but without the
    page's form token is refused too. The store keeps the task as it was."""
    with store.hive() as hive:  # a task made here, kept routed
        number = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                              project="site", packet=packet(task="Keep me")).number
    before = moves(store, number)
    evil = (f'<form method="post" action="{store.board}/tasks/{number}/cancel">'
            '<input name="reason" value="gone"><input name="form" value="guessed"></form>'
            "<script>document.forms[0].submit()</script>").encode()

    with another_site(evil) as elsewhere:
        browser.go(elsewhere)
        browser.wait_for(lambda: browser.url.startswith(store.board))
        browser.wait_for(lambda: "own page" in browser.source)
    cookie = {"hivelite_board": browser.cookies()["hivelite_board"]}
    same_site = httpx.post(f"{store.board}/tasks/{number}/cancel", cookies=cookie,
                           data={"reason": "gone", "form": "guessed"},
                           headers={"Sec-Fetch-Site": "same-origin"})
    assert same_site.status_code == 403 and "out of date" in same_site.text
    assert moves(store, number) == before
