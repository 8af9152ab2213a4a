"""``hivelite demo``: the whole flow on a real store, printed step by step.

One owner; a planner, a coder working on the ``laptop`` instance, and a
reviewer on the ``desktop``. The story moves its own clock (a claim has to expire), starting
after the newest journal row, so it runs as often as you like on one store.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from ..core.caller import Caller
from ..core.clock import ManualClock, format_ts, parse_ts
from ..core.errors import HiveliteError, InvalidInput
from ..core.models import ClaimReceipt, Receipt
from ..hive import Hive
from .render import journal_table

Echo = Callable[[str], None] | None


STORY_MINUTES = 40


def demo_clock(hive: Hive) -> ManualClock:
    """A clock that starts the story 40 minutes ago (so it ends about now), or just after
    the store's newest journal row if that is later."""
    now = hive.clock()
    with hive.store.read() as reader:
        newest = reader.journal_tail()
    try:
        start = now - timedelta(minutes=STORY_MINUTES)
        if newest is not None:
            start = max(start, parse_ts(newest) + timedelta(seconds=1))
        start + timedelta(minutes=2 * STORY_MINUTES)  # the story, and how far it may run
    except OverflowError:
        raise InvalidInput("time_out_of_range", f"the demo's story takes {STORY_MINUTES}"
                           f" minutes around {format_ts(now)}, which runs outside the years"
                           " 1 to 9999; check the clock ($HIVELITE_NOW)", field="now"
                           ) from None
    return ManualClock(start)


def run_demo(hive: Hive, echo: Echo = print) -> list[dict[str, Any]]:
    """Play the story on ``hive`` (whose clock it replaces); returns each step as a dict."""
    real_now = hive.clock()
    clock = demo_clock(hive)
    hive.clock = clock
    ahead = clock() + timedelta(minutes=STORY_MINUTES) - real_now
    owner = hive.owner
    planner, coder, reviewer = f"{owner}/planner", f"{owner}/coder", f"{owner}/reviewer"
    guest = "guest/scout" if owner != "guest" else "visitor/scout"
    steps: list[dict[str, Any]] = []

    def say(text: str) -> None:
        if echo:
            echo(text)

    def step(title: str, receipt: Receipt) -> Receipt:
        view = hive.get(receipt.number)
        state = view.task.state.value
        if view.task.waiting_on:
            state += f"({view.task.waiting_on.value})"
        steps.append({"step": title, "at": format_ts(clock()), "number": view.number,
                      "id": view.task.id, "state": view.task.state.value,
                      "waiting_on": view.task.waiting_on, "reason": view.last_reason})
        say(f"• {title}\n    task {view.number} is {state}: {view.last_reason}")
        return receipt

    def leased(title: str, lease: ClaimReceipt) -> ClaimReceipt:
        steps.append({"step": title, "at": format_ts(clock()), "number": lease.number,
                      "id": lease.id, "state": lease.state.value,
                      "fencing_token": lease.fencing_token, "expires_at": lease.expires_at})
        say(f"• {title}\n    task {lease.number} is {lease.state.value}: lease"
            f" {lease.lease_id}, fencing token {lease.fencing_token},"
            f" expires {lease.expires_at}")
        return lease

    def refused(title: str, error: HiveliteError, number: int) -> None:
        steps.append({"step": title, "at": format_ts(clock()), "number": number,
                      "error": error.to_dict()})
        say(f"• {title}\n    refused: {error.code}/{error.reason}: {error.message}")

    me = hive.as_owner()
    as_planner = Caller.agent(planner, "desktop")
    as_guest = Caller.agent(guest, "elsewhere")
    say(f"hivelite demo on {hive.path or hive.store.location} (owner {owner})")
    if ahead > timedelta(minutes=1):
        say(f"(this store's journal already reaches past now: the story's clock runs"
            f" {int(ahead.total_seconds() // 60)} minutes ahead of yours)")
    say("")

    # 1. A handoff between the owner's own agents: the gate routes it.
    task = step(
        f"{planner} hands a coding task to {coder}; the gate routes it",
        hive.handoff(as_planner, requester=planner, assignee=coder, project="demo",
                     packet={"task": "Add input validation to the signup form",
                             "deliverable_type": "code",
                             "acceptance_criteria": ["invalid emails are refused",
                                                     "the test suite passes"],
                             "files": ["app/signup.py"]}))
    number = task.number

    # 2. A request from someone else's agent: held, then approved by the owner.
    held = step(
        f"{guest}, someone else's agent, asks {coder} for a review; the gate holds it",
        hive.handoff(as_guest, requester=guest, assignee=coder, project="demo",
                     packet={"task": "Review the public API documentation",
                             "deliverable_type": "doc",
                             "acceptance_criteria": ["every verb is covered"]}))
    step(f"{owner} approves the held request", hive.approve(me, held.number, reason="fine by me"))

    # 3. The coder claims on the laptop and checkpoints.
    morning = Caller.agent(coder, "laptop", "morning")
    afternoon = Caller.agent(coder, "laptop", "afternoon")
    first = leased(f"{coder} claims task {number} on the laptop",
                   hive.claim(morning, number))
    clock.advance(minutes=3)
    step(f"{coder} checkpoints",
         hive.checkpoint(morning, number, lease_id=first.lease_id, token=first.fencing_token,
                         progress="validation rules drafted",
                         next_steps=["wire the rules into the form", "write tests"]))

    # 4. The coder goes quiet; the lease runs out; its late write is refused.
    clock.advance(minutes=11)
    try:
        hive.update(morning, number, lease_id=first.lease_id, token=first.fencing_token,
                    summary="still on it")
    except HiveliteError as error:
        refused(f"11 minutes later the stale holder writes with token {first.fencing_token}",
                error, number)
    for gone in hive.expire(me):
        say(f"• the clock ends {gone.holder}'s claim on task {gone.number}"
            f" ({gone.from_state.value} -> routed)")
    step("the task is open again; its checkpoint is kept", task)

    # 5. A fresh claim (a new token), a result with evidence.
    second = leased(f"{coder} claims again (new session)",
                    hive.claim(afternoon, number))
    clock.advance(minutes=4)
    submitted = step(
        f"{coder} submits a result with evidence",
        hive.submit(afternoon, number, lease_id=second.lease_id, token=second.fencing_token,
                    summary="Signup now refuses malformed emails; 14 tests added.",
                    evidence=[{"kind": "test_output", "summary": "42 passed in 1.3s"},
                              {"kind": "commit", "summary": "add email validation"}],
                    tokens=18_400, usd_micros=92_000))

    # 6. The same instance may not confirm; a reviewer on the desktop does.
    try:
        hive.verify(Caller.agent(f"{owner}/helper", "laptop"), number, verdict="accept")
    except HiveliteError as error:
        refused("an agent on the claiming laptop tries to confirm", error, number)
    for k in range(hive.get(submitted.number).threshold or 0):
        clock.advance(minutes=2)
        who = reviewer if k == 0 else f"{owner}/reviewer-{k + 1}"
        where = "desktop" if k == 0 else f"desktop-{k + 1}"
        confirmed = step(f"{who} on the {where} confirms",
                         hive.verify(Caller.agent(who, where), number, verdict="accept"))
        if confirmed.state.value == "completed":
            break
    else:
        if hive.get(number).task.state.value == "approval":  # a policy wants more
            clock.advance(minutes=1)
            step(f"{owner} signs the result off", hive.sign_off(me, number, reason="looks right"))

    # 7. The approved request: a failed attempt, then the owner cancels it.
    attempt = leased(f"{coder} claims task {held.number}",
                     hive.claim(afternoon, held.number))
    clock.advance(minutes=5)
    step(f"{coder} reports a failed attempt; the task is routed again",
         hive.submit(afternoon, held.number, lease_id=attempt.lease_id, token=attempt.fencing_token,
                     summary="The documentation site is unreachable from here.",
                     evidence=[{"kind": "note", "summary": "HTTP 503 on every page"}],
                     outcome="failed"))
    step(f"{owner} cancels it", hive.cancel(me, held.number, reason="docs are being rewritten"))

    # 8. The owner's controls: a stop mid-claim is a kill switch; a daily budget a limit.
    chore = step(f"{planner} hands {coder} another task",
                 hive.handoff(as_planner, requester=planner, assignee=coder, project="demo",
                              packet={"task": "Tidy the changelog for the release",
                                      "deliverable_type": "doc",
                                      "acceptance_criteria": ["one line per change"]}))
    third = leased(f"{coder} claims task {chore.number}", hive.claim(afternoon, chore.number))
    clock.advance(minutes=2)
    stop = hive.stop(me, agent=coder, reason="the demo pulls the kill switch")
    say(f"• {owner} stops {coder}: its claim on task(s)"
        f" {', '.join(map(str, stop.ended))} ends, as expiry would end it")
    steps.append({"step": f"{owner} stops {coder}", "at": format_ts(clock()),
                  "number": chore.number, "control": stop.id, "ended": stop.ended})
    try:
        hive.update(afternoon, chore.number, lease_id=third.lease_id,
                    token=third.fencing_token, summary="still tidying")
    except HiveliteError as error:
        refused(f"{coder} writes under its old claim", error, chore.number)
    hive.lift(me, stop.id, reason="the demo goes on")
    say(f"• {owner} lifts the stop")
    used = hive.budgets(coder)[0].used_tasks
    hive.set_budget(me, coder, tasks=used)
    say(f"• {owner} gives {coder} a daily budget of {used} claimed task(s): all used today")
    try:
        hive.claim(afternoon, chore.number)
    except HiveliteError as error:
        refused(f"{coder} claims task {chore.number} again", error, chore.number)
    hive.clear_budget(me, coder)
    step(f"{owner} clears the budget; the task waits for its next claim",
         chore)

    say(f"\njournal of task {number}:\n" + journal_table(hive.history(number)))
    return steps
