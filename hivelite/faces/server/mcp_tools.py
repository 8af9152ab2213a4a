"""The MCP face: the verb table's tools for any MCP-speaking agent (the ``mcp`` SDK's server).

The tools are registered in one loop over the verb table: a tool's name, description and
input schema are its verb's, its answer is the verb's answer in full (every task object
keeps its null keys, so it validates against seed 000's schema). An agent's token gets
the agent's verbs, an owner's token the owner's. Each call acts as the caller the token
proved, never as anyone a tool's arguments name; a refusal comes back as an MCP tool error
reading ``code/reason: message (task N)``, so the model sees why and what to do. What is
MCP's own: the instructions that teach the loop, a prompt to work the queue, and each
task as a resource.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp_types import SubscriptionsListenRequestParams
from pydantic import ValidationError

from ... import __version__
from ...core.errors import HiveliteError, InvalidInput
from ...core.ids import number_of
from ...core.models import Page
from ...core.protocol import SERVED_WAIT, Who
from ...verbs.base import invalid
from ...verbs.claims import served_wait
from ...verbs.table import VERBS, Verb
from ..terminal import clip
from .mcp_calls import Acting, Where, plain, refusal_text
from .mcp_tasks import TaskListen, TasksExtension, follow_plainly, waited

Kind = Literal["agent", "owner"]

NUMBER = {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "minLength": 1}],
          "description": "The task's number (or its id).", "examples": [3]}
AGENT_INSTRUCTIONS = f"""\
hivelite keeps tasks, their claims and their results. Your token says who you are.

Working a task:
1. next_task claims your most pressing ready task and answers its claim: lease_id,
   fencing_token and expires_at. Keep lease_id and fencing_token: every write on the task
   needs both. (claim takes one task by number; list_tasks with mine=true, ready=true
   shows what you could take.) With wait (seconds, at most {SERVED_WAIT}) it waits for a
   task when none is ready yet.
2. Keep the lease alive: renew before expires_at (a lease lasts 5-15 minutes). A lease
   that ran out is refused as stale_claim: the task is routed again, and claim takes it
   back with a new token.
3. Report: checkpoint records where the work stands (the first one starts the work);
   update sends one line of progress with the tokens and money used.
4. Stuck on a question? pause (on human or agent) asks it in reason; your claim ends.
   When history shows the answer, resume takes the task back.
5. Finish: submit_result with a summary and 1-20 pieces of evidence. Or release to give
   the task back.

Reviewing: list_tasks with state=["approval"] and mine=false shows results awaiting a
verdict. verify accepts one, or rejects it with a reason. Your verdict counts only if you
are independent of the result: not its worker, and not on the machine (instance) that
claimed it.

Filing work: handoff files a task for another agent (you are its requester)."""
OWNER_INSTRUCTIONS = """\
hivelite keeps tasks, their claims and their results; this token is the store's owner.

list_tasks with state=["waiting"] shows handoffs the gate held for you: approve or deny
each. state=["approval"] shows results awaiting a decision: sign_off or decline (with a
reason). cancel withdraws an open task; release ends an agent's claim; handoff files work;
show_task and history say where a task stands and why."""


def offers(verb: Verb, kind: Kind) -> bool:
    """Whether a token of ``kind`` sees ``verb``: the owner's verbs for the owner, the
    agents' for an agent."""
    if kind == "owner":
        return Who.owner in verb.who or Who.anyone in verb.who
    return any(w is not Who.owner for w in verb.who)


def _refusal(error: HiveliteError) -> ToolError:
    return ToolError(refusal_text(error))


COMPACT = {"type": "boolean", "default": True, "description": "One short row a task"
           " (number, title, state, who, priority, labels, the claim's holder and expiry,"
           " the question it waits on)"
           " instead of the whole task: false for every field.", "examples": [True]}
FOLLOW = {"type": "number", "minimum": 0, "maximum": SERVED_WAIT, "default": 0,
          "description": "Follow the task once handed off, until it closes: a client with"
          " MCP's Tasks extension gets a task to poll; another waits up to this many"
          f" seconds (at most {SERVED_WAIT}), then gets where it stands and a task_id to"
          " keep waiting with wait_task.", "examples": [30]}
"""A tasked verb's ``wait`` where its input has none (the handoff's): the MCP face's own."""
LIST_PAGE = 20
"""A listing's page over MCP, unless asked for more: a model's context is the medium's
budget."""
TITLE = 80
"""How much of a task's text a compact row keeps."""


def _schema(verb: Verb) -> dict[str, Any]:
    """The tool's input schema: the task's number, then the verb's input model's (and,
    for the listing, MCP's own compact mode and smaller page)."""
    schema = verb.input.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    if verb.on_task:
        schema["properties"] = {"number": NUMBER, **schema.get("properties", {})}
        schema["required"] = ["number", *schema.get("required", [])]
    schema.setdefault("properties", {})
    if verb.tasked and "wait" not in schema["properties"]:
        schema["properties"]["wait"] = FOLLOW
    if verb.name == "list":
        schema["properties"]["compact"] = COMPACT
        schema["properties"]["limit"] = {**schema["properties"]["limit"],
                                         "default": LIST_PAGE}
    return schema


def compact(page: Page) -> dict[str, Any]:
    """A page as short rows: what an agent needs to pick a task, about a tenth of each."""
    rows = []
    for view in page.items:
        claim = view.claim
        row = {
            "number": view.number, "id": view.task.id,
            "title": clip(view.task.packet.task, TITLE), "state": view.task.state.value,
            "waiting_on": view.task.waiting_on.value if view.task.waiting_on else None,
            "project": view.task.project, "requester": view.task.requester,
            "assignee": view.task.assignee, "priority": view.priority,
            "labels": view.labels,
            "holder": claim.holder if claim is not None and not claim.expired else None,
            "expires_at": claim.expires_at if claim is not None and not claim.expired
            else None, "updated_at": view.task.updated_at}
        if view.question is not None:  # only when it asks: a row stays short
            row["question"] = {"text": clip(view.question.text, TITLE), "on": view.question.on,
                               "answers": len(view.question.answers)}
        rows.append(row)
    return {"items": rows, "next_cursor": page.next_cursor,
            "damaged": [d.model_dump(mode="json") for d in page.damaged]}


def _tool(verb: Verb, who: Where, on_answer: Callable[[object], None] | None) -> Tool:
    """One verb as a tool. Its arguments pass to the verb's input model as sent, so a bad
    one is refused in the verb's own words, as on every face. A tasked verb asked to wait
    (but ``next``, whose wait is its own) follows what it started
    (:func:`.mcp_tasks.follow_plainly`); a client with the Tasks extension never gets
    here for it (the extension answers it with a task)."""
    fields = (["number"] if verb.on_task else []) + list(verb.input.model_fields)
    if verb.tasked and "wait" not in fields:
        fields.append("wait")

    def call(**arguments: Any) -> Any:
        given = {k: v for k, v in arguments.items() if v is not None}
        acting = who()
        hive, caller = acting.hive, acting.caller
        if verb.tasked and verb.name != "next" and given.get("wait"):
            try:
                return follow_plainly(acting, verb, given, on_answer)
            except HiveliteError as error:
                raise _refusal(error.about(given.get("number"))) from None
        if "wait" not in verb.input.model_fields:  # the handoff's: asked for no wait
            given.pop("wait", None)
        ref = given.pop("number", None)
        short = given.pop("compact", True) is not False
        if verb.name == "list":
            given.setdefault("limit", LIST_PAGE)
        try:
            if verb.on_task and ref is None:
                raise InvalidInput("number_required", f"{verb.tool} needs the task's"
                                   " number", field="number")
            try:
                parsed = verb.input.model_validate(given)
            except ValidationError as exc:
                raise invalid(exc, verb.name) from None
            if verb.waits:  # a tool call holds a server thread: at most SERVED_WAIT
                parsed = parsed.model_copy(update={"wait": served_wait(getattr(parsed, "wait", 0))})
            answer = verb.call(hive, caller, ref, parsed)
        except HiveliteError as error:
            raise _refusal(error.about(ref)) from None
        if on_answer is not None:
            on_answer(answer)
        if verb.many:
            return {"entries": plain(list(answer))}
        if isinstance(answer, Page) and short:
            return compact(answer)
        return plain(answer)

    names = [*fields, "compact"] if verb.name == "list" else fields
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                           annotation=Any) for name in names],
        return_annotation=Any)
    call.__name__ = str(verb.tool)
    tool = Tool.from_function(call, name=verb.tool, description=_words(verb))
    return tool.model_copy(update={"parameters": _schema(verb)})


def _words(verb: Verb) -> str:
    refusals = ", ".join(verb.refusals)
    return f"{verb.summary} {verb.description}\nMay refuse with: {refusals}."


def build_mcp(who: Where, kind: Kind = "agent", *,
              on_answer: Callable[[object], None] | None = None,
              verbs: Sequence[Verb] = VERBS) -> MCPServer:
    """An MCP server whose tools act through ``who()`` (the store and the token's caller):
    an agent's tools, or with ``kind="owner"`` the owner's; ``on_answer`` sees each answer
    (the stdio server's lease keeper notes the claims)."""
    tools = [_tool(verb, who, on_answer) for verb in verbs
             if verb.tool and offers(verb, kind)]
    tools += _task_tools(who, on_answer)
    bus = InMemorySubscriptionBus()
    server = MCPServer(
        "hivelite", version=__version__, tools=tools,
        instructions=OWNER_INSTRUCTIONS if kind == "owner" else AGENT_INSTRUCTIONS,
        extensions=[TasksExtension(who, verbs, on_answer)], subscriptions=bus)
    # subscriptions/listen is a spec method, which an extension may not bind: the SDK's
    # own handler, with notifications.taskIds served first (the SDK's filter drops them)
    server._lowlevel_server.add_request_handler(
        "subscriptions/listen", SubscriptionsListenRequestParams,
        TaskListen(bus, who, on_answer))

    @server.prompt(name="work_the_queue", description="Work your ready tasks one by one:"
                   " claim, report, submit with evidence, until the queue is empty.")
    def work_the_queue(project: str | None = None) -> str:
        scope = f" in project {project}" if project else ""
        return (f"Work my hivelite queue{scope}. Repeat: call next_task"
                f"{' with project=' + json.dumps(project) if project else ''}; if it says"
                " not_found/queue_empty, stop and say so. Otherwise read the task's packet"
                " (task, acceptance_criteria), do the work, checkpoint as you go, renew the"
                " lease before expires_at, and submit_result with evidence that shows each"
                " acceptance criterion met. If you need an answer, pause with your question;"
                " once it is answered, resume the task and read the answers in its reply.")

    @server.resource("hivelite://tasks/{number}", name="task", mime_type="application/json",
                     description="One task: the seed object with its claim, result and"
                     " verdicts.")
    def task(number: str) -> str:
        hive = who().hive
        try:
            found = number_of(number)
            ref: str | int = number if found is None else found
            return json.dumps(plain(hive.get(ref)))
        except HiveliteError as error:
            raise _refusal(error.about(ref)) from None

    return server


TASK_ID = {"type": "string", "minLength": 1, "description": "The task_id an answer gave"
           " (a handoff or await_verdict that waited, or the taskId of an MCP task).",
           "examples": ["hlw_3q2v9TnWc0yZ8xHkP1aLm4RdE6sUoB7f"]}


def _task_tools(who: Where, on_answer: Callable[[object], None] | None) -> list[Tool]:
    """``get_task`` and ``wait_task``: a task of this caller's, as ``tasks/get`` answers it,
    for a client without the Tasks extension (each checked as ``tasks/get`` is: another
    caller's or token's id is as unknown as a made-up one)."""
    def found(task_id: object) -> tuple[Acting, Any]:
        acting = who()
        return acting, acting.hive.watched(acting.caller, task_id, token=acting.token)

    def get_task(task_id: Any = None) -> Any:
        try:
            acting, row = found(task_id)
            return waited(acting, row, 0, on_answer)
        except HiveliteError as error:
            raise _refusal(error) from None

    def wait_task(task_id: Any = None, wait: Any = SERVED_WAIT) -> Any:
        try:
            seconds = served_wait(wait)
            acting, row = found(task_id)
            return waited(acting, row, seconds, on_answer)
        except HiveliteError as error:
            raise _refusal(error) from None

    waits = {"type": "number", "minimum": 0, "maximum": SERVED_WAIT, "default": SERVED_WAIT,
             "description": f"Seconds to wait for it to leave working, at most {SERVED_WAIT}"
             " (ask again for longer).", "examples": [30]}
    return [
        Tool.from_function(get_task, name="get_task", description=(
            "Where a task you started stands (a handoff or await_verdict that waited and"
            " answered a task_id): status working, input_required (with the decision it"
            " needs of you, the owner), completed (with the result) or cancelled.")
        ).model_copy(update={"parameters": {"type": "object", "required": ["task_id"],
                                            "properties": {"task_id": TASK_ID}}}),
        Tool.from_function(wait_task, name="wait_task", description=(
            "Wait for a task you started to move on (leave working), then answer as"
            " get_task does.")
        ).model_copy(update={"parameters": {
            "type": "object", "required": ["task_id"],
            "properties": {"task_id": TASK_ID, "wait": waits}}})]


TOOLS: dict[Kind, tuple[str, ...]] = {
    kind: (*(str(v.tool) for v in VERBS if v.tool and offers(v, kind)), "get_task",
           "wait_task")
    for kind in ("agent", "owner")}
"""The tools a hivelite MCP server offers each kind of token."""

__all__ = ["TOOLS", "build_mcp", "offers", "plain"]
