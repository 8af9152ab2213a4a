"""Daily budgets per agent: tasks claimed, tokens and money (DESIGN §10, issue 16).

A day is counted in the store's time zone (policy ``timezone``, default UTC) from the
journal's claims (routed -> accepted by the agent) and the usage it reported (update and
submit with tokens or usd_micros). Over budget, a claim is ``429 rate_limited
daily_budget`` with ``retry_after_s`` to the next local midnight; a usage report is refused
only once a usage limit is used up (the report that crosses it is kept). Time moves with the
ManualClock only, and a refused call leaves every row as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hivelite import (
    Caller,
    ClaimReceipt,
    ForbiddenRight,
    Hive,
    InvalidInput,
    ManualClock,
    NotFound,
    RateLimited,
    State,
)
from hivelite.core.clock import format_ts, parse_ts
from hivelite.core.models import Budget

from .conftest import CODER, GUEST, OWNER, REVIEWER, Snap, own_task, refused
from .test_claims import EVIDENCE, fence

pytestmark = pytest.mark.contract

TESTER = Caller.agent("ana/tester", "laptop")
"""Another of the owner's agents, with a budget of its own (or none)."""




def set_clock(clock: ManualClock, when: str) -> None:
    """Put the manual clock at an instant (it moves only when told)."""
    clock.now = parse_ts(when)


def claimed(hive: Hive, caller: Caller = CODER) -> tuple[int, ClaimReceipt]:
    number = own_task(hive, assignee=caller.name)
    return number, hive.claim(caller, number)


def budget_of(hive: Hive, agent: str = CODER.name) -> Budget:
    [budget] = hive.budgets(agent)
    return budget


def over(err: Any, *, number: int | None, wait: int, resets_at: str, used_up: list[str],
         agent: str = CODER.name) -> None:
    """The refusal is a 429 daily_budget (exit code 7) carrying when to retry, naming the
    task it refused (none for ``next``, which names none)."""
    assert isinstance(err, RateLimited)
    assert (err.status, err.code, err.exit_code) == (429, "rate_limited", 7)
    named = {} if number is None else {"number": number}
    assert err.extra == {"retry_after_s": wait, "agent": agent, "resets_at": resets_at,
                         "used_up": used_up, **named}
    assert err.to_dict()["retry_after_s"] == wait


# -- setting, clearing, listing ------------------------------------------------------


def test_set_budget_answers_the_limits_todays_use_and_the_reset(hive: Hive) -> None:
    """Limits left out are no limits; what the agent already used today counts at once."""
    claimed(hive)
    budget = hive.set_budget(OWNER, CODER.name, tasks=2, usd_micros=5_000_000)
    assert budget.model_dump() == {
        "agent": CODER.name, "tasks": 2, "tokens": None, "usd_micros": 5_000_000,
        "day": "2026-12-02", "timezone": "UTC", "used_tasks": 1, "used_tokens": 0,
        "used_usd_micros": 0, "resets_at": "2026-12-03T00:00:00.000Z",
        "set_at": "2026-12-02T09:00:00.000Z", "set_by": "ana"}
    assert budget_of(hive) == budget
    row = hive.journal()[-1]
    assert (row.number, row.actor, row.reason) == (None, "ana", "budget")
    assert row.detail == {"agent": CODER.name, "tasks": 2, "tokens": None,
                          "usd_micros": 5_000_000}


def test_set_budget_replaces_the_whole_budget(hive: Hive, clock: ManualClock) -> None:
    """A second budget replaces the first: a limit it leaves out is gone."""
    hive.set_budget(OWNER, CODER.name, tasks=1, tokens=10)
    clock.advance(minutes=1)
    budget = hive.set_budget(OWNER, CODER.name, usd_micros=7)
    assert (budget.tasks, budget.tokens, budget.usd_micros) == (None, None, 7)
    assert budget.set_at == format_ts(clock())
    assert [b.agent for b in hive.budgets()] == [CODER.name]
    number = own_task(hive)
    assert hive.claim(CODER, number).number == number  # no task limit any more


BAD_LIMITS: dict[str, tuple[dict[str, Any], str, str]] = {
    "bool tasks": ({"tasks": True}, "invalid_budget", "tasks"),
    "float tasks": ({"tasks": 2.0}, "invalid_budget", "tasks"),
    "negative tasks": ({"tasks": -1}, "invalid_budget", "tasks"),
    "text tasks": ({"tasks": "2"}, "invalid_budget", "tasks"),
    "too many tasks": ({"tasks": 10**9 + 1}, "invalid_budget", "tasks"),
    "bool tokens": ({"tokens": False}, "invalid_budget", "tokens"),
    "float tokens": ({"tokens": 1.5}, "invalid_budget", "tokens"),
    "negative tokens": ({"tokens": -5}, "invalid_budget", "tokens"),
    "too many tokens": ({"tokens": 10**12 + 1}, "invalid_budget", "tokens"),
    "float money": ({"usd_micros": 0.5}, "invalid_budget", "usd_micros"),
    "negative money": ({"usd_micros": -1, "tasks": 3}, "invalid_budget", "usd_micros"),
    "no limit": ({}, "budget_required", "tasks"),
    "all none": ({"tasks": None, "tokens": None, "usd_micros": None}, "budget_required",
                 "tasks"),
}


@pytest.mark.parametrize(("limits", "reason", "field"), BAD_LIMITS.values(),
                         ids=BAD_LIMITS.keys())
def test_limits_are_whole_numbers_and_at_least_one_is_given(
        hive: Hive, snap: Snap, limits: dict[str, Any], reason: str, field: str) -> None:
    """422, naming the field; the budget already set stays."""
    hive.set_budget(OWNER, CODER.name, tasks=5)
    err = refused(snap, InvalidInput, reason, lambda: hive.set_budget(OWNER, CODER.name,
                                                                      **limits))
    assert err.extra["field"] == field
    assert budget_of(hive).tasks == 5


def test_the_largest_limits_are_taken(hive: Hive) -> None:
    """The bounds themselves are limits (so the refusals above are about going past them)."""
    budget = hive.set_budget(OWNER, CODER.name, tasks=10**9, tokens=10**12,
                             usd_micros=10**12)
    assert (budget.tasks, budget.tokens, budget.usd_micros) == (10**9, 10**12, 10**12)
    zero = hive.set_budget(OWNER, TESTER.name, tasks=0, tokens=0, usd_micros=0)
    assert (zero.tasks, zero.tokens, zero.usd_micros) == (0, 0, 0)


def test_a_budget_names_a_well_formed_agent(hive: Hive, snap: Snap) -> None:
    refused(snap, InvalidInput, "invalid_agent", lambda: hive.set_budget(OWNER, "coder",
                                                                         tasks=1))
    refused(snap, InvalidInput, "invalid_agent", lambda: hive.clear_budget(OWNER, "a/b/c"))


OWNER_VERBS: dict[str, Callable[[Hive, Caller], object]] = {
    "set": lambda h, c: h.set_budget(c, CODER.name, tasks=100),
    "set own": lambda h, c: h.set_budget(c, c.name, tasks=100),
    "clear": lambda h, c: h.clear_budget(c, CODER.name),
}


@pytest.mark.parametrize("call", OWNER_VERBS.values(), ids=OWNER_VERBS.keys())
@pytest.mark.parametrize("agent", [CODER, REVIEWER, GUEST], ids=["coder", "reviewer", "guest"])
def test_only_the_owner_sets_or_clears_a_budget(hive: Hive, snap: Snap,
                                                call: Callable[[Hive, Caller], object],
                                                agent: Caller) -> None:
    """An agent may not raise (or lift) its own or another's budget: 403 not_permitted."""
    hive.set_budget(OWNER, CODER.name, tasks=1)
    refused(snap, ForbiddenRight, "not_permitted", lambda: call(hive, agent))
    assert budget_of(hive).tasks == 1


def test_clear_budget_removes_it(hive: Hive, snap: Snap) -> None:
    """Cleared, the agent claims without limit; clearing again is 404 no_such_budget."""
    claimed(hive)
    hive.set_budget(OWNER, CODER.name, tasks=1)
    with pytest.raises(RateLimited):
        claimed(hive)
    assert hive.clear_budget(OWNER, CODER.name) is None  # type: ignore[func-returns-value]
    row = hive.journal()[-1]
    assert (row.number, row.actor, row.reason, row.detail) == (
        None, "ana", "budget", {"agent": CODER.name, "cleared": True})
    assert hive.budgets() == []
    claimed(hive)
    claimed(hive)
    refused(snap, NotFound, "no_such_budget", lambda: hive.clear_budget(OWNER, CODER.name))
    refused(snap, NotFound, "no_such_budget", lambda: hive.clear_budget(OWNER, TESTER.name))


def test_budgets_lists_each_and_shows_an_agent_with_none(hive: Hive) -> None:
    """Every budget, by agent; one agent with none is shown with no limits and today's
    use (not set by anyone)."""
    hive.set_budget(OWNER, TESTER.name, tokens=10)
    hive.set_budget(OWNER, CODER.name, tasks=3)
    assert [b.agent for b in hive.budgets()] == [CODER.name, TESTER.name]
    number, lease = claimed(hive, REVIEWER)
    hive.update(REVIEWER, number, **fence(lease), summary="spent", tokens=40, usd_micros=9)
    [none] = hive.budgets(REVIEWER.name)
    assert none.model_dump() == {
        "agent": REVIEWER.name, "tasks": None, "tokens": None, "usd_micros": None,
        "day": "2026-12-02", "timezone": "UTC", "used_tasks": 1, "used_tokens": 40,
        "used_usd_micros": 9, "resets_at": "2026-12-03T00:00:00.000Z", "set_at": None,
        "set_by": None}
    assert none.used_up == []
    assert [b.agent for b in hive.budgets()] == [CODER.name, TESTER.name]
    assert hive.budgets("ana/x")[0].used_tasks == 0


# -- counting a day ------------------------------------------------------------------


def test_a_day_counts_the_agents_claims_and_reported_usage(hive: Hive) -> None:
    """claim and next both count; a release and re-claim counts again; a resume does not
    (it is no routed -> accepted); usage from updates and submit adds up; another agent's
    work is its own."""
    first, lease = claimed(hive)
    hive.update(CODER, first, **fence(lease), summary="a", tokens=100, usd_micros=20)
    hive.update(CODER, first, **fence(lease), summary="no usage")
    hive.pause(CODER, first, **fence(lease), on="human", reason="asking")
    resumed = hive.resume(CODER, first)
    hive.submit(CODER, first, **fence(resumed), summary="done", evidence=EVIDENCE,
                tokens=5, usd_micros=1)
    second = own_task(hive)
    again = hive.claim_next(CODER)
    assert again.number == second
    hive.release(CODER, second, **fence(again))
    hive.claim(CODER, second)
    claimed(hive, TESTER)
    budget = budget_of(hive)
    assert (budget.used_tasks, budget.used_tokens, budget.used_usd_micros) == (3, 105, 21)
    assert budget_of(hive, TESTER.name).used_tasks == 1


def test_yesterdays_work_does_not_count_today(hive: Hive, clock: ManualClock) -> None:
    """A new day starts from nothing."""
    number, lease = claimed(hive)
    hive.update(CODER, number, **fence(lease), summary="a", tokens=100)
    hive.set_budget(OWNER, CODER.name, tasks=1, tokens=100)
    assert budget_of(hive).used_up == ["tasks", "tokens"]
    set_clock(clock, "2026-12-03T00:00:00.000Z")
    budget = budget_of(hive)
    assert (budget.day, budget.used_tasks, budget.used_tokens) == ("2026-12-03", 0, 0)
    assert budget.resets_at == "2026-12-04T00:00:00.000Z"


# -- over budget: claims -------------------------------------------------------------


CLAIMS: dict[str, Callable[[Hive, int, int], object]] = {
    "claim": lambda h, routed, waiting: h.claim(CODER, routed),
    "next": lambda h, routed, waiting: h.claim_next(CODER),
    "resume": lambda h, routed, waiting: h.resume(CODER, waiting),
}


@pytest.mark.parametrize("call", CLAIMS.values(), ids=CLAIMS.keys())
def test_a_claim_over_the_task_budget_is_rate_limited(
        hive: Hive, snap: Snap, call: Callable[[Hive, int, int], object]) -> None:
    """Two claims used of two: claim, next and resume are 429 daily_budget, with the whole
    seconds to midnight UTC (09:00 -> 15 h) and nothing written."""
    waiting, lease = claimed(hive)
    hive.pause(CODER, waiting, **fence(lease), on="agent", reason="asking the planner")
    claimed(hive)
    routed = own_task(hive)
    hive.set_budget(OWNER, CODER.name, tasks=2)
    err = refused(snap, RateLimited, "daily_budget", lambda: call(hive, routed, waiting))
    named = {"claim": routed, "next": None, "resume": waiting}
    over(err, number=named[next(k for k, v in CLAIMS.items() if v is call)],
         wait=15 * 3600, resets_at="2026-12-03T00:00:00.000Z", used_up=["tasks"])


def test_a_claim_under_the_budget_goes_through_until_it_is_used(hive: Hive,
                                                                snap: Snap) -> None:
    """used < limit claims; the claim that reaches the limit is the last."""
    hive.set_budget(OWNER, CODER.name, tasks=2)
    claimed(hive)
    claimed(hive)
    assert budget_of(hive).used_up == ["tasks"]
    number = own_task(hive)
    refused(snap, RateLimited, "daily_budget", lambda: hive.claim(CODER, number))


def test_a_zero_budget_refuses_the_first_claim(hive: Hive, snap: Snap) -> None:
    number = own_task(hive)
    hive.set_budget(OWNER, CODER.name, tasks=0)
    err = refused(snap, RateLimited, "daily_budget", lambda: hive.claim(CODER, number))
    assert err.extra["used_up"] == ["tasks"]


def test_a_used_up_usage_limit_refuses_claims_too(hive: Hive, snap: Snap) -> None:
    """An agent out of tokens (or money) takes no new work today."""
    number, lease = claimed(hive)
    hive.update(CODER, number, **fence(lease), summary="a", tokens=10, usd_micros=10)
    hive.set_budget(OWNER, CODER.name, tasks=100, tokens=10, usd_micros=10)
    routed = own_task(hive)
    err = refused(snap, RateLimited, "daily_budget", lambda: hive.claim(CODER, routed))
    over(err, number=routed, wait=15 * 3600, resets_at="2026-12-03T00:00:00.000Z",
         used_up=["tokens", "usd_micros"])


def test_one_agents_budget_binds_no_other(hive: Hive) -> None:
    hive.set_budget(OWNER, CODER.name, tasks=0)
    number, _ = claimed(hive, TESTER)
    assert hive.get(number).task.state is State.accepted


def test_a_budget_refusal_names_the_agent_and_the_reset(hive: Hive) -> None:
    """The message says what was used of what, and when it resets."""
    claimed(hive)
    hive.set_budget(OWNER, CODER.name, tasks=1)
    with pytest.raises(RateLimited) as info:
        claimed(hive)
    assert "1 of 1 task(s) claimed" in info.value.message
    assert "2026-12-03T00:00:00.000Z" in info.value.message


# -- retry_after_s runs down with the clock ------------------------------------------


def test_retry_after_reaches_zero_at_the_reset(hive: Hive, snap: Snap,
                                               clock: ManualClock) -> None:
    """Issue 16, done when: a budget refusal carries retry_after_s that reaches 0 at the
    reset (moved with the clock, not by sleeping): it shrinks as the clock moves, a part of
    a second left is rounded up to 1, and at the reset instant the claim succeeds."""
    hive.set_budget(OWNER, CODER.name, tasks=1)
    claimed(hive)
    number = own_task(hive)
    reset = "2026-12-03T00:00:00.000Z"

    def wait() -> int:
        err = refused(snap, RateLimited, "daily_budget", lambda: hive.claim(CODER, number))
        assert err.extra["resets_at"] == reset
        return int(err.extra["retry_after_s"])

    seen = [wait()]
    for hours in (6, 8, 0.75):
        clock.advance(hours=hours)
        seen.append(wait())
    assert seen == [54000, 32400, 3600, 900]
    set_clock(clock, "2026-12-02T23:59:59.000Z")
    assert wait() == 1
    set_clock(clock, "2026-12-02T23:59:59.999Z")
    assert wait() == 1
    set_clock(clock, reset)
    lease = hive.claim(CODER, number)
    assert (lease.number, lease.at) == (number, reset)
    budget = budget_of(hive)
    assert (budget.day, budget.used_tasks, budget.resets_at) == (
        "2026-12-03", 1, "2026-12-04T00:00:00.000Z")


# -- the store's time zone -----------------------------------------------------------


ZONES = {
    "UTC winter": (None, "2026-12-02T09:00:00.000Z", "2026-12-03T00:00:00.000Z", 54000,
                   "2026-12-02"),
    "Berlin winter": ("Europe/Berlin", "2026-12-02T09:00:00.000Z",
                      "2026-12-02T23:00:00.000Z", 50400, "2026-12-02"),
    "Berlin summer": ("Europe/Berlin", "2026-07-01T09:00:00.000Z",
                      "2026-07-01T22:00:00.000Z", 46800, "2026-07-01"),
    "Berlin late evening": ("Europe/Berlin", "2026-12-02T23:30:00.000Z",
                            "2026-12-03T23:00:00.000Z", 84600, "2026-12-03"),
    "New York": ("America/New_York", "2026-12-02T03:00:00.000Z",
                 "2026-12-02T05:00:00.000Z", 7200, "2026-12-01"),
    "Tokyo": ("Asia/Tokyo", "2026-12-02T09:00:00.000Z", "2026-12-02T15:00:00.000Z", 21600,
              "2026-12-02"),
}


@pytest.mark.parametrize(("timezone", "now", "reset", "wait", "day"), ZONES.values(),
                         ids=ZONES.keys())
def test_the_day_resets_at_local_midnight(hive: Hive, snap: Snap, clock: ManualClock,
                                          timezone: str | None, now: str, reset: str,
                                          wait: int, day: str) -> None:
    """The reset is the next midnight in the store's time zone (Berlin's winter midnight is
    23:00 UTC, its summer one 22:00 UTC); one millisecond before it the claim is still
    refused, at it the claim succeeds."""
    if timezone is not None:
        hive.set_policy(OWNER, "timezone", timezone)
    set_clock(clock, now)
    hive.set_budget(OWNER, CODER.name, tasks=1)
    claimed(hive)
    budget = budget_of(hive)
    assert (budget.timezone, budget.day, budget.resets_at) == (timezone or "UTC", day, reset)
    number = own_task(hive)
    err = refused(snap, RateLimited, "daily_budget", lambda: hive.claim(CODER, number))
    over(err, number=number, wait=wait, resets_at=reset, used_up=["tasks"])
    set_clock(clock, reset)
    clock.advance(milliseconds=-1)
    refused(snap, RateLimited, "daily_budget", lambda: hive.claim(CODER, number))
    clock.advance(milliseconds=1)
    assert hive.claim(CODER, number).at == reset


BOUNDARY = {
    # a claim at 23:30 UTC on Dec 1 is 00:30 on Dec 2 in Berlin
    "UTC, claimed the evening before": (None, "2026-12-01T23:30:00.000Z", 0),
    "Berlin, claimed just after its midnight": ("Europe/Berlin", "2026-12-01T23:30:00.000Z",
                                                1),
    "Berlin, claimed just before its midnight": ("Europe/Berlin",
                                                 "2026-12-01T22:59:59.999Z", 0),
    "UTC, claimed at its midnight": (None, "2026-12-02T00:00:00.000Z", 1),
}


@pytest.mark.parametrize(("timezone", "claimed_at", "counted"), BOUNDARY.values(),
                         ids=BOUNDARY.keys())
def test_a_claim_counts_on_the_local_day_it_was_made(
        hive: Hive, clock: ManualClock, timezone: str | None, claimed_at: str,
        counted: int) -> None:
    """Counted by the store's time zone, not by UTC: what counts on Dec 2 at 09:00 UTC."""
    if timezone is not None:
        hive.set_policy(OWNER, "timezone", timezone)
    set_clock(clock, claimed_at)
    claimed(hive)
    set_clock(clock, "2026-12-02T09:00:00.000Z")
    assert budget_of(hive).used_tasks == counted
    hive.set_budget(OWNER, CODER.name, tasks=1)
    number = own_task(hive)
    if counted:
        with pytest.raises(RateLimited):
            hive.claim(CODER, number)
    else:
        assert hive.claim(CODER, number).number == number


def test_changing_the_time_zone_moves_the_reset(hive: Hive, snap: Snap) -> None:
    """The budget follows the policy as it is now: the refusal's reset moves with it."""
    hive.set_budget(OWNER, CODER.name, tasks=1)
    claimed(hive)
    number = own_task(hive)
    err = refused(snap, RateLimited, "daily_budget", lambda: hive.claim(CODER, number))
    assert err.extra["resets_at"] == "2026-12-03T00:00:00.000Z"
    hive.set_policy(OWNER, "timezone", "Asia/Tokyo")
    err = refused(snap, RateLimited, "daily_budget", lambda: hive.claim(CODER, number))
    assert (err.extra["resets_at"], err.extra["retry_after_s"]) == (
        "2026-12-02T15:00:00.000Z", 6 * 3600)


# -- over budget: usage reports ------------------------------------------------------


def _update_tokens(h: Hive, n: int, lease: ClaimReceipt) -> object:
    return h.update(CODER, n, **fence(lease), summary="more", tokens=1)


def _update_money(h: Hive, n: int, lease: ClaimReceipt) -> object:
    return h.update(CODER, n, **fence(lease), summary="more", usd_micros=1)


def _submit_tokens(h: Hive, n: int, lease: ClaimReceipt) -> object:
    return h.submit(CODER, n, **fence(lease), summary="done", evidence=EVIDENCE, tokens=1)


def _submit_zero(h: Hive, n: int, lease: ClaimReceipt) -> object:
    return h.submit(CODER, n, **fence(lease), summary="done", evidence=EVIDENCE,
                    usd_micros=0)


USAGE_WRITES = {"update tokens": _update_tokens, "update money": _update_money,
                "submit tokens": _submit_tokens, "submit zero money": _submit_zero}


@pytest.mark.parametrize("limit", ["tokens", "usd_micros"])
@pytest.mark.parametrize("write", USAGE_WRITES.values(), ids=USAGE_WRITES.keys())
def test_the_report_that_crosses_a_usage_limit_is_kept_and_the_next_refused(
        hive: Hive, snap: Snap, limit: str,
        write: Callable[[Hive, int, ClaimReceipt], object]) -> None:
    """60 + 60 of 100: the second report crosses the limit and is kept (used 120); any
    later report with usage is 429 and writes nothing."""
    number, lease = claimed(hive)
    hive.set_budget(OWNER, CODER.name, **{limit: 100})
    spent: dict[str, Any] = {**fence(lease), limit: 60}
    hive.update(CODER, number, summary="first", **spent)
    hive.update(CODER, number, summary="second", **spent)
    budget = budget_of(hive)
    assert getattr(budget, f"used_{limit}") == 120
    assert budget.used_up == [limit]
    err = refused(snap, RateLimited, "daily_budget", lambda: write(hive, number, lease))
    over(err, number=number, wait=15 * 3600, resets_at="2026-12-03T00:00:00.000Z",
         used_up=[limit])
    assert hive.get(number).task.state is State.working


def test_reports_without_usage_go_on_over_budget(hive: Hive) -> None:
    """Out of tokens, the holder still checkpoints, updates without usage and submits
    without usage: the budget refuses spending, not finishing."""
    number, lease = claimed(hive)
    hive.set_budget(OWNER, CODER.name, tokens=10)
    hive.update(CODER, number, **fence(lease), summary="spent", tokens=10)
    hive.checkpoint(CODER, number, **fence(lease), progress="nearly there")
    hive.update(CODER, number, **fence(lease), summary="no usage")
    hive.renew(CODER, number, **fence(lease))
    receipt = hive.submit(CODER, number, **fence(lease), summary="done", evidence=EVIDENCE)
    assert receipt.state is State.approval


def test_a_task_budget_never_refuses_usage_reports(hive: Hive) -> None:
    """With only a task limit, used up, usage is still reported on the claim in hand."""
    number, lease = claimed(hive)
    hive.set_budget(OWNER, CODER.name, tasks=1)
    assert budget_of(hive).used_up == ["tasks"]
    for _ in range(3):
        hive.update(CODER, number, **fence(lease), summary="spent", tokens=10**6,
                    usd_micros=10**6)
    receipt = hive.submit(CODER, number, **fence(lease), summary="done", evidence=EVIDENCE,
                          tokens=5, usd_micros=5)
    assert receipt.state is State.approval
    budget = budget_of(hive)
    assert (budget.used_tokens, budget.used_usd_micros) == (3 * 10**6 + 5, 3 * 10**6 + 5)


def test_a_money_limit_left_does_not_free_tokens(hive: Hive, snap: Snap) -> None:
    """Either usage limit used up refuses every usage report, even one of the other kind."""
    number, lease = claimed(hive)
    hive.set_budget(OWNER, CODER.name, tokens=5, usd_micros=10**6)
    hive.update(CODER, number, **fence(lease), summary="spent", tokens=5)
    err = refused(snap, RateLimited, "daily_budget", lambda: _update_money(hive, number, lease))
    assert err.extra["used_up"] == ["tokens"]


def test_usage_over_budget_resets_with_the_day(hive: Hive, snap: Snap,
                                               clock: ManualClock) -> None:
    """A report refused late in the day goes through at the reset, on the same claim."""
    set_clock(clock, "2026-12-02T23:50:00.000Z")
    number = own_task(hive)
    lease = hive.claim(CODER, number, minutes=15)
    hive.set_budget(OWNER, CODER.name, tokens=5)
    hive.update(CODER, number, **fence(lease), summary="spent", tokens=5)
    clock.advance(minutes=5)
    err = refused(snap, RateLimited, "daily_budget",
                  lambda: _update_tokens(hive, number, lease))
    assert err.extra["retry_after_s"] == 300
    clock.advance(minutes=5)
    _update_tokens(hive, number, lease)
    budget = budget_of(hive)
    assert (budget.day, budget.used_tokens) == ("2026-12-03", 1)
