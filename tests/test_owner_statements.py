"""The owner's moves as their statements (issue 47, item 1): ``approve``, ``deny``,
``sign_off``, ``decline`` and the owner's ``cancel`` are one write each, on both engines,
when the task is where the verb moves it from and nothing else stands in the way; the
store's rules check the move. Every other case takes the full run, which refuses in the
words it always used.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hivelite import Hive, ManualClock, State, hookimpl

from .both_ways import full_run_only, in_approval, refusals_both_ways
from .conftest import CODER, OWNER, START, OpenHive, held_task, own_task
from .test_statements import FullRuns

pytestmark = pytest.mark.contract


def claimed(hive: Hive) -> int:
    number = own_task(hive)
    hive.claim(CODER, number)
    return number


MOVES: dict[str, tuple[Callable[[Hive], int], Callable[[Hive, int], Any], State]] = {
    "approve": (held_task, lambda hive, n: hive.approve(OWNER, n), State.routed),
    "deny": (held_task, lambda hive, n: hive.deny(OWNER, n, reason="not now"),
             State.rejected),
    "sign_off": (in_approval, lambda hive, n: hive.sign_off(OWNER, n), State.completed),
    "decline": (in_approval, lambda hive, n: hive.decline(OWNER, n, reason="redo it"),
                State.routed),
    "cancel a routed task": (own_task, lambda hive, n: hive.cancel(OWNER, n),
                             State.cancelled),
    "cancel a claimed task": (claimed, lambda hive, n: hive.cancel(OWNER, n, reason="gone"),
                              State.cancelled),
}


@pytest.mark.parametrize("verb", MOVES)
def test_each_owner_move_is_its_statement_in_the_plain_case(
        open_hive: OpenHive, verb: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hive = open_hive()
    make, move, target = MOVES[verb]
    number = make(hive)
    runs = FullRuns(monkeypatch)
    receipt = move(hive, number)
    assert runs.verbs == []
    view = hive.get(number)
    assert (receipt.number, receipt.state) == (number, target) == (number, view.task.state)
    assert view.claim is None
    assert receipt.seq == hive.last_seq() == hive.history(number)[-1].seq
    last = hive.history(number)[-1]
    assert (last.actor, last.to_state) == ("ana", target)


def wrong_cases(hive: Hive) -> dict[str, Callable[[], Any]]:
    """Each owner move where it does not apply (each task made here, in this order)."""
    routed, done, held = own_task(hive), in_approval(hive), held_task(hive)
    hive.sign_off(OWNER, done)
    cancelled = own_task(hive)
    hive.cancel(OWNER, cancelled)
    waiting = in_approval(hive)
    claimed_ = claimed(hive)
    paused = claimed(hive)
    lease = hive.lease(CODER, paused)
    hive.pause(CODER, paused, lease_id=lease.lease_id, token=lease.fencing_token, on="human",
               reason="which one?")
    return {
        "approve a paused task": lambda: hive.approve(OWNER, paused),
        "deny a paused task": lambda: hive.deny(OWNER, paused, reason="no"),
        "decline a claimed task": lambda: hive.decline(OWNER, claimed_, reason="no"),
        "sign off a claimed task": lambda: hive.sign_off(OWNER, claimed_),
        "approve a claimed task": lambda: hive.approve(OWNER, claimed_),
        "approve a routed task": lambda: hive.approve(OWNER, routed),
        "deny a completed task": lambda: hive.deny(OWNER, done),
        "sign off a routed task": lambda: hive.sign_off(OWNER, routed),
        "sign off a held task": lambda: hive.sign_off(OWNER, held),
        "decline a cancelled task": lambda: hive.decline(OWNER, cancelled, reason="no"),
        "cancel a completed task": lambda: hive.cancel(OWNER, done),
        "cancel a result awaiting a decision": lambda: hive.cancel(OWNER, waiting),
        "approve no such task": lambda: hive.approve(OWNER, 999),
        "cancel no such id": lambda: hive.cancel(OWNER, "T-nope"),
        "an agent signs off": lambda: hive.sign_off(CODER, waiting),
        "an agent cancels": lambda: hive.cancel(CODER, routed),
    }


def test_the_refusals_read_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, wrong_cases)
    assert said["cancel a result awaiting a decision"][1] == "not_cancellable"
    assert said["sign off a held task"][1] == "not_submitted"


def test_the_statements_leave_the_journal_the_full_run_leaves(
        open_hive: OpenHive, tmp_path: Path) -> None:
    written = []
    for statements in (True, False):
        hive = open_hive(path=tmp_path / f"{statements}.db", clock=ManualClock(START))
        if not statements:
            full_run_only(hive)
        numbers = []
        for make, move, _ in MOVES.values():
            numbers.append(make(hive))
            move(hive, numbers[-1])
        written.append([(e.number, e.from_state, e.to_state, e.actor, e.reason, e.detail)
                        for n in numbers for e in hive.history(n)])
    assert written[0] == written[1]


def test_a_lease_run_out_is_swept_by_the_statement_and_a_required_plugin_takes_the_full_run(
        open_hive: OpenHive, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    class Decides:
        @hookimpl
        def hivelite_merge_threshold(self, task: Any, hive: Any) -> int:
            return 1

    hive = open_hive(plugins=[Decides()])
    number = own_task(hive)
    hive.claim(CODER, number, minutes=5)
    clock.advance(minutes=6)
    runs = FullRuns(monkeypatch)
    assert hive.cancel(OWNER, number).state is State.cancelled
    assert runs.verbs == []  # swept first: expired, then cancelled from routed
    assert [e.reason for e in hive.history(number)][-2:] == ["expired", "cancel"]
    hive.require_plugin(OWNER, "Decides")
    waiting = in_approval(hive)
    runs.verbs.clear()
    assert hive.sign_off(OWNER, waiting).state is State.completed
    assert runs.verbs == ["sign_off"]
