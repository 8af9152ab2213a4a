"""Seed 004's smaller rows in the task view: the decision on a result (TaskDecisionV1),
each update's kind (progress or verdict), and a merge shown as a piece of evidence.

Run on every engine (and over HTTP, where the module is one of ``OVER_HTTP``); every view
is also checked against the seed schema for its ``task``.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from hivelite import Hive, InvalidInput, TaskView
from hivelite.core.receipts import digest_of, sign

from .conftest import CODER, OWNER, REVIEWER, Snap, own_task, refused

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


# -- a result's draft ----------------------------------------------------------------------

PATCH = {"kind": "patch", "title": "login: check the token's expiry",
         "content": "--- a/login.py\n+++ b/login.py\n@@ -1 +1 @@\n-a\n+b\n"}


def drafted(hive: Hive, draft: Any = PATCH, **submit: Any) -> tuple[int, Any]:
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    receipt = hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                          summary="done", evidence=EVIDENCE, draft=draft, **submit)
    return number, receipt


def test_a_result_keeps_its_draft_and_cites_the_row_that_recorded_it(hive: Hive) -> None:
    number, _ = drafted(hive)
    view = seen(hive, number)
    assert view.draft is not None
    assert view.draft.model_dump(exclude={"seq"}) == PATCH
    # the submission's one row (migration 19) stands for moves 7, 12 and the judgement's
    (entry,) = [e for e in hive.history(number) if e.seq == view.draft.seq and e.move == 12]
    assert entry.to_state == "verifying"
    kept = json.dumps({"kind": PATCH["kind"], "content": PATCH["content"],
                       "title": PATCH["title"]}, separators=(",", ":"))
    assert entry.detail is not None
    assert entry.detail["draft"] == hashlib.sha256(kept.encode()).hexdigest()
    assert "draft" not in view.task.model_dump(mode="json")["result"]  # never in the seed's


def test_an_amend_keeps_the_draft(hive: Hive) -> None:
    number, _ = drafted(hive)
    before = seen(hive, number).draft
    hive.amend(CODER, number, summary="done, and the docs too")
    assert seen(hive, number).draft == before


def test_a_new_submission_replaces_the_draft(hive: Hive) -> None:
    number, _ = drafted(hive)
    hive.decline(OWNER, number, reason="the wrong file")
    lease = hive.claim(CODER, number)
    decision = {"kind": "decision", "content": "keep the old login; add a check"}
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="again", evidence=EVIDENCE, draft=decision)
    view = seen(hive, number)
    assert view.draft is not None and view.draft.kind == "decision"
    assert view.draft.seq == max(e.seq for e in hive.history(number) if e.move == 12)
    assert seen(hive, own_task(hive)).draft is None


@pytest.mark.parametrize(("draft", "outcome"), [
    ({"kind": "essay", "content": "x"}, "completed"),
    ({"kind": "patch", "content": ""}, "completed"),
    ({"kind": "patch"}, "completed"),
    ({"kind": "patch", "content": "x", "extra": 1}, "completed"),
    ({"kind": "patch", "content": "x" * 100_001}, "completed"),
    (PATCH, "failed")])
def test_a_bad_draft_is_refused_and_changes_nothing(hive: Hive, snap: Snap, draft: Any,
                                                    outcome: str) -> None:
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    error = refused(snap, InvalidInput, "invalid_draft", lambda: hive.submit(
                        CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                        summary="done", evidence=EVIDENCE, draft=draft, outcome=outcome))
    assert error.extra.get("field", "").startswith("draft")


# -- verified evidence ---------------------------------------------------------------------

OUTPUT = "14 passed in 0.31s"


def submitted_with(hive: Hive, evidence: list[dict[str, Any]]) -> int:
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=evidence)
    return number


def test_a_receipt_over_the_evidence_content_verifies_it(hive: Hive) -> None:
    number = submitted_with(hive, [
        {"kind": "test_output", "summary": "14 passed", "content": OUTPUT,
         "receipt": {"digest": digest_of(OUTPUT.encode())}},
        {"kind": "test_output", "summary": "other", "content": "3 failed",
         "receipt": {"digest": digest_of(b"something else")}},
        {"kind": "note", "summary": "no receipt"}])
    view = seen(hive, number)
    assert [e.verified for e in view.evidence] == [True, False, False]
    assert view.evidence[0].receipt is not None and view.evidence[0].receipt.why is None
    assert view.evidence[1].receipt is not None
    assert "not the digest" in (view.evidence[1].receipt.why or "")
    assert view.evidence[2].receipt is None
    # the seed's evidence never carries a receipt, and the journal seals what verified
    assert "receipt" not in view.task.model_dump(mode="json")["result"]["evidence"][0]
    entry = next(e for e in hive.history(number) if e.move == 12)
    assert entry.detail is not None and entry.detail["verified"] == [0]


def test_a_registered_signers_receipt_verifies_and_a_forged_one_does_not(
        hive: Hive) -> None:
    ci = hive.add_signer(OWNER, "ci")
    assert [(s.name, s.fingerprint) for s in hive.signers()] == [("ci", ci.fingerprint)]
    digest = digest_of(b"the build's artifact")
    good = {"digest": digest, "signer": "ci", "signature": sign(ci.secret, digest)}
    forged = {"digest": digest, "signer": "ci", "signature": sign("x" * 64, digest)}
    unknown = {"digest": digest, "signer": "elsewhere", "signature": sign(ci.secret, digest)}
    number = submitted_with(hive, [
        {"kind": "link", "summary": "build", "url": "https://ci.example/1", "receipt": r}
        for r in (good, forged, unknown)])
    view = seen(hive, number)
    assert [e.verified for e in view.evidence] == [True, False, False]
    assert "not ci's" in (view.evidence[1].receipt.why or "")  # type: ignore[union-attr]
    assert "no key" in (view.evidence[2].receipt.why or "")  # type: ignore[union-attr]


@pytest.mark.parametrize("forged", [{"verified": True}, {"receipt": {"digest": "md5:x"}},
                                    {"receipt": {"digest": "sha256:" + "0" * 64,
                                                 "verified": True}}])
def test_a_client_never_sets_verified(hive: Hive, snap: Snap, forged: dict[str, Any]) -> None:
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    item = {"kind": "test_output", "summary": "14 passed", "content": OUTPUT} | forged
    before = snap()
    with pytest.raises(InvalidInput) as error:
        hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=[item])
    assert "verified" in str(error.value) or "digest" in str(error.value)
    assert snap() == before


def test_an_amend_checks_new_evidence_and_keeps_the_old_receipts(hive: Hive) -> None:
    receipted = {"kind": "test_output", "summary": "14 passed", "content": OUTPUT,
                 "receipt": {"digest": digest_of(OUTPUT.encode())}}
    number = submitted_with(hive, [receipted])
    hive.amend(CODER, number, summary="done, reworded")
    assert [e.verified for e in seen(hive, number).evidence] == [True]
    hive.amend(CODER, number, evidence=[{"kind": "note", "summary": "none now"}, receipted])
    assert [e.verified for e in seen(hive, number).evidence] == [False, True]


def test_a_signed_receipt_verifies_only_the_content_it_was_made_for(hive: Hive) -> None:
    ci = hive.add_signer(OWNER, "ci")
    digest = digest_of(b"3 failed, 1 passed")
    signed = {"digest": digest, "signer": "ci", "signature": sign(ci.secret, digest)}
    number = submitted_with(hive, [
        {"kind": "test_output", "summary": "4 passed", "content": "4 passed",
         "receipt": signed},
        {"kind": "test_output", "summary": "the run", "content": "3 failed, 1 passed",
         "receipt": signed}])
    view = seen(hive, number)
    assert [e.verified for e in view.evidence] == [False, True]
    assert "not the digest" in (view.evidence[0].receipt.why or "")  # type: ignore[union-attr]


def test_a_draft_holds_no_nul_on_any_engine(hive: Hive, snap: Snap) -> None:
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    refused(snap, InvalidInput, "invalid_draft", lambda: hive.submit(
        CODER, number, lease_id=lease.lease_id, token=lease.fencing_token, summary="done",
        evidence=EVIDENCE, draft={"kind": "patch", "content": "a\x00b"}))
