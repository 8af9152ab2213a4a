"""An enrolled agent's claims and its writes under them as their statements (issue 47,
item 1), on both engines: a claim names the enrolment it is taken under (``next`` picks
within its projects and roles), and the store's rules hold the lease and the holder's
moves to it; a claim or a write outside it takes the full run, which refuses in its own
words. (An enrolled agent's other verbs keep the full run.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hivelite import Hive

from .both_ways import refusals_both_ways, written_both_ways
from .conftest import CODER, OWNER, OpenHive, own_task
from .test_statements import EVIDENCE

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


def test_a_claim_is_given_back_under_a_changed_enrolment(open_hive: OpenHive) -> None:
    hive = open_hive()
    hive.enrol(OWNER, CODER.name)
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.end_enrolment(OWNER, CODER.name)
    receipt = hive.release(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token)
    assert receipt.state.value == "routed"
