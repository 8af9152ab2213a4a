"""``TaskFace``: what the CLI's task verbs need of a store, local or served.

A ``Hive`` (the file) and a ``Client`` (``hivelite serve``, with a token) both have it, so
``hivelite next``, ``submit``, ``show``, … run unchanged against either (``--url`` and
``--token`` choose the server). mypy holds both to it (``cli_context._both_are_faces``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Protocol

from ..core.caller import Caller
from ..core.clock import Clock
from ..core.models import (
    ClaimReceipt,
    Evidence,
    HandoffRequest,
    History,
    NextClaim,
    Page,
    Receipt,
    TaskView,
)
from .table import Verb


class TaskFace(Protocol):
    """The task verbs of a store, as the CLI calls them."""

    clock: Clock

    def __enter__(self) -> TaskFace: ...
    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...
    def as_owner(self) -> Caller: ...
    def call(self, verb: Verb | str, caller: Caller | None, ref: str | int | None = None,
             request_id: str | None = None, **fields: Any) -> Any: ...
    def get(self, ref: str | int) -> TaskView: ...
    def history(self, ref: str | int) -> History: ...
    def lease(self, caller: Caller, ref: str | int) -> ClaimReceipt: ...
    def handoff(self, caller: Caller, request: HandoffRequest | None = None, *,
                depends_on: Sequence[int | str] | None = None, request_id: str | None = None,
                **fields: Any) -> Receipt: ...
    def claim(self, caller: Caller, ref: str | int, *, minutes: int = 10,
              request_id: str | None = None) -> ClaimReceipt: ...
    def resume(self, caller: Caller, ref: str | int, *, minutes: int = 10,
               request_id: str | None = None) -> ClaimReceipt: ...
    def claim_next(self, caller: Caller, *, minutes: int = 10, project: str | None = None,
                   label: str | None = None, skip: Sequence[int] = (), wait: float = 0,
                   request_id: str | None = None) -> NextClaim: ...
    def renew(self, caller: Caller, ref: str | int, *, lease_id: str, token: int,
              minutes: int = 10, request_id: str | None = None) -> ClaimReceipt: ...
    def release(self, caller: Caller, ref: str | int, *, lease_id: str | None = None,
                token: int | None = None, reason: str | None = None,
                request_id: str | None = None) -> Receipt: ...
    def checkpoint(self, caller: Caller, ref: str | int, *, lease_id: str, token: int,
                   progress: str, decisions: list[str] | None = None,
                   files_touched: list[str] | None = None,
                   next_steps: list[str] | None = None,
                   open_questions: list[str] | None = None,
                   request_id: str | None = None) -> Receipt: ...
    def update(self, caller: Caller, ref: str | int, *, lease_id: str, token: int,
               summary: str, tokens: int | None = None, usd_micros: int | None = None,
               request_id: str | None = None) -> Receipt: ...
    def pause(self, caller: Caller, ref: str | int, *, lease_id: str, token: int, on: str,
              reason: str, request_id: str | None = None) -> Receipt: ...
    def answer(self, caller: Caller, ref: str | int, *, text: str,
               request_id: str | None = None) -> Receipt: ...
    def submit(self, caller: Caller, ref: str | int, *, lease_id: str, token: int,
               summary: str, evidence: Sequence[Evidence | Mapping[str, Any]],
               provenance: str = "agent_generated",
               outcome: Literal["completed", "failed"] = "completed",
               tokens: int | None = None, usd_micros: int | None = None,
               draft: Mapping[str, Any] | None = None,
               request_id: str | None = None) -> Receipt: ...
    def verify(self, caller: Caller, ref: str | int, *,
               verdict: Literal["accept", "reject"] = "accept", reason: str | None = None,
               request_id: str | None = None) -> Receipt: ...
    def set_fields(self, caller: Caller, ref: str | int, *, base_version: int,
                   priority: str | None = None, labels: Sequence[str] | None = None,
                   add_labels: Sequence[str] = (), remove_labels: Sequence[str] = (),
                   max_attempts: int | None = None,
                   request_id: str | None = None) -> Receipt: ...
    def amend(self, caller: Caller, ref: str | int, *, summary: str | None = None,
              evidence: Sequence[Evidence | Mapping[str, Any]] | None = None,
              merge_commit: str | None = None, request_id: str | None = None) -> Receipt: ...
    def list(self, *, state: str | Sequence[str] | None = None, assignee: str | None = None,
             limit: int = 50) -> Page: ...  # last: the name would hide ``list`` above


__all__ = ["TaskFace"]
