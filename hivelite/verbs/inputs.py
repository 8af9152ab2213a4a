"""What each verb takes: one pydantic model a verb, every field described, with an example
and, where the values are fixed, the values.

Every face reads these models: the HTTP bodies and queries, the MCP tools' parameters, the
``Client``'s requests, the docs. Who calls is never an input: it comes from the face (a
token, the CLI's caller options, a ``Hive`` method's ``caller``); the task a verb acts on
is not one either (a path segment, a tool's ``number``, a method's ``ref``).

A value the verb checks itself (lease minutes, usage, the fencing token, versions,
attempts, pause, verdict and outcome, evidence) passes through as sent, typed only in the
schema, so a bad one is refused by the verb with its own reason, the same on every face
(``invalid_usage``, never a generic body error).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from ..core.models import HandoffRequest
from ..core.protocol import (
    DEFAULT_LEASE_MINUTES,
    MAX_LEASE_MINUTES,
    MAX_USAGE,
    MAX_WAIT,
    MIN_LEASE_MINUTES,
    PRIORITIES,
    SERVED_WAIT,
    SORTS,
    State,
)

MAX_PAGE = 500
"""The most tasks one page of a listing holds."""
MAX_SEARCH = 200
"""The longest text a listing searches for."""


def schema(shape: dict[str, Any], description: str, *examples: Any) -> WithJsonSchema:
    """The schema of a value the verb checks itself (typed ``Any``: any JSON passes the
    model, and the verb refuses what does not fit, in its own words)."""
    return WithJsonSchema({**shape, "description": description, "examples": list(examples)})


def about(description: str, *examples: Any) -> Any:
    """A field's words: its description and an example."""
    return Field(description=description, examples=list(examples))


def _maybe(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


_EVIDENCE = {"type": "array", "minItems": 1, "maxItems": 20, "items": {
    "type": "object", "required": ["kind", "summary"], "additionalProperties": False,
    "properties": {
        "kind": {"type": "string", "enum": ["test_output", "screenshot", "link",
                                            "pull_request", "commit", "note"]},
        "summary": {"type": "string", "minLength": 1, "maxLength": 500},
        "url": {"type": "string", "format": "uri"},
        "content": {"type": "string", "maxLength": 8000},
        "receipt": {
            "type": "object", "required": ["digest"], "additionalProperties": False,
            "description": "The artifact's digest, optionally signed by a registered signer"
            " (hivelite receipt FILE makes one); hivelite checks it and sets verified.",
            "properties": {
                "digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
                "signer": {"type": "string"},
                "signature": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}}}}}

Minutes = Annotated[Any, schema(
    {"type": "integer", "minimum": MIN_LEASE_MINUTES, "maximum": MAX_LEASE_MINUTES},
    f"How long the lease lasts, {MIN_LEASE_MINUTES} to {MAX_LEASE_MINUTES} minutes; renew"
    " before it runs out.", DEFAULT_LEASE_MINUTES)]
LeaseId = Annotated[str, about(
    "The claim's lease id, from the answer of claim, next or resume (lease shows it again).",
    "lease_01JD5Q2W8Y3N")]
Token = Annotated[Any, schema(
    {"type": "integer", "minimum": 1},
    "The claim's fencing token, from the same answer: every write under the claim carries"
    " it.", 1)]
Usage = Annotated[Any, schema(
    _maybe({"type": "integer", "minimum": 0, "maximum": MAX_USAGE["tokens"]}),
    "Model tokens used by this step (counted against the agent's daily budget).", 1200)]
Money = Annotated[Any, schema(
    _maybe({"type": "integer", "minimum": 0, "maximum": MAX_USAGE["usd_micros"]}),
    "Money spent by this step, in millionths of a dollar.", 4500)]
Reason = Annotated[str | None, about(
    "Why, in words (at most 500 characters).", "the tests pass on my machine")]
Evidence = Annotated[Any, schema(
    _EVIDENCE, "1-20 pieces of evidence: each a kind, a one-line summary, a url or content"
    " where there is one, and a receipt where the artifact has one.",
    [{"kind": "test_output", "summary": "42 passed"}])]
Verdict = Annotated[Any, schema(
    {"type": "string", "enum": ["accept", "reject"]},
    "accept the result, or reject it (a reject needs a reason).", "accept")]


class Input(BaseModel):
    """A verb's input: unknown keys are refused, so a typo is a ``422``, never ignored (built
    when first used, as every model is, so start-up pays for none)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class Nothing(Input):
    """A verb that takes nothing but its task (show, history, lease)."""


class ListInput(Input):
    """Which tasks, in what order, a page at a time."""

    state: Annotated[Any, schema(
        _maybe({"type": "array", "items": {"type": "string",
                                           "enum": [s.value for s in State]}}),
        "Only tasks in these states.", ["routed", "working"])] = None
    mine: Annotated[bool, about(
        "Only the calling agent's own tasks: assigned to it (mine_as assignee) or handed off"
        " by it (mine_as requester).", True)] = False
    mine_as: Annotated[Any, schema(
        {"type": "string", "enum": ["assignee", "requester"]},
        "With mine: the calling agent as assignee or as requester.", "assignee")] = (
        "assignee")
    role: Annotated[Any, schema(
        _maybe({"type": "string", "pattern": "^[a-z][a-z0-9-]{0,63}$"}),
        "Only tasks needing this role (seed 004's task role).", "reviewer")] = None
    assignee: Annotated[str | None, about("Only tasks assigned to this agent.",
                                          "ana/coder")] = None
    requester: Annotated[str | None, about("Only tasks handed off by this agent.",
                                           "ana/planner")] = None
    project: Annotated[str | None, about("Only tasks of this project.", "shop")] = None
    ready: Annotated[bool, about(
        "Only tasks an agent could claim now: routed, every dependency completed, attempts"
        " left.", True)] = False
    blocked: Annotated[bool, about(
        "Only open tasks still waiting on a dependency.", False)] = False
    labels: Annotated[list[str], about(
        "Only tasks carrying each of these labels.", ["backend"])] = []
    priority: Annotated[Any, schema(
        _maybe({"type": "array", "items": {"type": "string", "enum": list(PRIORITIES)}}),
        "Only tasks of these priorities.", ["urgent", "high"])] = None
    search: Annotated[Any, schema(
        _maybe({"type": "string", "maxLength": MAX_SEARCH}),
        "Only tasks whose title, assignee or a label holds this text (case ignored).",
        "login")] = None
    sort: Annotated[Any, schema(
        {"type": "string", "enum": list(SORTS)},
        "age: oldest first; priority: most pressing first; updated: most recently changed"
        " first.", "priority")] = "age"
    limit: Annotated[Any, schema(
        {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}, "Tasks on one page.",
        20)] = 50
    cursor: Annotated[Any, schema(
        _maybe({"type": "integer"}),
        "The next_cursor of the page before (none: the first page).", 50)] = None


class HandoffInput(HandoffRequest):
    """The handoff itself: who hands off to whom, in which project, and the packet."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class ClaimInput(Input):
    """How long the lease lasts."""

    minutes: Minutes = DEFAULT_LEASE_MINUTES


class NextInput(ClaimInput):
    """Claim the best ready task, optionally of one project or label."""

    project: Annotated[str | None, about("Only a task of this project.", "shop")] = None
    label: Annotated[str | None, about("Only a task carrying this label.", "backend")] = None
    skip: Annotated[Any, schema(
        {"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": 500},
        "Task numbers to pass over (those already failed on in this run).", [4])] = []
    wait: Annotated[Any, schema(
        {"type": "number", "minimum": 0, "maximum": MAX_WAIT},
        f"Seconds to wait for a task when none is ready: the claim comes as soon as one"
        f" is, queue_empty once the time is up (0: answer at once). At most {MAX_WAIT};"
        f" over HTTP and MCP at most {SERVED_WAIT} a call (a longer wait is cut to it:"
        " ask again).", 30)] = 0


Wait = Annotated[Any, schema(
    {"type": "number", "minimum": 0, "maximum": MAX_WAIT},
    f"Seconds to wait for it (0: answer at once). At most {MAX_WAIT}; over HTTP and MCP at"
    f" most {SERVED_WAIT} a call (a longer wait is cut to it: ask again).", 30)]


class AwaitInput(Input):
    """What to wait for on a task, and how long."""

    until: Annotated[Any, schema(
        {"type": "string", "enum": ["outcome", "verdict"]},
        "outcome: until the task closes (completed, rejected or cancelled); verdict: until"
        " its submitted result is accepted or sent back (before any submission: until the"
        " first one comes, then its verdict).", "verdict")] = "outcome"
    since: Annotated[Any, schema(
        _maybe({"type": "integer", "minimum": 1}),
        "For a verdict: the journal seq of the submission awaited (an earlier answer's"
        " since); default: the task's latest submission, or while none, the first to"
        " come.", 12)] = None
    wait: Wait = 0


class Fenced(Input):
    """Every write under a claim carries its lease id and fencing token."""

    lease_id: LeaseId
    token: Token


class RenewInput(Fenced):
    minutes: Minutes = DEFAULT_LEASE_MINUTES


class ReleaseInput(Input):
    """The holder gives its claim back with its lease; the owner releases without one."""

    lease_id: Annotated[str | None, about(
        "The claim's lease id (the holder's; the owner gives none).",
        "lease_01JD5Q2W8Y3N")] = None
    token: Annotated[Any, schema(
        _maybe({"type": "integer", "minimum": 1}),
        "The claim's fencing token (the holder's; the owner gives none).", 1)] = None
    reason: Reason = None


class CheckpointInput(Fenced):
    progress: Annotated[str, about("Where the work stands, in a line or a paragraph.",
                                   "the failing test is found")]
    decisions: Annotated[list[str], about("Decisions taken so far.",
                                          ["keep the old API"])] = []
    files_touched: Annotated[list[str], about("Files changed so far.",
                                              ["src/login.py"])] = []
    next_steps: Annotated[list[str], about("What comes next.", ["write the fix"])] = []
    open_questions: Annotated[list[str], about("Questions still open.",
                                               ["which Python versions?"])] = []


class UpdateInput(Fenced):
    summary: Annotated[str, about("One line of progress (at most 300 characters), never a"
                                  " prompt.", "tests written, fixing now")]
    tokens: Usage = None
    usd_micros: Money = None


class PauseInput(Fenced):
    on: Annotated[Any, schema(
        {"type": "string", "enum": ["human", "agent"]},
        "Whose answer the task waits for: a person's or another agent's.", "human")]
    reason: Annotated[str, about("The question, or what is awaited.",
                                 "which database should it use?")]


class SubmitInput(Fenced):
    summary: Annotated[str, about("What was done, in a line or a paragraph.",
                                  "fixed the login bug")]
    evidence: Evidence
    provenance: Annotated[Any, schema(
        {"type": "string", "enum": ["agent_generated", "from_approved_context",
                                    "owner_approved", "owner_instruction"]},
        "Where the result's content comes from (seed 000).", "agent_generated")] = (
        "agent_generated")
    outcome: Annotated[Any, schema(
        {"type": "string", "enum": ["completed", "failed"]},
        "completed, or failed: the attempt is counted and the task is routed again while"
        " attempts are left.", "completed")] = "completed"
    tokens: Usage = None
    usd_micros: Money = None
    draft: Annotated[Any, schema(
        _maybe({"type": "object", "properties": {
            "kind": {"type": "string", "enum": ["patch", "document", "decision"]},
            "content": {"type": "string", "minLength": 1, "maxLength": 100_000},
            "title": {"type": "string", "minLength": 1, "maxLength": 300}},
            "required": ["kind", "content"], "additionalProperties": False}),
        "The result's knowledge change, if it brings one: a patch, a document or a"
        " decision (never with outcome failed).",
        {"kind": "patch", "content": "--- a/login.py\n+++ b/login.py\n..."})] = None


class VerifyInput(Input):
    verdict: Verdict = "accept"
    reason: Reason = None


class FieldsInput(Input):
    """Priority, labels and attempts, changed at the task's ``fields_version``."""

    base_version: Annotated[Any, schema(
        {"type": "integer", "minimum": 1},
        "The task's fields_version as last read: a change made since is stale_base.", 1)]
    priority: Annotated[Any, schema(
        _maybe({"type": "string", "enum": list(PRIORITIES)}), "The new priority.",
        "high")] = None
    labels: Annotated[list[str] | None, about(
        "The labels, all of them (each 1-32 of a-z, 0-9 and -).", ["backend"])] = None
    add_labels: Annotated[list[str], about("Labels to add.", ["urgent-fix"])] = []
    remove_labels: Annotated[list[str], about("Labels to remove.", ["backend"])] = []
    max_attempts: Annotated[Any, schema(
        _maybe({"type": "integer", "minimum": 1}),
        "The owner only: failed outcomes allowed before the task stops being claimable.",
        3)] = None


class AmendInput(Input):
    """Correct a result awaiting a decision (its confirmations are dismissed), or record
    the merge of a completed one."""

    summary: Annotated[str | None, about("The corrected summary.",
                                         "fixed the login bug, and its test")] = None
    evidence: Annotated[Any, schema(_maybe(_EVIDENCE), "The corrected evidence.",
                                    [{"kind": "commit", "summary": "a1b2c3d"}])] = None
    merge_commit: Annotated[str | None, about(
        "The commit the completed result was merged as (7-64 lowercase hex).",
        "a1b2c3d")] = None


class DecisionInput(Input):
    """The owner's decision on a task, with an optional reason."""

    reason: Reason = None


class DeclineInput(Input):
    """The owner sends a result back: the reason is required (the verb says so when it is
    missing, as it says on every face)."""

    model_config = ConfigDict(extra="forbid", defer_build=True,
                              json_schema_extra={"required": ["reason"]})

    reason: Annotated[Any, schema(
        {"type": "string", "minLength": 1, "maxLength": 500},
        "Why the result goes back (at most 500 characters).",
        "the summary does not match the diff")] = None


class AnswerInput(Input):
    """The answer to the question a paused task waits on."""

    text: Annotated[Any, schema(
        {"type": "string", "minLength": 1, "maxLength": 4000},
        "The answer, for the agent that asked (at most 4000 characters).",
        "use PostgreSQL 16")]


class HoldInput(Input):
    """Whom the owner holds: one agent, or every agent acting from one instance."""

    agent: Annotated[str | None, about("The agent (owner/agent).", "ana/coder")] = None
    instance: Annotated[str | None, about("The instance: every agent acting from it.",
                                          "laptop")] = None
    reason: Reason = None


class StopInput(HoldInput):
    """Whom the owner stops: one agent, one instance, or every agent."""

    everyone: Annotated[bool, about("Every agent: the kill switch of the whole store.",
                                    True)] = False


class VetoInput(Input):
    """Whom the owner vetoes on the task."""

    agent: Annotated[str, about("The agent vetoed on this task (owner/agent).",
                                "ana/coder")]
    reason: Reason = None


class LiftInput(Input):
    """Which live controls the owner lifts: one by its id, or every one of a scope."""

    control: Annotated[int | None, about("One control, by its id (controls lists them).",
                                         3)] = None
    kind: Annotated[Any, schema(_maybe({"type": "string", "enum": ["hold", "veto", "stop"]}),
                                "Only controls of this kind.", "hold")] = None
    agent: Annotated[str | None, about("Every live control on this agent (with task: its"
                                       " veto there).", "ana/coder")] = None
    instance: Annotated[str | None, about("Every live control on this instance.",
                                          "laptop")] = None
    task: Annotated[Any, schema(_maybe({"anyOf": [{"type": "integer"}, {"type": "string"}]}),
                                "With agent: the task of the veto.", 7)] = None
    everyone: Annotated[bool, about("The stop of every agent.", True)] = False
    reason: Reason = None


__all__ = [
    "AmendInput",
    "AnswerInput",
    "CheckpointInput",
    "ClaimInput",
    "DecisionInput",
    "DeclineInput",
    "Fenced",
    "FieldsInput",
    "HandoffInput",
    "HoldInput",
    "Input",
    "LiftInput",
    "ListInput",
    "NextInput",
    "Nothing",
    "PauseInput",
    "ReleaseInput",
    "RenewInput",
    "StopInput",
    "SubmitInput",
    "UpdateInput",
    "VerifyInput",
    "VetoInput",
]
