"""Seed 004's smaller rows in the task view: the decision on a result (TaskDecisionV1),
each update's kind (progress or verdict), and a merge shown as a piece of evidence.

Run on every engine (and over HTTP, where the module is one of ``OVER_HTTP``); every view
is also checked against the seed schema for its ``task``.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from hivelite import Hive, TaskView

from .conftest import CODER, OWNER, REVIEWER, own_task

pytestmark = pytest.mark.contract

VALIDATOR = Draft202012Validator(json.loads(
    resources.files("hivelite").joinpath("data/task.schema.json").read_text(encoding="utf-8")),
    format_checker=FormatChecker())
EVIDENCE: list[dict[str, Any]] = [{"kind": "test_output", "summary": "3 passed"}]


def submitted(hive: Hive, **submit: Any) -> int:
    """A task of the owner's agents with a result awaiting a verdict (threshold 1)."""
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.update(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="tests written")
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE, **submit)
    return number


def seen(hive: Hive, number: int) -> TaskView:
    view = hive.get(number)
    VALIDATOR.validate(view.task.model_dump(mode="json"))
    return view


def test_a_result_awaiting_a_verdict_has_no_decision(hive: Hive) -> None:
    view = seen(hive, submitted(hive))
    assert view.task.state.value == "approval"
    assert view.decision is None


def test_a_sign_off_is_the_persons_decision(hive: Hive) -> None:
    number = submitted(hive)
    receipt = hive.sign_off(OWNER, number, reason="looks right")
    decision = seen(hive, number).decision
    assert decision is not None
    assert (decision.outcome, decision.decided_by, decision.by, decision.reason) == (
        "accepted", "person", "ana", "looks right")
    assert decision.at == receipt.at
    entry = next(e for e in hive.history(number) if e.seq == decision.seq)
    assert (entry.move, entry.to_state) == (16, "completed")


def test_confirmations_are_the_thresholds_decision(hive: Hive) -> None:
    number = submitted(hive)
    hive.verify(REVIEWER, number, verdict="accept")
    decision = seen(hive, number).decision
    assert decision is not None
    assert (decision.outcome, decision.decided_by, decision.by) == (
        "accepted", "threshold", REVIEWER.name)


def test_a_decline_is_kept_while_the_work_is_redone(hive: Hive) -> None:
    number = submitted(hive)
    hive.decline(OWNER, number, reason="the tests do not cover login")
    declined = seen(hive, number).decision
    assert declined is not None
    assert (declined.outcome, declined.decided_by, declined.reason) == (
        "declined", "person", "the tests do not cover login")
    lease = hive.claim(CODER, number)
    assert seen(hive, number).decision == declined  # the assignee reads why
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="login covered", evidence=EVIDENCE)
    assert seen(hive, number).decision is None  # a new result awaits a new decision


def test_a_verifiers_reject_is_a_verifiers_decision(hive: Hive) -> None:
    number = submitted(hive)
    hive.verify(REVIEWER, number, verdict="reject", reason="no test for logout")
    decision = seen(hive, number).decision
    assert decision is not None
    assert (decision.outcome, decision.decided_by, decision.by, decision.reason) == (
        "declined", "verifier", REVIEWER.name, "no test for logout")


def test_a_threshold_of_zero_decides_at_once(hive: Hive) -> None:
    hive.set_policy(OWNER, "threshold", 0)
    number = submitted(hive)
    decision = seen(hive, number).decision
    assert decision is not None
    assert (decision.outcome, decision.decided_by, decision.by) == (
        "accepted", "threshold", "guard")


def test_updates_carry_their_kind(hive: Hive) -> None:
    number = submitted(hive)
    hive.verify(REVIEWER, number, verdict="reject", reason="no test for logout")
    updates = seen(hive, number).updates
    assert [(u.kind, u.actor, u.summary) for u in updates] == [
        ("progress", CODER.name, "tests written"),
        ("verdict", REVIEWER.name, "reject: no test for logout")]


def test_a_merge_shows_as_evidence(hive: Hive) -> None:
    number = submitted(hive)
    hive.sign_off(OWNER, number)
    hive.amend(CODER, number, merge_commit="a1b2c3d")
    merge = seen(hive, number).merge
    assert merge is not None and merge.evidence is not None
    evidence = merge.evidence.model_dump(mode="json", exclude_none=True)
    assert evidence == {"kind": "commit", "summary": "merged as a1b2c3d",
                        "content": "a1b2c3d"}
    # the same shape as a seed evidence item
    VALIDATOR.validate(seen(hive, number).task.model_dump(mode="json") | {
        "result": {**seen(hive, number).task.model_dump(mode="json")["result"],
                   "evidence": [evidence]}})
