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

from hivelite import Caller, Hive, HiveliteError, ManualClock, State, hookimpl

from .both_ways import full_run_only, in_approval, refusals_both_ways, written_both_ways
from .conftest import CODER, GUEST, OWNER, START, OpenHive, held_task, own_task, packet
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
    "release a claimed task": (claimed, lambda hive, n: hive.release(OWNER, n, reason="mine"),
                               State.routed),
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
        "an agent cancels with a reason too long": lambda: hive.cancel(CODER, routed,
                                                                       reason="x" * 501),
        "release a routed task": lambda: hive.release(OWNER, routed),
        "release a paused task": lambda: hive.release(OWNER, paused),
        "release a held task": lambda: hive.release(OWNER, held),
        "release a completed task": lambda: hive.release(OWNER, done),
        "release no such task": lambda: hive.release(OWNER, 999),
    }


def test_the_refusals_read_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, wrong_cases)
    assert said["cancel a result awaiting a decision"][1] == "not_cancellable"
    assert said["sign off a held task"][1] == "not_submitted"
    assert said["an agent cancels with a reason too long"][1] == "not_permitted"
    assert [said[f"release a {what} task"][1] for what in ("routed", "paused", "held",
                                                            "completed")
            ] == ["not_claimed", "not_claimed", "not_claimed", "task_closed"]


GUEST_PLANNER = Caller.agent("guest/planner", "elsewhere")


def team(hive: Hive) -> dict[str, int]:
    """A team store: a guest's request (routed, and one claimed), and the owner's own."""
    hive.set_policy(OWNER, "mode", "team")
    guests = [hive.handoff(GUEST, requester=GUEST.name, assignee="ana/coder",
                           project="demo", packet=packet()).number for _ in range(2)]
    for number in guests:
        if hive.get(number).task.state is State.waiting:  # (held for the owner)
            hive.approve(OWNER, number)
    hive.claim(CODER, guests[1])
    return {"routed": guests[0], "claimed": guests[1], "owners": own_task(hive)}


def test_a_guest_s_agent_withdraws_its_owner_s_request_as_a_statement(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def scenario(hive: Hive) -> Any:
        made = team(hive)
        receipts = [hive.cancel(GUEST_PLANNER, made[k], reason="not needed")
                    for k in ("routed", "claimed")]
        return ([(r.state, r.seq) for r in receipts],
                [(e.seq, e.from_state, e.to_state, e.actor, e.reason)
                 for k in ("routed", "claimed") for e in hive.history(made[k])])

    written, ran = written_both_ways(open_hive, tmp_path, scenario, monkeypatch, "cancel")
    assert ran == [0, 2]
    receipts, rows = written
    assert [r[0] for r in receipts] == [State.cancelled] * 2
    assert rows[-1][3:] == ("guest/planner", "not needed")


def team_cases(hive: Hive) -> dict[str, Callable[[], Any]]:
    made = team(hive)
    return {
        "a guest's agent cancels the owner's task": lambda: hive.cancel(GUEST_PLANNER,
                                                                        made["owners"]),
        "the owner's agent cancels a guest's request": lambda: hive.cancel(CODER,
                                                                           made["routed"]),
        "a guest's agent withdraws with a reason too long": lambda: hive.cancel(
            GUEST_PLANNER, made["routed"], reason="x" * 501),
    }


def test_a_withdrawal_not_the_agent_s_reads_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, team_cases)
    assert {case: reason for case, (_, reason, _) in said.items()} == {
        "a guest's agent cancels the owner's task": "not_permitted",
        "the owner's agent cancels a guest's request": "not_permitted",
        "a guest's agent withdraws with a reason too long": "reason_too_long"}


def held_by_the_guest(hive: Hive) -> tuple[int, Any]:
    """A team store: a guest's request assigned to another agent of the guest's, claimed
    by it."""
    hive.set_policy(OWNER, "mode", "team")
    number = hive.handoff(GUEST, requester=GUEST.name, assignee=GUEST_PLANNER.name,
                          project="demo", packet=packet()).number
    if hive.get(number).task.state is State.waiting:  # (held for the owner)
        hive.approve(OWNER, number)
    return number, hive.claim(GUEST_PLANNER, number)


def test_a_guest_s_agent_withdraws_a_request_it_holds_as_a_statement(
        open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim ends with the move; under the enrolment the claim was taken under (or
    none), no rule of the store's needs the full run; under a later one the full run says
    ``optin_changed``, nothing written."""
    hive = open_hive()
    number, _ = held_by_the_guest(hive)
    runs = FullRuns(monkeypatch)
    assert hive.cancel(GUEST_PLANNER, number, reason="not needed").state is State.cancelled
    assert runs.verbs == [] and hive.get(number).claim is None
    hive.enrol(OWNER, GUEST_PLANNER.name)
    again, _ = held_by_the_guest(hive)
    hive.enrol(OWNER, GUEST_PLANNER.name, projects=["demo"])  # changed under the claim
    before = hive.last_seq()
    runs.verbs.clear()
    with pytest.raises(HiveliteError) as refused:
        hive.cancel(GUEST_PLANNER, again, reason="not needed")
    assert refused.value.reason == "optin_changed" and runs.verbs == ["cancel"]
    assert hive.last_seq() == before


def stopped_guest(hive: Hive) -> dict[str, Callable[[], Any]]:
    """A guest's agent the owner stopped (a store of its own: the control is live)."""
    made = team(hive)
    hive.stop(OWNER, agent=GUEST_PLANNER.name)
    return {"a stopped guest's agent withdraws": lambda: hive.cancel(GUEST_PLANNER,
                                                                     made["routed"])}


def test_a_stopped_guest_s_withdrawal_is_refused_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, stopped_guest)
    assert said["a stopped guest's agent withdraws"][1] == "vetoed"


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


def test_a_lease_run_out_is_swept_and_a_plugin_required_and_run_is_no_matter(
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
    assert runs.verbs == []  # (this process runs the plugin the store requires)


def test_the_owner_releases_a_claim_the_clock_ends_in_the_same_write_as_a_statement(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep ends the claim before the release reads the task: the answer is the task
    routed again, named by its expiry row (the sweep ends another claim after it), the
    sweep the only write, with statements and without."""
    def scenario(hive: Hive) -> Any:
        number, other = claimed(hive), claimed(hive)
        clock = hive.clock
        assert isinstance(clock, ManualClock)
        clock.advance(minutes=11)
        before = hive.last_seq()
        receipt = hive.release(OWNER, number, reason="mine")
        rows = [(e.number, e.from_state, e.to_state, e.reason)
                for n in (number, other) for e in hive.history(n) if e.seq > before]
        return (receipt.number == number, receipt.state,
                receipt.seq == hive.history(number)[-1].seq < hive.last_seq(),
                rows, hive.get(number).claim)

    answer, runs = written_both_ways(open_hive, tmp_path, scenario, monkeypatch, "release")
    assert answer == (True, State.routed, True,
                      [(1, State.accepted, State.routed, "expired"),
                       (2, State.accepted, State.routed, "expired")], None)
    assert runs == [0, 1]
