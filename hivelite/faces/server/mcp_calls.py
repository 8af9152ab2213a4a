"""What every MCP call of hivelite shares: who acts, an answer as JSON, a refusal as a
model reads it.

The tools (:mod:`.mcp_tools`) and the tasks (:mod:`.mcp_tasks`) both act through a
:data:`Where`: the store, the caller the token proved, and the token's id, which binds a
task to the token that made it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from pydantic import BaseModel

from ...core.caller import Caller
from ...core.errors import HiveliteError
from ...hive import Hive


class Acting(NamedTuple):
    """Who an MCP request acts as, and where."""

    hive: Hive
    caller: Caller
    token: str | None
    """The id of the token that proved the caller."""


Where = Callable[[], Acting]
"""Where an MCP call runs: the store, and the caller and token the request proved."""


def plain(value: Any) -> Any:
    """An answer as JSON: every key kept (a task object validates against the seed)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def refusal_text(error: HiveliteError) -> str:
    """A refusal as the model reads it: ``code/reason: message (task N)``."""
    number = error.extra.get("number")
    where = f" (task {number})" if number is not None else ""
    return f"{error.code}/{error.reason}: {error.message}{where}"


__all__ = ["Acting", "Where", "plain", "refusal_text"]
