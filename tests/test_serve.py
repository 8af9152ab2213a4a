"""``hivelite serve`` (issue 17): a real uvicorn process on a loopback port, reached with
httpx. Tokens prove who calls (401 for none, a wrong, revoked or expired one, or one from
another vault); rights and the owner's routes are enforced (403); the seed's routes run
the protocol; errors carry status, code, reason and the task number, ``429`` a
``Retry-After``; the served OpenAPI document is the committed one; no token reaches the
server's log."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from .conftest import HANG_S, ready  # noqa: E402
from .inproc import run_main  # noqa: E402
from .test_cli_e2e import hivelite_command  # noqa: E402

ROOT = Path(__file__).parent.parent
START = "2026-12-02T09:00:00.000Z"
EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]
TASK = {"requester": "ana/planner", "assignee": "ana/coder", "project": "site",
        "packet": {"task": "Fix the login bug", "deliverable_type": "code",
                   "acceptance_criteria": ["tests pass"]}}


def hivelite(db: Path, *args: str, **env: str) -> Any:
    """The CLI's answer, run in this process (the served store's set-up; the server is a
    real process, and the CLI against it a real one in its own test)."""
    ran = run_main(["--db", str(db), "--json", *args],
                   {"HIVELITE_LOAD_PLUGINS": "", "HIVELITE_NOW": START, **env})
    assert ran.returncode == 0, (args, ran.stderr)
    return json.loads(ran.stdout)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(folder: Path, args: list[str], now: str | None = "2026-12-02T10:00:00.000Z",
            ) -> Iterator[tuple[str, subprocess.Popen[str], Path]]:
    """``hivelite serve ARGS`` as a real process on a free loopback port, until it answers;
    yields its URL, the process and its log, and stops it at the end."""
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env = {**clean, "HIVELITE_LOAD_PLUGINS": ""}
    if now is not None:
        env["HIVELITE_NOW"] = now
    path = folder / f"server-{port}.log"
    log = path.open("w")
    process = subprocess.Popen([*hivelite_command(), "serve", *args, "--port", str(port)],
                               stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        ready(lambda: answers(url + "/openapi.json"), f"hivelite serve {' '.join(args)}",
              process, path.read_text)
        yield url, process, path
    finally:
        process.terminate()
        try:
            process.wait(timeout=HANG_S)
        finally:
            log.close()


def answers(url: str) -> bool:
    """Whether a server answers ``GET url`` with 200 (not yet: no answer, or not within
    a few seconds, when it is asked again)."""
    try:
        return bool(httpx.get(url, timeout=5).status_code == 200)
    except httpx.TransportError:
        return False


@dataclass
class Server:
    url: str
    vault: str
    tokens: dict[str, str]
    db: Path
    process: subprocess.Popen[str]
    log: Path
    """What the server printed: its access log among it."""

    def tasks(self, path: str = "", vault: str | None = None) -> str:
        return f"{self.url}/v1/vaults/{vault or self.vault}/tasks{path}"

    def call(self, method: str, path: str = "", who: str | None = "coder",
             body: dict[str, Any] | None = None, **headers: str) -> Any:
        sent = dict(headers)
        if who is not None:
            sent["Authorization"] = f"Bearer {self.tokens.get(who, who)}"
        return httpx.request(method, self.tasks() + path, json=body, headers=sent,
                             timeout=HANG_S)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("serve")
    db = folder / "store.db"
    hivelite(db, "init", "--owner", "ana")
    tokens = {
        "coder": hivelite(db, "token", "add", "ana/coder", "--instance", "laptop")["token"],
        "reviewer": hivelite(db, "token", "add", "ana/reviewer", "--instance",
                             "desktop")["token"],
        "planner": hivelite(db, "token", "add", "ana/planner", "--instance", "desktop",
                            "--rights", "tasks.read,tasks.propose")["token"],
        "reader": hivelite(db, "token", "add", "ana/coder", "--instance", "laptop",
                           "--rights", "tasks.read")["token"],
        "owner": hivelite(db, "token", "add", "--owner")["token"],
        "revoked": hivelite(db, "token", "add", "ana/coder", "--instance", "laptop")["token"],
        "expired": hivelite(db, "token", "add", "ana/coder", "--instance", "laptop",
                            "--expires", "2026-12-02T09:30:00.000Z")["token"],
    }
    hivelite(db, "token", "revoke", tokens["revoked"].split("_")[1])
    other = folder / "other.db"  # another store, with a token of its own
    hivelite(other, "init", "--owner", "bob")
    tokens["stranger"] = hivelite(other, "token", "add", "bob/agent", "--instance",
                                  "box")["token"]
    vault = hivelite(db, "info")["vault_id"]
    with serving(folder, [str(db), str(other)]) as (url, process, log):
        yield Server(url, vault, tokens, db, process, log)
    for token in tokens.values():  # no token in the server's output, ever
        assert token.split("_", 2)[2] not in log.read_text()


def error_of(response: Any, status: int, reason: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert (error["status"], error["reason"]) == (status, reason), error
    return error


@pytest.mark.parametrize(("who", "reason"), [
    (None, "invalid_token"), ("hl_nothing", "invalid_token"), ("revoked", "revoked_token"),
    ("expired", "expired_token"), ("stranger", "invalid_token"),
])
def test_no_good_token_is_401(server: Server, who: str | None, reason: str) -> None:
    response = server.call("GET", who=who)
    error_of(response, 401, reason)
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_vault_the_server_does_not_have_is_404(server: Server) -> None:
    response = httpx.get(server.tasks(vault="f" * 32), headers={
        "Authorization": f"Bearer {server.tokens['coder']}"})
    error_of(response, 404, "no_such_vault")


def test_rights_and_owner_routes(server: Server) -> None:
    made = server.call("POST", who="planner", body={**TASK, "project": "rights"})
    assert made.status_code == 200, made.text
    number = made.json()["number"]
    error_of(server.call("POST", f"/{number}/claim", who="reader", body={}), 403,
             "not_permitted")
    error_of(server.call("POST", f"/{number}/claim", who="planner", body={}), 403,
             "not_permitted")
    error = error_of(server.call("POST", f"/{number}/cancel", who="coder", body={}), 403,
                     "not_permitted")
    assert error["number"] == number
    # a proposal names its caller: an agent proposes only as itself
    error_of(server.call("POST", who="coder", body=TASK), 403, "not_requester")
    cancelled = server.call("POST", f"/{number}/cancel", who="owner",
                            body={"reason": "a test of rights"})
    assert cancelled.json()["state"] == "cancelled"


def test_the_seed_routes_run_the_protocol(server: Server) -> None:
    """propose -> claim -> renew -> update -> checkpoint -> result -> verify, each answering
    seed 004's acknowledgement; the task view and its history through GET."""
    made = server.call("POST", who="planner", body=TASK).json()
    n = made["number"]
    assert made["state"] == "routed"
    lease = server.call("POST", f"/{n}/claim", body={"minutes": 10},
                        **{"X-Hivelite-Session": "s1"}).json()
    assert (lease["holder"], lease["instance"], lease["session"]) == (
        "ana/coder", "laptop", "s1")
    fence = {"lease_id": lease["lease_id"], "token": lease["fencing_token"]}
    renewed = server.call("POST", f"/{n}/claim/renew", body={**fence, "minutes": 15}).json()
    assert renewed["fencing_token"] == lease["fencing_token"]
    update = server.call("POST", f"/{n}/updates", body={**fence, "summary": "half way",
                                                        "tokens": 100})
    assert update.json()["state"] == "working"
    server.call("POST", f"/{n}/checkpoint", body={**fence, "progress": "tests written"})
    result = server.call("POST", f"/{n}/result", body={**fence, "summary": "fixed",
                                                       "evidence": EVIDENCE}).json()
    assert result["state"] == "approval"
    error_of(server.call("POST", f"/{n}/verify", who="coder", body={}), 403, "self_verify")
    done = server.call("POST", f"/{n}/verify", who="reviewer", body={"verdict": "accept"})
    assert done.json()["state"] == "completed"
    view = server.call("GET", f"/{n}", who="reader").json()
    assert (view["task"]["state"], view["usage"]["tokens"]) == ("completed", 100)
    history = server.call("GET", f"/{n}/history", who="reader").json()
    assert [e["move"] for e in history if e["move"]] == [1, 6, 7, 12, 14, 16]
    listed = server.call("GET", "", who="reader").json()  # the whole list, then one's own
    assert n in [t["number"] for t in listed["items"]]
    own = httpx.get(server.tasks(), params={"mine": "true", "mine_as": "assignee",
                                            "state": "completed"},
                    headers={"Authorization": f"Bearer {server.tokens['reviewer']}"}).json()
    assert own["items"] == []  # the reviewer is no task's assignee


def test_errors_carry_the_number_and_a_stale_holder_is_409(server: Server) -> None:
    n = server.call("POST", who="planner", body=TASK).json()["number"]
    lease = server.call("POST", f"/{n}/claim", body={}).json()
    error = error_of(server.call("POST", f"/{n}/updates", body={
        "lease_id": lease["lease_id"], "token": lease["fencing_token"] + 1,
        "summary": "late"}), 409, "stale_claim")
    assert error["number"] == n
    error_of(server.call("POST", f"/{n}/claim", body={}), 409, "task_claimed")
    error_of(server.call("GET", "/999999", who="reader"), 404, "no_such_task")
    error_of(server.call("GET", "/abc", who="reader"), 404, "no_such_task")
    bad = error_of(server.call("POST", f"/{n}/updates", body={"summary": 3}), 422,
                   "invalid_update")
    assert "the lease id is required" in bad["message"]


def test_a_body_too_deep_or_too_large_is_refused_not_a_failure(server: Server) -> None:
    n = server.call("POST", who="planner", body=TASK).json()["number"]
    headers = {"Authorization": f"Bearer {server.tokens['coder']}",
               "Content-Type": "application/json"}
    deep = httpx.post(server.tasks(f"/{n}/claim"), content=b"[" * 100_000 + b"]" * 100_000,
                      headers=headers)
    error_of(deep, 422, "invalid_json")
    large = httpx.post(server.tasks(f"/{n}/claim"), content=b" " * (2 << 20), headers=headers)
    error_of(large, 422, "body_too_large")
    assert server.call("POST", f"/{n}/claim", body={}).status_code == 200


def test_the_token_is_checked_before_the_body(server: Server) -> None:
    """A bad body from a caller without a good token, or without the right, says only
    that: 401 before 415 or 422, 403 before them."""
    n = server.call("POST", who="planner", body=TASK).json()["number"]
    for body, kind in ((b" " * (2 << 20), "application/json"), (b"{", "application/json"),
                       (b"{}", "text/plain")):
        for who, status, reason in (("hl_nothing", 401, "invalid_token"),
                                    ("reader", 403, "not_permitted")):
            answer = httpx.post(server.tasks(f"/{n}/claim"), content=body,
                                headers={"Authorization": f"Bearer {server.tokens.get(who, who)}",
                                         "Content-Type": kind})
            error_of(answer, status, reason)


def test_a_body_not_sent_as_json_is_415_and_changes_nothing(server: Server) -> None:
    """A form or a text (what another site's page can send without asking) is not read
    as JSON, however JSON it looks; a JSON type with a charset is."""
    before = len(server.call("GET", who="reader").json()["items"])
    auth = {"Authorization": f"Bearer {server.tokens['planner']}"}
    text = json.dumps(TASK).encode()
    for kind in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {**auth, **({"Content-Type": kind} if kind else {})}
        refused = httpx.post(server.tasks(), content=text, headers=headers, timeout=HANG_S)
        error = error_of(refused, 415, "not_json")
        assert error["code"] == "invalid_input" and "application/json" in error["message"]
    assert len(server.call("GET", who="reader").json()["items"]) == before
    made = httpx.post(server.tasks(), content=text, timeout=HANG_S, headers={
        **auth, "Content-Type": "application/json; charset=utf-8"})
    assert made.status_code == 200, made.text


def test_a_number_of_thousands_of_digits_is_404_invalid_ref(server: Server) -> None:
    error_of(server.call("GET", "/" + "9" * 5000, who="reader"), 404, "invalid_ref")
    error_of(server.call("POST", "/" + "9" * 20 + "/claim", body={}), 404, "invalid_ref")
    error_of(server.call("GET", "/" + "9" * 19, who="reader"), 404, "no_such_task")
    assert "Traceback" not in server.log.read_text()


def test_a_retry_with_the_same_idempotency_key_gets_the_first_answer(server: Server) -> None:
    key = {"Idempotency-Key": "propose-once"}
    first = server.call("POST", who="planner", body=TASK, **key).json()
    again = server.call("POST", who="planner", body=TASK, **key).json()
    assert first == again


def test_over_budget_is_429_with_retry_after(server: Server) -> None:
    hivelite(server.db, "budget", "set", "--agent", "ana/reviewer", "--tasks", "0",
             HIVELITE_NOW="2026-12-02T10:00:00.000Z")
    task = {**TASK, "assignee": "ana/reviewer", "project": "budget"}
    n = server.call("POST", who="planner", body=task).json()["number"]
    response = server.call("POST", f"/{n}/claim", who="reviewer", body={})
    error = error_of(response, 429, "daily_budget")
    assert response.headers["Retry-After"] == str(error["retry_after_s"]) == "50400"


def test_the_served_openapi_is_the_committed_one_and_lists_every_route(server: Server) -> None:
    from hivelite.faces.server.routes import ROUTES

    served = httpx.get(server.url + "/openapi.json").json()
    committed = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert served == committed, (
        "docs/openapi.json drifted: python -m hivelite.faces.server.openapi > docs/openapi.json")
    operations = {op["operationId"] for path in served["paths"].values()
                  for op in path.values()}
    assert operations == {route.name for route in ROUTES}
    seed = {op["operationId"] for path in served["paths"].values() for op in path.values()
            if op["tags"] == ["seed 004"]}
    assert seed == {"list_tasks", "show_task", "propose", "claim", "renew", "release",
                    "update", "submit_result", "verify", "set_fields", "amend"}


def test_serve_without_the_extra_says_how_to_get_it(tmp_path: Path) -> None:
    """The core CLI does not need the server extra; serve names it when it is missing."""
    code = ("import sys; sys.modules['uvicorn'] = None;"
            " from hivelite.faces.cli.main import main; main()")
    hivelite(tmp_path / "s.db", "init", "--owner", "ana")
    ran = subprocess.run([sys.executable, "-c", code, "--db", str(tmp_path / "s.db"),
                          "serve"], capture_output=True, text=True, timeout=HANG_S)
    assert ran.returncode == 6
    assert "pip install 'hivelite[server]'" in ran.stderr


def cli_over(server: Server, who: str, *args: str, code: int = 0) -> Any:
    """``hivelite --url --token …`` in a new process: the task verbs against the server."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    ran = subprocess.run([*hivelite_command(), "--json", *args], capture_output=True,
                         text=True, timeout=HANG_S,
                         env={**clean, "HIVELITE_URL": server.url,
                              "HIVELITE_TOKEN": server.tokens[who],
                              "HIVELITE_DB": str(server.db.parent / "not-here.db")})
    assert ran.returncode == code, (args, ran.returncode, ran.stderr)
    return json.loads(ran.stdout) if ran.stdout.strip() else None


def test_the_cli_works_against_the_server_with_url_and_token(server: Server) -> None:
    """hivelite next, checkpoint, submit, show, history, list: unchanged commands, no agent
    named (the token says who), no store file on this side."""
    n = server.call("POST", who="planner", body={**TASK, "project": "cli"}).json()["number"]
    lease = cli_over(server, "coder", "next", "--project", "cli")
    assert (lease["number"], lease["holder"]) == (n, "ana/coder")
    assert lease["task"]["number"] == n and lease["task"]["task"]["state"] == "accepted"
    fence = ("--lease", lease["lease_id"], "--token", str(lease["fencing_token"]))
    again = cli_over(server, "coder", "show", str(n), "--lease")  # the lease, asked again
    assert (again["lease_id"], again["fencing_token"]) == (lease["lease_id"],
                                                           lease["fencing_token"])
    assert cli_over(server, "reviewer", "show", str(n), "--lease", code=4)["error"][
        "reason"] == "not_permitted"
    cli_over(server, "coder", "checkpoint", str(n), *fence, "--progress", "started")
    done = cli_over(server, "coder", "submit", str(n), *fence, "--summary", "fixed",
                    "--evidence", "test_output:3 passed")
    assert done["task"]["state"] == "approval"
    assert cli_over(server, "reviewer", "verify", str(n), "--accept")["task"]["state"] == (
        "completed")
    assert cli_over(server, "reader", "show", str(n))["task"]["state"] == "completed"
    assert [e["move"] for e in cli_over(server, "reader", "history", str(n))
            if e["move"]] == [1, 6, 7, 12, 14, 16]
    page = cli_over(server, "reader", "list", "--state", "completed")
    assert n in [t["number"] for t in page["items"]]
    # naming another agent than the token's is refused before anything is sent
    error = cli_over(server, "coder", "claim", str(n), "--agent", "ana/reviewer",
                     "--instance", "desktop", code=4)["error"]
    assert error["reason"] == "not_permitted"
    assert not (server.db.parent / "not-here.db").exists()


def test_verbs_of_the_file_alone_are_usage_errors_over_url(server: Server) -> None:
    for args in (("doctor",), ("export",), ("budget", "show")):
        error = cli_over(server, "owner", *args, code=2)["error"]
        assert error["code"] == "usage", args
    n = server.call("POST", who="planner", body=TASK).json()["number"]  # its own task
    assert cli_over(server, "coder", "cancel", str(n), code=4)["error"]["reason"] == (
        "not_permitted")  # an owner's verb needs an owner token


def test_the_owners_controls_go_over_url_with_an_owners_token(server: Server) -> None:
    """hold, veto, stop and lift are verbs of the table served to an owner's token: the
    CLI reaches them over --url; an agent's token is refused (exit 4)."""
    held = cli_over(server, "owner", "hold", "--instance", "tablet", "--reason", "travel")
    assert (held["kind"], held["instance"]) == ("hold", "tablet")
    error = cli_over(server, "coder", "hold", "--instance", "tablet", code=4)["error"]
    assert error["reason"] == "not_permitted"
    lifted = cli_over(server, "owner", "lift", str(held["id"]))
    assert [c["id"] for c in lifted] == [held["id"]]


def test_the_access_log_names_each_call_and_its_caller_never_a_token(server: Server) -> None:
    """One line a request: the method, the path, the status and who the token proved (the
    module's teardown checks that no token's secret is anywhere in the output)."""
    server.call("GET", "", who="reader")
    server.call("GET", "", who="nobody-at-all")
    httpx.get(server.url + "/login", timeout=HANG_S)

    def written() -> tuple[list[str], list[str]] | None:
        lines = server.log.read_text().splitlines()
        mine = [line for line in lines if f'"GET /v1/vaults/{server.vault}/tasks"' in line]
        login = any('"GET /login"' in line for line in lines)  # its line may come last
        return (lines, mine) if len(mine) >= 2 and login else None

    lines, mine = ready(written, "the access log's lines", server.process,
                        server.log.read_text)
    assert any(line.endswith(" ms") and " 200 ana/coder " in line for line in mine), mine
    assert any(" 401 - " in line for line in mine), mine
    assert any('"GET /login" 200 -' in line for line in lines), lines[-5:]
    assert f"mcp: {server.url}/mcp" in server.log.read_text()
