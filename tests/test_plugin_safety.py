"""Plugins cannot hurt the store they serve (issue 14, item 7; DESIGN §9).

1. A hook may read through the ``Hive`` it is handed but not write: any write verb
   called while a hook runs (every hook: gate, threshold, evidence, count, notifier,
   start-up) is refused with a ``PluginError`` naming the plugin and the hook, nothing
   is written, nothing recurses.
2. The permission gate is asked before the write lock is taken: a slow gate never holds
   up another writer (a real second process, and a thread with its own ``Hive``); what
   must hold at insert time (the id is free, the dependencies exist) is checked again
   under the lock.
3. A plugins folder, or a plugin file in it, that someone else could write is refused
   before anything in it runs (real folders, real ``chmod``; the mode bits are a check
   even for root, which CI runs as).
"""

from __future__ import annotations

import contextlib
import os
import py_compile
import subprocess
import sys
import textwrap
import threading
import types
from collections.abc import Callable
from importlib.util import cache_from_source
from pathlib import Path
from typing import Any

import pytest

import hivelite
from hivelite import Hive, InvalidInput, ManualClock, PluginError, State
from hivelite.verbs.plugins import get_plugin_manager

from . import rawsql
from .conftest import (
    CODER,
    HANG_S,
    OWNER,
    PLANNER,
    REVIEWER,
    START,
    OpenHive,
    own_task,
    packet,
)
from .test_discovery import clean_env, hivelite_script

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]

# -- 1. hooks read, never write ---------------------------------------------------------


class Scene:
    """A store with something for every write verb to act on: a routed task (``spare``)
    and a task held by the coder (``held``, with its lease)."""

    def __init__(self, hive: Hive) -> None:
        self.hive = hive
        self.spare = own_task(hive)
        self.held = own_task(hive)
        self.lease = hive.claim(CODER, self.held)


# What a hook tries, each a different write verb (Scene -> the write).
WRITES: dict[str, Callable[[Hive, Scene], object]] = {
    "handoff": lambda hive, s: hive.handoff(
        OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
        packet=packet(task="Smuggled in by a hook")),
    "claim": lambda hive, s: hive.claim(CODER, s.spare),
    "release": lambda hive, s: hive.release(
        CODER, s.held, lease_id=s.lease.lease_id, token=s.lease.fencing_token),
    "cancel": lambda hive, s: hive.cancel(OWNER, s.spare, reason="a hook says so"),
    "checkpoint": lambda hive, s: hive.checkpoint(
        CODER, s.held, lease_id=s.lease.lease_id, token=s.lease.fencing_token,
        progress="half way there"),
    "expire": lambda hive, s: hive.expire(OWNER),
}


class Meddler:
    """Implements every hook; once armed, each runs ``action(hive)`` and records what came
    of it (the value, or the exception it let through)."""

    def __init__(self) -> None:
        self.action: Callable[[Hive], object] | None = None
        self.hook: str | None = None  # only this hook acts; None: all
        self.outcomes: list[tuple[str, object]] = []

    def _act(self, hook: str, hive: Hive) -> None:
        if self.action is None or self.hook not in (None, hook):
            return
        try:
            value = self.action(hive)
        except BaseException as exc:
            self.outcomes.append((hook, exc))
            raise
        self.outcomes.append((hook, value))

    @hivelite.hookimpl
    def hivelite_startup(self, hive: Hive) -> None:
        self._act("hivelite_startup", hive)

    @hivelite.hookimpl
    def hivelite_permission_gate(self, task: hivelite.Task, hive: Hive) -> None:
        self._act("hivelite_permission_gate", hive)

    @hivelite.hookimpl
    def hivelite_merge_threshold(self, task: hivelite.Task, hive: Hive) -> None:
        self._act("hivelite_merge_threshold", hive)

    @hivelite.hookimpl
    def hivelite_check_evidence(self, task: hivelite.Task, result: Any, hive: Hive) -> None:
        self._act("hivelite_check_evidence", hive)

    @hivelite.hookimpl
    def hivelite_count_confirmation(self, task: hivelite.Task, confirmation: Any,
                                    hive: Hive) -> None:
        self._act("hivelite_count_confirmation", hive)

    @hivelite.hookimpl
    def hivelite_on_transition(self, task: hivelite.Task, move: Any, hive: Hive) -> None:
        self._act("hivelite_on_transition", hive)


def in_approval(hive: Hive) -> int:
    """A task whose result awaits a verdict (submitted by the coder)."""
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    return number


def claimed(hive: Hive) -> tuple[int, Any]:
    number = own_task(hive)
    return number, hive.claim(CODER, number)


# Each hook, and a verb that makes hivelite ask it (the setup runs before arming).
def _handoff(hive: Hive) -> Callable[[], object]:
    return lambda: own_task(hive, project="gated")


def _submit(hive: Hive) -> Callable[[], object]:
    number, lease = claimed(hive)
    return lambda: hive.submit(CODER, number, lease_id=lease.lease_id,
                               token=lease.fencing_token, summary="done", evidence=EVIDENCE)


def _amend(hive: Hive) -> Callable[[], object]:
    number = in_approval(hive)
    return lambda: hive.amend(CODER, number, summary="done, better")


def _verify(hive: Hive) -> Callable[[], object]:
    number = in_approval(hive)
    return lambda: hive.verify(REVIEWER, number, verdict="accept")


def _moved(hive: Hive) -> Callable[[], object]:
    number = own_task(hive)
    return lambda: hive.claim(CODER, number)


TRIGGERS: dict[str, tuple[str, Callable[[Hive], Callable[[], object]]]] = {
    "gate": ("hivelite_permission_gate", _handoff),
    "threshold": ("hivelite_merge_threshold", _submit),
    "evidence-submit": ("hivelite_check_evidence", _submit),
    "evidence-amend": ("hivelite_check_evidence", _amend),
    "count": ("hivelite_count_confirmation", _verify),
}


def assert_refused(error: BaseException, plugin: str, hook: str, verb: str) -> None:
    assert isinstance(error, PluginError), error
    assert error.reason == "plugin_failed"
    assert error.code == "plugin_error"
    assert (error.plugin, error.hook) == (plugin, hook)
    assert f"plugin {plugin!r}, hook {hook}" in error.message
    assert f"write verb {verb!r}" in error.message
    assert "hooks may read" in error.message and "not write" in error.message
    assert "raised PluginError" not in error.message  # said once, not wrapped in itself


@pytest.mark.parametrize("verb", WRITES)
@pytest.mark.parametrize("trigger", TRIGGERS)
def test_a_hook_that_writes_is_refused_and_nothing_is_written(
        open_hive: OpenHive, trigger: str, verb: str) -> None:
    meddler = Meddler()
    hive = open_hive(plugins=[meddler])
    scene = Scene(hive)
    hook, prepare = TRIGGERS[trigger]
    run = prepare(hive)
    journal = hive.journal()

    meddler.hook, meddler.action = hook, lambda h: WRITES[verb](h, scene)
    with pytest.raises(PluginError) as err:
        run()

    assert_refused(err.value, "Meddler", hook, verb)
    [(asked, tried)] = meddler.outcomes  # asked once: no recursion, no second attempt
    assert asked == hook and tried is err.value
    assert hive.journal() == journal  # neither the hook's write nor the verb's
    assert hive.get(scene.spare).task.state is State.routed
    assert hive.get(scene.held).claim is not None
    # The same Hive keeps working once the hook stops meddling.
    meddler.action = None
    run()


@pytest.mark.parametrize("verb", WRITES)
def test_a_notifier_that_writes_is_refused_and_the_move_stands(open_hive: OpenHive,
                                                                verb: str) -> None:
    meddler = Meddler()
    hive = open_hive(plugins=[meddler])
    scene = Scene(hive)
    number = own_task(hive)
    seq = hive.journal()[-1].seq

    meddler.hook = "hivelite_on_transition"
    meddler.action = lambda h: WRITES[verb](h, scene)
    receipt = hive.claim(CODER, number)

    assert receipt.state is State.accepted  # committed before the notifier ran
    assert [(r.number, r.to_state) for r in hive.journal() if r.seq > seq] == [
        (number, State.accepted)]
    [failure] = hive.notify_failures
    assert_refused(failure, "Meddler", "hivelite_on_transition", verb)
    assert len(meddler.outcomes) == 1
    assert hive.get(scene.spare).task.state is State.routed
    assert hive.get(scene.held).claim is not None


def test_the_recursing_notifier_of_the_issue_stops_at_once(open_hive: OpenHive) -> None:
    """Issue 14: a notifier that claims what is routed and releases what is claimed
    recursed until Python gave up (180 journal rows)."""

    class Juggler:
        @hivelite.hookimpl
        def hivelite_on_transition(self, task: hivelite.Task, move: Any, hive: Hive) -> None:
            if move.target is State.routed:
                hive.claim(CODER, task.id)
            elif move.target is State.accepted:
                hive.release(OWNER, task.id)

    hive = open_hive(plugins=[Juggler()])
    number = own_task(hive)
    hive.claim(CODER, number)
    assert [(r.from_state, r.to_state) for r in hive.journal()] == [
        (None, State.requested), (State.requested, State.routed),
        (State.routed, State.accepted)]
    assert [(f.plugin, f.hook) for f in hive.notify_failures] == [
        ("Juggler", "hivelite_on_transition")] * 2
    assert "'claim'" in hive.notify_failures[0].message
    assert "'release'" in hive.notify_failures[1].message


def test_a_write_at_start_up_refuses_to_open(open_hive: OpenHive, db_path: Path) -> None:
    Hive.open(db_path, owner="ana").close()
    meddler = Meddler()
    meddler.hook = "hivelite_startup"
    meddler.action = lambda h: own_task(h)
    with pytest.raises(PluginError) as err:
        open_hive(plugins=[meddler])
    assert_refused(err.value, "Meddler", "hivelite_startup", "handoff")
    with Hive.open(db_path, owner="ana") as hive:
        assert hive.journal() == []


def test_a_hook_that_swallows_the_refusal_still_fails(open_hive: OpenHive) -> None:
    """Catching the error and answering as if the write had happened does not help."""

    class Sly:
        @hivelite.hookimpl
        def hivelite_permission_gate(self, task: hivelite.Task, hive: Hive) -> str:
            with contextlib.suppress(PluginError):
                hive.cancel(OWNER, 1)
            return "allow"

    hive = open_hive(plugins=[Sly()])
    with pytest.raises(PluginError) as err:
        own_task(hive)
    assert_refused(err.value, "Sly", "hivelite_permission_gate", "cancel")
    assert hive.journal() == []


def test_a_hook_that_fails_after_its_refused_write_is_reported_as_the_write(
        open_hive: OpenHive) -> None:
    class Clumsy:
        @hivelite.hookimpl
        def hivelite_permission_gate(self, task: hivelite.Task, hive: Hive) -> str:
            try:
                hive.expire(OWNER)
            except PluginError:
                raise RuntimeError("could not tidy up") from None
            return "allow"

    hive = open_hive(plugins=[Clumsy()])
    with pytest.raises(PluginError) as err:
        own_task(hive)
    assert_refused(err.value, "Clumsy", "hivelite_permission_gate", "expire")
    assert isinstance(err.value.__cause__, RuntimeError)


def test_a_nested_verb_is_refused_before_it_asks_any_hook(open_hive: OpenHive) -> None:
    """A notifier's handoff is refused at the door: the gate is not asked about it."""
    gates: list[str] = []

    class Notifier:
        @hivelite.hookimpl
        def hivelite_on_transition(self, hive: Hive) -> None:
            own_task(hive, project="nested")

    class Counter:
        @hivelite.hookimpl
        def hivelite_permission_gate(self, task: hivelite.Task) -> None:
            gates.append(task.project)

    hive = open_hive(plugins=[Counter(), Notifier()])
    own_task(hive)
    assert gates == ["demo"]
    assert [f.hook for f in hive.notify_failures] == ["hivelite_on_transition"]


def test_the_write_path_itself_refuses_inside_a_hook(open_hive: OpenHive) -> None:
    """Whatever way a write reaches the transaction, it is refused there too."""

    class Direct:
        @hivelite.hookimpl
        def hivelite_permission_gate(self, hive: Hive) -> None:
            hive._run(None, lambda unit: unit.tx.set_meta("note", "from a hook"))

    hive = open_hive(plugins=[Direct()])
    with pytest.raises(PluginError) as err:
        own_task(hive)
    assert (err.value.plugin, err.value.hook) == ("Direct", "hivelite_permission_gate")
    assert "write verb 'write'" in err.value.message
    with hive.store.read() as reader:
        assert reader.meta("note") is None


def test_another_hive_on_the_same_store_is_refused_too(open_hive: OpenHive,
                                                      db_path: Path) -> None:
    """A hook cannot get round the rule by opening the store again in its thread."""
    results: list[object] = []

    class Sneaky:
        @hivelite.hookimpl
        def hivelite_on_transition(self, task: hivelite.Task, move: Any) -> None:
            if move.target is not State.routed:
                return
            with Hive.open(db_path, owner="ana", clock=ManualClock(START)) as other:
                results.append(other.get(task.id).task.state)  # reading is fine
                other.claim(CODER, task.id)

    hive = open_hive(plugins=[Sneaky()])
    number = own_task(hive)
    assert results == [State.routed]
    [failure] = hive.notify_failures
    assert_refused(failure, "Sneaky", "hivelite_on_transition", "claim")
    assert hive.get(number).task.state is State.routed


def test_opening_a_store_inside_a_hook_leaves_the_expiry_sweep_to_the_verb(
        open_hive: OpenHive, db_path: Path, clock: ManualClock) -> None:
    """Opening a store sweeps run-out claims, a write; inside a hook it does not, so a
    hook may open a store to read it whatever the leases."""
    opened: list[bool] = []

    class Looker:
        @hivelite.hookimpl
        def hivelite_permission_gate(self) -> None:
            with Hive.open(db_path, owner="ana", clock=clock) as other:
                opened.append(other.expired_on_open == [])

    hive = open_hive(plugins=[Looker()])
    number, _ = claimed(hive)
    clock.advance(minutes=31)
    own_task(hive)
    assert opened == [True, True]
    sweeps = [r for r in hive.history(number) if r.actor == "clock"]
    assert len(sweeps) == 1  # the handoff's own sweep, under its lock


READS: dict[str, Callable[[Hive], object]] = {
    "get": lambda hive: hive.get(1).task.id,
    "list": lambda hive: len(hive.list().items),
    "history": lambda hive: len(hive.history(1)),
    "journal": lambda hive: len(hive.journal()),
}


@pytest.mark.parametrize("trigger", [*TRIGGERS, "notifier", "startup"])
def test_every_hook_may_read(open_hive: OpenHive, db_path: Path, trigger: str) -> None:
    meddler = Meddler()
    hive = open_hive(plugins=[meddler])
    own_task(hive)
    meddler.action = lambda h: tuple(read(h) for read in READS.values())
    if trigger == "startup":
        meddler.hook = "hivelite_startup"
        open_hive(plugins=[meddler]).close()
    elif trigger == "notifier":
        meddler.hook = "hivelite_on_transition"
        number = own_task(hive)
        meddler.action(hive)  # nothing read fails outside a hook either
        hive.claim(CODER, number)
        assert not hive.notify_failures
    else:
        hook, prepare = TRIGGERS[trigger]
        meddler.hook = hook
        prepare(hive)()
    assert meddler.outcomes, "the hook was not asked"
    for _, value in meddler.outcomes:
        assert isinstance(value, tuple) and len(value) == len(READS)


def test_threads_do_not_share_the_mark(open_hive: OpenHive) -> None:
    """While one thread's gate runs, another thread writes through the same Hive."""
    entered, done = threading.Event(), threading.Event()
    wrote: list[int] = []

    class Waiting:
        @hivelite.hookimpl
        def hivelite_permission_gate(self, task: hivelite.Task) -> None:
            if task.project == "slow":
                entered.set()
                done.wait(HANG_S)

    hive = open_hive(plugins=[Waiting()])
    worker = threading.Thread(target=lambda: wrote.append(own_task(hive, project="slow")))
    worker.start()
    try:
        assert entered.wait(HANG_S)
        number = own_task(hive)
    finally:
        done.set()
        worker.join(HANG_S)
    assert hive.get(number).task.state is State.routed
    assert wrote == [number + 1]


# -- 2. the gate is asked before the write lock -----------------------------------------

OTHER_WRITER = textwrap.dedent("""
    import sys, time
    from hivelite import Caller, Hive, ManualClock

    path, start, task_id = sys.argv[1:4]
    began = time.monotonic()
    with Hive.open(path, owner="ana", clock=ManualClock(start)) as hive:
        hive.handoff(Caller.owner("ana"), id=task_id, requester="ana/planner",
                     assignee="ana/coder", project="other",
                     packet={"task": "Written by another process", "deliverable_type": "doc",
                             "acceptance_criteria": ["it exists"]})
    print(f"{time.monotonic() - began:.2f}")
""")


def other_process_writes(db_path: Path, task_id: str) -> subprocess.CompletedProcess[str]:
    """Another process hands off a task to the same store, and is waited for."""
    return subprocess.run([sys.executable, "-c", OTHER_WRITER, str(db_path), START, task_id],
                          capture_output=True, text=True, timeout=HANG_S,
                          env=clean_env())


def test_another_process_writes_while_a_gate_thinks(open_hive: OpenHive,
                                                    db_path: Path) -> None:
    """The gate itself waits for another process's write to the same store: had the gate
    held the write lock, that process would have waited out the busy timeout (10 s) and
    failed with store_busy."""
    runs: list[subprocess.CompletedProcess[str]] = []

    class WaitsForAnother:
        @hivelite.hookimpl
        def hivelite_permission_gate(self, task: hivelite.Task) -> None:
            if task.project == "slow":
                runs.append(other_process_writes(db_path, "from-elsewhere"))

    hive = open_hive(plugins=[WaitsForAnother()])
    receipt = hive.handoff(PLANNER, requester="ana/planner", assignee="ana/coder",
                           project="slow", packet=packet())

    [run] = runs
    assert run.returncode == 0, run.stderr
    assert float(run.stdout) < 8  # it never waited on the lock (the busy timeout is 10 s)
    other = hive.get("from-elsewhere")
    assert other.number == 1  # written while the gate was still deciding
    assert receipt.number == 2 and receipt.state is State.routed
    assert [r.number for r in hive.journal()] == [1, 1, 2, 2]


def test_a_slow_gate_does_not_block_a_thread_with_its_own_hive(open_hive: OpenHive) -> None:
    """A gate that sleeps up to 2 s; another thread's write (its own Hive on the same
    file) must land while the gate is still asleep."""
    entered, landed = threading.Event(), threading.Event()
    gate_saw_the_write: list[bool] = []

    class Sleepy:
        @hivelite.hookimpl
        def hivelite_permission_gate(self, task: hivelite.Task) -> None:
            if task.project == "slow":
                entered.set()
                gate_saw_the_write.append(landed.wait(2))

    slow_hive = open_hive(plugins=[Sleepy()])
    other_hive = open_hive()
    worker = threading.Thread(target=lambda: own_task(slow_hive, project="slow"))
    worker.start()
    try:
        assert entered.wait(HANG_S)
        own_task(other_hive, project="quick")
        landed.set()
    finally:
        worker.join(HANG_S)
    assert gate_saw_the_write == [True]  # the other write landed before the gate returned
    assert [v.task.project for v in other_hive.list().items] == ["quick", "slow"]


def test_an_id_taken_while_the_gate_thought_is_refused_under_the_lock(
        open_hive: OpenHive, db_path: Path) -> None:
    taken: list[subprocess.CompletedProcess[str]] = []

    class Slow:
        @hivelite.hookimpl
        def hivelite_permission_gate(self, task: hivelite.Task) -> None:
            if task.id == "contested":
                taken.append(other_process_writes(db_path, "contested"))

    hive = open_hive(plugins=[Slow()])
    with pytest.raises(InvalidInput) as err:
        own_task(hive, id="contested")
    assert err.value.reason == "duplicate_id"
    assert taken and taken[0].returncode == 0, taken[0].stderr if taken else "not asked"
    view = hive.get("contested")
    assert (view.number, view.task.project) == (1, "other")
    assert len(hive.journal()) == 2  # the other process's rows only


@pytest.mark.parametrize("doomed", [
    {"id": "first", "project": "elsewhere"},
    {"packet": packet(depends_on=["no-such-task"])},
], ids=["duplicate-id", "unknown-dependency"])
def test_the_gate_is_not_asked_about_a_handoff_that_cannot_be_made(
        open_hive: OpenHive, doomed: dict[str, Any]) -> None:
    asked: list[str] = []

    class Counter:
        @hivelite.hookimpl
        def hivelite_permission_gate(self, task: hivelite.Task) -> None:
            asked.append(task.id)

    hive = open_hive(plugins=[Counter()])
    own_task(hive, id="first")
    with pytest.raises(InvalidInput):
        own_task(hive, **doomed)
    assert asked == ["first"]


def test_the_gate_sees_the_task_as_it_will_be_created(open_hive: OpenHive) -> None:
    """Its generated id is the stored id; the store it reads is as it was before."""
    seen: list[tuple[str, str, int]] = []

    class Observer:
        @hivelite.hookimpl
        def hivelite_permission_gate(self, task: hivelite.Task, hive: Hive) -> None:
            seen.append((task.id, task.created_at, len(hive.list().items)))

    hive = open_hive(plugins=[Observer()])
    first = hive.get(own_task(hive))
    second = hive.get(own_task(hive))
    assert seen == [(first.task.id, first.task.created_at, 0),
                    (second.task.id, second.task.created_at, 1)]


def test_a_gate_is_asked_outside_any_transaction(open_hive: OpenHive,
                                                 db_path: Path) -> None:
    """No write lock is held while the gate runs: a raw writer gets it at once."""
    free: list[bool] = []

    class Prober:
        @hivelite.hookimpl
        def hivelite_permission_gate(self) -> None:
            conn = rawsql.connect(db_path)
            conn.set_busy_timeout(0)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
                free.append(True)
            except Exception:
                free.append(False)
            finally:
                conn.close()

    hive = open_hive(plugins=[Prober()])
    own_task(hive)
    assert free == [True]


# -- 3. a plugins folder only its owner can write ---------------------------------------

MARKER_PLUGIN = '''
"""Leaves a mark when imported, so a test can tell whether it ran."""
import pathlib

import hivelite

pathlib.Path(__file__).with_suffix(".ran").write_text("ran")


@hivelite.hookimpl
def hivelite_permission_gate(task):
    return None
'''


QUIET_PLUGIN = '''
import hivelite


@hivelite.hookimpl
def hivelite_permission_gate(task):
    return None
'''


def plugin_folder(tmp_path: Path, mode: int = 0o755, file_mode: int = 0o644,
                  body: str = MARKER_PLUGIN) -> Path:
    """A plugins folder with one plugin, ``marker.py``, in the modes given."""
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "marker.py").write_text(body)
    os.chmod(folder / "marker.py", file_mode)
    os.chmod(folder, mode)
    return folder


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o777, 0o1777, 0o720, 0o702])
def test_a_folder_others_can_write_is_refused(tmp_path: Path, db_path: Path,
                                              mode: int) -> None:
    folder = plugin_folder(tmp_path, mode)
    with pytest.raises(PluginError) as err:
        Hive.open(db_path, owner="ana", plugins_dir=folder)
    error = err.value
    assert error.reason == "plugin_failed" and error.hook == "load"
    assert error.plugin == str(folder)
    assert f"the plugins folder {folder} is writable by" in error.message
    assert f"chmod go-w {folder}" in error.message
    assert ("its group" in error.message) == bool(mode & 0o020)
    assert ("other users" in error.message) == bool(mode & 0o002)
    assert not (folder / "marker.ran").exists()  # nothing in it ran
    assert not db_path.exists()  # refused before the store was touched
    os.chmod(folder, 0o755)
    Hive.open(db_path, owner="ana", plugins_dir=folder).close()  # the fix it names works


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666, 0o622])
def test_a_plugin_file_others_can_write_is_refused(tmp_path: Path, db_path: Path,
                                                   mode: int) -> None:
    folder = plugin_folder(tmp_path, file_mode=mode)
    path = folder / "marker.py"
    with pytest.raises(PluginError) as err:
        Hive.open(db_path, owner="ana", plugins_dir=folder)
    assert (err.value.plugin, err.value.hook) == ("marker", "load")
    assert f"plugin file {path} is writable by" in err.value.message
    assert f"chmod go-w {path}" in err.value.message
    assert not (folder / "marker.ran").exists()
    os.chmod(path, 0o644)
    Hive.open(db_path, owner="ana", plugins_dir=folder).close()
    assert (folder / "marker.ran").exists()


@pytest.mark.parametrize(("mode", "file_mode"),
                         [(0o700, 0o600), (0o755, 0o644), (0o750, 0o640), (0o555, 0o444)])
def test_private_and_read_only_folders_load(tmp_path: Path, db_path: Path, mode: int,
                                            file_mode: int) -> None:
    folder = plugin_folder(tmp_path, mode, file_mode, body=QUIET_PLUGIN)
    with Hive.open(db_path, owner="ana", plugins_dir=folder) as hive:
        assert "marker" in [p["name"] for p in hive.plugins.describe()]
    assert sorted(p.name for p in folder.iterdir()) == ["marker.py"]  # nothing written there


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="only root can give a folder to another user")
@pytest.mark.parametrize("what", ["folder", "file"])
def test_a_folder_or_file_of_another_user_is_refused(tmp_path: Path, what: str) -> None:
    folder = plugin_folder(tmp_path)
    target = folder if what == "folder" else folder / "marker.py"
    os.chown(target, 4321, -1)
    with pytest.raises(PluginError) as err:
        get_plugin_manager(folder)
    assert f"{target} belongs to user 4321, not to you (user 0)" in err.value.message
    assert not (folder / "marker.ran").exists()


def test_the_environment_s_folder_is_checked_too(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    folder = plugin_folder(tmp_path, 0o777)
    monkeypatch.setenv("HIVELITE_PLUGINS_DIR", str(folder))
    with pytest.raises(PluginError) as err:
        get_plugin_manager()
    assert f"chmod go-w {folder}" in err.value.message


def test_a_folder_reached_through_a_symlink_is_checked_where_it_is(tmp_path: Path) -> None:
    folder = plugin_folder(tmp_path, 0o777)
    link = tmp_path / "link"
    link.symlink_to(folder)
    with pytest.raises(PluginError) as err:
        get_plugin_manager(link)
    assert "is writable by" in err.value.message


def test_the_cli_refuses_and_says_how_to_fix_it(tmp_path: Path) -> None:
    folder = plugin_folder(tmp_path, 0o777)
    run = subprocess.run([str(hivelite_script()), "--plugins-dir", str(folder), "plugins"],
                         capture_output=True, text=True, timeout=HANG_S, env=clean_env(),
                         cwd=tmp_path)
    assert run.returncode == 1
    assert "plugin_error/plugin_failed" in run.stderr
    assert f"chmod go-w {folder}" in run.stderr
    assert "Traceback" not in run.stderr


def test_no_bytecode_is_read_from_or_written_to_the_folder(tmp_path: Path) -> None:
    """A cached ``.pyc`` beside a checked source could run instead of it: the source is
    compiled from the very file checked, and no cache is read or written."""
    folder = plugin_folder(tmp_path)
    source = folder / "marker.py"
    evil = tmp_path / "evil.py"  # as long as the real source, so the cache would match
    body = "import pathlib\npathlib.Path(__file__).with_suffix('.evil').write_text('x')\n"
    evil.write_text(body + "#" * (len(MARKER_PLUGIN) - len(body) - 1) + "\n")
    assert evil.stat().st_size == source.stat().st_size
    stamp = source.stat().st_mtime_ns
    os.utime(evil, ns=(stamp, stamp))
    py_compile.compile(str(evil), cfile=cache_from_source(str(source)), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    os.chmod(folder / "__pycache__", 0o755)

    get_plugin_manager(folder)
    assert (folder / "marker.ran").exists()
    assert not list(folder.glob("*.evil"))

    cache = folder / "__pycache__"
    for old in cache.iterdir():
        old.unlink()
    get_plugin_manager(folder)
    assert list(cache.iterdir()) == []


def test_a_plugin_file_keeps_its_name_and_file(tmp_path: Path) -> None:
    folder = plugin_folder(tmp_path)
    (folder / "named.py").write_text(textwrap.dedent("""
        import hivelite

        WHERE = (__name__, __file__)


        @hivelite.hookimpl
        def hivelite_permission_gate(task):
            return None
    """))
    pm = get_plugin_manager(folder)
    module = pm.get_plugin("named")
    assert isinstance(module, types.ModuleType)
    assert ("hivelite_plugins_dir.named", str(folder / "named.py")) == module.WHERE
