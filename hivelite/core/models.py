"""Pydantic models: the seed-000 task object and the plain inputs and outputs of every verb.

The seed's slug patterns use a look-ahead that only Python's slow regex engine
accepts; the equivalent patterns below (plus a length check) run on
pydantic-core's Rust engine. ``tests/test_models.py`` checks that they agree
with the shipped JSON Schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, TypeVar, overload

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    StringConstraints,
    computed_field,
    model_serializer,
    model_validator,
)

from .protocol import State, WaitingOn

SLUG_MAX = 39
_SLUG = r"[a-z0-9]+(?:-[a-z0-9]+)*"
# The seed's RFC 3339 pattern, with ASCII digits only (the Rust engine's \d is any
# Unicode digit) and without year 0000, which the date-time format refuses.
_YEAR = r"(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
TIMESTAMP_PATTERN = (
    r"^(?:(?:[0-9][0-9][2468][048]|[0-9][0-9][13579][26]|[0-9][0-9]0[48]"
    r"|(?:0[48]|[2468][048]|[13579][26])00)-02-29"
    rf"|{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|(?:02)-(?:0[1-9]|1[0-9]|2[0-8])))"
    r"T(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?"
    r"(?:Z|([+-](?:[01][0-9]|2[0-3]):[0-5][0-9])))$"
)
# RFC 3986's URI grammar (scheme, optional authority, path, query, fragment).
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|{_PCT})"
_H16 = r"[0-9A-Fa-f]{1,4}"
_DEC = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_LS32 = rf"(?:{_H16}:{_H16}|{_DEC}\.{_DEC}\.{_DEC}\.{_DEC})"
_IPV6 = "|".join((
    rf"(?:{_H16}:){{6}}{_LS32}",
    rf"::(?:{_H16}:){{5}}{_LS32}",
    rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
    rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
))
_IP_LITERAL = rf"\[(?:{_IPV6}|v[0-9A-Fa-f]+\.[A-Za-z0-9._~!$&'()*+,;=:-]+)\]"
_AUTHORITY = (
    rf"(?:(?:[A-Za-z0-9._~!$&'()*+,;=:-]|{_PCT})*@)?"
    rf"(?:{_IP_LITERAL}|(?:[A-Za-z0-9._~!$&'()*+,;=-]|{_PCT})*)(?::[0-9]*)?"
)
URI_PATTERN = (
    rf"^[A-Za-z][A-Za-z0-9+.-]*:(?://{_AUTHORITY}(?:/{_PCHAR}*)*|/?(?:{_PCHAR}+(?:/{_PCHAR}*)*)?)"
    rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?$"
)
TASK_ID_PATTERN = r"^[A-Za-z0-9_-]+$"
WEB_SCHEMES = ("http", "https")
_WEB_URL = re.compile(r"^https?://(?:[^/?#@]*@)?[^/?#@:]", re.IGNORECASE)


def _web_url(value: object) -> object:
    """Evidence links are web pages: ``http(s)://host...`` only, never ``javascript:``,
    ``file:``, ``data:`` or any other scheme a viewer might follow. (Checked before the URI
    pattern, so the message says what is wrong; the pattern then checks the rest.)"""
    if isinstance(value, str) and not _WEB_URL.match(value):
        scheme, colon, _ = value.partition(":")
        if not colon or scheme.lower() in WEB_SCHEMES:
            raise ValueError("an evidence url is an http(s) URL with a host, like"
                             " https://example.com/pr/7")
        raise ValueError(f"an evidence url is http or https only, not {scheme[:20]!r}")
    return value


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
WebUrl = Annotated[str, StringConstraints(pattern=URI_PATTERN), BeforeValidator(_web_url)]
"""An http(s) URL (checked first, with a plain message) that is also an RFC 3986 URI."""
TaskId = Annotated[str, StringConstraints(pattern=TASK_ID_PATTERN, min_length=1, max_length=64)]
Label = Annotated[str, StringConstraints(pattern=r"^[a-z0-9-]{1,32}$")]
Role = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,63}$")]
"""An agent role (seed 004's ``validate_role``): 1-64 of ``[a-z0-9-]``, starting with a
letter."""
INSTANCE_MAX = 64
# 1-64 of letters, digits, '.', '_' or '-', starting with a letter or digit. The length is
# checked on its own as well as by the pattern, and the pattern runs on the Rust engine,
# whose ``$`` is the end of the text (Python's would also match before a final newline).


def normal_instance(name: object) -> object:
    """An instance name as every comparison sees it: surrounding space, case and trailing
    dots aside (``" Laptop. "`` is the machine ``laptop``, as DNS names compare)."""
    return name.strip(" ").lower().rstrip(".") if isinstance(name, str) else name


InstanceName = Annotated[str, BeforeValidator(normal_instance), StringConstraints(
    pattern=rf"^[a-z0-9][a-z0-9._-]{{0,{INSTANCE_MAX - 1}}}$", min_length=1,
    max_length=INSTANCE_MAX)]
"""Normalised first (:func:`normal_instance`), then 1-64 of ``[a-z0-9._-]``."""
# One line: no control characters or Unicode line breaks, and not blank.
_LINE_CHAR = r"[^\x00-\x1f\x7f\x85\u2028\u2029]"
UpdateSummary = Annotated[str, StringConstraints(
    min_length=1, max_length=300, pattern=rf"^{_LINE_CHAR}*\S{_LINE_CHAR}*$")]
Reason = Annotated[str, StringConstraints(min_length=1, max_length=500)]
CommitHash = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{7,64}$")]
Count = Annotated[int, Field(ge=0)]


TaskText = Annotated[str, StringConstraints(min_length=5, max_length=500)]
Line300 = Annotated[str, StringConstraints(min_length=1, max_length=300)]


_TASK_ID = re.compile(TASK_ID_PATTERN.removesuffix("$") + r"\Z")
TASK_REF_WORDS = "a task number like 2 or a task id like fix-login-42"
"""What a dependency may be, in words."""


def task_ref(value: object) -> object:
    """A dependency as the packet stores it before it is resolved: a task number (an int,
    never a bool) as its digits, a task id as it is; anything else is refused in words."""
    if isinstance(value, bool):
        raise ValueError(f"a bool is not a task number: {TASK_REF_WORDS}")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"task numbers start at 1; not {value}")
        return str(value)
    if not isinstance(value, str) or not _TASK_ID.match(value):
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise ValueError(f"{TASK_REF_WORDS}; not {shown}")
    if len(value) > 64:
        raise ValueError(f"task ids are at most 64 characters; not {len(value)}")
    return value


TaskRef = Annotated[Line300, BeforeValidator(task_ref)]
"""One ``depends_on`` entry: a task number (``2`` or ``"2"``) or a task id; stored as the
task's id once resolved (the seed's ``depends_on`` is a list of strings)."""
DependsOn = Annotated[list[TaskRef], Field(max_length=20)]
"""The tasks a task depends on: at most 20 (a task named twice is one dependency)."""
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


DEFERRED = ConfigDict(defer_build=True)
"""For a module's ``TypeAdapter`` of a constrained type: built on first use, like the models."""


class _Model(BaseModel):
    """Every model's base: its validator is built when first used, not on import (a CLI
    call uses a few of these models, and building all of them cost 50 ms a call)."""

    model_config = ConfigDict(defer_build=True)


class _Strict(_Model):
    model_config = ConfigDict(extra="forbid")


Made = TypeVar("Made", bound=BaseModel)
_set = object.__setattr__


def _private_only(cls: type[BaseModel]) -> bool:
    """Whether the model's only post-init step is the one pydantic gives a model with
    private attributes (setting their defaults), which :func:`made` does itself."""
    return getattr(cls.model_post_init, "__name__", "") == "init_private_attributes"


def made(cls: type[Made], values: dict[str, Any],
         private: dict[str, Any] | None = None) -> Made:
    """``cls.model_construct(**values)`` for values the library made itself that name every
    field (an answer built from its own rows): the same instance, without
    ``model_construct``'s walk over each field's aliases and defaults (about a microsecond a
    field, twice a claim and submit). ``private``: the model's private attributes, each
    named (``NextClaim``'s). Values that do not name every field, or private attributes
    not all given, go through ``model_construct``."""
    if ((cls.__pydantic_post_init__ and not _private_only(cls))
            or values.keys() != cls.__pydantic_fields__.keys()
            or (private or {}).keys() != (cls.__private_attributes__ or {}).keys()):
        model = cls.model_construct(**values)
        for name, value in (private or {}).items():
            setattr(model, name, value)
        return model
    model = cls.__new__(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", set(values))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", private)
    return model


class Packet(_Strict):
    """What the requester hands over: the work, its deliverable and how it is judged."""

    task: TaskText
    deliverable_type: DeliverableType
    acceptance_criteria: Annotated[list[Line500], Field(min_length=1, max_length=20)]
    context: Annotated[str, Field(max_length=4000)] = ""
    files: Annotated[list[Line300], Field(max_length=50)] = []
    depends_on: DependsOn = []


class Evidence(_Strict):
    """One piece of evidence backing a result; unset keys are left out when dumped."""

    kind: EvidenceKind
    summary: Line500
    url: WebUrl | None = None
    content: Annotated[str, Field(max_length=8000)] | None = None

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v is not None}


DraftKind = Literal["patch", "document", "decision"]
MAX_DRAFT = 100_000
"""The most characters a draft's content holds."""


class Draft(_Strict):
    """A result's knowledge change (seed 004: a result is a proposal, with its knowledge
    change if it brings one): a patch, a document or a decision, kept with the result."""

    kind: Annotated[DraftKind, Field(description="patch, document or decision.")]
    content: Annotated[str, StringConstraints(min_length=1, max_length=MAX_DRAFT,
                                              pattern=r"^[^\x00]*$"), Field(
        description="The change itself: the patch, the document's text, the decision.")]
    title: Annotated[str, StringConstraints(min_length=1, max_length=300,
                                            pattern=r"^[^\x00]*$"), Field(
        description="A line naming it.")] | None = None


class DraftView(_Model):
    """A result's draft as a task view shows it, with the journal row that recorded it."""

    kind: DraftKind
    content: str
    title: str | None = None
    seq: int | None = None
    """The journal row of the submission that recorded it (its digest is sealed there)."""


class EvidenceReceipt(_Strict):
    """A receipt a piece of evidence may carry on its way in (``hivelite.core.receipts``):
    the artifact's SHA-256, and optionally a registered signer's HMAC of it. hivelite
    checks it and sets ``verified``; a client never does."""

    digest: Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$"), Field(
        description="sha256: and the artifact's SHA-256 in hex.")]
    signer: Annotated[Slug | None, Field(
        description="The registered signer (a CI, say) whose key signed the digest.")] = None
    signature: Annotated[str | None, StringConstraints(pattern=r"^[0-9a-f]{64}$"), Field(
        description="The signer's HMAC-SHA256 of the digest, in hex.")] = None


class ReceiptView(_Model):
    """A receipt as a task view shows it: what it claims, and why it did not verify."""

    digest: str
    signer: str | None = None
    why: str | None = None
    """Why it did not verify (None when it did)."""


class EvidenceView(_Model):
    """A piece of evidence as hivelite shows it (seed 004's ``EvidenceViewV1``): ``verified``
    is set by hivelite, from a receipt it checked, never by a client."""

    kind: EvidenceKind
    summary: str
    url: str | None = None
    content: str | None = None
    verified: bool = False
    receipt: ReceiptView | None = None


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
        """The object exactly as the seed schema has it (plain JSON types)."""
        return self.model_dump(mode="json")


class ClaimView(_Model):
    """The active claim as a task view shows it; the token only on the holder's own call."""

    holder: AgentName
    instance: str
    session: str | None = None
    lease_id: str | None = None
    fencing_token: int | None = None
    expires_at: Timestamp
    expired: bool = False
    """True once the lease ran out; the next write returns the task to ``routed``."""


class Confirmation(_Model):
    """One verifier's verdict on the current result."""

    reviewer: AgentName
    instance: str
    session: str | None = None
    verdict: Literal["accept", "reject"]
    reason: str | None = None
    at: Timestamp
    counted: bool = True
    why: str | None = None
    """Why it did not count toward the threshold (None when it did)."""


class UpdateView(_Model):
    """One update as a task view shows it (seed 004's TaskUpdateV1): a line of the holder's
    progress with the usage it reported, or a verifier's verdict on the current result."""

    at: Timestamp
    actor: str
    summary: str
    tokens: int | None = None
    usd_micros: int | None = None
    kind: Literal["progress", "verdict"] = "progress"


class Usage(_Model):
    """What the work cost so far, as the agents reported it (integers only)."""

    tokens: int = 0
    usd_micros: int = 0


class Merge(_Model):
    """A completed task's merge record, and the same commit as a piece of evidence (seed
    004's ``merge_evidence``: how history shows it)."""

    commit: CommitHash
    by: str
    evidence: Evidence | None = None


def merge_evidence(commit: str) -> Evidence:
    """The merge commit as a piece of evidence of kind ``commit``."""
    return Evidence.model_construct(kind="commit", summary=f"merged as {commit}",
                                    content=commit, url=None)


class Decision(_Model):
    """The decision on the current result (seed 004's TaskDecisionV1): accepted, by a
    person's sign-off or the threshold's confirmations, or declined, by a person or a
    verifier's counted reject. None while the result awaits one."""

    outcome: Literal["accepted", "declined"]
    decided_by: Literal["person", "threshold", "verifier"]
    by: str
    """Who made it: the owner's name, the agent whose verdict decided, or ``guard`` for a
    threshold of 0."""
    at: Timestamp
    reason: str | None = None
    seq: int
    """The journal row that records it."""


AnswerText = Annotated[str, StringConstraints(min_length=1, max_length=4000)]


class Answer(_Model):
    """One answer to a paused task's question: who gave it, when, and what it says."""

    text: str
    by: str
    at: Timestamp


class Question(_Model):
    """What a paused task asked (its pause's reason), and every answer given since."""

    text: str
    on: Literal["human", "agent"]
    """Whose answer it waits for: a person's (the owner's) or another agent's."""
    asked_by: str
    at: Timestamp
    answers: list[Answer] = []

    @property
    def answered(self) -> bool:
        return bool(self.answers)


class DependencyView(_Model):
    """A task this one depends on, as it stands."""

    number: int
    id: str
    state: State


ControlKind = Literal["hold", "veto", "stop"]


def scope_of(kind: str, agent: str | None, instance: str | None, task: int | None) -> str:
    """Whom a control binds, in words: an agent on a task (a veto), an agent, an instance,
    or every agent."""
    if kind == "veto":
        return f"{agent} on task {task}"
    if agent is not None:
        return agent
    return f"instance {instance}" if instance is not None else "every agent"


class Control(_Model):
    """One of the owner's controls (DESIGN §10): a hold or stop of an agent or an
    instance, a stop of every agent, or a veto of one agent on one task."""

    id: int
    kind: ControlKind
    agent: str | None = None
    instance: str | None = None
    task: int | None = None
    at: Timestamp
    by: str
    reason: str | None = None
    lifted_at: Timestamp | None = None
    lifted_by: str | None = None
    ended: list[int] = Field(default=[], exclude_if=lambda ended: not ended)
    """The tasks whose live claims this control ended when it was made (in the answer of
    hold, veto and stop)."""

    @property
    def live(self) -> bool:
        return self.lifted_at is None

    @property
    def scope(self) -> str:
        """Whom it binds, in words."""
        return scope_of(self.kind, self.agent, self.instance, self.task)


class TaskView(_Model):
    """A task with the facts the seed object has no room for (never inside ``task``)."""

    number: int
    task: Task
    lifecycle: Lifecycle
    priority: Priority = "normal"
    labels: list[Label] = []
    role: Role | None = None
    """The role its assignee must be enrolled in to claim it (seed 004's task role)."""
    fields_version: int = 1
    depends_on: list[DependencyView] = []
    """The tasks ``task.packet.depends_on`` names, by number, with their states."""
    blocked_by: list[int] = []
    """Those not completed yet: while any is, the task cannot be claimed."""
    attempts: int = 0
    """Failed outcomes so far."""
    max_attempts: int = 3
    """After this many failed outcomes the task is no longer claimable (lifecycle
    ``failed``) until the owner raises the limit or cancels it."""
    claim: ClaimView | None = None
    outcome: Literal["completed", "failed"] | None = None
    threshold: int | None = None
    confirmations: list[Confirmation] = []
    updates: list[UpdateView] = []
    usage: Usage = Usage.model_construct(tokens=0, usd_micros=0)  # no validator built on import
    merge: Merge | None = None
    draft: DraftView | None = None
    """The result's knowledge change, when it brings one."""
    evidence: list[EvidenceView] = []
    """The result's evidence, each with ``verified`` (from a receipt hivelite checked)."""
    decision: Decision | None = None
    last_reason: str | None = None
    origin: Literal["person", "agent"] = "person"
    """Who created the task: the owner, or an agent (seed 004: an agent only proposes)."""
    controls: list[Control] = []
    """The owner's live controls that bear on this task: a veto on it, a hold or stop of
    its assignee or of its holder's instance."""
    question: Question | None = None
    """Its latest question and the answers given, while it waits on one and after its
    holder resumed, until the next move."""

    def __repr__(self) -> str:
        return (f"TaskView(#{self.number} {self.task.packet.task!r}, {self.task.state.value},"
                f" {self.task.assignee}, {self.priority})")

    def _repr_html_(self) -> str:
        from .notebook import task_card

        return task_card(self)

    def record(self) -> dict[str, Any]:
        """The task as one flat row (for ``to_records`` and ``to_pandas``)."""
        claim = self.claim
        return {"number": self.number, "id": self.task.id, "title": self.task.packet.task,
                "state": self.task.state.value,
                "waiting_on": self.task.waiting_on.value if self.task.waiting_on else None,
                "lifecycle": self.lifecycle, "assignee": self.task.assignee,
                "requester": self.task.requester, "project": self.task.project,
                "priority": self.priority, "labels": list(self.labels),
                "holder": claim.holder if claim else None,
                "claim_expires": claim.expires_at if claim else None,
                "created_at": self.task.created_at, "updated_at": self.task.updated_at}


class Receipt(_Model):
    """What a write verb answers (seed 004's ``TaskAckV1``): the task and where it stands
    afterwards, from the values the write had in hand; ``Hive.get`` gives the full view."""

    number: int
    id: TaskId
    state: State
    waiting_on: WaitingOn | None = None
    at: Timestamp
    """When the write took effect (read under the write lock)."""
    seq: int | None = None
    """The seq of the last journal row this write added for the task; None when it
    journaled nothing for it (a checkpoint, an update or a renewal mid-work; rows of
    expired claims the write returned first do not count)."""

    def _repr_html_(self) -> str:
        from .notebook import receipt

        return receipt(self)


class ClaimReceipt(Receipt):
    """What claim, resume and renew answer (``TaskClaimAckV1``): the lease every later
    holder write carries."""

    lease_id: str
    fencing_token: int
    holder: AgentName
    instance: InstanceName
    session: str | None = None
    expires_at: Timestamp
    question: Question | None = None
    """A resume only: the question the task paused on, with every answer given."""


class NextClaim(ClaimReceipt):
    """What ``next`` answers: the claim, and the task it took (one call gives a worker
    everything it needs to start).

    The claim is the write's answer; ``task`` is the task's full view, read the first time
    it is asked for (after the commit, outside the write lock) and kept. A worker that
    only needs the lease never pays for the view; a face that shows the answer (its JSON,
    a terminal, a notebook) asks for it, so what it shows is unchanged. Read from an
    answer of another process (the HTTP client), it is the view that process sent.
    """

    _view: TaskView | None = PrivateAttr(default=None)
    _read: Callable[[int], TaskView] | None = PrivateAttr(default=None)

    @classmethod
    def of(cls, lease: ClaimReceipt, read: Callable[[int], TaskView]) -> NextClaim:
        """The answer to ``next`` from its claim, with how to read the task's view."""
        return made(cls, dict(lease.__dict__), {"_view": None, "_read": read})

    @computed_field  # type: ignore[prop-decorator]
    @property
    def task(self) -> TaskView:
        """The task's full view (``Hive.get``), read when first asked for."""
        if self._view is None:
            if self._read is None:
                raise LookupError(f"the view of task {self.number} was not kept with this"
                                  " answer")
            self._view = self._read(self.number)
        return self._view

    @model_validator(mode="wrap")
    @classmethod
    def _with_view(cls, data: Any, handler: ModelWrapValidatorHandler[NextClaim]
                   ) -> NextClaim:
        """An answer that carries its task's view (a JSON answer over HTTP) keeps it."""
        view = None
        if isinstance(data, dict) and "task" in data:
            data = dict(data)
            view = data.pop("task")
        made = handler(data)
        if view is not None:
            made._view = view if isinstance(view, TaskView) else TaskView.model_validate(view)
        return made


class ExpiredClaim(_Model):
    """A claim the clock ended: its task went back to ``routed``."""

    number: int
    id: TaskId
    holder: str
    from_state: State
    expired_at: Timestamp


class HandoffRequest(_Strict):
    """Everything a handoff needs; the web layer can take this body as it is."""

    requester: Annotated[AgentName, Field(
        description="owner/agent handing the work over (an agent hands off as itself).",
        examples=["ana/planner"])]
    assignee: Annotated[AgentName, Field(description="owner/agent who will do it.",
                                         examples=["ana/coder"])]
    project: Annotated[Slug, Field(description="The project the task belongs to.",
                                   examples=["shop"])]
    packet: Annotated[Packet, Field(
        description="What to do: task (5-500 characters), deliverable_type,"
        " acceptance_criteria (at least one), and optionally context, files, depends_on.",
        examples=[{"task": "Fix the login bug", "deliverable_type": "code",
                   "acceptance_criteria": ["tests pass"]}])]
    id: Annotated[TaskId | None, Field(
        description="The task's id, when the caller chooses it (else one is made).",
        examples=["login-bug"])] = None
    priority: Annotated[Priority, Field(description="low, normal, high or urgent.",
                                        examples=["high"])] = "normal"
    labels: Annotated[list[Label], Field(max_length=10, description="Up to 10 labels, each"
                                         " 1-32 of a-z, 0-9 and -.",
                                         examples=[["backend"]])] = []
    role: Annotated[Role | None, Field(
        description="The role its assignee must be enrolled in to claim it (1-64 of a-z,"
        " 0-9 and -, from a letter); none: any.", examples=["reviewer"])] = None


class GateDecision(_Model):
    """A permission gate's answer: allow, hold for the owner, or deny; with a reason."""

    action: Literal["allow", "hold", "deny"]
    reason: Annotated[str, Field(min_length=1, max_length=500)]
    plugin: str | None = None


class JournalEntry(_Model):
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


class DamagedRow(_Model):
    """A task whose stored row cannot be read (raw SQL wrote what hivelite never would)."""

    number: int
    id: str
    error: str
    """What failed when reading it."""


Until = Literal["outcome", "verdict"]
"""What ``await`` waits for: the task's outcome (it closes: completed, rejected or
cancelled), or the verdict on its submitted result (accepted, or sent back)."""


Outcome = Literal["completed", "rejected", "cancelled", "sent_back"]
"""How an awaited task settled: closed as completed, rejected or cancelled, or (a verdict)
its result sent back to its assignee (declined, rejected, or failing its checks)."""


class Awaited(_Model):
    """What ``await`` answers: where a task stands against what its caller waits for."""

    number: int
    until: Until
    since: int | None = None
    """The journal seq of the submission whose verdict is awaited (``verdict``)."""
    settled: bool
    """What was awaited has happened: the task closed, or the result was judged."""
    outcome: Outcome | None = None
    """How it settled (None until it has)."""
    reason: str | None = None
    """The reason the settling move gave, when it gave one."""
    status: str
    """Where it stands, in one line for people and models ("claimed by ana/coder on
    laptop", "1 of 2 confirmations", "held for the owner")."""
    decision: Literal["approve", "sign_off"] | None = None
    """A decision the caller, the owner, can make now to move it on: ``approve`` (or deny)
    a held handoff, ``sign_off`` (or decline) a result."""
    view: TaskView


class Page(_Model):
    """One page of a listing; pass ``next_cursor`` back to get the next."""

    items: list[TaskView]
    next_cursor: int | None = None
    damaged: list[DamagedRow] = Field(default=[], exclude_if=lambda rows: not rows)
    """Tasks of this page that cannot be read: named here, left out of ``items`` (in a
    page's JSON only when there are any)."""

    # A page is a sequence of its tasks: len, index, iterate (not pydantic's field pairs).
    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> TaskView: ...
    @overload
    def __getitem__(self, index: slice) -> list[TaskView]: ...
    def __getitem__(self, index: int | slice) -> TaskView | list[TaskView]:
        return self.items[index]

    def __iter__(self) -> Iterator[TaskView]:  # type: ignore[override]
        return iter(self.items)

    def __repr__(self) -> str:
        shown = ", ".join(f"#{v.number}" for v in self.items[:10])
        more = f", … {len(self.items) - 10} more" if len(self.items) > 10 else ""
        return (f"Page({len(self.items)} tasks: {shown}{more}; next_cursor={self.next_cursor}"
                + (f"; {len(self.damaged)} damaged" if self.damaged else "") + ")")

    def _repr_html_(self) -> str:
        from .notebook import task_table

        return task_table(self.items, more=self.next_cursor is not None)

    def to_records(self) -> list[dict[str, Any]]:
        """One flat dict per task (number, id, title, state, assignee, priority, claim...)."""
        return [v.record() for v in self.items]

    def to_pandas(self) -> Any:
        """The page as a ``pandas.DataFrame`` (pandas is not a dependency: install it)."""
        return _frame(self.to_records())


class History(list[JournalEntry]):
    """A task's journal rows, oldest first: a list, shown as a timeline in a notebook."""

    def __repr__(self) -> str:
        numbers = sorted({e.number for e in self if e.number is not None})
        about = f" of task #{numbers[0]}" if len(numbers) == 1 else ""
        return f"History({len(self)} rows{about})"

    def _repr_html_(self) -> str:
        from .notebook import timeline

        return timeline(self)

    def to_records(self) -> list[dict[str, Any]]:
        return [e.model_dump(mode="json") for e in self]

    def to_pandas(self) -> Any:
        """The rows as a ``pandas.DataFrame`` (pandas is not a dependency: install it)."""
        return _frame(self.to_records())


def _frame(records: list[dict[str, Any]]) -> Any:
    try:
        import pandas  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError("to_pandas needs pandas, which hivelite does not install:"
                          " pip install pandas (to_records gives the same rows)") from None
    return pandas.DataFrame.from_records(records)


class Signer(_Model):
    """A receipt signer the owner registered (a CI, say): its name and its key's
    fingerprint; the key itself stays in the owner's key directory."""

    name: str
    fingerprint: str


class IssuedSigner(Signer):
    """A signer as registered: its secret, shown this once, for the signer to keep."""

    secret: str


class Budget(_Model):
    """An agent's daily budget, what it used today and when the day resets."""

    agent: str
    tasks: int | None = None
    tokens: int | None = None
    usd_micros: int | None = None
    """Limits per day (None: no limit of that kind); money in millionths of a dollar."""
    day: str
    """Today in the store's time zone (``YYYY-MM-DD``)."""
    timezone: str
    used_tasks: int = 0
    used_tokens: int = 0
    used_usd_micros: int = 0
    resets_at: Timestamp
    set_at: Timestamp | None = None
    set_by: str | None = None

    @property
    def used_up(self) -> list[str]:
        """The limits reached today (a claim or usage write is then refused)."""
        return [name for name, limit, used in (
            ("tasks", self.tasks, self.used_tasks), ("tokens", self.tokens, self.used_tokens),
            ("usd_micros", self.usd_micros, self.used_usd_micros))
            if limit is not None and used >= limit]


class Enrolment(_Model):
    """An agent's enrolment (seed 004's opt-in): where the owner lets it work. ``projects``
    empty means every project; a task with a role is claimed only by an agent enrolled in
    it; ``rights`` are the writes it covers (its token's rights still apply). An ended
    enrolment refuses every write but giving a claim back (``409 optin_inactive``)."""

    agent: str
    projects: list[str] = []
    roles: list[str] = []
    rights: list[str]
    active: bool = True
    at: Timestamp
    by: str
    seq: int
    """The journal row that set it: a claim names it, and a change refuses the claim's next
    write (``409 optin_changed``)."""
    budget: Budget | None = None
    """Its daily budget (seed 004's opt-in budget), when it has one."""


class RequiredPluginView(_Model):
    """A policy plugin the owner requires of every process that writes."""

    name: str
    kind: Literal["entry_point", "file", "given"]
    digest: str
    settings: dict[str, Any] = {}
    at: Timestamp
    by: str


class StorePolicy(_Model):
    """The policy the owner recorded in the store; every process that opens it obeys it."""

    mode: Literal["personal", "team"] = "personal"
    threshold: int = 1
    """Independent confirmations a result needs (a plugin may decide otherwise)."""
    project_thresholds: dict[str, int] = {}
    timezone: str = "UTC"
    """Where a day begins for the daily budgets."""
    proposals: Literal["gate", "owner"] = "gate"
    """``gate``: the permission gate decides an agent's handoff; ``owner``: every task an
    agent proposes waits for the owner (seed 004)."""
    required_plugins: list[RequiredPluginView] = []
    enabled_plugins: list[str] = []
    """The installed plugins the owner enabled on this store: installing one enables it
    nowhere; a required one acts whether enabled or not."""

    def threshold_for(self, project: str) -> tuple[int, str]:
        """A project's threshold and where it comes from."""
        if project in self.project_thresholds:
            return self.project_thresholds[project], f"store policy (project {project})"
        return self.threshold, "store policy"


PluginState = Literal["ok", "missing", "changed", "settings_differ", "not_required",
                      "built_in", "not_policy", "not_enabled", "not_installed"]


class PluginStatus(_Model):
    """A plugin as this process loaded it, set against what the store requires."""

    name: str
    source: str
    hooks: list[str] = []
    policy: bool = False
    """Whether it answers a policy hook (gate, threshold, evidence, counting)."""
    essential: bool = False
    loaded: bool = True
    required: bool = False
    enabled: bool = False
    """Whether the store's owner enabled it on this store (an installed plugin acts on a
    store only then, or when the store requires it)."""
    status: PluginState = "ok"
    detail: str | None = None


class TokenView(_Model):
    """An access token as listed: never its secret (the store keeps only its hash)."""

    id: str
    agent: str | None = None
    """The agent it acts as; None for the owner's token."""
    instance: str | None = None
    rights: list[str]
    created_at: Timestamp
    expires_at: Timestamp | None = None
    revoked_at: Timestamp | None = None
    by: str


class IssuedToken(TokenView):
    """A new token, with its secret: shown this once, kept nowhere."""

    token: str


class StoreInfo(_Model):
    """What ``hivelite info`` shows: which store this is and how it stands."""

    location: str
    vault_id: str
    """The store's identity (``meta.store_id``): the vault id ``hivelite serve`` names it by."""
    owner: str
    schema_version: int
    tasks: dict[str, int]
    """Tasks by state."""
    mode: Literal["personal", "team"]
    live_controls: int
    required_plugins: list[str]
    enabled_plugins: list[str] = []
    """The installed plugins the owner enabled on this store (installing enables none)."""
    installed_not_enabled: list[str] = []
    """Plugins installed in this Python that do not act on this store: not enabled here."""
    live_tokens: int
    head: str | None = None
    """The journal's newest row, ``seq:hash``: note it elsewhere, and ``hivelite doctor
    --head`` checks later that the history up to it was not rewritten."""
    chain_key: str | None = None
    """Where the owner's key that seals the journal is (None: none on this machine)."""
    signing_vkey: str | None = None
    """This machine's checkpoint-signing key, as the verifier key another machine trusts
    it by (``trusted.vkeys``) and a witness cosigns for (``hivelite witness --owner``);
    None: no store was signed here yet."""
    imported_unsigned: str | None = None
    """When the store was imported from an export no signature vouched for (``hivelite
    import --unsigned``); None: it was not."""
    key_state: Literal["sealed", "new_here", "missing", "other", "dropped"] = "new_here"
    """How the store stands with the owner's key on this machine: ``sealed`` (it names its
    key, which is here), ``new_here`` (it names none, and this machine's keys folder has
    never keyed it: a new store to this machine, whose first write here makes its key),
    ``missing`` (it names a key that is not here: writes are refused, reads work),
    ``other`` (the key here is not the one it names), ``dropped`` (this folder keyed it
    and it no longer names its key: writes are refused)."""


class Identity(_Model):
    """Who a token proves, and in which vault (``GET /v1/whoami``)."""

    vault_id: str
    kind: Literal["owner", "agent"]
    name: str
    instance: str | None = None
    session: str | None = None
    rights: list[str]
    token_id: str
