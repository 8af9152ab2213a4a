"""One error hierarchy: every refusal has an HTTP-like ``status``, a ``code`` and a ``reason``.

The SQL triggers abort with ``code:reason`` texts; :func:`from_trigger` maps them
to the same classes the guard raises itself, so callers see one shape.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar


class HiveliteError(Exception):
    """Base of every error hivelite raises on purpose."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal"
    exit_code: ClassVar[int] = 1
    by_store: bool = False
    """A rule of the store's refused the write (:func:`from_trigger`): its words are the
    trigger's few, and the write path's full run says precisely why."""

    def __init__(self, reason: str, message: str | None = None, **extra: Any) -> None:
        self.reason = reason
        self.message = message or reason.replace("_", " ")
        self.extra = extra
        super().__init__(f"{self.code}/{reason}: {self.message}")

    def about(self, number: object) -> HiveliteError:
        """Name the task this error is about (seed 004: errors carry ``number``), unless it
        names one already or ``number`` is not a task number; ``self``."""
        if isinstance(number, str) and number.isascii() and number.isdigit() and len(
                number) < 20:
            number = int(number)
        if (isinstance(number, int) and not isinstance(number, bool)
                and 0 < number < 2**63 and "number" not in self.extra):
            self.extra["number"] = number
        return self

    def to_dict(self) -> dict[str, Any]:
        """The error as the CLI's ``--json`` and the HTTP service show it."""
        return {
            "status": self.status,
            "code": self.code,
            "reason": self.reason,
            "message": self.message,
            **self.extra,
        }


class InvalidState(HiveliteError):
    """The task is not in a state that allows this (``409``)."""

    status, code, exit_code = 409, "invalid_state", 3


class ForbiddenRight(HiveliteError):
    """The actor may not do this (``403``)."""

    status, code, exit_code = 403, "forbidden_right", 4


class NotFound(HiveliteError):
    """No such task (``404``)."""

    status, code, exit_code = 404, "not_found", 5


class InvalidInput(HiveliteError):
    """The input breaks a rule of the schema or the store (``422``)."""

    status, code, exit_code = 422, "invalid_input", 6


class Unauthenticated(HiveliteError):
    """No token, or one that is unknown, expired or revoked (``401``): who calls is not
    known, so nothing is answered."""

    status, code, exit_code = 401, "unauthenticated", 4


class RateLimited(HiveliteError):
    """A daily budget is used up (``429``); ``retry_after_s`` says when it resets."""

    status, code, exit_code = 429, "rate_limited", 7


class NotJson(InvalidInput):
    """A request body that does not say it is JSON (``415``): read as JSON anyway, a form
    or a text another site's page can send would pass for a client's call."""

    status = 415


class StoreError(InvalidInput):
    """The file is not a hivelite store this version can open; it is left untouched."""


class StoreReadonly(StoreError):
    """The store cannot be written from here: the file, its folder (SQLite writes ``-wal``
    and ``-shm`` beside it) or its filesystem is read-only. Nothing was written."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__("store_readonly", message, **extra)


class StoreCorrupt(StoreError):
    """The file is a damaged SQLite database or a damaged hivelite store (or one row of it
    cannot be read). It is left untouched."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__("store_corrupt", message, **extra)


class StoreFull(HiveliteError):
    """The disk holding the store is full: the write was rolled back; free some space and
    try again."""

    status, code, exit_code = 507, "store_full", 1


class UnexpectedError(HiveliteError):
    """Something no rule foresaw (an unreadable file, ...): reported, never a traceback."""

    status, code, exit_code = 500, "internal", 1


class StoreBusy(HiveliteError):
    """Another writer held the store longer than the busy timeout; try again."""

    status, code, exit_code = 503, "store_busy", 1


class PluginError(HiveliteError):
    """A plugin's hook raised or answered with the wrong type; nothing was written."""

    status, code, exit_code = 500, "plugin_error", 1

    def __init__(self, plugin: str, hook: str, message: str) -> None:
        self.plugin = plugin
        self.hook = hook
        super().__init__("plugin_failed", f"plugin {plugin!r}, hook {hook}: {message}",
                         plugin=plugin, hook=hook)


ERROR_CLASSES: dict[str, type[HiveliteError]] = {
    cls.code: cls for cls in (InvalidState, ForbiddenRight, NotFound, InvalidInput, RateLimited,
                              Unauthenticated)
}

_TRIGGER_TEXT = re.compile(r"\b(" + "|".join(ERROR_CLASSES) + r"):([a-z_]+)\b")


def from_trigger(exc: BaseException) -> HiveliteError | None:
    """The hivelite error a trigger's ``RAISE(ABORT, 'code:reason')`` stands for, if any."""
    match = _TRIGGER_TEXT.search(str(exc))
    if match is None:
        return None
    code, reason = match.groups()
    error = ERROR_CLASSES[code](reason, f"refused by the store: {reason.replace('_', ' ')}")
    error.by_store = True
    return error
