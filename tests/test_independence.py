"""Independence per store mode, merge thresholds per store / project / plugin, and agent
proposals (issue 16; DESIGN §6, §10; seed 004's "D1 per instance").

A confirmation counts only when the store's mode says so: ``personal`` (the default) counts
the owner's own agents, one per instance, never the claiming instance in any session or
spelling; ``team`` counts other owners than the worker's, one per owner. A verdict that does
not count is kept, with why, and moves nothing. The same rules hold in SQL: raw inserts that
break them are refused by the triggers. Every refused call leaves every row as it was.
"""

from __future__ import annotations

from typing import Any

import apsw
import pytest

import hivelite
from hivelite import (
    Caller,
    ClaimReceipt,
    ForbiddenRight,
    Hive,
    InvalidInput,
    InvalidState,
    Receipt,
    State,
    WaitingOn,
)
from hivelite.store import ConfirmationRow
from hivelite.verbs.authority import why_not_counted

from . import rawsql
from .conftest import (
    CODER,
    GUEST,
    OWNER,
    PLANNER,
    REVIEWER,
    OpenHive,
    Snap,
    own_task,
    refused,
)
from .test_results import Threshold

pytestmark = pytest.mark.contract

EVIDENCE: list[dict[str, Any]] = [{"kind": "test_output", "summary": "3 passed"}]
WORKER = CODER.name
"""Every result here is ana/coder's, claimed on the laptop (session s0)."""
ON_TABLET = Caller.agent("ana/second", "tablet")
"""One of the owner's agents on a third instance."""
ON_PHONE = Caller.agent("ana/third", "phone")
"""One of the owner's agents on a fourth instance."""
ALSO_DESKTOP = Caller.agent("ana/other", "Desktop.")
"""Another of the owner's agents, on the reviewer's instance (another spelling)."""
BOB = Caller.agent("bob/reviewer", "bobs-box")
"""A stranger: another owner's agent."""
BOB_TOO = Caller.agent("bob/second", "bobs-other-box")
"""Another agent of that same other owner."""
CAROL = Caller.agent("carol/reviewer", "carols-box")
"""A third owner's agent."""
ANA_IN_TEAM = Caller.agent("ana/reviewer", "desktop")
"""An agent of the worker's own owner (ana), on another instance."""


# -- fixtures and helpers ---------------------------------------------------------






def claimed(hive: Hive, **overrides: Any) -> tuple[int, ClaimReceipt]:
    n = own_task(hive, **overrides)
    return n, hive.claim(Caller.agent(WORKER, "laptop", "s0"), n)


def submit(hive: Hive, n: int, lease: ClaimReceipt) -> Receipt:
    return hive.submit(Caller.agent(WORKER, "laptop", "s0"), n, lease_id=lease.lease_id,
                       token=lease.fencing_token, summary="done", evidence=EVIDENCE)


def in_approval(hive: Hive, **overrides: Any) -> int:
    """A task of ana/coder's whose result awaits confirmations."""
    n, lease = claimed(hive, **overrides)
    assert submit(hive, n, lease).state is State.approval
    return n


def events(hive: Hive, n: int, reason: str) -> list[hivelite.JournalEntry]:
    """Journal rows of task ``n`` that moved nothing, with this reason."""
    return [j for j in hive.history(n)
            if j.move is None and j.from_state is not None and j.reason == reason]


def moves(hive: Hive, n: int) -> list[int]:
    return [j.move for j in hive.history(n) if j.move is not None]


def verdicts(hive: Hive, n: int) -> list[tuple[str, str, bool, str | None]]:
    """(reviewer, verdict, counted, why) of each confirmation on the current result, by
    reviewer (the view's order is not the order they came in)."""
    return sorted((c.reviewer, c.verdict, c.counted, c.why) for c in hive.get(n).confirmations)


def expected_why(hive: Hive, reviewer: Caller, n: int) -> str:
    """What the pure rule says about ``reviewer`` given the verdicts already on task ``n``
    (the library must say exactly that)."""
    given = [ConfirmationRow(reviewer=c.reviewer, instance=c.instance, session=c.session,
                             verdict=c.verdict, reason=c.reason, at=c.at, counted=c.counted,
                             why=c.why) for c in hive.get(n).confirmations]
    why = why_not_counted(hive.policy().mode, hive.owner, WORKER, reviewer.name,
                          str(reviewer.instance), given)
    assert why is not None
    return why


# -- who may verify at all --------------------------------------------------------


@pytest.mark.parametrize("instance", ["laptop", "desktop"])
def test_the_worker_never_verifies_its_own_result(hive: Hive, snap: Snap,
                                                  instance: str) -> None:
    """The worker is refused on whatever instance it calls from: 403 self_verify."""
    n = in_approval(hive)
    refused(snap, ForbiddenRight, "self_verify",
            lambda: hive.verify(Caller.agent(WORKER, instance), n))
    assert hive.get(n).task.state is State.approval


@pytest.mark.parametrize("spelling", ["laptop", "Laptop.", "LAPTOP", " laptop ", "laptop.."])
@pytest.mark.parametrize("session", [None, "s0", "another-session"])
@pytest.mark.parametrize("verdict", ["accept", "reject"])
def test_the_claiming_instance_never_verifies_in_any_session_or_spelling(
        hive: Hive, snap: Snap, spelling: str, session: str | None, verdict: str) -> None:
    """Another agent on the machine the result came from is not independent (409), in any
    session and however the instance is spelt; nothing is written."""
    n = in_approval(hive)
    err = refused(snap, InvalidState, "reviewer_not_independent",
                  lambda: hive.verify(Caller.agent("ana/reviewer", spelling, session), n,
                                      verdict=verdict, reason="looks wrong"))  # type: ignore[arg-type]
    assert "laptop" in err.message
    assert hive.get(n).confirmations == []


def test_a_claim_made_from_a_spelling_binds_the_normalised_instance(hive: Hive,
                                                                    snap: Snap) -> None:
    """The worker claimed as "LapTop." : a reviewer on "laptop" is still that machine."""
    n = own_task(hive)
    lease = hive.claim(Caller.agent(WORKER, "LapTop."), n)
    assert lease.instance == "laptop"
    hive.submit(Caller.agent(WORKER, "laptop"), n, lease_id=lease.lease_id,
                token=lease.fencing_token, summary="done", evidence=EVIDENCE)
    refused(snap, InvalidState, "reviewer_not_independent",
            lambda: hive.verify(Caller.agent("ana/reviewer", "laptop"), n))


# -- personal mode (the default) --------------------------------------------------


def test_personal_a_strangers_verdict_is_kept_uncounted_with_why(hive: Hive) -> None:
    """bob/reviewer is not one of ana's agents: recorded with counted=False and why; the
    task stays in approval; the journal's not_counted event carries the why."""
    n = in_approval(hive)
    why = expected_why(hive, BOB, n)
    receipt = hive.verify(BOB, n)
    assert receipt.state is State.approval
    assert verdicts(hive, n) == [("bob/reviewer", "accept", False, why)]
    assert "bob/reviewer" in why and "ana" in why
    [event] = events(hive, n, "not_counted")
    assert event.actor == "bob/reviewer"
    assert event.detail == {"confirmations": 0, "threshold": 1, "why": why}
    assert moves(hive, n)[-1] == 14  # nothing moved after verifying -> approval
    # ... and the owner's own agent still completes it on its own
    assert hive.verify(REVIEWER, n).state is State.completed


def test_personal_one_confirmation_per_instance(hive: Hive) -> None:
    """A second agent from an instance that already counted is kept uncounted (why); two
    agents on two other instances count twice and meet a threshold of 2."""
    hive.set_policy(OWNER, "threshold", 2)
    n = in_approval(hive)
    assert hive.verify(REVIEWER, n).state is State.approval
    why = expected_why(hive, ALSO_DESKTOP, n)
    assert "desktop" in why
    assert hive.verify(ALSO_DESKTOP, n).state is State.approval
    assert verdicts(hive, n) == [("ana/other", "accept", False, why),
                                 ("ana/reviewer", "accept", True, None)]
    confirmed = events(hive, n, "confirmed")
    assert [e.detail for e in confirmed] == [{"confirmations": 1, "threshold": 2}]
    [uncounted] = events(hive, n, "not_counted")
    assert uncounted.detail == {"confirmations": 1, "threshold": 2, "why": why}
    receipt = hive.verify(ON_TABLET, n)
    assert receipt.state is State.completed
    done = [j for j in hive.history(n) if j.move == 16][-1]
    assert done.actor == "ana/second"
    assert done.detail == {"decided_by": "threshold", "confirmations": 2}


def test_personal_two_strangers_never_make_up_a_threshold(hive: Hive) -> None:
    """Strangers on distinct instances still count nothing, however many of them."""
    n = in_approval(hive)
    for stranger in (BOB, BOB_TOO, CAROL):
        assert hive.verify(stranger, n).state is State.approval
    assert [c.counted for c in hive.get(n).confirmations] == [False, False, False]
    assert len(events(hive, n, "not_counted")) == 3


def test_a_counted_reject_sends_the_task_back(hive: Hive) -> None:
    """A counted reject is move 17 (approval -> routed), made by the reviewer, with its
    reason."""
    n = in_approval(hive)
    receipt = hive.verify(REVIEWER, n, verdict="reject", reason="the tests do not run")
    assert receipt.state is State.routed
    back = [j for j in hive.history(n) if j.move == 17][-1]
    assert (back.actor, back.reason, back.detail) == (
        "ana/reviewer", "the tests do not run", {"verdict": "reject"})


def test_an_uncounted_reject_is_recorded_and_changes_nothing(hive: Hive) -> None:
    """A stranger's reject is kept with why, but the task stays in approval with its
    result; the owner's agent can still complete it."""
    n = in_approval(hive)
    before = hive.get(n)
    why = expected_why(hive, BOB, n)
    receipt = hive.verify(BOB, n, verdict="reject", reason="I do not like it")
    assert receipt.state is State.approval
    after = hive.get(n)
    assert after.task.result == before.task.result
    assert after.task.state is State.approval
    assert verdicts(hive, n) == [("bob/reviewer", "reject", False, why)]
    assert after.confirmations[0].reason == "I do not like it"
    assert events(hive, n, "not_counted")[-1].detail == {
        "confirmations": 0, "threshold": 1, "why": why}
    assert 17 not in moves(hive, n)
    assert hive.verify(REVIEWER, n).state is State.completed


def test_a_second_verdict_from_one_reviewer_is_refused(hive: Hive, snap: Snap) -> None:
    """An uncounted verdict is still a verdict: the same reviewer does not get another."""
    n = in_approval(hive)
    hive.verify(BOB, n)
    refused(snap, InvalidState, "already_verified", lambda: hive.verify(BOB, n))


# -- team mode --------------------------------------------------------------------


def test_team_mode_counts_one_confirmation_per_other_owner(hive: Hive) -> None:
    """Team: the worker's owner's agents do not count; another owner's first agent does,
    its second does not; a third owner's agent does (threshold 2 completes)."""
    hive.set_policy(OWNER, "mode", "team")
    hive.set_policy(OWNER, "threshold", 2)
    assert hive.policy().mode == "team"
    n = in_approval(hive)
    why_own = expected_why(hive, ANA_IN_TEAM, n)
    assert hive.verify(ANA_IN_TEAM, n).state is State.approval
    assert hive.verify(BOB, n).state is State.approval
    why_bob = expected_why(hive, BOB_TOO, n)
    assert hive.verify(BOB_TOO, n).state is State.approval
    assert verdicts(hive, n) == [("ana/reviewer", "accept", False, why_own),
                                 ("bob/reviewer", "accept", True, None),
                                 ("bob/second", "accept", False, why_bob)]
    assert "ana" in why_own and "bob" in why_bob
    assert [e.detail for e in events(hive, n, "not_counted")] == [
        {"confirmations": 0, "threshold": 2, "why": why_own},
        {"confirmations": 1, "threshold": 2, "why": why_bob}]
    assert hive.verify(CAROL, n).state is State.completed
    done = [j for j in hive.history(n) if j.move == 16][-1]
    assert done.detail == {"decided_by": "threshold", "confirmations": 2}


def test_team_mode_still_refuses_the_claiming_instance(hive: Hive, snap: Snap) -> None:
    """Another owner's agent on the claiming machine is still not independent."""
    hive.set_policy(OWNER, "mode", "team")
    n = in_approval(hive)
    refused(snap, InvalidState, "reviewer_not_independent",
            lambda: hive.verify(Caller.agent("bob/reviewer", "Laptop."), n))


def test_team_mode_an_uncounted_reject_changes_nothing(hive: Hive) -> None:
    """In a team store the worker's owner's own agent rejecting is kept, not obeyed."""
    hive.set_policy(OWNER, "mode", "team")
    n = in_approval(hive)
    assert hive.verify(ANA_IN_TEAM, n, verdict="reject",
                       reason="not good").state is State.approval
    assert [c.counted for c in hive.get(n).confirmations] == [False]
    assert hive.verify(BOB, n, verdict="reject", reason="not good").state is State.routed


# -- thresholds -------------------------------------------------------------------




def awaiting(hive: Hive, n: int) -> dict[str, Any] | None:
    """The detail of move 14 (verifying -> approval) or 13 (-> completed) of task ``n``."""
    return [j for j in hive.history(n) if j.move in (13, 14)][-1].detail


def test_the_store_threshold_applies_to_every_project(hive: Hive) -> None:
    """``threshold 2`` store-wide: a result awaits two confirmations, decided by the
    store policy; the view carries the threshold."""
    hive.set_policy(OWNER, "threshold", 2)
    n = in_approval(hive, project="other")
    assert awaiting(hive, n) == {"threshold": 2, "decided_by": "store policy"}
    assert hive.get(n).threshold == 2
    assert hive.verify(REVIEWER, n).state is State.approval
    assert hive.verify(ON_TABLET, n).state is State.completed


def test_a_project_threshold_wins_for_that_project_and_can_be_unset(hive: Hive) -> None:
    """Per project 3 beats the store's 2 for ``demo`` only; unsetting it (None) gives the
    store's back."""
    hive.set_policy(OWNER, "threshold", 2)
    policy = hive.set_policy(OWNER, "threshold", 3, project="demo")
    assert (policy.threshold, policy.project_thresholds) == (2, {"demo": 3})
    demo = in_approval(hive, project="demo")
    other = in_approval(hive, project="other")
    assert awaiting(hive, demo) == {"threshold": 3,
                                    "decided_by": "store policy (project demo)"}
    assert awaiting(hive, other) == {"threshold": 2, "decided_by": "store policy"}
    for reviewer in (REVIEWER, ON_TABLET):
        assert hive.verify(reviewer, demo).state is State.approval
    assert hive.verify(ON_PHONE, demo).state is State.completed
    policy = hive.set_policy(OWNER, "threshold", None, project="demo")
    assert policy.project_thresholds == {}
    again = in_approval(hive, project="demo")
    assert awaiting(hive, again) == {"threshold": 2, "decided_by": "store policy"}


def test_the_threshold_is_fixed_when_the_result_is_submitted(hive: Hive) -> None:
    """A result keeps the threshold it was submitted under: raising the policy later
    does not hold back a result that already awaits one confirmation."""
    n = in_approval(hive)
    hive.set_policy(OWNER, "threshold", 5)
    assert hive.get(n).threshold == 1
    assert hive.verify(REVIEWER, n).state is State.completed


def test_a_threshold_plugin_wins_over_the_store_policy(open_hive: OpenHive) -> None:
    """A plugin answering ``hivelite_merge_threshold`` decides, and is named."""
    hive = open_hive(plugins=[Threshold(2)])
    hive.set_policy(OWNER, "threshold", 3, project="demo")
    n = in_approval(hive)
    assert awaiting(hive, n) == {"threshold": 2, "decided_by": "Threshold"}
    assert hive.verify(REVIEWER, n).state is State.approval
    assert hive.verify(ON_TABLET, n).state is State.completed


def test_threshold_zero_completes_at_submit(hive: Hive) -> None:
    """``threshold 0``: the result passes straight through (move 13), no one confirms."""
    hive.set_policy(OWNER, "threshold", 0)
    n, lease = claimed(hive)
    assert submit(hive, n, lease).state is State.completed
    assert moves(hive, n)[-2:] == [12, 13]
    assert awaiting(hive, n) == {"threshold": 0, "decided_by": "store policy"}


# -- caller instance names --------------------------------------------------------


@pytest.mark.parametrize("spelling", [" Laptop. ", "LAPTOP", "laptop.", "laptop...",
                                      "  laptop"])
def test_caller_instances_are_normalised(spelling: str) -> None:
    """Case, surrounding space and trailing dots are dropped before any comparison."""
    assert Caller.agent("ana/x", spelling).instance == "laptop"


@pytest.mark.parametrize("bad", ["lap top", "laptop\n", "läptop", "lap/top", "", " ", "...",
                                 "laptop\t", "x" * 65])
def test_caller_instances_outside_the_alphabet_are_refused(bad: str) -> None:
    """Anything but ``[a-z0-9._-]`` after normalising is 422 invalid_instance."""
    with pytest.raises(InvalidInput) as err:
        Caller.agent("ana/x", bad)
    assert err.value.reason == "invalid_instance"
    assert err.value.status == 422


# -- the triggers hold without the library ----------------------------------------


def raw_confirm(hive_raw: apsw.Connection, n: int, reviewer: str, instance: str, *,
                counted: int = 1, why: str | None = None, verdict: str = "accept") -> None:
    hive_raw.execute(
        "INSERT INTO confirmations(task, version, reviewer, instance, session, verdict,"
        " reason, at, counted, why) VALUES (?, 1, ?, ?, NULL, ?, NULL,"
        " '2026-12-02T09:00:00.000Z', ?, ?)", (n, reviewer, instance, verdict, counted, why))


CONFIRM = ("INSERT INTO confirmations(task, version, reviewer, instance, session, verdict,"
           " reason, at, counted, why) VALUES (?, 1, ?, ?, NULL, 'accept', NULL,"
           " '2026-12-02T09:00:00.000Z', ?, ?)")
NOT_INDEPENDENT = "invalid_state:reviewer_not_independent"


def test_raw_sql_cannot_count_a_stranger_in_a_personal_store(hive: Hive,
                                                             hive_raw: apsw.Connection) -> None:
    """The trigger refuses a counted row from another owner; uncounted with why is fine."""
    n = in_approval(hive)
    rawsql.refused(hive_raw, NOT_INDEPENDENT, CONFIRM, (n, "bob/reviewer", "bobs-box", 1, None))
    raw_confirm(hive_raw, n, "bob/reviewer", "bobs-box", counted=0, why="a stranger")
    assert verdicts(hive, n) == [("bob/reviewer", "accept", False, "a stranger")]


def test_raw_sql_team_mode_counts_one_per_other_owner(hive: Hive,
                                                      hive_raw: apsw.Connection) -> None:
    """Team: the worker's owner never counts; another owner counts once."""
    hive.set_policy(OWNER, "mode", "team")
    hive.set_policy(OWNER, "threshold", 3)
    n = in_approval(hive)
    rawsql.refused(hive_raw, NOT_INDEPENDENT, CONFIRM, (n, "ana/reviewer", "desktop", 1, None))
    raw_confirm(hive_raw, n, "bob/reviewer", "bobs-box")
    rawsql.refused(hive_raw, NOT_INDEPENDENT, CONFIRM, (n, "bob/second", "bobs-other-box", 1, None))
    raw_confirm(hive_raw, n, "carol/reviewer", "carols-box")
    assert [c.counted for c in hive.get(n).confirmations] == [True, True]


POLICY = "INSERT INTO policy(key, value, at, by) VALUES (?, ?, '2026-12-02T09:00:00.000Z', 'ana')"


@pytest.mark.parametrize(("key", "value"), [
    ("mode", "team"), ("proposals", "owner"), ("threshold", "0"), ("threshold", "1000"),
    ("threshold:demo", "3"), ("timezone", "Europe/Berlin")])
def test_raw_sql_valid_policy_rows_are_taken(hive: Hive, hive_raw: apsw.Connection, key: str,
                                             value: str) -> None:
    """The same table takes every valid value (so the refusals above are about values)."""
    hive_raw.execute(POLICY, (key, value))
    policy = hive.policy()
    if key == "threshold:demo":
        assert policy.project_thresholds == {"demo": int(value)}
    else:
        got = getattr(policy, key)
        assert str(got) == value


# -- setting the policy through the API -------------------------------------------


@pytest.mark.parametrize(("name", "value", "project"), [
    ("mode", "solo", None), ("mode", "TEAM", None), ("proposals", "maybe", None),
    ("timezone", "Mars/Olympus", None), ("timezone", "", None), ("timezone", "../etc", None),
    ("threshold", -1, None), ("threshold", 1001, None), ("threshold", "x", None),
    ("threshold", True, None), ("threshold", 2.5, None), ("threshold", -1, "demo"),
    ("mode", "team", "demo"), ("colour", "blue", None)])
def test_a_bad_policy_value_is_refused_and_nothing_written(
        hive: Hive, snap: Snap, name: str, value: Any, project: str | None) -> None:
    """422 invalid_policy names what is allowed; the store is unchanged."""
    before = hive.policy()
    refused(snap, InvalidInput, "invalid_policy",
            lambda: hive.set_policy(OWNER, name, value, project=project))
    assert hive.policy() == before


def test_a_threshold_given_as_text_is_a_number(hive: Hive) -> None:
    """The CLI passes text: "2" is the threshold 2, stored and applied as a number."""
    assert hive.set_policy(OWNER, "threshold", "2").threshold == 2
    assert hive.set_policy(OWNER, "threshold", "0", project="demo").project_thresholds == {
        "demo": 0}


@pytest.mark.parametrize("project", ["Demo", "has space", "demo\n"])
def test_a_project_threshold_names_a_possible_project(hive: Hive, snap: Snap,
                                                      project: str) -> None:
    """Projects are slugs (lowercase letters, digits, dashes): a threshold for anything
    else is a typo that would leave the real project on the store's threshold, so it is
    refused like the empty name already is (422 invalid_policy)."""
    refused(snap, InvalidInput, "invalid_policy",
            lambda: hive.set_policy(OWNER, "threshold", 3, project=project))


def test_an_empty_project_name_is_refused(hive: Hive, snap: Snap) -> None:
    """The store refuses a threshold key with no project (422 invalid_policy)."""
    refused(snap, InvalidInput, "invalid_policy",
            lambda: hive.set_policy(OWNER, "threshold", 3, project=""))


@pytest.mark.parametrize("who", [PLANNER, GUEST, Caller.agent("ana/coder", "laptop")])
def test_only_the_owner_sets_the_policy(hive: Hive, snap: Snap, who: Caller) -> None:
    """An agent, even one of the owner's, is refused: 403 not_permitted."""
    refused(snap, ForbiddenRight, "not_permitted",
            lambda: hive.set_policy(who, "threshold", 0))


def test_another_person_is_not_the_owner(hive: Hive, snap: Snap) -> None:
    """A person who does not own the store cannot set its policy."""
    refused(snap, ForbiddenRight, "not_owner",
            lambda: hive.set_policy(Caller.owner("bob"), "mode", "team"))


def test_every_policy_change_is_journaled(hive: Hive) -> None:
    """Each change is a journal row with no task: reason policy, detail key/value/was."""
    hive.set_policy(OWNER, "threshold", 2)
    hive.set_policy(OWNER, "threshold", 3)
    hive.set_policy(OWNER, "threshold", 4, project="demo")
    hive.set_policy(OWNER, "timezone", "Europe/Berlin")
    hive.set_policy(OWNER, "threshold", None)
    rows = [j for j in hive.journal() if j.reason == "policy"]
    assert all(j.task is None and j.number is None and j.actor == "ana" for j in rows)
    assert [j.detail for j in rows] == [
        {"key": "threshold", "value": "2", "was": None},
        {"key": "threshold", "value": "3", "was": "2"},
        {"key": "threshold:demo", "value": "4", "was": None},
        {"key": "timezone", "value": "Europe/Berlin", "was": None},
        {"key": "threshold", "value": None, "was": "3"}]
    policy = hive.policy()
    assert (policy.threshold, policy.project_thresholds, policy.timezone) == (
        1, {"demo": 4}, "Europe/Berlin")


def test_the_policy_is_the_stores_not_the_processes(hive: Hive, open_hive: OpenHive) -> None:
    """A second process on the same file obeys what the first set."""
    hive.set_policy(OWNER, "mode", "team")
    hive.set_policy(OWNER, "threshold", 2)
    other = open_hive()
    assert (other.policy().mode, other.policy().threshold) == ("team", 2)
    n = in_approval(other)
    assert other.get(n).threshold == 2


# -- agent proposals --------------------------------------------------------------


def test_by_default_the_gate_routes_an_agents_handoff_between_the_owners_agents(
        hive: Hive) -> None:
    """proposals=gate (seed 000): the owner's agents hand off to each other freely."""
    assert hive.policy().proposals == "gate"
    receipt = hive.handoff(PLANNER, requester=PLANNER.name, assignee="ana/coder",
                           project="demo", packet=proposal())
    assert receipt.state is State.routed
    assert hive.get(receipt.number).origin == "agent"


def proposal() -> dict[str, Any]:
    return {"task": "Write the parser", "deliverable_type": "code",
            "acceptance_criteria": ["tests pass"]}


def test_proposals_owner_holds_every_agent_handoff_for_the_owner(hive: Hive) -> None:
    """proposals=owner: an agent's task waits for the owner (decided by the store policy);
    the owner's own handoff still routes; the owner approves the proposal."""
    hive.set_policy(OWNER, "proposals", "owner")
    proposed = hive.handoff(PLANNER, requester=PLANNER.name, assignee="ana/coder",
                            project="demo", packet=proposal())
    assert (proposed.state, proposed.waiting_on) == (State.waiting, WaitingOn.owner_approval)
    gate = [j for j in hive.history(proposed.number) if j.move == 2][-1]
    assert gate.detail is not None and gate.detail["decided_by"] == "store policy"
    assert gate.actor == "gate"
    own = own_task(hive)
    assert hive.get(own).task.state is State.routed
    assert (hive.get(proposed.number).origin, hive.get(own).origin) == ("agent", "person")
    assert hive.approve(OWNER, proposed.number).state is State.routed
    assert hive.get(proposed.number).origin == "agent"


def test_proposals_owner_leaves_a_gate_hold_a_hold(hive: Hive) -> None:
    """A stranger's handoff was held by the gate already; it waits either way."""
    hive.set_policy(OWNER, "proposals", "owner")
    receipt = hive.handoff(GUEST, requester=GUEST.name, assignee="ana/coder",
                           project="demo", packet=proposal())
    assert (receipt.state, receipt.waiting_on) == (State.waiting, WaitingOn.owner_approval)
    assert hive.get(receipt.number).origin == "agent"


def test_proposals_back_to_gate_routes_again(hive: Hive) -> None:
    """Putting proposals back to its default (None) lets the gate decide again."""
    hive.set_policy(OWNER, "proposals", "owner")
    hive.set_policy(OWNER, "proposals", None)
    assert hive.policy().proposals == "gate"
    receipt = hive.handoff(PLANNER, requester=PLANNER.name, assignee="ana/coder",
                           project="demo", packet=proposal())
    assert receipt.state is State.routed
