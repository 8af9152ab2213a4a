"""The board's HTML: the tasks of one vault by state, and one task with its journal.

Pure functions from views to text, so what the owner sees is rendered on the server
with no build step and no script needed to read it or to decide (``board.js`` only
reloads the page when the store changes). Every piece of text that came from the store
goes through :func:`html.escape`: a task's title cannot inject markup into the owner's
page. The page is one column of sections on a phone and columns side by side on a desk
(``board.css``); what needs the owner comes first on both.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from urllib.parse import quote

from ...core.models import Budget, Control, Evidence, EvidenceView, JournalEntry, TaskView
from ...core.protocol import STATE_NOTES, TERMINAL, State
from ..render import WAITING_WORDS, ago
from .decisions import Forms

COLUMNS: tuple[State, ...] = (
    State.requested, State.waiting, State.routed, State.accepted, State.working,
    State.verifying, State.approval, State.completed, State.rejected, State.cancelled)
"""The board's columns, in the order work flows through them."""
assert set(COLUMNS) == set(State), "every state has a column"

OPEN_CARDS = 200
"""Cards an open column shows (the count in its heading is the whole number)."""
DONE_CARDS = 25
"""Cards a finished column shows: the most recently changed."""
TITLE_CHARS = 140
DETAIL_CHARS = 240
NEED_ITEMS = 10
"""Tasks an entry of "needs you" names (its count is the whole number)."""


def e(text: object) -> str:
    """``text`` escaped for HTML text and quoted attribute values."""
    return escape(str(text), quote=True)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _when(stamp: str, now: datetime) -> str:
    """A ``<time>``: relative to the page's moment, the exact stamp on hover."""
    return f'<time datetime="{e(stamp)}" title="{e(stamp)}">{e(ago(stamp, now))}</time>'


@dataclass(frozen=True)
class Vault:
    """What the page header says about the store."""

    vault_id: str
    owner: str
    counts: Mapping[str, int]
    seq: int
    """The journal's newest row: the page reloads when the store's moves past it."""
    head: str | None = None
    """That row as ``seq:hash``: the owner can note it, and doctor --head checks it."""
    plugins: tuple[str, ...] = ()
    """The installed plugins that act on this store: enabled or required here."""
    idle: tuple[str, ...] = ()
    """Plugins installed beside the server that do not act here: not enabled."""

    @property
    def base(self) -> str:
        return f"/board/{quote(self.vault_id)}"


@dataclass(frozen=True)
class Notice:
    """A line at the top of a page: what a decision did, or why it was refused."""

    text: str
    refused: bool = False

    def html(self) -> str:
        kind, role = ("refused", "alert") if self.refused else ("done", "status")
        return f'<p class="notice {kind}" role="{role}">{e(self.text)}</p>'


@dataclass(frozen=True)
class Filters:
    """What the board shows: a search over titles, assignees and labels, and whether the
    closed states (completed, rejected, cancelled) are shown."""

    search: str = ""
    closed: bool = False

    def query(self, **changed: object) -> str:
        search = str(changed.get("search", self.search))
        closed = bool(changed.get("closed", self.closed))
        parts = ([f"q={quote(search)}"] if search else []) + (["closed=1"] if closed else [])
        return "?" + "&".join(parts) if parts else ""


@dataclass(frozen=True)
class NeedsYou:
    """What waits on the owner: held handoffs, results to sign off, questions on a
    person, agents held or stopped, budgets nearly spent."""

    held: Sequence[TaskView] = ()
    sign_off: Sequence[TaskView] = ()
    questions: Sequence[TaskView] = ()
    controls: Sequence[Control] = ()
    budgets: Sequence[tuple[Budget, str]] = ()
    """Each budget nearly spent, with what of it ("92% of its tokens")."""

    @property
    def count(self) -> int:
        return (len(self.held) + len(self.sign_off) + len(self.questions)
                + len(self.controls) + len(self.budgets))


def page(title: str, body: str, *, vault: Vault | None = None) -> str:
    """A whole document; with a ``vault``, one that reloads itself when that store changes."""
    watch = (f' data-changes="{e(vault.base)}/changes" data-seq="{vault.seq}"'
             if vault is not None else "")
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}</title>"
        '<link rel="stylesheet" href="/static/board.css">'
        '<script src="/static/board.js" defer></script>'
        + ('<noscript><meta http-equiv="refresh" content="30"></noscript>' if vault else "")
        + f"</head><body{watch}>\n{body}\n</body></html>\n")


def _short_head(head: str) -> str:
    """A head as a page shows it: the row, and the hash's first 12 characters."""
    seq, _, value = head.partition(":")
    return f"{seq}:{value[:12]}…"


def _header(vault: Vault, now: datetime, crumb: str = "") -> str:
    total = sum(vault.counts.values())
    return (
        f'<header><a class="home" href="{e(vault.base)}">hivelite</a>{crumb}'
        f'<span class="facts">owner <b>{e(vault.owner)}</b> · vault'
        f' <code>{e(vault.vault_id)}</code> · {total} task{"s" * (total != 1)}'
        + (f' · head <code class="head" data-head="{e(vault.head)}" title="the journal\'s'
           f' head {e(vault.head)}: note it (hivelite info prints it), and hivelite doctor'
           f' --head checks it later">{e(_short_head(vault.head))}</code>' if vault.head
           else "")
        + f' · <span class="plugins" title="installed plugins act on a store only once its'
        f' owner enables them there (hivelite policy enable NAME)">plugins'
        f' {e(", ".join(vault.plugins) or "none enabled")}'
        + (f' <span class="idle">(installed, not enabled: {e(", ".join(vault.idle))})</span>'
           if vault.idle else "") + '</span>'
        + '</span>'
        f'<span class="asof" title="{e(now.isoformat())}">as of'
        f' {e(now.strftime("%H:%M:%S"))} UTC</span></header>')


def _claim(view: TaskView, now: datetime) -> str:
    claim = view.claim
    if claim is None:
        return ""
    where = f"{e(claim.holder)} on {e(claim.instance)}"
    if claim.expired:
        return (f'<p class="claim expired">lease of {where} expired'
                f' {_when(claim.expires_at, now)}</p>')
    return f'<p class="claim">held by {where}, expires {_when(claim.expires_at, now)}</p>'


def card(view: TaskView, vault: Vault, now: datetime) -> str:
    """One task on the board: number, title, priority, assignee, live claim, labels."""
    task = view.task
    labels = "".join(f'<span class="label">{e(label)}</span>' for label in view.labels)
    extra = []
    if task.waiting_on is not None:
        extra.append(f'<p class="waiting">waiting on {WAITING_WORDS[task.waiting_on.value]}</p>')
    if view.question is not None:
        answered = " answered" if view.question.answered else ""
        extra.append(f'<p class="question{answered}"><q>'
                     f"{e(_short(view.question.text, TITLE_CHARS))}</q>"
                     + (" · answered" if answered else "") + "</p>")
    if view.blocked_by:
        extra.append('<p class="blocked">blocked by '
                     + ", ".join(f"#{n}" for n in view.blocked_by) + "</p>")
    if view.controls:
        extra.append('<p class="controlled">' + ", ".join(
            e(c.kind) for c in view.controls) + "</p>")
    return (
        f'<li class="card priority-{e(view.priority)}" data-number="{view.number}">'
        f'<a href="{e(vault.base)}/tasks/{view.number}">'
        f'<span class="number">#{view.number}</span>'
        f' <span class="title">{e(_short(task.packet.task, TITLE_CHARS))}</span></a>'
        f'<p class="who"><span class="priority">{e(view.priority)}</span>'
        f' <span class="assignee">{e(task.assignee)}</span>'
        f' <span class="project">{e(task.project)}</span></p>'
        f"{_claim(view, now)}{''.join(extra)}"
        f'{f"<p class=labels>{labels}</p>" if labels else ""}'
        f'<p class="updated">changed {_when(task.updated_at, now)}</p></li>')


HELD = ("handoff held for your approval", "handoffs held for your approval")
SIGN_OFF = ("result awaiting your sign-off", "results awaiting your sign-off")
QUESTIONS = ("question waiting on you", "questions waiting on you")
CONTROLS = ("agent held or stopped", "agents held or stopped")
BUDGETS = ("budget nearly spent", "budgets nearly spent")
"""What "needs you" calls each kind of entry, for one and for several."""


def _need(kind: str, count: int, what: tuple[str, str], items: Iterable[str]) -> str:
    """One kind of thing waiting on the owner; ``what`` in the singular and the plural."""
    listed = "".join(f"<li>{item}</li>" for item in items)
    return (f'<li class="need" data-need="{kind}"><span class="count">{count}</span>'
            f' {e(what[count != 1])}<ul>{listed}</ul></li>')


def _task_link(view: TaskView, vault: Vault, extra: str = "") -> str:
    return (f'<a href="{e(vault.base)}/tasks/{view.number}"><span class="number">'
            f"#{view.number}</span> {e(_short(view.task.packet.task, 80))}</a>{extra}")


def needs_you(needs: NeedsYou, vault: Vault, now: datetime, forms: Forms) -> str:
    """The section that comes first: each kind of thing waiting on the owner, its count,
    and a link to each task (an agent's controls can be lifted from here)."""
    def tasks(views: Sequence[TaskView], extra: Callable[[TaskView], str]) -> list[str]:
        shown = [_task_link(v, vault, extra(v)) for v in views[:NEED_ITEMS]]
        if len(views) > NEED_ITEMS:
            shown.append(f"{len(views) - NEED_ITEMS} more")
        return shown

    def quoted(view: TaskView) -> str:
        return f" <q>{e(_short(view.question.text, 120))}</q>" if view.question else ""

    entries = []
    if needs.held:
        entries.append(_need("held", len(needs.held), HELD, tasks(
            needs.held, lambda v: f" from {e(v.task.requester)}")))
    if needs.sign_off:
        entries.append(_need("sign_off", len(needs.sign_off), SIGN_OFF, tasks(
            needs.sign_off, lambda v: f" by {e(v.task.assignee)}")))
    if needs.questions:
        entries.append(_need("questions", len(needs.questions), QUESTIONS,
                             tasks(needs.questions, quoted)))
    if needs.controls:
        entries.append(_need("controls", len(needs.controls), CONTROLS, [
            f"{e(_scope(c))} {e(c.kind)} {_when(c.at, now)}"
            + (f": {e(c.reason)}" if c.reason else "") + forms.lift(c, "board")
            for c in needs.controls]))
    if needs.budgets:
        entries.append(_need("budgets", len(needs.budgets), BUDGETS, [
            f'<a href="{e(vault.base)}{Filters(search=b.agent).query()}">{e(b.agent)}</a>'
            f" has used {e(share)} today; resets {_when(b.resets_at, now)}"
            for b, share in needs.budgets]))
    if not entries:
        return ('<section class="needs none" aria-label="needs you"><h2>needs you</h2>'
                "<p>Nothing waits on you.</p></section>")
    return (f'<section class="needs" aria-label="needs you"><h2>needs you'
            f' <span class="count">{needs.count}</span></h2><ul>{"".join(entries)}</ul>'
            "</section>")


def _scope(control: Control) -> str:
    if control.agent:
        return control.agent
    return f"instance {control.instance}" if control.instance else "every agent"


def _filters(vault: Vault, filters: Filters) -> str:
    """Search and the closed states' switch: a plain GET form, so a filter is a link."""
    closed = vault.counts and sum(vault.counts.get(s.value, 0) for s in TERMINAL)
    switch = (f'<a class="closed" href="{e(vault.base)}'
              f'{filters.query(closed=not filters.closed)}">'
              + ("hide closed" if filters.closed else f"show closed ({closed or 0})") + "</a>")
    keep = '<input type="hidden" name="closed" value="1">' if filters.closed else ""
    return (f'<form class="filters" method="get" action="{e(vault.base)}" role="search">'
            f'<input type="search" name="q" value="{e(filters.search)}" maxlength="200"'
            ' placeholder="search titles, assignees, labels" aria-label="search">'
            f'{keep}<button type="submit">Search</button>{switch}</form>')


def board(vault: Vault, columns: Mapping[State, Sequence[TaskView]], now: datetime, *,
          needs: NeedsYou = NeedsYou(), filters: Filters = Filters(),
          forms: Forms | None = None, notice: Notice | None = None) -> str:
    """The board page: what needs the owner, then a column per state with its cards.

    A column with no task collapses to its heading; the closed states are left out
    unless ``filters.closed``; with a search, a column counts the cards found."""
    forms = forms or Forms(vault.base, "")
    sections = []
    for state in COLUMNS:
        if state in TERMINAL and not filters.closed:
            continue
        views = columns.get(state, ())
        count = len(views) if filters.search else vault.counts.get(state.value, 0)
        if state is State.requested and not count:
            continue  # the gate decides at once: only a failing gate leaves tasks here
        more = count - len(views)
        shown = "".join(card(v, vault, now) for v in views)
        tail = (f'<p class="more">{more} more {"finished " if state in TERMINAL else ""}'
                f"not shown</p>" if more > 0 else "")
        empty = " empty" if not count else ""
        sections.append(
            f'<section class="column state-{state.value}{empty}" data-state="{state.value}">'
            f'<h2 title="{e(STATE_NOTES[state])}">{state.value}'
            f' <span class="count">{count}</span></h2>'
            + (f'<ol class="cards">{shown}</ol>{tail}' if count else "") + "</section>")
    title = f"hivelite · {vault.owner} · board"
    if needs.count:
        title = f"({needs.count}) {title}"
    return page(title, _header(vault, now)
                + (notice.html() if notice else "")
                + needs_you(needs, vault, now, forms) + _filters(vault, filters)
                + '<main class="board">' + "".join(sections) + "</main>", vault=vault)


def _evidence(evidence: Sequence[Evidence | EvidenceView]) -> str:
    """Each piece of a result's evidence whole: what kind, what it says, whether hivelite
    verified it from a receipt, its link and its content (what the owner reads before
    signing off)."""
    items = []
    for piece in evidence:
        link = (f' <a href="{e(piece.url)}" rel="noreferrer noopener">{e(piece.url)}</a>'
                if piece.url else "")
        content = f"<pre>{e(piece.content)}</pre>" if piece.content else ""
        verified = (' <span class="verified" title="hivelite checked its receipt">'
                    "verified</span>" if getattr(piece, "verified", False) else "")
        items.append(f'<li class="evidence"><span class="kind">{e(piece.kind)}</span>'
                     f" {e(piece.summary)}{verified}{link}{content}</li>")
    return f'<h3>evidence</h3><ul class="evidence">{"".join(items)}</ul>' if items else ""


def _items(title: str, items: Iterable[str]) -> str:
    listed = "".join(f"<li>{e(item)}</li>" for item in items)
    return f"<h3>{e(title)}</h3><ul>{listed}</ul>" if listed else ""


def _detail(detail: Mapping[str, object] | None) -> str:
    if not detail:
        return ""
    parts = []
    for key, value in detail.items():
        if value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        parts.append(f"<dt>{e(key)}</dt><dd>{e(_short(str(text), DETAIL_CHARS))}</dd>")
    return f'<dl class="detail">{"".join(parts)}</dl>'


def entry(row: JournalEntry, now: datetime) -> str:
    """One journal row on the timeline: when, who, which move, why."""
    if row.move is not None:
        what = (f'<span class="move">{e(row.from_state or "")} → {e(row.to_state or "")}'
                f"</span> <span class=\"moveno\">move {row.move}</span>")
    elif row.from_state is None and row.to_state is not None:
        what = f'<span class="move">created, {e(row.to_state)}</span>'
    else:
        what = '<span class="event">event</span>'
    waiting = (f' <span class="waiting">waiting on {WAITING_WORDS[row.waiting_on.value]}</span>'
               if row.waiting_on is not None else "")
    reason = f' <span class="reason">{e(row.reason)}</span>' if row.reason else ""
    return (f'<li class="entry" data-seq="{row.seq}">{_when(row.at, now)}'
            f' <span class="actor">{e(row.actor or "store")}</span> {what}{waiting}{reason}'
            f"{_detail(row.detail)}</li>")


def _question(view: TaskView, now: datetime) -> str:
    question = view.question
    if question is None:
        return ""
    answers = "".join(f'<li class="answer"><span class="actor">{e(a.by)}</span>'
                      f" {_when(a.at, now)}: {e(a.text)}</li>" for a in question.answers)
    whom = "you" if question.on == "human" else "another agent"
    return (f'<section class="question"><h3>question for {whom}</h3>'
            f'<p><span class="actor">{e(question.asked_by)}</span> asked'
            f" {_when(question.at, now)}: <q>{e(question.text)}</q></p>"
            + (f"<ol>{answers}</ol>" if answers else "<p>No answer yet.</p>") + "</section>")


def task_page(view: TaskView, history: Sequence[JournalEntry], vault: Vault,
              now: datetime, *, forms: Forms | None = None,
              controls: Sequence[Control] = (), notice: Notice | None = None) -> str:
    """One task: what it asks, where it stands, the owner's decisions on it and on its
    assignee, its result with its evidence and verdicts, and its journal as a timeline
    (newest first). ``controls``: the live ones bearing on the assignee."""
    forms = forms or Forms(vault.base, "")
    task, packet = view.task, view.task.packet
    facts = [("state", task.state.value + (f" (waiting on {WAITING_WORDS[task.waiting_on.value]})"
                                           if task.waiting_on else "")),
             ("project", task.project), ("requester", task.requester),
             ("assignee", task.assignee), ("priority", view.priority),
             ("labels", ", ".join(view.labels) or "none"),
             ("attempts", f"{view.attempts} of {view.max_attempts}"),
             ("deliverable", packet.deliverable_type), ("origin", view.origin)]
    rows = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in facts)
    times = (f"<tr><th>created</th><td>{_when(task.created_at, now)}</td></tr>"
             f"<tr><th>changed</th><td>{_when(task.updated_at, now)}</td></tr>")
    parts = [f'<table class="facts">{rows}{times}</table>', _claim(view, now),
             _question(view, now)]
    if packet.context:
        parts.append(f'<h3>context</h3><p class="context">{e(packet.context)}</p>')
    parts.append(_items("acceptance criteria", packet.acceptance_criteria))
    if task.latest_checkpoint is not None:
        point = task.latest_checkpoint
        parts.append(f'<h3>latest checkpoint</h3><p>{e(point.progress)}</p>'
                     + _items("next steps", point.next_steps)
                     + _items("open questions", point.open_questions))
    if task.result is not None:
        result = task.result
        parts.append(
            f'<h3>result ({e(view.outcome or "completed")})</h3>'
            f'<p class="summary">{e(result.summary)}</p>'
            + _evidence(view.evidence or result.evidence))
    if view.confirmations:
        parts.append(_items("verdicts", (
            f"{c.verdict} by {c.reviewer} on {c.instance}"
            + ("" if c.counted else f" (not counted: {c.why})")
            + (f": {c.reason}" if c.reason else "") for c in view.confirmations)))
    # after the result and its evidence: read, then decide
    parts.append(forms.on_task(view, history[-1].seq if history else 0))
    if task.state not in TERMINAL:
        parts.append(forms.on_agent(task.assignee, controls, str(view.number)))
    timeline = "".join(entry(row, now) for row in reversed(history))
    crumb = f' <span class="crumb">/ #{view.number}</span>'
    body = (_header(vault, now, crumb) + (notice.html() if notice else "")
            + '<main class="task">'
            f'<h1><span class="number">#{view.number}</span> {e(packet.task)}'
            f' <span class="state state-{task.state.value}">{task.state.value}</span></h1>'
            f'<div class="about">{"".join(parts)}</div>'
            f'<section class="timeline"><h2>journal</h2><ol>{timeline}</ol></section></main>')
    return page(f"#{view.number} {_short(packet.task, 60)} · hivelite", body, vault=vault)


def vault_index(vaults: Sequence[Vault]) -> str:
    """The stores this server holds, when more than one could be meant."""
    items = "".join(
        f'<li><a href="{e(v.base)}">{e(v.owner)} · <code>{e(v.vault_id)}</code></a>'
        f" {sum(v.counts.values())} tasks</li>" for v in vaults)
    return page("hivelite · boards", f'<main class="index"><h1>boards</h1><ul>{items}</ul>'
                "</main>")


def login(message: str = "", form_token: str = "") -> str:
    """The form that trades an owner token for the board's cookie; ``form_token`` is the
    form's own, matched against its cookie when the form comes back."""
    note = f'<p class="error">{e(message)}</p>' if message else ""
    return page("hivelite · sign in", (
        '<main class="login"><h1>hivelite board</h1>'
        "<p>The board is the owner's: paste an owner token"
        " (<code>hivelite token add --owner</code>).</p>"
        f'{note}<form method="post" action="/login">'
        f'<input type="hidden" name="form" value="{e(form_token)}">'
        '<input type="password" name="token" autocomplete="off" placeholder="hl_…"'
        ' aria-label="owner token" required> <button type="submit">Open the board</button>'
        "</form></main>"))


def refusal(message: str) -> str:
    return page("hivelite", f'<main class="login"><h1>hivelite</h1>'
                f'<p class="error">{e(message)}</p><p><a href="/login">sign in</a></p></main>')


__all__ = ["COLUMNS", "Vault", "board", "card", "login", "page", "task_page", "vault_index"]
