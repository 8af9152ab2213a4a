"""MCP Tasks: a long tool call answered with a durable task (the extension
``io.modelcontextprotocol/tasks``, specification 2026-07-28).

The verb table marks the calls that may take long (``tasked``): a handoff followed to its
outcome, an ``await`` on an outcome or a verdict, a ``next`` waiting on an empty queue.
Such a call that asks to wait (its ``wait``) is answered

- at once, when what it waits for is already there (a claim, a closed task, a verdict);
- else, when the request itself declares the extension (in its own ``_meta``; a
  declaration on another request does not count), with a task: a watch
  (:mod:`hivelite.verbs.watches`) is committed first, and its id is the ``taskId``;
- else, to a client without the extension, as a plain result after a bounded wait, with
  the ``task_id`` to keep waiting on with the ``wait_task`` tool (:func:`follow_plainly`).

Where a task stands is read from the store each time it is asked for (``tasks/get``, the
``get_task`` and ``wait_task`` tools): a hivelite task still open is ``working`` (its
``statusMessage`` names it and says where it stands, ``task 3: routed to ana/coder, not
claimed yet``), one held for a decision that the caller, the owner, can make is
``input_required`` with a form; a closed task is ``completed`` with the
answer (``isError`` when it was rejected or its result sent back), or ``cancelled``. A
``next`` task tries to claim each time it is asked, and keeps the claim it got. Every
task request is checked against the caller and the token that made the task: another's
id is as unknown as a made-up one (``-32602``). Every answer about a task that follows a
hivelite task names it in its ``_meta`` too (:data:`NAMED`: its number and id), for a
client to show or link. ``docs/decisions.md`` has the mapping.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.subscriptions import ListenHandler, SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    CallToolRequestParams,
    RequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)
from mcp_types.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from ...core.caller import require_right
from ...core.clock import parse_ts
from ...core.errors import HiveliteError, NotFound
from ...core.models import Awaited
from ...core.protocol import TERMINAL
from ...store import WatchRow
from ...verbs.awaiting import LOOK_EVERY, follow, looked_until
from ...verbs.base import invalid
from ...verbs.claims import served_wait, wait_seconds
from ...verbs.table import BY_NAME, VERBS, Verb
from ..terminal import clip
from .mcp_calls import Acting, Where, plain, refusal_text

TASKS = "io.modelcontextprotocol/tasks"
"""The extension's identifier."""
SPEC = "2026-07-28"
"""The version of the MCP specification whose Tasks extension this follows."""
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
"""Where a request's ``_meta`` declares what its client supports."""
FORMS: dict[str, tuple[str, str]] = {"approve": ("approve", "deny"),
                                     "sign_off": ("sign_off", "decline")}
"""The owner's decisions a task asks for (``input_required``), each with its refusal: the
verbs an answer runs."""
NAMED = "io.hivelite/task"
"""The ``_meta`` key that names the hivelite task an MCP task follows: ``{"number": 3,
"id": "01J…"}`` (a ``next`` task once it has claimed one; none before)."""
OnAnswer = Callable[[object], None]
TITLE = 200
"""How much of a task's text a form quotes (the requester's words, shown to the owner)."""


class TaskParams(RequestParams):
    """``tasks/get`` and ``tasks/cancel``: the task named."""

    task_id: str


class UpdateParams(TaskParams):
    """``tasks/update``: answers to the task's outstanding input requests, by key."""

    input_responses: dict[str, Any]


def tasked(verbs: Sequence[Verb] = VERBS) -> dict[str, Verb]:
    """The tools that may answer with a task, by tool name (the table's ``tasked`` rows)."""
    return {str(v.tool): v for v in verbs if v.tasked and v.tool}


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request declares the extension (spec 2026-07-28: per request)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    meta: Mapping[str, Any] = ctx.meta or {}
    capabilities = meta.get(CAPABILITIES)
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and TASKS in extensions


# -- starting: the call itself ------------------------------------------------------

@dataclass(frozen=True)
class Begun:
    """A tasked call as it first stands: its answer now, and what a task would follow."""

    answer: Any
    """The answer as JSON (an ``await``'s, or a claim), or None while ``next`` found none."""
    settled: bool
    number: int | None
    asked: dict[str, Any]
    """What a watch keeps of the call: until and since, or ``next``'s filter."""
    is_error: bool = False


def _parsed(verb: Verb, given: dict[str, Any]) -> BaseModel:
    try:
        return verb.input.model_validate(given)
    except ValidationError as exc:
        raise invalid(exc, verb.name) from None


def _awaited(awaited: Awaited) -> Begun:
    asked: dict[str, Any] = {"until": awaited.until, "since": awaited.since}
    if awaited.until == "verdict" and awaited.since is None:
        asked["first"] = True  # before any submission: the verdict on the first to come
    return Begun(plain(awaited), awaited.settled, awaited.number, asked,
                 awaited.outcome in ("rejected", "sent_back"))


def begin(acting: Acting, verb: Verb, arguments: Mapping[str, Any],
          on_answer: OnAnswer | None = None) -> Begun:
    """Run a tasked call once, waiting for nothing: the handoff made, the ``await``
    looked at, the queue looked at (a claim when there is one)."""
    hive, caller = acting.hive, acting.caller
    given = {k: v for k, v in arguments.items() if v is not None}
    wait_seconds(given.pop("wait", 0))  # refused in the verbs' own words
    await_verb = BY_NAME["await"]
    if verb.name == "handoff":
        # following it needs the await's right: refused before anything is handed off
        require_right(caller, await_verb.name, await_verb.right)
        receipt = verb.call(hive, caller, None, _parsed(verb, given))
        try:
            return _awaited(await_verb.call(hive, caller, receipt.number,
                                            _parsed(await_verb, {"until": "outcome"})))
        except HiveliteError:  # handed off all the same: answered with its receipt
            return Begun(plain(receipt), True, receipt.number, {"until": "outcome"})
    if verb.name == "await":
        ref = given.pop("number", None)
        return _awaited(verb.call(hive, caller, ref, _parsed(verb, given)))
    if verb.name == "next":
        parsed = _parsed(verb, given)
        asked = parsed.model_dump(mode="json", exclude={"wait"})
        try:
            claim = verb.call(hive, caller, None, parsed)
        except NotFound as error:
            if error.reason != "queue_empty":
                raise
            return Begun(None, False, None, asked)
        if on_answer is not None:
            on_answer(claim)
        return Begun(plain(claim), True, claim.number, asked)
    raise LookupError(f"{verb.name} is not a tasked verb")


# -- where a task stands ------------------------------------------------------------

def tool_result(answer: Any, is_error: bool = False) -> dict[str, Any]:
    """An answer as the ``CallToolResult`` a task completes with: the JSON as text, and
    as structured content."""
    structured = answer if isinstance(answer, dict) else {"result": answer}
    return {"content": [{"type": "text", "text": json.dumps(answer, ensure_ascii=False)}],
            "structuredContent": structured, "isError": is_error}


def _task(row: WatchRow, status: str, message: str | None, updated: str,
          named: tuple[int, str] | None = None) -> dict[str, Any]:
    """A task as the extension's ``Task``; ``named``: the hivelite task it follows (its
    number and id), in ``_meta`` under :data:`NAMED`."""
    ttl = parse_ts(row.expires_at) - parse_ts(row.created_at)
    found: dict[str, Any] = {
        "taskId": row.id, "status": status, "createdAt": row.created_at,
        "lastUpdatedAt": max(row.updated_at, updated), "ttlMs": round(ttl.total_seconds() * 1000),
        "pollIntervalMs": row.poll_ms}
    if message:
        found["statusMessage"] = message
    if named is not None:
        found["_meta"] = {NAMED: {"number": named[0], "id": named[1]}}
    return found


def _named(awaited: Awaited) -> tuple[int, str]:
    return awaited.number, awaited.view.task.id


def _form(acting: Acting, awaited: Awaited) -> dict[str, Any]:
    """The owner's decision as an elicitation form, keyed by the decision and the move
    that brought the task to it (a key never names two requests)."""
    decision = awaited.decision
    assert decision is not None
    moved = next((e.seq for e in reversed(acting.hive.history(awaited.number))
                  if e.from_state != e.to_state), 0)
    choices = FORMS[decision]
    view = awaited.view
    title = json.dumps(clip(view.task.packet.task, TITLE), ensure_ascii=False)
    if decision == "approve":
        message = (f"Task {awaited.number}, handed off by {view.task.requester} to"
                   f" {view.task.assignee}, is held for you. Its task reads: {title}")
    else:
        message = (f"The result of task {awaited.number} awaits your decision. Its task"
                   f" reads: {title}")
    return {f"{decision}-{moved}": {"method": "elicitation/create", "params": {
        "mode": "form", "message": message, "requestedSchema": {
            "type": "object", "required": ["decision"], "properties": {
                "decision": {"type": "string", "title": "Decision", "enum": list(choices),
                             "description": f"{choices[0]} or {choices[1]}"},
                "reason": {"type": "string", "title": "Reason", "maxLength": 2000,
                           "description": "Why (needed to " + choices[1] + ")"}}}}}}


def _claim(acting: Acting, row: WatchRow, on_answer: OnAnswer | None
           ) -> tuple[WatchRow, str | None]:
    """A ``next`` task's claim: looked for once more, kept once made; and why none could
    be taken now, when the store refused (held, stopped, over budget: the task waits on).
    Its request id is the task's, so a claim made by a server that died before keeping it
    is answered again rather than made twice; one made as the task was cancelled is
    given back."""
    verb = BY_NAME["next"]
    parsed = _parsed(verb, {**json.loads(row.asked), "wait": 0})
    try:
        claim = verb.call(acting.hive, acting.caller, None, parsed, f"watch:{row.id}")
    except HiveliteError as error:
        if isinstance(error, NotFound) and error.reason == "queue_empty":
            return row, None
        return row, f"cannot claim now: {refusal_text(error)}"
    kept = acting.hive.settle_watch(acting.caller, row.id, token=acting.token,
                                    answer=json.dumps(plain(claim), ensure_ascii=False))
    if kept.answer is None:  # cancelled meanwhile: nobody waits for this claim
        release = BY_NAME["release"]
        with contextlib.suppress(HiveliteError):
            release.call(acting.hive, acting.caller, claim.number, _parsed(release, {
                "lease_id": claim.lease_id, "token": claim.fencing_token,
                "reason": "its MCP task was cancelled"}))
    elif on_answer is not None:
        on_answer(claim)
    return kept, None


def standing(acting: Acting, row: WatchRow, on_answer: OnAnswer | None = None
             ) -> dict[str, Any]:
    """The task as ``tasks/get`` answers it, read from the store now."""
    if row.verb == "next":
        refused = None
        if row.answer is None and row.cancelled_at is None:
            row, refused = _claim(acting, row, on_answer)
        if row.answer is not None:
            claim = json.loads(row.answer)
            return {**_task(row, "completed", f"task {claim['number']}: claimed",
                            row.updated_at, (claim["number"], claim["id"])),
                    "result": tool_result(claim)}
        if row.cancelled_at is not None:
            return _task(row, "cancelled", "stopped waiting for a ready task", row.updated_at)
        return _task(row, "working", refused or "waiting for a ready task", row.updated_at)
    asked = json.loads(row.asked)
    verb = BY_NAME["await"]
    require_right(acting.caller, verb.name, verb.right)
    assert row.number is not None  # a handoff's and an await's watch name their task
    awaited = follow(acting.hive, acting.caller, row.number,
                     until=asked.get("until", "outcome"), since=asked.get("since"),
                     first=bool(asked.get("first")))
    updated, named = awaited.view.task.updated_at, _named(awaited)
    said = f"task {awaited.number}: {awaited.status}"
    if row.cancelled_at is not None:  # ended: what happens to the work since is not its
        return _task(row, "cancelled", _stopped(acting, row, awaited), row.updated_at,
                     named)
    if awaited.settled and awaited.outcome == "cancelled":
        return _task(row, "cancelled", said, updated, named)
    if awaited.settled:
        return {**_task(row, "completed", said, updated, named),
                "result": tool_result(plain(awaited),
                                      awaited.outcome in ("rejected", "sent_back"))}
    if awaited.decision is not None:
        form = _form(acting, awaited)
        if not set(form) & _declined(row):
            return {**_task(row, "input_required", said, updated, named),
                    "inputRequests": form}
        return _task(row, "working", f"{said}; you declined to decide for now", updated,
                     named)
    return _task(row, "working", said, updated, named)


def _stopped(acting: Acting, row: WatchRow, awaited: Awaited) -> str:
    """A cancelled task's words: whether its ``tasks/cancel`` cancelled the hivelite task
    too, or only stopped following it (and then why the task itself goes on)."""
    n, status = awaited.number, awaited.status
    kept = _kept(row)
    if kept.get("cancelled"):
        return f"task {n} cancelled by this tasks/cancel, and no longer followed ({status})"
    if awaited.view.task.state in TERMINAL:
        return f"stopped following task {n}; it has closed since ({status})"
    if row.verb != "handoff":
        why = "a tasks/cancel of an await stops following, never cancels the task"
    elif str(kept.get("not_cancelled", "")).startswith("forbidden_right/"):
        why = (f"only the owner {acting.hive.owner!r} (or, in team mode, an agent of the"
               f" owner who requested it) may cancel it, and {acting.caller.name} may not")
    else:
        why = f"cancelling it was refused ({kept.get('not_cancelled', 'not tried')})"
    return f"stopped following task {n}; the task itself is still open ({status}): {why}"


def _kept(row: WatchRow) -> dict[str, Any]:
    """What a handoff's or an ``await``'s watch keeps: the forms declined, and what its
    cancel did to the hivelite task."""
    kept = json.loads(row.answer) if row.answer else {}
    return kept if isinstance(kept, dict) else {}


def _declined(row: WatchRow) -> set[str]:
    """The keys of the forms the caller declined (or cancelled): never asked again."""
    return set(_kept(row).get("declined", ()))


def decide(acting: Acting, row: WatchRow, responses: Mapping[str, Any],
           on_answer: OnAnswer | None = None) -> None:
    """The owner's answers to a task's forms, each its decision made as the verb it names
    (journaled as the owner's, as on every face). An answer to no outstanding request is
    ignored (the spec's rule); a form declined or cancelled is kept as such, and not asked
    again (the task is ``working`` until it moves on)."""
    outstanding = standing(acting, row, on_answer).get("inputRequests", {})
    for key, response in responses.items():
        if key not in outstanding or not isinstance(response, Mapping):
            continue
        if response.get("action") != "accept":
            declined = sorted(_declined(row) | {key})
            row = acting.hive.settle_watch(acting.caller, row.id, token=acting.token,
                                           answer=json.dumps({**_kept(row),
                                                              "declined": declined}))
            continue
        content = response.get("content")
        content = content if isinstance(content, Mapping) else {}
        choices = FORMS[key.rsplit("-", 1)[0]]
        decision = content.get("decision")
        if decision not in choices:
            raise MCPError(INVALID_PARAMS, f"{key}: decision is {choices[0]} or {choices[1]},"
                           f" not {decision!r}")
        verb = BY_NAME[str(decision)]
        reason = content.get("reason")
        try:
            verb.call(acting.hive, acting.caller, row.number,
                      _parsed(verb, {"reason": reason} if reason else {}))
        except HiveliteError as error:
            raise MCPError(INVALID_PARAMS, f"{key}: {refusal_text(error)}") from None


def cancel(acting: Acting, row: WatchRow) -> None:
    """Stop a task: a handoff it followed is cancelled when its caller may cancel it (the
    cancel verb's own rule); whatever else, the task stops following (the spec's
    cooperative cancel: an ``await`` never cancels the work it waited on), and its status
    message says which it did, and why the hivelite task goes on when it does. A task
    that has ended already is left as it ended."""
    if row.verb == "next":  # looked at, it would claim: it ended if it has its claim
        if row.answer is None:
            acting.hive.settle_watch(acting.caller, row.id, token=acting.token,
                                     cancelled=True)
        return
    if standing(acting, row)["status"] not in OPEN:
        return
    kept = _kept(row)
    if row.verb == "handoff" and row.number is not None:
        verb = BY_NAME["cancel"]
        try:
            verb.call(acting.hive, acting.caller, row.number,
                      _parsed(verb, {"reason": "cancelled by its MCP task"}))
            kept["cancelled"] = True
        except HiveliteError as error:  # not the caller's to cancel: it stops following
            kept["not_cancelled"] = refusal_text(error)
    acting.hive.settle_watch(acting.caller, row.id, token=acting.token, cancelled=True,
                             answer=json.dumps(kept) if kept else None)


def waited(acting: Acting, row: WatchRow, wait: float,
           on_answer: OnAnswer | None = None) -> dict[str, Any]:
    """:func:`standing`, waiting up to ``wait`` seconds for the task to leave ``working``
    (the ``wait_task`` tool of a client without the extension)."""
    return looked_until(acting.hive.store, wait, standing(acting, row, on_answer),
                        lambda: standing(acting, row, on_answer),
                        lambda found: found["status"] != "working")


def follow_plainly(acting: Acting, verb: Verb, arguments: Mapping[str, Any],
                   on_answer: OnAnswer | None = None) -> Any:
    """A tasked call of a client without the extension: run it, wait for it at most
    ``SERVED_WAIT`` seconds, and answer where it stands; still open, the answer carries
    the ``task_id`` of a task kept for it, to wait on with ``wait_task``."""
    wait = served_wait(arguments.get("wait") or 0)
    begun = begin(acting, verb, arguments, on_answer)
    if begun.settled or begun.number is None:
        return begun.answer
    try:  # what was begun stays done: from here the answer is never a refusal
        seen = follow(acting.hive, acting.caller, begun.number,
                      until=begun.asked["until"], since=begun.asked["since"], wait=wait,
                      first=bool(begun.asked.get("first")))
        if seen.settled:
            return plain(seen)
        row = acting.hive.watch(acting.caller, verb.name, number=begun.number,
                                asked=begun.asked, token=acting.token)
    except HiveliteError:
        return begun.answer
    return {**plain(seen), "task_id": row.id, "poll_interval_ms": row.poll_ms,
            "to_wait": "not settled yet: call wait_task with this task_id to keep waiting"}


# -- notifications: a listen stream of task states ---------------------------------

class _Frame(BaseModel):
    """A notification as the wire has it: the SDK's typed ones keep only the fields of
    their version's vocabulary, which has no ``taskIds`` and no ``notifications/tasks``."""

    method: str
    params: dict[str, Any]


def _states(acting: Acting, rows: Sequence[WatchRow], on_answer: OnAnswer | None
            ) -> dict[str, dict[str, Any]]:
    """Each watch's task as ``tasks/get`` would answer it now (``rows`` as just read:
    a ``next`` task's claim is kept in its row)."""
    return {row.id: standing(acting, row, on_answer) for row in rows}


class TaskListen(ListenHandler):
    """``subscriptions/listen`` with ``notifications.taskIds``: after the acknowledgement
    (naming the tasks the caller may follow: its own, alive), each task's state as
    ``tasks/get`` answers it, then again each time it changes, until every one of them
    ended (the stream then ends gracefully). A change is looked for when the journal's
    last seq moved (read at most every :data:`LOOK_EVERY` seconds), so a quiet store costs
    one small read a second. A listen without ``taskIds`` is the SDK's."""

    def __init__(self, bus: SubscriptionBus, who: Where,
                 on_answer: OnAnswer | None = None) -> None:
        super().__init__(bus)
        self.who = who
        self.on_answer = on_answer

    async def __call__(self, ctx: ServerRequestContext[Any, Any],
                       params: SubscriptionsListenRequestParams) -> SubscriptionsListenResult:
        asked = (ctx.params or {}).get("notifications")
        ids = asked.get("taskIds") if isinstance(asked, Mapping) else None
        if not ids:
            return await super().__call__(ctx, params)
        if not declared(ctx):
            raise MCPError(MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client"
                           f" capability: the {TASKS} extension",
                           {"requiredCapabilities": {"extensions": {TASKS: {}}}})
        if ctx.request_id is None or not isinstance(ids, list):
            raise MCPError(INVALID_PARAMS, "notifications.taskIds is a list of task ids")
        acting = self.who()

        def mine() -> list[WatchRow]:
            rows = []
            for task_id in dict.fromkeys(i for i in ids if isinstance(i, str)):
                with contextlib.suppress(NotFound):
                    rows.append(acting.hive.watched(acting.caller, task_id,
                                                    token=acting.token))
            return rows

        rows = await anyio.to_thread.run_sync(mine)
        meta = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        await ctx.session.send_notification(cast(Any, _Frame(
            method="notifications/subscriptions/acknowledged",
            params={"notifications": {"taskIds": [r.id for r in rows]}, "_meta": meta})),
            related_request_id=ctx.request_id)
        sent: dict[str, dict[str, Any]] = {}
        seq = -1
        while rows:
            now, rows = await anyio.to_thread.run_sync(_looked, acting, rows)
            if rows and now != seq:
                seq = now
                states = await anyio.to_thread.run_sync(_states, acting, rows,
                                                        self.on_answer)
                for task_id, state in states.items():
                    if sent.get(task_id) != state:
                        sent[task_id] = state
                        await ctx.session.send_notification(cast(Any, _Frame(
                            method="notifications/tasks", params={
                                **state, "_meta": {**state.get("_meta", {}), **meta}})),
                            related_request_id=ctx.request_id)
                rows = [r for r in rows if r.id in states and states[r.id]["status"] in OPEN]
            if rows:
                await anyio.sleep(LOOK_EVERY)
        return SubscriptionsListenResult(_meta=meta)


OPEN = frozenset({"working", "input_required"})
"""An MCP task's states before it ends."""


def _looked(acting: Acting, rows: Sequence[WatchRow]) -> tuple[int, list[WatchRow]]:
    """The journal's last seq, and the watches still the caller's (its token not revoked
    or run out, the watch not expired): a stream ends with the token that opened it."""
    with acting.hive.store.read() as reader:
        seq = reader.last_seq()
    alive = []
    for row in rows:
        with contextlib.suppress(NotFound):
            alive.append(acting.hive.watched(acting.caller, row.id, token=acting.token))
    return seq, alive


# -- the extension ------------------------------------------------------------------

class TasksExtension(Extension):
    """The Tasks extension over the verb table's tasked tools: ``tasks/get``,
    ``tasks/update`` and ``tasks/cancel``, and the interceptor that answers a long call
    with a task."""

    identifier = TASKS

    def __init__(self, who: Where, verbs: Sequence[Verb] = VERBS,
                 on_answer: OnAnswer | None = None) -> None:
        self.who = who
        self.long = tasked(verbs)
        self.on_answer = on_answer

    def methods(self) -> Sequence[MethodBinding]:
        versions = frozenset({SPEC})
        return (MethodBinding("tasks/get", TaskParams, self.get, versions),
                MethodBinding("tasks/update", UpdateParams, self.update, versions),
                MethodBinding("tasks/cancel", TaskParams, self.cancel, versions))

    async def intercept_tool_call(self, params: CallToolRequestParams,
                                  ctx: ServerRequestContext[Any, Any],
                                  call_next: CallNext) -> HandlerResult:
        verb = self.long.get(params.name)
        arguments = dict(params.arguments or {})
        if verb is None or not arguments.get("wait") or not declared(ctx):
            return await call_next(ctx)
        acting = self.who()
        try:
            begun = await anyio.to_thread.run_sync(begin, acting, verb, arguments,
                                                   self.on_answer)
        except HiveliteError as error:
            return {"resultType": "complete", "isError": True,
                    "content": [{"type": "text", "text": refusal_text(error)}]}
        if begun.settled:
            return {"resultType": "complete", **tool_result(begun.answer, begun.is_error)}
        try:
            row = await anyio.to_thread.run_sync(lambda: acting.hive.watch(
                acting.caller, verb.name, number=begun.number, asked=begun.asked,
                token=acting.token))
        except HiveliteError:  # what was begun stays done: answered as it stands
            return {"resultType": "complete", **tool_result(begun.answer)}
        if begun.number is None:
            return {"resultType": "task", **_task(row, "working", "waiting for a ready task",
                                                  row.updated_at)}
        view = begun.answer.get("view") or {}
        named = (begun.number, view.get("task", {}).get("id")) if view else None
        message = f"task {begun.number}: {begun.answer.get('status')}"
        return {"resultType": "task", **_task(row, "working", message, row.updated_at,
                                              named)}

    async def _found(self, ctx: ServerRequestContext[Any, Any],
                     params: TaskParams) -> tuple[Acting, WatchRow]:
        """The caller's task named by ``params``, once the request declared the extension
        and, over HTTP, named the task in ``Mcp-Name``; else the spec's error."""
        if not declared(ctx):
            raise MCPError(MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client"
                           f" capability: the {TASKS} extension",
                           {"requiredCapabilities": {"extensions": {TASKS: {}}}})
        headers = getattr(ctx.request, "headers", None)
        if headers is not None and headers.get("mcp-name") != params.task_id:
            raise MCPError(HEADER_MISMATCH, "Mcp-Name must be the request's taskId")
        acting = self.who()
        try:
            row = await anyio.to_thread.run_sync(
                lambda: acting.hive.watched(acting.caller, params.task_id,
                                            token=acting.token))
        except NotFound:
            raise MCPError(INVALID_PARAMS, "Failed to retrieve task: Task not found (or"
                           " expired, or another caller's)") from None
        return acting, row

    async def get(self, ctx: ServerRequestContext[Any, Any],
                  params: TaskParams) -> HandlerResult:
        acting, row = await self._found(ctx, params)
        found: dict[str, Any] = await _answer(lambda: standing(acting, row, self.on_answer))
        return found

    async def update(self, ctx: ServerRequestContext[Any, Any],
                     params: UpdateParams) -> HandlerResult:
        acting, row = await self._found(ctx, params)
        await _answer(lambda: decide(acting, row, params.input_responses, self.on_answer))
        return {}

    async def cancel(self, ctx: ServerRequestContext[Any, Any],
                     params: TaskParams) -> HandlerResult:
        acting, row = await self._found(ctx, params)
        await _answer(lambda: cancel(acting, row))
        return {}


async def _answer(work: Callable[[], Any]) -> Any:
    """``work`` in a worker thread (the store is read and written there); a refusal it
    meets is the request's error."""
    try:
        return await anyio.to_thread.run_sync(work)
    except HiveliteError as error:
        raise MCPError(INVALID_PARAMS, refusal_text(error)) from None


__all__ = ["NAMED", "SPEC", "TASKS", "TaskListen", "TasksExtension", "begin", "follow_plainly",
           "standing", "tasked", "waited"]
