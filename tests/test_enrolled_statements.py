"""An enrolled agent's verbs as their statements (issue 47, item 1), on both engines: a
claim names the enrolment it is taken under (``next`` picks within its projects and roles),
and the store's rules hold the lease and the holder's moves to it; every other journal row
of an enrolled agent's is held to its enrolment by the store (migration 21). A write
outside it takes the full run, which refuses in its own words.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hivelite import Hive

from .both_ways import in_approval, refusals_both_ways, written_both_ways
from .conftest import CODER, OWNER, PLANNER, REVIEWER, OpenHive, own_task, packet
from .test_owner_statements import GUEST_PLANNER, team
from .test_statements import EVIDENCE, FullRuns

pytestmark = pytest.mark.contract


def scenario(hive: Hive) -> Any:
    """An agent enrolled in one project and one role: ``next`` passes over a task outside
    them, takes one with its role; it works and submits under the claim."""
    hive.enrol(OWNER, CODER.name, projects=["demo"], roles=["reviewer"])
    elsewhere = own_task(hive, project="other", priority="high")
    role = own_task(hive, role="reviewer")
    lease = hive.claim_next(CODER)
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    hive.checkpoint(CODER, lease.number, progress="half", **fence)
    hive.update(CODER, lease.number, summary="nearly", **fence)
    hive.submit(CODER, lease.number, summary="done", evidence=EVIDENCE, **fence)
    return (lease.number == role, hive.get(elsewhere).task.state,
            [(e.seq, e.number, e.from_state, e.to_state, e.actor, e.reason)
             for e in hive.journal()])


@pytest.mark.parametrize("verb", ["next", "checkpoint", "update", "submit"])
def test_an_enrolled_agent_s_cycle_takes_no_full_run(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        verb: str) -> None:
    written, ran = written_both_ways(open_hive, tmp_path, scenario, monkeypatch, verb)
    assert ran == [0, 1]
    took_the_role_s, elsewhere, _ = written
    assert took_the_role_s and elsewhere.value == "routed"


def outside(hive: Hive) -> dict[str, Callable[[], Any]]:
    """Claims and writes outside an agent's enrolment, each in a store of its own case."""
    hive.enrol(OWNER, CODER.name, projects=["demo"])
    elsewhere = own_task(hive, project="other")
    role = own_task(hive, role="reviewer")
    held = own_task(hive)
    lease = hive.claim(CODER, held)
    hive.enrol(OWNER, CODER.name, projects=["demo", "more"])  # changed under the claim
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    return {
        "a claim outside its projects": lambda: hive.claim(CODER, elsewhere),
        "a claim of a role it lacks": lambda: hive.claim(CODER, role),
        "a checkpoint under a changed enrolment": lambda: hive.checkpoint(
            CODER, held, progress="x", **fence),
        "a renewal under a changed enrolment": lambda: hive.renew(CODER, held, **fence),
    }


def test_every_refusal_reads_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, outside)
    assert {case: reason for case, (_, reason, _) in said.items()} == {
        "a claim outside its projects": "optin_scope",
        "a claim of a role it lacks": "not_permitted",
        "a checkpoint under a changed enrolment": "optin_changed",
        "a renewal under a changed enrolment": "optin_changed"}


def ended(hive: Hive) -> dict[str, Callable[[], Any]]:
    hive.enrol(OWNER, CODER.name)
    routed = own_task(hive)
    hive.end_enrolment(OWNER, CODER.name)
    return {"a claim after its enrolment ended": lambda: hive.claim(CODER, routed),
            "next after its enrolment ended": lambda: hive.claim_next(CODER)}


def test_an_ended_enrolment_is_refused_the_same_with_statements_and_without(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, ended)
    assert {reason for _, reason, _ in said.values()} == {"optin_inactive"}


def test_a_claim_is_given_back_under_a_changed_enrolment(
        open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim is always given back, its statement too (no rule refuses it)."""
    hive = open_hive()
    hive.enrol(OWNER, CODER.name)
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.end_enrolment(OWNER, CODER.name)
    runs = FullRuns(monkeypatch)
    receipt = hive.release(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token)
    assert receipt.state.value == "routed" and runs.verbs == []


def others(hive: Hive) -> Any:
    """Enrolled agents' other verbs, each within its enrolment: a handoff, a change of its
    fields, an amended result and its verdict, an answer to a question."""
    for agent in (CODER, PLANNER, REVIEWER):
        hive.enrol(OWNER, agent.name, projects=["demo"])
    made = hive.handoff(PLANNER, requester=PLANNER.name, assignee=CODER.name,
                        project="demo", packet=packet())
    hive.set_fields(PLANNER, made.number, base_version=1, priority="high")
    number = in_approval(hive)
    hive.amend(CODER, number, summary="done, and better")
    hive.verify(REVIEWER, number, verdict="accept")
    paused = own_task(hive)
    lease = hive.claim(CODER, paused)
    hive.pause(CODER, paused, lease_id=lease.lease_id, token=lease.fencing_token,
               on="agent", reason="which parser?")
    hive.answer(PLANNER, paused, text="the small one")
    return [(e.seq, e.number, e.from_state, e.to_state, e.actor, e.reason)
            for e in hive.journal()]


@pytest.mark.parametrize("verb", ["handoff", "fields", "amend", "verify", "answer"])
def test_an_enrolled_agent_s_other_verbs_take_no_full_run(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        verb: str) -> None:
    _, ran = written_both_ways(open_hive, tmp_path, others, monkeypatch, verb)
    assert ran[0] == 0 and ran[1] > 0


def beyond(hive: Hive) -> dict[str, Callable[[], Any]]:
    """Enrolled agents' other verbs outside their enrolments, each refused."""
    hive.enrol(OWNER, PLANNER.name, projects=["demo"], rights=["tasks.propose"])
    hive.enrol(OWNER, REVIEWER.name, projects=["shop"])
    number = in_approval(hive)
    paused, held = own_task(hive), own_task(hive)
    lease = hive.claim(CODER, paused)
    hive.pause(CODER, paused, lease_id=lease.lease_id, token=lease.fencing_token,
               on="agent", reason="which parser?")
    hive.enrol(OWNER, CODER.name, rights=["tasks.propose", "tasks.work"])
    hive.claim(CODER, held)
    hive.enrol(OWNER, CODER.name, rights=["tasks.propose"])  # changed under the claim
    return {
        "a handoff outside its projects": lambda: hive.handoff(
            PLANNER, requester=PLANNER.name, assignee=CODER.name, project="shop",
            packet=packet()),
        "an answer without tasks.work": lambda: hive.answer(PLANNER, paused, text="x"),
        "a verdict outside its projects": lambda: hive.verify(REVIEWER, number),
        "an amendment without tasks.work": lambda: hive.amend(CODER, number, summary="y"),
        "a change of fields by its holder under a changed enrolment": lambda: (
            hive.set_fields(CODER, held, base_version=1, priority="low")),
    }


def test_other_verbs_beyond_an_enrolment_are_refused_the_same_both_ways(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, beyond)
    assert {case: reason for case, (_, reason, _) in said.items()} == {
        "a handoff outside its projects": "optin_scope",
        "an answer without tasks.work": "optin_scope",
        "a verdict outside its projects": "optin_scope",
        "an amendment without tasks.work": "optin_scope",
        "a change of fields by its holder under a changed enrolment": "optin_changed"}


def ended_others(hive: Hive) -> dict[str, Callable[[], Any]]:
    hive.enrol(OWNER, REVIEWER.name)
    hive.enrol(OWNER, PLANNER.name)
    number = in_approval(hive)
    hive.end_enrolment(OWNER, REVIEWER.name)
    hive.end_enrolment(OWNER, PLANNER.name)
    return {"a verdict after its enrolment ended": lambda: hive.verify(REVIEWER, number),
            "a handoff after its enrolment ended": lambda: hive.handoff(
                PLANNER, requester=PLANNER.name, assignee=CODER.name, project="demo",
                packet=packet()),
            "a watch after its enrolment ended": lambda: hive.watch(
                REVIEWER, "await", number=number)}


def test_other_verbs_after_an_enrolment_ended_are_refused_the_same_both_ways(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, ended_others)
    assert {reason for _, reason, _ in said.values()} == {"optin_inactive"}


def without_proposing(hive: Hive) -> dict[str, Callable[[], Any]]:
    """Agents enrolled with ``tasks.work`` alone, in a team store: a handoff and a guest's
    withdrawal of its owner's request need ``tasks.propose``."""
    made = team(hive)
    hive.enrol(OWNER, PLANNER.name, rights=["tasks.work"])
    hive.enrol(OWNER, GUEST_PLANNER.name, rights=["tasks.work"])
    return {"a handoff without tasks.propose": lambda: hive.handoff(
                PLANNER, requester=PLANNER.name, assignee=CODER.name, project="demo",
                packet=packet()),
            "a withdrawal without tasks.propose": lambda: hive.cancel(
                GUEST_PLANNER, made["routed"], reason="not needed")}


def test_a_handoff_and_a_withdrawal_need_tasks_propose_both_ways(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, without_proposing)
    assert {case: reason for case, (_, reason, _) in said.items()} == {
        "a handoff without tasks.propose": "optin_scope",
        "a withdrawal without tasks.propose": "optin_scope"}


def test_a_watch_and_its_settling_take_no_full_run(
        open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    """A watch journals no row: it is its statement, an enrolled agent's too (whose ended
    enrolment the statement itself refuses: above)."""
    hive = open_hive()
    hive.enrol(OWNER, REVIEWER.name)
    number = in_approval(hive)
    runs = FullRuns(monkeypatch)
    made = hive.watch(REVIEWER, "await", number=number)
    settled = hive.settle_watch(REVIEWER, made.id, answer='{"state":"approval"}')
    assert (settled.id, settled.answer) == (made.id, '{"state":"approval"}')
    assert runs.verbs == []
