"""``python -m bench.serve``: many agents through ``hivelite serve`` against the same loop
in-process.

A store with N routed tasks for each of A agents (default 32 agents), each with its own
token. Over HTTP: one ``hivelite serve`` process on a loopback port, A client threads
each running ``next -> checkpoint -> submit`` (threshold 0: a submit completes the task;
the agent reads the task ``next`` gave it)
until the time is up or its tasks run out. In-process: the same loop, A threads on one
``Hive``. Prints cycles/s, p50/p99 latency of a cycle, and checks: no task completed twice,
no cycle lost (every claim ended in a completion), no 5xx answer.

Figures only: nothing here asserts a timing. Needs the ``server`` extra.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hivelite import Caller, Hive, HiveliteError, NotFound, hookimpl

EVIDENCE = [{"kind": "test_output", "summary": "ok"}]


class NoConfirmation:
    """Threshold 0: a submit completes the task (the loop measures the write path)."""

    @hookimpl
    def hivelite_merge_threshold(self, task: Any, hive: Any) -> int:
        return 0


def build(path: Path, agents: int, tasks: int) -> list[str]:
    """The store, its tasks, and a token per agent (returned)."""
    tokens = []
    with Hive.open(path, owner="ana") as hive:
        owner = Caller.owner("ana")
        for a in range(agents):
            name = f"ana/agent-{a}"
            tokens.append(hive.add_token(owner, name, instance=f"box-{a}").token)
            for _ in range(tasks):
                hive.handoff(owner, requester="ana/planner", assignee=name, project="load",
                             packet={"task": "Do the thing", "deliverable_type": "other",
                                     "acceptance_criteria": ["done"]})
    return tokens


def cycle(hive: Any, caller: Caller | None) -> int:
    """One next -> checkpoint -> submit; the task's number (``NotFound``: none left). The
    agent reads the task it was given (its packet says what to do): over HTTP it comes
    with ``next``'s answer, in process it is read when first asked for."""
    lease = hive.claim_next(caller, project="load")
    if not lease.task.task.packet.task:
        raise RuntimeError(f"task {lease.number} came without its packet")
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    hive.checkpoint(caller, lease.number, **fence, progress="working")
    hive.submit(caller, lease.number, **fence, summary="done", evidence=EVIDENCE)
    return int(lease.number)


def run_agents(make: Callable[[int], tuple[Any, Caller | None]], agents: int,
               seconds: float) -> dict[str, Any]:
    """A threads, each looping cycles until the time is up or its queue is empty."""
    latencies: list[float] = []
    done: list[int] = []
    errors: list[str] = []

    def agent(a: int) -> None:
        hive, caller = make(a)
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                began = time.perf_counter()
                try:
                    number = cycle(hive, caller)
                except NotFound:
                    return
                latencies.append(time.perf_counter() - began)
                done.append(number)
        except HiveliteError as exc:
            errors.append(f"agent {a}: {exc}")
        except Exception as exc:  # a 5xx or a dropped connection
            errors.append(f"agent {a}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=agent, args=(a,)) for a in range(agents)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    ordered = sorted(latencies)
    return {"cycles": len(done), "per_s": len(done) / elapsed,
            "p50_ms": 1000 * statistics.median(ordered) if ordered else 0.0,
            "p99_ms": 1000 * ordered[int(0.99 * (len(ordered) - 1))] if ordered else 0.0,
            "duplicates": len(done) - len(set(done)), "errors": errors}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.serve")
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--writers", type=int, default=None,
                        help="the server's writer threads (default: hivelite serve's)")
    parser.add_argument("--tasks", type=int, default=800,
                        help="tasks per agent (enough that neither side runs out first)")
    args = parser.parse_args(argv)
    from hivelite.faces.client import Client

    with tempfile.TemporaryDirectory(prefix="hivelite-bench-serve-") as folder:
        http_db, local_db = Path(folder) / "http.db", Path(folder) / "local.db"
        tokens = build(http_db, args.agents, args.tasks)
        build(local_db, args.agents, args.tasks)
        plugin = Path(folder) / "plugins"
        plugin.mkdir(mode=0o700)
        (plugin / "no_confirmation.py").write_text(
            "from hivelite import hookimpl\n\n\n@hookimpl\n"
            "def hivelite_merge_threshold(task, hive):\n    return 0\n")
        (plugin / "no_confirmation.py").chmod(0o600)
        port = free_port()
        env = {**os.environ, "HIVELITE_LOAD_PLUGINS": ""}
        server = subprocess.Popen(
            [sys.executable, "-m", "hivelite", "--plugins-dir", str(plugin), "serve",
             str(http_db), "--port", str(port),
             *(["--writers", str(args.writers)] if args.writers else [])],
            env=env, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    Client(url, tokens[0]).close()
                    break
                except Exception:
                    time.sleep(0.1)
            http = run_agents(lambda a: (Client(url, tokens[a]), None), args.agents,
                              args.seconds)
        finally:
            server.terminate()
            server.wait(timeout=30)
        local_hive = Hive.open(local_db, plugins=[NoConfirmation()])
        local = run_agents(lambda a: (local_hive, Caller.agent(f"ana/agent-{a}", f"box-{a}")),
                           args.agents, args.seconds)
        local_hive.close()
    print(f"{args.agents} agents, next -> checkpoint -> submit, {args.seconds:g} s each side")
    print(f"{'side':<12}{'cycles':>8}{'cycles/s':>10}{'p50 ms':>9}{'p99 ms':>9}"
          f"{'dup':>5}{'errors':>8}")
    for name, found in (("http", http), ("in-process", local)):
        print(f"{name:<12}{found['cycles']:>8}{found['per_s']:>10.1f}{found['p50_ms']:>9.1f}"
              f"{found['p99_ms']:>9.1f}{found['duplicates']:>5}{len(found['errors']):>8}")
    for found in (http, local):
        for error in found["errors"][:5]:
            print("  " + error)
    if local["per_s"]:
        print(f"http / in-process: {http['per_s'] / local['per_s']:.2f}")
    from .figures import emit  # the last line: the figures, for bench.report
    emit({"agents": args.agents, "seconds": args.seconds, "http": http, "in_process": local})


if __name__ == "__main__":
    main()
