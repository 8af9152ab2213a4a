"""The MCP tools: an agent's verbs for any MCP-speaking agent (the ``mcp`` SDK's server).

Each tool calls the ``Hive`` as the caller a token proved, never as anyone a tool's
arguments name; a refusal comes back as an MCP tool error reading
``code/reason: message``, so the model sees why and what to do. Input schemas come from
the tools' typed parameters, which use the library's own models and limits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from ..caller import Caller
from ..claims import DEFAULT_LEASE_MINUTES, MAX_LEASE_MINUTES, MIN_LEASE_MINUTES
from ..errors import HiveliteError
from ..hive import Hive
from ..models import Evidence

Who = Callable[[], tuple[Hive, Caller]]
"""Where a tool call runs: the store and the caller the token proved."""
T = TypeVar("T")

Number = Annotated[int, Field(ge=1, description="The task's number.")]
Minutes = Annotated[int, Field(ge=MIN_LEASE_MINUTES, le=MAX_LEASE_MINUTES,
                               description="How long the lease lasts.")]
LeaseId = Annotated[str, Field(description="The claim's lease id (from claim or next_task).")]
Token = Annotated[int, Field(ge=1, description="The claim's fencing token.")]

TOOLS = ("list_tasks", "show_task", "next_task", "claim", "my_lease", "renew", "release",
         "checkpoint", "update", "pause", "submit_result", "verify", "history")
"""The tools every hivelite MCP server offers."""


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def build_mcp(who: Who) -> MCPServer:
    """An MCP server whose tools act through ``who()`` (the store and the token's caller)."""
    server = MCPServer(
        "hivelite", instructions="Tasks, claims and results: take work with next_task, report"
        " with checkpoint and update, return it with submit_result (with evidence). Every"
        " write under a claim carries its lease_id and fencing token.")

    def run(call: Callable[[Hive, Caller], T]) -> Any:
        hive, caller = who()
        try:
            return _plain(call(hive, caller))
        except HiveliteError as error:
            raise ToolError(f"{error.code}/{error.reason}: {error.message}") from None

    @server.tool()
    def list_tasks(state: list[str] | None = None, mine: bool = True, ready: bool = False,
                   limit: Annotated[int, Field(ge=1, le=500)] = 50,
                   after: int | None = None) -> Any:
        """Tasks, oldest first: by default the calling agent's own (mine=false for all);
        ready=true keeps only those it could claim now."""
        return run(lambda h, c: h.list(state=state or None, ready=ready, limit=limit,
                                       cursor=after, assignee=c.name if mine else None))

    @server.tool()
    def show_task(number: Number) -> Any:
        """One task: the packet, its state, the claim, the result and verdicts."""
        return run(lambda h, c: h.get(number))

    @server.tool()
    def next_task(minutes: Minutes = DEFAULT_LEASE_MINUTES, project: str | None = None,
                  label: str | None = None) -> Any:
        """Claim the best ready task assigned to you: the claim (lease id, fencing token,
        expiry) and the task."""
        return run(lambda h, c: h.claim_next(c, minutes=minutes, project=project,
                                             label=label))

    @server.tool()
    def claim(number: Number, minutes: Minutes = DEFAULT_LEASE_MINUTES) -> Any:
        """Claim one routed task assigned to you, under a lease with a fencing token."""
        return run(lambda h, c: h.claim(c, number, minutes=minutes))

    @server.tool()
    def my_lease(number: Number) -> Any:
        """Your live claim on a task again (lease id, fencing token, expiry), if you hold
        it from this instance: for when the claim's answer is no longer at hand."""
        return run(lambda h, c: h.lease(c, number))

    @server.tool()
    def renew(number: Number, lease_id: LeaseId, token: Token,
              minutes: Minutes = DEFAULT_LEASE_MINUTES) -> Any:
        """Extend your live claim before it runs out."""
        return run(lambda h, c: h.renew(c, number, lease_id=lease_id, token=token,
                                        minutes=minutes))

    @server.tool()
    def release(number: Number, lease_id: LeaseId, token: Token,
                reason: str | None = None) -> Any:
        """Give the task back (it is routed again)."""
        return run(lambda h, c: h.release(c, number, lease_id=lease_id, token=token,
                                          reason=reason))

    @server.tool()
    def checkpoint(number: Number, lease_id: LeaseId, token: Token, progress: str,
                   next_steps: list[str] | None = None,
                   open_questions: list[str] | None = None) -> Any:
        """Record where the work stands (the first one starts the work)."""
        return run(lambda h, c: h.checkpoint(c, number, lease_id=lease_id, token=token,
                                             progress=progress, next_steps=next_steps,
                                             open_questions=open_questions))

    @server.tool()
    def update(number: Number, lease_id: LeaseId, token: Token,
               summary: Annotated[str, Field(max_length=300)], tokens: int | None = None,
               usd_micros: int | None = None) -> Any:
        """One line of progress (never a prompt), with optional usage."""
        return run(lambda h, c: h.update(c, number, lease_id=lease_id, token=token,
                                         summary=summary, tokens=tokens,
                                         usd_micros=usd_micros))

    @server.tool()
    def pause(number: Number, lease_id: LeaseId, token: Token,
              on: Literal["human", "agent"], reason: str) -> Any:
        """Wait for an outside answer; the claim ends (resume by claiming again)."""
        return run(lambda h, c: h.pause(c, number, lease_id=lease_id, token=token, on=on,
                                        reason=reason))

    @server.tool()
    def submit_result(number: Number, lease_id: LeaseId, token: Token, summary: str,
                      evidence: Annotated[list[Evidence], Field(min_length=1, max_length=20)],
                      outcome: Literal["completed", "failed"] = "completed",
                      tokens: int | None = None, usd_micros: int | None = None) -> Any:
        """Return the result with evidence; the claim ends and the task is judged."""
        return run(lambda h, c: h.submit(c, number, lease_id=lease_id, token=token,
                                         summary=summary, evidence=evidence,
                                         outcome=outcome, tokens=tokens,
                                         usd_micros=usd_micros))

    @server.tool()
    def verify(number: Number, verdict: Literal["accept", "reject"] = "accept",
               reason: str | None = None) -> Any:
        """Your independent verdict on another agent's submitted result (a reject needs a
        reason)."""
        return run(lambda h, c: h.verify(c, number, verdict=verdict, reason=reason))

    @server.tool()
    def history(number: Number) -> Any:
        """The task's journal: every move, who made it and why (``entries``, oldest
        first)."""
        return {"entries": run(lambda h, c: h.history(number))}

    return server


__all__ = ["TOOLS", "build_mcp"]
