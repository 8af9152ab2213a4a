"""The built-in permission gate: the owner's own agents go ahead, anyone else waits.

It allows a handoff whose requester and assignee both belong to the store's
owner and holds any other for the owner's approval. It never denies: denial
is for policy plugins.
"""

from __future__ import annotations

from typing import Any

from ..core.models import GateDecision, Task
from .hookspecs import hookimpl


@hookimpl(trylast=True)
def hivelite_permission_gate(task: Task, hive: Any) -> GateDecision:
    owner = hive.owner
    requester_owner = task.requester.partition("/")[0]
    assignee_owner = task.assignee.partition("/")[0]
    if requester_owner == owner and assignee_owner == owner:
        return GateDecision(action="allow", reason=f"requester and assignee belong to {owner}")
    return GateDecision(
        action="hold",
        reason=f"{task.requester} -> {task.assignee} is not between {owner}'s own agents;"
        f" held for {owner}'s approval",
    )
