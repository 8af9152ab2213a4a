"""Who may work where (issue 31, parts 1, 2 and 6): a task's role, each agent's enrolment
(seed 004's opt-in, section 4) and a guest's own request withdrawn in team mode.

Every refusal names its reason, leaves every row as it was (``refused``), and is made
twice: by the Python guard (these tests) and by the store's triggers (raw SQL, in
``tests/attacks.py``). Run on both engines.
"""

from __future__ import annotations

from typing import Any

import pytest

from hivelite import Caller, ForbiddenRight, Hive, InvalidInput, InvalidState, NotFound

from .conftest import CODER, GUEST, OWNER, PLANNER, REVIEWER, Snap, own_task, packet, refused

pytestmark = pytest.mark.contract

SECOND = Caller.agent("ana/second", "laptop")
EVIDENCE: list[dict[str, Any]] = [{"kind": "test_output", "summary": "3 passed"}]


def routed(hive: Hive, **overrides: Any) -> int:
    return own_task(hive, **overrides)


# -- roles ---------------------------------------------------------------------------------


def test_a_task_keeps_the_role_it_was_handed_off_with(hive: Hive) -> None:
    number = routed(hive, role="reviewer")
    assert hive.get(number).role == "reviewer"
    assert hive.get(routed(hive)).role is None


@pytest.mark.parametrize("role", ["Reviewer", "1st", "-x", "a" * 65, "re viewer", ""])
def test_a_role_is_seed_004s_slug(hive: Hive, snap: Snap, role: str) -> None:
    error = refused(snap, InvalidInput, "invalid_handoff", lambda: routed(hive, role=role))
    assert "role" in error.message


def test_a_task_with_a_role_is_claimed_only_by_an_agent_enrolled_in_it(
        hive: Hive, snap: Snap) -> None:
    number = routed(hive, role="reviewer")
    error = refused(snap, ForbiddenRight, "not_permitted", lambda: hive.claim(CODER, number))
    assert "needs the role reviewer" in error.message and "has no role" in error.message
    hive.enrol(OWNER, CODER.name, roles=["writer"])
    error = refused(snap, ForbiddenRight, "not_permitted", lambda: hive.claim(CODER, number))
    assert "is enrolled in writer" in error.message
    hive.enrol(OWNER, CODER.name, roles=["reviewer", "writer"])
    lease = hive.claim(CODER, number)
    assert hive.get(number).claim is not None and lease.number == number


def test_next_passes_over_a_task_whose_role_the_agent_lacks(hive: Hive) -> None:
    needs = routed(hive, role="reviewer")
    plain = routed(hive)
    assert hive.claim_next(CODER).number == plain
    with pytest.raises(NotFound):
        hive.claim_next(CODER)
    hive.enrol(OWNER, CODER.name, roles=["reviewer"])
    assert hive.claim_next(CODER).number == needs


# -- enrolments ----------------------------------------------------------------------------


def test_an_enrolment_is_shown_with_its_budget(hive: Hive) -> None:
    made = hive.enrol(OWNER, CODER.name, projects=["shop", "demo"], roles=["writer"],
                      rights=["tasks.work"], tasks=5)
    assert (made.projects, made.roles, made.rights, made.active) == (
        ["demo", "shop"], ["writer"], ["tasks.work"], True)
    assert made.budget is not None and made.budget.tasks == 5
    (listed,) = hive.enrolments(CODER.name)
    assert listed == made
    entry = next(e for e in hive.journal() if e.seq == made.seq)
    assert (entry.reason, entry.actor, entry.number) == ("enrolment", "ana", None)


def test_only_the_owner_enrols(hive: Hive, snap: Snap) -> None:
    refused(snap, ForbiddenRight, "not_permitted", lambda: hive.enrol(CODER, CODER.name))


@pytest.mark.parametrize(("given", "field"), [
    ({"projects": ["Shop"]}, "projects"), ({"roles": ["9x"]}, "roles"),
    ({"rights": ["tasks.read"]}, "rights"), ({"rights": []}, "rights"),
    ({"tasks": -1}, "tasks")])
def test_a_bad_enrolment_names_what_was_wrong(hive: Hive, snap: Snap, given: dict[str, Any],
                                              field: str) -> None:
    before = snap()
    with pytest.raises(InvalidInput) as error:
        hive.enrol(OWNER, CODER.name, **given)
    assert error.value.extra.get("field") == field
    assert snap() == before


def test_a_claim_outside_the_enrolments_projects_is_optin_scope(
        hive: Hive, snap: Snap) -> None:
    number = routed(hive)  # project demo
    hive.enrol(OWNER, CODER.name, projects=["shop"])
    error = refused(snap, ForbiddenRight, "optin_scope", lambda: hive.claim(CODER, number))
    assert "shop" in error.message and "demo" in error.message
    with pytest.raises(NotFound):  # next does not offer it
        hive.claim_next(CODER)
    hive.enrol(OWNER, CODER.name, projects=["shop", "demo"])
    assert hive.claim(CODER, number).number == number


def test_a_handoff_outside_the_enrolments_projects_is_optin_scope(
        hive: Hive, snap: Snap) -> None:
    hive.enrol(OWNER, PLANNER.name, projects=["shop"])
    refused(snap, ForbiddenRight, "optin_scope", lambda: hive.handoff(
        PLANNER, requester=PLANNER.name, assignee=CODER.name, project="demo",
        packet=packet()))
    assert hive.handoff(PLANNER, requester=PLANNER.name, assignee=CODER.name,
                        project="shop", packet=packet()).number


def test_a_write_the_enrolments_rights_do_not_cover_is_optin_scope(
        hive: Hive, snap: Snap) -> None:
    hive.enrol(OWNER, PLANNER.name, rights=["tasks.work"])
    error = refused(snap, ForbiddenRight, "optin_scope", lambda: hive.handoff(
        PLANNER, requester=PLANNER.name, assignee=CODER.name, project="demo",
        packet=packet()))
    assert "tasks.propose" in error.message


def test_a_change_of_scope_under_a_live_claim_is_optin_changed(
        hive: Hive, snap: Snap) -> None:
    number = routed(hive)
    lease = hive.claim(CODER, number)
    hive.enrol(OWNER, CODER.name, projects=["demo"])  # a scope where there was none
    for write in (
            lambda: hive.update(CODER, number, lease_id=lease.lease_id,
                                token=lease.fencing_token, summary="half way"),
            lambda: hive.renew(CODER, number, lease_id=lease.lease_id,
                               token=lease.fencing_token),
            lambda: hive.submit(CODER, number, lease_id=lease.lease_id,
                                token=lease.fencing_token, summary="done",
                                evidence=EVIDENCE)):
        refused(snap, InvalidState, "optin_changed", write)
    hive.release(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token)
    again = hive.claim(CODER, number)  # under the new enrolment
    hive.submit(CODER, number, lease_id=again.lease_id, token=again.fencing_token,
                summary="done", evidence=EVIDENCE)
    assert hive.get(number).task.state.value == "approval"


def test_an_ended_enrolment_is_optin_inactive(hive: Hive, snap: Snap) -> None:
    number = routed(hive)
    other = routed(hive)
    lease = hive.claim(CODER, number)
    hive.enrol(OWNER, CODER.name)
    ended = hive.end_enrolment(OWNER, CODER.name, reason="on leave")
    assert not ended.active
    for write in (lambda: hive.claim(CODER, other),
                  lambda: hive.claim_next(CODER),
                  lambda: hive.update(CODER, number, lease_id=lease.lease_id,
                                      token=lease.fencing_token, summary="half way")):
        refused(snap, InvalidState, "optin_inactive", write)
    refused(snap, InvalidState, "optin_inactive",
            lambda: hive.end_enrolment(OWNER, CODER.name))
    # giving the claim back is never refused
    hive.release(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token)
    hive.enrol(OWNER, CODER.name)
    assert hive.claim(CODER, other).number == other


def test_ending_an_enrolment_an_agent_does_not_have_is_not_found(
        hive: Hive, snap: Snap) -> None:
    refused(snap, NotFound, "no_such_enrolment", lambda: hive.end_enrolment(OWNER, CODER.name))


def test_an_agent_without_an_enrolment_works_as_before(hive: Hive) -> None:
    hive.enrol(OWNER, REVIEWER.name, projects=["shop"])  # another agent's changes nothing
    number = routed(hive)
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)


# -- a guest's request, withdrawn by the guest's owner in team mode ------------------------


def guest_task(hive: Hive) -> int:
    number = hive.handoff(GUEST, requester=GUEST.name, assignee=CODER.name, project="demo",
                          packet=packet()).number
    return number


def test_in_team_mode_a_guests_agent_withdraws_its_owners_request(hive: Hive) -> None:
    hive.set_policy(OWNER, "mode", "team")
    number = guest_task(hive)
    other_agent = Caller.agent("guest/planner", "elsewhere")
    receipt = hive.cancel(other_agent, number, reason="no longer needed")
    assert receipt.state.value == "cancelled"
    entry = hive.history(number)[-1]
    assert (entry.actor, entry.to_state, entry.reason) == (
        "guest/planner", "cancelled", "no longer needed")


def test_the_guests_owner_withdraws_only_its_own_requests(hive: Hive, snap: Snap) -> None:
    hive.set_policy(OWNER, "mode", "team")
    number = routed(hive)  # requested by ana/planner
    refused(snap, ForbiddenRight, "not_permitted", lambda: hive.cancel(GUEST, number))
    refused(snap, ForbiddenRight, "not_permitted", lambda: hive.cancel(SECOND, number))
    guests = guest_task(hive)
    stranger = Caller.agent("bob/helper", "elsewhere")
    refused(snap, ForbiddenRight, "not_permitted", lambda: hive.cancel(stranger, guests))


def test_in_personal_mode_only_the_owner_cancels(hive: Hive, snap: Snap) -> None:
    number = guest_task(hive)
    error = refused(snap, ForbiddenRight, "not_permitted", lambda: hive.cancel(GUEST, number))
    assert "team mode" in error.message
    assert hive.cancel(OWNER, number).state.value == "cancelled"


def test_a_holder_whose_enrolment_changed_hears_optin_changed_first(
        hive: Hive, snap: Snap) -> None:
    """Even when the change took away the right its write needs: the stale picture first."""
    number = routed(hive)
    lease = hive.claim(CODER, number)
    hive.enrol(OWNER, CODER.name, rights=["tasks.propose"])
    refused(snap, InvalidState, "optin_changed", lambda: hive.update(
        CODER, number, lease_id=lease.lease_id, token=lease.fencing_token, summary="on"))
    hive.release(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token)
    refused(snap, ForbiddenRight, "optin_scope", lambda: hive.claim(CODER, number))


@pytest.mark.parametrize("role", ["", "Bad", 5])
def test_a_listing_by_a_malformed_role_names_it(hive: Hive, role: Any) -> None:
    with pytest.raises(InvalidInput) as error:
        hive.list(role=role)
    assert error.value.reason == "invalid_role"
