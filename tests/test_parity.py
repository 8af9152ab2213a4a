"""Face parity, generated from the verb table: for every verb, each face that serves it has
it with the same inputs, refuses a token without its right, refuses a bad call with the
same reason and task number, and answers task objects that validate against seed 000's
schema. The faces: the ``Hive`` (the file), HTTP (a real uvicorn server on a loopback
port, through :class:`hivelite.faces.client.Client` and through its routes), and MCP (the SDK's
own client over the server's ``/mcp``)."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

import anyio
import httpx
import pytest
from jsonschema import Draft202012Validator, FormatChecker

pytest.importorskip("mcp")

from mcp import Client as McpClient
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from pydantic import BaseModel

from hivelite import Caller, Hive, ManualClock
from hivelite.core.errors import HiveliteError
from hivelite.core.models import Receipt
from hivelite.core.protocol import Mode, Right, Who
from hivelite.faces.cli.verbs import BESPOKE
from hivelite.faces.client import Client
from hivelite.faces.server.mcp_calls import Acting
from hivelite.faces.server.mcp_tools import TOOLS, build_mcp, offers
from hivelite.faces.server.openapi import openapi_document
from hivelite.verbs.inputs import Nothing
from hivelite.verbs.table import VERBS, Http, Verb

from .conftest import CODER, HANG_S, OWNER, START, own_task
from .served import LoopbackServer

SCHEMA = json.loads(resources.files("hivelite").joinpath("data/task.schema.json")
                    .read_text(encoding="utf-8"))
TASK_OBJECT = Draft202012Validator(SCHEMA, format_checker=FormatChecker())
SERVED = [v for v in VERBS if v.http is not None]
ON_TASK = [v for v in SERVED if v.on_task and not v.reads]
PREFIX = "/v1/vaults/{vault_id}/tasks"
EXTRA = {"list": {"mine", "mine_as"}}
"""Inputs a face that knows its caller adds (a ``Hive``'s list names the agent itself)."""


def fields(verb: Verb) -> set[str]:
    return set(verb.input.model_fields)


def example(verb: Verb) -> dict[str, Any]:
    """A call of ``verb`` from its input model's own examples: each required field takes
    its first example (the examples are data, so they are held to being valid)."""
    given: dict[str, Any] = {}
    required = set(verb.input.model_json_schema().get("required", []))
    for name, info in verb.input.model_fields.items():
        if not info.is_required() and name not in required:
            continue
        examples = info.examples or next(
            (m.json_schema.get("examples") for m in info.metadata
             if hasattr(m, "json_schema") and m.json_schema), None)
        assert examples, f"{verb.name}.{name} has no example"
        given[name] = examples[0]
    return given


def keywords(method: Any) -> set[str]:
    """What a method takes besides its store, its caller and its task."""
    params = list(inspect.signature(method).parameters.values())[1:]
    return {p.name for p in params if p.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                   inspect.Parameter.POSITIONAL_OR_KEYWORD)
            } - {"request_id", "caller", "ref"}


# -- the same inputs on every face ------------------------------------------------------


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v.name)
def test_every_face_takes_the_verbs_inputs(verb: Verb) -> None:
    mine = fields(verb)
    if verb.name != "handoff":  # a handoff's fields come whole (a request, or **fields)
        assert keywords(getattr(Hive, verb.method)) == mine - EXTRA.get(verb.name, set())
        assert keywords(getattr(Client, verb.method)) == mine
    if verb.http is not None:
        operation = openapi_document()["paths"][PREFIX + verb.http.path][
            verb.http.method.lower()]
        assert operation["x-hivelite-right"] == verb.right.value
        assert operation["x-hivelite-verb"] == verb.name
        if verb.http.method == "GET":
            taken = {p["name"] for p in operation["parameters"] if p["in"] == "query"}
        else:
            ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            body = openapi_document()["components"]["schemas"][ref.rsplit("/", 1)[1]]
            taken = set(body["properties"])
        assert taken == mine
    for kind in ("agent", "owner"):
        assert (verb.tool in TOOLS[kind]) == (verb.tool is not None and offers(verb, kind))


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v.name)
def test_every_input_is_described_with_an_example(verb: Verb) -> None:
    schema = verb.input.model_json_schema()
    for name, prop in schema["properties"].items():
        described = prop.get("description") or prop.get("$ref")
        assert described, f"{verb.name}.{name} has no description"
    example(verb)  # every required field has an example
    assert verb.summary and verb.description and verb.refusals


MCP_EXTRA = {"list": {"compact"}, **{v.name: {"wait"} for v in VERBS if v.tasked}}
"""What the MCP face adds to an input: a compact listing for a model's context, and a wait
for each tasked verb (the handoff's is the face's own; the others' are their inputs')."""


@pytest.mark.slow
def test_every_tool_takes_its_verbs_inputs_and_words(faces: Faces) -> None:
    """The tools as the SDK's client lists them, for an agent's token and the owner's."""
    for who, kind in (("coder", "agent"), ("owner", "owner")):
        async def listed(who: str = who) -> dict[str, Any]:
            client = create_mcp_http_client(headers={
                "Authorization": f"Bearer {faces.tokens[who]}"})
            async with McpClient(streamable_http_client(faces.server.url + "/mcp",
                                                        http_client=client)) as mcp:
                return {t.name: t for t in (await mcp.list_tools()).tools}

        tools = anyio.run(listed)
        assert set(tools) == set(TOOLS[kind])
        for verb in VERBS:
            if verb.tool not in tools:
                continue
            tool = tools[verb.tool]
            expected = fields(verb) | MCP_EXTRA.get(verb.name, set()) | (
                {"number"} if verb.on_task else set())
            assert set(tool.input_schema["properties"]) == expected, verb.name
            assert verb.summary in (tool.description or ""), verb.name
            for name, prop in tool.input_schema["properties"].items():
                assert prop.get("description") or prop.get("$ref"), (verb.name, name)


def test_every_verb_an_agent_uses_is_an_mcp_tool() -> None:
    """resume, handoff, fields and amend were missing: a task paused over MCP was lost."""
    for name in ("resume", "handoff", "set_fields", "amend", "history", "my_lease", "verify",
                 "release", "renew"):
        assert name in TOOLS["agent"]
    for name in ("approve", "deny", "sign_off", "decline"):
        assert name in TOOLS["owner"] and name not in TOOLS["agent"]
    # the owner cancels any task; a guest's agent its own owner's requests (team mode)
    assert "cancel" in TOOLS["owner"] and "cancel" in TOOLS["agent"]


# -- rights, refusals and task objects on the served faces -----------------------------


@dataclass
class Faces:
    hive: Hive
    server: LoopbackServer
    vault: str
    tokens: dict[str, str]
    n: int
    """A cancelled task: every write on it is refused."""
    routed: int

    def url(self, path: str) -> str:
        return f"{self.server.url}/v1/vaults/{self.vault}/tasks{path}"

    def http(self, verb: Verb, who: str, ref: int, body: dict[str, Any]) -> httpx.Response:
        assert verb.http is not None
        path = verb.http.path.replace("{number}", str(ref))
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        if verb.http.method == "GET":
            return httpx.get(self.url(path), params=body, headers=headers, timeout=HANG_S)
        return httpx.request(verb.http.method, self.url(path), json=body, headers=headers,
                             timeout=HANG_S)

    def mcp(self, who: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        """Each call's result, through the SDK's client over ``/mcp``."""
        got: list[Any] = []

        async def flow() -> None:
            client = create_mcp_http_client(headers={
                "Authorization": f"Bearer {self.tokens[who]}"})
            async with McpClient(streamable_http_client(self.server.url + "/mcp",
                                                        http_client=client)) as mcp:
                for tool, arguments in calls:
                    got.append(await mcp.call_tool(tool, arguments))

        anyio.run(flow)
        return got


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    folder = tmp_path_factory.mktemp("parity")
    hive = Hive.open(folder / "s.db", owner="ana", clock=ManualClock(START))
    server = LoopbackServer()
    vault = server.vaults.add(hive)
    add = hive.add_token
    tokens = {
        "owner": add(OWNER).token,
        "coder": add(OWNER, "ana/coder", instance="laptop").token,
        "reader": add(OWNER, "ana/coder", instance="laptop", rights=["tasks.read"]).token,
        "worker": add(OWNER, "ana/coder", instance="laptop", rights=["tasks.work"]).token,
    }
    n = own_task(hive)
    hive.cancel(OWNER, n, reason="parity")
    routed = own_task(hive)
    try:
        yield Faces(hive, server, vault, tokens, n, routed)
    finally:
        server.vaults.discard(vault)
        server.stop()
        hive.close()


def lacking(verb: Verb) -> str:
    """A token without the verb's right: an agent's for the owner's verbs, else one that
    carries another right only."""
    return {Right.owner: "coder", Right.read: "worker"}.get(verb.right, "reader")


@pytest.mark.slow
def test_a_token_without_the_right_is_refused_on_every_route(faces: Faces) -> None:
    """Read routes included: removing a route's check fails this test."""
    for verb in SERVED:
        response = faces.http(verb, lacking(verb), faces.routed, example(verb))
        assert response.status_code == 403, (verb.name, response.text)
        error = response.json()["error"]
        assert (error["code"], error["reason"]) == ("forbidden_right", "not_permitted"), (
            verb.name)
        assert verb.right.value in error["message"]
    calls = [(str(v.tool), {**({"number": faces.routed} if v.on_task else {}), **example(v)})
             for v in SERVED if v.tool in TOOLS["agent"] and v.right is not Right.read]
    for (tool, _), result in zip(calls, faces.mcp("reader", calls), strict=True):
        assert result.is_error, tool
        assert refused(result).startswith("forbidden_right/not_permitted:"), tool
    assert faces.hive.get(faces.routed).task.state == "routed"


def refused(result: Any) -> str:
    """A tool error's text, after the SDK's ``Error executing tool NAME:``."""
    assert result.is_error, result.content
    text: str = result.content[0].text
    return re.sub(r"^Error executing tool \w+: ", "", text)


def who_for(verb: Verb) -> tuple[str, Caller]:
    return ("owner", OWNER) if verb.right is Right.owner else ("coder", CODER)


REFUSING = {"await": {"until": "verdict"}}
"""What a read that answers on a cancelled task is asked for, to be refused there: a
verdict on a task with no result."""


def refusal_on_file(faces: Faces, verb: Verb) -> tuple[str, str, int | None]:
    _, caller = who_for(verb)
    given = verb.input.model_validate({**example(verb), **REFUSING.get(verb.name, {})})
    with pytest.raises(HiveliteError) as raised:
        verb.call(faces.hive, caller, faces.n, given)
    error = raised.value
    return error.code, error.reason, error.extra.get("number")


@pytest.mark.slow
def test_a_refusal_has_the_same_reason_and_task_on_every_face(faces: Faces) -> None:
    """Every write on a cancelled task, on the file, over HTTP (the client and the route)
    and over MCP: the same code, reason and task number, and one the row declares."""
    before = faces.hive.history(faces.n)
    for who in ("owner", "coder"):
        verbs = [v for v in ON_TASK if who_for(v)[0] == who]
        tools = [v for v in verbs if v.tool is not None and offers(v, "owner" if who ==
                                                                       "owner" else "agent")]
        results = dict(zip([v.name for v in tools], faces.mcp(who, [
            (str(v.tool), {"number": faces.n, **example(v)}) for v in tools]), strict=True))
        client = Client(faces.server.url, faces.tokens[who])
        for verb in verbs:
            code, reason, number = refusal_on_file(faces, verb)
            assert f"{code}/{reason}" in verb.refusals, (verb.name, reason)
            assert number == faces.n, verb.name
            error = faces.http(verb, who, faces.n, example(verb)).json()["error"]
            assert (error["code"], error["reason"], error.get("number")) == (
                code, reason, number), verb.name
            with pytest.raises(HiveliteError) as raised:
                verb.call(client, None, faces.n, verb.input.model_validate(example(verb)))
            assert (raised.value.code, raised.value.reason) == (code, reason), verb.name
            if verb.name in results:
                text = refused(results[verb.name])
                assert text.startswith(f"{code}/{reason}:"), (verb.name, text)
                assert re.search(rf"\(task {number}\)$", text), (verb.name, text)
        client.close()
    assert faces.hive.history(faces.n) == before  # nothing was written


def task_objects(answer: Any) -> Iterator[dict[str, Any]]:
    if isinstance(answer, dict):
        if {"id", "state", "packet", "requester"} <= set(answer):
            yield answer
        for value in answer.values():
            yield from task_objects(value)
    elif isinstance(answer, list):
        for value in answer:
            yield from task_objects(value)


@pytest.mark.slow
def test_every_task_object_validates_against_the_seed_on_every_face(faces: Faces) -> None:
    """MCP once dropped null keys, so no task object it sent validated."""
    n = own_task(faces.hive, project="objects")  # next_task claims it, no other test's
    results = faces.mcp("coder", [("show_task", {"number": n}),
                                  ("list_tasks", {"compact": False}),
                                  ("next_task", {"project": "objects"})])
    answers = [json.loads(r.content[0].text) for r in results]
    assert all(not r.is_error for r in results), answers
    client = Client(faces.server.url, faces.tokens["coder"])
    answers += [faces.http(v, "coder", n, {}).json() for v in SERVED
                if v.name in ("show", "list")]
    answers += [client.get(n).model_dump(mode="json"),
                client.list().model_dump(mode="json")]
    client.close()
    seen = [task for answer in answers for task in task_objects(answer)]
    assert len(seen) >= 6
    for task in seen:
        errors = sorted(e.message for e in TASK_OBJECT.iter_errors(task))
        assert not errors, (task["id"], errors)


def _touch(hive: Hive, caller: Caller, ref: Any, given: BaseModel,
           request_id: str | None) -> Receipt:
    """A small new verb: record that a task was looked at."""
    def body(unit: Any) -> Receipt:
        row = unit.task(ref)
        unit.event(row, "touched", {"by": caller.name})
        receipt: Receipt = unit.receipt(row)
        return receipt
    done: Receipt = hive._write(caller, TOUCH, body)
    return done


TOUCH = Verb("touch", "Note that a task was looked at.", "Record in the task's history"
             " that the caller looked at it.", (Who.anyone,), Right.read, Mode.write,
             Nothing, Receipt, ("not_found/no_such_task",), run=_touch, idempotent=False,
             http=Http("POST", "/{number}/touch", "touch"), tool="touch")


@pytest.mark.slow
def test_adding_a_verb_is_its_row_and_its_run(tmp_path: Any) -> None:
    """A new verb needs its row and its ``run``, nothing else: ``touch`` is then a verb of
    the ``Hive``, a route of a server and a tool of an MCP server built with the table it
    is in, admitted by its row's mode and refused without its row's right."""
    from hivelite.faces.server.app import create_app

    verbs = (*VERBS, TOUCH)
    hive = Hive.open(tmp_path / "s.db", owner="ana")
    n = own_task(hive)
    assert hive.call(TOUCH, OWNER, n).number == n
    server = LoopbackServer(create_app([], verbs=verbs))
    try:
        server.vaults.add(hive)
        reader = hive.add_token(OWNER, "ana/coder", instance="laptop", rights=["tasks.read"])
        worker = hive.add_token(OWNER, "ana/coder", instance="laptop", rights=["tasks.work"])
        with Client(server.url, reader.token) as client:
            assert client.call(TOUCH, None, n).number == n
        with Client(server.url, worker.token) as client, pytest.raises(HiveliteError) as no:
            client.call(TOUCH, None, n)
        assert no.value.reason == "not_permitted"
    finally:
        server.stop()
    coder = hive.authenticate(reader.token).caller

    async def flow() -> None:
        async with McpClient(build_mcp(lambda: Acting(hive, coder, None), verbs=verbs)) as mcp:
            assert "touch" in {t.name for t in (await mcp.list_tools()).tools}
            result = await mcp.call_tool("touch", {"number": n})
            assert json.loads(result.content[0].text)["number"] == n

    anyio.run(flow)
    assert [e.detail for e in hive.history(n) if e.reason == "touched"] == [
        {"by": "ana"}, {"by": "ana/coder"}, {"by": "ana/coder"}]
    hive.close()


# -- the CLI ------------------------------------------------------------------------------


def cli_params(verb: Verb) -> set[str]:
    from hivelite.faces.cli.main import cli
    from hivelite.faces.cli.verbs import COMMAND_OF

    command = cli.commands[COMMAND_OF.get(verb.name, verb.cli)]
    return {p.name for p in command.params if p.name}


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v.name)
def test_every_verb_is_a_command_taking_its_inputs(verb: Verb) -> None:
    names = BESPOKE.get(verb.name, {})
    wanted = {names.get(f, f) for f in fields(verb) - EXTRA.get(verb.name, set())}
    assert wanted <= cli_params(verb), (verb.name, wanted - cli_params(verb))


def cli_args(verb: Verb, ref: int | None) -> list[str]:
    """The command line of a generated command, from the row's examples."""
    from hivelite.faces.cli.verbs import option_name

    args = [verb.cli] + ([str(ref)] if verb.on_task and ref is not None else [])
    for name, value in {**example(verb), **REFUSING.get(verb.name, {})}.items():
        for one in value if isinstance(value, list) else [value]:
            args += [option_name(name), str(one)]
    return args


GENERATED = [v for v in VERBS if v.name not in BESPOKE]


@pytest.mark.slow
def test_the_cli_over_url_refuses_a_token_without_the_right_with_exit_4(
        faces: Faces, capsys: pytest.CaptureFixture[str]) -> None:
    from hivelite.faces.cli.main import main

    for verb in GENERATED:
        argv = ["--url", faces.server.url, "--token", faces.tokens[lacking(verb)], "--json",
                *cli_args(verb, faces.routed)]
        with pytest.raises(SystemExit) as ended:
            main(argv)
        error = json.loads(capsys.readouterr().out)["error"]
        assert (ended.value.code, error["reason"]) == (4, "not_permitted"), verb.name


@pytest.mark.slow
def test_the_cli_refuses_as_every_face_does(faces: Faces,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """On the file and over --url: the same code, reason and task number as the verb."""
    from hivelite.core.errors import ERROR_CLASSES
    from hivelite.faces.cli.main import main

    for verb in [v for v in GENERATED if v.on_task]:
        code, reason, number = refusal_on_file(faces, verb)
        who, caller = who_for(verb)
        agent = [] if caller.is_owner else ["--agent", caller.name, "--instance",
                                            str(caller.instance)]
        for where in (["--db", str(faces.hive.path)],
                      ["--url", faces.server.url, "--token", faces.tokens[who]]):
            extra = agent if where[0] == "--db" else []
            with pytest.raises(SystemExit) as ended:
                main([*where, "--json", *cli_args(verb, faces.n), *extra])
            error = json.loads(capsys.readouterr().out)["error"]
            assert (error["code"], error["reason"], error.get("number")) == (
                code, reason, number), (verb.name, where[0])
            assert ended.value.code == ERROR_CLASSES[code].exit_code, verb.name
