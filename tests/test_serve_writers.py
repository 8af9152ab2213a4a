"""The server's writer threads: each vault's write routes run on threads of its own, at
most ``writers`` at a time (``hivelite serve --writers``, default 1), in the order they
came, so many agents queue in the server rather than in SQLite's busy wait; reads do not
wait for them. A real uvicorn server on loopback, real clients in threads, a real file."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn")

from hivelite import Caller, Hive, ManualClock, hookimpl
from hivelite.faces.cli.serve import WRITERS as CLI_WRITERS
from hivelite.faces.client import Client
from hivelite.faces.server.app import create_app
from hivelite.faces.server.vaults import WRITERS, Vaults

from .conftest import HANG_S, ready
from .inproc import run_main
from .served import LoopbackServer

START = "2026-12-02T09:00:00.000Z"
AGENTS = 6
OWNER = Caller.owner("ana")


class Overlap:
    """Told of each move after its commit (on the thread that wrote it), it stays a while
    and counts how many writes are being told at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.threads: set[str] = set()

    @hookimpl
    def hivelite_on_transition(self, task: Any, move: Any, actor: str, hive: Any,
                               entry: Any) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.threads.add(threading.current_thread().name)
        time.sleep(0.05)  # long enough that writes run side by side if they may
        with self.lock:
            self.now -= 1


def claim_at_once(tmp_path: Path, writers: int) -> Overlap:
    """AGENTS agents, each with its own token and task, all claiming at the same moment
    through a server with ``writers`` writer threads; what the plugin saw."""
    seen = Overlap()
    hive = Hive.open(tmp_path / "s.db", owner="ana", clock=ManualClock(START), plugins=[seen])
    server = LoopbackServer(create_app([], writers=writers))
    vault = server.vaults.add(hive)
    clients = []
    try:
        for a in range(AGENTS):
            name = f"ana/agent-{a}"
            hive.handoff(OWNER, requester="ana/planner", assignee=name, project="p",
                         packet={"task": "Do it", "deliverable_type": "other",
                                 "acceptance_criteria": ["done"]})
            token = hive.add_token(OWNER, name, instance=f"box-{a}").token
            clients.append(Client(server.url, token))
        seen.threads.clear()  # the set-up's own moves, made here
        seen.most = 0
        start = threading.Barrier(AGENTS, timeout=HANG_S)
        claimed: list[int] = []

        def agent(client: Client) -> None:
            start.wait()
            claimed.append(client.claim_next(None, project="p").number)

        threads = [threading.Thread(target=agent, args=(c,)) for c in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=HANG_S)
        assert sorted(claimed) == list(range(1, AGENTS + 1))  # each its own, none lost
    finally:
        for client in clients:
            client.close()
        server.vaults.discard(vault)
        server.stop()
        hive.close()
    return seen


def test_one_writer_thread_takes_the_writes_one_at_a_time(tmp_path: Path) -> None:
    seen = claim_at_once(tmp_path, writers=1)
    assert seen.most == 1
    assert len(seen.threads) == 1
    assert next(iter(seen.threads)).startswith("hivelite-writer-")


def test_writers_bounds_the_writes_at_once(tmp_path: Path) -> None:
    seen = claim_at_once(tmp_path, writers=3)
    assert 1 <= seen.most <= 3
    assert 1 <= len(seen.threads) <= 3
    assert all(name.startswith("hivelite-writer-") for name in seen.threads)


def test_a_read_does_not_wait_for_the_writers(tmp_path: Path) -> None:
    """A write held up on the writer thread (its plugin is slow) leaves reads answering."""
    release = threading.Event()

    class Slow:
        @hookimpl
        def hivelite_on_transition(self, task: Any, move: Any, actor: str, hive: Any,
                                   entry: Any) -> None:
            if move.name == "claim":
                release.wait(30)

    hive = Hive.open(tmp_path / "s.db", owner="ana", clock=ManualClock(START),
                     plugins=[Slow()])
    server = LoopbackServer(create_app([], writers=1))
    vault = server.vaults.add(hive)
    try:
        number = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="p",
                              packet={"task": "Do it", "deliverable_type": "other",
                                      "acceptance_criteria": ["done"]}).number
        coder = Client(server.url, hive.add_token(OWNER, "ana/coder", instance="box").token)
        owner = Client(server.url, hive.add_token(OWNER).token)
        writing = threading.Thread(target=lambda: coder.claim(None, number))
        writing.start()
        try:
            ready(lambda: hive.get(number).task.state == "accepted",  # committed; its
                  "the claim committed")                           # plugin holds on
            assert owner.get(number).task.state == "accepted"  # answered while the write waits
            assert writing.is_alive()
        finally:
            release.set()
            writing.join(timeout=HANG_S)
        coder.close()
        owner.close()
    finally:
        server.vaults.discard(vault)
        server.stop()
        hive.close()


def test_nexts_task_view_is_read_off_the_loop_and_the_writer(tmp_path: Path) -> None:
    """``next`` answers with its task's view, read when the answer is shown: over HTTP that
    is in a worker thread, not on the event loop (every connection waits for it) nor on
    the vault's writer thread (the next write waits for it)."""
    hive = Hive.open(tmp_path / "s.db", owner="ana", clock=ManualClock(START))
    server = LoopbackServer(create_app([], writers=1))
    vault = server.vaults.add(hive)
    read_on: list[str] = []
    get = hive.get

    def recorded(ref: str | int) -> Any:
        read_on.append(threading.current_thread().name)
        return get(ref)

    try:
        number = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="p",
                              packet={"task": "Do it", "deliverable_type": "other",
                                      "acceptance_criteria": ["done"]}).number
        coder = Client(server.url, hive.add_token(OWNER, "ana/coder", instance="box").token)
        hive.get = recorded  # type: ignore[method-assign]
        answer = coder.claim_next(None, project="p")
        assert (answer.number, answer.task.task.state) == (number, "accepted")
        assert len(read_on) == 1, read_on
        assert read_on[0] != server.thread.name and not read_on[0].startswith(
            "hivelite-writer-"), read_on
        coder.close()
    finally:
        server.vaults.discard(vault)
        server.stop()
        hive.close()


def test_the_default_is_one_writer_and_fewer_than_one_is_refused(tmp_path: Path) -> None:
    assert WRITERS == CLI_WRITERS == 1
    assert Vaults([]).writers == 1
    with pytest.raises(ValueError, match="at least one writer"):
        Vaults([], writers=0)
    ran = run_main(["--db", str(tmp_path / "s.db"), "serve", "--writers", "0"],
                   {"HIVELITE_LOAD_PLUGINS": ""})
    assert ran.returncode == 2
    assert "--writers" in ran.stderr
    helped = run_main(["serve", "--help"], {"HIVELITE_LOAD_PLUGINS": ""})
    assert "--writers" in helped.stdout and "[default: 1;" in helped.stdout


@pytest.fixture(autouse=True)
def _quiet_threads() -> Iterator[None]:
    """No writer thread outlives its server."""
    yield
    ready(lambda: not any(t.name.startswith("hivelite-writer-")
                          for t in threading.enumerate()),
          "the writer threads ending", output=lambda: str(threading.enumerate()))
