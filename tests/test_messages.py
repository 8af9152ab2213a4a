"""Messages for people (issue 19, point 3): a failed check says what was expected, in
words with an example, and what was given, never a regular expression or a pydantic
location; required options say so in ``--help``; a common slip names the next step."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hivelite import Caller, Hive, InvalidInput, StoreError

from .conftest import HANG_S, packet
from .test_discovery import clean_env, hivelite_script

GOOD: dict[str, Any] = {"requester": "ana/planner", "assignee": "ana/coder", "project": "shop",
                        "packet": packet()}
MACHINE = re.compile(r"should match|String should|List should|Input should|Field required"
                     r"|\^|\[a-z|\(\?:|packet\.\w|\{0,")
"""What a message for people never holds: pydantic's phrasing, a regex, a dotted path."""


def refusal(hive: Hive, **changes: Any) -> str:
    fields = {**GOOD, **changes}
    if "packet" in changes and isinstance(changes["packet"], dict):
        fields["packet"] = {**packet(), **changes["packet"]}
    with pytest.raises(InvalidInput) as err:
        hive.handoff(hive.as_owner(), **{k: v for k, v in fields.items() if v is not None})
    assert not MACHINE.search(err.value.message), err.value.message
    return err.value.message


def test_a_bad_agent_name_says_what_one_looks_like() -> None:
    with pytest.raises(InvalidInput) as err:
        Caller.agent("Coder", "laptop")
    assert err.value.message == (
        "agent 'Coder' is not an agent name: agent names look like owner/name (lowercase"
        " letters, digits and hyphens), e.g. ana/coder")
    with pytest.raises(InvalidInput) as err:
        Caller.agent("ana/coder", "my laptop")
    assert err.value.message == (
        "instance 'my laptop' is not an instance name: instance names are 1 to 64 letters,"
        " digits, '.', '_' or '-', starting with a letter or digit, e.g. laptop")


def test_handoff_refusals_in_words(tmp_path: Path) -> None:
    with Hive.open(tmp_path / "s.db", owner="ana") as hive:
        assert refusal(hive, assignee="Coder") == (
            "invalid handoff: the assignee: agent names look like owner/name (lowercase"
            " letters, digits and hyphens), e.g. ana/coder; not 'Coder'")
        assert refusal(hive, packet={"acceptance_criteria": []}) == (
            "invalid handoff: the acceptance criteria (packet[\"acceptance_criteria\"]): at"
            " least 1 item; not []")
        assert refusal(hive, packet={"task": "Fix"}) == (
            "invalid handoff: the task's text (packet[\"task\"]): at least 5 characters;"
            " not 'Fix'")
        assert refusal(hive, project=None) == "invalid handoff: the project is required"
        assert refusal(hive, priority="asap") == (
            "invalid handoff: the priority: one of 'low', 'normal', 'high' or 'urgent';"
            " not 'asap'")
        assert refusal(hive, colour="red") == (
            "invalid handoff: the colour is not something a handoff takes")
        assert refusal(hive, labels=["Big Bug"]) == (
            "invalid handoff: the labels, item 1: labels are 1 to 32 lowercase letters,"
            " digits or hyphens, e.g. auth; not 'Big Bug'")
        assert refusal(hive, packet={"files": ["a.py", 3]}) == (
            "invalid handoff: the files (packet[\"files\"]), item 2: text; not 3")
        assert refusal(hive, project="Shop!", packet={"deliverable_type": "cod"}) == (
            "invalid handoff: the project: names are lowercase letters, digits and single"
            " hyphens, e.g. shop or web-app; not 'Shop!'; the deliverable type"
            " (packet[\"deliverable_type\"]): one of 'code', 'doc', 'answer', 'screenshots',"
            " 'reviewed_pr', 'design', 'data' or 'other'; not 'cod'")


def test_the_error_still_names_the_field_for_programs(tmp_path: Path) -> None:
    with Hive.open(tmp_path / "s.db", owner="ana") as hive, pytest.raises(InvalidInput) as err:
        hive.handoff(hive.as_owner(), **{**GOOD, "packet": packet(acceptance_criteria=[])})
    assert err.value.extra["field"] == "packet.acceptance_criteria"


def test_common_slips_name_the_next_step(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    Hive.open(path, owner="root").close()
    with pytest.raises(InvalidInput) as err:
        Hive.open(path, owner="ana")
    assert "hivelite info shows it" in err.value.message
    assert "hivelite --db NEW.db init --owner ana" in err.value.message
    with pytest.raises(StoreError) as missing:
        Hive.open(tmp_path / "nothing.db", create=False)
    assert "hivelite --db" in missing.value.message and "init --owner NAME" in missing.value.message


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(hivelite_script()), *args], cwd=cwd, env=clean_env(),
                          capture_output=True, text=True, timeout=HANG_S)


def test_the_cli_says_it_in_words_and_marks_what_is_required(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    assert cli("--db", db, "init", "--owner", "ana", cwd=tmp_path).returncode == 0
    ran = cli("--db", db, "handoff", "--requester", "ana/planner", "--assignee", "ana/coder",
              "--project", "shop", "--task", "Write the parser", "--type", "code",
              cwd=tmp_path)
    assert ran.returncode != 0
    assert "the acceptance criteria (--accept): at least 1 item" in ran.stderr
    assert not MACHINE.search(ran.stderr), ran.stderr
    shown = " ".join(cli("handoff", "--help", cwd=tmp_path).stdout.split()).replace("- ", "-")
    assert "at least one is required, unless --packet or --from-jsonl" in shown
    assert "5-500 characters (required, unless --packet or --from-jsonl)" in shown
