"""The verb table: every verb a caller uses on a task, one row each.

A row says everything the faces need to offer the verb: its name, who may call it and the
right a token needs, how the write path admits it, its input and answer models, the
reasons it can refuse with, words for people and for LLMs, how it runs on a store, and
which faces serve it. The HTTP routes and OpenAPI, the MCP tools, the ``Client``, the
docs and the parity suite are built from this table; a face adds only what belongs to
its medium. The write path admits a verb by its row's mode, so a verb name no row has is
a programming error, never a silently different set of checks.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..core.errors import InvalidInput
from ..core.protocol import Mode, Right, Who

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..core.caller import Caller
    from ..core.models import Page, Receipt
    from .inputs import HandoffInput, ListInput

ROLE = re.compile(r"^[a-z][a-z0-9-]{0,63}\Z")
"""A role (seed 004's ``validate_role``)."""

Run = Callable[[Any, "Caller", "str | int | None", Any, "str | None"], Any]
"""How a verb runs on a store: (the store's face, the caller, the task or None, the input,
the request id) -> the answer."""


@dataclass(frozen=True)
class Http:
    """Where a verb is served over HTTP: below ``/v1/vaults/{vault_id}/tasks``."""

    method: str
    path: str
    name: str
    """The route's name (the OpenAPI operation id)."""
    seed: bool = False
    """One of seed 004's routes (the rest are ours)."""


@dataclass(frozen=True)
class Verb:
    """One verb, as every face offers it."""

    name: str
    """The verb's one name (the CLI spells it with ``-``)."""
    summary: str
    """One line for people: help texts, the route's summary."""
    description: str
    """What an LLM needs to use it well: when, what it answers, what comes next."""
    who: tuple[Who, ...]
    right: Right
    mode: Mode
    inputs: type[BaseModel] | str
    """Its input model, or its name in ``hivelite.verbs.inputs`` (read when first used, so the
    table costs a command-line start nothing)."""
    answers: type[BaseModel] | str
    """Its answer model, or its name in ``hivelite.core.models``."""
    refusals: tuple[str, ...]
    """The reasons it can refuse with (``code/reason``), beyond a bad input or caller."""
    on_task: bool = True
    """It acts on one task, named by number or id (a path segment, a tool's ``number``)."""
    many: bool = False
    """It answers a list of ``answer``."""
    method: str = ""
    """Its ``Hive`` and ``Client`` method (default: the name)."""
    run: Run | None = None
    """How it runs; default: the method, with the input's fields as its keywords."""
    http: Http | None = None
    tool: str | None = None
    """Its MCP tool's name (None: not an MCP tool)."""
    idempotent: bool = True
    """It takes a request id, whose retry answers the first answer."""
    by_caller: bool = True
    """Its method takes the caller (a read of the store as it is does not)."""
    words: str = field(default="")
    """The verb in a sentence ("sign off"); default: the name."""
    waits: bool = False
    """It may wait for work (its input's ``wait``, in seconds): a server cuts that wait to
    ``SERVED_WAIT`` and waits off its writer thread, so no write queues behind it."""
    tasked: bool = False
    """What it answers may take long (a handoff's outcome, an ``await``, a ``next`` on an
    empty queue): asked to wait, a face that can answers it with a durable task that
    follows it (MCP's Tasks extension; :mod:`hivelite.faces.server.mcp_tasks`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", self.method or self.name)
        object.__setattr__(self, "words", self.words or self.name.replace("_", " "))

    @cached_property
    def input(self) -> type[BaseModel]:
        """The input model."""
        return _model(self.inputs, "hivelite.verbs.inputs")

    @cached_property
    def answer(self) -> type[BaseModel]:
        """The answer model."""
        return _model(self.answers, "hivelite.core.models")

    @property
    def cli(self) -> str:
        return self.name.replace("_", "-")

    @property
    def reads(self) -> bool:
        return self.mode is Mode.read

    def call(self, face: Any, caller: Caller, ref: str | int | None, given: Any,
             request_id: str | None = None) -> Any:
        """Run the verb on ``face`` (a ``Hive``) as ``caller``, with its validated input;
        ``403 forbidden_right not_permitted`` first when the token that proved ``caller``
        lacks the verb's right (reads included), whatever face it came through."""
        from ..core.caller import Caller, require_right

        if isinstance(caller, Caller):  # a Client given None calls as its token's caller
            require_right(caller, self.name, self.right)
        if self.run is not None:
            return self.run(face, caller, ref, given, request_id)
        keywords = {name: getattr(given, name) for name in type(given).model_fields}
        if self.idempotent:
            keywords["request_id"] = request_id
        arguments = ([caller] if self.by_caller else []) + ([ref] if self.on_task else [])
        return getattr(face, self.method)(*arguments, **keywords)


def _model(model: type[BaseModel] | str, module: str) -> type[BaseModel]:
    if isinstance(model, str):
        found: type[BaseModel] = getattr(importlib.import_module(module), model)
        return found
    return model


def _list(hive: Any, caller: Caller, ref: object, given: ListInput,
          request_id: str | None) -> Page:
    if given.mine_as not in ("assignee", "requester"):
        raise InvalidInput("invalid_mine_as", f"mine_as is assignee or requester, not"
                           f" {given.mine_as!r}", field="mine_as")
    mine = caller.name if given.mine else None
    page: Page = hive.list(
        state=given.state, priority=given.priority, limit=given.limit, cursor=given.cursor,
        ready=given.ready, blocked=given.blocked, project=given.project,
        labels=given.labels, search=given.search, sort=given.sort,
        assignee=mine if mine and given.mine_as == "assignee" else given.assignee,
        requester=mine if mine and given.mine_as == "requester" else given.requester,
        role=given.role)
    return page


def _handoff(hive: Any, caller: Caller, ref: object, given: HandoffInput,
             request_id: str | None) -> Receipt:
    receipt: Receipt = hive.handoff(caller, given, request_id=request_id)
    return receipt


READ, PROPOSE, WORK, OWNER = Right.read, Right.propose, Right.work, Right.owner
FENCE = ("invalid_state/stale_claim", "invalid_state/task_closed",
         "forbidden_right/not_permitted", "forbidden_right/held", "forbidden_right/vetoed",
         "not_found/no_such_task")
_OWNER = (Who.owner,)
DECIDED = ("not_found/no_such_task", "forbidden_right/not_permitted")

VERBS: tuple[Verb, ...] = (
    Verb("list", "Tasks, filtered, oldest first (or by priority, or most recently changed),"
         " a page at a time.",
         "Find tasks. mine=true keeps the calling agent's own; ready=true those it could"
         " claim now; state=['approval'] (with mine=false) those whose results await a"
         " verdict. Follow next_cursor for the next page.",
         (Who.anyone,), READ, Mode.read, "ListInput", "Page",
         ("invalid_input/invalid_state_filter", "invalid_input/invalid_sort",
          "invalid_input/invalid_priority", "invalid_input/invalid_limit",
          "invalid_input/invalid_mine_as", "invalid_input/invalid_role",
          "invalid_input/invalid_search"),
         on_task=False, run=_list, idempotent=False,
         http=Http("GET", "", "list_tasks", seed=True), tool="list_tasks"),
    Verb("show", "One task: the seed object with its claim, verdicts and usage.",
         "Read one task whole: its packet (what to do, the acceptance criteria), its state,"
         " the live claim's holder and expiry, the result, its evidence and verdicts.",
         (Who.anyone,), READ, Mode.read, "Nothing", "TaskView", ("not_found/no_such_task",),
         method="get", idempotent=False, by_caller=False,
         http=Http("GET", "/{number}", "show_task", seed=True), tool="show_task"),
    Verb("history", "The task's journal, oldest first: every move, who made it and why.",
         "Every move of one task with its actor, time and reason; what an agent reads to"
         " learn why a task came back to it (a decline's or a reject's reason).",
         (Who.anyone,), READ, Mode.read, "Nothing", "JournalEntry", ("not_found/no_such_task",),
         many=True, idempotent=False, by_caller=False,
         http=Http("GET", "/{number}/history", "history"),
         tool="history"),
    Verb("lease", "The live claim's lease id and fencing token again, for its holder alone.",
         "Your live claim on a task again (lease id, fencing token, expiry), when the"
         " claim's answer is no longer at hand. Only the holder, from the instance it"
         " claimed from, gets it.",
         (Who.holder,), WORK, Mode.read, "Nothing", "ClaimReceipt",
         ("invalid_state/no_claim", "forbidden_right/not_permitted", "not_found/no_such_task"),
         idempotent=False, http=Http("GET", "/{number}/claim", "lease"), tool="my_lease",
         words="see the lease of"),
    Verb("await", "Wait for a task's outcome, or for the verdict on its result.",
         "Follow a task you handed off or a result awaiting its verdict, instead of polling"
         " show: until='outcome' waits until it closes (completed, rejected or cancelled),"
         " until='verdict' until its submitted result is accepted or sent back (a result"
         " not submitted yet is waited for). The answer"
         " says whether it settled, how, where it stands (status) and, for the owner, the"
         " decision that would move it on (approve or sign_off); ask again to wait longer.",
         (Who.owner, Who.agent), READ, Mode.read, "AwaitInput", "Awaited",
         ("not_found/no_such_task", "invalid_state/not_submitted", "invalid_input/invalid_until",
          "invalid_input/invalid_since", "invalid_input/invalid_wait"),
         method="await_task", idempotent=False,
         http=Http("GET", "/{number}/await", "await_task"), tool="await_verdict", waits=True,
         tasked=True),
    Verb("handoff", "Hand work off (propose a task); the owner's gate decides.",
         "File a task for an agent: requester (yourself, for an agent), assignee, project"
         " and the packet (task, deliverable_type, acceptance_criteria). The owner's gate"
         " routes it, holds it for the owner, or refuses it; the receipt says which.",
         (Who.owner, Who.agent), PROPOSE, Mode.write, "HandoffInput", "Receipt",
         ("forbidden_right/not_permitted", "forbidden_right/not_requester",
          "invalid_input/invalid_handoff", "invalid_input/duplicate_id"),
         on_task=False, run=_handoff, http=Http("POST", "", "propose", seed=True),
         tool="handoff", words="hand off", tasked=True),
    Verb("claim", "Claim a routed task under a lease with a fencing token.",
         "Take one routed task assigned to you. The answer carries lease_id and"
         " fencing_token: keep both, every later write on the task needs them, and renew"
         " before expires_at.",
         (Who.assignee,), WORK, Mode.claiming, "ClaimInput", "ClaimReceipt",
         ("invalid_state/task_claimed", "invalid_state/task_not_open", "invalid_state/task_closed",
          "invalid_state/blocked",
          "invalid_state/attempts_exhausted", "forbidden_right/not_permitted",
          "forbidden_right/held", "forbidden_right/vetoed", "rate_limited/daily_budget",
          "not_found/no_such_task"),
         http=Http("POST", "/{number}/claim", "claim", seed=True), tool="claim"),
    Verb("next", "Claim the best ready task of the calling agent.",
         "Find and claim your most pressing ready task in one step (the way to start"
         " work): the answer is the claim (lease_id, fencing_token, expires_at) and the"
         " task. not_found/queue_empty when nothing is ready; with wait (seconds), when"
         " nothing became ready in that time, and a task that does is claimed at once.",
         (Who.assignee,), WORK, Mode.claiming, "NextInput", "NextClaim",
         ("not_found/queue_empty", "forbidden_right/held", "rate_limited/daily_budget",
          "invalid_input/invalid_skip", "invalid_input/invalid_wait"),
         on_task=False, method="claim_next", http=Http("POST", "/next", "next_task"),
         tool="next_task", words="claim next", waits=True, tasked=True),
    Verb("resume", "Claim a paused task again, with a new token.",
         "A task you paused waits in state waiting (on human or agent). Once the answer is"
         " in (history shows it), resume takes it back under a new lease: working again,"
         " with a new fencing token.",
         (Who.assignee,), WORK, Mode.claiming, "ClaimInput", "ClaimReceipt",
         ("invalid_state/task_not_open", "invalid_state/task_claimed",
          "invalid_state/task_closed", "forbidden_right/not_permitted",
          "forbidden_right/held", "forbidden_right/vetoed", "rate_limited/daily_budget",
          "not_found/no_such_task"),
         http=Http("POST", "/{number}/resume", "resume"), tool="resume"),
    Verb("renew", "Extend the live claim; its lease id and token stay.",
         "Extend your live claim before expires_at (a lease lasts 5-15 minutes). A claim"
         " that ran out is gone: stale_claim says so, and claiming the task takes it back.",
         (Who.holder,), WORK, Mode.holder, "RenewInput", "ClaimReceipt", FENCE,
         http=Http("POST", "/{number}/claim/renew", "renew", seed=True), tool="renew"),
    Verb("release", "Give the task back (it is routed again).",
         "Give up your claim (the task is routed again, for you or another attempt); the"
         " owner may release any claim without its lease.",
         (Who.holder, Who.owner), WORK, Mode.holder, "ReleaseInput", "Receipt",
         (*FENCE, "invalid_state/not_claimed", "invalid_input/lease_required"),
         http=Http("POST", "/{number}/release", "release", seed=True), tool="release"),
    Verb("checkpoint", "Record where the work stands (the first one starts the work).",
         "Record where the work stands: progress, decisions, files touched, next steps,"
         " open questions. The first checkpoint moves an accepted task to working; the"
         " latest is kept for whoever takes the task next.",
         (Who.holder,), WORK, Mode.holder, "CheckpointInput", "Receipt", FENCE,
         http=Http("POST", "/{number}/checkpoint", "checkpoint"), tool="checkpoint"),
    Verb("update", "One line of progress, with optional usage.",
         "One short line of progress (never a prompt), with the tokens and money this step"
         " used, counted against your daily budget.",
         (Who.holder,), WORK, Mode.holder, "UpdateInput", "Receipt",
         (*FENCE, "rate_limited/daily_budget"),
         http=Http("POST", "/{number}/updates", "update", seed=True), tool="update"),
    Verb("pause", "Wait for an outside answer; the claim ends.",
         "Stop for an answer from a person (on=human) or another agent (on=agent): the"
         " task waits and your claim ends. Ask your question in reason; when the answer is"
         " in, resume the task (not claim).",
         (Who.holder,), WORK, Mode.holder, "PauseInput", "Receipt", FENCE,
         http=Http("POST", "/{number}/pause", "pause"), tool="pause"),
    Verb("answer", "Answer the question a paused task waits on.",
         "Answer a task paused on a question (state waiting, on human or agent; its"
         " question is in show): the owner answers any, another agent one on an agent."
         " The task keeps waiting; its assignee resumes it and reads every answer.",
         (Who.owner, Who.agent), WORK, Mode.write, "AnswerInput", "Receipt",
         ("invalid_state/not_asking", "invalid_state/task_closed",
          "invalid_input/answer_required", "invalid_input/answer_too_long",
          "forbidden_right/not_permitted", "forbidden_right/self_answer",
          "forbidden_right/vetoed", "not_found/no_such_task"),
         http=Http("POST", "/{number}/answer", "answer"), tool="answer"),
    Verb("submit", "Return a result with evidence; the claim ends.",
         "Return the result: a summary and 1-20 pieces of evidence. The claim ends and the"
         " task is judged: completed, waiting for confirmations or the owner's sign-off"
         " (approval), or routed back when the evidence fails its checks.",
         (Who.holder,), WORK, Mode.holder, "SubmitInput", "Receipt",
         (*FENCE, "invalid_input/invalid_summary", "invalid_input/evidence_refused",
          "rate_limited/daily_budget"),
         http=Http("POST", "/{number}/result", "submit_result", seed=True),
         tool="submit_result"),
    Verb("verify", "An independent verdict on another agent's submitted result.",
         "As a reviewer: accept or reject a result awaiting a verdict (state approval). You"
         " must be independent of it: not its worker, and not on the instance that claimed"
         " it. A reject needs a reason and sends the task back to its assignee.",
         (Who.agent,), WORK, Mode.write, "VerifyInput", "Receipt",
         ("invalid_state/not_submitted", "invalid_state/reviewer_not_independent",
          "invalid_state/already_verified", "invalid_state/task_closed",
          "forbidden_right/self_verify", "forbidden_right/vetoed", "not_found/no_such_task"),
         http=Http("POST", "/{number}/verify", "verify", seed=True), tool="verify"),
    Verb("fields", "Priority, labels and attempts, at the task's fields_version.",
         "Change a task's priority or labels (its requester, its assignee or the owner), or"
         " its attempt limit (the owner). base_version is the task's fields_version as"
         " last read: a change made since is stale_base, so read again and retry.",
         (Who.owner, Who.agent), PROPOSE, Mode.write, "FieldsInput", "Receipt",
         ("invalid_state/stale_base", "invalid_state/task_closed", "invalid_input/no_fields",
          "forbidden_right/not_permitted", "not_found/no_such_task"),
         method="set_fields", http=Http("PATCH", "/{number}", "set_fields", seed=True),
         tool="set_fields", words="set fields"),
    Verb("amend", "Correct a result awaiting a decision, or record a merge.",
         "As the result's submitter: correct its summary or evidence while it awaits a"
         " decision (the confirmations given are dismissed: new evidence needs fresh eyes),"
         " or record the commit a completed result was merged as.",
         (Who.submitter, Who.owner), WORK, Mode.write, "AmendInput", "Receipt",
         ("invalid_state/not_amendable", "invalid_state/merge_recorded",
          "invalid_input/nothing_to_amend",
          "forbidden_right/not_submitter", "forbidden_right/not_merger",
          "not_found/no_such_task"),
         http=Http("POST", "/{number}/amend", "amend", seed=True), tool="amend"),
    Verb("approve", "The owner lets a held handoff go ahead.",
         "The owner's decision on a handoff the gate held (waiting on owner_approval): it"
         " is routed to its assignee.",
         _OWNER, OWNER, Mode.write, "DecisionInput", "Receipt",
         ("invalid_state/not_awaiting_owner", "invalid_state/task_closed", *DECIDED),
         http=Http("POST", "/{number}/approve", "approve"), tool="approve"),
    Verb("deny", "The owner refuses a held handoff.",
         "The owner's decision on a handoff the gate held: it is rejected, for good.",
         _OWNER, OWNER, Mode.write, "DecisionInput", "Receipt",
         ("invalid_state/not_awaiting_owner", "invalid_state/task_closed", *DECIDED),
         http=Http("POST", "/{number}/deny", "deny"), tool="deny"),
    Verb("cancel", "Withdraw an open task: the owner any; in team mode, a guest's agents"
         " their own owner's requests.",
         "Withdraw a task before its result is in (requested, waiting, routed, accepted or"
         " working): it is cancelled, for good, and a live claim ends. The owner cancels any"
         " task; in team mode, an agent of a guest owner cancels the tasks that owner's"
         " agents requested.",
         (Who.owner, Who.requester), PROPOSE, Mode.write, "DecisionInput", "Receipt",
         ("invalid_state/task_closed", "invalid_state/not_cancellable", *DECIDED),
         http=Http("POST", "/{number}/cancel", "cancel"), tool="cancel"),
    Verb("sign_off", "The owner accepts a result awaiting approval.",
         "The owner's sign-off on a result awaiting a decision (state approval): it is"
         " completed, whatever confirmations it has.",
         _OWNER, OWNER, Mode.write, "DecisionInput", "Receipt",
         ("invalid_state/not_submitted", "invalid_state/task_closed", *DECIDED),
         http=Http("POST", "/{number}/sign-off", "sign_off"), tool="sign_off"),
    Verb("decline", "The owner sends a result back to its assignee.",
         "The owner declines a result awaiting a decision: the task is routed back to its"
         " assignee, with the reason (required) in its history.",
         _OWNER, OWNER, Mode.write, "DeclineInput", "Receipt",
         ("invalid_state/not_submitted", "invalid_state/task_closed", *DECIDED),
         http=Http("POST", "/{number}/decline", "decline"), tool="decline"),
    Verb("hold", "The owner holds an agent or an instance.",
         "Hold one agent, or every agent acting from one instance: its live claims end (the"
         " tasks go back to routed) and it takes no claim until lifted; it may still read,"
         " hand off and verify.",
         _OWNER, OWNER, Mode.authority, "HoldInput", "Control",
         ("invalid_input/control_scope", "forbidden_right/not_permitted"),
         on_task=False, idempotent=False, http=Http("POST", "/hold", "hold"), tool="hold"),
    Verb("veto", "The owner vetoes one agent on one task.",
         "Veto one agent on one task: its claim there ends and it may not claim that task"
         " again until lifted.",
         _OWNER, OWNER, Mode.authority, "VetoInput", "Control",
         ("invalid_state/task_closed", *DECIDED),
         idempotent=False, http=Http("POST", "/{number}/veto", "veto"), tool="veto"),
    Verb("stop", "The owner's kill switch: an agent, an instance or every agent.",
         "Stop one agent, one instance, or every agent (everyone=true): every live claim of"
         " theirs ends and every write of theirs is refused until lifted.",
         _OWNER, OWNER, Mode.authority, "StopInput", "Control",
         ("invalid_input/control_scope", "forbidden_right/not_permitted"),
         on_task=False, idempotent=False, http=Http("POST", "/stop", "stop"), tool="stop"),
    Verb("lift", "The owner lifts live controls.",
         "Lift live controls: one by its id, or every one on an agent, an instance, or the"
         " stop of every agent; answers what was lifted.",
         _OWNER, OWNER, Mode.authority, "LiftInput", "Control",
         ("not_found/no_such_control", "invalid_input/control_scope",
          "forbidden_right/not_permitted"),
         on_task=False, many=True, idempotent=False, http=Http("POST", "/lift", "lift"),
         tool="lift"),
)
"""Every verb on a task, the reads first, then an agent's, then the owner's decisions and
controls."""

BY_NAME: dict[str, Verb] = {verb.name: verb for verb in VERBS}

FILE_VERBS: dict[str, tuple[Mode, Right | None]] = {
    "expire": (Mode.write, WORK), "budget": (Mode.authority, OWNER),
    "enrol": (Mode.authority, OWNER), "signer": (Mode.authority, OWNER),
    "policy": (Mode.authority, OWNER), "token": (Mode.authority, OWNER),
    "watch": (Mode.write, READ)}
"""The verbs on the store itself, which stay on the file: how the write path admits each,
and the right a token would need."""


def mode_of(name: str) -> Mode:
    """How the write path admits the verb ``name``; a name no row has is a bug."""
    verb = BY_NAME.get(name)
    if verb is not None:
        return verb.mode
    try:
        return FILE_VERBS[name][0]
    except KeyError:
        raise LookupError(f"{name!r} is no verb of the verb table") from None


def right_of(name: str) -> Right | None:
    """The right a token needs for the verb ``name``."""
    verb = BY_NAME.get(name)
    return verb.right if verb is not None else FILE_VERBS[name][1]


__all__ = ["BY_NAME", "FILE_VERBS", "VERBS", "Http", "Verb", "mode_of",
           "right_of"]
