"""The built-in threshold: what the store's policy says (one independent confirmation
unless the owner set another, per store or per project).

Registered last, so any plugin that answers ``hivelite_merge_threshold`` decides first.
"""

from __future__ import annotations

from typing import Any

from ..core.models import Task
from .hookspecs import hookimpl

PERSONAL_THRESHOLD = 1
"""The default when the owner set none (seed 004: "one by default")."""


@hookimpl(trylast=True)
def hivelite_merge_threshold(task: Task, hive: Any) -> int:
    policy = getattr(hive, "policy", None)
    if policy is None:  # a hive-like object without a store policy
        return PERSONAL_THRESHOLD
    threshold, _ = policy().threshold_for(task.project)
    return int(threshold)
