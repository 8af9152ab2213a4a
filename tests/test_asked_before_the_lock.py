"""Plugins are asked before the write lock (issue 47, item 1): ``verify`` asks
``hivelite_count_confirmation`` and ``amend`` asks ``hivelite_check_evidence`` from a
snapshot, then writes under the lock only if the result they were asked about is still
the one there; otherwise they ask again about the result as it is now.

A plugin that takes its time (here: as long as another connection's write) holds up no
other writer, on either engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import hivelite
from hivelite import Hive, State, StoreBusy

from .both_ways import in_approval
from .conftest import CODER, OWNER, REVIEWER, OpenHive

pytestmark = pytest.mark.contract

WAIT_S = 30.0
"""How long a plugin waits for the other write it set going (a failing run's bound)."""


class Meanwhile:
    """While it is asked, the plugin has ``write`` run on a thread of its own (another
    connection, outside the hook's context) and waits for it to end, ``times`` times."""

    def __init__(self, write: Callable[[], Any], times: int = 1) -> None:
        self.write, self.times = write, times
        self.outcomes: list[object] = []

    def meanwhile(self) -> None:
        if len(self.outcomes) >= self.times:
            self.outcomes.append("asked")
            return
        done = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            try:
                self.write()
            except BaseException as exc:  # handed to the test
                failed.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, daemon=True).start()
        assert done.wait(WAIT_S), "the other write did not end while the plugin was asked"
        self.outcomes.append(failed[0] if failed else "written")


class Counts(Meanwhile):
    def __init__(self, write: Callable[[], Any], times: int = 1) -> None:
        super().__init__(write, times)
        self.versions: list[Any] = []

    @hivelite.hookimpl
    def hivelite_count_confirmation(self, task: hivelite.Task, confirmation: Any,
                                    hive: Hive) -> bool:
        self.versions.append(task.result.summary if task.result else None)
        self.meanwhile()
        return True


class Checks(Meanwhile):
    def __init__(self, write: Callable[[], Any], times: int = 1) -> None:
        super().__init__(write, times)
        self.summaries: list[str] = []

    @hivelite.hookimpl
    def hivelite_check_evidence(self, task: hivelite.Task, result: hivelite.Result,
                                hive: Hive) -> list[str]:
        self.summaries.append(result.summary)
        self.meanwhile()
        return []


def test_a_verdict_is_counted_while_another_connection_writes_store_wide(
        open_hive: OpenHive) -> None:
    """The plugin's question holds no write: the owner's store-wide write from another
    connection (which waits for every write under way) ends while it is asked."""
    other = open_hive()
    plugin = Counts(lambda: other.set_policy(OWNER, "threshold", 1))
    hive = open_hive(plugins=[plugin])
    number = in_approval(hive)
    assert hive.verify(REVIEWER, number).state is State.completed
    assert plugin.outcomes == ["written"]


def test_an_amendment_is_checked_while_another_connection_writes_store_wide(
        open_hive: OpenHive) -> None:
    other = open_hive()
    plugin = Checks(lambda: other.set_policy(OWNER, "threshold", 1))
    hive = open_hive()
    number = in_approval(hive)
    hive = open_hive(plugins=[plugin])
    assert hive.amend(CODER, number, summary="done, better").state is State.approval
    assert plugin.outcomes == ["written"] and plugin.summaries == ["done, better"]


def test_a_result_amended_while_the_plugin_was_asked_is_asked_about_again(
        open_hive: OpenHive) -> None:
    """The plugin answered about version 1; the worker amended it meanwhile: the verdict's
    write finds version 2, the plugin is asked about it, and the verdict counts for it."""
    worker = open_hive()
    number_of: list[int] = []
    plugin = Counts(lambda: worker.amend(CODER, number_of[0], summary="done, fixed"))
    hive = open_hive(plugins=[plugin])
    number_of.append(in_approval(hive))
    number = number_of[0]
    assert hive.verify(REVIEWER, number).state is State.completed
    assert plugin.outcomes == ["written", "asked"]
    assert plugin.versions == ["done", "done, fixed"]
    view = hive.get(number)
    assert view.task.result is not None and view.task.result.summary == "done, fixed"
    reasons = [e.reason for e in hive.history(number)]
    assert reasons.index("amended") < len(reasons) - 1
    assert reasons[-1].startswith("threshold met")


def test_an_amendment_meeting_another_is_worked_out_again(open_hive: OpenHive) -> None:
    """Two amendments of one result: the one whose plugins answered about the result
    another amendment replaced meanwhile is worked out again on the new one."""
    worker = open_hive()
    number = in_approval(worker)
    plugin = Checks(lambda: worker.amend(CODER, number, summary="first"))
    hive = open_hive(plugins=[plugin])
    hive.amend(CODER, number, evidence=[{"kind": "test_output", "summary": "4 passed"}])
    assert plugin.summaries == ["done", "first"]  # (the other's amend asks no plugin)
    assert plugin.outcomes == ["written", "asked"]
    result = hive.get(number).task.result
    assert result is not None and result.summary == "first"
    assert [e.summary for e in result.evidence] == ["4 passed"]
    assert [e.reason for e in hive.history(number)].count("amended") == 2


def test_a_result_that_keeps_changing_is_store_busy_and_nothing_is_written(
        open_hive: OpenHive) -> None:
    worker = open_hive()
    number_of: list[int] = []
    turns = iter(range(100))
    plugin = Counts(lambda: worker.amend(CODER, number_of[0], summary=f"v{next(turns)}"),
                    times=100)
    hive = open_hive(plugins=[plugin])
    number_of.append(in_approval(hive))
    with pytest.raises(StoreBusy) as busy:
        hive.verify(REVIEWER, number_of[0])
    assert busy.value.extra.get("retry") is True
    assert "nothing was written" in busy.value.message
    assert len(plugin.versions) == 3
    view = hive.get(number_of[0])
    assert view.task.state is State.approval
    assert not [e for e in hive.history(number_of[0]) if e.actor == REVIEWER.name]
