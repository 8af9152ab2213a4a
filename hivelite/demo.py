"""``hivelite demo``: a short story on a real store, printed step by step.

It names everything after the store's owner, so it runs on any store, and
as often as you like (each run adds its own tasks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .hive import Hive
from .models import TaskView
from .render import journal_table

Echo = Callable[[str], None] | None


def run_demo(hive: Hive, echo: Echo = print) -> list[dict[str, Any]]:
    """Play the story; returns each step as a plain dict (what ``--json`` prints)."""
    owner = hive.owner
    planner, coder = f"{owner}/planner", f"{owner}/coder"
    guest = "guest/scout" if owner != "guest" else "visitor/scout"
    steps: list[dict[str, Any]] = []

    def step(title: str, view: TaskView) -> TaskView:
        state = view.task.state.value
        if view.task.waiting_on:
            state += f"({view.task.waiting_on.value})"
        steps.append({"step": title, "number": view.number, "id": view.task.id,
                      "state": view.task.state.value, "waiting_on": view.task.waiting_on,
                      "reason": view.last_reason})
        if echo:
            echo(f"• {title}\n    task {view.number} is {state}: {view.last_reason}")
        return view

    if echo:
        echo(f"hivelite demo on {hive.store.path} (owner {owner})\n")
    routed = step(
        f"{planner} hands a coding task to {coder}; the gate routes it",
        hive.handoff(requester=planner, assignee=coder, project="demo",
                     packet={"task": "Add input validation to the signup form",
                             "deliverable_type": "code",
                             "acceptance_criteria": ["invalid emails are refused",
                                                     "tests pass"]}),
    )
    held = step(
        f"{guest}, an agent of someone else, asks {coder} for help; the gate holds it",
        hive.handoff(requester=guest, assignee=coder, project="demo",
                     packet={"task": "Review the public API docs",
                             "deliverable_type": "doc",
                             "acceptance_criteria": ["every verb is covered"]}),
    )
    step(f"{owner} approves the held request", hive.approve(held.number,
                                                           reason="fine by me"))
    step(f"{owner} cancels the first task", hive.cancel(routed.number,
                                                       reason="superseded"))
    if echo:
        echo("\njournal of the held task:\n" + journal_table(hive.history(held.number)))
    return steps
