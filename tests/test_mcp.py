"""MCP (issue 17): the tools through the ``mcp`` SDK's own client, in memory and over stdio
with a real ``hivelite mcp`` process. Tools act as the token's agent; a refusal is an MCP
tool error with the code and reason; input schemas carry the library's limits."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from mcp import Client, StdioServerParameters

from hivelite import Hive, ManualClock
from hivelite.faces.server.mcp_calls import Acting
from hivelite.faces.server.mcp_tools import TOOLS, build_mcp

from .conftest import CODER, HANG_S, OWNER, START, own_task
from .test_cli_e2e import hivelite_command
from .test_serve import TASK, Server, server  # noqa: F401 - the served store, a fixture

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]


def answer(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def refusal(result: Any) -> str:
    assert result.is_error
    text: str = result.content[0].text
    return text


def test_the_tools_in_memory_act_as_the_tokens_agent(tmp_path: Path) -> None:
    hive = Hive.open(tmp_path / "s.db", owner="ana", clock=ManualClock(START))
    coder = hive.authenticate(hive.add_token(OWNER, "ana/coder", instance="laptop").token)
    reviewer = hive.authenticate(hive.add_token(OWNER, "ana/reviewer",
                                                instance="desktop").token)
    n = own_task(hive)

    async def flow() -> None:
        async with Client(build_mcp(lambda: Acting(hive, coder.caller, None))) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == set(TOOLS["agent"])
            schema = tools["claim"].input_schema["properties"]["minutes"]
            assert (schema["minimum"], schema["maximum"]) == (5, 15)
            assert tools["submit_result"].input_schema["properties"]["evidence"]["minItems"] == 1
            got = answer(await client.call_tool("next_task", {}))
            assert (got["number"], got["holder"], got["instance"]) == (n, "ana/coder", "laptop")
            assert (got["task"]["number"], got["task"]["claim"]["holder"]) == (
                n, "ana/coder")  # the answer shows the task it took
            fence = {"number": n, "lease_id": got["lease_id"], "token": got["fencing_token"]}
            again = answer(await client.call_tool("my_lease", {"number": n}))
            assert (again["lease_id"], again["fencing_token"]) == (got["lease_id"],
                                                                   got["fencing_token"])
            answer(await client.call_tool("checkpoint", {**fence, "progress": "started"}))
            late = refusal(await client.call_tool(
                "update", {**fence, "token": 99, "summary": "late"}))
            assert "invalid_state/stale_claim:" in late
            done = answer(await client.call_tool("submit_result", {
                **fence, "summary": "fixed", "evidence": EVIDENCE}))
            assert done["state"] == "approval"
            assert "forbidden_right/self_verify" in refusal(
                await client.call_tool("verify", {"number": n}))
            mine = answer(await client.call_tool("list_tasks", {"mine": True}))
            assert [t["number"] for t in mine["items"]] == [n]
        async with Client(build_mcp(lambda: Acting(hive, reviewer.caller, None))) as client:
            assert answer(await client.call_tool("verify", {"number": n}))["state"] == (
                "completed")
            moves = [e["move"] for e in answer(await client.call_tool(
                "history", {"number": n}))["entries"] if e.get("move")]
            assert moves == [1, 6, 7, 12, 14, 16]
            assert "not_found/no_such_task" in refusal(
                await client.call_tool("show_task", {"number": 99}))

    anyio.run(flow)
    hive.close()


def test_hivelite_mcp_over_stdio_with_a_token(tmp_path: Path) -> None:
    """A real ``hivelite mcp`` process, started by the SDK's stdio client as an agent's
    MCP client would start it."""
    db = tmp_path / "s.db"
    with Hive.open(db, owner="ana") as hive:
        token = hive.add_token(OWNER, "ana/coder", instance="laptop").token
        n = own_task(hive)
    params = stdio_server(db, token)

    async def flow() -> None:
        with anyio.fail_after(HANG_S):
            await stdio(params, n)

    anyio.run(flow)
    with Hive.open(db) as hive:
        assert hive.get(n).claim is not None


def stdio_server(db: Path, token: str) -> StdioServerParameters:
    """``hivelite --db DB mcp`` with ``token``, as an agent's MCP client starts it: in a
    clean environment, no plugin loaded."""
    command = hivelite_command()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    return StdioServerParameters(
        command=command[0], args=[*command[1:], "--db", str(db), "mcp"],
        env={**clean, "HIVELITE_TOKEN": token, "HIVELITE_LOAD_PLUGINS": ""})


async def stdio(params: StdioServerParameters, n: int) -> None:
    """Claim and show through the SDK's stdio client."""
    async with Client(params) as client:
        got = answer(await client.call_tool("claim", {"number": n}))
        assert (got["holder"], got["instance"]) == ("ana/coder", "laptop")
        shown = answer(await client.call_tool("show_task", {"number": n}))
        assert shown["task"]["state"] == "accepted"


def test_hivelite_mcp_refuses_a_bad_token(tmp_path: Path) -> None:
    import subprocess

    db = tmp_path / "s.db"
    Hive.open(db, owner="ana").close()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    ran = subprocess.run([*hivelite_command(), "--db", str(db), "mcp"], capture_output=True,
                         text=True, timeout=HANG_S, stdin=subprocess.DEVNULL,
                         env={**clean, "HIVELITE_TOKEN": "hl_abc_def"})
    assert ran.returncode == 4
    assert ran.stderr.startswith("error: unauthenticated/invalid_token")


def test_the_servers_mcp_acts_as_each_requests_token(server: Server) -> None:  # noqa: F811
    """``/mcp`` on ``hivelite serve`` (streamable HTTP): the token of each request is the
    caller, so two agents on one server act as themselves; no token is 401."""
    import httpx
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    task = {**TASK, "project": "mcp-http"}
    n = httpx.post(server.tasks(), json=task, headers={
        "Authorization": f"Bearer {server.tokens['planner']}"}).json()["number"]

    def connect(who: str) -> Client:
        http = create_mcp_http_client(headers={
            "Authorization": f"Bearer {server.tokens[who]}"})
        return Client(streamable_http_client(server.url + "/mcp", http_client=http))

    async def flow() -> None:
        async with connect("coder") as coder:
            got = answer(await coder.call_tool("claim", {"number": n}))
            assert (got["holder"], got["instance"]) == ("ana/coder", "laptop")
            fence = {"number": n, "lease_id": got["lease_id"], "token": got["fencing_token"]}
            answer(await coder.call_tool("submit_result", {**fence, "summary": "done",
                                                           "evidence": EVIDENCE}))
        async with connect("reviewer") as reviewer:
            done = answer(await reviewer.call_tool("verify", {"number": n}))
            assert done["state"] == "completed"

    anyio.run(flow)
    assert httpx.post(server.url + "/mcp", json={}).status_code == 401


@pytest.mark.parametrize(("allowed", "host", "origin", "served"), [
    ((), "127.0.0.1:8377", None, True),
    ((), "localhost:8377", "http://localhost:8377", True),
    ((), "hive.example.org", None, False),
    ((), "127.0.0.1:8377", "https://evil.example", False),
    (("hive.example.org",), "hive.example.org", "https://hive.example.org", True),
    (("hive.example.org",), "other.example.org", None, False),
])
def test_mcp_answers_only_the_hosts_it_is_meant_for(
        tmp_path: Path, allowed: tuple[str, ...], host: str, origin: str | None,
        served: bool) -> None:
    """DNS-rebinding protection (the MCP specification's must): a request addressed to
    another host, or from another origin, is refused before any tool runs; a proxy's host
    is served once it is named with --allowed-host."""
    from starlette.testclient import TestClient

    from hivelite.faces.server.app import create_app

    with Hive.open(tmp_path / "s.db", owner="ana") as hive:
        token = hive.add_token(OWNER, "ana/coder", instance="laptop").token
        app = create_app([hive], allowed_hosts=allowed)
        headers = {"Host": host, "Authorization": f"Bearer {token}",
                   "Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json"}
        if origin is not None:
            headers["Origin"] = origin
        with TestClient(app) as client:
            response = client.post("/mcp", headers=headers, json={
                "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
        assert (response.status_code == 200) == served, (response.status_code, response.text)


def test_the_stdio_keeper_renews_its_agents_leases_and_never_crosses_a_token(
        tmp_path: Path) -> None:
    """While its agent is connected, ``hivelite mcp`` renews the leases the agent took
    through it at half their length, with their own lease id and token; a lease that ended
    is forgotten, and the task's next claim (a new token) is never renewed by it."""
    from hivelite.faces.server.keeper import LeaseKeeper

    clock = ManualClock(START)
    hive = Hive.open(tmp_path / "s.db", owner="ana", clock=clock)
    coder = hive.authenticate(hive.add_token(OWNER, "ana/coder", instance="laptop").token)
    first, second = own_task(hive), own_task(hive)
    keeper = LeaseKeeper(hive, coder.caller)

    async def flow() -> None:
        async with Client(build_mcp(lambda: Acting(hive, coder.caller, None),
                                    on_answer=keeper.track)) as client:
            answer(await client.call_tool("claim", {"number": first}))
            answer(await client.call_tool("claim", {"number": second, "minutes": 6}))

    anyio.run(flow)
    assert keeper.tick() == []  # nothing is half way yet
    clock.advance(minutes=4)
    assert keeper.tick() == [second]  # 6-minute lease, 2 left
    lease = hive.lease(CODER, second)
    assert (lease.fencing_token, lease.expires_at) == (1, "2026-12-02T09:10:00.000Z")
    clock.advance(minutes=2)
    assert sorted(keeper.tick()) == [first]
    # the agent gives `second` back and claims it again outside this connection
    hive.release(CODER, second, lease_id=lease.lease_id, token=1)
    again = hive.claim(CODER, second)
    clock.advance(minutes=6)
    assert keeper.tick() == [first]  # the released lease is refused and forgotten
    assert second not in keeper.kept
    assert hive.lease(CODER, second).expires_at == again.expires_at  # token 2 untouched
    hive.close()


def test_an_agent_finishes_the_flows_with_the_tools_alone(tmp_path: Path) -> None:
    """Through the SDK's client: pause on a question, resume, submit; file a follow-up task;
    review another agent's result found by listing what awaits a verdict. Task objects keep
    their null keys; the compact listing is a small part of the full one."""
    from jsonschema import Draft202012Validator, FormatChecker

    from .test_parity import SCHEMA

    seed = Draft202012Validator(SCHEMA, format_checker=FormatChecker())
    hive = Hive.open(tmp_path / "s.db", owner="ana", clock=ManualClock(START))
    coder = hive.authenticate(hive.add_token(OWNER, "ana/coder", instance="laptop").token)
    reviewer = hive.authenticate(hive.add_token(OWNER, "ana/reviewer",
                                                instance="desktop").token)
    owner = hive.authenticate(hive.add_token(OWNER, None).token).caller
    n = own_task(hive)

    async def work() -> int:
        async with Client(build_mcp(lambda: Acting(hive, coder.caller, None))) as client:
            claimed = answer(await client.call_tool("next_task", {}))
            assert not list(seed.iter_errors(claimed["task"]["task"]))
            fence = {"number": n, "lease_id": claimed["lease_id"],
                     "token": claimed["fencing_token"]}
            answer(await client.call_tool("checkpoint", {**fence, "progress": "started"}))
            paused = answer(await client.call_tool("pause", {
                **fence, "on": "human", "reason": "which database should it use?"}))
            assert paused["state"] == "waiting"
            async with Client(build_mcp(lambda: Acting(hive, owner, None), "owner")) as ana:
                asked = answer(await ana.call_tool("list_tasks", {"state": ["waiting"]}))
                assert asked["items"][0]["question"] == {
                    "text": "which database should it use?", "on": "human", "answers": 0}
                said = answer(await ana.call_tool("answer", {"number": n,
                                                             "text": "PostgreSQL 16"}))
                assert said["state"] == "waiting"
            assert "forbidden_right/not_permitted" in refusal(await client.call_tool(
                "answer", {"number": n, "text": "sqlite"}))  # a person's question
            resumed = answer(await client.call_tool("resume", {"number": n}))
            assert resumed["state"] == "working" and resumed["fencing_token"] == 2
            assert [(a["text"], a["by"]) for a in resumed["question"]["answers"]] == [
                ("PostgreSQL 16", "ana")]
            fence = {"number": n, "lease_id": resumed["lease_id"], "token": 2}
            done = answer(await client.call_tool("submit_result", {
                **fence, "summary": "fixed", "evidence": EVIDENCE}))
            assert done["state"] == "approval"
            follow = answer(await client.call_tool("handoff", {
                "requester": "ana/coder", "assignee": "ana/reviewer", "project": "demo",
                "packet": {"task": "Review the login fix", "deliverable_type": "answer",
                           "acceptance_criteria": ["a verdict"]}}))
            assert follow["state"] == "routed"
            return int(follow["number"])

    async def review(follow: int) -> None:
        async with Client(build_mcp(lambda: Acting(hive, reviewer.caller, None))) as client:
            waiting = answer(await client.call_tool("list_tasks", {"state": ["approval"]}))
            assert [t["number"] for t in waiting["items"]] == [n]
            full = answer(await client.call_tool("list_tasks", {"compact": False}))
            short = answer(await client.call_tool("list_tasks", {}))
            assert len(json.dumps(short)) * 3 < len(json.dumps(full))
            for view in full["items"]:
                assert not list(seed.iter_errors(view["task"]))
            verdict = answer(await client.call_tool("verify", {"number": n}))
            assert verdict["state"] == "completed"
            assert answer(await client.call_tool("show_task", {"number": follow}))[
                "task"]["requester"] == "ana/coder"

    anyio.run(review, anyio.run(work))
    hive.close()


def test_an_enrolments_refusals_reach_the_agent_over_mcp(tmp_path: Path) -> None:
    """Seed 004's opt-in refusals and a role mismatch, as an MCP client meets them: a tool
    error naming code and reason, and the store left as it was."""
    hive = Hive.open(tmp_path / "s.db", owner="ana", clock=ManualClock(START))
    coder = hive.authenticate(hive.add_token(OWNER, "ana/coder", instance="laptop").token)
    needs_role = own_task(hive, role="reviewer")
    elsewhere = own_task(hive)

    async def flow() -> None:
        async with Client(build_mcp(lambda: Acting(hive, coder.caller, None))) as client:
            role = refusal(await client.call_tool("claim", {"number": needs_role}))
            assert "forbidden_right/not_permitted:" in role and "reviewer" in role
            hive.enrol(OWNER, "ana/coder", projects=["shop"])
            scope = refusal(await client.call_tool("claim", {"number": elsewhere}))
            assert "forbidden_right/optin_scope:" in scope and "shop" in scope
            hive.enrol(OWNER, "ana/coder", projects=["demo"])
            got = answer(await client.call_tool("claim", {"number": elsewhere}))
            fence = {"number": elsewhere, "lease_id": got["lease_id"],
                     "token": got["fencing_token"]}
            hive.enrol(OWNER, "ana/coder", projects=["demo"], roles=["reviewer"])
            changed = refusal(await client.call_tool("update", {**fence, "summary": "on"}))
            assert "invalid_state/optin_changed:" in changed
            answer(await client.call_tool("release", fence))
            hive.end_enrolment(OWNER, "ana/coder")
            ended = refusal(await client.call_tool("next_task", {}))
            assert "invalid_state/optin_inactive:" in ended
        assert hive.get(elsewhere).task.state.value == "routed"
        assert hive.get(needs_role).claim is None

    anyio.run(flow)


def test_an_agent_over_mcp_cannot_set_verified_but_a_receipt_can(tmp_path: Path) -> None:
    """``verified`` is hivelite's word: a client sending it is refused; a receipt hivelite
    checks is how evidence becomes verified, and the view shows it."""
    from hivelite.core.receipts import digest_of

    hive = Hive.open(tmp_path / "s.db", owner="ana", clock=ManualClock(START))
    coder = hive.authenticate(hive.add_token(OWNER, "ana/coder", instance="laptop").token)
    n = own_task(hive)
    output = "14 passed"

    async def flow() -> None:
        async with Client(build_mcp(lambda: Acting(hive, coder.caller, None))) as client:
            got = answer(await client.call_tool("claim", {"number": n}))
            fence = {"number": n, "lease_id": got["lease_id"], "token": got["fencing_token"]}
            forged = refusal(await client.call_tool("submit_result", {
                **fence, "summary": "done", "evidence": [
                    {"kind": "test_output", "summary": output, "verified": True}]}))
            assert "verified" in forged
            assert hive.get(n).task.state.value == "accepted"  # nothing changed
            answer(await client.call_tool("submit_result", {
                **fence, "summary": "done", "evidence": [
                    {"kind": "test_output", "summary": output, "content": output,
                     "receipt": {"digest": digest_of(output.encode())}}]}))
            shown = answer(await client.call_tool("show_task", {"number": n}))
            assert [e["verified"] for e in shown["evidence"]] == [True]
            assert "receipt" not in shown["task"]["result"]["evidence"][0]

    anyio.run(flow)
