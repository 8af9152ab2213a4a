"""The built-in Personal threshold: a result needs one independent confirmation.

Registered last, so any plugin that answers ``hivelite_merge_threshold`` decides first.
"""

from __future__ import annotations

from typing import Any

from .hookspecs import hookimpl
from .models import Task

PERSONAL_THRESHOLD = 1


@hookimpl(trylast=True)
def hivelite_merge_threshold(task: Task, hive: Any) -> int:
    return PERSONAL_THRESHOLD
