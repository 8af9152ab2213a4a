"""The owner's policy plugins are bound to the store (issue 16; DESIGN §10).

The owner requires a policy plugin (one answering the gate, threshold, evidence or count
hooks) as the requiring process loaded it: its code (a plugin file's hash, a given
object's class) and its settings (``[name]`` of ``hivelite.toml`` beside the store). Every
process that writes must load exactly those: one that lacks it (``policy_missing``), runs
other code or settings (``policy_changed``) or adds a policy plugin of its own
(``policy_unapproved``) is refused before it writes, and nothing is written. It may still
read, and the owner's controls (hold, veto, stop, lift, budgets, the policy itself) are
never refused, so the owner can always stop an agent or mend the policy.

The issue's motivating case: a worker that opened the store without the owner's plugin
completed a code task on one confirmation instead of the two the policy asks for.

Plugins here are real files in a real plugins folder (owner-only modes, as the loader
insists), and every process is a real ``Hive.open`` on one store file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import hivelite
from hivelite import (
    Caller,
    ClaimReceipt,
    ForbiddenRight,
    Hive,
    InvalidInput,
    ManualClock,
    NotFound,
    State,
)
from hivelite.core.clock import format_ts
from hivelite.verbs.authority import short

from . import rawsql
from .conftest import CODER, GUEST, OWNER, PLANNER, REVIEWER, Snap, packet, refused
from .test_results import Threshold

PLUGIN = "needs_two"
"""The owner's policy plugin: a threshold of two confirmations (or its ``n`` setting)."""
NEEDS_TWO = '''"""Code needs two confirmations (the [needs_two] table's n, when set)."""
import hivelite


@hivelite.hookimpl
def hivelite_merge_threshold(task, hive):
    return int(hive.settings("needs_two").get("n", 2))
'''
NEEDS_THREE = NEEDS_TWO.replace('get("n", 2)', 'get("n", 3)')
SECOND_OPINION = '''"""A second policy plugin: it finds nothing wrong with any evidence."""
import hivelite


@hivelite.hookimpl
def hivelite_check_evidence(task, result, hive):
    return []
'''
EVIDENCE: list[dict[str, Any]] = [{"kind": "test_output", "summary": "3 passed"}]
ON_TABLET = Caller.agent("ana/second", "tablet")
BUILT_INS = {"hivelite.default_gate", "hivelite.default_threshold"}




class Notifier:
    """Not a policy plugin: it only hears of moves."""

    def __init__(self) -> None:
        self.heard: list[int] = []

    @hivelite.hookimpl
    def hivelite_on_transition(self, task: hivelite.Task, move: Any, actor: str, hive: Hive,
                               entry: Any) -> None:
        self.heard.append(move.number)


# -- fixtures ---------------------------------------------------------------------


@pytest.fixture(autouse=True)
def no_outside_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process "without the plugin" must really have none: no folder or settings file
    from the environment."""
    for name in ("HIVELITE_PLUGINS_DIR", "HIVELITE_CONFIG", "HIVELITE_LOAD_PLUGINS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A plugins folder (0700) holding ``needs_two.py`` (0600)."""
    path = tmp_path / "plugins"
    path.mkdir(mode=0o700)
    path.chmod(0o700)
    write_plugin(path, PLUGIN, NEEDS_TWO)
    return path


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """The store file, in a folder of its own (its ``hivelite.toml`` goes beside it)."""
    path = tmp_path / "store"
    path.mkdir()
    return path / "hive.db"


Opener = Callable[..., Hive]


@pytest.fixture
def open_(store_path: Path, clock: ManualClock) -> Iterator[Opener]:
    """Open another process's ``Hive`` on the one store file (owner ana, the test's clock);
    every one is closed at the end."""
    opened: list[Hive] = []

    def opener(**options: Any) -> Hive:
        hive = Hive.open(store_path, owner="ana", clock=clock, **options)
        opened.append(hive)
        return hive

    yield opener
    for hive in opened:
        hive.close()


def write_plugin(folder: Path, name: str, source: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    path.chmod(0o600)
    return path


def digest_of(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def write_settings(store_path: Path, text: str) -> None:
    (store_path.parent / "hivelite.toml").write_text(text, encoding="utf-8")






def handoff(hive: Hive, caller: Caller = OWNER, **overrides: Any) -> int:
    fields: dict[str, Any] = {"requester": "ana/planner", "assignee": CODER.name,
                              "project": "demo", "packet": packet()}
    fields.update(overrides)
    return hive.handoff(caller, **fields).number


def submit(hive: Hive, n: int, lease: ClaimReceipt) -> State:
    return hive.submit(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token,
                       summary="done", evidence=EVIDENCE).state


def awaiting(hive: Hive, n: int) -> dict[str, Any] | None:
    """The detail of the move that judged the result (13 or 14)."""
    return [j for j in hive.history(n) if j.move in (13, 14)][-1].detail


def status_of(hive: Hive) -> dict[str, tuple[str, bool, bool]]:
    """Each plugin's (status, loaded, required), by name."""
    return {s.name: (s.status, s.loaded, s.required) for s in hive.plugin_status()}


# -- requiring a plugin -----------------------------------------------------------


def test_require_plugin_records_the_file_as_this_process_loaded_it(
        open_: Opener, folder: Path, clock: ManualClock) -> None:
    """The requirement names the file's hash and its (empty) settings, is journaled, and
    the requiring process writes on as before."""
    owner = open_(plugins_dir=folder)
    view = owner.require_plugin(OWNER, PLUGIN)
    assert (view.name, view.kind, view.digest, view.settings, view.by, view.at) == (
        PLUGIN, "file", digest_of(folder / "needs_two.py"), {PLUGIN: {}}, "ana",
        format_ts(clock()))
    assert owner.policy().required_plugins == [view]
    [event] = [j for j in owner.journal() if j.reason == "policy require"]
    assert (event.task, event.actor) == (None, "ana")
    assert event.detail == {"plugin": PLUGIN, "kind": "file", "digest": view.digest,
                            "settings": {PLUGIN: {}}}
    assert owner.get(handoff(owner)).task.state is State.routed


def test_the_requirement_is_read_by_every_process(open_: Opener, folder: Path) -> None:
    """Another process sees the requirement in the store's policy."""
    open_(plugins_dir=folder).require_plugin(OWNER, PLUGIN)
    other = open_()
    assert [r.name for r in other.policy().required_plugins] == [PLUGIN]


@pytest.mark.parametrize("name", ["nope", "hivelite.default_threshold",
                                  "hivelite.default_gate", "Notifier", "NEEDS_TWO"])
def test_require_plugin_refuses_what_is_not_a_loaded_policy_plugin(
        open_: Opener, folder: Path, store_path: Path, name: str) -> None:
    """Not loaded, a built-in, or a plugin answering no policy hook: 422 unknown_plugin,
    nothing written."""
    owner = open_(plugins_dir=folder, plugins=[Notifier()])
    refused(lambda: rawsql.snapshot_file(store_path), InvalidInput, "unknown_plugin",
            lambda: owner.require_plugin(OWNER, name))
    assert owner.policy().required_plugins == []


@pytest.mark.parametrize("who", [PLANNER, CODER, GUEST])
def test_agents_cannot_require_or_unrequire(open_: Opener, folder: Path, store_path: Path,
                                            who: Caller) -> None:
    """Only the owner binds the store: 403 not_permitted for any agent."""
    owner = open_(plugins_dir=folder)
    snap: Snap = lambda: rawsql.snapshot_file(store_path)  # noqa: E731
    refused(snap, ForbiddenRight, "not_permitted", lambda: owner.require_plugin(who, PLUGIN))
    owner.require_plugin(OWNER, PLUGIN)
    refused(snap, ForbiddenRight, "not_permitted",
            lambda: owner.unrequire_plugin(who, PLUGIN))


def test_unrequire_a_plugin_not_required_is_404(open_: Opener, folder: Path,
                                                store_path: Path) -> None:
    """404 not_required, nothing written."""
    owner = open_(plugins_dir=folder)
    err = refused(lambda: rawsql.snapshot_file(store_path), NotFound, "not_required",
                  lambda: owner.unrequire_plugin(OWNER, PLUGIN))
    assert PLUGIN in err.message


def test_unrequire_frees_the_other_processes_and_is_journaled(open_: Opener,
                                                              folder: Path) -> None:
    """Once unrequired, a process without the plugin writes again."""
    owner = open_(plugins_dir=folder)
    owner.require_plugin(OWNER, PLUGIN)
    bare = open_()
    with pytest.raises(ForbiddenRight):
        handoff(bare)
    owner.unrequire_plugin(OWNER, PLUGIN)
    assert bare.get(handoff(bare)).task.state is State.routed
    [event] = [j for j in owner.journal() if j.reason == "policy unrequire"]
    assert (event.task, event.actor, event.detail) == (None, "ana", {"plugin": PLUGIN})
    assert owner.policy().required_plugins == []


# -- a process without the plugin -------------------------------------------------


@dataclass
class Scene:
    """A store that requires ``needs_two``, with a task in each state a write needs, and
    a process (``bare``) that has not loaded the plugin."""

    owner: Hive
    bare: Hive
    routed: int
    held: int
    claimed: int
    lease: ClaimReceipt
    approval: int
    done: int
    snap: Snap


@pytest.fixture
def scene(open_: Opener, folder: Path, store_path: Path) -> Scene:
    owner = open_(plugins_dir=folder)
    owner.require_plugin(OWNER, PLUGIN)
    routed = handoff(owner)
    held = handoff(owner, GUEST, requester=GUEST.name)
    claimed = handoff(owner)
    lease = owner.claim(CODER, claimed)
    approval = handoff(owner)
    assert submit(owner, approval, owner.claim(CODER, approval)) is State.approval
    done = handoff(owner)
    assert submit(owner, done, owner.claim(CODER, done)) is State.approval
    owner.verify(REVIEWER, done)
    assert owner.verify(ON_TABLET, done).state is State.completed
    return Scene(owner, open_(), routed, held, claimed, lease, approval, done,
                 lambda: rawsql.snapshot_file(store_path))


def fenced(s: Scene) -> dict[str, Any]:
    return {"lease_id": s.lease.lease_id, "token": s.lease.fencing_token}


WRITES: dict[str, Callable[[Scene], object]] = {
    "owner handoff": lambda s: handoff(s.bare),
    "agent handoff": lambda s: handoff(s.bare, PLANNER),
    "claim": lambda s: s.bare.claim(CODER, s.routed),
    "claim next": lambda s: s.bare.claim_next(CODER),
    "renew": lambda s: s.bare.renew(CODER, s.claimed, **fenced(s)),
    "checkpoint": lambda s: s.bare.checkpoint(CODER, s.claimed, progress="halfway",
                                              **fenced(s)),
    "update": lambda s: s.bare.update(CODER, s.claimed, summary="halfway", **fenced(s)),
    "pause": lambda s: s.bare.pause(CODER, s.claimed, on="human", reason="a question",
                                    **fenced(s)),
    "release": lambda s: s.bare.release(CODER, s.claimed, **fenced(s)),
    "submit": lambda s: s.bare.submit(CODER, s.claimed, summary="done", evidence=EVIDENCE,
                                      **fenced(s)),
    "verify": lambda s: s.bare.verify(REVIEWER, s.approval),
    "reject": lambda s: s.bare.verify(REVIEWER, s.approval, verdict="reject",
                                      reason="wrong"),
    "sign off": lambda s: s.bare.sign_off(OWNER, s.approval),
    "decline": lambda s: s.bare.decline(OWNER, s.approval, reason="wrong"),
    "amend": lambda s: s.bare.amend(CODER, s.approval, summary="better"),
    "merge": lambda s: s.bare.amend(CODER, s.done, merge_commit="abc1234"),
    "approve": lambda s: s.bare.approve(OWNER, s.held),
    "deny": lambda s: s.bare.deny(OWNER, s.held),
    "cancel": lambda s: s.bare.cancel(OWNER, s.routed),
    "fields": lambda s: s.bare.set_fields(OWNER, s.routed, base_version=1, priority="high"),
    "expire": lambda s: s.bare.expire(OWNER),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_process_without_the_required_plugin_writes_nothing(scene: Scene,
                                                              write: str) -> None:
    """Every write, by the owner or an agent, is 403 policy_missing naming the plugin."""
    err = refused(scene.snap, ForbiddenRight, "policy_missing",
                  lambda: WRITES[write](scene))
    assert err.extra["plugin"] == PLUGIN
    assert "nothing was written" in err.message


@pytest.mark.parametrize("write", ["claim", "checkpoint", "verify", "cancel"])
def test_the_same_writes_pass_from_the_process_with_the_plugin(scene: Scene,
                                                               write: str) -> None:
    """The control: the requiring process itself is admitted (so the refusal above is the
    binding's, not the write's)."""
    scene.bare = scene.owner
    WRITES[write](scene)


def test_a_process_without_the_plugin_may_still_read(scene: Scene) -> None:
    """Reading asks no policy: get, list, history, journal, policy, status, controls."""
    bare = scene.bare
    assert bare.get(scene.approval).task.state is State.approval
    assert {v.number for v in bare.list(limit=50).items} == {
        scene.routed, scene.held, scene.claimed, scene.approval, scene.done}
    assert bare.history(scene.done)[-1].to_state is State.completed
    assert any(j.reason == "policy require" for j in bare.journal())
    assert [r.name for r in bare.policy().required_plugins] == [PLUGIN]
    assert bare.controls() == [] and bare.budgets() == []
    assert status_of(bare)[PLUGIN] == ("missing", False, True)


def test_a_refused_write_also_leaves_an_overdue_claim_alone(scene: Scene,
                                                           clock: ManualClock) -> None:
    """The expiry sweep runs in the refused write's transaction, so it is rolled back with
    it: the overdue claim is still there for an admitted process to end."""
    clock.advance(minutes=11)
    refused(scene.snap, ForbiddenRight, "policy_missing", lambda: handoff(scene.bare))
    assert scene.bare.get(scene.claimed).task.state is State.accepted
    [ended] = scene.owner.expire(OWNER)
    assert (ended.number, ended.holder) == (scene.claimed, CODER.name)


def test_the_owners_controls_are_never_refused_for_a_missing_plugin(scene: Scene) -> None:
    """hold, veto, stop, lift, budgets and the policy itself work from the bare process, so
    the owner can always stop an agent; a stop ends the live claim as expiry would."""
    bare = scene.bare
    hold = bare.hold(OWNER, agent=CODER.name, reason="pause")
    assert scene.owner.get(scene.claimed).task.state is State.routed  # the hold ended it
    bare.lift(OWNER, hold.id)
    veto = bare.veto(OWNER, scene.routed, agent=CODER.name)
    bare.lift(OWNER, veto.id)
    stop = bare.stop(OWNER, everyone=True)
    bare.lift(OWNER, stop.id)
    assert bare.set_budget(OWNER, CODER.name, tasks=3).tasks == 3
    bare.clear_budget(OWNER, CODER.name)
    assert bare.set_policy(OWNER, "threshold", 2).threshold == 2
    assert bare.set_policy(OWNER, "mode", "team").mode == "team"
    with pytest.raises(InvalidInput) as err:  # it cannot require what it has not loaded
        bare.require_plugin(OWNER, PLUGIN)
    assert err.value.reason == "unknown_plugin"
    bare.unrequire_plugin(OWNER, PLUGIN)  # ... but may mend the policy by dropping it
    assert bare.get(handoff(bare)).task.state is State.routed


# -- a changed plugin, changed settings, an extra plugin --------------------------


def test_a_changed_plugin_file_is_refused_until_the_owner_requires_it_again(
        open_: Opener, folder: Path, store_path: Path) -> None:
    """Other code under the same name is policy_changed; re-requiring it from a process
    that loaded the new file admits that code and refuses the old."""
    old = open_(plugins_dir=folder)
    required = old.require_plugin(OWNER, PLUGIN)
    path = write_plugin(folder, PLUGIN, NEEDS_THREE)
    new = open_(plugins_dir=folder)
    snap: Snap = lambda: rawsql.snapshot_file(store_path)  # noqa: E731
    err = refused(snap, ForbiddenRight, "policy_changed", lambda: handoff(new))
    assert err.extra["plugin"] == PLUGIN
    assert (err.extra["approved"], err.extra["loaded"]) == (required.digest, digest_of(path))
    assert required.digest not in err.message  # a message cuts hashes to 12 characters
    assert short(required.digest) in err.message and short(digest_of(path)) in err.message
    assert len(short(required.digest).rpartition(":")[2]) == 13  # 12 and the ellipsis
    [status] = [s for s in new.plugin_status() if s.name == PLUGIN]
    assert status.status == "changed" and status.detail is not None
    assert handoff(old) > 0  # the approved code still writes
    again = new.require_plugin(OWNER, PLUGIN)
    assert again.digest == digest_of(path) != required.digest
    n = handoff(new)
    lease = new.claim(CODER, n)
    assert submit(new, n, lease) is State.approval
    assert awaiting(new, n) == {"threshold": 3, "decided_by": PLUGIN}
    refused(snap, ForbiddenRight, "policy_changed", lambda: handoff(old))
    assert status_of(new)[PLUGIN] == ("ok", True, True)


def test_settings_are_part_of_the_requirement(open_: Opener, folder: Path,
                                              store_path: Path) -> None:
    """The plugin's ``[needs_two]`` table is recorded; a process whose table differs is
    policy_changed (status settings_differ) until the owner requires it again."""
    write_settings(store_path, "[needs_two]\nn = 2\n")
    first = open_(plugins_dir=folder)
    assert first.settings(PLUGIN) == {"n": 2}
    assert first.require_plugin(OWNER, PLUGIN).settings == {PLUGIN: {"n": 2}}
    write_settings(store_path, "[needs_two]\nn = 4\n")
    second = open_(plugins_dir=folder)
    snap: Snap = lambda: rawsql.snapshot_file(store_path)  # noqa: E731
    err = refused(snap, ForbiddenRight, "policy_changed", lambda: handoff(second))
    assert err.extra["plugin"] == PLUGIN and "settings" in err.message
    [status] = [s for s in second.plugin_status() if s.name == PLUGIN]
    assert status.status == "settings_differ" and status.detail is not None
    assert second.require_plugin(OWNER, PLUGIN).settings == {PLUGIN: {"n": 4}}
    n = handoff(second)
    assert submit(second, n, second.claim(CODER, n)) is State.approval
    assert awaiting(second, n) == {"threshold": 4, "decided_by": PLUGIN}
    refused(snap, ForbiddenRight, "policy_changed", lambda: handoff(first))


def test_settings_the_plugin_never_reads_still_bind(open_: Opener, folder: Path,
                                                    store_path: Path) -> None:
    """Removing the table (the plugin's default then applies) is a change of settings."""
    write_settings(store_path, "[needs_two]\nn = 2\n")
    open_(plugins_dir=folder).require_plugin(OWNER, PLUGIN)
    write_settings(store_path, "")
    refused(lambda: rawsql.snapshot_file(store_path), ForbiddenRight, "policy_changed",
            lambda: handoff(open_(plugins_dir=folder)))


def test_the_same_file_in_another_folder_is_the_same_plugin(open_: Opener, folder: Path,
                                                            tmp_path: Path) -> None:
    """A file is identified by its content, not by where it lies: a worker's own copy of
    the owner's file is admitted."""
    open_(plugins_dir=folder).require_plugin(OWNER, PLUGIN)
    elsewhere = tmp_path / "workers-plugins"
    elsewhere.mkdir(mode=0o700)
    elsewhere.chmod(0o700)
    write_plugin(elsewhere, PLUGIN, NEEDS_TWO)
    worker = open_(plugins_dir=elsewhere)
    n = handoff(worker)
    assert worker.claim(CODER, n).state is State.accepted
    assert status_of(worker)[PLUGIN] == ("ok", True, True)


def test_an_extra_policy_plugin_file_is_unapproved(open_: Opener, folder: Path,
                                                   store_path: Path) -> None:
    """A process that adds a policy plugin the store does not require is refused
    (policy_unapproved, naming it); its status is not_required."""
    open_(plugins_dir=folder).require_plugin(OWNER, PLUGIN)
    write_plugin(folder, "second_opinion", SECOND_OPINION)
    extra = open_(plugins_dir=folder)
    err = refused(lambda: rawsql.snapshot_file(store_path), ForbiddenRight,
                  "policy_unapproved", lambda: handoff(extra))
    assert err.extra["plugin"] == "second_opinion"
    assert status_of(extra)["second_opinion"] == ("not_required", True, False)
    assert status_of(extra)[PLUGIN] == ("ok", True, True)
    extra.require_plugin(OWNER, "second_opinion")  # the owner approves it too
    assert handoff(extra) > 0


def test_an_extra_given_policy_plugin_is_unapproved(open_: Opener, folder: Path,
                                                    store_path: Path) -> None:
    """The same for a plugin object handed to ``Hive.open``."""
    owner = open_(plugins_dir=folder)
    owner.require_plugin(OWNER, PLUGIN)
    n = handoff(owner)
    extra = open_(plugins_dir=folder, plugins=[Threshold(1)])
    err = refused(lambda: rawsql.snapshot_file(store_path), ForbiddenRight,
                  "policy_unapproved", lambda: extra.claim(CODER, n))
    assert err.extra["plugin"] == "Threshold"


def test_a_plugin_that_decides_nothing_may_be_added(open_: Opener, folder: Path) -> None:
    """A notifier is not a policy plugin: the store does not bind it (status not_policy)."""
    open_(plugins_dir=folder).require_plugin(OWNER, PLUGIN)
    notifier = Notifier()
    hive = open_(plugins_dir=folder, plugins=[notifier])
    n = handoff(hive)
    hive.claim(CODER, n)
    assert notifier.heard == [1, 6]
    assert status_of(hive)["Notifier"] == ("not_policy", True, False)


def test_a_given_plugin_is_required_by_its_class(open_: Opener, store_path: Path) -> None:
    """``plugins=[obj]``: kind given, named by its module and class and the hash of the
    class's source; a process without it is policy_missing."""
    import inspect

    owner = open_(plugins=[Threshold(2)])
    view = owner.require_plugin(OWNER, "Threshold")
    source = hashlib.sha256(inspect.getsource(Threshold).encode()).hexdigest()[:16]
    named = f"{Threshold.__module__}.Threshold sha256:{source}"
    assert (view.kind, view.digest) == ("given", named)
    err = refused(lambda: rawsql.snapshot_file(store_path), ForbiddenRight, "policy_missing",
                  lambda: handoff(open_()))
    assert err.extra["plugin"] == "Threshold"
    other = open_(plugins=[Threshold(2)])
    n = handoff(other)
    assert submit(other, n, other.claim(CODER, n)) is State.approval
    assert awaiting(other, n) == {"threshold": 2, "decided_by": "Threshold"}


def test_a_second_required_plugin_missing_is_named(open_: Opener, folder: Path,
                                                   store_path: Path) -> None:
    """With two required, a process that has only one is refused naming the other."""
    write_plugin(folder, "second_opinion", SECOND_OPINION)
    owner = open_(plugins_dir=folder)
    owner.require_plugin(OWNER, PLUGIN)
    owner.require_plugin(OWNER, "second_opinion")
    only_one = open_(plugins=[Threshold(2)])
    err = refused(lambda: rawsql.snapshot_file(store_path), ForbiddenRight, "policy_missing",
                  lambda: handoff(only_one))
    assert err.extra["plugin"] == PLUGIN
    (folder / "second_opinion.py").unlink()
    err = refused(lambda: rawsql.snapshot_file(store_path), ForbiddenRight, "policy_missing",
                  lambda: handoff(open_(plugins_dir=folder)))
    assert err.extra["plugin"] == "second_opinion"


# -- a store that requires nothing, and the status -------------------------------


def test_a_store_that_requires_nothing_binds_nothing(open_: Opener, folder: Path) -> None:
    """Before the owner requires anything, any process writes with any plugins: which is
    how a bare worker completed a code task on one confirmation, not the owner's two."""
    owner = open_(plugins_dir=folder)
    bare = open_()
    extra = open_(plugins=[Threshold(5)])
    for hive in (owner, bare, extra):
        assert hive.get(handoff(hive)).task.state is State.routed
    n = handoff(owner)
    assert submit(bare, n, bare.claim(CODER, n)) is State.approval
    assert awaiting(bare, n) == {"threshold": 1, "decided_by": "store policy"}
    assert bare.verify(REVIEWER, n).state is State.completed  # one, not two
    assert status_of(owner)[PLUGIN] == ("ok", True, False)


def test_the_motivating_case_the_bare_worker_is_refused(open_: Opener, folder: Path,
                                                        store_path: Path) -> None:
    """Issue 16: with ``needs_two`` required, the worker that opened the store without it
    can neither claim nor submit nor confirm; through a process that loads it, one
    confirmation leaves the code task in approval and the second completes it."""
    owner = open_(plugins_dir=folder)
    owner.require_plugin(OWNER, PLUGIN)
    bare = open_()
    snap: Snap = lambda: rawsql.snapshot_file(store_path)  # noqa: E731
    n = handoff(owner)
    refused(snap, ForbiddenRight, "policy_missing", lambda: bare.claim(CODER, n))
    lease = owner.claim(CODER, n)
    refused(snap, ForbiddenRight, "policy_missing", lambda: submit(bare, n, lease))
    assert submit(owner, n, lease) is State.approval
    assert awaiting(owner, n) == {"threshold": 2, "decided_by": PLUGIN}
    refused(snap, ForbiddenRight, "policy_missing", lambda: bare.verify(REVIEWER, n))
    assert owner.verify(REVIEWER, n).state is State.approval
    assert bare.get(n).task.state is State.approval
    assert owner.verify(ON_TABLET, n).state is State.completed


def test_plugin_status_shows_each_plugin_against_the_requirement(
        open_: Opener, folder: Path) -> None:
    """built_in for the two built-ins, ok for the required one, not_policy for a notifier,
    not_required for an unrequired policy plugin, missing where it is not loaded."""
    owner = open_(plugins_dir=folder, plugins=[Notifier()])
    owner.require_plugin(OWNER, PLUGIN)
    statuses = {s.name: s for s in owner.plugin_status()}
    assert {n for n, s in statuses.items() if s.status == "built_in"} == BUILT_INS
    assert all(statuses[n].essential and not statuses[n].required for n in BUILT_INS)
    mine = statuses[PLUGIN]
    assert (mine.status, mine.policy, mine.required, mine.loaded, mine.essential) == (
        "ok", True, True, True, False)
    assert mine.hooks == ["hivelite_merge_threshold"]
    assert mine.source.startswith("file ") and mine.source.endswith("needs_two.py")
    assert statuses["Notifier"].status == "not_policy"
    given = open_(plugins=[Threshold(1)])
    assert status_of(given)["Threshold"] == ("not_required", True, False)
    assert status_of(given)[PLUGIN] == ("missing", False, True)
    [missing] = [s for s in given.plugin_status() if s.name == PLUGIN]
    assert missing.policy and missing.source.startswith("file sha256:")


def test_a_copy_of_a_bound_store_is_bound_as_well(open_: Opener, folder: Path,
                                                   store_path: Path, tmp_path: Path) -> None:
    """The requirement is a row of the store: an export imported elsewhere keeps it, so
    moving a store does not drop its policy."""
    import apsw

    from hivelite.store import SqliteStore
    from hivelite.store.transfer import export_lines, import_lines

    owner = open_(plugins_dir=folder)
    owner.require_plugin(OWNER, PLUGIN)
    source = apsw.Connection(str(store_path))
    lines = list(export_lines(source))
    source.close()
    assert any('"table": "required_plugins"' in line for line in lines)
    copy = tmp_path / "copy.db"
    store = SqliteStore(copy)
    import_lines(store.conn, lines)
    store.close()
    with Hive.open(copy, clock=ManualClock("2026-12-02T09:00:00.000Z")) as bare:
        with pytest.raises(ForbiddenRight) as err:
            handoff(bare)
        assert (err.value.reason, err.value.extra["plugin"]) == ("policy_missing", PLUGIN)
    with Hive.open(copy, plugins_dir=folder,
                   clock=ManualClock("2026-12-02T09:00:00.000Z")) as bound:
        assert bound.get(handoff(bound)).task.state is State.routed
