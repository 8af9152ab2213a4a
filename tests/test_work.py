"""``hive.work(...)`` (issue 19, point 2): the loop a script or a notebook runs for one
agent: the next ready task, its lease kept alive while the body runs, the body's result
submitted, the task given back when the body fails, a clean stop on KeyboardInterrupt;
several workers at once; the same loop through ``Client`` against a real server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

import hivelite
from hivelite import Caller, Hive, InvalidInput, ManualClock, State, TaskView, WorkReport

from .conftest import CODER, HANG_S, OWNER, OpenHive, own_task, ready

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]


def done(task: TaskView) -> dict[str, Any]:
    return {"summary": f"did {task.task.packet.task}", "evidence": EVIDENCE}


def reasons(hive: Hive, number: int) -> list[str]:
    return [e.reason or "" for e in hive.history(number)]


def test_work_submits_what_the_body_returns(open_hive: OpenHive) -> None:
    hive = open_hive()
    numbers = [own_task(hive, packet={"task": f"Write part {n}", "deliverable_type": "code",
                                      "acceptance_criteria": ["ok"]}) for n in range(3)]
    seen: list[int] = []

    def body(task: TaskView) -> dict[str, Any]:
        seen.append(task.number)
        assert task.task.state is State.accepted and task.claim is not None
        return done(task)

    report = hive.work(CODER, body)
    assert isinstance(report, WorkReport) and seen == numbers
    assert [r.number for r in report.submitted] == numbers
    assert (report.failed, report.released, report.lost, report.interrupted) == (
        [], [], [], False)
    for n in numbers:
        view = hive.get(n)
        assert view.task.state is State.approval and view.task.result is not None
        assert view.task.result.summary == f"did {view.task.packet.task}"
    assert repr(report) == "WorkReport(submitted 3, failed 0, released 0, lost 0)"


def test_limit_takes_that_many(open_hive: OpenHive) -> None:
    hive = open_hive()
    numbers = [own_task(hive) for _ in range(4)]
    assert [r.number for r in hive.work(CODER, done, limit=2).submitted] == numbers[:2]
    assert [hive.get(n).task.state for n in numbers[2:]] == [State.routed] * 2
    for bad in (0, -1, True, 1.5):
        with pytest.raises(InvalidInput):
            hive.work(CODER, done, limit=bad)  # type: ignore[arg-type]


def test_a_failing_body_counts_an_attempt_and_the_loop_goes_on(open_hive: OpenHive) -> None:
    hive = open_hive()
    first = own_task(hive, priority="high")
    second, third = own_task(hive), own_task(hive)

    def body(task: TaskView) -> dict[str, Any]:
        if task.number == second:
            raise ValueError("the parser will not parse")
        return done(task)

    report = hive.work(CODER, body, limit=2)
    assert [r.number for r in report.submitted] == [first]
    assert [(r.number, r.reason) for r in report.failed] == [
        (second, "the body failed: ValueError: the parser will not parse")]
    assert report.skipped == [second] and report.released == []
    view = hive.get(second)
    assert (view.task.state, view.attempts, view.outcome) == (State.routed, 1, "failed")
    assert "the body failed: ValueError: the parser will not parse" in (
        view.task.result.summary if view.task.result else "")
    assert hive.get(third).task.state is State.routed  # the limit was reached


def test_the_tasks_behind_a_failing_one_are_done_in_one_run_and_the_next(
        open_hive: OpenHive) -> None:
    """The issue's case: a failing task first in the queue, three behind it. Each run
    fails on it once (an attempt counted), skips it, and does the three; once its
    attempts are used up it is retired and no run takes it again."""
    hive = open_hive()
    failing = own_task(hive, priority="urgent")
    calls: list[int] = []

    def body(task: TaskView) -> dict[str, Any]:
        calls.append(task.number)
        if task.number == failing:
            raise RuntimeError("always")
        return done(task)

    for run in (1, 2, 3):
        behind = [own_task(hive) for _ in range(3)]
        report = hive.work(CODER, body)
        assert [r.number for r in report.submitted] == behind, run
        assert report.skipped == [failing], run
        assert hive.get(failing).attempts == run
    assert calls.count(failing) == 3
    assert hive.get(failing).lifecycle == "failed"  # its attempts ran out: retired
    again = hive.work(CODER, body)
    assert (again.submitted, again.failed) == ([], [])
    assert repr(again) == "WorkReport(submitted 0, failed 0, released 0, lost 0)"


@pytest.mark.parametrize("answer", ["done", {"summary": "done"}, {"summary": "done",
                                                                   "evidence": EVIDENCE,
                                                                   "colour": "red"}])
def test_a_body_that_returns_no_result_is_a_failure_of_the_body(
        open_hive: OpenHive, answer: object) -> None:
    hive = open_hive()
    number = own_task(hive)
    report = hive.work(CODER, lambda task: answer, limit=1)  # type: ignore[arg-type,return-value]
    assert report.submitted == [] and len(report.failed) == 1
    assert (hive.get(number).task.state, hive.get(number).attempts) == (State.routed, 1)
    reason = report.failed[0].reason
    assert ("invalid_work_result" in reason or "InvalidInput" in reason
            or "submit refused" in reason), reason


def test_the_lease_is_renewed_while_the_body_runs(open_hive: OpenHive,
                                                 clock: ManualClock) -> None:
    """A five-minute lease, a body that takes eight: it still submits, because the
    lease was renewed in between. (Mutation caught: a keeper that never renews.)"""
    hive = open_hive()
    number = own_task(hive)
    renewed = threading.Event()

    def body(task: TaskView) -> dict[str, Any]:
        clock.advance(minutes=4)
        expires = hive.get(task.number).claim
        assert expires is not None

        def later() -> bool:  # until the keeper has renewed from minute 4
            now = hive.get(task.number).claim
            return now is not None and now.expires_at > expires.expires_at

        ready(later, "the keeper to renew the lease")
        renewed.set()
        clock.advance(minutes=4)
        return done(task)

    report = hive.work(CODER, body, minutes=5, renew_every=0.05)
    assert renewed.is_set()
    assert [r.number for r in report.submitted] == [number] and report.lost == []


def test_a_lease_the_owner_ends_is_lost_not_submitted(open_hive: OpenHive) -> None:
    hive = open_hive()
    number = own_task(hive)

    def body(task: TaskView) -> dict[str, Any]:
        hive.hold(OWNER, agent="ana/coder", reason="not now")
        return done(task)

    report = hive.work(CODER, body, limit=1)
    assert report.submitted == [] and report.lost == [number]
    assert hive.get(number).task.state is State.routed


def test_keyboard_interrupt_gives_the_task_back_and_ends_the_run(open_hive: OpenHive) -> None:
    hive = open_hive()
    first, second = own_task(hive), own_task(hive)

    def body(task: TaskView) -> dict[str, Any]:
        raise KeyboardInterrupt

    report = hive.work(CODER, body)
    assert report.interrupted and [r.number for r in report.released] == [first]
    assert hive.get(first).task.state is State.routed
    assert "interrupted" in reasons(hive, first)
    assert hive.get(second).task.state is State.routed  # never taken


def test_several_workers_in_threads_take_each_task_once(open_hive: OpenHive) -> None:
    hive = open_hive()
    numbers = [own_task(hive) for _ in range(24)]
    reports: list[WorkReport] = []

    def worker(instance: str) -> None:
        def body(task: TaskView) -> dict[str, Any]:
            time.sleep(0.005)
            return done(task)
        reports.append(hive.work(Caller.agent("ana/coder", instance), body))

    threads = [threading.Thread(target=worker, args=(f"box{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=HANG_S)
    taken = sorted(r.number for report in reports for r in report.submitted)
    assert taken == numbers
    assert all(not r.released and not r.lost for r in reports)


def test_next_passes_over_the_tasks_it_is_told_to_skip(open_hive: OpenHive) -> None:
    hive = open_hive()
    first, second = own_task(hive, priority="high"), own_task(hive)
    assert hive.claim_next(CODER, skip=[first]).number == second
    for bad in (["3"], [0], [True], list(range(1, 502)), "12"):
        with pytest.raises(InvalidInput) as refused:
            hive.claim_next(CODER, skip=bad)  # type: ignore[arg-type]
        assert refused.value.reason == "invalid_skip"
    assert hive.get(first).task.state is State.routed


# -- issue 46: nothing spins, an interrupt anywhere gives the task back --------------------


class SendsBack:
    """The evidence plugin's rule for code, in miniature: a code result with only a note
    is sent straight back."""

    @hivelite.hookimpl
    def hivelite_check_evidence(self, task: Any, result: Any, hive: Any) -> list[str]:
        kinds = {e.kind for e in result.evidence}
        return [] if kinds & {"test_output", "commit"} else ["code needs a test run or commit"]


NOTE_ONLY = {"summary": "done", "evidence": [{"kind": "note", "summary": "looked at it"}]}


def test_a_result_sent_back_counts_an_attempt_and_the_run_leaves_the_task(
        open_hive: OpenHive) -> None:
    """The loop that spun for ever: a body whose result a policy always sends back. Each
    run takes each task once (an attempt counted, the task skipped for the rest of the
    run); after max_attempts runs the tasks are retired and a run takes nothing.
    (Mutations caught: the run not skipping a returned task; the trigger not counting.)"""
    hive = open_hive(plugins=[SendsBack()])
    numbers = [own_task(hive) for _ in range(2)]
    calls: list[int] = []

    def body(task: TaskView) -> dict[str, Any]:
        calls.append(task.number)
        return NOTE_ONLY

    for run in (1, 2, 3):
        report = hive.work(CODER, body)
        assert [r.number for r in report.returned] == numbers, run
        assert all("code needs a test run or commit" in r.reason for r in report.returned)
        assert report.submitted == [] and report.skipped == numbers
        assert [hive.get(n).attempts for n in numbers] == [run, run]
        assert repr(report) == ("WorkReport(submitted 0, failed 0, returned 2, released 0,"
                                " lost 0)")
    assert calls == numbers * 3
    assert [hive.get(n).lifecycle for n in numbers] == ["failed", "failed"]
    assert hive.work(CODER, body).returned == [] and calls == numbers * 3


class CutOff:
    """A face whose answer to one call is lost to a Ctrl-C: the call is made (and
    committed), then KeyboardInterrupt is raised before the loop hears the answer."""

    def __init__(self, hive: Hive, verb: str, *, before: bool = False) -> None:
        self.hive, self.verb, self.before = hive, verb, before

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.hive, name)
        if name != self.verb:
            return real

        def cut(*args: Any, **kwargs: Any) -> Any:
            if self.before:
                raise KeyboardInterrupt
            real(*args, **kwargs)
            raise KeyboardInterrupt
        return cut


def test_an_interrupt_that_cuts_off_the_claims_answer_gives_the_task_back(
        open_hive: OpenHive) -> None:
    """Ctrl-C after the claim committed but before the loop heard it: the run finds the
    claim this agent holds from this instance and gives it back. (Mutation caught: the
    interrupt handled only once a task is in hand.)"""
    hive = open_hive()
    number = own_task(hive)
    other = own_task(hive)
    elsewhere = Caller.agent("ana/coder", "desktop")
    held = hive.claim(elsewhere, other)  # another instance's claim is not this run's
    from hivelite.verbs.work import work
    report = work(CutOff(hive, "claim_next"), CODER, done)  # type: ignore[arg-type]
    assert report.interrupted and [r.number for r in report.released] == [number]
    assert hive.get(number).task.state is State.routed and hive.get(number).claim is None
    assert hive.get(number).attempts == 0
    assert hive.get(number).attempts == 0
    assert hive.get(other).claim is not None and held.number == other


def test_an_interrupt_while_submitting_gives_the_task_back(open_hive: OpenHive) -> None:
    """Ctrl-C as the result is about to go: the task is released (no attempt counted), the
    run ends with its report, no traceback."""
    hive = open_hive()
    number = own_task(hive)
    from hivelite.verbs.work import work
    face = CutOff(hive, "submit", before=True)
    report = work(face, CODER, done)  # type: ignore[arg-type]
    assert report.interrupted and [r.number for r in report.released] == [number]
    assert hive.get(number).task.state is State.routed and hive.get(number).claim is None
    assert hive.get(number).attempts == 0


# -- in a real process, with the first-party plugins installed (issue 46's 'done when') ---

WORKER = '''
import json, sys, time
from hivelite import Caller, Hive

db, mode = sys.argv[1], sys.argv[2]
me = Caller.agent("ana/coder", "laptop")

def refused(task):  # docs/workers.md's example for a code task: only a note
    return {"summary": "done", "evidence": [{"kind": "note", "summary": "checked"}]}

def slow(task):
    print("working", task.number, flush=True)
    while True:
        time.sleep(0.05)

with Hive.open(db) as hive:
    if mode == "refused":
        runs = []
        while True:
            report = hive.work(me, refused)
            runs.append([r.number for r in report.returned])
            if not report.returned and not report.submitted:
                break
        print(json.dumps({"runs": runs,
                          "attempts": [hive.get(n).attempts for n in (1, 2)]}))
    else:
        report = hive.work(me, slow)
        print(json.dumps({"interrupted": report.interrupted,
                          "released": [r.number for r in report.released]}), flush=True)
'''


def real_store(path: Any) -> None:
    """A store where the evidence plugin is enabled, with two code tasks."""
    with Hive.open(path, owner="ana") as hive:
        hive.enable_plugin(hive.as_owner(), "evidence")
        for n in (1, 2):
            own_task(hive, packet={"task": f"Fix bug {n}", "deliverable_type": "code",
                                   "acceptance_criteria": ["tests pass"]})


def worker(path: Any, mode: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    return subprocess.Popen([sys.executable, "-c", WORKER, str(path), mode], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_run_over_results_the_evidence_plugin_refuses_ends_by_itself(tmp_path: Any) -> None:
    """Each run takes each task once and ends; the runs stop once every task has used its
    attempts (max_attempts: 3): no loop, however often it is started again."""
    path = tmp_path / "work.db"
    real_store(path)
    process = worker(path, "refused")
    out, err = process.communicate(timeout=HANG_S)
    assert process.returncode == 0, err
    assert json.loads(out) == {"runs": [[1, 2], [1, 2], [1, 2], []], "attempts": [3, 3]}


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a child process")
def test_ctrl_c_in_a_real_worker_gives_the_task_back(tmp_path: Any) -> None:
    path = tmp_path / "work.db"
    real_store(path)
    process = worker(path, "slow")
    assert process.stdout is not None
    line = ready(process.stdout.readline, "the worker to start its task", process)
    assert line.split() == ["working", "1"]
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=HANG_S)
    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert json.loads(out) == {"interrupted": True, "released": [1]}
    with Hive.open(path) as hive:
        view = hive.get(1)
        assert (view.task.state, view.claim, view.attempts) == (State.routed, None, 0)
        assert "interrupted" in reasons(hive, 1)


def test_an_interrupt_while_idle_leaves_a_claim_made_before_the_run_alone(
        open_hive: OpenHive, clock: ManualClock) -> None:
    """Ctrl-C while ``claim_next`` waits: only a claim the interrupted call could have
    made is given back; one the agent made by hand before the run keeps its lease.
    (Mutation caught: every claim of this agent and instance given back.)"""
    hive = open_hive()
    mine = own_task(hive)
    by_hand = hive.claim(CODER, mine)
    clock.advance(seconds=1)  # the run starts after the claim was made
    from hivelite.verbs.work import work
    report = work(CutOff(hive, "claim_next", before=True), CODER, done)  # type: ignore[arg-type]
    assert report.interrupted and report.released == []
    claim = hive.get(mine).claim
    assert claim is not None and claim.expires_at == by_hand.expires_at
    assert hive.lease(CODER, mine).lease_id == by_hand.lease_id


def test_a_run_that_passes_over_more_tasks_than_next_can_skip_still_ends(
        open_hive: OpenHive) -> None:
    """More tasks sent back than ``next`` takes numbers to skip (500): the run skips the
    newest, and ends by itself once ``next`` offers one it already passed over (given back
    untouched), no task taken twice."""
    hive = open_hive(plugins=[SendsBack()])
    made = hive.handoff_many(OWNER, [{"requester": "ana/planner", "assignee": "ana/coder",
                                      "project": "site", "packet": {
                                          "task": f"Fix bug {n}", "deliverable_type": "code",
                                          "acceptance_criteria": ["ok"]}}
                                     for n in range(505)])
    report = hive.work(CODER, lambda task: NOTE_ONLY)
    numbers = [r.number for r in made]
    assert [r.number for r in report.returned] == numbers[:501]
    assert [r.number for r in report.released] == numbers[:1]
    assert "passed over" in report.released[0].reason
    assert hive.get(numbers[0]).claim is None


def test_a_keeper_stopped_before_it_started_is_no_error() -> None:
    from hivelite.verbs.work import _Keeper

    got = type("Got", (), {"number": 1})()
    keeper = _Keeper(None, CODER, got, 10, 1.0)  # type: ignore[arg-type]
    keeper.stop()  # an interrupt may land between making the keeper and starting it
