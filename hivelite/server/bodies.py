"""The request bodies of the HTTP routes (seed 004's ``Task*RequestV1`` shapes, as ours).

Who calls is never in a body: it comes from the token alone. Every body refuses keys it
does not know, so a typo is a ``422``, not a silently ignored field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..claims import DEFAULT_LEASE_MINUTES


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClaimBody(Body):
    """``TaskClaimRequestV1``: how long the lease lasts (5-15 minutes)."""

    minutes: int = DEFAULT_LEASE_MINUTES


class NextBody(ClaimBody):
    """Claim the best ready task, optionally of one project or label."""

    project: str | None = None
    label: str | None = None


class Fenced(Body):
    """Every holder write carries the claim's lease id and fencing token."""

    lease_id: str
    token: int


class RenewBody(Fenced):
    """``TaskClaimRenewRequestV1``."""

    minutes: int = DEFAULT_LEASE_MINUTES


class ReleaseBody(Body):
    """``TaskReleaseRequestV1``: the holder's lease (the owner releases without one)."""

    lease_id: str | None = None
    token: int | None = None
    reason: str | None = None


class UpdateBody(Fenced):
    """``TaskUpdateRequestV1``: one short summary, with optional usage."""

    summary: str
    tokens: int | None = None
    usd_micros: int | None = None


class CheckpointBody(Fenced):
    progress: str
    decisions: list[str] = []
    files_touched: list[str] = []
    next_steps: list[str] = []
    open_questions: list[str] = []


class PauseBody(Fenced):
    on: Literal["human", "agent"]
    reason: str


class ResultBody(Fenced):
    """``TaskResultRequestV1``: the holder's result with its evidence."""

    summary: str
    evidence: Annotated[list[dict[str, Any]], Field(min_length=1, max_length=20)]
    provenance: str = "agent_generated"
    outcome: Literal["completed", "failed"] = "completed"
    tokens: int | None = None
    usd_micros: int | None = None


class VerifyBody(Body):
    """``TaskVerifyRequestV1``: a verdict on a submitted result (a reject needs a reason)."""

    verdict: Literal["accept", "reject"] = "accept"
    reason: str | None = None


class FieldsBody(Body):
    """``TaskFieldsRequestV1``: priority and labels at ``base_version``."""

    base_version: int
    priority: str | None = None
    labels: list[str] | None = None
    add_labels: list[str] = []
    remove_labels: list[str] = []
    max_attempts: int | None = None
    """The owner only: failed outcomes allowed before the task stops being claimable."""


class AmendBody(Body):
    summary: str | None = None
    evidence: list[dict[str, Any]] | None = None
    merge_commit: str | None = None


class ReasonBody(Body):
    """The owner's decisions on a task (approve, deny, cancel, sign-off, decline)."""

    reason: str | None = None
