"""The owner's decisions on the board: a form per verb of the verb table, posted back to
the board and run through that verb like the same decision from the CLI or HTTP.

Every form carries the page's form token (a cross-site page can neither read it nor
send the board's cookie), a request id made when the page was drawn (a second click or
a resent form gets the first answer, never a second decision), and, on a task, the
newest journal row of the task the owner looked at: a task that changed since is
refused as a stale view, so a sign-off never lands on a result amended after the owner
read it. A decision
that cannot be undone sits behind a second button that says so.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from urllib.parse import quote

from ...core.models import Control, TaskView
from ...core.protocol import CANCELLABLE, State, WaitingOn
from ...verbs.table import BY_NAME, Verb

ON_TASK: tuple[str, ...] = ("approve", "deny", "sign_off", "decline", "answer", "cancel")
ON_AGENT: tuple[str, ...] = ("hold", "stop", "lift")
DONE = {"approve": "approved", "deny": "denied", "sign_off": "signed off",
        "decline": "declined", "answer": "answered", "cancel": "cancelled",
        "hold": "held", "stop": "stopped", "lift": "lifted"}
"""What the board says once a decision went through."""
FOR_GOOD = frozenset({"deny", "sign_off", "cancel"})
"""Decisions no verb undoes: each asks for a second, explicit click."""
FIELDS = ("reason", "text", "agent", "control")
"""The form fields a decision may carry into its verb's input (the rest are the form's)."""
assert set(DONE) == {*ON_TASK, *ON_AGENT}


def verb_of(name: str, *, on_task: bool) -> Verb | None:
    """The verb a board path names (``sign-off``), if the board offers it there."""
    spelled = name.replace("-", "_")
    offered = ON_TASK if on_task else ON_AGENT
    return BY_NAME[spelled] if spelled in offered else None


def fields_of(verb: Verb, form: Mapping[str, Sequence[str]]) -> dict[str, object]:
    """The verb's input from a posted form: blank fields left out (the verb's input then
    says what is missing), a control's id as the number it is."""
    found: dict[str, object] = {}
    for name in FIELDS:
        value = (form.get(name) or [""])[0].strip()
        if value and name in verb.input.model_fields:
            found[name] = (int(value) if name == "control" and value.isascii()
                           and value.isdigit() and len(value) < 20 else value)
    return found


def e(text: object) -> str:
    return escape(str(text), quote=True)


@dataclass(frozen=True)
class Forms:
    """What each form of one page carries: where decisions go and the page's form token."""

    base: str
    """The vault's board (``/board/{vault_id}``)."""
    token: str

    def _form(self, action: str, verb: str, inner: str, button: str, *,
              seen: str | None = None, danger: bool = False) -> str:
        hidden = (f'<input type="hidden" name="form" value="{e(self.token)}">'
                  f'<input type="hidden" name="request" value="board-{secrets.token_hex(12)}">'
                  + (f'<input type="hidden" name="seen" value="{e(seen)}">' if seen else ""))
        style = ' class="danger"' if danger else ""
        return (f'<form method="post" action="{e(action)}" class="decide" data-verb="{verb}">'
                f'{hidden}{inner}<button type="submit"{style}>{e(button)}</button></form>')

    def _task_form(self, view: TaskView, seen: int, verb: str, inner: str, button: str,
                   danger: bool = False) -> str:
        action = f"{self.base}/tasks/{view.number}/{verb.replace('_', '-')}"
        return self._form(action, verb, inner, button, seen=str(seen), danger=danger)

    def _decision(self, view: TaskView, seen: int, verb: str, inner: str,
                  button: str) -> str:
        """One decision's form; one for good opens at a first click, and a second (on a
        button that says so) decides."""
        if verb not in FOR_GOOD:
            return self._task_form(view, seen, verb, inner, button)
        label = BY_NAME[verb].words.capitalize() + "…"
        return (f'<details class="confirm" data-verb="{verb}"><summary>{e(label)}</summary>'
                + self._task_form(view, seen, verb, inner, button, danger=True)
                + "</details>")

    def on_task(self, view: TaskView, seen: int) -> str:
        """The decisions the owner can make on ``view`` as it stands (``seen``: the task's
        newest journal row on the page)."""
        task, n = view.task, view.number
        reason = ('<input type="text" name="reason" maxlength="500"'
                  ' placeholder="reason (optional)" aria-label="reason">')
        parts: list[str] = []
        if task.state is State.waiting and task.waiting_on is WaitingOn.owner_approval:
            parts.append(self._decision(view, seen, "approve", reason, f"Approve #{n}"))
            parts.append(self._decision(view, seen, "deny", reason, f"Deny #{n} for good"))
        if task.state is State.approval:
            parts.append(self._decision(view, seen, "sign_off", reason,
                                        f"Sign off #{n}: it is completed"))
            parts.append(self._decision(
                view, seen, "decline", '<input type="text" name="reason" maxlength="500" required'
                ' placeholder="why it goes back (required)" aria-label="why it goes back">',
                f"Decline #{n}"))
        if view.question is not None and task.state is State.waiting:
            parts.append(self._decision(
                view, seen, "answer", '<textarea name="text" maxlength="4000" required rows="3"'
                ' aria-label="your answer" placeholder="your answer"></textarea>',
                "Answer" if not view.question.answered else "Answer again"))
        if task.state in CANCELLABLE:
            parts.append(self._decision(view, seen, "cancel", reason, f"Cancel #{n} for good"))
        if not parts:
            return ""
        return f'<section class="decisions"><h3>your decision</h3>{"".join(parts)}</section>'

    def on_agent(self, agent: str, controls: Iterable[Control], back: str) -> str:
        """Hold or stop ``agent``, or lift what bears on it (``back``: the page to return
        to, ``board`` or a task's number)."""
        action = f"{self.base}/agents"
        keep = f'<input type="hidden" name="back" value="{e(back)}">'
        who = f'<input type="hidden" name="agent" value="{e(agent)}">'
        reason = ('<input type="text" name="reason" maxlength="500"'
                  ' placeholder="reason (optional)" aria-label="reason">')
        live = [c for c in controls if c.live]
        parts = [self.lift(c, back) for c in live]
        kinds = {c.kind for c in live if c.agent == agent}
        if "hold" not in kinds and "stop" not in kinds:
            parts.append(self._form(f"{action}/hold", "hold", keep + who + reason,
                                    f"Hold {agent}"))
        if "stop" not in kinds:
            parts.append(self._form(f"{action}/stop", "stop", keep + who + reason,
                                    f"Stop {agent}", danger=True))
        return (f'<section class="agent" data-agent="{e(agent)}"><h3>{e(agent)}</h3>'
                + "".join(parts) + "</section>")

    def lift(self, control: Control, back: str) -> str:
        """Lift one live control, named by its id."""
        scope = control.agent or (f"instance {control.instance}" if control.instance
                                  else "every agent")
        keep = (f'<input type="hidden" name="back" value="{e(back)}">'
                f'<input type="hidden" name="control" value="{control.id}">')
        return self._form(f"{self.base}/agents/lift", "lift", keep,
                          f"Lift the {control.kind} of {scope}")


def back_to(base: str, back: str) -> str:
    """The page a decision on an agent returns to: the board, or one task's page (never
    a place the form names beyond this vault's board)."""
    if back.isascii() and back.isdigit() and len(back) < 19:
        return f"{base}/tasks/{int(back)}"
    return base


def done_query(verb: Verb) -> str:
    return f"?done={quote(verb.name)}"


__all__ = ["DONE", "FOR_GOOD", "ON_AGENT", "ON_TASK", "Forms", "back_to", "fields_of",
           "verb_of"]
