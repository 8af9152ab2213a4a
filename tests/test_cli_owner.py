"""The owner's authority on the command line, in real ``hivelite`` processes (issue 16).

A process that lacks the plugin the store requires is refused and writes nothing; a
budget refusal exits 7 with ``retry_after_s`` that the clock (``HIVELITE_NOW``) runs down
to the reset; a stop mid-claim turns the holder's next write into ``vetoed``; an agent
(``$HIVELITE_AGENT``) is refused every owner's verb; bad input exits 6 and changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from . import rawsql
from .conftest import HANG_S, at
from .inproc import run_main
from .test_cli_e2e import hivelite_command

TIMEOUT = HANG_S
OWN = ("--requester", "ana/planner", "--assignee", "ana/coder", "--project", "site")
TASK = ("--task", "Fix the login bug", "--type", "code", "--accept", "tests pass")
CODER = ("--agent", "ana/coder", "--instance", "laptop")
REVIEWER = ("--agent", "ana/reviewer", "--instance", "desktop")
SECOND = ("--agent", "ana/second", "--instance", "tablet")
THRESHOLD_TWO = ("from hivelite import hookimpl\n\n\n@hookimpl\n"
                 "def hivelite_merge_threshold(task, hive):\n    return 2\n")


class Cli:
    """Runs ``hivelite`` on one store with a clean environment: in this process, or in a
    new one when it loads plugins (installed or from a folder: what a process is for) or
    with ``process=True``."""

    def __init__(self, db: Path, process: bool = False) -> None:
        self.db = db
        self.process = process

    def __call__(self, *args: str, t: float | str = 0, env: dict[str, str] | None = None,
                 plugins: Path | None = None) -> subprocess.CompletedProcess[str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
        clean.update({"HIVELITE_DB": str(self.db), "HIVELITE_LOAD_PLUGINS": "",
                      "HIVELITE_NOW": t if isinstance(t, str) else at(t), **(env or {})})
        group = ("--plugins-dir", str(plugins)) if plugins is not None else ()
        if not self.process and plugins is None and not clean["HIVELITE_LOAD_PLUGINS"]:
            return run_main([*group, *args], {k: v for k, v in clean.items()
                                              if k.startswith("HIVELITE_")}, self.db.parent)
        return subprocess.run([*hivelite_command(), *group, *args], capture_output=True,
                              text=True, timeout=TIMEOUT, env=clean, cwd=self.db.parent)

    def ok(self, *args: str, **kwargs: Any) -> Any:
        ran = self("--json", *args, **kwargs)
        assert ran.returncode == 0, (args, ran.stderr)
        return json.loads(ran.stdout)

    def fails(self, code: int, reason: str, *args: str, **kwargs: Any) -> dict[str, Any]:
        """The call exits ``code`` with ``reason`` and leaves every row as it was."""
        before = rawsql.snapshot_file(self.db)
        ran = self("--json", *args, **kwargs)
        assert ran.returncode == code, (args, ran.returncode, ran.stderr)
        error: dict[str, Any] = json.loads(ran.stdout)["error"]
        assert error["reason"] == reason, error
        assert rawsql.snapshot_file(self.db) == before
        return error


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    run = Cli(tmp_path / "store.db")
    run.ok("init", "--owner", "ana")
    return run


def claim(cli: Cli, number: str, t: float, who: tuple[str, ...] = CODER) -> tuple[str, ...]:
    lease = cli.ok("claim", number, *who, t=t)
    return ("--lease", lease["lease_id"], "--token", str(lease["fencing_token"]), *who)


def acting(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``hivelite --json plugins``'s rows but the built-ins and the installed plugins the
    store did not enable (each listed as ``not_enabled``, never loaded), as (name, status)."""
    idle = [r for r in rows if r["status"] == "not_enabled"]
    assert all(not r["loaded"] and not r["enabled"] for r in idle), idle
    return [(r["name"], r["status"]) for r in rows
            if not r["essential"] and r["status"] != "not_enabled"]


def test_a_process_without_the_required_plugin_is_refused_and_writes_nothing(
        cli: Cli, tmp_path: Path) -> None:
    """The issue's case: a worker that opened the store without the owner's plugin
    completed a code task on one confirmation instead of two. Now it cannot write."""
    folder = tmp_path / "policies"
    folder.mkdir(mode=0o700)
    (folder / "two.py").write_text(THRESHOLD_TWO)
    (folder / "two.py").chmod(0o600)
    required = cli.ok("policy", "require", "two", plugins=folder)
    assert (required["name"], required["kind"]) == ("two", "file")
    cli.ok("handoff", *OWN, *TASK, plugins=folder)
    error = cli.fails(4, "policy_missing", "claim", "1", *CODER, t=1)
    assert error["plugin"] == "two" and "two" in error["message"]
    lease = cli.ok("claim", "1", *CODER, t=1, plugins=folder)
    fence = ("--lease", lease["lease_id"], "--token", str(lease["fencing_token"]), *CODER)
    submitted = cli.ok("submit", "1", *fence, "--summary", "done", "--evidence",
                       "test_output:3 passed", t=2, plugins=folder)
    assert (submitted["task"]["state"], submitted["threshold"]) == ("approval", 2)
    cli.fails(4, "policy_missing", "verify", "1", "--accept", *REVIEWER, t=3)
    assert cli.ok("show", "1", t=3)["task"]["state"] == "approval"  # reading needs none
    one = cli.ok("verify", "1", "--accept", *REVIEWER, t=3, plugins=folder)
    assert one["task"]["state"] == "approval"  # one of two
    listed = cli.ok("plugins", plugins=folder)
    assert acting(listed) == [("two", "ok")]
    missing = cli.ok("plugins")
    assert acting(missing) == [("two", "missing")]
    # a changed plugin file is refused until the owner requires it again
    (folder / "two.py").write_text(THRESHOLD_TWO.replace("return 2", "return 1"))
    cli.fails(4, "policy_changed", "verify", "1", "--accept", *SECOND, t=4, plugins=folder)
    assert acting(cli.ok("plugins", plugins=folder)) == [("two", "changed")]
    cli.ok("policy", "require", "two", plugins=folder, t=4)
    assert cli.ok("verify", "1", "--accept", *SECOND, t=4,
                  plugins=folder)["task"]["state"] == "completed"


def test_the_owners_controls_work_without_the_required_plugin(cli: Cli,
                                                              tmp_path: Path) -> None:
    """The kill switch never waits for a plugin: hold, stop, lift, budgets and the policy
    itself are the owner's own and consult none."""
    folder = tmp_path / "policies"
    folder.mkdir(mode=0o700)
    (folder / "two.py").write_text(THRESHOLD_TWO)
    (folder / "two.py").chmod(0o600)
    cli.ok("policy", "require", "two", plugins=folder)
    cli.ok("stop", "--all", "--reason", "quiet")
    cli.ok("lift", "--all")
    cli.ok("budget", "set", "--agent", "ana/coder", "--tasks", "1")
    cli.ok("policy", "unrequire", "two")
    cli.ok("handoff", *OWN, *TASK)  # nothing required now


def test_a_budget_refusal_exits_7_and_its_retry_after_runs_down_to_the_reset(
        cli: Cli) -> None:
    cli.ok("policy", "set", "timezone", "Europe/Berlin")
    cli.ok("budget", "set", "--agent", "ana/coder", "--tasks", "1")
    for _ in range(2):
        cli.ok("handoff", *OWN, *TASK)
    evening = "2026-12-02T21:00:00.000Z"  # 22:00 in Berlin; the day resets at 23:00 UTC
    cli.ok("claim", "1", *CODER, t=evening)
    error = cli.fails(7, "daily_budget", "claim", "2", *CODER, t=evening)
    assert (error["status"], error["code"], error["retry_after_s"]) == (
        429, "rate_limited", 7200)
    assert error["resets_at"] == "2026-12-02T23:00:00.000Z"
    human = cli("claim", "2", *CODER, t="2026-12-02T22:59:59.500Z")
    assert human.returncode == 7
    assert human.stderr.startswith("error: rate_limited/daily_budget: ")
    assert "in 1 s" in human.stderr
    assert cli.ok("claim", "2", *CODER, t="2026-12-02T23:00:00.000Z")["number"] == 2
    shown = cli.ok("budget", "show", t="2026-12-02T23:00:00.000Z")
    assert [(b["day"], b["used_tasks"], b["tasks"]) for b in shown] == [("2026-12-03", 1, 1)]


def test_a_stop_mid_claim_makes_the_holders_next_write_vetoed(cli: Cli) -> None:
    cli.ok("handoff", *OWN, *TASK)
    fence = claim(cli, "1", 1)
    cli.ok("checkpoint", "1", *fence, "--progress", "half way", t=2)
    stopped = cli.ok("stop", "--agent", "ana/coder", "--reason", "runaway", t=3)
    assert stopped["ended"] == [1]
    assert cli.ok("show", "1", t=3)["task"]["state"] == "routed"
    error = cli.fails(4, "vetoed", "update", "1", *fence, "--summary", "still going", t=4)
    assert "stopped by the owner" in error["message"] and "hivelite lift" in error["message"]
    cli.fails(4, "vetoed", "claim", "1", *CODER, t=4)
    history = cli.ok("history", "1", t=4)
    assert [(r["from_state"], r["to_state"], r["actor"], r["reason"]) for r in history][-1] == (
        "working", "routed", "ana", "stopped")
    assert [c["kind"] for c in cli.ok("controls", t=4)] == ["stop"]
    cli.ok("lift", str(stopped["id"]), t=5)
    assert cli.ok("controls", t=5) == []
    assert [c["lifted_by"] for c in cli.ok("controls", "--with-lifted", t=5)] == ["ana"]
    assert cli.ok("claim", "1", *CODER, t=5)["fencing_token"] == 2


AGENT_ENV = {"HIVELITE_AGENT": "ana/coder", "HIVELITE_INSTANCE": "laptop"}
OWNER_VERBS = {
    "hold": ("--agent", "ana/other"),
    "veto": ("1", "--agent", "ana/other"),
    "stop": ("--all",),
    "lift": ("--all",),
    "budget set": ("--agent", "ana/coder", "--tasks", "99"),
    "budget clear": ("--agent", "ana/coder"),
    "policy set": ("threshold", "0"),
    "policy unset": ("mode",),
    "policy require": ("two",),
    "policy unrequire": ("two",),
    "sign-off": ("1",),
    "approve": ("1",),
}


@pytest.mark.parametrize("verb", sorted(OWNER_VERBS))
def test_no_path_lets_an_agent_use_an_owners_verb(cli: Cli, verb: str) -> None:
    """An agent process (``$HIVELITE_AGENT``) is refused every owner's verb with 403,
    whatever the verb would have done; the store is unchanged."""
    cli.ok("handoff", *OWN, *TASK)
    error = cli.fails(4, "not_permitted", *verb.split(), *OWNER_VERBS[verb], env=AGENT_ENV)
    assert "only the owner" in error["message"]


@pytest.mark.parametrize(("args", "code", "reason"), [
    (("budget", "set", "--agent", "ana/coder", "--usd", "1.0000001"), 6, "invalid_budget"),
    (("budget", "set", "--agent", "ana/coder", "--usd", "-2"), 6, "invalid_budget"),
    (("budget", "set", "--agent", "ana/coder", "--usd", "lots"), 6, "invalid_budget"),
    (("budget", "set", "--agent", "ana/coder", "--tasks", "-1"), 6, "invalid_budget"),
    (("budget", "set", "--agent", "ana/coder"), 6, "budget_required"),
    (("budget", "set", "--agent", "coder", "--tasks", "1"), 6, "invalid_agent"),
    (("budget", "clear", "--agent", "ana/coder"), 5, "no_such_budget"),
    (("policy", "set", "mode", "solo"), 6, "invalid_policy"),
    (("policy", "set", "threshold", "1001"), 6, "invalid_policy"),
    (("policy", "set", "timezone", "Mars/Olympus"), 6, "invalid_policy"),
    (("policy", "set", "proposals", "maybe"), 6, "invalid_policy"),
    (("policy", "set", "mode", "team", "--project", "site"), 6, "invalid_policy"),
    (("policy", "require", "nothing"), 6, "unknown_plugin"),
    (("policy", "unrequire", "nothing"), 5, "not_required"),
    (("hold",), 6, "control_scope"),
    (("hold", "--agent", "ana/coder", "--instance", "laptop"), 6, "control_scope"),
    (("hold", "--instance", "lap top"), 6, "invalid_instance"),
    (("stop", "--all", "--agent", "ana/coder"), 6, "control_scope"),
    (("veto", "9", "--agent", "ana/coder"), 5, "no_such_task"),
    (("lift", "7"), 5, "no_such_control"),
    (("lift",), 6, "control_scope"),
])
def test_bad_input_to_the_owners_verbs_exits_with_its_class_and_changes_nothing(
        cli: Cli, args: tuple[str, ...], code: int, reason: str) -> None:
    cli.fails(code, reason, *args)


HOLD_GUESTS = '''[[rule]]
action = "hold"
assignee = "ana/*"
project = "site"
reason = "every site task waits for ana"
'''
ALLOW_ALL = '''[[rule]]
action = "allow"
reason = "anything goes"
'''


def test_the_installed_policy_plugins_rules_are_bound_with_it(cli: Cli,
                                                               tmp_path: Path) -> None:
    """The review's case: hivelite-policy (an installed entry point) reads its rules from
    the file ``$HIVELITE_POLICY`` names. Installed, it acts on no store until the owner
    enables it there, so she enables it, then requires it as it runs with her rules; an
    agent that points the variable at a file of its own, or edits hers, is refused
    (``policy_changed``) instead of having its handoff routed."""
    rules = tmp_path / "rules.toml"
    rules.write_text(HOLD_GUESTS)
    (tmp_path / "allow.toml").write_text(ALLOW_ALL)
    policy = {"HIVELITE_LOAD_PLUGINS": "policy", "HIVELITE_POLICY": str(rules)}
    error = cli.fails(6, "unknown_plugin", "policy", "require", "policy", env=policy)
    assert "hivelite policy enable policy" in error["message"]  # installing enabled nothing
    assert cli.ok("policy", "enable", "policy", env=policy)["enabled_plugins"] == ["policy"]
    required = cli.ok("policy", "require", "policy", env=policy)
    assert (required["kind"], required["settings"]["rules"][0]["action"]) == (
        "entry_point", "hold")
    agent = {**policy, "HIVELITE_AGENT": "ana/planner", "HIVELITE_INSTANCE": "desktop"}
    held = cli.ok("handoff", *OWN, *TASK, env=agent)
    assert (held["task"]["state"], held["task"]["waiting_on"]) == ("waiting", "owner_approval")
    swapped = {**agent, "HIVELITE_POLICY": str(tmp_path / "allow.toml")}
    error = cli.fails(4, "policy_changed", "handoff", *OWN, *TASK, env=swapped)
    assert error["plugin"] == "policy"
    rules.write_text(HOLD_GUESTS.replace('"hold"', '"allow"'))  # edited in place
    cli.fails(4, "policy_changed", "handoff", *OWN, *TASK, env=agent)
    # an agent's process that leaves it out ($HIVELITE_LOAD_PLUGINS empty) is refused too
    rules.write_text(HOLD_GUESTS)
    left_out = {**agent, "HIVELITE_LOAD_PLUGINS": ""}
    error = cli.fails(4, "policy_missing", "handoff", *OWN, *TASK, env=left_out)
    assert error["plugin"] == "policy"


def test_stop_and_hold_take_the_agent_as_their_argument(cli: Cli) -> None:
    """``hivelite stop ana/coder``, as ``token add ana/coder``; --agent still works, and
    naming it both ways is a usage error."""
    stopped = cli.ok("stop", "ana/coder", "--reason", "runaway costs")
    assert (stopped["kind"], stopped["agent"]) == ("stop", "ana/coder")
    held = cli.ok("hold", "ana/reviewer")
    assert (held["kind"], held["agent"]) == ("hold", "ana/reviewer")
    assert cli("stop", "ana/coder", "--agent", "ana/coder").returncode == 2
    assert cli.ok("stop", "--agent", "ana/second")["agent"] == "ana/second"
