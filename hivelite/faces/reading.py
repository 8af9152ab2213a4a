"""The read verbs (``list``, ``show``, ``history``, ``lease``) answered from the store's
rows as the JSON their models dump, without the models, the plugins or the write path: a
read of a store file imports click, the store and the renderer, nothing more (issue 32).

Each answer is exactly what ``Hive`` answers, dumped (``model_dump(mode="json")``): a
test holds the two to the same bytes on every kind of task. Whatever this module cannot
answer so, it leaves to the library (each function returns None, and the face asks
``Hive``): a store that is not a plain file of ours (a URL, no owner yet, tampered or
damaged), a claim whose lease ran out (opening the store returns it to
``routed``, a write), a row unlike what hivelite writes, a task that is not there, an
input the library refuses: the library then answers, or refuses, in its own words.

A read loads no plugin at all (issue 46): plugins decide writes, never what a read shows,
so a store is read the same whatever is installed, enabled or in a plugins folder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.clock import format_ts
from ..core.protocol import PRIORITIES, SORTS, TERMINAL, State, WaitingOn, lifecycle

if TYPE_CHECKING:
    from ..store.rows import ControlRow, JournalRow, TaskRow, ViewRow
    from ..store.sqlite import SqliteStore

Json = dict[str, Any]

STAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")
"""A time as hivelite writes it (RFC 3339, UTC, milliseconds); any other is left to the
library's own check."""
STATES = frozenset(s.value for s in State)
WAITING = frozenset(w.value for w in WaitingOn)
PACKET: Json = {"task": None, "deliverable_type": None, "acceptance_criteria": None,
          "context": "", "files": [], "depends_on": []}
"""A packet's fields in its model's order, with the defaults of those that have one
(None: required)."""
RESULT = ("summary", "evidence", "provenance", "returned_by", "returned_at")
EVIDENCE = ("kind", "summary", "url", "content")
CHECKPOINT: Json = {"progress": None, "decisions": [], "files_touched": [], "next_steps": [],
              "open_questions": []}
DRAFT: Json = {"kind": None, "content": None, "title": None}
CONTROL_KINDS = ("hold", "veto", "stop")
MAX_SEARCH = 200
"""The longest ``--search`` answered here (the library's own limit is checked there)."""
ROLE = re.compile(r"[a-z][a-z0-9-]{0,63}")
SLUG_MAX = 39
AGENT = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*/[a-z0-9]+(?:-[a-z0-9]+)*")
INSTANCE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
"""What the library's models take as an agent's and an instance's name (a name they
refuse is left to them to refuse)."""


class Unlike(Exception):
    """A row unlike what hivelite writes: the library reads it, and says what is wrong."""


def _need(ok: bool) -> None:
    if not ok:
        raise Unlike


def _text(value: object, *, none: bool = False) -> Any:
    _need(isinstance(value, str) or (none and value is None))
    return value


def _int(value: object, *, none: bool = False) -> Any:
    _need((type(value) is int) or (none and value is None))
    return value


def _stamp(value: object, *, none: bool = False) -> Any:
    _need((isinstance(value, str) and STAMP.fullmatch(value) is not None)
          or (none and value is None))
    return value


def _one_of(value: object, allowed: Sequence[str] | frozenset[str], *,
            none: bool = False) -> Any:
    _need((isinstance(value, str) and value in allowed) or (none and value is None))
    return value


def _fields(data: object, fields: dict[str, Any]) -> Json:
    """A stored object with exactly its model's fields, in their order, defaults filled."""
    _need(isinstance(data, dict) and set(data) <= set(fields))
    assert isinstance(data, dict)
    out = {}
    for name, default in fields.items():
        if name in data:
            out[name] = data[name]
        else:
            _need(default is not None)
            out[name] = default
    return out


# -- the store, opened to read ---------------------------------------------------------

@contextmanager
def opened(db: str, clock: Callable[[], datetime],
           plugins_dir: str | None = None) -> Iterator[SqliteStore | None]:
    """The store file at ``db`` to read, or None when the library must open it (see the
    module's words); a failure to open is the library's to report, in its words."""
    from ..store.urls import is_url

    if is_url(db):
        yield None
        return
    try:
        from ..store.sqlite import SqliteStore
        from ..verbs.settings import load_settings

        load_settings(Path(db))  # a settings file the library would refuse
        store = SqliteStore(Path(db), create=False)
    except Exception:
        yield None
        return
    try:
        if store.tampered is not None or store.damaged is not None:
            yield None
            return
        with store.read() as reader:
            owner = reader.meta("owner")
            overdue = reader.overdue(format_ts(clock()))
        yield None if owner is None or overdue else store
    finally:
        store.close()


# -- the answers -------------------------------------------------------------------------

def page(store: SqliteStore, now: datetime, *, states: Sequence[str], assignee: str | None,
         requester: str | None, project: str | None, ready: bool, blocked: bool,
         labels: Sequence[str], priorities: Sequence[str], search: str | None, sort: str,
         limit: int, cursor: int | None, role: str | None) -> Json | None:
    """``Hive.list``'s page as JSON, or None."""
    from ..store.rows import ListFilter

    if (role is not None and not ROLE.fullmatch(role)) or sort not in SORTS or any(
            p not in PRIORITIES for p in priorities) or any(s not in STATES for s in states) \
            or (search is not None and len(search) > MAX_SEARCH):
        return None
    where = ListFilter(states=tuple(states), assignee=assignee, requester=requester,
                       project=project, ready=ready, blocked=blocked, labels=tuple(labels),
                       priorities=tuple(priorities), sort=sort,
                       search=(search.strip().lower() or None) if search is not None else None,
                       role=role)
    at = format_ts(now)
    with store.read() as reader:
        rows = reader.views(where, after=cursor, limit=limit + 1)
        controls = reader.controls()
    try:
        items = [view(row, at, bearing_on(controls, row.task)) for row in rows[:limit]]
    except (Unlike, ValueError, TypeError, KeyError, AttributeError):
        return None  # a row the library reports as damaged, in its words
    next_cursor = None
    if len(rows) > limit:
        next_cursor = rows[limit - 1].task.number if sort == "age" else (cursor or 0) + limit
    return {"items": items, "next_cursor": next_cursor}


def task(store: SqliteStore, now: datetime, ref: str) -> Json | None:
    """``Hive.get``'s view as JSON, or None."""
    with store.read() as reader:
        found = reader.view(ref)
        controls = reader.controls()
    if found is None:
        return None
    try:
        return view(found, format_ts(now), bearing_on(controls, found.task))
    except (Unlike, ValueError, TypeError, KeyError, AttributeError):
        return None


def history(store: SqliteStore, ref: str) -> list[Json] | None:
    """``Hive.history``'s rows as JSON, or None."""
    with store.read() as reader:
        row = reader.task(ref)
        if row is None:
            return None
        rows = reader.journal(row.number)
    try:
        return [journal_entry(r) for r in rows]
    except Unlike:
        return None


def lease(store: SqliteStore, now: datetime, ref: str, agent: str, instance: str,
          session: str | None) -> Json | None:
    """``Hive.lease``'s answer as JSON for the live claim's holder, named as its claim
    names it, or None (anyone else, a name the library would refuse, no live claim: the
    library refuses it, in its words)."""
    instance = normal_instance(instance)
    if not AGENT.fullmatch(agent) or any(len(half) > SLUG_MAX for half in agent.split("/")) \
            or not INSTANCE.fullmatch(instance) or (
                session is not None and not INSTANCE.fullmatch(normal_instance(session))):
        return None
    at = format_ts(now)
    with store.read() as reader:
        row = reader.task(ref)
    if row is None or row.state not in STATES or State(row.state) in TERMINAL \
            or row.lease_id is None or row.lease_expires is None or row.lease_expires <= at \
            or agent != row.lease_holder \
            or instance.casefold() != (row.lease_instance or "").casefold():
        return None
    return {"number": row.number, "id": row.id, "state": row.state, "waiting_on": None,
            "at": row.updated_at, "seq": None, "lease_id": row.lease_id,
            "fencing_token": row.lease_token, "holder": row.lease_holder,
            "instance": row.lease_instance or "", "session": row.lease_session,
            "expires_at": row.lease_expires, "question": None}


# -- a task's view, as TaskView dumps it -------------------------------------------------

def normal_instance(name: str) -> str:
    """An instance name as every comparison sees it (``core.models.normal_instance``)."""
    return name.strip(" ").lower().rstrip(".")


def bearing_on(controls: Sequence[ControlRow], row: TaskRow) -> list[Json]:
    """The live controls a task view shows (``verbs.authority.bearing_on``)."""
    instance = normal_instance(row.lease_instance) if row.lease_instance else None
    return [control(c) for c in controls if c.task == row.number or (
        c.kind != "veto" and (c.agent == row.assignee
                              or (c.instance is not None and c.instance == instance)
                              or (c.agent is None and c.instance is None)))]


def control(row: ControlRow) -> Json:
    return {"id": _int(row.id), "kind": _one_of(row.kind, CONTROL_KINDS),
            "agent": _text(row.agent, none=True), "instance": _text(row.instance, none=True),
            "task": _int(row.task, none=True), "at": _stamp(row.at), "by": _text(row.by),
            "reason": _text(row.reason, none=True),
            "lifted_at": _stamp(row.lifted_at, none=True),
            "lifted_by": _text(row.lifted_by, none=True)}


def evidence(item: object) -> Json:
    data = _fields(item, dict.fromkeys(EVIDENCE, "")) if isinstance(item, dict) else None
    _need(data is not None)
    assert isinstance(item, dict)
    _need(all(k in item for k in ("kind", "summary")))
    return {k: item[k] for k in EVIDENCE if item.get(k) is not None}


def seed_task(row: TaskRow, bodies: Any) -> Json:
    """The seed object (``views.task_of``)."""
    result = None
    if bodies.result:
        data = json.loads(bodies.result)
        _need(isinstance(data, dict) and set(data) == set(RESULT))
        result = {k: data[k] for k in RESULT}
        _need(isinstance(result["evidence"], list))
        result["evidence"] = [evidence(e) for e in result["evidence"]]
    checkpoint = (_fields(json.loads(bodies.checkpoint), CHECKPOINT)
                  if bodies.checkpoint else None)
    return {"id": row.id, "project": row.project, "state": _one_of(row.state, STATES),
            "waiting_on": _one_of(row.waiting_on or None, WAITING, none=True),
            "requester": row.requester, "assignee": row.assignee,
            "packet": _fields(json.loads(bodies.packet), PACKET), "result": result,
            "latest_checkpoint": checkpoint, "created_at": row.created_at,
            "updated_at": row.updated_at}


def _evidence_views(result: Json | None, receipts: str | None) -> list[Json]:
    if result is None:
        return []
    kept = json.loads(receipts) if receipts else []
    out = []
    for index, item in enumerate(result["evidence"]):
        receipt = kept[index] if index < len(kept) and isinstance(kept[index], dict) else None
        out.append({
            "kind": item["kind"], "summary": item["summary"], "url": item.get("url"),
            "content": item.get("content"),
            "verified": bool(receipt and receipt.get("verified") is True),
            "receipt": {"digest": str(receipt.get("digest", "")),
                        "signer": receipt.get("signer"), "why": receipt.get("why")}
            if receipt else None})
    return out


def _question(rows: Sequence[JournalRow]) -> Json | None:
    if not rows:
        return None
    asked, *answered = rows
    return {"text": asked.reason or "",
            "on": _one_of(asked.waiting_on, ("human", "agent"), none=True),
            "asked_by": asked.actor or "", "at": asked.at,
            "answers": [{"text": str((a.detail or {}).get("text", "")), "by": a.actor or "",
                         "at": a.at} for a in answered]}


def _decision(row: JournalRow | None) -> Json | None:
    if row is None:
        return None
    detail = row.detail or {}
    accepted = row.to_state == State.completed.value
    by_person = detail.get("decided_by") == "person"
    return {"outcome": "accepted" if accepted else "declined",
            "decided_by": "person" if by_person else "threshold" if accepted else "verifier",
            "by": row.actor or "", "at": row.at, "reason": row.reason, "seq": row.seq}


def view(found: ViewRow, now: str, controls: list[Json]) -> Json:
    """A task's full view (``views.view_of``), as ``TaskView.model_dump(mode="json")``."""
    row, meta = found.task, found.meta
    task = seed_task(row, found.bodies)
    claim = None
    if row.lease_id is not None:
        expires = row.lease_expires or ""
        claim = {"holder": row.lease_holder or "", "instance": row.lease_instance or "",
                 "session": row.lease_session, "lease_id": None, "fencing_token": None,
                 "expires_at": expires, "expired": expires <= now}
    confirmations = [
        {"reviewer": c.reviewer, "instance": c.instance, "session": c.session,
         "verdict": _one_of(c.verdict, ("accept", "reject")), "reason": c.reason,
         "at": c.at, "counted": c.counted, "why": c.why}
        for c in found.confirmations]
    updates: list[Json] = [{"at": u.at, "actor": u.actor, "summary": u.summary, "tokens": u.tokens,
                "usd_micros": u.usd_micros, "kind": "progress"}
               for u in reversed(found.updates)]
    if confirmations:
        updates += [{"at": c["at"], "actor": c["reviewer"],
                     "summary": c["verdict"] + (f": {c['reason']}" if c["reason"] else ""),
                     "tokens": None, "usd_micros": None, "kind": "verdict"}
                    for c in confirmations]
        updates.sort(key=lambda u: str(u["at"]))
    depends = [{"number": d.number, "id": d.id, "state": _one_of(d.state, STATES)}
               for d in found.dependencies]
    state = State(task["state"])
    labels = json.loads(row.labels)
    _need(isinstance(labels, list) and all(isinstance(v, str) for v in labels))
    draft = None
    if found.draft:
        draft = {**_fields(json.loads(found.draft), DRAFT), "seq": found.draft_seq}
    commit = meta.merge_commit if meta else None
    return {
        "number": row.number, "task": task,
        "lifecycle": lifecycle(state, WaitingOn(task["waiting_on"]) if task["waiting_on"]
                               else None, exhausted=row.exhausted and state is State.routed),
        "priority": _one_of(row.priority, PRIORITIES), "labels": labels, "role": row.role,
        "fields_version": row.fields_version, "depends_on": depends,
        "blocked_by": [d["number"] for d in depends if d["state"] != State.completed.value]
        if state not in TERMINAL else [],
        "attempts": row.attempts, "max_attempts": row.attempt_limit, "claim": claim,
        "outcome": _one_of(meta.outcome, ("completed", "failed")) if meta else None,
        "threshold": meta.threshold if meta else None, "confirmations": confirmations,
        "updates": updates,
        "usage": {"tokens": found.tokens, "usd_micros": found.usd_micros},
        "merge": {"commit": commit, "by": meta.merged_by or "",
                  "evidence": {"kind": "commit", "summary": f"merged as {commit}",
                               "content": commit}} if meta and commit else None,
        "draft": draft,
        "evidence": _evidence_views(task["result"], found.receipts),
        "decision": _decision(found.decision),
        "last_reason": row.reason,
        "origin": "agent" if found.created_by and "/" in found.created_by else "person",
        "controls": controls,
        "question": _question(found.question),
    }


def journal_entry(row: JournalRow) -> Json:
    """One journal row as ``JournalEntry`` dumps it (its checks are the library's: a row
    unlike what hivelite writes is left to it)."""
    return {"seq": _int(row.seq), "task": _text(row.task, none=True),
            "number": _int(row.number, none=True), "at": _stamp(row.at),
            "actor": _text(row.actor, none=True),
            "from_state": _one_of(row.from_state, STATES, none=True),
            "to_state": _one_of(row.to_state, STATES, none=True),
            "waiting_on": _one_of(row.waiting_on, WAITING, none=True),
            "move": _int(row.move, none=True), "reason": _text(row.reason, none=True),
            "detail": _detail(row.detail)}


def _detail(detail: object) -> Any:
    _need(detail is None or (isinstance(detail, dict) and all(isinstance(k, str)
                                                             for k in detail)))
    return detail
