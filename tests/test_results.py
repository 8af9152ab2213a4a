"""Results and decisions: submit, verify, sign-off, decline, amend (issue 3 rules 5-7).

DESIGN §3 moves 12-17, §6 results/verification/thresholds, §9 hooks; seed 004's
amend rule and error reasons. Every plugin here is a real object handed to
``open_hive(plugins=[...])``. Every write names its caller and answers a receipt,
checked against the task's full view and its journal (``landed``). A refused call
must leave every row of the store as it was (``rawsql.snapshot``), and every task
the library builds, for a view or for a plugin, must validate against the shipped
seed schema (see ``every_view_is_a_seed_task``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

import hivelite
import hivelite.verbs.base
import hivelite.verbs.results
import hivelite.verbs.views
from hivelite import (
    Caller,
    ClaimReceipt,
    ForbiddenRight,
    Hive,
    InvalidInput,
    InvalidState,
    ManualClock,
    PluginError,
    Receipt,
    State,
    TaskView,
)
from hivelite.core.clock import format_ts
from hivelite.verbs import default_threshold as builtin_threshold

from . import rawsql
from .conftest import CODER, OWNER, PLANNER, REVIEWER, OpenHive, held_task, issued_by, own_task

pytestmark = pytest.mark.contract

SCHEMA: dict[str, Any] = json.loads(
    resources.files("hivelite").joinpath("data/task.schema.json").read_text(encoding="utf-8")
)
VALIDATOR = Draft202012Validator(SCHEMA, format_checker=FormatChecker())
BUILT_IN = "store policy"
"""Who set a threshold no plugin answered: the store's policy (its default, 1)."""
EVIDENCE: list[dict[str, Any]] = [{"kind": "test_output", "summary": "3 passed"}]
WORKER = CODER.name
SECOND = Caller.agent("ana/second", "tablet")
"""A second independent reviewer, on a third instance."""
THIRD = Caller.agent("ana/third", "phone")
"""A third independent reviewer, on a fourth instance."""


def schema_errors(instance: Any) -> list[str]:
    return sorted(
        f"{'/'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in VALIDATOR.iter_errors(instance)
    )


def assert_seed_task(task: hivelite.Task) -> None:
    data = task.model_dump(mode="json")
    errors = schema_errors(data)
    assert errors == [], (errors, data)


@pytest.fixture(autouse=True)
def every_view_is_a_seed_task(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[TaskView]]:
    """Every view the library builds (get, list) holds a seed task; so does every task it
    hands a plugin (submit, verify, amend, notifications). Yields the views built."""
    seen: list[TaskView] = []
    original_view = hivelite.verbs.views.view_of
    original_task = hivelite.verbs.views.task_of

    def checked_view(*args: Any, **kwargs: Any) -> TaskView:
        view = original_view(*args, **kwargs)
        assert_seed_task(view.task)
        seen.append(view)
        return view

    def checked_task(*args: Any, **kwargs: Any) -> hivelite.Task:
        task = original_task(*args, **kwargs)
        assert_seed_task(task)
        return task

    monkeypatch.setattr(hivelite.verbs.base, "view_of", checked_view)
    for module in (hivelite.verbs.base, hivelite.verbs.results):
        monkeypatch.setattr(module, "task_of", checked_task)
    yield seen


# -- plugins -------------------------------------------------------------------


class Threshold:
    """``hivelite_merge_threshold`` answering a fixed value (any type, for the bad cases)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    @hivelite.hookimpl
    def hivelite_merge_threshold(self, task: hivelite.Task, hive: Hive) -> Any:
        return self.value


class EvidenceProblems:
    """``hivelite_check_evidence`` answering fixed problems, remembering what it saw."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.seen: list[hivelite.Result] = []

    @hivelite.hookimpl
    def hivelite_check_evidence(self, task: hivelite.Task, result: hivelite.Result,
                                hive: Hive) -> Any:
        self.seen.append(result)
        return self.answer


class RaisingEvidence:
    @hivelite.hookimpl
    def hivelite_check_evidence(self, task: hivelite.Task, result: hivelite.Result,
                                hive: Hive) -> Any:
        raise RuntimeError("evidence checker crashed")


class CountAs:
    """``hivelite_count_confirmation`` answering a fixed value."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.seen: list[Any] = []

    @hivelite.hookimpl
    def hivelite_count_confirmation(self, task: hivelite.Task, confirmation: Any,
                                    hive: Hive) -> Any:
        self.seen.append(confirmation)
        return self.value


class RaisingCount:
    @hivelite.hookimpl
    def hivelite_count_confirmation(self, task: hivelite.Task, confirmation: Any,
                                    hive: Hive) -> Any:
        raise ValueError("count crashed")


class Transitions:
    """``hivelite_on_transition``: each announced move with the task's state at that time."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, State]] = []

    @hivelite.hookimpl
    def hivelite_on_transition(self, task: hivelite.Task, move: Any, actor: str,
                               hive: Hive) -> None:
        self.seen.append((move.number, task.state))


# -- helpers -------------------------------------------------------------------


def snap(hive: Hive) -> dict[str, list[tuple[object, ...]]]:
    """Every row of the hive's store (less the tokens a served test's transport issued)."""
    return rawsql.without_tokens(rawsql.snapshot_file(Path(hive.store.location)),
                                 issued_by(hive))


@contextmanager
def unchanged(hive: Hive) -> Iterator[None]:
    """The block must leave every row of every table as it was."""
    before = snap(hive)
    yield
    assert snap(hive) == before


def holder_of(lease: ClaimReceipt) -> Caller:
    """The agent holding ``lease``, calling from the instance and session it claimed on."""
    return Caller.agent(lease.holder, lease.instance, lease.session)


def claimed(hive: Hive, *, instance: str = "laptop", session: str | None = None,
            **overrides: Any) -> tuple[int, ClaimReceipt]:
    n = own_task(hive, **overrides)
    lease = hive.claim(Caller.agent(WORKER, instance, session), n)
    assert (lease.number, lease.state, lease.holder, lease.instance, lease.session) == (
        n, State.accepted, WORKER, instance, session)
    return n, lease


def submit(hive: Hive, n: int, lease: ClaimReceipt, *, caller: Caller | None = None,
           **kw: Any) -> Receipt:
    """The lease's holder (or ``caller``) submits; ``done`` with ``EVIDENCE`` unless given."""
    kw.setdefault("summary", "done")
    kw.setdefault("evidence", EVIDENCE)
    return hive.submit(caller or holder_of(lease), n, lease_id=lease.lease_id,
                       token=lease.fencing_token, **kw)


def landed(hive: Hive, receipt: Receipt) -> TaskView:
    """The task's full view after a write, checked against the write's receipt: a valid
    receipt of the same task and state, taken now, whose seq is the journal's last row
    (every write checked here journals)."""
    type(receipt).model_validate(receipt.model_dump())
    view = hive.get(receipt.number)
    assert (receipt.id, receipt.state, receipt.waiting_on) == (
        view.task.id, view.task.state, view.task.waiting_on)
    assert receipt.at == format_ts(hive.clock())
    assert receipt.seq is not None and receipt.seq == hive.history(receipt.number)[-1].seq
    return view


def in_approval(hive: Hive, *, instance: str = "laptop", session: str | None = None,
                **kw: Any) -> int:
    n, lease = claimed(hive, instance=instance, session=session)
    receipt = submit(hive, n, lease, **kw)
    assert receipt.state is State.approval
    return n


def completed(hive: Hive, reviewer: Caller = REVIEWER) -> int:
    n = in_approval(hive)
    assert hive.verify(reviewer, n).state is State.completed
    return n


def move_numbers(hive: Hive, n: int) -> list[int]:
    return [j.move for j in hive.history(n) if j.move is not None]


def last_move(hive: Hive, n: int, number: int) -> hivelite.JournalEntry:
    return [j for j in hive.history(n) if j.move == number][-1]


def events(hive: Hive, n: int, reason: str) -> list[hivelite.JournalEntry]:
    """Journal rows that are not moves (from and to the same state) with this reason."""
    return [j for j in hive.history(n)
            if j.move is None and j.from_state is not None and j.reason == reason]


def refused(exc_type: type[hivelite.HiveliteError], reason: str) -> Any:
    return pytest.raises(exc_type, match=rf"/{reason}:")


# == rule 5: submit =============================================================


def test_result_follows_the_seed_schema_with_holder_and_clock_time(
        hive: Hive, clock: ManualClock) -> None:
    n, lease = claimed(hive)
    clock.advance(minutes=3, milliseconds=250)
    receipt = submit(hive, n, lease, summary="parser written",
                     evidence=[{"kind": "link", "summary": "the PR",
                                "url": "https://example.com/pr/7"},
                               hivelite.Evidence(kind="note", summary="read by hand")],
                     provenance="owner_instruction")
    view = landed(hive, receipt)
    result = view.task.result
    assert result is not None
    assert result.returned_by == WORKER
    assert result.returned_at == format_ts(clock()) == "2026-12-02T09:03:00.250Z"
    assert receipt.at == result.returned_at
    assert result.summary == "parser written"
    assert result.provenance == "owner_instruction"
    data = view.task.model_dump(mode="json")["result"]
    assert data["evidence"] == [
        {"kind": "link", "summary": "the PR", "url": "https://example.com/pr/7"},
        {"kind": "note", "summary": "read by hand"},
    ]
    assert schema_errors(view.task.model_dump(mode="json")) == []
    [listed] = hive.list().items
    assert listed.task.result == result
    assert view.outcome == "completed"


def test_default_provenance_is_agent_generated(hive: Hive) -> None:
    n, lease = claimed(hive)
    view = landed(hive, submit(hive, n, lease))
    assert view.task.result.provenance == "agent_generated"  # type: ignore[union-attr]


def test_submit_ends_the_claim(hive: Hive) -> None:
    n, lease = claimed(hive)
    view = landed(hive, submit(hive, n, lease))
    assert view.claim is None
    with refused(InvalidState, "stale_claim"):
        hive.renew(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token)
    with refused(InvalidState, "stale_claim"):
        hive.update(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="more")
    with refused(InvalidState, "stale_claim"):
        submit(hive, n, lease)


def test_submit_refuses_a_stale_token_and_writes_nothing(hive: Hive, db_path: Path) -> None:
    n, lease = claimed(hive)
    with unchanged(hive), refused(InvalidState, "stale_claim"):
        hive.submit(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token + 1,
                    summary="done", evidence=EVIDENCE)
    with unchanged(hive), refused(ForbiddenRight, "not_permitted"):
        submit(hive, n, lease, caller=Caller.agent("ana/intruder", "laptop"))
    with unchanged(hive), refused(ForbiddenRight, "agent_only"):
        submit(hive, n, lease, caller=OWNER)
    assert hive.get(n).task.state is State.accepted


def test_default_threshold_one_awaits_approval_move_14(hive: Hive) -> None:
    n, lease = claimed(hive)
    receipt = submit(hive, n, lease)
    view = landed(hive, receipt)
    assert receipt.state is State.approval
    assert view.threshold == 1
    assert view.lifecycle == "approval"
    assert move_numbers(hive, n) == [1, 6, 7, 12, 14]
    entry = last_move(hive, n, 14)
    assert entry.actor == "guard"
    assert entry.detail == {"threshold": 1, "decided_by": BUILT_IN}


def test_builtin_personal_threshold_is_one(hive: Hive) -> None:
    assert builtin_threshold.PERSONAL_THRESHOLD == 1
    task = hive.get(own_task(hive)).task
    assert builtin_threshold.hivelite_merge_threshold(task=task, hive=hive) == 1


def test_threshold_zero_completes_at_once_move_13(open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[Threshold(0)])
    n, lease = claimed(hive)
    receipt = submit(hive, n, lease)
    view = landed(hive, receipt)
    assert receipt.state is State.completed
    assert view.lifecycle == "completed"
    assert view.threshold == 0
    assert move_numbers(hive, n) == [1, 6, 7, 12, 13]
    assert last_move(hive, n, 13).detail == {"threshold": 0, "decided_by": "Threshold"}


@pytest.mark.parametrize("n_needed", [1, 2, 5])
def test_threshold_plugin_decides_approval_and_is_named(
        open_hive: OpenHive, n_needed: int) -> None:
    hive = open_hive(plugins=[Threshold(n_needed)])
    n, lease = claimed(hive)
    receipt = submit(hive, n, lease)
    view = landed(hive, receipt)
    assert receipt.state is State.approval
    assert view.threshold == n_needed
    assert move_numbers(hive, n)[-2:] == [12, 14]
    assert last_move(hive, n, 14).detail == {"threshold": n_needed,
                                             "decided_by": "Threshold"}


def test_threshold_plugin_answering_none_leaves_the_builtin(open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[Threshold(None)])
    n, lease = claimed(hive)
    view = landed(hive, submit(hive, n, lease))
    assert view.threshold == 1
    assert last_move(hive, n, 14).detail == {"threshold": 1, "decided_by": BUILT_IN}


def test_evidence_problems_send_it_back_to_routed_with_problems_journaled(
        open_hive: OpenHive) -> None:
    checker = EvidenceProblems(["no screenshot attached"])
    other = EvidenceProblems(["summary too vague"])
    hive = open_hive(plugins=[checker, other])
    n, lease = claimed(hive)
    receipt = submit(hive, n, lease, summary="done it")
    view = landed(hive, receipt)
    assert receipt.state is State.routed
    assert view.claim is None
    assert move_numbers(hive, n) == [1, 6, 7, 12, 15]
    detail = last_move(hive, n, 15).detail
    assert detail is not None
    problems = sorted(detail["problems"], key=lambda p: p["problem"])
    assert problems == [
        {"plugin": "EvidenceProblems", "problem": "no screenshot attached"},
        {"plugin": "EvidenceProblems-2", "problem": "summary too vague"},
    ]
    # the hook saw the result as it was returned
    assert checker.seen[0].summary == "done it"
    assert checker.seen[0].returned_by == WORKER
    # back to the assignee: it claims again with a new token
    again = hive.claim(CODER, n)
    assert again.fencing_token == lease.fencing_token + 1


@pytest.mark.parametrize("answer", [[], None, ()])
def test_evidence_hook_without_problems_lets_it_pass(open_hive: OpenHive, answer: Any) -> None:
    hive = open_hive(plugins=[EvidenceProblems(answer)])
    n, lease = claimed(hive)
    assert submit(hive, n, lease).state is State.approval


def test_verifying_is_passed_through_in_one_transaction(open_hive: OpenHive) -> None:
    watcher = Transitions()
    hive = open_hive(plugins=[watcher])
    n, lease = claimed(hive)
    hive.checkpoint(holder_of(lease), n, lease_id=lease.lease_id, token=lease.fencing_token,
                    progress="half way")
    watcher.seen.clear()
    receipt = submit(hive, n, lease)
    # both moves were announced after one commit: neither saw `verifying` left behind
    assert watcher.seen == [(12, State.approval), (14, State.approval)]
    assert hive.list(state="verifying").items == []
    rows = [j for j in hive.history(n) if j.move in (12, 14)]
    assert len({j.at for j in rows}) == 1
    assert receipt.seq == rows[-1].seq
    landed(hive, receipt)


def test_failed_outcome_is_recorded_and_the_task_routed_again(hive: Hive) -> None:
    n, lease = claimed(hive)
    receipt = submit(hive, n, lease, outcome="failed", summary="could not reproduce")
    view = landed(hive, receipt)
    assert receipt.state is State.routed
    assert view.outcome == "failed"
    assert (view.lifecycle, view.attempts) == ("queued", 1)  # it can be claimed again
    assert view.claim is None
    assert view.task.result is not None and view.task.result.summary == "could not reproduce"
    assert move_numbers(hive, n) == [1, 6, 7, 12, 15]
    assert last_move(hive, n, 15).detail == {"outcome": "failed"}
    assert "could not reproduce" in (last_move(hive, n, 15).reason or "")
    # another attempt: claimable again, and no longer reads as failed
    hive.claim(CODER, n)
    assert hive.get(n).lifecycle == "claimed"


def test_failed_outcome_does_not_consult_the_evidence_checks(open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[EvidenceProblems(["never good enough"])])
    n, lease = claimed(hive)
    view = landed(hive, submit(hive, n, lease, outcome="failed"))
    assert view.outcome == "failed"
    assert last_move(hive, n, 15).detail == {"outcome": "failed"}


def test_submit_records_usage(hive: Hive) -> None:
    n, lease = claimed(hive)
    view = landed(hive, submit(hive, n, lease, tokens=1200, usd_micros=3400))
    assert (view.usage.tokens, view.usage.usd_micros) == (1200, 3400)


def _item(i: int) -> dict[str, str]:
    return {"kind": "note", "summary": f"item {i}"}


BAD_EVIDENCE: dict[str, list[Any]] = {
    "none": [],
    "twenty-one": [_item(i) for i in range(21)],
    "bad-kind": [{"kind": "video", "summary": "a recording"}],
    "bad-url": [{"kind": "link", "summary": "the PR", "url": "not a url"}],
    "url-without-scheme": [{"kind": "link", "summary": "the PR", "url": "example.com/pr"}],
    "no-summary": [{"kind": "note"}],
    "empty-summary": [{"kind": "note", "summary": ""}],
    "extra-key": [{"kind": "note", "summary": "x", "verified": True}],
}


@pytest.mark.parametrize("evidence", BAD_EVIDENCE.values(), ids=BAD_EVIDENCE.keys())
def test_invalid_evidence_is_refused_and_nothing_written(
        hive: Hive, db_path: Path, evidence: list[Any]) -> None:
    n, lease = claimed(hive)
    with unchanged(hive), pytest.raises(InvalidInput):
        submit(hive, n, lease, evidence=evidence)
    view = hive.get(n)
    assert view.task.state is State.accepted and view.claim is not None
    assert view.task.result is None
    # the claim still stands: a valid result goes through
    assert submit(hive, n, lease).state is State.approval


def test_twenty_evidence_items_are_allowed(hive: Hive) -> None:
    n, lease = claimed(hive)
    view = landed(hive, submit(hive, n, lease, evidence=[_item(i) for i in range(20)]))
    assert len(view.task.result.evidence) == 20  # type: ignore[union-attr]


@pytest.mark.parametrize("kw", [{"outcome": "done"}, {"provenance": "made_up"},
                                {"summary": ""}, {"tokens": -1}, {"usd_micros": 1.5}],
                         ids=["outcome", "provenance", "summary", "tokens", "usd"])
def test_other_invalid_submit_input_writes_nothing(
        hive: Hive, db_path: Path, kw: dict[str, Any]) -> None:
    n, lease = claimed(hive)
    with unchanged(hive), pytest.raises(InvalidInput):
        submit(hive, n, lease, **kw)


# == rule 6: verify, sign-off, decline ==========================================


def test_one_accept_meets_the_personal_threshold(hive: Hive) -> None:
    n = in_approval(hive)
    receipt = hive.verify(Caller.agent(REVIEWER.name, "desktop", "s9"), n)
    view = landed(hive, receipt)
    assert receipt.state is State.completed
    assert view.lifecycle == "completed"
    entry = last_move(hive, n, 16)
    assert entry.actor == REVIEWER.name
    assert entry.detail is not None and entry.detail["decided_by"] == "threshold"


@pytest.mark.parametrize("reason", [None, "", "   "])
def test_reject_needs_a_reason(hive: Hive, db_path: Path, reason: str | None) -> None:
    n = in_approval(hive)
    with unchanged(hive), refused(InvalidInput, "reason_required"):
        hive.verify(REVIEWER, n, verdict="reject", reason=reason)


def test_one_reject_routes_it_back_move_17(hive: Hive) -> None:
    n = in_approval(hive)
    receipt = hive.verify(REVIEWER, n, verdict="reject",
                          reason="tests do not cover the edge case")
    landed(hive, receipt)
    assert receipt.state is State.routed
    entry = last_move(hive, n, 17)
    assert entry.actor == REVIEWER.name
    assert entry.reason == "tests do not cover the edge case"
    hive.claim(CODER, n)  # back to the assignee


def test_a_reject_wins_over_earlier_accepts(open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[Threshold(2)])
    n = in_approval(hive)
    hive.verify(REVIEWER, n)
    receipt = hive.verify(SECOND, n, verdict="reject", reason="broken")
    landed(hive, receipt)
    assert receipt.state is State.routed
    assert move_numbers(hive, n)[-1] == 17


@pytest.mark.parametrize("instance", ["laptop", "desktop"])
def test_the_worker_never_verifies_its_own_result(
        hive: Hive, db_path: Path, instance: str) -> None:
    n = in_approval(hive)
    with unchanged(hive), refused(ForbiddenRight, "self_verify"):
        hive.verify(Caller.agent(WORKER, instance), n)
    with unchanged(hive), refused(ForbiddenRight, "self_verify"):
        hive.verify(Caller.agent(WORKER, instance), n, verdict="reject", reason="mine is bad")


@pytest.mark.parametrize("session", [None, "s1", "s2"])
def test_an_agent_on_the_claiming_instance_is_not_independent(
        hive: Hive, db_path: Path, session: str | None) -> None:
    n = in_approval(hive, instance="laptop", session="s1")
    with unchanged(hive), refused(InvalidState, "reviewer_not_independent"):
        hive.verify(Caller.agent(REVIEWER.name, "laptop", session), n)
    with unchanged(hive), refused(InvalidState, "reviewer_not_independent"):
        hive.verify(Caller.agent(REVIEWER.name, "laptop", session), n, verdict="reject",
                    reason="no")


def test_a_task_not_in_approval_takes_no_verdict(hive: Hive, db_path: Path) -> None:
    routed = own_task(hive)
    accepted, _ = claimed(hive)
    n, lease = claimed(hive)
    working = hive.checkpoint(holder_of(lease), n, lease_id=lease.lease_id,
                              token=lease.fencing_token, progress="going").number
    assert hive.get(working).task.state is State.working
    held = held_task(hive)
    for ref in (routed, accepted, working, held):
        with unchanged(hive), refused(InvalidState, "not_submitted"):
            hive.verify(REVIEWER, ref)
    done = completed(hive)
    cancelled = own_task(hive)
    hive.cancel(OWNER, cancelled)
    for ref in (done, cancelled):
        with unchanged(hive), refused(InvalidState, "task_closed"):
            hive.verify(SECOND, ref)


def test_the_same_reviewer_counts_once(db_path: Path, open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[Threshold(2)])
    n = in_approval(hive)
    hive.verify(REVIEWER, n)
    for instance, verdict, reason in (("desktop", "accept", None),
                                      ("tablet", "accept", None),
                                      ("tablet", "reject", "changed my mind")):
        with unchanged(hive), refused(InvalidState, "already_verified"):
            hive.verify(Caller.agent(REVIEWER.name, instance), n,
                        verdict=verdict,  # type: ignore[arg-type]
                        reason=reason)
    assert hive.get(n).task.state is State.approval


def test_threshold_two_one_accept_waits_the_second_completes(open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[Threshold(2)])
    n = in_approval(hive)
    first = hive.verify(REVIEWER, n)
    assert first.state is State.approval
    view = landed(hive, first)
    assert [(c.reviewer, c.verdict, c.counted) for c in view.confirmations] == [
        (REVIEWER.name, "accept", True)]
    [event] = events(hive, n, "confirmed")
    assert event.actor == REVIEWER.name and event.to_state is State.approval
    assert event.detail == {"confirmations": 1, "threshold": 2}
    assert first.seq == event.seq
    second = hive.verify(SECOND, n)
    landed(hive, second)
    assert second.state is State.completed
    entry = last_move(hive, n, 16)
    assert entry.actor == SECOND.name
    assert entry.detail == {"decided_by": "threshold", "confirmations": 2}


def test_a_confirmation_the_count_hook_refuses_does_not_count(open_hive: OpenHive) -> None:
    counter = CountAs(False)
    hive = open_hive(plugins=[counter])
    n = in_approval(hive)
    receipt = hive.verify(Caller.agent(REVIEWER.name, "desktop", "s3"), n)
    view = landed(hive, receipt)
    assert receipt.state is State.approval
    assert [(c.reviewer, c.counted) for c in view.confirmations] == [(REVIEWER.name, False)]
    [event] = events(hive, n, "not_counted")
    assert event.detail == {"confirmations": 0, "threshold": 1,
                            "why": "the plugin CountAs does not count it"}
    seen = counter.seen[0]
    assert (seen.reviewer, seen.instance, seen.session, seen.verdict) == (
        REVIEWER.name, "desktop", "s3", "accept")
    # the person still decides
    assert hive.sign_off(OWNER, n).state is State.completed


def test_a_count_hook_answering_none_counts(open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[CountAs(None)])
    n = in_approval(hive)
    assert hive.verify(REVIEWER, n).state is State.completed


def test_invalid_verdict_is_refused(hive: Hive, db_path: Path) -> None:
    n = in_approval(hive)
    with unchanged(hive), pytest.raises(InvalidInput):
        hive.verify(REVIEWER, n, verdict="maybe")  # type: ignore[arg-type]


@pytest.mark.parametrize("as_owner", [False, True], ids=["OWNER", "as_owner"])
def test_the_person_signs_off(hive: Hive, as_owner: bool) -> None:
    n = in_approval(hive)
    owner = hive.as_owner() if as_owner else OWNER
    receipt = hive.sign_off(owner, n)
    landed(hive, receipt)
    assert receipt.state is State.completed
    entry = last_move(hive, n, 16)
    assert entry.actor == "ana"
    assert entry.detail == {"decided_by": "person"}


def test_the_person_declines_with_a_reason(hive: Hive) -> None:
    n = in_approval(hive)
    receipt = hive.decline(OWNER, n, reason="not what I asked for")
    view = landed(hive, receipt)
    assert receipt.state is State.routed
    assert view.last_reason == "not what I asked for"
    entry = last_move(hive, n, 17)
    assert entry.actor == "ana"
    assert entry.reason == "not what I asked for"
    assert entry.detail == {"decided_by": "person"}


@pytest.mark.parametrize("reason", [None, "", "  "])
def test_decline_needs_a_reason(hive: Hive, db_path: Path, reason: Any) -> None:
    n = in_approval(hive)
    with unchanged(hive), refused(InvalidInput, "reason_required"):
        hive.decline(OWNER, n, reason=reason)


def test_sign_off_and_decline_only_in_approval(hive: Hive, db_path: Path) -> None:
    routed = own_task(hive)
    n, _ = claimed(hive)
    for ref in (routed, n):
        with unchanged(hive), refused(InvalidState, "not_submitted"):
            hive.sign_off(OWNER, ref)
        with unchanged(hive), refused(InvalidState, "not_submitted"):
            hive.decline(OWNER, ref, reason="no")
    done = completed(hive)
    with unchanged(hive), refused(InvalidState, "task_closed"):
        hive.sign_off(OWNER, done)
    with unchanged(hive), refused(InvalidState, "task_closed"):
        hive.decline(OWNER, done, reason="no")


NOT_THE_PERSON: dict[str, tuple[Caller, str]] = {
    "worker": (CODER, "not_permitted"),
    "reviewer": (REVIEWER, "not_permitted"),
    "bobs-agent": (Caller.agent("bob/coder", "bobs-laptop"), "not_permitted"),
    "bob": (Caller.owner("bob"), "not_owner"),
}


@pytest.mark.parametrize(("caller", "reason"), NOT_THE_PERSON.values(),
                         ids=NOT_THE_PERSON.keys())
def test_only_the_person_signs_off_or_declines(
        hive: Hive, db_path: Path, caller: Caller, reason: str) -> None:
    n = in_approval(hive)
    with unchanged(hive), refused(ForbiddenRight, reason):
        hive.sign_off(caller, n)
    with unchanged(hive), refused(ForbiddenRight, reason):
        hive.decline(caller, n, reason="no")


def test_the_person_can_sign_off_a_threshold_two_task_midway(open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[Threshold(2)])
    n = in_approval(hive)
    hive.verify(REVIEWER, n)
    assert hive.sign_off(OWNER, n).state is State.completed


@pytest.mark.file_only
@pytest.mark.parametrize("caller", [None, "ana", WORKER], ids=["None", "owner-name",
                                                                "agent-name"])
def test_a_missing_caller_is_refused_never_taken_for_the_owner(
        hive: Hive, db_path: Path, caller: Any) -> None:
    """No verb of a result acts for a caller nobody established (``actor=None`` used to
    mean the owner)."""
    n, lease = claimed(hive)
    with unchanged(hive), refused(InvalidInput, "caller_required"):
        hive.submit(caller, n, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)
    submit(hive, n, lease)
    calls: dict[str, Callable[[], Receipt]] = {
        "verify": lambda: hive.verify(caller, n),
        "sign_off": lambda: hive.sign_off(caller, n),
        "decline": lambda: hive.decline(caller, n, reason="no"),
        "amend": lambda: hive.amend(caller, n, summary="someone's words"),
    }
    for verb, call in calls.items():
        with unchanged(hive), refused(InvalidInput, "caller_required"):
            try:
                call()
            except InvalidInput as exc:
                exc.add_note(f"verb {verb}")
                raise
    done = completed(hive)
    with unchanged(hive), refused(InvalidInput, "caller_required"):
        hive.amend(caller, done, merge_commit="abc1234")
    assert hive.get(n).task.state is State.approval
    assert hive.get(done).merge is None


# == rule 7: amend ==============================================================


def test_the_submitter_amends_and_confirmations_are_dismissed(open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[Threshold(2)])
    n = in_approval(hive)
    assert len(landed(hive, hive.verify(REVIEWER, n)).confirmations) == 1
    new_evidence = [{"kind": "commit", "summary": "fixed the edge case"}]
    receipt = hive.amend(CODER, n, summary="done, edge case fixed", evidence=new_evidence)
    view = landed(hive, receipt)
    assert receipt.state is State.approval
    assert view.confirmations == []
    result = view.task.result
    assert result is not None and result.summary == "done, edge case fixed"
    assert [e.model_dump() for e in result.evidence] == new_evidence
    assert result.returned_by == WORKER
    [event] = events(hive, n, "amended")
    assert event.actor == WORKER
    assert event.detail is not None and event.detail["dismissed"] == 1
    assert receipt.seq == event.seq
    # fresh eyes: the earlier accept no longer counts, two new accepts are needed
    assert hive.verify(SECOND, n).state is State.approval
    assert hive.verify(REVIEWER, n).state is State.completed


def test_amend_summary_only_keeps_the_evidence(hive: Hive) -> None:
    n = in_approval(hive)
    view = landed(hive, hive.amend(CODER, n, summary="better words"))
    result = view.task.result
    assert result is not None and result.summary == "better words"
    assert [e.model_dump() for e in result.evidence] == EVIDENCE
    [event] = events(hive, n, "amended")
    assert event.detail is not None and event.detail["dismissed"] == 0


NOT_THE_SUBMITTER: dict[str, tuple[Caller, str]] = {
    "owner": (OWNER, "not_submitter"),
    "reviewer": (REVIEWER, "not_submitter"),
    "planner": (PLANNER, "not_submitter"),
    "bob": (Caller.owner("bob"), "not_owner"),
}


@pytest.mark.parametrize(("caller", "reason"), NOT_THE_SUBMITTER.values(),
                         ids=NOT_THE_SUBMITTER.keys())
def test_only_the_submitter_amends_a_result_in_approval(
        hive: Hive, db_path: Path, caller: Caller, reason: str) -> None:
    n = in_approval(hive)
    with unchanged(hive), refused(ForbiddenRight, reason):
        hive.amend(caller, n, summary="someone else's words")


def test_amend_with_invalid_evidence_writes_nothing(hive: Hive, db_path: Path) -> None:
    n = in_approval(hive)
    for bad in BAD_EVIDENCE.values():
        with unchanged(hive), pytest.raises(InvalidInput):
            hive.amend(CODER, n, evidence=bad)


def test_a_merge_record_needs_a_completed_task(hive: Hive, db_path: Path) -> None:
    n = in_approval(hive)
    with unchanged(hive), refused(InvalidState, "not_amendable"):
        hive.amend(CODER, n, merge_commit="abc1234")


def test_the_submitter_records_the_merge_once(hive: Hive, db_path: Path) -> None:
    n = completed(hive)
    assert hive.get(n).merge is None
    receipt = hive.amend(CODER, n, merge_commit="abc1234")
    view = landed(hive, receipt)
    assert receipt.state is State.completed
    assert view.merge is not None
    assert (view.merge.commit, view.merge.by) == ("abc1234", WORKER)
    [event] = events(hive, n, "merge_recorded")
    assert event.detail == {"merge_commit": "abc1234"}
    assert receipt.seq == event.seq
    for caller in (CODER, OWNER):
        with unchanged(hive), refused(InvalidState, "merge_recorded"):
            hive.amend(caller, n, merge_commit="def5678")
    assert hive.get(n).merge.commit == "abc1234"  # type: ignore[union-attr]


@pytest.mark.parametrize("as_owner", [False, True], ids=["OWNER", "as_owner"])
def test_the_person_records_the_merge(hive: Hive, as_owner: bool) -> None:
    n = completed(hive)
    owner = hive.as_owner() if as_owner else OWNER
    view = landed(hive, hive.amend(owner, n, merge_commit="0123456789abcdef"))
    assert view.merge is not None
    assert (view.merge.commit, view.merge.by) == ("0123456789abcdef", "ana")


def test_the_reviewer_never_records_the_merge(hive: Hive, db_path: Path) -> None:
    n = completed(hive, reviewer=REVIEWER)
    with unchanged(hive), refused(ForbiddenRight, "not_merger"):
        hive.amend(REVIEWER, n, merge_commit="abc1234")


def test_the_reviewer_of_a_threshold_two_task_never_records_the_merge(
        db_path: Path, open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[Threshold(2)])
    n = in_approval(hive)
    hive.verify(REVIEWER, n)
    assert hive.verify(SECOND, n).state is State.completed
    for reviewer in (REVIEWER, SECOND):
        with unchanged(hive), refused(ForbiddenRight, "not_merger"):
            hive.amend(reviewer, n, merge_commit="abc1234")


NOT_A_MERGER: dict[str, tuple[Caller, str]] = {
    "ana/planner": (PLANNER, "not_submitter"),
    "bob/coder": (Caller.agent("bob/coder", "bobs-laptop"), "not_submitter"),
    "bob": (Caller.owner("bob"), "not_owner"),
}


@pytest.mark.parametrize(("caller", "reason"), NOT_A_MERGER.values(), ids=NOT_A_MERGER.keys())
def test_anyone_else_may_not_record_the_merge(
        hive: Hive, db_path: Path, caller: Caller, reason: str) -> None:
    n = completed(hive)
    with unchanged(hive), refused(ForbiddenRight, reason):
        hive.amend(caller, n, merge_commit="abc1234")


@pytest.mark.parametrize("commit", ["abc123", "ABC1234", "abc123g", "a" * 65, "", " abc1234",
                                    "abc1234\n"])
def test_a_merge_commit_is_seven_to_64_lowercase_hex(
        hive: Hive, db_path: Path, commit: str) -> None:
    n = completed(hive)
    with unchanged(hive), pytest.raises(InvalidInput):
        hive.amend(CODER, n, merge_commit=commit)


@pytest.mark.parametrize("commit", ["abcdef0", "0" * 64])
def test_merge_commit_bounds_are_accepted(hive: Hive, commit: str) -> None:
    n = completed(hive)
    view = landed(hive, hive.amend(CODER, n, merge_commit=commit))
    assert view.merge.commit == commit  # type: ignore[union-attr]


def test_a_completed_result_is_not_amended(hive: Hive, db_path: Path) -> None:
    n = completed(hive)
    for kw in ({"summary": "later words"}, {"evidence": EVIDENCE},
               {"summary": "x", "merge_commit": "abc1234"}):
        with unchanged(hive), refused(InvalidState, "not_amendable"):
            hive.amend(CODER, n, **kw)


def _not_amendable_tasks(hive: Hive) -> dict[str, int]:
    tasks: dict[str, int] = {"routed": own_task(hive)}
    n, _ = claimed(hive)
    tasks["accepted"] = n
    n, lease = claimed(hive)
    hive.checkpoint(holder_of(lease), n, lease_id=lease.lease_id, token=lease.fencing_token,
                    progress="going")
    tasks["working"] = n
    n, lease = claimed(hive)
    hive.pause(holder_of(lease), n, lease_id=lease.lease_id, token=lease.fencing_token,
               on="human", reason="which format?")
    tasks["waiting"] = n
    tasks["held"] = held_task(hive)
    n = held_task(hive)
    hive.deny(OWNER, n)
    tasks["rejected"] = n
    n = own_task(hive)
    hive.cancel(OWNER, n)
    tasks["cancelled"] = n
    n = in_approval(hive)
    hive.decline(OWNER, n, reason="again please")
    tasks["routed-after-decline"] = n
    n = in_approval(hive)
    hive.verify(REVIEWER, n, verdict="reject", reason="wrong")
    tasks["routed-after-reject"] = n
    n, lease = claimed(hive)
    submit(hive, n, lease, outcome="failed")
    tasks["routed-after-failure"] = n
    return tasks


def test_other_states_are_not_amendable(hive: Hive, db_path: Path) -> None:
    tasks = _not_amendable_tasks(hive)
    for name, n in tasks.items():
        for caller, kw in ((CODER, {"summary": "new words"}),
                           (CODER, {"evidence": EVIDENCE}),
                           (CODER, {"merge_commit": "abc1234"}),
                           (OWNER, {"merge_commit": "abc1234"})):
            with unchanged(hive), refused(InvalidState, "not_amendable"):
                try:
                    hive.amend(caller, n, **kw)
                except InvalidState as exc:
                    exc.add_note(f"task state {name}")
                    raise


# == plugin failure isolation ===================================================


BAD_THRESHOLDS = ["two", -1, True, 1.5]


@pytest.mark.parametrize("value", BAD_THRESHOLDS, ids=[repr(v) for v in BAD_THRESHOLDS])
def test_a_bad_threshold_answer_is_a_plugin_error_and_writes_nothing(
        db_path: Path, open_hive: OpenHive, value: Any) -> None:
    hive = open_hive(plugins=[Threshold(value)])
    n, lease = claimed(hive)
    with unchanged(hive), pytest.raises(PluginError) as info:
        submit(hive, n, lease)
    assert info.value.plugin == "Threshold"
    assert info.value.hook == "hivelite_merge_threshold"
    assert "Threshold" in str(info.value) and "hivelite_merge_threshold" in str(info.value)
    view = hive.get(n)
    assert view.task.state is State.accepted and view.claim is not None


def test_a_raising_evidence_check_is_a_plugin_error_and_writes_nothing(
        db_path: Path, open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[RaisingEvidence()])
    n, lease = claimed(hive)
    with unchanged(hive), pytest.raises(PluginError) as info:
        submit(hive, n, lease)
    assert info.value.plugin == "RaisingEvidence"
    assert info.value.hook == "hivelite_check_evidence"
    assert "evidence checker crashed" in str(info.value)
    assert hive.get(n).task.result is None


@pytest.mark.parametrize("answer", ["looks bad", [1, 2], {"problem": "x"}])
def test_an_evidence_check_of_the_wrong_type_is_a_plugin_error(
        db_path: Path, open_hive: OpenHive, answer: Any) -> None:
    hive = open_hive(plugins=[EvidenceProblems(answer)])
    n, lease = claimed(hive)
    with unchanged(hive), pytest.raises(PluginError) as info:
        submit(hive, n, lease)
    assert (info.value.plugin, info.value.hook) == ("EvidenceProblems",
                                                    "hivelite_check_evidence")


@pytest.mark.parametrize("plugin", [CountAs("yes"), CountAs(1), RaisingCount()],
                         ids=["yes", "one", "raises"])
def test_a_bad_count_hook_is_a_plugin_error_and_writes_nothing(
        db_path: Path, open_hive: OpenHive, plugin: object) -> None:
    hive = open_hive(plugins=[plugin])
    n = in_approval(hive)
    with unchanged(hive), pytest.raises(PluginError) as info:
        hive.verify(REVIEWER, n)
    assert info.value.plugin == type(plugin).__name__
    assert info.value.hook == "hivelite_count_confirmation"
    view = hive.get(n)
    assert view.task.state is State.approval and view.confirmations == []


# == the seed schema ============================================================


def test_tasks_with_results_validate_against_the_seed_schema(
        open_hive: OpenHive, every_view_is_a_seed_task: list[TaskView]) -> None:
    hive = open_hive(plugins=[Threshold(2)])
    in_approval(hive, evidence=[{"kind": "link", "summary": "PR",
                                 "url": "https://example.com/pr/1?x=1#top"},
                                {"kind": "test_output", "summary": "ok",
                                 "content": "collected 3 items\n3 passed"}])
    n = in_approval(hive)
    hive.verify(REVIEWER, n)
    hive.amend(CODER, n, summary="amended")
    hive.sign_off(OWNER, n)
    hive.amend(CODER, n, merge_commit="abc1234")
    n, lease = claimed(hive)
    submit(hive, n, lease, outcome="failed")
    _not_amendable_tasks(hive)
    views = hive.list(limit=500).items
    with_results = [v for v in views if v.task.result is not None]
    assert len(with_results) >= 6
    assert {v.task.state for v in with_results} >= {State.approval, State.completed,
                                                    State.routed}
    for view in views:
        assert schema_errors(view.task.model_dump(mode="json")) == []
    assert len(every_view_is_a_seed_task) >= len(views)


class RefuseAmendedEvidence:
    """Refuses (or crashes on) a result whose summary says so; passes the rest."""

    @hivelite.hookimpl
    def hivelite_check_evidence(self, task: hivelite.Task, result: hivelite.Result,
                                hive: Hive) -> Any:
        if result.summary == "boom":
            raise RuntimeError("checker crashed on the amendment")
        return ["unchecked claim"] if result.summary == "refuse me" else []


def test_amended_evidence_passes_the_evidence_checks_or_nothing_changes(
        db_path: Path, open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[Threshold(2), RefuseAmendedEvidence()])
    n = in_approval(hive)
    hive.verify(REVIEWER, n)
    with unchanged(hive), pytest.raises(InvalidInput):
        hive.amend(CODER, n, summary="refuse me")
    with unchanged(hive), pytest.raises(PluginError) as info:
        hive.amend(CODER, n, summary="boom")
    assert (info.value.plugin, info.value.hook) == ("RefuseAmendedEvidence",
                                                    "hivelite_check_evidence")
    view = hive.get(n)
    assert view.task.result.summary == "done"  # type: ignore[union-attr]
    assert len(view.confirmations) == 1


class IgnoreReviewer:
    """Counts nobody named ``reviewer``; no opinion on the rest."""

    def __init__(self, reviewer: str) -> None:
        self.reviewer = reviewer

    @hivelite.hookimpl
    def hivelite_count_confirmation(self, task: hivelite.Task, confirmation: Any,
                                    hive: Hive) -> bool | None:
        return False if confirmation.reviewer == self.reviewer else None


def test_an_uncounted_accept_never_adds_up_later(open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[Threshold(2), IgnoreReviewer(REVIEWER.name)])
    n = in_approval(hive)
    hive.verify(REVIEWER, n)
    receipt = hive.verify(SECOND, n)
    view = landed(hive, receipt)
    assert receipt.state is State.approval
    assert [(c.reviewer, c.counted) for c in view.confirmations] == [
        (REVIEWER.name, False), (SECOND.name, True)]
    assert events(hive, n, "confirmed")[-1].detail == {"confirmations": 1, "threshold": 2}
    receipt = hive.verify(THIRD, n)
    landed(hive, receipt)
    assert receipt.state is State.completed


SCHEMA_REFUSED_URLS = ["http://[1.2.3.4]/", "http://[:]/", "http://[...]/"]


@pytest.mark.parametrize("url", SCHEMA_REFUSED_URLS)
def test_an_evidence_url_the_seed_schema_refuses_is_refused(
        hive: Hive, db_path: Path, url: str) -> None:
    """A url the seed's ``format: uri`` refuses must not reach a returned task."""
    assert not FormatChecker().conforms(url, "uri")
    n, lease = claimed(hive)
    with unchanged(hive), pytest.raises(InvalidInput):
        submit(hive, n, lease, evidence=[{"kind": "link", "summary": "the PR", "url": url}])


class RaisingThreshold:
    @hivelite.hookimpl
    def hivelite_merge_threshold(self, task: hivelite.Task, hive: Hive) -> Any:
        raise KeyError("no policy")


def test_a_raising_threshold_hook_is_a_plugin_error_and_writes_nothing(
        db_path: Path, open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[RaisingThreshold()])
    n, lease = claimed(hive)
    with unchanged(hive), pytest.raises(PluginError) as info:
        submit(hive, n, lease)
    assert (info.value.plugin, info.value.hook) == ("RaisingThreshold",
                                                    "hivelite_merge_threshold")


@pytest.mark.parametrize("agent", ["ana", "ana/", "Ana/Reviewer"])
def test_a_verdict_comes_from_an_agent(hive: Hive, db_path: Path, agent: str) -> None:
    n = in_approval(hive)
    with unchanged(hive), refused(InvalidInput, "invalid_agent"):
        hive.verify(Caller.agent(agent, "desktop"), n)
    with unchanged(hive), refused(ForbiddenRight, "agent_only"):
        hive.verify(OWNER, n)


def test_an_amendment_must_change_something(hive: Hive, db_path: Path) -> None:
    n = in_approval(hive)
    with unchanged(hive), pytest.raises(InvalidInput):
        hive.amend(CODER, n)
    done = completed(hive)
    with unchanged(hive), pytest.raises(InvalidInput):
        hive.amend(CODER, done)
