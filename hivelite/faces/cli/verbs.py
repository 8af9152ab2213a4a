"""The CLI's task verbs from the verb table: each command's options come from its row's
input model (the name, whether it is required, its choices, its default, its help), and
a command that needs nothing of its own is built from the row alone.

What the terminal adds is only its own: some inputs have a shorter spelling (``--lease``
for ``lease_id``, ``--label`` to add one), a repeatable option for a list, an example in
the help, and the answer printed for a person (a lease, or the task as ``show`` prints
it).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import click

from ...core.protocol import Mode, Who
from ...verbs.table import BY_NAME, Verb
from ..render import lease_text
from ..terminal import clip, printable
from .context import (
    AS_AGENT,
    AS_OWNER,
    Context,
    acting,
    caller_options,
    global_options,
    pass_context,
)

SPELLINGS: dict[str, str] = {
    "lease_id": "--lease", "decisions": "--decision", "files_touched": "--touched",
    "next_steps": "--next", "open_questions": "--question", "add_labels": "--label",
    "remove_labels": "--unlabel", "cursor": "--after"}
"""The terminal's own names for some inputs (``--field-name`` for the rest)."""
BESPOKE: dict[str, dict[str, str]] = {
    "handoff": {"requester": "requester", "assignee": "assignee", "project": "project",
                "packet": "text", "id": "task_id", "priority": "priority",
                "labels": "labels", "role": "role"},
    "list": {"state": "states", "priority": "priorities", "labels": "labels", "role": "role"},
    "show": {}, "history": {}, "lease": {}, "next": {}, "release": {},
    "submit": {"evidence": "evidence_items", "draft": "draft_file"},
    "amend": {"evidence": "evidence_items"},
    "verify": {"verdict": "accept"},
    "hold": {"agent": "agent"}, "veto": {}, "stop": {"agent": "agent"}, "lift": {},
}
"""The commands written by hand, for what a terminal does better (a packet from options,
evidence as KIND:SUMMARY, --accept or --reject, a listing that fits the screen), each with
the parameter that takes an input under another name (the rest keep the input's name)."""
MORE: dict[str, str] = {
    "fields": "Its requester, its assignee or the owner may; --base-version must be the"
              " task's current fields_version, else exit 3 (invalid_state/stale_base) and"
              " nothing changes."}
"""What a generated command's help says beyond its row's summary."""
COMMAND_OF = {"lease": "show"}
"""Verbs the terminal offers inside another command (``show N --lease``)."""
ENVIRONMENT: dict[str, str] = {"lease_id": "HIVELITE_LEASE", "token": "HIVELITE_FENCING_TOKEN"}
"""Inputs a shell loop may leave to the environment: the claim it holds, as ``claim``,
``resume`` and ``next`` print it with ``--export``. Never looked up by caller: a lease
named nowhere is a usage error, and a stale one is refused by its fence."""
EXAMPLE_REF = "3"
"""The task an example in the help names."""


def _property(verb: Verb, name: str) -> dict[str, Any]:
    """A field's schema, without its ``null`` alternative."""
    schema: dict[str, Any] = verb.input.model_json_schema()["properties"][name]
    kinds = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    return {**schema, **kinds[0]} if len(kinds) == 1 else schema


def option_name(name: str) -> str:
    return SPELLINGS.get(name, "--" + name.replace("_", "-"))


def _required(verb: Verb) -> set[str]:
    required = set(verb.input.model_json_schema().get("required", []))
    return required | {n for n, f in verb.input.model_fields.items() if f.is_required()}


def input_options(verb: Verb, *, skip: Iterable[str] = ()
                  ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Click options for every input of ``verb`` but ``skip``: a list repeats, a boolean is
    a flag, fixed values are choices; the help is the field's description."""
    required = _required(verb)
    skipped = set(skip)

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for name, field in reversed(list(verb.input.model_fields.items())):
            if name in skipped:
                continue
            schema = _property(verb, name)
            kind = schema.get("type")
            options: dict[str, Any] = {"help": schema.get("description", ""),
                                       "required": name in required}
            if name in ENVIRONMENT and issubclass(verb.input, _fenced()):
                options["envvar"] = ENVIRONMENT[name]
                options["help"] += f" (${ENVIRONMENT[name]})"
            if kind == "array":
                options["multiple"] = True
                enum = schema.get("items", {}).get("enum")
                if enum:
                    options["type"] = click.Choice(enum)
            elif kind == "boolean":
                options["is_flag"] = True
            elif "enum" in schema:
                options["type"] = click.Choice(schema["enum"])
            elif kind == "integer":
                options["type"] = int
            elif kind == "number":
                options["type"] = float
            default = None if field.is_required() else field.get_default()
            if kind not in ("array", "boolean") and default is not None:
                options["default"] = default
                options["show_default"] = True
            command = click.option(option_name(name), name, **options)(command)
        return command
    return decorate


def _fenced() -> type:
    from ...verbs.inputs import Fenced

    return Fenced


def exports(lease: Any) -> str:
    """A claim as shell assignments, for ``eval "$(hivelite next --export)"``."""
    values = {"HIVELITE_TASK": lease.number, ENVIRONMENT["lease_id"]: lease.lease_id,
              ENVIRONMENT["token"]: lease.fencing_token}
    return "\n".join(f"export {k}={shlex.quote(str(v))}" for k, v in values.items())


def given(verb: Verb, params: Mapping[str, Any]) -> dict[str, Any]:
    """The verb's input from a command's parameters: a repeated option as a list (or,
    for a field whose default is None, None when it was not given)."""
    out: dict[str, Any] = {}
    for name, field in verb.input.model_fields.items():
        if name not in params:
            continue
        value = params[name]
        if isinstance(value, tuple):
            value = list(value) if value or field.get_default() is not None else None
        out[name] = value
    return out


def by_owner(verb: Verb) -> bool:
    """Whether the owner may call it, so a command that names no agent acts as the owner."""
    return Who.owner in verb.who


def example(verb: Verb) -> str:
    """A command line for the help, from the row's required inputs and their examples."""
    parts = [f"hivelite {verb.cli}"] + ([EXAMPLE_REF] if verb.on_task else [])
    for name in (n for n in verb.input.model_fields if n in _required(verb)):
        examples = _property(verb, name).get("examples") or [""]
        value = str(examples[0][0] if isinstance(examples[0], list) else examples[0])
        parts.append(f"{option_name(name)} {shlex.quote(value)}")
    if not by_owner(verb):
        parts.append("--agent ana/coder --instance laptop")
    lines, line = [], ""
    for part in parts:  # lines a terminal of 80 columns shows whole
        if line and len(line) + len(part) > 66:
            lines.append(line + " \\")
            line = "  "
        line = f"{line} {part}" if line.strip() else line + part
    return "\n      ".join([*lines, line])


def help_text(verb: Verb, more: str = "") -> str:
    if verb.who == (Who.owner,):
        acts = AS_OWNER
    elif by_owner(verb):
        acts = ("Acts as the agent named by --agent and --instance (or their $HIVELITE_"
                " variables); else as the store's owner (you must own the store file).")
    else:
        acts = AS_AGENT
    extra = f"{more}\n\n    " if more else ""
    return (f"{verb.summary}\n\n    {extra}{acts}\n\n    \b\n    Example:\n"
            f"      {example(verb)}\n    ")


EXPORT = click.option("--export", is_flag=True, help="Print the claim as shell assignments"
                      " (HIVELITE_TASK, $HIVELITE_LEASE, $HIVELITE_FENCING_TOKEN) for"
                      ' eval "$(...)": the holder verbs read the lease from them.')


def show_answer(ctx: Context, face: Any, answer: Any, export: bool = False) -> None:
    """A person's view of a write's answer: a lease as its id, token and expiry; a receipt
    as the task as it now stands."""
    from ...core.models import Awaited, ClaimReceipt, Receipt

    if isinstance(answer, Awaited):
        ctx.emit(answer, lambda: awaited_text(answer))
    elif isinstance(answer, ClaimReceipt):
        if export and not ctx.as_json:
            click.echo(exports(answer))
            return
        ctx.emit(answer, lambda: lease_text(answer, face.clock()))
    elif isinstance(answer, Receipt):
        ctx.show(face, answer)
    else:  # pragma: no cover - every generated verb answers a receipt or a lease
        ctx.emit(answer, lambda: str(answer))


def awaited_text(awaited: Any) -> str:
    """An ``await``'s answer for a person: the task, where it stands, and how it settled
    or what the owner could decide."""
    title = clip(awaited.view.task.packet.task, 60)
    lines = [f"task {awaited.number} ({title}): {awaited.status}"]
    if awaited.settled:
        waited = "its result's verdict" if awaited.until == "verdict" else "its outcome"
        why = f" ({awaited.reason})" if awaited.reason else ""
        lines.append(f"settled, {waited}: {awaited.outcome}{why}")
    else:
        lines.append("not settled yet: ask again (--wait SECONDS waits for it)")
        if awaited.decision == "approve":
            lines.append(f"yours to decide: hivelite approve {awaited.number}, or deny")
        elif awaited.decision == "sign_off":
            lines.append(f"yours to decide: hivelite sign-off {awaited.number}, or decline")
    return "\n".join(printable(line) for line in lines)


def verb_command(name: str, more: str = "") -> click.Command:
    """The command of the row ``name``, built from the row alone."""
    verb = BY_NAME[name]

    def run(ctx: Context, ref: str | None = None, agent: str | None = None,
            instance: str | None = None, session: str | None = None, export: bool = False,
            **params: Any) -> None:
        caller = (ctx.caller(agent, instance, session) if by_owner(verb)
                  else ctx.agent(agent, instance, session))
        with ctx.open() as face:
            answer = face.call(verb, acting(face, caller), ref, ctx.request_id,
                               **given(verb, params))
            show_answer(ctx, face, answer, export)

    run.__doc__ = help_text(verb, more)
    command: Callable[..., Any] = pass_context(run)
    command = input_options(verb)(command)
    if verb.answer.__name__ == "ClaimReceipt" and verb.mode is Mode.claiming:
        command = EXPORT(command)
    command = caller_options(agent_verb=not by_owner(verb))(command)
    if verb.on_task:
        command = click.argument("ref")(command)
    return click.command(name=verb.cli)(command)


class VerbCommand(click.Command):
    """A row's command, its options built from the input model the first time they are
    needed: the group's help and the light calls never build one (a start-up that loads
    no model)."""

    def __init__(self, name: str, more: str = "") -> None:
        self._row, self._more = name, more
        self._built: click.Command | None = None
        verb = BY_NAME[name]
        super().__init__(name=verb.cli, short_help=verb.summary)

    def _real(self) -> click.Command:
        if self._built is None:
            self._built = global_options(verb_command(self._row, self._more))
        return self._built

    @property
    def params(self) -> list[click.Parameter]:
        return self._real().params

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        """What ``click.Command`` sets at first: nothing (the row's options come later)."""

    @property
    def help(self) -> str | None:
        return self._real().help

    @help.setter
    def help(self, value: str | None) -> None:
        """What ``click.Command`` sets at first: nothing (the row's words come later)."""

    @property
    def callback(self) -> Callable[..., Any] | None:
        return self._real().callback

    @callback.setter
    def callback(self, value: Callable[..., Any] | None) -> None:
        """What ``click.Command`` sets at first: nothing (the row's run comes later)."""


__all__ = [
    "BESPOKE",
    "COMMAND_OF",
    "SPELLINGS",
    "VerbCommand",
    "given",
    "help_text",
    "input_options",
    "option_name",
    "verb_command",
]
