"""``next`` that waits for work: ``claim_next(wait=...)``, ``work(wait=...)``, the served
faces' cap, and ``hivelite next --wait``.

A worker whose queue is empty waits instead of polling ``next`` in a loop: the claim comes
as soon as a task is ready for it, ``404 queue_empty`` once the time is up. PostgreSQL is
woken by the commit that routes a task (it listens before its first look, so a task routed
between the look and the wait is not missed); SQLite looks again after short sleeps. The
tasks here are handed off by another opener of the same store while a thread waits; every
assertion is on what came back (a claim, or the refusal), never on how long it took.
"""

from __future__ import annotations

import json
import math
import select
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from hivelite import Hive, InvalidInput, ManualClock, NextClaim, NotFound, TaskView
from hivelite.core.protocol import MAX_WAIT, SERVED_WAIT
from hivelite.verbs.claims import served_wait

from . import pg
from .conftest import (
    CODER,
    HANG_S,
    OWNER,
    PLANNER,
    START,
    OpenHive,
    Snap,
    own_task,
    ready,
    refused,
)
from .served import LoopbackServer, ServedHive
from .test_cli_e2e import Shell

T = TypeVar("T")
LATER = 0.3
"""How long after the waiter starts the task is handed off (seconds)."""
LONG = min(HANG_S, MAX_WAIT)
"""A wait long enough never to run out in these tests however slow the machine: a waiter
answers with the claim."""
BAD_WAITS = [-1, -0.001, MAX_WAIT + 1, math.inf, math.nan, "5", True, None, [5]]


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(2, thread_name_prefix="waiter") as workers:
        yield workers


def waiting(pool: ThreadPoolExecutor, call: Callable[[], T]) -> Future[T]:
    """``call`` in a thread of its own (a worker that waits), started now."""
    return pool.submit(call)


def later(call: Callable[[], object]) -> None:
    """``call`` after the waiter has had time to find the queue empty and wait."""
    time.sleep(LATER)
    call()


# -- claim_next(wait=...) on each engine -------------------------------------------------


@pytest.mark.contract
def test_a_waiting_next_claims_the_task_handed_off_while_it_waits(
        hive: Hive, open_hive: OpenHive, pool: ThreadPoolExecutor) -> None:
    other = open_hive()  # another opener of the store: its own connection
    got = waiting(pool, lambda: hive.claim_next(CODER, wait=LONG))
    later(lambda: own_task(other))
    claim = got.result(timeout=HANG_S)
    assert isinstance(claim, NextClaim)
    assert claim.holder == CODER.name and claim.task.task.state.value == "accepted"
    assert [v.number for v in hive.list(ready=True).items] == []


@pytest.mark.contract
def test_a_waiting_next_passes_over_work_not_its_own_and_waits_on(
        hive: Hive, open_hive: OpenHive, pool: ThreadPoolExecutor) -> None:
    """A task routed to another agent wakes a PostgreSQL waiter, which finds nothing for it
    and waits again; its own task, routed after, is the one it claims."""
    other = open_hive()
    got = waiting(pool, lambda: hive.claim_next(CODER, wait=LONG))
    later(lambda: own_task(other, assignee="ana/reviewer"))
    later(lambda: own_task(other, project="later"))
    claim = got.result(timeout=HANG_S)
    assert claim.task.task.project == "later"


@pytest.mark.contract
def test_a_wait_on_an_empty_queue_ends_in_queue_empty_and_writes_nothing(
        hive: Hive, snap: Snap) -> None:
    own_task(hive, assignee="ana/reviewer")  # ready, but not for the coder
    error = refused(snap, NotFound, "queue_empty", lambda: hive.claim_next(CODER, wait=0.3))
    assert error.extra["agent"] == CODER.name


@pytest.mark.contract
@pytest.mark.parametrize("wait", BAD_WAITS, ids=repr)
def test_a_wait_is_a_number_of_seconds_up_to_an_hour(hive: Hive, snap: Snap,
                                                      wait: Any) -> None:
    own_task(hive)  # ready: a bad wait is refused before the look, and nothing is claimed
    error = refused(snap, InvalidInput, "invalid_wait",
                    lambda: hive.claim_next(CODER, wait=wait))
    assert error.extra["field"] == "wait"


@pytest.mark.contract
def test_a_retry_of_a_waiting_next_answers_its_claim(
        hive: Hive, open_hive: OpenHive, pool: ThreadPoolExecutor) -> None:
    other = open_hive()
    got = waiting(pool, lambda: hive.claim_next(CODER, wait=LONG, request_id="idle-1"))
    later(lambda: own_task(other))
    first = got.result(timeout=HANG_S)
    own_task(other)  # another ready task: a retry must not take it
    again = hive.claim_next(CODER, request_id="idle-1")  # its answer was lost, say
    assert (again.number, again.lease_id, again.fencing_token) == (
        first.number, first.lease_id, first.fencing_token)
    assert len(hive.list(ready=True).items) == 1


@pytest.mark.contract
def test_a_waiting_worker_holds_no_lock(
        hive: Hive, open_hive: OpenHive, pool: ThreadPoolExecutor) -> None:
    """While a worker waits, every other write goes through at once (SQLite's one writer
    included): the wait holds no transaction."""
    other = open_hive()
    got = waiting(pool, lambda: hive.claim_next(CODER, wait=LONG))
    time.sleep(LATER)
    for _ in range(3):  # each would wait on a lock a waiter held (SQLite: 10 s busy wait)
        own_task(other, assignee="ana/reviewer")
    own_task(other)
    assert got.result(timeout=HANG_S).task.task.assignee == CODER.name


@pytest.mark.contract
def test_a_worker_listens_only_while_it_may_wait(hive: Hive, snap: Snap,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Work found at once: no listening at all. An empty queue: the store listens once
    before it looks again, and stops when the call ends, in a refusal too."""
    calls: list[str] = []
    listen, unlisten = hive.store.listen, hive.store.unlisten
    monkeypatch.setattr(hive.store, "listen", lambda: (calls.append("listen"), listen())[1])
    monkeypatch.setattr(hive.store, "unlisten",
                        lambda: (calls.append("unlisten"), unlisten())[1])
    own_task(hive)
    hive.claim_next(CODER, wait=LONG)
    assert calls == []
    refused(snap, NotFound, "queue_empty", lambda: hive.claim_next(CODER, wait=0.2))
    assert calls == ["listen", "unlisten"]


# -- PostgreSQL: listen before the first look --------------------------------------------


needs_pg = pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")


@needs_pg
def test_a_task_routed_between_the_look_and_the_wait_wakes_the_worker() -> None:
    """The store listens before the first look: a task routed after that look but before
    the wait began is told to the wait, which returns at once (woken, not timed out)."""
    url = pg.store_url(pg.new_schema())
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive, \
            Hive.open(url, owner="ana", clock=ManualClock(START)) as other:
        store: Any = hive.store
        woken: list[bool] = []
        wait_for_work = store.wait_for_work

        def routed_just_before(timeout: float) -> bool:
            if not woken:
                own_task(other)  # committed after the empty look, before the wait
            woken.append(wait_for_work(timeout))
            return woken[-1]

        store.wait_for_work = routed_just_before
        claim = hive.claim_next(CODER, wait=3)
        assert claim.holder == CODER.name
        assert woken == [True]  # woken by the commit; never left to the time running out
        assert getattr(store._local, "listener", None) is None  # closed with the call


@needs_pg
def test_listening_again_drops_what_was_heard_before() -> None:
    """``listen()`` before a look drops the notifications received since the last wait
    (the look sees their tasks), so a worker does not wake for work it already saw."""
    url = pg.store_url(pg.new_schema())
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive:
        store: Any = hive.store
        store.listen()
        own_task(hive)  # heard (a notification waits on the listening connection)
        listener = store._local.listener.conn
        ready(lambda: select.select([listener.fileno()], [], [], 0)[0],
              "the notification reaching the listening connection")
        store.listen()
        assert store.wait_for_work(0.5) is False


# -- work(wait=...) ----------------------------------------------------------------------


def done(task: TaskView) -> dict[str, Any]:
    return {"summary": "done", "evidence": [{"kind": "note", "summary": "checked"}]}


@pytest.mark.contract
def test_a_work_loop_that_waits_takes_the_task_routed_while_it_idles(
        hive: Hive, open_hive: OpenHive, pool: ThreadPoolExecutor) -> None:
    other = open_hive()
    first = own_task(hive)
    run = waiting(pool, lambda: hive.work(CODER, done, wait=LONG, limit=2))
    time.sleep(LATER)
    second = own_task(other)
    report = run.result(timeout=HANG_S)
    assert [r.number for r in report.submitted] == [first, second]


def test_a_work_loop_without_a_wait_still_ends_on_an_empty_queue(open_hive: OpenHive) -> None:
    hive = open_hive()
    own_task(hive)
    assert len(hive.work(CODER, done).submitted) == 1


@pytest.mark.parametrize("wait", [-1, math.nan, "5", True], ids=repr)
def test_a_work_loop_refuses_a_bad_wait(open_hive: OpenHive, wait: Any) -> None:
    hive = open_hive()
    number = own_task(hive)
    with pytest.raises(InvalidInput) as refusal:
        hive.work(CODER, done, wait=wait)
    assert refusal.value.reason == "invalid_wait"
    assert hive.get(number).task.state.value == "routed"


# -- served: HTTP and MCP cap the wait, and wait off the writer thread --------------------


def test_a_server_cuts_a_wait_to_its_most_and_refuses_a_bad_one() -> None:
    assert served_wait(5) == 5.0
    assert served_wait(MAX_WAIT) == SERVED_WAIT
    for bad in (-1, MAX_WAIT + 1, "5"):
        with pytest.raises(InvalidInput) as refusal:
            served_wait(bad)
        assert refusal.value.reason == "invalid_wait"


class Spy:
    """Stands for a store's ``wait_for_work``: notes each timeout asked for, and fails
    one longer than ``most`` at once (rather than wait it out)."""

    def __init__(self, store: Any, most: float) -> None:
        self.timeouts: list[float] = []
        self.most = most
        self._wait = store.wait_for_work

    def __call__(self, timeout: float) -> bool:
        self.timeouts.append(timeout)
        if timeout > self.most:
            raise AssertionError(f"asked to wait {timeout} s, more than {self.most}")
        return bool(self._wait(timeout))


def test_the_mcp_tool_waits_at_most_the_served_wait(
        open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool call asking to wait an hour waits what the server grants (here cut to
    0.3 s, so the test does not take a minute), and a bad wait is refused."""
    import anyio
    from mcp import Client as McpClient

    from hivelite.faces.server.mcp_calls import Acting
    from hivelite.faces.server.mcp_tools import build_mcp

    monkeypatch.setattr("hivelite.verbs.claims.SERVED_WAIT", 0.3)
    hive = open_hive()
    coder = hive.authenticate(hive.add_token(OWNER, CODER.name,
                                             instance=CODER.instance).token)
    spy = Spy(hive.store, 0.3)
    monkeypatch.setattr(hive.store, "wait_for_work", spy)

    async def flow() -> tuple[str, str]:
        async with McpClient(build_mcp(lambda: Acting(hive, coder.caller, None))) as client:
            empty = await client.call_tool("next_task", {"wait": MAX_WAIT})
            bad = await client.call_tool("next_task", {"wait": MAX_WAIT + 1})
            assert empty.is_error and bad.is_error
            return str(empty.content[0].text), str(bad.content[0].text)

    empty, bad = anyio.run(flow)
    assert "not_found/queue_empty:" in empty
    assert "invalid_input/invalid_wait:" in bad
    assert spy.timeouts and max(spy.timeouts) <= 0.3


def test_an_http_next_waits_at_most_the_served_wait(
        open_hive: OpenHive, loopback_server: LoopbackServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hivelite.verbs.claims.SERVED_WAIT", 0.3)
    hive = open_hive()
    served = ServedHive(hive, loopback_server, iter((OWNER, CODER)))
    spy = Spy(hive.store, 0.3)
    monkeypatch.setattr(hive.store, "wait_for_work", spy)
    try:
        with pytest.raises(NotFound) as empty:  # the client asks for 0.5 s, the server cuts
            served.client(CODER).claim_next(CODER, wait=0.5)
        assert empty.value.reason == "queue_empty"
        assert spy.timeouts and max(spy.timeouts) <= 0.3
    finally:
        served.close()


def test_a_served_next_waits_off_the_writer_thread(
        open_hive: OpenHive, loopback_server: LoopbackServer,
        pool: ThreadPoolExecutor) -> None:
    """Over HTTP a waiting next holds no write up: the handoff that routes its task, a
    write on the vault's writer thread, goes through while it waits (were the wait on the
    writer thread, the handoff would queue behind it and the waiter end empty)."""
    served = ServedHive(open_hive(), loopback_server, iter((OWNER, CODER, PLANNER)))
    try:
        coder = served.client(CODER)
        got = waiting(pool, lambda: coder.claim_next(CODER, wait=LONG))
        later(lambda: own_task(cast(Hive, served)))  # over HTTP, as the owner
        claim = got.result(timeout=HANG_S)
        assert claim.holder == CODER.name
        with pytest.raises(NotFound) as empty:
            coder.claim_next(CODER, wait=0.3)
        assert empty.value.reason == "queue_empty"
        with pytest.raises(InvalidInput) as bad:
            coder.claim_next(CODER, wait=MAX_WAIT + 1)
        assert bad.value.reason == "invalid_wait"
    finally:
        served.close()


def test_a_client_asks_again_until_its_own_wait_is_up(
        open_hive: OpenHive, loopback_server: LoopbackServer, pool: ThreadPoolExecutor,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``Client.claim_next`` waits as long as asked, a server's most at a time (here
    0.1 s): the task comes after several of its calls have ended empty."""
    monkeypatch.setattr("hivelite.faces.client.SERVED_WAIT", 0.1)
    served = ServedHive(open_hive(), loopback_server, iter((OWNER, CODER)))
    try:
        got = waiting(pool, lambda: served.client(CODER).claim_next(CODER, wait=LONG))
        later(lambda: own_task(cast(Hive, served)))
        assert got.result(timeout=HANG_S).holder == CODER.name
    finally:
        served.close()


# -- the CLI: hivelite next --wait -----------------------------------------------------


@pytest.mark.slow
def test_hivelite_next_wait_claims_the_task_handed_off_while_it_waits(tmp_path: Path) -> None:
    sh = Shell(tmp_path / "store.db", tmp_path)
    Hive.open(sh.db, owner="ana").close()
    argv = [*sh.command, "--db", str(sh.db), "--json", "next", "--wait", str(LONG),
            "--agent", CODER.name, "--instance", str(CODER.instance)]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=sh.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(LATER * 3)  # the process starts, finds nothing, waits
        with Hive.open(sh.db) as hive:
            number = own_task(hive)
        out, err = proc.communicate(timeout=HANG_S)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    claim = json.loads(out)
    assert (claim["number"], claim["holder"]) == (number, CODER.name)


@pytest.mark.slow
@pytest.mark.parametrize("wait", ["-1", str(MAX_WAIT + 1), "nan", "inf"])
def test_hivelite_next_refuses_a_bad_wait_with_exit_6(tmp_path: Path, wait: str) -> None:
    sh = Shell(tmp_path / "store.db", tmp_path)
    with Hive.open(sh.db, owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
    sh.refused("next", "--wait", wait, "--agent", CODER.name, "--instance",
               str(CODER.instance), t=0, exit_code=6, reason="invalid_wait")


@pytest.mark.slow
def test_hivelite_next_wait_that_is_no_number_is_a_usage_error(tmp_path: Path) -> None:
    sh = Shell(tmp_path / "store.db", tmp_path)
    Hive.open(sh.db, owner="ana").close()
    done = sh.raw("next", "--wait", "soon", "--agent", CODER.name, "--instance",
                  str(CODER.instance))
    assert done.code == 2 and "--wait" in done.err


@pytest.mark.slow
def test_hivelite_next_wait_on_an_empty_queue_exits_5(tmp_path: Path) -> None:
    sh = Shell(tmp_path / "store.db", tmp_path)
    Hive.open(sh.db, owner="ana", clock=ManualClock(START)).close()
    sh.refused("next", "--wait", "0.3", "--agent", CODER.name, "--instance",
               str(CODER.instance), t=0, exit_code=5, reason="queue_empty")

