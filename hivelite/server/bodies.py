"""The request bodies of the HTTP routes (seed 004's ``Task*RequestV1`` shapes, as ours).

Who calls is never in a body: it comes from the token alone. Every body refuses keys it
does not know, so a typo is a ``422``, not a silently ignored field. Values the verb
checks itself (lease minutes, usage, the fencing token, versions and attempts, pause,
verdict and outcome) pass
through as sent, typed only in the schema, so a bad one gets the verb's own reason, the
same over HTTP as from a ``Hive`` (``invalid_usage``, not a generic body error).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from starlette.requests import Request

from ..claims import DEFAULT_LEASE_MINUTES, MAX_LEASE_MINUTES, MIN_LEASE_MINUTES
from ..errors import InvalidInput

MAX_BODY = 1 << 20
"""The largest request body read (a full result with twenty pieces of evidence is a few
hundred kB): anything longer is refused before it is all in memory."""


async def read_body(request: Request, limit: int = MAX_BODY) -> bytes:
    """The request's body, or ``422 body_too_large`` once it passes ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise InvalidInput("body_too_large", f"a request body is at most {limit} bytes",
                           field="body")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise InvalidInput("body_too_large", f"a request body is at most {limit} bytes",
                               field="body")
        chunks.append(chunk)
    return b"".join(chunks)

Minutes = Annotated[Any, WithJsonSchema({
    "type": "integer", "minimum": MIN_LEASE_MINUTES, "maximum": MAX_LEASE_MINUTES})]
Usage = Annotated[Any, WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 0},
                                                 {"type": "null"}]})]
Fence = Annotated[Any, WithJsonSchema({"type": "integer"})]
OptionalFence = Annotated[Any, WithJsonSchema({"anyOf": [{"type": "integer"},
                                                         {"type": "null"}]})]
Version = Annotated[Any, WithJsonSchema({"type": "integer", "minimum": 1})]
Attempts = Annotated[Any, WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 1},
                                                    {"type": "null"}]})]
PauseOn = Annotated[Any, WithJsonSchema({"type": "string", "enum": ["human", "agent"]})]
Outcome = Annotated[Any, WithJsonSchema({"type": "string", "enum": ["completed", "failed"]})]
Verdict = Annotated[Any, WithJsonSchema({"type": "string", "enum": ["accept", "reject"]})]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClaimBody(Body):
    """``TaskClaimRequestV1``: how long the lease lasts (5-15 minutes)."""

    minutes: Minutes = DEFAULT_LEASE_MINUTES


class NextBody(ClaimBody):
    """Claim the best ready task, optionally of one project or label."""

    project: str | None = None
    label: str | None = None


class Fenced(Body):
    """Every holder write carries the claim's lease id and fencing token."""

    lease_id: str
    token: Fence


class RenewBody(Fenced):
    """``TaskClaimRenewRequestV1``."""

    minutes: Minutes = DEFAULT_LEASE_MINUTES


class ReleaseBody(Body):
    """``TaskReleaseRequestV1``: the holder's lease (the owner releases without one)."""

    lease_id: str | None = None
    token: OptionalFence = None
    reason: str | None = None


class UpdateBody(Fenced):
    """``TaskUpdateRequestV1``: one short summary, with optional usage."""

    summary: str
    tokens: Usage = None
    usd_micros: Usage = None


class CheckpointBody(Fenced):
    progress: str
    decisions: list[str] = []
    files_touched: list[str] = []
    next_steps: list[str] = []
    open_questions: list[str] = []


class PauseBody(Fenced):
    on: PauseOn
    reason: str


class ResultBody(Fenced):
    """``TaskResultRequestV1``: the holder's result with its evidence."""

    summary: str
    evidence: Annotated[list[dict[str, Any]], Field(min_length=1, max_length=20)]
    provenance: str = "agent_generated"
    outcome: Outcome = "completed"
    tokens: Usage = None
    usd_micros: Usage = None


class VerifyBody(Body):
    """``TaskVerifyRequestV1``: a verdict on a submitted result (a reject needs a reason)."""

    verdict: Verdict = "accept"
    reason: str | None = None


class FieldsBody(Body):
    """``TaskFieldsRequestV1``: priority and labels at ``base_version``."""

    base_version: Version
    priority: str | None = None
    labels: list[str] | None = None
    add_labels: list[str] = []
    remove_labels: list[str] = []
    max_attempts: Attempts = None
    """The owner only: failed outcomes allowed before the task stops being claimable."""


class AmendBody(Body):
    summary: str | None = None
    evidence: list[dict[str, Any]] | None = None
    merge_commit: str | None = None


class ReasonBody(Body):
    """The owner's decisions on a task (approve, deny, cancel, sign-off, decline)."""

    reason: str | None = None
