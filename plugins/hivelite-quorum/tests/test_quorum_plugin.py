"""hivelite-quorum: thresholds per project and deliverable type, and the requester rule.

In-process tests load the module with ``Hive.open(..., plugins=[hivelite_quorum])``
(installed entry points are switched off so that other plugins cannot change the
answers); the last tests drive the real CLI with the plugin from its entry point,
which acts on a store only once its owner enabled it there (``policy enable quorum``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hivelite import Caller, Hive, ManualClock, PluginError, Receipt, TaskView
from hypothesis import given, settings
from hypothesis import strategies as st

import hivelite_quorum

START = "2026-12-02T09:00:00.000Z"
PLUGIN = "hivelite_quorum"
HIVELITE = Path(sys.executable).parent / "hivelite"
OWNER = Caller.owner("ana")
"""The store's owner, acting as owner (hands every task off)."""
CODER = Caller.agent("ana/coder", "laptop")
"""The assignee of every task here, on the laptop."""


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    """No installed plugin and no settings from the developer's environment."""
    monkeypatch.setattr(sys, "_hivelite_under_test", True, raising=False)
    for name in ("HIVELITE_QUORUM", "HIVELITE_CONFIG", "HIVELITE_PLUGINS_DIR",
                 "HIVELITE_LOAD_PLUGINS", "HIVELITE_AGENT", "HIVELITE_INSTANCE",
                 "HIVELITE_SESSION"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


def write_settings(db: Path, text: str) -> None:
    (db.parent / "hivelite.toml").write_text(text)


def open_hive(db: Path) -> Hive:
    return Hive.open(db, owner="ana", clock=ManualClock(START), plugins=[hivelite_quorum])


@pytest.fixture
def hive(db: Path) -> Iterator[Hive]:
    with open_hive(db) as h:
        yield h


def view_after(hive: Hive, receipt: Receipt) -> TaskView:
    """The full view after a write, checked against the write's receipt."""
    view = hive.get(receipt.number)
    assert (receipt.state, receipt.waiting_on) == (view.task.state, view.task.waiting_on)
    assert receipt.seq == hive.history(receipt.number)[-1].seq
    return view


def submitted(hive: Hive, *, type_: str = "code", project: str = "demo",
              requester: str = "ana/planner") -> TaskView:
    """A task handed off, claimed on laptop by ana/coder and submitted."""
    handed = hive.handoff(OWNER, requester=requester, assignee="ana/coder", project=project,
                          packet={"task": "Write the parser", "deliverable_type": type_,
                                  "acceptance_criteria": ["tests pass"]})
    lease = hive.claim(CODER, handed.number)
    return view_after(hive, hive.submit(
        CODER, handed.number, lease_id=lease.lease_id, token=lease.fencing_token,
        summary="done", evidence=[{"kind": "test_output", "summary": "3 passed"}]))


def accept(hive: Hive, number: int, agent: str, instance: str) -> TaskView:
    """``agent`` on ``instance`` accepts the result; the view afterwards."""
    return view_after(hive, hive.verify(Caller.agent(agent, instance), number,
                                        verdict="accept"))


def threshold_of(db: Path, settings: str, **task: str) -> TaskView:
    write_settings(db, settings)
    with open_hive(db) as h:
        return submitted(h, **task)


def decided_by(hive: Hive, number: int) -> Any:
    moves = [e for e in hive.history(number) if e.to_state is not None
             and e.to_state.value in ("approval", "completed") and e.actor == "guard"]
    return moves[-1].detail["decided_by"]


# -- the threshold ------------------------------------------------------------

SETTINGS = """
[quorum.deliverable_type]
code = 2
doc = 1
"""


def test_code_needs_two_confirmations(db: Path) -> None:
    write_settings(db, SETTINGS)
    with open_hive(db) as hive:
        view = submitted(hive)
        assert (view.task.state.value, view.threshold) == ("approval", 2)
        assert decided_by(hive, view.number) == PLUGIN
        view = accept(hive, view.number, "ana/reviewer", "desktop")
        assert view.task.state.value == "approval"
        assert [c.counted for c in view.confirmations] == [True]
        view = accept(hive, view.number, "ana/auditor", "phone")
        assert view.task.state.value == "completed"
        assert view.lifecycle == "completed"


def test_doc_completes_after_one(db: Path) -> None:
    write_settings(db, SETTINGS)
    with open_hive(db) as hive:
        view = submitted(hive, type_="doc")
        assert view.threshold == 1
        assert decided_by(hive, view.number) == PLUGIN
        assert accept(hive, view.number, "ana/reviewer", "desktop").task.state.value == "completed"


@pytest.mark.parametrize(("project", "code", "expected"), [(3, 2, 3), (1, 4, 4)])
def test_the_stricter_of_project_and_type_wins(db: Path, project: int, code: int,
                                               expected: int) -> None:
    settings = f"[quorum.deliverable_type]\ncode = {code}\n[quorum.project]\npayments = {project}\n"
    assert threshold_of(db, settings, project="payments").threshold == expected


def test_the_default_applies_when_nothing_else_does(db: Path) -> None:
    write_settings(db, "[quorum]\ndefault = 3\n[quorum.deliverable_type]\ncode = 2\n"
                   "[quorum.project]\npayments = 1\n")
    with open_hive(db) as hive:
        assert submitted(hive, type_="answer").threshold == 3  # only the default applies
        assert submitted(hive, type_="code", project="payments").threshold == 3  # max(1, 2, 3)


def test_no_value_applies_no_opinion(db: Path) -> None:
    write_settings(db, "[quorum.deliverable_type]\ncode = 2\n")
    with open_hive(db) as hive:
        view = submitted(hive, type_="design")
        assert view.threshold == 1
        assert decided_by(hive, view.number) == "store policy"


def test_zero_completes_at_submit(db: Path) -> None:
    view = threshold_of(db, "[quorum.deliverable_type]\ncode = 0\ndoc = 2\n")
    assert (view.task.state.value, view.threshold) == ("completed", 0)
    assert view.confirmations == []


def test_no_settings_leaves_the_core_threshold(hive: Hive) -> None:
    view = submitted(hive)
    assert view.threshold == 1
    assert decided_by(hive, view.number) == "store policy"
    assert accept(hive, view.number, "ana/reviewer", "desktop").task.state.value == "completed"


@settings(database=None, max_examples=60)  # nothing written beside the repo
@given(default=st.none() | st.integers(0, 20), by_type=st.none() | st.integers(0, 20),
       by_project=st.none() | st.integers(0, 20))
def test_threshold_is_the_largest_value_that_applies(
        default: int | None, by_type: int | None, by_project: int | None) -> None:
    table: dict[str, Any] = {"deliverable_type": {"doc": 20}, "project": {"other": 20}}
    if default is not None:
        table["default"] = default
    if by_type is not None:
        table["deliverable_type"]["code"] = by_type
    if by_project is not None:
        table["project"]["demo"] = by_project
    quorum = hivelite_quorum.parse_settings(table, "test")
    values = [v for v in (default, by_type, by_project) if v is not None]
    assert quorum.threshold("demo", "code") == (max(values) if values else None)


# -- the requester's own confirmation -----------------------------------------

def test_the_requesters_accept_is_recorded_but_not_counted(hive: Hive) -> None:
    view = submitted(hive)  # no settings: threshold 1, the rule is on by default
    view = accept(hive, view.number, "ana/planner", "desktop")
    assert view.task.state.value == "approval"
    assert [(c.reviewer, c.counted) for c in view.confirmations] == [("ana/planner", False)]
    assert hive.history(view.number)[-1].reason == "not_counted"
    view = accept(hive, view.number, "ana/reviewer", "phone")
    assert view.task.state.value == "completed"


def test_requester_counts_true_switches_the_rule_off(db: Path) -> None:
    write_settings(db, "[quorum]\nrequester_counts = true\n")
    with open_hive(db) as hive:
        view = accept(hive, submitted(hive).number, "ana/planner", "desktop")
        assert view.task.state.value == "completed"
        assert [c.counted for c in view.confirmations] == [True]


def test_requester_rule_is_asked_before_a_plugin_that_counts_everything(db: Path) -> None:
    class CountAll:
        @staticmethod
        @hivelite_quorum.hookimpl
        def hivelite_count_confirmation(task: Any, confirmation: Any, hive: Any) -> bool:
            return True

    # CountAll is registered last, so pluggy would ask it first without tryfirst.
    with Hive.open(db, owner="ana", clock=ManualClock(START),
                   plugins=[hivelite_quorum, CountAll()]) as hive:
        view = accept(hive, submitted(hive).number, "ana/planner", "desktop")
        assert [c.counted for c in view.confirmations] == [False]


# -- settings checked at start-up ---------------------------------------------

BAD_SETTINGS = [
    ("[quorum]\nminimum = 2\n", "unknown key(s) 'minimum'"),
    ("[quorum.deliverable_type]\ncode = \"2\"\n", "quorum.deliverable_type.code must be an"
                                                  " integer"),
    ("[quorum.deliverable_type]\ncode = 2.0\n", "must be an integer 0..20, not 2.0"),
    ("[quorum]\ndefault = true\n", "quorum.default must be an integer"),
    ("[quorum.project]\npayments = -1\n", "quorum.project.payments = -1 is out of range"),
    ("[quorum]\ndefault = 21\n", "quorum.default = 21 is out of range"),
    ("[quorum.deliverable_type]\ncodes = 2\n", "'codes' is not a deliverable type"),
    ("[quorum]\ndeliverable_type = 2\n", "[quorum.deliverable_type] must be a table"),
    ("[quorum.project]\nPayments = 2\n", "'Payments' is not a project slug"),
    ("[quorum]\nrequester_counts = \"yes\"\n", "requester_counts must be true or false"),
    ("quorum = 3\n", "[quorum] in the settings file must be a table"),
]


@pytest.mark.parametrize(("text", "problem"), BAD_SETTINGS)
def test_malformed_settings_refuse_to_open(db: Path, text: str, problem: str) -> None:
    write_settings(db, text)
    with pytest.raises(PluginError) as caught:
        open_hive(db)
    error = caught.value
    assert (error.plugin, error.hook) == (PLUGIN, "hivelite_startup")
    assert problem in error.message
    assert str(db.parent / "hivelite.toml") in error.message  # names the file


# -- $HIVELITE_QUORUM ---------------------------------------------------------

def test_env_file_replaces_the_settings_table(db: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    write_settings(db, "[quorum.deliverable_type]\ncode = 5\n")
    policy = tmp_path / "quorum.toml"
    policy.write_text("default = 1\n[deliverable_type]\ncode = 2\n[project]\npayments = 3\n")
    monkeypatch.setenv("HIVELITE_QUORUM", str(policy))
    with open_hive(db) as hive:
        assert submitted(hive).threshold == 2
        assert submitted(hive, project="payments").threshold == 3


@pytest.mark.parametrize(("text", "problem"), [
    (None, "does not exist"),
    ("code = [", "is not valid TOML"),
    ("[quorum]\ndefault = 2\n", "keys sit at the top level, without [quorum]"),
    ("[deliverable_type]\ncode = 99\n", "deliverable_type.code = 99 is out of range"),
])
def test_malformed_env_file_refuses_to_open(db: Path, tmp_path: Path, text: str | None,
                                            problem: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    policy = tmp_path / "quorum.toml"
    if text is not None:
        policy.write_text(text)
    monkeypatch.setenv("HIVELITE_QUORUM", str(policy))
    with pytest.raises(PluginError) as caught:
        open_hive(db)
    assert caught.value.plugin == PLUGIN
    assert problem in caught.value.message
    assert str(policy) in caught.value.message


# -- end to end through the CLI -----------------------------------------------

HANG_S = float(os.environ.get("HIVELITE_TEST_HANG_S") or 600)
"""A guard against a hung command only: never a limit on how long a slow machine takes."""


def cli(db: Path, *args: str, code: int = 0) -> Any:
    """``hivelite --json ARGS`` on ``db`` in the user's environment without any HIVELITE_
    setting (the installed entry point acts on a store only once its owner enabled it
    there): its JSON answer, or its stderr when ``code`` is not 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env.update(HIVELITE_NOW=START)
    done = subprocess.run([str(HIVELITE), "--db", str(db), "--json", *args], env=env,
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == code, done.stderr
    return json.loads(done.stdout) if code == 0 else done.stderr


def quorum_row(db: Path) -> dict[str, Any]:
    """The plugin's row in ``hivelite plugins``."""
    [row] = [r for r in cli(db, "plugins") if r["name"] == "quorum"]
    assert row["source"] == "entry point (hivelite-quorum)"
    return dict(row)


def submit_code(db: Path) -> tuple[str, dict[str, Any]]:
    """Hand a code task to ana/coder, who claims it and submits it with its tests'
    output: the task's number and the submit's view (its threshold)."""
    number = str(cli(db, "handoff", "--requester", "ana/planner", "--assignee", "ana/coder",
                     "--project", "demo", "--task", "Write the parser", "--type", "code",
                     "--accept", "tests pass")["number"])
    lease = cli(db, "claim", number, "--agent", "ana/coder", "--instance", "laptop")
    view = cli(db, "submit", number, "--lease", lease["lease_id"], "--token",
               str(lease["fencing_token"]), "--summary", "done",
               "--evidence", "test_output:3 passed", "--agent", "ana/coder",
               "--instance", "laptop")
    return number, view


def test_cli_code_task_needs_two_verifiers(tmp_path: Path) -> None:
    db = tmp_path / "hive.db"
    write_settings(db, SETTINGS)

    row = quorum_row(db)  # installed; no store enabled it
    assert (row["status"], row["enabled"], row["hooks"]) == ("not_enabled", False, [])
    cli(db, "init", "--owner", "ana")
    assert "quorum" in cli(db, "policy", "enable", "quorum")["enabled_plugins"]
    row = quorum_row(db)
    assert (row["enabled"], row["loaded"]) == (True, True)
    assert "hivelite_merge_threshold" in row["hooks"]

    number, view = submit_code(db)
    assert (view["task"]["state"], view["threshold"]) == ("approval", 2)
    view = cli(db, "verify", number, "--accept", "--agent", "ana/reviewer", "--instance",
               "desktop")
    assert view["task"]["state"] == "approval"
    cli(db, "verify", number, "--accept", "--agent", "ana/auditor", "--instance", "phone")
    view = cli(db, "show", number)
    assert (view["task"]["state"], view["lifecycle"]) == ("completed", "completed")
    assert [c["counted"] for c in view["confirmations"]] == [True, True]

    write_settings(db, "[quorum.deliverable_type]\ncode = 25\n")
    stderr = cli(db, "handoff", "--requester", "ana/planner", "--assignee", "ana/coder",
                 "--project", "demo", "--task", "Write the lexer", "--type", "code",
                 "--accept", "tests pass", code=1)  # a process that writes loads the plugin
    assert "plugin 'quorum', hook hivelite_startup" in stderr
    assert "code = 25 is out of range" in stderr
    assert [item["number"] for item in cli(db, "list")["items"]] == [int(number)]


def test_cli_installed_is_not_enabled_until_the_owner_enables_it(tmp_path: Path) -> None:
    """Installing enables the plugin nowhere: with ``code = 2`` in its settings a code
    result's threshold stays the store's (1) until the owner runs ``policy enable quorum``
    on this store, is 2 from then on, and is the store's again once ``policy disable``
    ran."""
    db = tmp_path / "hive.db"
    write_settings(db, SETTINGS)
    cli(db, "init", "--owner", "ana")
    assert cli(db, "policy", "show")["threshold"] == 1
    number, view = submit_code(db)
    assert (view["task"]["state"], view["threshold"]) == ("approval", 1)
    view = cli(db, "verify", number, "--accept", "--agent", "ana/reviewer", "--instance",
               "desktop")
    assert view["task"]["state"] == "completed"  # one confirmation: the store's threshold
    info = cli(db, "info")
    assert "quorum" in info["installed_not_enabled"]
    assert "quorum" not in info["enabled_plugins"]
    assert quorum_row(db)["status"] == "not_enabled"

    assert "quorum" in cli(db, "policy", "enable", "quorum")["enabled_plugins"]
    assert submit_code(db)[1]["threshold"] == 2

    assert "quorum" not in cli(db, "policy", "disable", "quorum")["enabled_plugins"]
    assert quorum_row(db)["status"] == "not_enabled"
    assert submit_code(db)[1]["threshold"] == 1
