"""Pydantic models: the seed-000 task object and the plain inputs and outputs of every verb.

The seed's slug patterns use a look-ahead that only Python's slow regex engine
accepts; the equivalent patterns below (plus a length check) run on
pydantic-core's Rust engine. ``tests/test_models.py`` checks that they agree
with the shipped JSON Schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from .protocol import State, WaitingOn

SLUG_MAX = 39
_SLUG = r"[a-z0-9]+(?:-[a-z0-9]+)*"
# The seed's RFC 3339 pattern (it has no look-ahead, so the Rust engine takes it).
TIMESTAMP_PATTERN = (
    r"^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29"
    r"|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)"
    r"|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?"
    r"(?:Z|([+-](?:[01]\d|2[0-3]):[0-5]\d)))$"
)
# RFC 3986: a scheme, then only the characters a URI may hold.
URI_PATTERN = r"^[A-Za-z][A-Za-z0-9+.\-]*:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+$"
TASK_ID_PATTERN = r"^[A-Za-z0-9_-]+$"


def _agent_halves_fit(value: str) -> str:
    owner, _, agent = value.partition("/")
    if len(owner) > SLUG_MAX or len(agent) > SLUG_MAX:
        raise ValueError(f"each half of owner/agent is at most {SLUG_MAX} characters")
    return value


Slug = Annotated[str, StringConstraints(pattern=rf"^{_SLUG}$", max_length=SLUG_MAX)]
AgentName = Annotated[
    str,
    StringConstraints(pattern=rf"^{_SLUG}/{_SLUG}$", max_length=2 * SLUG_MAX + 1),
    AfterValidator(_agent_halves_fit),
]
Timestamp = Annotated[str, StringConstraints(pattern=TIMESTAMP_PATTERN)]
TaskId = Annotated[str, StringConstraints(pattern=TASK_ID_PATTERN, min_length=1, max_length=64)]
Label = Annotated[str, StringConstraints(pattern=r"^[a-z0-9-]{1,32}$")]


TaskText = Annotated[str, StringConstraints(min_length=5, max_length=500)]
Line300 = Annotated[str, StringConstraints(min_length=1, max_length=300)]
Line500 = Annotated[str, StringConstraints(min_length=1, max_length=500)]
Text2000 = Annotated[str, StringConstraints(min_length=1, max_length=2000)]
Text4000 = Annotated[str, StringConstraints(min_length=1, max_length=4000)]
Item300 = Annotated[str, StringConstraints(max_length=300)]
Item500 = Annotated[str, StringConstraints(max_length=500)]


DeliverableType = Literal[
    "code", "doc", "answer", "screenshots", "reviewed_pr", "design", "data", "other"
]
EvidenceKind = Literal["test_output", "screenshot", "link", "pull_request", "commit", "note"]
Provenance = Literal["agent_generated", "from_approved_context", "owner_approved",
                     "owner_instruction"]
Priority = Literal["low", "normal", "high", "urgent"]
Lifecycle = Literal["queued", "claimed", "running", "approval", "completed", "failed",
                    "cancelled"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Packet(_Strict):
    """What the requester hands over: the work, its deliverable and how it is judged."""

    task: TaskText
    deliverable_type: DeliverableType
    acceptance_criteria: Annotated[list[Line500], Field(min_length=1, max_length=20)]
    context: Annotated[str, Field(max_length=4000)] = ""
    files: Annotated[list[Line300], Field(max_length=50)] = []
    depends_on: Annotated[list[Line300], Field(max_length=20)] = []


class Evidence(_Strict):
    """One piece of evidence backing a result."""

    kind: EvidenceKind
    summary: Line500
    url: Annotated[str, StringConstraints(pattern=URI_PATTERN)] | None = None
    content: Annotated[str, Field(max_length=8000)] | None = None


class Result(_Strict):
    """The holder's result: a summary, 1-20 pieces of evidence and their provenance."""

    summary: Text4000
    evidence: Annotated[list[Evidence], Field(min_length=1, max_length=20)]
    provenance: Provenance
    returned_by: AgentName
    returned_at: Timestamp


class Checkpoint(_Strict):
    """The holder's latest checkpoint: progress, decisions, files touched, next steps."""

    progress: Text2000
    decisions: Annotated[list[Item500], Field(max_length=20)] = []
    files_touched: Annotated[list[Item300], Field(max_length=100)] = []
    next_steps: Annotated[list[Item500], Field(max_length=20)] = []
    open_questions: Annotated[list[Item500], Field(max_length=20)] = []


class Task(_Strict):
    """The task object of seed 000, exactly: it validates against the shipped schema."""

    id: TaskId
    project: Slug
    state: State
    waiting_on: WaitingOn | None
    requester: AgentName
    assignee: AgentName
    packet: Packet
    result: Result | None
    latest_checkpoint: Checkpoint | None
    created_at: Timestamp
    updated_at: Timestamp

    def to_json_dict(self) -> dict[str, Any]:
        """The object as the seed schema has it: every key present, evidence unset keys left out."""
        data = self.model_dump(mode="json")
        if data["result"] is not None:
            data["result"]["evidence"] = [
                {k: v for k, v in item.items() if v is not None}
                for item in data["result"]["evidence"]
            ]
        return data


class ClaimView(BaseModel):
    """The active claim as a task view shows it; the token only on the holder's own call."""

    holder: AgentName
    instance: str
    session: str | None = None
    lease_id: str | None = None
    fencing_token: int | None = None
    expires_at: Timestamp


class Confirmation(BaseModel):
    """One verifier's verdict on the current result."""

    reviewer: AgentName
    instance: str
    session: str | None = None
    verdict: Literal["accept", "reject"]
    reason: str | None = None
    at: Timestamp
    counted: bool = True


class TaskView(BaseModel):
    """A task with the facts the seed object has no room for (never inside ``task``)."""

    number: int
    task: Task
    priority: Priority = "normal"
    labels: list[Label] = []
    fields_version: int = 1
    claim: ClaimView | None = None
    confirmations: list[Confirmation] = []
    last_reason: str | None = None


class HandoffRequest(_Strict):
    """Everything a handoff needs; the web layer can take this body as it is."""

    requester: AgentName
    assignee: AgentName
    project: Slug
    packet: Packet
    id: TaskId | None = None
    priority: Priority = "normal"
    labels: Annotated[list[Label], Field(max_length=10)] = []


class GateDecision(BaseModel):
    """A permission gate's answer: allow, hold for the owner, or deny; with a reason."""

    action: Literal["allow", "hold", "deny"]
    reason: Annotated[str, Field(min_length=1, max_length=500)]
    plugin: str | None = None


class JournalEntry(BaseModel):
    """One row of the append-only journal: a move, the creation, or a recorded event."""

    seq: int
    task: str | None
    number: int | None
    at: Timestamp
    actor: str | None
    from_state: State | None
    to_state: State | None
    waiting_on: WaitingOn | None = None
    move: int | None
    reason: str | None
    detail: dict[str, Any] | None = None


class Page(BaseModel):
    """One page of a listing; pass ``next_cursor`` back to get the next."""

    items: list[TaskView]
    next_cursor: int | None = None
