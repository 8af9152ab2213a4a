"""A budgeted agent's claims as their statements (issue 47, item 1), on both engines: the
day's budget is read and charged in the statement's own transaction, the claim counted by
its own write; over the budget, the claim is refused as the full run refuses it, nothing
written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hivelite import Hive, ManualClock

from .both_ways import refusals_both_ways, written_both_ways
from .conftest import CODER, OWNER, OpenHive, own_task
from .test_statements import EVIDENCE

pytestmark = pytest.mark.contract


def scenario(hive: Hive) -> Any:
    """Two claims and a resume of a budget of three tasks a day, then the budget as the
    owner reads it."""
    hive.set_budget(OWNER, CODER.name, tasks=3)
    numbers = [own_task(hive) for _ in range(3)]
    first = hive.claim_next(CODER)
    fence = {"lease_id": first.lease_id, "token": first.fencing_token}
    hive.submit(CODER, first.number, summary="done", evidence=EVIDENCE, **fence)
    second = hive.claim(CODER, numbers[1])
    hive.pause(CODER, numbers[1], lease_id=second.lease_id, token=second.fencing_token,
               on="human", reason="which one?")
    hive.answer(OWNER, numbers[1], text="the first")
    hive.resume(CODER, numbers[1])
    (budget,) = hive.budgets(CODER.name)
    return (budget.used_tasks, budget.used_up,
            [(e.seq, e.number, e.from_state, e.to_state, e.actor, e.reason)
             for e in hive.journal()])


@pytest.mark.parametrize("verb", ["next", "claim", "resume"])
def test_a_budgeted_agent_s_claims_are_their_statements(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        verb: str) -> None:
    written, ran = written_both_ways(open_hive, tmp_path, scenario, monkeypatch, verb)
    assert ran == [0, 1]
    used, used_up, _ = written
    assert (used, used_up) == (2, [])  # (a resumption is no new claim of the day)


def over(hive: Hive) -> dict[str, Callable[[], Any]]:
    """An agent that claimed its day's one task."""
    hive.set_budget(OWNER, CODER.name, tasks=1)
    first, second = own_task(hive), own_task(hive)
    hive.claim(CODER, first)
    return {"claim over the budget": lambda: hive.claim(CODER, second),
            "next over the budget": lambda: hive.claim_next(CODER)}


def test_a_claim_over_the_budget_is_refused_as_the_full_run_refuses_it(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, over)
    assert {reason for _, reason, _ in said.values()} == {"daily_budget"}


def test_the_day_s_count_starts_again_the_next_day(open_hive: OpenHive) -> None:
    clock = ManualClock("2026-12-02T23:59:00.000Z")
    hive = open_hive(clock=clock)
    hive.set_budget(OWNER, CODER.name, tasks=1)
    first, second = own_task(hive), own_task(hive)
    hive.claim(CODER, first)
    clock.advance(minutes=2)  # (the store's time zone: UTC)
    hive.claim(CODER, second)
    assert hive.budgets(CODER.name)[0].used_tasks == 1


def reported(hive: Hive) -> Any:
    """Usage reported with an update and with a submission, under a token budget."""
    hive.set_budget(OWNER, CODER.name, tokens=1000)
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    hive.update(CODER, number, summary="half", tokens=400, **fence)
    hive.submit(CODER, number, summary="done", evidence=EVIDENCE, tokens=300,
                usd_micros=5, **fence)
    (budget,) = hive.budgets(CODER.name)
    view = hive.get(number)
    return (budget.used_tokens, budget.used_usd_micros, view.usage.tokens,
            [(u.summary, u.tokens) for u in view.updates],
            [(e.seq, e.from_state, e.to_state, e.actor, e.reason) for e in hive.journal()])


@pytest.mark.parametrize("verb", ["update", "submit"])
def test_usage_reported_is_charged_by_the_statement(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        verb: str) -> None:
    written, ran = written_both_ways(open_hive, tmp_path, reported, monkeypatch, verb)
    assert ran == [0, 1]
    assert written[:3] == (700, 5, 700)


def spent(hive: Hive) -> dict[str, Callable[[], Any]]:
    """An agent whose usage crossed its day's token budget (the report that crossed it
    was kept), still holding a claim."""
    hive.set_budget(OWNER, CODER.name, tokens=100)
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    hive.update(CODER, number, summary="a lot", tokens=150, **fence)
    return {"a report after the budget was crossed": lambda: hive.update(
                CODER, number, summary="more", tokens=1, **fence),
            "a submission reporting usage after it": lambda: hive.submit(
                CODER, number, summary="done", evidence=EVIDENCE, tokens=1, **fence)}


def test_usage_over_the_budget_is_refused_as_the_full_run_refuses_it(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, spent)
    assert {reason for _, reason, _ in said.values()} == {"daily_budget"}
