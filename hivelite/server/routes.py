"""The HTTP routes: seed 004's table under ``/v1/vaults/{vault_id}/tasks``, then ours.

One row per route: its method and path, the right its token needs, its body, and how it
calls the ``Hive``. The app (``app.py``) and the OpenAPI document are built from this
table alone, so a route cannot be served without being documented, or documented
without being served.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..caller import Caller
from ..errors import InvalidInput
from ..hive import Hive
from ..models import (
    ClaimReceipt,
    HandoffRequest,
    JournalEntry,
    NextClaim,
    Page,
    Receipt,
    TaskView,
)
from .bodies import (
    AmendBody,
    Body,
    CheckpointBody,
    ClaimBody,
    FieldsBody,
    NextBody,
    PauseBody,
    ReasonBody,
    ReleaseBody,
    RenewBody,
    ResultBody,
    UpdateBody,
    VerifyBody,
)

Call = Callable[[Hive, Caller, Any, Any, str | None], Any]
"""(hive, caller, the task number or None, the parsed body or query, the request id)."""


@dataclass(frozen=True)
class Route:
    """One route: ``path`` is below ``/v1/vaults/{vault_id}/tasks``."""

    name: str
    method: str
    path: str
    right: str
    """``tasks.read``, ``tasks.propose``, ``tasks.work`` or ``owner``."""
    call: Call
    body: type[BaseModel] | None = None
    answer: type[BaseModel] | None = None
    summary: str = ""
    seed: bool = False
    """One of seed 004's routes (the rest are ours)."""


def _list(hive: Hive, caller: Caller, number: Any, query: Mapping[str, Any],
          request_id: str | None) -> Page:
    """GET …/tasks?state=…&role=assignee|requester&mine=true&priority=…&limit=…&after=…"""
    role = query.get("role", "assignee")
    mine = query.get("mine") in ("true", "1", "yes")
    if role not in ("assignee", "requester"):
        raise InvalidInput("invalid_role", f"role is assignee or requester, not {role!r}",
                           field="role")
    return hive.list(state=_many(query, "state"), priority=_many(query, "priority"),
                     limit=_integer(query, "limit", 50),
                     cursor=_integer(query, "after", None),
                     ready=query.get("ready") in ("true", "1", "yes"),
                     assignee=caller.name if mine and role == "assignee" else None,
                     requester=caller.name if mine and role == "requester" else None)


def _many(query: Mapping[str, Any], name: str) -> list[str] | None:
    """A filter's values: ``state=routed,working`` (None: no filter)."""
    values = [v for v in str(query.get(name) or "").split(",") if v]
    return values or None


def _integer(query: Mapping[str, Any], name: str, default: int | None) -> Any:
    text = query.get(name)
    if text is None or text == "":
        return default
    if not (str(text).isascii() and str(text).isdigit()):
        raise InvalidInput(f"invalid_{name}", f"{name} is a whole number, not {text!r}",
                           field=name)
    return int(text)


def _fenced(body: Any) -> dict[str, Any]:
    return {"lease_id": body.lease_id, "token": body.token}


ROUTES: tuple[Route, ...] = (
    Route("list_tasks", "GET", "", "tasks.read", _list, answer=Page, seed=True,
          summary="Tasks, filtered (state, role, mine, priority), oldest first, a page at"
          " a time."),
    Route("show_task", "GET", "/{number}", "tasks.read",
          lambda h, c, n, b, r: h.get(n), answer=TaskView, seed=True,
          summary="One task: the seed object with its claim, verdicts and usage."),
    Route("propose", "POST", "", "tasks.propose",
          lambda h, c, n, b, r: h.handoff(c, b, request_id=r), body=HandoffRequest,
          answer=Receipt, seed=True,
          summary="Hand work off (propose a task); the owner's gate decides."),
    Route("claim", "POST", "/{number}/claim", "tasks.work",
          lambda h, c, n, b, r: h.claim(c, n, minutes=b.minutes, request_id=r),
          body=ClaimBody, answer=ClaimReceipt, seed=True,
          summary="Claim a routed task under a lease with a fencing token."),
    Route("renew", "POST", "/{number}/claim/renew", "tasks.work",
          lambda h, c, n, b, r: h.renew(c, n, **_fenced(b), minutes=b.minutes, request_id=r),
          body=RenewBody, answer=ClaimReceipt, seed=True, summary="Extend the live claim."),
    Route("release", "POST", "/{number}/release", "tasks.work",
          lambda h, c, n, b, r: h.release(c, n, lease_id=b.lease_id, token=b.token,
                                          reason=b.reason, request_id=r),
          body=ReleaseBody, answer=Receipt, seed=True, summary="Give the task back."),
    Route("update", "POST", "/{number}/updates", "tasks.work",
          lambda h, c, n, b, r: h.update(c, n, **_fenced(b), summary=b.summary,
                                         tokens=b.tokens, usd_micros=b.usd_micros,
                                         request_id=r),
          body=UpdateBody, answer=Receipt, seed=True,
          summary="One line of progress, with optional usage."),
    Route("submit_result", "POST", "/{number}/result", "tasks.work",
          lambda h, c, n, b, r: h.submit(c, n, **_fenced(b), summary=b.summary,
                                         evidence=b.evidence, provenance=b.provenance,
                                         outcome=b.outcome, tokens=b.tokens,
                                         usd_micros=b.usd_micros, request_id=r),
          body=ResultBody, answer=Receipt, seed=True,
          summary="Return a result with evidence; the claim ends."),
    Route("verify", "POST", "/{number}/verify", "tasks.work",
          lambda h, c, n, b, r: h.verify(c, n, verdict=b.verdict, reason=b.reason,
                                         request_id=r),
          body=VerifyBody, answer=Receipt, seed=True,
          summary="An independent verdict on a submitted result."),
    Route("set_fields", "PATCH", "/{number}", "tasks.propose",
          lambda h, c, n, b, r: h.set_fields(c, n, base_version=b.base_version,
                                             priority=b.priority, labels=b.labels,
                                             add_labels=b.add_labels,
                                             remove_labels=b.remove_labels,
                                             max_attempts=b.max_attempts, request_id=r),
          body=FieldsBody, answer=Receipt, seed=True,
          summary="Priority and labels, at the task's fields_version."),
    Route("amend", "POST", "/{number}/amend", "tasks.work",
          lambda h, c, n, b, r: h.amend(c, n, summary=b.summary, evidence=b.evidence,
                                        merge_commit=b.merge_commit, request_id=r),
          body=AmendBody, answer=Receipt, seed=True,
          summary="Correct a result awaiting a decision, or record a merge."),
    Route("next_task", "POST", "/next", "tasks.work",
          lambda h, c, n, b, r: h.claim_next(c, minutes=b.minutes, project=b.project,
                                             label=b.label, request_id=r),
          body=NextBody, answer=NextClaim,
          summary="Claim the best ready task of the calling agent."),
    Route("checkpoint", "POST", "/{number}/checkpoint", "tasks.work",
          lambda h, c, n, b, r: h.checkpoint(
              c, n, **_fenced(b), progress=b.progress, decisions=b.decisions,
              files_touched=b.files_touched, next_steps=b.next_steps,
              open_questions=b.open_questions, request_id=r),
          body=CheckpointBody, answer=Receipt, summary="Record where the work stands."),
    Route("pause", "POST", "/{number}/pause", "tasks.work",
          lambda h, c, n, b, r: h.pause(c, n, **_fenced(b), on=b.on, reason=b.reason,
                                        request_id=r),
          body=PauseBody, answer=Receipt, summary="Wait for an outside answer."),
    Route("resume", "POST", "/{number}/resume", "tasks.work",
          lambda h, c, n, b, r: h.resume(c, n, minutes=b.minutes, request_id=r),
          body=ClaimBody, answer=ClaimReceipt, summary="Claim a paused task again."),
    Route("lease", "GET", "/{number}/claim", "tasks.work",
          lambda h, c, n, b, r: h.lease(c, n), answer=ClaimReceipt,
          summary="The live claim's lease id and fencing token again, for its holder alone."),
    Route("history", "GET", "/{number}/history", "tasks.read",
          lambda h, c, n, b, r: h.history(n), summary="The task's journal, oldest first."),
    *(Route(verb, "POST", f"/{{number}}/{verb.replace('_', '-')}", "owner",
            (lambda method: lambda h, c, n, b, r: getattr(h, method)(
                c, n, reason=b.reason, request_id=r))(verb),
            body=ReasonBody, answer=Receipt, summary=f"The owner's {verb.replace('_', '-')}.")
      for verb in ("approve", "deny", "cancel", "sign_off", "decline")),
)
"""Every route the server serves, seed 004's first."""

LIST_ANSWERS: dict[str, type[BaseModel]] = {"history": JournalEntry}
"""Routes that answer a list of a model."""

__all__ = ["LIST_ANSWERS", "ROUTES", "Body", "Route"]
