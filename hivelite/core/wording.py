"""Validation errors in words: what was expected, with an example, and what was given.

pydantic describes a failed check by its rule (``String should match pattern
'^[a-z0-9]+(?:-[a-z0-9]+)*/…$'``) and its location (``packet.acceptance_criteria``).
People need the rule in words and the field by the name they typed it under; this module
turns one into the other. The machine-readable location stays in the error's ``field``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any, Literal, get_args

FIELDS: Mapping[str, str] = {
    "requester": "the requester", "assignee": "the assignee", "project": "the project",
    "id": "the task id", "priority": "the priority", "labels": "the labels",
    "packet.task": "the task's text", "packet.deliverable_type": "the deliverable type",
    "packet.acceptance_criteria": "the acceptance criteria", "packet.context": "the context",
    "packet.files": "the files", "packet.depends_on": "the tasks it depends on",
    "depends_on": "the tasks it depends on",
    "packet.constraints": "the constraints", "packet": "the packet",
    "summary": "the summary", "evidence": "the evidence", "provenance": "the provenance",
    "kind": "the kind", "url": "the url", "returned_by": "who returned it",
    "returned_at": "when it was returned", "agent": "the agent", "instance": "the instance",
    "session": "the session", "owner": "the owner", "reason": "the reason",
    "progress": "the progress", "decisions": "the decisions",
    "files_touched": "the files touched", "next_steps": "the next steps",
    "open_questions": "the open questions",
}
"""Fields as a person names them."""

FLAGS: Mapping[str, str] = {
    "packet.task": "--task", "packet.deliverable_type": "--type",
    "packet.acceptance_criteria": "--accept", "packet.context": "--context",
    "packet.files": "--file", "packet.depends_on": "--depends-on",
    "depends_on": "--depends-on",
}
"""The fields a person may name as they typed them, with the CLI's option for each: the
CLI's caller reads the option in brackets (``the acceptance criteria (--accept)``), a
Python caller the argument (``the acceptance criteria (packet["acceptance_criteria"])``,
``the tasks it depends on (depends_on)``)."""

SPELLING: ContextVar[Literal["python", "cli"]] = ContextVar("spelling", default="python")
"""How the face in front names a field in brackets: the CLI sets ``cli`` while it runs
(:func:`spelled`); every other face speaks Python (a JSON body reads the same)."""


@contextmanager
def spelled(face: Literal["python", "cli"]) -> Iterator[None]:
    """Name fields in brackets as ``face`` does while the block runs."""
    token = SPELLING.set(face)
    try:
        yield
    finally:
        SPELLING.reset(token)


def spelling(path: str) -> str | None:
    """How the caller typed the field at ``path`` (dotted), in the face's words: the CLI's
    option, or the Python argument; None for a field with no option."""
    if path not in FLAGS:
        return None
    if SPELLING.get() == "cli":
        return FLAGS[path]
    head, *rest = path.split(".")
    return head + "".join(f'["{part}"]' for part in rest)


def _pattern(kind: Any) -> str:
    """The pattern of an ``Annotated`` constrained string type."""
    return next(str(m.pattern) for m in get_args(kind)[1:] if getattr(m, "pattern", None))


@cache
def _patterns() -> dict[str, str]:
    """Each constrained type's pattern, in words with an example."""
    from . import models

    return {
        _pattern(models.Slug): "names are lowercase letters, digits and single hyphens,"
                               " e.g. shop or web-app",
        _pattern(models.AgentName): "agent names look like owner/name (lowercase letters,"
                                    " digits and hyphens), e.g. ana/coder",
        _pattern(models.InstanceName): "instance names are 1 to 64 letters, digits, '.', '_'"
                                       " or '-', starting with a letter or digit, e.g. laptop",
        _pattern(models.Label): "labels are 1 to 32 lowercase letters, digits or hyphens,"
                                " e.g. auth",
        _pattern(models.CommitHash): "commit hashes are 7 to 64 lowercase hex digits,"
                                     " e.g. 3f2a9c1",
        _pattern(models.UpdateSummary): "one line of text, not blank",
        models.TASK_ID_PATTERN: "task ids are letters, digits, '_' and '-', e.g. fix-login-42",
        models.TIMESTAMP_PATTERN: "times are RFC 3339, e.g. 2026-12-02T09:00:00Z",
        models.URI_PATTERN: "URLs look like https://example.com/pr/7",
    }


def rule_of(kind: Any) -> str | None:
    """The words for the pattern a constrained type carries, if any: a length error then
    still says the whole rule."""
    pattern = next((str(m.pattern) for m in get_args(kind)[1:] if getattr(m, "pattern", None)),
                   None)
    return _patterns().get(pattern) if pattern else None


def field_words(location: Sequence[Any], what: str) -> str:
    """A location as a person names it, the way the face in front spells it:
    ``('packet', 'files', 2)`` is ``the files (--file), item 3`` to the CLI's caller and
    ``the files (packet["files"]), item 3`` to a Python caller; ``('evidence', 1, 'url')``
    is ``the url of the evidence, item 2``."""
    parts = list(location)
    if not parts:
        return f"the {what}"
    last = parts[-1]
    if isinstance(last, int):
        return f"{field_words(parts[:-1], what)}, item {last + 1}"
    path = ".".join(str(p) for p in parts if not isinstance(p, int))
    if path in FIELDS and not any(isinstance(p, int) for p in parts):
        typed = spelling(path)
        return f"{FIELDS[path]} ({typed})" if typed else FIELDS[path]
    name = FIELDS.get(str(last)) or "the " + str(last).replace("_", " ")
    return f"{name} of {field_words(parts[:-1], what)}" if len(parts) > 1 else name


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def expected(error: Mapping[str, Any]) -> str:
    """What the failed check wanted, in words."""
    kind, ctx = error["type"], error.get("ctx") or {}
    plural = "s" if ctx.get("min_length", ctx.get("max_length", 2)) != 1 else ""
    if kind == "string_pattern_mismatch":
        return _patterns().get(ctx.get("pattern", ""), "text of another form")
    if kind == "string_too_short":
        return f"at least {ctx['min_length']} character{plural}"
    if kind == "string_too_long":
        return f"at most {ctx['max_length']} character{plural}"
    unit = "character" if isinstance(error.get("input"), str) else "item"
    if kind == "too_short":
        return f"at least {ctx['min_length']} {unit}{plural}"
    if kind == "too_long":
        return f"at most {ctx['max_length']} {unit}{plural}"
    if kind == "missing":
        return "required"
    if kind == "literal_error":
        return f"one of {ctx['expected']}"
    if kind == "extra_forbidden":
        return "not something it takes"
    if kind in ("string_type", "str_type"):
        return "text"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "a whole number"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = next(iter(ctx.values()), "?")
        sign = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=",
                "less_than": "<"}[kind]
        return f"a number {sign} {bound}"
    if kind in ("list_type", "tuple_type", "set_type"):
        return "a list"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "an object of named fields"
    if kind == "bool_type":
        return "true or false"
    if kind == "value_error":  # our own validators say it already
        return str(error["msg"]).removeprefix("Value error, ")
    return str(error["msg"])


def sentence(error: Mapping[str, Any], what: str) -> str:
    """One failed check as a person reads it: the field, what it needs, what it got."""
    field = field_words(error.get("loc", ()), what)
    need = expected(error)
    if error["type"] == "missing":
        return f"{field} is required"
    if error["type"] == "extra_forbidden":
        return f"{field} is not something a {what} takes"
    if error["type"] == "value_error":
        return f"{field}: {need}"
    return f"{field}: {need}; not {_shown(error.get('input'))}"
