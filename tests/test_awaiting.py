"""``await``: a task's outcome, or the verdict on its result, waited for instead of polled;
and watches, the durable waits the MCP face serves as tasks.

On each engine, and over HTTP (the ``Client`` calls the verb's route): where a task stands
at each step of the flow, a verdict judged on the submission awaited even after the task
moved on, the owner's decision offered only to the owner, a wait that ends when another
opener of the store settles the task, and the refusals. A watch is kept before it is
answered, found again by its caller and token alone, never by another, and not once it
expired.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

import pytest

from hivelite import Caller, Hive, InvalidInput, InvalidState, ManualClock, NotFound, State
from hivelite.core.ids import number_of
from hivelite.verbs.watches import PREFIX

from .conftest import (
    CODER,
    GUEST,
    HANG_S,
    OWNER,
    PLANNER,
    REVIEWER,
    START,
    OpenHive,
    Snap,
    held_task,
    own_task,
    ready,
    refused,
)
from .test_results import EVIDENCE, holder_of

pytestmark = pytest.mark.contract


def submitted(hive: Hive, n: int) -> None:
    lease = hive.claim(CODER, n)
    hive.submit(holder_of(lease), n, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)


def test_an_outcome_is_awaited_through_every_step_of_the_flow(hive: Hive) -> None:
    n = own_task(hive)
    seen = hive.await_task(OWNER, n)
    assert (seen.number, seen.until, seen.settled, seen.outcome, seen.decision) == (
        n, "outcome", False, None, None)
    assert seen.status == "routed to ana/coder, not claimed yet"
    assert seen.view.task.state is State.routed
    lease = hive.claim(CODER, n)
    assert hive.await_task(OWNER, n).status == "claimed: claimed by ana/coder on laptop"
    hive.checkpoint(holder_of(lease), n, lease_id=lease.lease_id, token=lease.fencing_token,
                    progress="half way")
    assert hive.await_task(OWNER, n).status == "working: claimed by ana/coder on laptop"
    hive.submit(holder_of(lease), n, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    seen = hive.await_task(OWNER, n)
    assert (seen.settled, seen.decision) == (False, "sign_off")
    assert seen.status == "result awaits its verdict: 0 of 1 confirmations"
    assert hive.await_task(REVIEWER, n).decision is None  # the owner's decision alone
    hive.verify(REVIEWER, n)
    seen = hive.await_task(REVIEWER, n)
    assert (seen.settled, seen.outcome, seen.status) == (True, "completed", "completed")
    assert seen.view.task.result is not None and seen.view.confirmations


def test_a_held_handoff_offers_the_owner_its_decision_and_a_denial_settles_it(
        hive: Hive) -> None:
    n = held_task(hive)
    seen = hive.await_task(OWNER, n)
    assert (seen.settled, seen.status, seen.decision) == (False, "held for the owner",
                                                          "approve")
    assert hive.await_task(GUEST, n).decision is None
    hive.deny(OWNER, n, reason="not now")
    seen = hive.await_task(GUEST, n)
    assert (seen.settled, seen.outcome, seen.reason) == (True, "rejected", "not now")


def test_a_verdict_is_the_one_on_the_submission_awaited(hive: Hive) -> None:
    n = own_task(hive)
    submitted(hive, n)
    first = hive.await_task(CODER, n, until="verdict")
    assert (first.settled, first.since) == (False, hive.history(n)[-2].seq)
    hive.decline(OWNER, n, reason="tests are missing")
    submitted(hive, n)  # sent back, then submitted again: the first wait stays answered
    again = hive.await_task(CODER, n, until="verdict", since=first.since)
    assert (again.settled, again.outcome, again.reason) == (True, "sent_back",
                                                            "tests are missing")
    latest = hive.await_task(CODER, n, until="verdict")
    assert latest.since is not None and latest.since > first.since and not latest.settled
    hive.sign_off(OWNER, n)
    assert hive.await_task(CODER, n, until="verdict").outcome == "completed"


def test_a_verdict_given_in_the_submissions_own_row_settles_the_wait(hive: Hive) -> None:
    """A result the guard sends back at once is judged in its submission's one journal row
    (migration 19): the verdict has the submission's seq, and the wait on it is settled."""
    n = own_task(hive)
    lease = hive.claim(CODER, n)
    hive.submit(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="no luck", evidence=EVIDENCE, outcome="failed")
    seen = hive.await_task(CODER, n, until="verdict")
    assert (seen.settled, seen.outcome) == (True, "sent_back")
    assert seen.since == hive.history(n)[-1].seq


def waiting_begins(hive: Hive, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once a wait of ``hive`` has looked once and listens for the store's changes
    (its store's ``listen``: over HTTP, the served store's, in this process)."""
    began = threading.Event()
    listen = hive.store.listen

    def listening() -> None:
        listen()
        began.set()

    monkeypatch.setattr(hive.store, "listen", listening)
    return began


def when_waiting(began: threading.Event, waiting: Future[Any]) -> None:
    """Until the wait has begun (``began``); an await that answered or failed first ends
    the test at once with its answer or its error."""
    ready(lambda: began.is_set() or waiting.done(), "the wait to begin")
    assert began.is_set(), f"the await ended before it waited: {waiting.result()!r}"


def test_a_wait_ends_when_another_opener_settles_the_task(
        hive: Hive, open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    n = own_task(hive)
    other = open_hive()
    began = waiting_begins(hive, monkeypatch)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(hive.await_task, OWNER, n, wait=60)
        when_waiting(began, waiting)
        other.cancel(OWNER, n, reason="no longer needed")
        seen = waiting.result(timeout=HANG_S)
    other.close()
    assert (seen.settled, seen.outcome, seen.reason) == (True, "cancelled", "no longer needed")


def test_a_wait_that_runs_out_answers_where_the_task_stands(hive: Hive) -> None:
    n = own_task(hive)
    seen = hive.await_task(OWNER, n, wait=0.2)
    assert (seen.settled, seen.view.task.state) == (False, State.routed)


@pytest.mark.parametrize(("kwargs", "kind", "reason"), [
    ({"until": "done"}, InvalidInput, "invalid_until"),
    ({"wait": -1}, InvalidInput, "invalid_wait"),
    ({"until": "verdict", "since": 1}, InvalidInput, "invalid_since"),
])
def test_a_bad_await_is_refused_and_changes_nothing(hive: Hive, snap: Snap, kwargs: Any,
                                                    kind: type, reason: str) -> None:
    n = own_task(hive)
    refused(snap, kind, reason, lambda: hive.await_task(OWNER, n, **kwargs))


def test_a_verdict_on_a_closed_task_with_no_result_is_refused(hive: Hive, snap: Snap) -> None:
    """No verdict will come: ``not_submitted``, saying so."""
    n = own_task(hive)
    hive.cancel(OWNER, n, reason="not needed")
    error = refused(snap, InvalidState, "not_submitted",
                    lambda: hive.await_task(CODER, n, until="verdict"))
    assert error.message == (f"task {n} is cancelled with no submitted result: no verdict"
                             " will come")


def test_a_verdict_awaited_before_any_submission_waits_for_it(
        hive: Hive, open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not refused: not settled yet (asked once), and a wait waits for the first result
    to come, then for its verdict; a result sent back and submitted again before it looks
    still answers with the first one's verdict. On every face (the file, HTTP through the
    ``Client``, each engine): the same answer."""
    n = own_task(hive)
    seen = hive.await_task(PLANNER, n, until="verdict")
    assert (seen.settled, seen.since, seen.outcome) == (False, None, None)
    assert seen.status == "routed to ana/coder, not claimed yet; no result submitted yet"
    began = waiting_begins(hive, monkeypatch)  # looked once (no result), now listens
    other = open_hive()
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(hive.await_task, PLANNER, n, until="verdict", wait=60)
        when_waiting(began, waiting)
        submitted(other, n)
        other.verify(REVIEWER, n, verdict="reject", reason="no tests")
        submitted(other, n)
        seen = waiting.result(timeout=HANG_S)
    other.close()
    first = next(e.seq for e in hive.history(n) if e.move == 12)
    assert (seen.settled, seen.outcome, seen.reason, seen.since) == (
        True, "sent_back", "no tests", first)
    latest = hive.await_task(PLANNER, n, until="verdict")  # asked afresh: the latest
    assert latest.since is not None and latest.since > first and not latest.settled


def test_a_wait_for_a_verdict_ends_when_the_task_closes_without_a_result(
        hive: Hive, open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    n = own_task(hive)
    began = waiting_begins(hive, monkeypatch)
    other = open_hive()
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(hive.await_task, PLANNER, n, until="verdict", wait=60)
        when_waiting(began, waiting)
        other.cancel(OWNER, n, reason="not needed")
        seen = waiting.result(timeout=HANG_S)
    other.close()
    assert (seen.settled, seen.outcome, seen.reason, seen.since) == (
        True, "cancelled", "not needed", None)


def test_an_unknown_task_is_not_found(hive: Hive, snap: Snap) -> None:
    refused(snap, NotFound, "no_such_task", lambda: hive.await_task(OWNER, 999))


# -- watches (the MCP face's tasks; on the store itself) ------------------------------

@pytest.mark.file_only
def test_a_watch_is_kept_found_by_its_maker_alone_and_lost_when_it_expires(
        hive: Hive, open_hive: OpenHive, clock: ManualClock) -> None:
    n = own_task(hive)
    t1, t2 = (hive.add_token(OWNER, CODER.name, instance="laptop").id for _ in range(2))
    made = hive.watch(CODER, "handoff", number=n, asked={"until": "outcome"}, token=t1,
                      ttl_ms=60_000, poll_ms=500)
    assert made.id.startswith(PREFIX) and len(made.id) >= len(PREFIX) + 32
    assert number_of(made.id) is None and made.number == n  # never a task's number
    other = open_hive()  # kept: another opener finds it at once
    assert other.watched(CODER, made.id, token=t1) == made
    for caller, token in ((CODER, None), (CODER, t2), (REVIEWER, t1), (OWNER, t1)):
        with pytest.raises(NotFound) as found:
            other.watched(caller, made.id, token=token)
        assert found.value.reason == "no_such_watch"
    with pytest.raises(NotFound):
        other.watched(CODER, made.id[:-1] + ("A" if made.id[-1] != "A" else "B"), token=t1)
    settled = other.settle_watch(CODER, made.id, token=t1, answer='{"claimed":1}')
    assert (settled.answer, settled.cancelled_at) == ('{"claimed":1}', None)
    cancelled = other.settle_watch(CODER, made.id, token=t1, cancelled=True)
    assert cancelled.cancelled_at is not None
    late = other.settle_watch(CODER, made.id, token=t1, answer='{"claimed":2}')
    assert late.answer == '{"claimed":1}'  # an answer after the cancel is not kept
    other.revoke_token(OWNER, t2)
    other.watched(CODER, made.id, token=t1)  # another token's end is not this one's
    other.revoke_token(OWNER, t1)
    with pytest.raises(NotFound):  # a token revoked proves nothing any more
        other.watched(CODER, made.id, token=t1)
    local = other.watch(CODER, "await", number=n, ttl_ms=60_000, poll_ms=500)  # no token
    clock.advance(seconds=59)
    assert other.watched(CODER, local.id) == local
    clock.advance(seconds=2)
    with pytest.raises(NotFound):  # expired
        other.watched(CODER, local.id)
    other.close()


@pytest.mark.file_only
def test_a_foreign_watch_is_neither_read_nor_settled_through_the_library(
        hive: Hive, snap: Snap, open_hive: OpenHive) -> None:
    """M03: a watch is its maker's, with the token that made it or with none, in the
    library as on MCP: another caller, with or without that token, is told it does not
    exist, and settling it changes nothing (another opener of the store alike)."""
    n = own_task(hive)
    token = hive.add_token(OWNER, CODER.name, instance="laptop").id
    made = [(CODER, None, hive.watch(CODER, "await", number=n)),  # a library caller's
            (CODER, token, hive.watch(CODER, "await", number=n, token=token)),
            (OWNER, None, hive.watch(OWNER, "handoff", number=n)),
            (REVIEWER, None, hive.watch(REVIEWER, "next"))]
    other = open_hive()
    for maker, proof, watch in made:
        assert other.watched(maker, watch.id, token=proof) == watch
        for caller in (CODER, REVIEWER, OWNER, GUEST):
            for given in (None, token):
                if caller.name == maker.name and given == proof:
                    continue
                for face in (hive, other):
                    asks = (partial(face.watched, caller, watch.id, token=given),
                            partial(face.settle_watch, caller, watch.id, token=given,
                                    cancelled=True),
                            partial(face.settle_watch, caller, watch.id, token=given,
                                    answer='{"claimed":1}'))
                    for ask in asks:
                        refused(snap, NotFound, "no_such_watch", ask)
        assert other.watched(maker, watch.id, token=proof) == watch  # untouched
    other.close()


@pytest.mark.file_only
def test_expired_watches_are_pruned_when_a_watch_is_made(hive: Hive,
                                                        clock: ManualClock) -> None:
    old = [hive.watch(OWNER, "await", number=own_task(hive), ttl_ms=1000, poll_ms=500)
           for _ in range(3)]
    clock.advance(seconds=2)
    hive.watch(OWNER, "next")
    with hive.store.read() as reader:
        assert all(reader.watch(w.id) is None for w in old)


@pytest.mark.file_only
@pytest.mark.parametrize(("verb", "kwargs", "reason"), [
    ("claim", {}, "invalid_watch"),
    ("next", {"ttl_ms": 0}, "invalid_ttl_ms"),
    ("next", {"poll_ms": True}, "invalid_poll_ms"),
    ("next", {"ttl_ms": 1000, "poll_ms": 2000}, "invalid_poll_ms"),
])
def test_a_bad_watch_is_refused_and_changes_nothing(hive: Hive, snap: Snap, verb: str,
                                                   kwargs: Any, reason: str) -> None:
    refused(snap, InvalidInput, reason, lambda: hive.watch(OWNER, verb, **kwargs))


@pytest.mark.file_only
def test_a_stopped_agent_makes_no_watch(hive: Hive, snap: Snap) -> None:
    from hivelite import ForbiddenRight

    hive.stop(OWNER, agent=CODER.name, reason="paused")
    caller = Caller.agent(CODER.name, "laptop")
    with pytest.raises(ForbiddenRight):
        hive.watch(caller, "next")


# -- the command line ------------------------------------------------------------------

@pytest.mark.file_only
def test_hivelite_await_says_where_a_task_stands_and_refuses_a_bad_until(
        tmp_path: Any) -> None:
    from .inproc import run_main

    db = str(tmp_path / "s.db")
    env = {"HIVELITE_LOAD_PLUGINS": "", "HIVELITE_NOW": START}
    assert run_main(["--db", db, "init", "--owner", "ana"], env).returncode == 0
    made = run_main(["--db", db, "--json", "handoff", "--requester", "guest/scout",
                     "--assignee", "ana/coder", "--project", "demo", "--agent",
                     "guest/scout", "--instance", "elsewhere", "--task", "Fix the login bug",
                     "--type", "code", "--accept", "tests pass"], env)
    assert made.returncode == 0, made.stderr
    n = str(json.loads(made.stdout)["number"])
    early = run_main(["--db", db, "await", n, "--until", "verdict"], env)  # none yet: waits
    assert early.returncode == 0, early.stderr
    assert early.stdout.splitlines()[:2] == [
        f"task {n} (Fix the login bug): held for the owner; no result submitted yet",
        "not settled yet: ask again (--wait SECONDS waits for it)"]
    shown = run_main(["--db", db, "await", n], env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        f"task {n} (Fix the login bug): held for the owner",
        "not settled yet: ask again (--wait SECONDS waits for it)",
        f"yours to decide: hivelite approve {n}, or deny"]
    run_main(["--db", db, "deny", n, "--reason", "not now"], env)
    seen = json.loads(run_main(["--db", db, "--json", "await", n, "--wait", "0.5"],
                               env).stdout)
    assert (seen["settled"], seen["outcome"], seen["reason"]) == (True, "rejected", "not now")
    bad = run_main(["--db", db, "await", n, "--until", "done"], env)
    assert bad.returncode == 2 and "until" in bad.stderr  # a choice click refuses
    none = run_main(["--db", db, "await", n, "--until", "verdict"], env)
    assert none.returncode == 3 and "not_submitted" in none.stderr
