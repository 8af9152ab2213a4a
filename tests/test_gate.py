"""The owner's permission gate as plugins see it (DESIGN §3 moves 1-3, §8, §9).

Every gate plugin here is a real plugin object handed to ``Hive.open``: a class
instance or a module with ``@hivelite.hookimpl`` functions, or a ``.py`` file
in a plugins folder. The built-in gate (``hivelite.default_gate``) is always
there too: it allows a handoff between the owner's own agents, holds any
other and never denies.
"""

from __future__ import annotations

import itertools
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

import hivelite
from hivelite import GateDecision, Hive, PluginError, State, WaitingOn

from . import rawsql
from .conftest import GUEST, OWNER, OpenHive, held_task, own_task, packet

BUILT_IN = "hivelite.default_gate"
HOOK = "hivelite_permission_gate"

EXPECTED: dict[str, tuple[State, WaitingOn | None]] = {
    "allow": (State.routed, None),
    "hold": (State.waiting, WaitingOn.owner_approval),
    "deny": (State.rejected, None),
}
GATE_MOVE = {"allow": 1, "hold": 2, "deny": 3}


# -- helpers -----------------------------------------------------------------


def gate_module(name: str, answer: Any) -> types.ModuleType:
    """A module-like plugin named ``name`` whose gate returns ``answer`` (or calls it)."""

    @hivelite.hookimpl
    def hivelite_permission_gate(task: hivelite.Task, hive: Hive) -> Any:
        return answer(task, hive) if callable(answer) else answer

    module = types.ModuleType(name)
    module.hivelite_permission_gate = hivelite_permission_gate  # type: ignore[attr-defined]
    return module


class AllowGate:
    """A class-instance plugin that always allows."""

    @hivelite.hookimpl
    def hivelite_permission_gate(self, task: hivelite.Task, hive: Hive) -> GateDecision:
        return GateDecision(action="allow", reason="AllowGate: fine by me")


class HoldGate:
    """A class-instance plugin that always holds."""

    @hivelite.hookimpl
    def hivelite_permission_gate(self, task: hivelite.Task, hive: Hive) -> GateDecision:
        return GateDecision(action="hold", reason="HoldGate: ask ana first")


class DenyGate:
    """A class-instance plugin that always denies."""

    @hivelite.hookimpl
    def hivelite_permission_gate(self, task: hivelite.Task, hive: Hive) -> GateDecision:
        return GateDecision(action="deny", reason="DenyGate: not on my watch")


GATE_CLASSES: dict[str, type] = {"allow": AllowGate, "hold": HoldGate, "deny": DenyGate}
GATE_REASONS = {"allow": "AllowGate: fine by me", "hold": "HoldGate: ask ana first",
                "deny": "DenyGate: not on my watch"}


snapshot = rawsql.snapshot_file


def gate_row(hive: Hive, number: int) -> hivelite.JournalEntry:
    """The journal row of a task's gate move (the one out of ``requested``)."""
    rows = [r for r in hive.history(number) if r.from_state is State.requested]
    assert len(rows) == 1, rows
    return rows[0]


# -- the built-in gate -------------------------------------------------------


def test_built_in_gate_allows_own_agents_and_holds_others(open_hive: OpenHive) -> None:
    hive = open_hive()
    own = hive.get(own_task(hive))
    held = hive.get(held_task(hive))
    other_assignee = hive.get(own_task(hive, assignee="bob/coder"))
    assert (own.task.state, own.task.waiting_on) == (State.routed, None)
    assert (held.task.state, held.task.waiting_on) == (State.waiting, WaitingOn.owner_approval)
    assert other_assignee.task.state is State.waiting
    row = gate_row(hive, own.number)
    assert row.actor == "gate"
    assert row.detail is not None
    assert row.detail["decided_by"] == BUILT_IN
    assert [a["plugin"] for a in row.detail["answers"]] == [BUILT_IN]
    assert gate_row(hive, held.number).detail["decided_by"] == BUILT_IN  # type: ignore[index]


# -- one plugin ---------------------------------------------------------------


@pytest.mark.parametrize("action", ["allow", "hold", "deny"])
def test_string_answer(open_hive: OpenHive, action: str) -> None:
    hive = open_hive(plugins=[gate_module("words", action)])
    receipt = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                           project="demo", packet=packet())
    assert (receipt.state, receipt.waiting_on) == EXPECTED[action]
    view = hive.get(receipt.number)
    assert (view.task.state, view.task.waiting_on) == EXPECTED[action]
    row = gate_row(hive, view.number)
    assert receipt.seq == row.seq  # the gate's move is the handoff's last journal row
    assert row.actor == "gate"
    assert row.move == GATE_MOVE[action]
    assert row.to_state is EXPECTED[action][0]
    assert row.waiting_on is EXPECTED[action][1]
    assert row.reason  # a string answer still leaves a reason in the journal
    assert view.last_reason == row.reason
    assert row.detail is not None
    mine = [a for a in row.detail["answers"] if a["plugin"] == "words"]
    assert len(mine) == 1
    assert mine[0]["action"] == action
    assert mine[0]["reason"]
    if action != "allow":  # the built-in allows own agents, so hold/deny come from the plugin
        assert row.detail["decided_by"] == "words"
        assert row.reason == mine[0]["reason"]


@pytest.mark.parametrize("action", ["allow", "hold", "deny"])
def test_gate_decision_answer_from_a_class_instance(open_hive: OpenHive, action: str) -> None:
    hive = open_hive(plugins=[GATE_CLASSES[action]()])
    view = hive.get(own_task(hive))
    assert (view.task.state, view.task.waiting_on) == EXPECTED[action]
    row = gate_row(hive, view.number)
    assert row.actor == "gate"
    assert row.move == GATE_MOVE[action]
    name = GATE_CLASSES[action].__name__
    answers = row.detail["answers"]  # type: ignore[index]
    assert {"plugin": name, "action": action, "reason": GATE_REASONS[action]} in answers
    if action != "allow":
        assert row.reason == GATE_REASONS[action]
        assert row.detail["decided_by"] == name  # type: ignore[index]


@pytest.mark.parametrize("action", ["allow", "hold", "deny"])
def test_gate_decision_answer_from_a_module(open_hive: OpenHive, action: str) -> None:
    reason = f"module policy says {action} because rule 7"
    hive = open_hive(plugins=[gate_module("policy", GateDecision(action=action,
                                                                     reason=reason))])
    view = hive.get(own_task(hive))
    assert (view.task.state, view.task.waiting_on) == EXPECTED[action]
    row = gate_row(hive, view.number)
    assert {"plugin": "policy", "action": action, "reason": reason} in row.detail["answers"]  # type: ignore[index]
    if action != "allow":
        assert row.reason == reason
        assert row.detail["decided_by"] == "policy"  # type: ignore[index]


def test_plugin_cannot_forge_decided_by(open_hive: OpenHive) -> None:
    forged = GateDecision(action="deny", reason="it was not me", plugin=BUILT_IN)
    hive = open_hive(plugins=[gate_module("sly", forged)])
    row = gate_row(hive, own_task(hive))
    assert row.to_state is State.rejected
    assert row.detail["decided_by"] == "sly"  # type: ignore[index]
    assert [a["plugin"] for a in row.detail["answers"] if a["action"] == "deny"] == ["sly"]  # type: ignore[index]


def test_allow_plugin_does_not_override_built_in_hold(open_hive: OpenHive) -> None:
    """Any hold wins over an allow: a guest's handoff stays held even if a plugin allows it."""
    hive = open_hive(plugins=[AllowGate()])
    view = hive.get(held_task(hive))
    assert (view.task.state, view.task.waiting_on) == (State.waiting, WaitingOn.owner_approval)
    row = gate_row(hive, view.number)
    assert row.detail["decided_by"] == BUILT_IN  # type: ignore[index]
    assert {a["plugin"]: a["action"] for a in row.detail["answers"]} == {  # type: ignore[index]
        "AllowGate": "allow", BUILT_IN: "hold"}


def test_deny_plugin_rejects_a_guest_handoff(open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[DenyGate()])
    view = hive.get(held_task(hive))
    assert view.task.state is State.rejected
    assert gate_row(hive, view.number).detail["decided_by"] == "DenyGate"  # type: ignore[index]


# -- several plugins: deny beats hold beats allow, in any order ---------------

ORDERS = [
    order
    for size in (2, 3)
    for combo in itertools.combinations(("allow", "hold", "deny"), size)
    for order in itertools.permutations(combo)
]


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
def test_deny_beats_hold_beats_allow_in_any_order(open_hive: OpenHive,
                                                  order: tuple[str, ...]) -> None:
    hive = open_hive(plugins=[GATE_CLASSES[action]() for action in order])
    view = hive.get(own_task(hive))
    winner = next(a for a in ("deny", "hold", "allow") if a in order)
    assert (view.task.state, view.task.waiting_on) == EXPECTED[winner]

    row = gate_row(hive, view.number)
    assert row.actor == "gate"
    assert row.move == GATE_MOVE[winner]
    assert row.detail is not None
    answers = row.detail["answers"]
    expected_answers = [
        {"plugin": GATE_CLASSES[a].__name__, "action": a, "reason": GATE_REASONS[a]}
        for a in order
    ] + [{"plugin": BUILT_IN, "action": "allow",
          "reason": "requester and assignee belong to ana"}]
    assert sorted(answers, key=lambda a: a["plugin"]) == sorted(
        expected_answers, key=lambda a: a["plugin"])
    if winner == "allow":  # allow only if nobody held or denied; any allower may decide
        assert row.detail["decided_by"] in {"AllowGate", BUILT_IN}
    else:
        assert row.detail["decided_by"] == GATE_CLASSES[winner].__name__
        assert row.reason == GATE_REASONS[winner]
        assert view.last_reason == GATE_REASONS[winner]


@pytest.mark.parametrize("order", [("allow", "deny"), ("deny", "allow")])
def test_mixed_plugin_kinds_combine(open_hive: OpenHive, order: tuple[str, str]) -> None:
    """String answers from a module and GateDecisions from a class combine the same way."""
    plugins = {"allow": gate_module("yes-module", "allow"), "deny": DenyGate()}
    hive = open_hive(plugins=[plugins[a] for a in order])
    row = gate_row(hive, own_task(hive))
    assert row.to_state is State.rejected
    assert row.detail["decided_by"] == "DenyGate"  # type: ignore[index]
    assert row.reason == GATE_REASONS["deny"]
    assert {a["plugin"] for a in row.detail["answers"]} == {  # type: ignore[index]
        "yes-module", "DenyGate", BUILT_IN}


class ProjectRule:
    """A configurable policy: a notebook would pass one instance per rule."""

    def __init__(self, project: str) -> None:
        self.project = project

    @hivelite.hookimpl
    def hivelite_permission_gate(self, task: hivelite.Task, hive: Hive) -> GateDecision | None:
        if task.project == self.project:
            return GateDecision(action="deny", reason=f"{self.project} is off limits")
        return None


def test_two_instances_of_one_plugin_class(open_hive: OpenHive) -> None:
    """Two configured instances of the same class are two plugins, and both have a say."""
    hive = open_hive(plugins=[ProjectRule("secret"), ProjectRule("private")])
    assert hive.get(own_task(hive, project="secret")).task.state is State.rejected
    assert hive.get(own_task(hive, project="private")).task.state is State.rejected
    assert hive.get(own_task(hive)).task.state is State.routed


# -- None: no say -------------------------------------------------------------


def test_none_has_no_say(open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[gate_module("shrug", None)])
    own = hive.get(own_task(hive))
    guest = hive.get(held_task(hive))
    assert own.task.state is State.routed
    assert (guest.task.state, guest.task.waiting_on) == (State.waiting, WaitingOn.owner_approval)
    for number in (own.number, guest.number):
        row = gate_row(hive, number)
        assert row.detail["decided_by"] == BUILT_IN  # type: ignore[index]
        assert "shrug" not in {a["plugin"] for a in row.detail["answers"]}  # type: ignore[index]


@pytest.mark.parametrize("action", ["hold", "deny"])
def test_none_does_not_dilute_another_plugins_answer(open_hive: OpenHive, action: str) -> None:
    hive = open_hive(plugins=[gate_module("shrug", None), GATE_CLASSES[action](),
                              gate_module("shrug-too", None)])
    view = hive.get(own_task(hive))
    assert (view.task.state, view.task.waiting_on) == EXPECTED[action]
    row = gate_row(hive, view.number)
    assert row.detail["decided_by"] == GATE_CLASSES[action].__name__  # type: ignore[index]
    assert {a["plugin"] for a in row.detail["answers"]} == {  # type: ignore[index]
        GATE_CLASSES[action].__name__, BUILT_IN}


# -- a plugin that raises or answers nonsense changes nothing -----------------


def _boom(task: hivelite.Task, hive: Hive) -> Any:
    if task.packet.task.startswith("boom"):
        raise RuntimeError("the policy server is down")
    return None


@pytest.mark.parametrize("others", [(), ("deny",), ("allow", "hold")])
def test_raising_plugin_leaves_store_unchanged(open_hive: OpenHive, db_path: Path,
                                               others: tuple[str, ...]) -> None:
    hive = open_hive(plugins=[*(GATE_CLASSES[a]() for a in others),
                              gate_module("flaky", _boom)])
    first = own_task(hive)  # the store is not empty when the failure comes
    before, journal_before = snapshot(db_path), hive.journal()

    with pytest.raises(PluginError) as err:
        own_task(hive, packet=packet(task="boom: write the parser"), id="boom-1")

    assert "flaky" in str(err.value)
    assert HOOK in str(err.value)
    assert "the policy server is down" in str(err.value)
    assert err.value.plugin == "flaky"
    assert err.value.hook == HOOK
    assert snapshot(db_path) == before
    assert hive.journal() == journal_before
    assert [v.number for v in hive.list().items] == [first]

    # The failed handoff left no transaction open: the hive keeps working.
    second = hive.get(own_task(hive, id="boom-1"))
    assert second.task.id == "boom-1"
    assert second.number == first + 1


@pytest.mark.parametrize(
    "answer",
    [42, "maybe", "ALLOW", "", True, 0, ["allow"], {"action": "allow", "reason": "dict"},
     ("deny", "no")],
    ids=repr,
)
def test_wrong_type_answer_is_a_plugin_error(open_hive: OpenHive, db_path: Path,
                                             answer: Any) -> None:
    hive = open_hive(plugins=[gate_module("sloppy", answer)])
    before, journal_before = snapshot(db_path), hive.journal()
    with pytest.raises(PluginError) as err:
        own_task(hive)
    assert "sloppy" in str(err.value)
    assert HOOK in str(err.value)
    assert err.value.plugin == "sloppy"
    assert err.value.hook == HOOK
    assert snapshot(db_path) == before
    assert hive.journal() == journal_before == []


def test_wrong_type_from_a_class_instance(open_hive: OpenHive, db_path: Path) -> None:
    class Confused:
        @hivelite.hookimpl
        def hivelite_permission_gate(self, task: hivelite.Task, hive: Hive) -> Any:
            return None if task.id == "before" else 42

    hive = open_hive(plugins=[HoldGate(), Confused()])
    own_task(hive, id="before")
    before = snapshot(db_path)
    with pytest.raises(PluginError) as err:
        own_task(hive)
    assert "Confused" in str(err.value)
    assert HOOK in str(err.value)
    assert snapshot(db_path) == before


# -- a hook that does not exist fails at open ----------------------------------


def test_misspelled_hook_in_a_module_fails_at_open(db_path: Path) -> None:
    @hivelite.hookimpl
    def hivelite_permision_gate(task: hivelite.Task, hive: Hive) -> str:
        return "deny"

    typo = types.ModuleType("typo-gate")
    typo.hivelite_permision_gate = hivelite_permision_gate  # type: ignore[attr-defined]
    with pytest.raises(PluginError) as err:
        Hive.open(db_path, owner="ana", plugins=[typo])
    assert err.value.plugin == "typo-gate"
    assert "typo-gate" in str(err.value)
    assert "hivelite_permision_gate" in str(err.value)
    assert not db_path.exists()  # refused before the store was touched


def test_misspelled_hook_in_a_class_fails_at_open(db_path: Path) -> None:
    class Typo:
        @hivelite.hookimpl
        def hivelite_permision_gate(self, task: hivelite.Task, hive: Hive) -> str:
            return "deny"

    with pytest.raises(PluginError) as err:
        Hive.open(db_path, owner="ana", plugins=[Typo()])
    assert err.value.plugin == "Typo"
    assert "Typo" in str(err.value)


def test_misspelled_hook_in_a_plugins_folder_file_fails_at_open(tmp_path: Path,
                                                               db_path: Path) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "typo_gate.py").write_text(textwrap.dedent("""
        import hivelite

        @hivelite.hookimpl
        def hivelite_permision_gate(task, hive):
            return "deny"
    """))
    with pytest.raises(PluginError) as err:
        Hive.open(db_path, owner="ana", plugins_dir=folder)
    assert err.value.plugin == "typo_gate"
    assert "typo_gate" in str(err.value)


# -- what the plugin sees -----------------------------------------------------


def test_plugin_sees_the_requested_task_with_its_packet_and_the_hive(open_hive: OpenHive) -> None:
    seen: list[tuple[hivelite.Task, Hive, str]] = []

    def look(task: hivelite.Task, hive: Hive) -> None:
        seen.append((task.model_copy(deep=True), hive, hive.owner))
        return None

    hive = open_hive(plugins=[gate_module("observer", look)])
    the_packet = packet(task="Write the parser for the config files",
                        context="see issue 12", files=["src/parser.py"])
    receipt = hive.handoff(GUEST, requester="guest/scout", assignee="ana/coder",
                           project="demo", packet=the_packet, id="seen-1")
    view = hive.get(receipt.number)

    assert len(seen) == 1
    task, given_hive, owner = seen[0]
    assert isinstance(task, hivelite.Task)
    assert task.state is State.requested
    assert task.waiting_on is None
    assert task.id == "seen-1"
    assert (task.requester, task.assignee, task.project) == ("guest/scout", "ana/coder", "demo")
    assert task.packet.model_dump() == hivelite.Packet.model_validate(the_packet).model_dump()
    assert task.result is None
    assert task.latest_checkpoint is None
    assert task.created_at == task.updated_at == view.task.created_at == receipt.at
    assert given_hive is hive
    assert owner == "ana"
    # After the gate the task is where the built-in put it; the observer had no say.
    assert view.task.state is receipt.state is State.waiting


def test_plugin_uses_hive_owner_to_decide(open_hive: OpenHive) -> None:
    def owner_only(task: hivelite.Task, hive: Hive) -> GateDecision | None:
        if task.assignee.partition("/")[0] != hive.owner:
            return GateDecision(action="deny", reason=f"only {hive.owner}'s agents do work")
        return None

    hive = open_hive(plugins=[gate_module("home-team", owner_only)])
    out = hive.get(own_task(hive, assignee="bob/coder"))
    home = hive.get(own_task(hive))
    assert out.task.state is State.rejected
    assert out.last_reason == "only ana's agents do work"
    assert home.task.state is State.routed


# -- a plugin from a plugins folder --------------------------------------------

FOLDER_PLUGIN = '''
"""A policy plugin as an owner would drop it into a plugins folder."""

import hivelite


@hivelite.hookimpl
def hivelite_permission_gate(task, hive):
    if task.project == "secret":
        return hivelite.GateDecision(action="deny",
                                     reason=f"{hive.owner} keeps 'secret' to herself")
    if "deploy" in task.packet.task:
        return "hold"
    return None
'''


def test_plugin_loaded_from_a_plugins_folder(open_hive: OpenHive, tmp_path: Path) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "secret_gate.py").write_text(FOLDER_PLUGIN)
    (folder / "README.txt").write_text("not a plugin")
    hive = open_hive(plugins_dir=folder)
    assert "secret_gate" in {name for name, _ in hive.plugins.list_name_plugin()}

    secret = hive.get(own_task(hive, project="secret"))
    deploy = hive.get(own_task(hive, packet=packet(task="deploy the site")))
    plain = hive.get(own_task(hive))

    assert secret.task.state is State.rejected
    row = gate_row(hive, secret.number)
    assert row.actor == "gate"
    assert row.reason == "ana keeps 'secret' to herself"
    assert row.detail["decided_by"] == "secret_gate"  # type: ignore[index]
    assert {a["plugin"] for a in row.detail["answers"]} == {"secret_gate", BUILT_IN}  # type: ignore[index]

    assert (deploy.task.state, deploy.task.waiting_on) == (State.waiting,
                                                           WaitingOn.owner_approval)
    assert gate_row(hive, deploy.number).detail["decided_by"] == "secret_gate"  # type: ignore[index]

    assert plain.task.state is State.routed
    assert gate_row(hive, plain.number).detail["decided_by"] == BUILT_IN  # type: ignore[index]


def test_folder_plugin_and_given_plugin_combine(open_hive: OpenHive, tmp_path: Path) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "secret_gate.py").write_text(FOLDER_PLUGIN)
    hive = open_hive(plugins=[HoldGate()], plugins_dir=folder)
    secret = hive.get(own_task(hive, project="secret"))
    other = hive.get(own_task(hive))
    assert secret.task.state is State.rejected  # the folder plugin's deny beats HoldGate's hold
    assert other.task.state is State.waiting
    assert gate_row(hive, other.number).detail["decided_by"] == "HoldGate"  # type: ignore[index]
