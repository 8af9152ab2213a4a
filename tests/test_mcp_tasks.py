"""MCP Tasks (issue 33): long tool calls answered with durable tasks, through the ``mcp``
SDK's own client declaring the extension ``io.modelcontextprotocol/tasks``.

In memory (the server built as ``hivelite mcp`` builds it) for each state and refusal,
and over a real ``hivelite serve`` for the orchestrator's flow: a handoff followed from
``working`` to ``completed`` while two other agents claim, submit and verify, another
token refused the task, and the task read again after the server restarted.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar, Literal

import pytest

pytest.importorskip("mcp")

import anyio
import httpx
from mcp import Client
from mcp.client.extension import (
    ClaimContext,
    ClientExtension,
    NotificationBinding,
    ResultClaim,
    advertise,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import CallToolResult, NotificationParams, Request, RequestParams, Result
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict

from hivelite import Hive, ManualClock
from hivelite.faces.server.mcp_calls import Acting
from hivelite.faces.server.mcp_tasks import CAPABILITIES, NAMED, SPEC, TASKS, declared
from hivelite.faces.server.mcp_tools import TOOLS, build_mcp

from .conftest import (
    CODER,
    GUEST,
    HANG_S,
    OWNER,
    PLANNER,
    REVIEWER,
    START,
    held_task,
    own_task,
)
from .test_serve import TASK, serving

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]
NOT_FOUND = -32602
MISSING = -32021


class Handle(Result):
    """A ``CreateTaskResult``, every field kept."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    task_id: str
    status: str


class Detailed(Result):
    """A ``tasks/get`` answer, every field kept."""

    model_config = ConfigDict(extra="allow")
    result_type: str
    task_id: str
    status: str


class Ack(Result):
    model_config = ConfigDict(extra="allow")


class TaskParams(RequestParams):
    task_id: str


class UpdateParams(TaskParams):
    input_responses: dict[str, Any]


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    name_param: ClassVar[str | None] = "taskId"


class UpdateTask(Request[UpdateParams, Literal["tasks/update"]]):
    name_param: ClassVar[str | None] = "taskId"


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    name_param: ClassVar[str | None] = "taskId"


class ListenParams(RequestParams):
    notifications: dict[str, Any]


class Listen(Request[ListenParams, Literal["subscriptions/listen"]]):
    pass


class Seen(NotificationParams):
    """A ``notifications/tasks`` frame, every field kept."""

    model_config = ConfigDict(extra="allow")


async def _unresolved(handle: Handle, ctx: ClaimContext) -> CallToolResult:
    raise AssertionError("the tests read each task handle themselves")


class Tasks(ClientExtension):
    """A client that declares the Tasks extension and takes task handles as they come."""

    identifier = TASKS

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=Handle, resolve=_unresolved)]

    def notifications(self) -> list[NotificationBinding[Any]]:
        async def note(params: Seen) -> None:
            self.seen.append(params.model_dump(by_alias=True, mode="json"))
        return [NotificationBinding(method="notifications/tasks", params_type=Seen,
                                    handler=note)]


class Orchestrator:
    """One MCP client with the Tasks extension: calls tools, reads and answers tasks."""

    def __init__(self, client: Client, extension: Tasks | None = None) -> None:
        self.client = client
        self.extension = extension

    async def listen(self, task_ids: list[str]) -> None:
        """``subscriptions/listen`` for these tasks, until the server ends the stream."""
        await self.client.session.send_request(
            Listen(method="subscriptions/listen",
                   params=ListenParams(notifications={"taskIds": task_ids})), Ack)

    async def start(self, tool: str, arguments: dict[str, Any]) -> Handle | CallToolResult:
        found: Handle | CallToolResult = await self.client.session.call_tool(
            tool, arguments, allow_claimed=True)
        return found

    async def get(self, task_id: str) -> dict[str, Any]:
        got = await self.client.session.send_request(
            GetTask(method="tasks/get", params=TaskParams(task_id=task_id)), Detailed)
        return got.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def update(self, task_id: str, responses: dict[str, Any]) -> None:
        await self.client.session.send_request(UpdateTask(
            method="tasks/update",
            params=UpdateParams(task_id=task_id, input_responses=responses)), Ack)

    async def cancel(self, task_id: str) -> None:
        await self.client.session.send_request(
            CancelTask(method="tasks/cancel", params=TaskParams(task_id=task_id)), Ack)


def answer(result: Any) -> Any:
    assert isinstance(result, CallToolResult) and not result.is_error, result
    return json.loads(result.content[0].text)


def result_of(task: dict[str, Any]) -> tuple[Any, bool]:
    """A completed task's tool result: its JSON answer, and whether it is an error."""
    result = task["result"]
    return json.loads(result["content"][0]["text"]), result["isError"]


# -- in memory: the server ``hivelite mcp`` builds, acting as a token's caller ------------

@pytest.fixture
def hive(tmp_path: Path) -> Any:
    with Hive.open(tmp_path / "s.db", owner="ana", clock=ManualClock(START)) as opened:
        yield opened


def acting(hive: Hive, who: Any, rights: list[str] | None = None) -> Acting:
    """The caller a fresh token of ``who`` proves, as the MCP face sees it."""
    token = (hive.add_token(OWNER) if who.is_owner else
             hive.add_token(OWNER, who.name, instance=who.instance, rights=rights))
    auth = hive.authenticate(token.token)
    return Acting(hive, auth.caller, auth.token_id)


@asynccontextmanager
async def connected(found: Acting, *, tasks: bool = True) -> AsyncIterator[Orchestrator]:
    server = build_mcp(lambda: found, found.caller.kind)
    extension = Tasks()
    async with Client(server, extensions=[extension] if tasks else None) as client:
        yield Orchestrator(client, extension)


def in_approval(hive: Hive) -> int:
    """A task whose result, submitted by ana/coder, awaits its verdict."""
    n = own_task(hive)
    lease = hive.claim(CODER, n)
    hive.submit(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    return n


def run(flow: Callable[[], Any]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(HANG_S):  # a guard against a hang, never a deadline
            await flow()
    anyio.run(bounded)


def test_a_handoff_followed_as_a_task_moves_from_working_to_completed(hive: Hive) -> None:
    planner = acting(hive, PLANNER)

    async def flow() -> None:
        async with connected(planner) as orchestrator:
            handle = await orchestrator.start("handoff", {**TASK, "wait": 30})
            assert isinstance(handle, Handle) and handle.status == "working"
            created = handle.model_dump(by_alias=True, mode="json")
            assert created["resultType"] == "task" and created["pollIntervalMs"] > 0
            assert created["ttlMs"] == 24 * 3600 * 1000
            n = hive.list().items[-1].number
            assert str(n) != handle.task_id and len(handle.task_id) >= 36
            named = {"number": n, "id": hive.get(n).task.id}
            assert created["_meta"][NAMED] == named  # the handle names the task it follows
            assert created["statusMessage"] == f"task {n}: routed to ana/coder, not claimed yet"
            got = await orchestrator.get(handle.task_id)
            assert (got["status"], got["statusMessage"]) == (
                "working", f"task {n}: routed to ana/coder, not claimed yet")
            assert got["_meta"][NAMED] == named
            lease = hive.claim(CODER, n)
            got = await orchestrator.get(handle.task_id)
            assert got["statusMessage"] == f"task {n}: claimed: claimed by ana/coder on laptop"
            hive.submit(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token,
                        summary="done", evidence=EVIDENCE)
            got = await orchestrator.get(handle.task_id)
            assert got["statusMessage"] == (
                f"task {n}: result awaits its verdict: 0 of 1 confirmations")
            hive.verify(REVIEWER, n)
            got = await orchestrator.get(handle.task_id)
            assert got["status"] == "completed" and got["resultType"] == "complete"
            assert got["_meta"][NAMED] == named
            done, is_error = result_of(got)
            assert not is_error and (done["settled"], done["outcome"]) == (True, "completed")
            assert done["view"]["task"]["result"]["summary"] == "done"
            assert [c["reviewer"] for c in done["view"]["confirmations"]] == ["ana/reviewer"]

    run(flow)


def test_a_held_handoff_asks_the_owner_who_approves_it_by_tasks_update(hive: Hive) -> None:
    owner, guest = acting(hive, OWNER), acting(hive, GUEST)
    n = held_task(hive)

    async def flow() -> None:
        async with connected(guest) as asker:  # the agent's own task: held, working
            handle = await asker.start("await_verdict", {"number": n, "until": "outcome",
                                                          "wait": 30})
            assert isinstance(handle, Handle)
            got = await asker.get(handle.task_id)
            assert (got["status"], got["statusMessage"]) == (
                "working", f"task {n}: held for the owner")
        async with connected(owner) as ana:
            handle = await ana.start("await_verdict", {"number": n, "until": "outcome",
                                                        "wait": 30})
            assert isinstance(handle, Handle)
            got = await ana.get(handle.task_id)
            assert got["status"] == "input_required"
            (key, request), = got["inputRequests"].items()
            assert request["method"] == "elicitation/create"
            schema = request["params"]["requestedSchema"]
            assert schema["properties"]["decision"]["enum"] == ["approve", "deny"]
            await ana.update(handle.task_id, {"unknown-1": {"action": "accept", "content": {
                "decision": "deny"}}})  # an answer to no request: ignored
            assert (await ana.get(handle.task_id))["status"] == "input_required"
            await ana.update(handle.task_id, {key: {"action": "accept", "content": {
                "decision": "approve", "reason": "go ahead"}}})
            got = await ana.get(handle.task_id)
            assert (got["status"], got["statusMessage"]) == (
                "working", f"task {n}: routed to ana/coder, not claimed yet")
            assert "inputRequests" not in got

    run(flow)
    approved = [e for e in hive.history(n) if e.move == 4]
    assert [(e.actor, e.reason) for e in approved] == [("ana", "go ahead")]


def test_a_sign_off_is_asked_of_the_owner_and_a_decline_completes_with_is_error(
        hive: Hive) -> None:
    owner, n = acting(hive, OWNER), in_approval(hive)

    async def flow() -> None:
        async with connected(owner) as ana:
            handle = await ana.start("await_verdict", {"number": n, "until": "verdict",
                                                        "wait": 30})
            assert isinstance(handle, Handle)
            got = await ana.get(handle.task_id)
            (key, _), = got["inputRequests"].items()
            assert key.startswith("sign_off-")
            with pytest.raises(MCPError) as refused:  # a decline needs its reason
                await ana.update(handle.task_id, {key: {"action": "accept", "content": {
                    "decision": "decline"}}})
            assert refused.value.code == NOT_FOUND and "reason" in refused.value.message
            await ana.update(handle.task_id, {key: {"action": "accept", "content": {
                "decision": "decline", "reason": "tests are missing"}}})
            got = await ana.get(handle.task_id)
            assert got["status"] == "completed"
            sent, is_error = result_of(got)
            assert is_error and (sent["outcome"], sent["reason"]) == (
                "sent_back", "tests are missing")

    run(flow)


def test_next_with_a_wait_is_a_task_that_claims_once_work_is_ready(hive: Hive) -> None:
    coder = acting(hive, CODER)

    async def flow() -> None:
        async with connected(coder) as worker:
            handle = await worker.start("next_task", {"wait": 30})
            assert isinstance(handle, Handle)
            waiting = await worker.get(handle.task_id)
            assert waiting["statusMessage"] == "waiting for a ready task"
            assert NAMED not in waiting["_meta"]  # no task yet to name
            n = own_task(hive)
            got = await worker.get(handle.task_id)
            claim, is_error = result_of(got)
            assert got["status"] == "completed" and not is_error
            assert (claim["number"], claim["holder"]) == (n, "ana/coder")
            assert got["statusMessage"] == f"task {n}: claimed"
            assert got["_meta"][NAMED] == {"number": n, "id": claim["id"]}
            again = await worker.get(handle.task_id)  # the claim is kept, never made twice
            assert result_of(again)[0]["lease_id"] == claim["lease_id"]
            assert len([e for e in hive.history(n) if e.move == 6]) == 1
            now = await worker.start("next_task", {"wait": 30, "skip": [n]})  # ready: at once
            own_task(hive)
            at_once = await worker.start("next_task", {"wait": 30})
            assert isinstance(at_once, CallToolResult) and not at_once.is_error
            assert answer(at_once)["holder"] == "ana/coder"
            assert isinstance(now, Handle)  # (the first: none was ready for it)
            await worker.cancel(now.task_id)
            ready = await worker.start("next_task", {"wait": 30})  # nothing left: a task
            assert isinstance(ready, Handle)
            await worker.cancel(ready.task_id)
            own_task(hive)
            assert (await worker.get(ready.task_id))["status"] == "cancelled"

    run(flow)


def test_a_listen_stream_notifies_each_change_of_a_task_until_it_ends(hive: Hive) -> None:
    planner = acting(hive, PLANNER)

    async def flow() -> None:
        async with connected(planner) as orchestrator:
            handle = await orchestrator.start("handoff", {**TASK, "wait": 30})
            assert isinstance(handle, Handle) and orchestrator.extension is not None
            seen = orchestrator.extension.seen
            n = hive.list().items[-1].number

            async def shown(words: str) -> None:
                """Until the stream has notified a state saying ``words``."""
                while not any(words in f.get("statusMessage", "") for f in seen):
                    await anyio.sleep(0.05)

            async def work() -> None:
                await shown("not claimed yet")
                lease = await anyio.to_thread.run_sync(hive.claim, CODER, n)
                await shown("claimed by")
                await anyio.to_thread.run_sync(lambda: hive.submit(
                    CODER, n, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE))
                await shown("awaits its verdict")
                await anyio.to_thread.run_sync(hive.verify, REVIEWER, n)

            async with anyio.create_task_group() as group:
                group.start_soon(work)
                await orchestrator.listen([handle.task_id, "hlw_" + "B" * 32])
            assert {frame["taskId"] for frame in seen} == {handle.task_id}
            states = [(f["status"], f.get("statusMessage")) for f in seen]
            assert states[0] == ("working", f"task {n}: routed to ana/coder, not claimed yet")
            assert ("working", f"task {n}: claimed: claimed by ana/coder on laptop") in states
            assert all(f["_meta"][NAMED]["number"] == n for f in seen)  # and the stream's id
            assert all(SUBSCRIPTION_ID_META_KEY in f["_meta"] for f in seen)
            assert states[-1][0] == "completed" and "result" in seen[-1]
            assert len(states) == len(set(map(str, seen)))  # each change once
            got = await orchestrator.get(handle.task_id)
            assert got["result"] == seen[-1]["result"]

    run(flow)


def test_cancelling_a_handoffs_task_cancels_the_handoff_only_where_its_caller_may(
        hive: Hive) -> None:
    owner, planner = acting(hive, OWNER), acting(hive, PLANNER)

    async def flow() -> None:
        async with connected(owner) as ana:
            handle = await ana.start("handoff", {**TASK, "wait": 30})
            assert isinstance(handle, Handle)
            n = hive.list().items[-1].number
            await ana.cancel(handle.task_id)
            got = await ana.get(handle.task_id)
            assert (got["status"], got["statusMessage"]) == (
                "cancelled", f"task {n} cancelled by this tasks/cancel, and no longer"
                " followed (cancelled: cancelled by its MCP task)")
            assert hive.get(n).task.state.value == "cancelled"
        async with connected(planner) as agent:  # not its to cancel: it stops following
            handle = await agent.start("handoff", {**TASK, "wait": 30})
            assert isinstance(handle, Handle)
            n = hive.list().items[-1].number
            await agent.cancel(handle.task_id)
            got = await agent.get(handle.task_id)
            assert got["status"] == "cancelled"
            assert got["statusMessage"] == (  # it says the task goes on, and why
                f"stopped following task {n}; the task itself is still open (routed to"
                " ana/coder, not claimed yet): only the owner 'ana' (or, in team mode, an"
                " agent of the owner who requested it) may cancel it, and ana/planner may"
                " not")
            assert got["_meta"][NAMED] == {"number": n, "id": hive.get(n).task.id}
            assert hive.get(n).task.state.value == "routed"
            followed = await agent.start("await_verdict", {"number": n, "wait": 30})
            assert isinstance(followed, Handle)
            await agent.cancel(followed.task_id)  # an await never cancels its task
            got = await agent.get(followed.task_id)
            assert got["statusMessage"] == (
                f"stopped following task {n}; the task itself is still open (routed to"
                " ana/coder, not claimed yet): a tasks/cancel of an await stops following,"
                " never cancels the task")
            hive.cancel(OWNER, n, reason="done elsewhere")
            got = await agent.get(handle.task_id)  # closed since: it says so
            assert (got["status"], got["statusMessage"]) == (
                "cancelled", f"stopped following task {n}; it has closed since (cancelled:"
                " done elsewhere)")

    run(flow)


def test_what_a_task_ends_with_it_keeps_and_a_declined_form_is_not_asked_again(
        hive: Hive) -> None:
    owner, n = acting(hive, OWNER), in_approval(hive)

    async def flow() -> None:
        async with connected(owner) as ana:
            asked = await ana.start("await_verdict", {"number": n, "until": "verdict",
                                                       "wait": 30})
            ended = await ana.start("await_verdict", {"number": n, "until": "verdict",
                                                       "wait": 30})
            assert isinstance(asked, Handle) and isinstance(ended, Handle)
            (key, _), = (await ana.get(asked.task_id))["inputRequests"].items()
            await ana.update(asked.task_id, {key: {"action": "decline"}})
            got = await ana.get(asked.task_id)  # not asked again under its key
            assert got["status"] == "working" and "inputRequests" not in got
            assert got["statusMessage"].startswith(f"task {n}: result awaits")
            assert got["statusMessage"].endswith("you declined to decide for now")
            await ana.cancel(ended.task_id)
            hive.sign_off(OWNER, n)
            got = await ana.get(ended.task_id)  # cancelled it stays
            assert (got["status"], got["statusMessage"]) == (
                "cancelled", f"stopped following task {n}; it has closed since (completed)")
            assert (await ana.get(asked.task_id))["status"] == "completed"
            await ana.cancel(asked.task_id)  # ended: a cancel changes nothing
            assert (await ana.get(asked.task_id))["status"] == "completed"

    run(flow)


def test_a_next_task_of_a_stopped_agent_waits_saying_why(hive: Hive) -> None:
    coder = acting(hive, CODER)

    async def flow() -> None:
        async with connected(coder) as worker:
            handle = await worker.start("next_task", {"wait": 30})
            assert isinstance(handle, Handle)
            hive.stop(OWNER, agent=CODER.name, reason="lunch")
            own_task(hive)
            got = await worker.get(handle.task_id)
            assert got["status"] == "working"
            assert got["statusMessage"].startswith("cannot claim now: forbidden_right/")
            hive.lift(OWNER, agent=CODER.name)
            assert (await worker.get(handle.task_id))["status"] == "completed"

    run(flow)


def test_a_handoff_that_cannot_be_followed_is_refused_before_it_is_made(hive: Hive) -> None:
    proposer = acting(hive, PLANNER, rights=["tasks.propose"])

    async def flow() -> None:
        async with connected(proposer) as planner:
            refused = await planner.start("handoff", {**TASK, "wait": 30})
            assert isinstance(refused, CallToolResult) and refused.is_error
            assert "forbidden_right/not_permitted" in refused.content[0].text

    run(flow)
    assert hive.list().items == []


def test_a_handoff_made_is_never_answered_as_an_error(hive: Hive,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Once handed off, a failure to follow it answers the receipt: a model that saw an
    error would hand the work off again."""
    from hivelite import StoreBusy
    from hivelite.verbs.table import BY_NAME, Verb

    planner = acting(hive, PLANNER)

    def busy(self: Verb, *args: Any, **kwargs: Any) -> Any:
        if self.name == "await":
            raise StoreBusy("busy", "the store is busy")
        return calls(self, *args, **kwargs)

    calls = Verb.call
    monkeypatch.setattr(Verb, "call", busy)

    async def flow() -> None:
        async with connected(planner) as orchestrator:
            got = await orchestrator.start("handoff", {**TASK, "wait": 30})
            assert isinstance(got, CallToolResult) and not got.is_error
            assert answer(got)["state"] == "routed"
            plainly = await orchestrator.client.call_tool("handoff", {**TASK, "wait": 1})
            assert not plainly.is_error and answer(plainly)["state"] == "routed"

    run(flow)
    assert len(hive.list().items) == 2 and BY_NAME["await"].name == "await"


def test_a_stream_ends_with_its_token_and_a_task_ends_with_its_ttl(hive: Hive,
                                                                  tmp_path: Path) -> None:
    planner = acting(hive, PLANNER)

    async def flow() -> None:
        async with connected(planner) as orchestrator:
            handle = await orchestrator.start("handoff", {**TASK, "wait": 30})
            assert isinstance(handle, Handle) and orchestrator.extension is not None

            async def revoke() -> None:
                while not orchestrator.extension.seen:  # type: ignore[union-attr]
                    await anyio.sleep(0.05)
                await anyio.to_thread.run_sync(hive.revoke_token, OWNER, planner.token)

            async with anyio.create_task_group() as group:
                group.start_soon(revoke)
                await orchestrator.listen([handle.task_id])  # ends: the token is gone
            assert [f["status"] for f in orchestrator.extension.seen] == ["working"]
            with pytest.raises(MCPError) as refused:
                await orchestrator.get(handle.task_id)
            assert refused.value.code == NOT_FOUND

    run(flow)
    again = acting(hive, PLANNER)

    async def expired() -> None:
        async with connected(again) as orchestrator:
            handle = await orchestrator.start("handoff", {**TASK, "wait": 30})
            assert isinstance(handle, Handle)
            hive.clock.advance(hours=24, seconds=1)  # type: ignore[attr-defined]
            with pytest.raises(MCPError) as refused:
                await orchestrator.get(handle.task_id)
            assert refused.value.code == NOT_FOUND

    run(expired)


def test_a_task_is_its_callers_alone(hive: Hive) -> None:
    planner, reviewer = acting(hive, PLANNER), acting(hive, REVIEWER)
    second = acting(hive, PLANNER)  # the same agent, another token

    async def flow() -> None:
        async with connected(planner) as mine:
            handle = await mine.start("handoff", {**TASK, "wait": 30})
            assert isinstance(handle, Handle)
        for other in (reviewer, second):
            async with connected(other) as them:
                for call in (them.get, them.cancel):
                    with pytest.raises(MCPError) as refused:
                        await call(handle.task_id)
                    assert refused.value.code == NOT_FOUND
                with pytest.raises(MCPError) as refused:
                    await them.update(handle.task_id, {})
                assert refused.value.code == NOT_FOUND
                assert them.extension is not None
                await them.listen([handle.task_id])  # acknowledged with none: it ends
                assert them.extension.seen == []
        async with connected(planner) as mine:
            with pytest.raises(MCPError) as refused:
                await mine.get("hlw_" + "A" * 32)
            assert refused.value.code == NOT_FOUND
            assert (await mine.get(handle.task_id))["status"] == "working"

    run(flow)


def test_a_client_without_the_extension_gets_plain_results_and_the_fallback_tools(
        hive: Hive) -> None:
    planner = acting(hive, PLANNER)

    async def flow() -> None:
        async with connected(planner, tasks=False) as plain:
            listed = {t.name: t for t in (await plain.client.list_tools()).tools}
            tools = set(listed)
            assert {"get_task", "wait_task"} <= tools == set(TOOLS["agent"])
            for name, field in (("get_task", "task_id"), ("wait_task", "task_id"),
                                ("wait_task", "wait"), ("handoff", "wait"),
                                ("await_verdict", "until"), ("await_verdict", "wait")):
                shown = listed[name].input_schema["properties"][field]  # the list alone
                assert shown.get("description") and listed[name].description, (name, field)
            assert listed["get_task"].input_schema["required"] == ["task_id"]
            got = answer(await plain.client.call_tool("handoff", {**TASK, "wait": 0.2}))
            assert (got["settled"], got["status"]) == (
                False, "routed to ana/coder, not claimed yet")
            assert got["task_id"].startswith("hlw_")
            n = got["number"]
            shown = answer(await plain.client.call_tool("get_task", {"task_id": got["task_id"]}))
            assert shown["status"] == "working"
            hive.cancel(OWNER, n, reason="not needed")
            shown = answer(await plain.client.call_tool("wait_task", {
                "task_id": got["task_id"], "wait": 5}))
            assert (shown["status"], shown["statusMessage"]) == (
                "cancelled", f"task {n}: cancelled: not needed")
            assert shown["_meta"][NAMED] == {"number": n, "id": hive.get(n).task.id}
            receipt = answer(await plain.client.call_tool("handoff", TASK))  # no wait: as ever
            assert receipt["state"] == "routed" and "task_id" not in receipt
            with pytest.raises(MCPError) as refused:  # tasks/* need the extension
                await plain.get(got["task_id"])
            assert refused.value.code == MISSING
            with pytest.raises(MCPError) as refused:  # and so do its notifications
                await plain.listen([got["task_id"]])
            assert refused.value.code == MISSING
            assert refused.value.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}

    run(flow)


def submit_as_coder(hive: Hive, n: int) -> None:
    lease = hive.claim(CODER, n)
    hive.submit(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)


def test_a_verdict_awaited_before_any_submission_waits_for_the_first_to_come(
        hive: Hive) -> None:
    """Not refused (``not_submitted``): a task, ``working`` until a result comes, then
    completed with that result's verdict, even once another result followed it."""
    planner = acting(hive, PLANNER)
    n, m = own_task(hive), own_task(hive)

    async def flow() -> None:
        async with connected(planner) as orchestrator:
            handle = await orchestrator.start("await_verdict", {
                "number": n, "until": "verdict", "wait": 30})
            assert isinstance(handle, Handle), handle
            shown = handle.model_dump(by_alias=True, mode="json")
            assert shown["statusMessage"] == (
                f"task {n}: routed to ana/coder, not claimed yet; no result submitted yet")
            submit_as_coder(hive, n)
            got = await orchestrator.get(handle.task_id)
            assert (got["status"], got["statusMessage"]) == (
                "working", f"task {n}: result awaits its verdict: 0 of 1 confirmations")
            hive.verify(REVIEWER, n, verdict="reject", reason="no tests")
            submit_as_coder(hive, n)  # sent back and submitted again before it looked
            got = await orchestrator.get(handle.task_id)
            sent, is_error = result_of(got)
            assert (got["status"], is_error) == ("completed", True)
            assert (sent["outcome"], sent["reason"]) == ("sent_back", "no tests")
            first = next(e.seq for e in hive.history(n) if e.move == 12)
            assert sent["since"] == first
        async with connected(planner, tasks=False) as plain:  # the tools, the same rule
            got = answer(await plain.client.call_tool("await_verdict", {
                "number": m, "until": "verdict", "wait": 0.1}))
            assert (got["settled"], got["since"]) == (False, None)
            hive.cancel(OWNER, m, reason="not needed")  # no result will come: it ends
            kept = answer(await plain.client.call_tool("wait_task", {
                "task_id": got["task_id"], "wait": 30}))
            assert (kept["status"], kept["statusMessage"]) == (
                "cancelled", f"task {m}: cancelled: not needed")
            refused = await plain.client.call_tool("await_verdict", {  # asked afresh
                "number": m, "until": "verdict"})
            assert refused.is_error
            assert "invalid_state/not_submitted" in refused.content[0].text

    run(flow)


# -- what declares the extension (M04, M05): the request's own _meta alone -------------

def ctx_of(meta: Any, version: str = SPEC) -> Any:
    """What :func:`declared` reads of a request: its protocol version and ``_meta``."""
    return SimpleNamespace(protocol_version=version, meta=meta)


def capabilities(extensions: Any) -> dict[str, Any]:
    return {CAPABILITIES: {"extensions": extensions}}


@pytest.mark.parametrize(("meta", "version", "expected"), [
    (capabilities({TASKS: {}}), SPEC, True),
    (capabilities({TASKS: {"x": 1}, "io.example/other": {}}), SPEC, True),
    (None, SPEC, False),  # nothing declared on this request
    ({}, SPEC, False),
    (capabilities({}), SPEC, False),
    (capabilities({"io.example/other": {}}), SPEC, False),  # another extension only
    (capabilities({TASKS + "-v2": {}}), SPEC, False),  # another name, however close
    (capabilities({"io.modelcontextprotocol/Tasks": {}}), SPEC, False),
    (capabilities({"io.modelcontextprotocol": {"tasks": {}}}), SPEC, False),
    (capabilities([TASKS]), SPEC, False),  # not the spec's shape: a list
    (capabilities(TASKS), SPEC, False),
    ({CAPABILITIES: [TASKS]}, SPEC, False),
    ({TASKS: {}}, SPEC, False),  # beside the capabilities, not in them
    ({"extensions": {TASKS: {}}}, SPEC, False),
    ({CAPABILITIES: {"experimental": {TASKS: {}}}}, SPEC, False),
    (capabilities({TASKS: {}}), "2025-11-25", False),  # an older protocol: no extension
    (capabilities({TASKS: {}}), "2025-06-18", False),
    (capabilities({TASKS: {}}), "2099-01-01", False),  # a version this server does not speak
])
def test_only_a_request_that_declares_the_extension_itself_declares_it(
        meta: Any, version: str, expected: bool) -> None:
    assert declared(ctx_of(meta, version)) is expected


def test_a_request_that_does_not_declare_the_extension_gets_no_task(hive: Hive) -> None:
    """Declared for the session only (in the capabilities of an older protocol's
    handshake), not on the request; or declared by another client: a plain result. The
    request that declares it gets its task."""
    planner = acting(hive, PLANNER)
    server = build_mcp(lambda: planner, "agent")
    n = own_task(hive)

    async def flow() -> None:
        async with Client(server, mode="legacy", extensions=[advertise(TASKS)]) as legacy:
            assert legacy.protocol_version not in MODERN_PROTOCOL_VERSIONS
            got = await legacy.session.call_tool("await_verdict", {"number": n, "wait": 0.1},
                                                 allow_claimed=True)
            assert isinstance(got, CallToolResult) and not got.is_error
            assert answer(got)["settled"] is False and "task_id" in answer(got)
        async with connected(planner, tasks=False) as plain, connected(planner) as declaring:
            got = await plain.start("await_verdict", {"number": n, "wait": 0.1})
            assert isinstance(got, CallToolResult) and not got.is_error
            handle = await declaring.start("await_verdict", {"number": n, "wait": 30})
            assert isinstance(handle, Handle)  # the same call, declared: a task
            again = await plain.start("await_verdict", {"number": n, "wait": 0.1})
            assert isinstance(again, CallToolResult)  # the other client's declaration is
            # not this one's

    run(flow)


# -- over a real ``hivelite serve``: the orchestrator, the restart --------------------

def test_an_orchestrator_follows_a_handoff_over_http_and_its_task_survives_a_restart(
        tmp_path: Path) -> None:
    from .test_serve import hivelite

    db = tmp_path / "store.db"
    hivelite(db, "init", "--owner", "ana")
    tokens = {who: hivelite(db, "token", "add", name, "--instance", instance)["token"]
              for who, name, instance in (("planner", "ana/planner", "desktop"),
                                          ("coder", "ana/coder", "laptop"),
                                          ("reviewer", "ana/reviewer", "desktop"))}

    def connect(url: str, who: str, *, tasks: bool = True,
                extension: Tasks | None = None) -> Client:
        from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

        http = create_mcp_http_client(headers={"Authorization": f"Bearer {tokens[who]}"})
        return Client(streamable_http_client(url + "/mcp", http_client=http),
                      extensions=[extension or Tasks()] if tasks else None)

    async def first(url: str) -> tuple[str, int]:
        async with connect(url, "planner") as client:
            orchestrator = Orchestrator(client)
            handle = await orchestrator.start("handoff", {**TASK, "wait": 30})
            assert isinstance(handle, Handle)
            got = await orchestrator.get(handle.task_id)
            assert got["status"] == "working"
        async with connect(url, "coder", tasks=False) as coder:
            lease = answer(await coder.call_tool("next_task", {}))
            n = lease["number"]
            answer(await coder.call_tool("submit_result", {
                "number": n, "lease_id": lease["lease_id"], "token": lease["fencing_token"],
                "summary": "done", "evidence": EVIDENCE}))
        async with connect(url, "reviewer") as reviewer:
            with pytest.raises(MCPError) as refused:  # another token: not found
                await Orchestrator(reviewer).get(handle.task_id)
            assert refused.value.code == NOT_FOUND
        wrong = httpx.post(url + "/mcp", headers={
            "Authorization": f"Bearer {tokens['planner']}", "Mcp-Method": "tasks/get",
            "Mcp-Name": "another", "MCP-Protocol-Version": "2026-07-28",
            "Accept": "application/json, text/event-stream"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {
                "taskId": handle.task_id, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {
                        "extensions": {TASKS: {}}}}}}, timeout=HANG_S).json()
        assert wrong["error"]["code"] == -32020  # Mcp-Name must name the task
        return handle.task_id, n

    async def second(url: str, task_id: str, n: int) -> None:
        async with connect(url, "planner") as client:
            orchestrator = Orchestrator(client)
            got = await orchestrator.get(task_id)
            assert got["status"] == "working"
            assert got["statusMessage"] == (
                f"task {n}: result awaits its verdict: 0 of 1 confirmations")
            assert got["_meta"][NAMED]["number"] == n
        async with connect(url, "reviewer", tasks=False) as reviewer:
            assert answer(await reviewer.call_tool("verify", {"number": n}))["state"] == (
                "completed")
        extension = Tasks()
        async with connect(url, "planner", extension=extension) as client:
            got = await Orchestrator(client).get(task_id)
            assert got["status"] == "completed"
            assert result_of(got)[0]["view"]["task"]["state"] == "completed"
            await Orchestrator(client).listen([task_id])  # over SSE: its state, then the end
            assert [(f["taskId"], f["status"]) for f in extension.seen] == [
                (task_id, "completed")]

    with serving(tmp_path, [str(db)]) as (url, _, _):
        found: dict[str, Any] = {}

        async def one() -> None:
            with anyio.fail_after(HANG_S):
                found["task"] = await first(url)
        anyio.run(one)
    with serving(tmp_path, [str(db)]) as (url, _, _):  # a new server on the same store

        async def two() -> None:
            with anyio.fail_after(HANG_S):
                await second(url, *found["task"])
        anyio.run(two)


def test_hivelite_mcp_over_stdio_answers_a_long_call_with_a_task(tmp_path: Path) -> None:
    """A real ``hivelite mcp`` process, started by the SDK's stdio client: the extension is
    advertised, ``next_task`` on an empty queue is a task, and it claims once work is
    handed off by another process."""
    from .test_mcp import stdio_server

    db = tmp_path / "s.db"
    with Hive.open(db, owner="ana") as opened:
        token = opened.add_token(OWNER, "ana/coder", instance="laptop").token
    params = stdio_server(db, token)

    async def flow() -> None:
        with anyio.fail_after(HANG_S):
            async with Client(params, extensions=[Tasks()]) as client:
                assert TASKS in (client.server_capabilities.extensions or {})
                worker = Orchestrator(client)
                handle = await worker.start("next_task", {"wait": 30})
                assert isinstance(handle, Handle)
                assert (await worker.get(handle.task_id))["status"] == "working"
                with Hive.open(db) as other:
                    n = own_task(other)
                got = await worker.get(handle.task_id)
                assert got["status"] == "completed"
                assert result_of(got)[0]["number"] == n

    anyio.run(flow)


# -- docs/serve.md's Python client, run as a reader would run it ------------------------

SERVE_MD = Path(__file__).resolve().parents[1] / "docs" / "serve.md"


def serve_md_client() -> str:
    """The Python client docs/serve.md shows (the one block that listens)."""
    from .docblocks import blocks

    found = [b for b in blocks(SERVE_MD.read_text(encoding="utf-8"))
             if b.lang == "python" and "subscriptions/listen" in b.body]
    assert len(found) == 1, "docs/serve.md shows one Python Tasks client"
    assert found[0].not_run is not None and "tests/test_mcp_tasks.py" in found[0].not_run
    return found[0].body


def test_the_python_client_of_docs_serve_md_follows_a_handoff_on_a_real_server(
        tmp_path: Path) -> None:
    """The page's client, unchanged, in its own interpreter with the owner's token, against
    a real ``hivelite serve``; an agent (hivelite's ``Client``, with its own token) claims
    and submits once the handoff is there. The client sees the handle name the task,
    the owner's form, signs off, and is notified that the task completed."""
    import os
    import subprocess
    import sys

    from hivelite.faces.client import Client as Agent

    from .conftest import ready
    from .test_serve import hivelite, serving

    script = tmp_path / "client.py"
    script.write_text(serve_md_client(), encoding="utf-8")
    db = tmp_path / "store.db"
    hivelite(db, "init", "--owner", "ana")
    owner = hivelite(db, "token", "add", "--owner")["token"]
    coder = hivelite(db, "token", "add", "ana/coder", "--instance", "laptop")["token"]
    out, err = tmp_path / "client.out", tmp_path / "client.err"
    with serving(tmp_path, [str(db)]) as (url, _, _), out.open("w") as stdout, \
            err.open("w") as stderr:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
        client = subprocess.Popen([sys.executable, str(script)], stdout=stdout,
                                  stderr=stderr, text=True,
                                  env={**env, "HIVELITE_URL": url, "HIVELITE_TOKEN": owner})
        try:
            with Agent(url, coder) as agent:
                ready(lambda: agent.list().items, "the client's handoff", client,
                      err.read_text)
                lease = agent.claim_next(None)
                agent.submit(None, lease.number, lease_id=lease.lease_id,
                             token=lease.fencing_token, summary="Fixed", evidence=EVIDENCE)
            assert client.wait(timeout=HANG_S) == 0, err.read_text()
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()
    with Hive.open(db) as opened:
        n = lease.number
        task_id = opened.get(n).task.id
        assert opened.get(n).task.state.value == "completed"
        signed = [e for e in opened.history(n) if e.to_state == "completed"]
        assert [e.actor for e in signed] == ["ana"]  # the owner's tasks/update
    assert out.read_text().splitlines() == [
        f"task {n}: routed to ana/coder, not claimed yet {{'number': {n}, 'id': '{task_id}'}}",
        f'The result of task {n} awaits your decision. Its task reads: "Fix the login bug"',
        f"notified: completed task {n}: completed"]
