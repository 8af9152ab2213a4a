"""``hivelite.faces.client.Client`` (issue 17): the Hive verbs over HTTP against a real server,
with the same answers and the same exception classes; a caller other than the token's is
refused before anything is sent; every route has a client method."""

from __future__ import annotations

import inspect
import threading

import pytest

from hivelite import (
    Caller,
    ForbiddenRight,
    Hive,
    HiveliteError,
    InvalidInput,
    InvalidState,
    NotFound,
    RateLimited,
)
from hivelite.core.errors import Unauthenticated
from hivelite.core.models import ClaimReceipt, NextClaim, Page, Receipt, TaskView
from hivelite.faces.client import Client

from .conftest import HANG_S
from .test_serve import EVIDENCE, TASK, Server, hivelite, server  # noqa: F401

pytest.importorskip("uvicorn")


def client(server: Server, who: str, session: str | None = None) -> Client:  # noqa: F811
    return Client(server.url, server.tokens[who], session=session)


def test_the_client_knows_whom_its_token_proves(server: Server) -> None:  # noqa: F811
    coder = client(server, "coder", "s9")
    assert coder.caller == Caller.agent("ana/coder", "laptop", "s9")
    assert (coder.identity.vault_id, coder.identity.rights) == (
        server.vault, ["tasks.propose", "tasks.read", "tasks.work"])
    assert client(server, "owner").caller == Caller.owner("ana")
    with pytest.raises(Unauthenticated):
        Client(server.url, server.tokens["revoked"])


def test_a_whole_flow_through_the_client(server: Server) -> None:  # noqa: F811
    """The same calls a Hive takes, with the same answers."""
    planner, coder = client(server, "planner"), client(server, "coder")
    reviewer, owner = client(server, "reviewer"), client(server, "owner")
    made = planner.handoff(planner.caller, **{**TASK, "project": "client"})
    assert isinstance(made, Receipt) and made.state.value == "routed"
    lease = coder.claim(Caller.agent("ana/coder", "laptop"), made.number, minutes=5)
    assert isinstance(lease, ClaimReceipt) and lease.holder == "ana/coder"
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    coder.checkpoint(None, made.number, **fence, progress="started")
    coder.update(None, made.number, **fence, summary="half way", tokens=10)
    assert coder.submit(None, made.number, **fence, summary="done",
                        evidence=EVIDENCE).state.value == "approval"
    assert reviewer.verify(None, made.number).state.value == "completed"
    view = owner.get(made.number)
    assert isinstance(view, TaskView) and view.usage.tokens == 10
    assert [e.move for e in owner.history(made.number) if e.move] == [1, 6, 7, 12, 14, 16]
    page = coder.list(state=["completed"], mine=True)
    assert isinstance(page, Page) and made.number in [t.number for t in page.items]


def test_next_pause_resume_release_and_the_owners_verbs(server: Server) -> None:  # noqa: F811
    planner, coder, owner = (client(server, w) for w in ("planner", "coder", "owner"))
    n = planner.handoff(None, **{**TASK, "project": "queue"}).number
    got = coder.claim_next(None, project="queue")
    assert isinstance(got, NextClaim) and got.number == n and got.task.number == n
    fence = {"lease_id": got.lease_id, "token": got.fencing_token}
    coder.checkpoint(None, n, **fence, progress="asking")
    assert coder.pause(None, n, **fence, on="human", reason="which API?").state.value == (
        "waiting")
    again = coder.resume(None, n)
    assert coder.release(None, n, lease_id=again.lease_id, token=again.fencing_token,
                         reason="not mine").state.value == "routed"
    view = owner.get(n)
    assert owner.set_fields(None, n, base_version=view.fields_version,
                            priority="high").number == n
    assert owner.cancel(None, n, reason="done elsewhere").state.value == "cancelled"


def test_errors_are_the_library_s_own_classes(server: Server) -> None:  # noqa: F811
    coder = client(server, "coder")
    with pytest.raises(NotFound) as missing:
        coder.get(987654)
    assert missing.value.reason == "no_such_task"
    n = client(server, "planner").handoff(None, **{**TASK, "project": "errors"}).number
    coder.claim(None, n)
    with pytest.raises(InvalidState) as taken:
        coder.claim(None, n)
    assert (taken.value.reason, taken.value.extra["number"]) == ("task_claimed", n)
    with pytest.raises(ForbiddenRight):
        coder.cancel(None, n)  # an owner's route


def test_a_caller_other_than_the_tokens_is_refused_before_sending(
        server: Server) -> None:  # noqa: F811
    coder = client(server, "coder")
    n = client(server, "planner").handoff(None, **{**TASK, "project": "who"}).number
    before = coder.get(n)
    for other in (Caller.agent("ana/coder", "desktop"), Caller.agent("ana/reviewer", "laptop"),
                  Caller.owner("ana")):
        with pytest.raises(ForbiddenRight) as err:
            coder.claim(other, n)
        assert err.value.reason == "not_permitted"
    assert coder.get(n) == before
    assert coder.claim(Caller.agent("ana/coder", "Laptop."), n).holder == "ana/coder"


def test_the_client_s_own_refusals_name_the_task_as_hive_s_do(
        server: Server) -> None:  # noqa: F811
    """What the client refuses before sending, it refuses as ``Hive`` would: the same
    class and reason, naming the task."""
    coder, owner = client(server, "coder"), client(server, "owner")
    n = client(server, "planner").handoff(None, **{**TASK, "project": "own"}).number
    for call, kind, reason in (
            (lambda: owner.cancel(Caller.owner("bob"), n), ForbiddenRight, "not_owner"),
            (lambda: coder.claim("ana/coder", n), InvalidInput, "caller_required"),  # type: ignore[arg-type]
            (lambda: coder.claim(None, n, request_id="has space"), InvalidInput,
             "invalid_request_id")):
        with pytest.raises(HiveliteError) as err:
            call()
        assert (type(err.value), err.value.reason, err.value.extra["number"]) == (
            kind, reason, n)
    with pytest.raises(NotFound):  # a ref is one path segment, never a way to another route
        coder.get(f"{n}/history")


def test_a_budget_refusal_arrives_as_rate_limited(server: Server) -> None:  # noqa: F811
    hivelite(server.db, "budget", "set", "--agent", "ana/reviewer", "--tasks", "0",
             HIVELITE_NOW="2026-12-02T10:00:00.000Z")
    n = client(server, "planner").handoff(
        None, **{**TASK, "assignee": "ana/reviewer", "project": "limits"}).number
    with pytest.raises(RateLimited) as err:
        client(server, "reviewer").claim(None, n)
    assert err.value.extra["retry_after_s"] == 50400


def test_threads_share_one_client(server: Server) -> None:  # noqa: F811
    """Four threads read through one client at once (the task they read is this test's
    own: it passes alone, whatever ran before it on the module's server)."""
    client(server, "planner").handoff(None, **{**TASK, "project": "threads"})
    reader = client(server, "reader")
    seen: list[int] = []

    def read() -> None:
        for _ in range(5):
            seen.append(len(reader.list(limit=5).items))

    workers = [threading.Thread(target=read) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=HANG_S)
    assert len(seen) == 20 and all(n >= 1 for n in seen)


def test_every_route_has_a_client_method_with_the_hives_name() -> None:
    from hivelite.faces.server.routes import ROUTES

    names = {"list_tasks": "list", "show_task": "get", "propose": "handoff",
             "next_task": "claim_next", "submit_result": "submit"}
    for route in ROUTES:
        method = names.get(route.name, route.name)
        assert callable(getattr(Client, method, None)), route.name
        assert callable(getattr(Hive, method, None)), route.name
        if method not in ("list", "get", "history"):
            first = list(inspect.signature(getattr(Client, method)).parameters)[1]
            assert first == "caller", method


def test_the_work_loop_runs_through_the_client(server: Server) -> None:  # noqa: F811
    """``Client.work``: the same loop as ``Hive.work``, every call over HTTP."""
    planner, coder = client(server, "planner"), client(server, "coder")
    made = [planner.handoff(None, **{**TASK, "project": "loop"}).number for _ in range(3)]

    def body(task: TaskView) -> dict[str, object]:
        if task.number == made[1]:
            raise ValueError("not this one")
        return {"summary": f"did {task.number}", "evidence": EVIDENCE}

    report = coder.work(coder.caller, body, project="loop", minutes=5, renew_every=0.05)
    assert [r.number for r in report.submitted] == [made[0], made[2]]
    assert report.skipped == [made[1]] and report.released == []
    assert coder.get(made[0]).task.state.value == "approval"
    failed = coder.get(made[1])
    assert (failed.task.state.value, failed.attempts) == ("routed", 1)
