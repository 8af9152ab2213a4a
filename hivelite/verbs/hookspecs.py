"""The hooks a plugin may implement (pluggy project ``hivelite``).

Every hook gets keyword arguments only; a plugin takes the ones it names. A hook may
read through the ``hive`` it is handed (``get``, ``list``, ``history``, ``journal``) but
not write: a write verb called while a hook runs is refused with a ``PluginError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from ..core.models import (
        Confirmation,
        EvidenceView,
        GateDecision,
        JournalEntry,
        Result,
        Task,
    )

hookspec = pluggy.HookspecMarker("hivelite")
hookimpl = pluggy.HookimplMarker("hivelite")


@hookspec
def hivelite_startup(hive: Any) -> None:
    """Called once when a store opens: read settings, check them, raise to refuse to start."""


@hookspec
def hivelite_permission_gate(task: Task, hive: Any) -> GateDecision | str | None:
    """Decide a handoff: a ``GateDecision`` (or "allow", "hold", "deny"), or None for no opinion.

    Combination: any deny wins, then any hold, else allow. Asked before the write lock,
    about the task as it will be created; the store it reads does not have it yet.
    """


@hookspec(firstresult=True)
def hivelite_merge_threshold(task: Task, hive: Any) -> int | None:
    """How many independent confirmations the task's result needs (0: none); None to pass."""


@hookspec
def hivelite_check_evidence(task: Task, result: Result, hive: Any,
                            evidence: list[EvidenceView]) -> list[str] | None:
    """Problems with a result's evidence (empty or None when it passes); all lists are
    joined. ``evidence`` is the result's evidence with ``verified`` as hivelite checked it
    (a receipt's digest, or a registered signer's signature); an implementation that does
    not name it is not given it."""


@hookspec(firstresult=True)
def hivelite_count_confirmation(
    task: Task, confirmation: Confirmation, hive: Any
) -> bool | None:
    """True to count a confirmation toward the threshold, False to ignore it, None to pass."""


@hookspec
def hivelite_on_transition(
    task: Task, move: Any, actor: str, hive: Any, entry: JournalEntry | None
) -> None:
    """Called after a move has been committed (notifications); its answer is ignored.

    ``entry`` is the move's journal row (seq, at, waiting_on, reason, detail).
    """
