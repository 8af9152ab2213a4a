"""Human-readable output for the CLI: aligned tables, a block per task, relative times.

Everything printed here passes through :func:`printable`: text an agent wrote (a task,
a summary, a reason) cannot ring the bell, move the cursor, rewrite a line or send an
escape sequence to the reader's terminal. JSON output is not rendered here and keeps
the text exactly as stored.

Each function takes a view as its JSON (what ``--json`` prints, as a read answers it
without the models) or as the model itself, which it reads as its JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..core.clock import parse_ts
from ..core.protocol import CONTROL_ENDINGS
from .terminal import PRIORITY_COLOURS, STATE_COLOURS, clip, paint, printable

if TYPE_CHECKING:
    from ..core.models import ClaimReceipt, Control, JournalEntry, TaskView

Json = dict[str, Any]

LAST_UPDATES = 5
"""Updates a ``show`` block prints (the view carries 20)."""

def as_json(value: Any) -> Json:
    """A view as its JSON: a model dumped as ``--json`` prints it, a dict as it is."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if dump is not None else value  # type: ignore[no-any-return]


def ago(stamp: str, now: datetime | None) -> str:
    """``stamp`` relative to ``now`` ("3m ago", "in 9m"), or the stamp itself without ``now``."""
    if now is None:
        return stamp
    seconds = int((now - parse_ts(stamp)).total_seconds())
    future = seconds < 0
    seconds = abs(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            amount = f"{(seconds + size // 2) // size}{unit}"  # nearest, not floor
            break
    else:
        amount = f"{seconds}s"
    return f"in {amount}" if future else f"{amount} ago"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell (every cell made :func:`printable` first)."""
    headers = [printable(h) for h in headers]
    rows = [[printable(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


WAITING_WORDS = {"owner_approval": "owner", "human": "human", "agent": "agent"}
"""What a waiting task waits on, in the listing's words (``waiting: owner``)."""


def _state(view: Json) -> str:
    """The stored state; a claim whose lease ran out says so (reads never write: the next
    write returns the task to ``routed``)."""
    task = view["task"]
    state = task["state"]
    if task["waiting_on"]:
        state += ": " + WAITING_WORDS[task["waiting_on"]]
        if view["question"] is not None and view["question"]["answers"]:
            state += ", answered"
    if view["blocked_by"]:
        state += ", blocked by " + " ".join(str(n) for n in view["blocked_by"])
    elif view["lifecycle"] == "failed" and task["state"] == "routed":
        state += ", attempts exhausted"
    for control in view["controls"]:  # the owner's hold, veto or stop bearing on it
        state += f", {CONTROL_ENDINGS[control['kind']]}"
    claim = view["claim"]
    return f"{state}, lease expired" if claim is not None and claim["expired"] else state


TASK_HEADERS = ("#", "state", "assignee", "project", "priority", "updated", "task")
DROPPED_FIRST = ("project", "priority", "updated", "assignee")
"""The columns a narrow terminal loses, in this order, before a row would wrap."""
TITLE_MIN = 12


def task_table(items: Sequence[TaskView | Json], now: datetime | None = None,
               next_cursor: int | None = None, *, width: int | None = None,
               colour: bool = False) -> str:
    """The listing: a row per task. With ``width`` no line is longer: titles are cut to
    fit, and on a narrow terminal the less needed columns go (project, priority, updated,
    assignee) before a title gets shorter than a dozen characters; a state too long for
    even that is cut too. ``colour`` paints the state and the priority (the padding is
    measured without the colour codes)."""
    if not items:
        return "no tasks"
    views = [as_json(v) for v in items]
    rows = [
        [str(v["number"]), printable(_state(v)), printable(v["task"]["assignee"]),
         printable(v["task"]["project"]), v["priority"], ago(v["task"]["updated_at"], now),
         printable(v["task"]["packet"]["task"])]
        for v in views
    ]
    headers = list(TASK_HEADERS)
    if width is None:
        for row in rows:
            row[-1] = clip(row[-1], 48)
    else:
        for name in (None, *DROPPED_FIRST):
            if name is not None:
                gone = headers.index(name)
                headers.pop(gone)
                for row in rows:
                    row.pop(gone)
            fixed = sum(max(len(h), *(len(r[i]) for r in rows)) + 2
                        for i, h in enumerate(headers[:-1]))
            if width - fixed >= TITLE_MIN:
                break
        room = max(width - fixed, 4)
        for row in rows:
            row[-1] = clip(row[-1], room)
    lines = table(headers, rows).split("\n")
    if width is not None:
        lines = [clip(line, width) for line in lines]
    if colour:  # the priority first: painting the state moves what follows it
        rows_of = list(zip(lines[1:], views, strict=True))
        if "PRIORITY" in lines[0]:
            at = lines[0].index("PRIORITY")
            rows_of = [(line[:at] + _paint_word(line[at:], v["priority"], PRIORITY_COLOURS),
                        v) for line, v in rows_of]
        at = lines[0].index("STATE")
        lines = [lines[0]] + [line[:at] + _paint_word(line[at:], v["task"]["state"])
                              for line, v in rows_of]
    out = "\n".join(lines)
    if next_cursor is not None:
        out += f"\n… more: --after {next_cursor}"
    return out


def _paint_word(rest: str, key: str, colours: dict[str, str] = STATE_COLOURS) -> str:
    """The word at the start of ``rest`` painted as ``colours`` says for ``key``, the rest
    as it was."""
    word = rest.split("  ", 1)[0]
    return paint(word, key, colours) + rest[len(word):]


def task_block(view: TaskView | Json, now: datetime | None = None) -> str:
    v = as_json(view)
    task, packet = v["task"], v["task"]["packet"]
    lines = [
        f"task {v['number']}  {task['id']}",
        f"  state      {_state(v)}" + (f"  ({v['last_reason']})" if v["last_reason"] else ""),
        f"  project    {task['project']}   priority {v['priority']}"
        + (f"   labels {', '.join(v['labels'])}" if v["labels"] else "")
        + f"   fields v{v['fields_version']}",
        f"  requester  {task['requester']}" + ("   (proposed by an agent)"
                                                if v["origin"] == "agent" else ""),
        f"  assignee   {task['assignee']}"
        + (f"   role {v['role']} (its claimant must be enrolled in it)" if v["role"] else ""),
        f"  created    {ago(task['created_at'], now)}   updated {ago(task['updated_at'], now)}",
        f"  task       {packet['task']}  [{packet['deliverable_type']}]",
    ]
    lines += [f"  accept     - {c}" for c in packet["acceptance_criteria"]]
    if v["depends_on"]:
        lines.append("  depends on " + ", ".join(f"{d['number']} ({d['state']})"
                                                  for d in v["depends_on"]))
    if v["attempts"]:
        lines.append(f"  attempts   {v['attempts']} of {v['max_attempts']} used"
                     " (results sent back)")
    if v["claim"] is not None:
        claim = v["claim"]
        if claim["expired"]:
            lines.append(f"  claim      {claim['holder']} on {claim['instance']}, lease expired"
                         f" {ago(claim['expires_at'], now)}; the next write returns the task"
                         " to routed")
        else:
            lines.append(f"  claim      {claim['holder']} on {claim['instance']}, "
                         f"expires {ago(claim['expires_at'], now)}")
    if v["question"] is not None:
        asked = v["question"]
        whose = "the owner" if asked["on"] == "human" else "another agent or the owner"
        lines.append(f"  question   {asked['text']} ({asked['asked_by']},"
                     f" {ago(asked['at'], now)}; for {whose})")
        lines += [f"  answer     {a['text']} ({a['by']}, {ago(a['at'], now)})"
                  for a in asked["answers"]]
    if task["latest_checkpoint"] is not None:
        lines.append(f"  checkpoint {task['latest_checkpoint']['progress']}")
    if task["result"] is not None:
        result = task["result"]
        current = task["state"] in ("verifying", "approval", "completed")
        label = "result    " if current else "last try  "
        outcome = f", {v['outcome']}" if v["outcome"] == "failed" else ""
        lines.append(f"  {label} {result['summary']} (by {result['returned_by']}{outcome})")
        checked = v["evidence"] or result["evidence"]
        lines += [f"    evidence {e['kind']}: {e['summary']}"
                  + (f" <{e['url']}>" if e.get("url") else "")
                  + (" (verified)" if e.get("verified", False) else "")
                  for e in checked]
        if v["draft"] is not None:
            draft = v["draft"]
            title = f" {draft['title']}" if draft["title"] else ""
            lines.append(f"    draft    {draft['kind']}{title}"
                         f" ({len(draft['content'])} characters)")
    for c in v["confirmations"]:
        counted = "" if c["counted"] else f" (not counted: {c['why'] or 'policy'})"
        lines.append(f"  verdict    {c['verdict']} by {c['reviewer']} on {c['instance']}"
                     f"{counted}" + (f": {c['reason']}" if c["reason"] else ""))
    for control in v["controls"]:
        lines.append(f"  control    {control_line(control)}")
    if v["threshold"] and task["state"] == "approval":
        given = sum(1 for c in v["confirmations"] if c["counted"] and c["verdict"] == "accept")
        noun = "confirmation" if v["threshold"] == 1 else "confirmations"
        lines.append(f"  needs      {given} of {v['threshold']} independent {noun}, or the"
                     " owner's sign-off")
    if v["merge"] is not None:
        lines.append(f"  merged     {v['merge']['commit']} (recorded by {v['merge']['by']})")
    for u in v["updates"][-LAST_UPDATES:]:
        lines.append(f"  update     {ago(u['at'], now)}  {u['actor']}: {u['summary']}")
    usage = v["usage"]
    if usage["tokens"] or usage["usd_micros"]:
        lines.append(f"  usage      {usage['tokens']} tokens,"
                     f" ${usage['usd_micros'] / 1_000_000:.2f}")
    return "\n".join(printable(line) for line in lines)


def scope(control: Json) -> str:
    """Whom a control binds, in words (``core.models.scope_of``, which a model's
    ``scope`` says)."""
    if control["kind"] == "veto":
        return f"{control['agent']} on task {control['task']}"
    if control["agent"] is not None:
        return str(control["agent"])
    return f"instance {control['instance']}" if control["instance"] is not None \
        else "every agent"


def control_line(control: Control | Json) -> str:
    """One control in words: what, whom, since when, why."""
    c = as_json(control)
    line = (f"{c['id']}: {scope(c)} {CONTROL_ENDINGS[c['kind']]} by {c['by']}"
            f" at {c['at']}")
    if c["reason"]:
        line += f" ({c['reason']})"
    if c["lifted_at"]:
        line += f"; lifted by {c['lifted_by']} at {c['lifted_at']}"
    return printable(line)


def journal_table(rows: Sequence[JournalEntry | Json], now: datetime | None = None, *,
                  width: int | None = None) -> str:
    """Journal rows: a row each. With ``now`` the times are relative; the task's number
    shows only when the rows are of several tasks. With ``width`` no line is longer: the
    move's number goes first, then the reason is cut to what is left (into a pipe, with
    no width, every reason whole: it says why)."""
    if not rows:
        return "no journal rows"
    entries = [as_json(r) for r in rows]
    several = len({r["number"] for r in entries if r["number"] is not None}) > 1
    headers = ["seq", *(["#"] if several else []), "at", "actor", "move", "no", "reason"]
    body = []
    for r in entries:
        move = f"{r['from_state'] or '-'} -> {r['to_state'] or '-'}"
        if r["waiting_on"]:
            move += ": " + WAITING_WORDS[r["waiting_on"]]
        body.append([str(r["seq"]), *([str(r["number"] or "")] if several else []),
                     ago(r["at"], now), r["actor"] or "", move, str(r["move"] or ""),
                     printable(r["reason"] or "")])
    if width is not None:
        fixed = _fixed(headers, body)
        if width - fixed < TITLE_MIN:  # the move's number goes before the reason shrinks
            gone = headers.index("no")
            headers.pop(gone)
            for row in body:
                row.pop(gone)
            fixed = _fixed(headers, body)
        for row in body:
            row[-1] = clip(row[-1], max(width - fixed, 4))
        return "\n".join(clip(line, width) for line in table(headers, body).split("\n"))
    return table(headers, body)


def _fixed(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """The width every column but the last takes, with its gap."""
    return sum(max(len(h), *(len(r[i]) for r in rows)) + 2 for i, h in enumerate(headers[:-1]))


def lease_text(lease: ClaimReceipt | Json, now: datetime) -> str:
    """A claim for a person: its task, holder, lease id, token and expiry (and, for a
    resume, the question with its answers)."""
    c = as_json(lease)
    text = (f"task {c['number']} {c['state']} by {c['holder']} on {c['instance']}\n"
            f"  lease_id       {c['lease_id']}\n  fencing_token  {c['fencing_token']}\n"
            f"  expires_at     {c['expires_at']} ({ago(c['expires_at'], now)})")
    if c["question"] is not None:  # a resume: what was asked, and what came back
        text += f"\n  question       {printable(c['question']['text'])}"
        text += "".join(f"\n  answer         {printable(a['text'])} ({a['by']})"
                        for a in c["question"]["answers"])
    return text
