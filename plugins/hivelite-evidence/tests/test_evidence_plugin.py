"""hivelite-evidence: a result without the evidence its deliverable needs goes back to ``routed``.

The rules are tested in-process on real store files (the plugin given to
``Hive.open``); the last tests run the real ``hivelite`` command with the plugin
from its installed entry point, which acts on a store only once its owner enabled it
there (``hivelite policy enable evidence``).
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
from hivelite import Caller, Hive, InvalidInput, ManualClock, PluginError, Receipt
from hivelite.core.receipts import digest_of

import hivelite_evidence

START = "2026-12-02T09:00:00.000Z"
PLUGIN = "hivelite_evidence"  # the name a plugin given to Hive.open is registered under
NOTE = {"kind": "note", "summary": "looked fine"}
TESTS = {"kind": "test_output", "summary": "14 passed"}
COMMIT = {"kind": "commit", "summary": "abc1234 parser"}
SHOT = {"kind": "screenshot", "summary": "the login page"}
RUN = "14 passed in 0.31s"
"""The test run's output, carried as a piece of evidence's content."""
RECEIPTED = {"kind": "test_output", "summary": "14 passed", "content": RUN,
             "receipt": {"digest": digest_of(RUN.encode())}}
"""Test output with a receipt hivelite verifies: the digest of its content."""
MISMATCHED = {"kind": "test_output", "summary": "14 passed", "content": RUN,
              "receipt": {"digest": digest_of(b"2 failed, 12 passed")}}
"""Test output whose receipt's digest is another output's."""
VERIFIED_CODE = '[evidence]\nverified = ["code"]\n'
NEEDS_VERIFIED = "a code result needs verified evidence (a receipt hivelite checked);"
OWNER = Caller.owner("ana")
"""The store's owner, acting as owner."""
CODER = Caller.agent("ana/coder", "laptop")
"""The assignee of every task here, on the laptop."""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the plugin under test: no entry point a store enabled, no outside settings."""
    monkeypatch.setenv("HIVELITE_LOAD_PLUGINS", "")
    for name in ("HIVELITE_CONFIG", "HIVELITE_EVIDENCE", "HIVELITE_PLUGINS_DIR",
                 "HIVELITE_AGENT", "HIVELITE_INSTANCE", "HIVELITE_SESSION"):
        monkeypatch.delenv(name, raising=False)


def open_hive(folder: Path, settings: str | None = None) -> Hive:
    """A store in ``folder``, with ``settings`` written to the hivelite.toml beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    if settings is not None:
        (folder / "hivelite.toml").write_text(settings)
    return Hive.open(folder / "store.db", owner="ana", clock=ManualClock(START),
                     plugins=[hivelite_evidence])


@pytest.fixture
def hive(tmp_path: Path) -> Iterator[Hive]:
    with open_hive(tmp_path) as h:
        yield h


def submit(hive: Hive, evidence: list[dict[str, Any]],
           deliverable_type: str = "code") -> Receipt:
    """Hand a task to ana/coder, claim it and return a result with ``evidence``; the
    submit's receipt (its seq is the last journal row's)."""
    handed = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
                          packet={"task": "Write the parser",
                                  "deliverable_type": deliverable_type,
                                  "acceptance_criteria": ["tests pass"]})
    lease = hive.claim(CODER, handed.number)
    receipt = hive.submit(CODER, handed.number, lease_id=lease.lease_id,
                          token=lease.fencing_token, summary="done", evidence=evidence)
    assert receipt.seq == hive.history(receipt.number)[-1].seq
    return receipt


def refusal(hive: Hive, number: int) -> tuple[str, list[str]]:
    """The verifying -> routed move's reason and the problems in its detail."""
    last = hive.history(number)[-1]
    assert (last.from_state, last.to_state, last.actor) == ("verifying", "routed", "guard")
    assert last.detail is not None
    problems = last.detail["problems"]
    assert all(p["plugin"] == PLUGIN for p in problems)
    assert last.reason is not None
    return last.reason, [p["problem"] for p in problems]


# -- the defaults ------------------------------------------------------------------------------


def test_code_with_only_a_note_goes_back_naming_the_missing_kinds(hive: Hive) -> None:
    receipt = submit(hive, [NOTE])
    assert receipt.state == "routed"
    reason, problems = refusal(hive, receipt.number)
    assert problems == ["a code result needs test_output or commit evidence; it has only note"]
    assert reason.startswith("evidence refused: ")
    assert "test_output or commit" in reason


@pytest.mark.parametrize("proof", [TESTS, COMMIT], ids=["test_output", "commit"])
def test_code_with_test_output_or_commit_reaches_approval(hive: Hive,
                                                          proof: dict[str, Any]) -> None:
    receipt = submit(hive, [NOTE, proof])
    assert receipt.state == "approval"


def test_screenshots_need_a_screenshot(hive: Hive) -> None:
    refused = submit(hive, [NOTE], "screenshots")
    assert refused.state == "routed"
    _, problems = refusal(hive, refused.number)
    assert problems == ["a screenshots result needs screenshot evidence; it has only note"]
    assert submit(hive, [SHOT], "screenshots").state == "approval"


def test_other_types_need_nothing_by_default(hive: Hive) -> None:
    assert submit(hive, [NOTE], "doc").state == "approval"


def test_a_link_without_a_url_goes_back_naming_the_item(hive: Hive) -> None:
    receipt = submit(hive, [TESTS, {"kind": "link", "summary": "the design notes"}])
    assert receipt.state == "routed"
    reason, problems = refusal(hive, receipt.number)
    assert problems == ["evidence 2 (link 'the design notes') has no url;"
                        " link evidence must carry one"]
    assert "evidence 2 (link 'the design notes') has no url" in reason


def test_a_pull_request_needs_a_url_and_passes_with_one(hive: Hive) -> None:
    refused = submit(hive, [TESTS, {"kind": "pull_request", "summary": "PR 7"}])
    assert refused.state == "routed"
    assert "evidence 2 (pull_request 'PR 7') has no url" in refusal(hive, refused.number)[0]
    passed = submit(hive, [TESTS, {"kind": "pull_request", "summary": "PR 7",
                                   "url": "https://example.com/pr/7"}])
    assert passed.state == "approval"


def test_every_problem_is_named_and_long_summaries_are_cut(hive: Hive) -> None:
    long = "x" * 300
    receipt = submit(hive, [{"kind": "link", "summary": long}, {"kind": "pull_request",
                                                            "summary": "PR"}])
    _, problems = refusal(hive, receipt.number)
    assert len(problems) == 3
    assert problems[0].startswith("a code result needs test_output or commit evidence")
    assert problems[1].startswith("evidence 1 (link 'xxx") and "…'" in problems[1]
    assert len(problems[1]) < 150
    assert problems[2].startswith("evidence 2 (pull_request 'PR') has no url")


def test_amend_with_evidence_the_plugin_refuses_is_invalid_input(hive: Hive) -> None:
    receipt = submit(hive, [TESTS])
    assert receipt.state == "approval"
    with pytest.raises(InvalidInput) as caught:
        hive.amend(CODER, receipt.number, evidence=[NOTE])
    assert caught.value.reason == "evidence_refused"
    assert "test_output or commit" in caught.value.message
    assert hive.get(receipt.number).task.result.evidence[0].kind == "test_output"  # type: ignore[union-attr]
    amended = hive.amend(CODER, receipt.number, evidence=[COMMIT])
    assert amended.state == "approval"
    assert hive.get(receipt.number).task.result.evidence[0].kind == "commit"  # type: ignore[union-attr]


# -- settings ----------------------------------------------------------------------------------


def test_settings_replace_a_types_requirement(tmp_path: Path) -> None:
    with open_hive(tmp_path, '[evidence.require]\ncode = ["note"]\ndoc = ["link", "note"]\n'
                   ) as hive:
        assert submit(hive, [NOTE]).state == "approval"
        replaced = submit(hive, [TESTS])  # replaced, not added to: test_output no longer does
        assert replaced.state == "routed"
        assert refusal(hive, replaced.number)[1] == [
            "a code result needs note evidence; it has only test_output"]
        assert submit(hive, [TESTS], "doc").state == "routed"
        assert submit(hive, [NOTE], "doc").state == "approval"
        assert submit(hive, [NOTE], "screenshots").state == "routed"  # default kept


def test_an_empty_list_removes_the_requirement(tmp_path: Path) -> None:
    with open_hive(tmp_path, "[evidence.require]\ncode = []\n") as hive:
        assert submit(hive, [NOTE]).state == "approval"
        assert submit(hive, [NOTE], "screenshots").state == "routed"


def test_url_required_changes_the_url_rule(tmp_path: Path) -> None:
    with open_hive(tmp_path, '[evidence]\nurl_required = ["note"]\n') as hive:
        linked = submit(hive, [TESTS, {"kind": "link", "summary": "docs"},
                               {"kind": "pull_request", "summary": "PR 7"}])
        assert linked.state == "approval"
        refused = submit(hive, [TESTS, NOTE])
        assert refused.state == "routed"
        assert refusal(hive, refused.number)[1] == [
            "evidence 2 (note 'looked fine') has no url; note evidence must carry one"]
    with open_hive(tmp_path / "none", "[evidence]\nurl_required = []\n") as hive:
        assert submit(hive, [TESTS, {"kind": "link", "summary": "docs"}]).state \
            == "approval"


def test_each_store_keeps_its_own_rules(tmp_path: Path) -> None:
    with open_hive(tmp_path / "lenient", "[evidence.require]\ncode = []\n") as lenient, \
            open_hive(tmp_path / "strict") as strict:
        assert submit(strict, [NOTE]).state == "routed"
        assert submit(lenient, [NOTE]).state == "approval"
        assert submit(strict, [NOTE]).state == "routed"


# -- verified evidence ---------------------------------------------------------------------------


def test_verified_code_without_a_receipt_goes_back(tmp_path: Path) -> None:
    with open_hive(tmp_path, VERIFIED_CODE) as hive:
        receipt = submit(hive, [TESTS, NOTE])
        assert receipt.state == "routed"
        reason, problems = refusal(hive, receipt.number)
        assert problems == [f"{NEEDS_VERIFIED} none of its 2 pieces is verified"]
        assert "needs verified evidence" in reason
        single = submit(hive, [TESTS])
        assert single.state == "routed"
        assert refusal(hive, single.number)[1] == [
            f"{NEEDS_VERIFIED} its one piece is not verified"]


def test_verified_code_with_a_receipt_that_does_not_match_goes_back_naming_why(
        tmp_path: Path) -> None:
    with open_hive(tmp_path, VERIFIED_CODE) as hive:
        receipt = submit(hive, [NOTE, MISMATCHED])
        assert receipt.state == "routed"
        assert [e.verified for e in hive.get(receipt.number).evidence] == [False, False]
        assert refusal(hive, receipt.number)[1] == [
            f"{NEEDS_VERIFIED} none of its 2 pieces is verified; the receipt on evidence 2"
            " did not verify: the digest is not the digest of the evidence's content"]


def test_verified_code_with_one_verified_piece_reaches_approval(tmp_path: Path) -> None:
    with open_hive(tmp_path, VERIFIED_CODE) as hive:
        receipt = submit(hive, [NOTE, MISMATCHED, RECEIPTED])
        assert receipt.state == "approval"
        assert [e.verified for e in hive.get(receipt.number).evidence] == [False, False, True]


def test_verified_leaves_other_types_alone(tmp_path: Path) -> None:
    with open_hive(tmp_path, VERIFIED_CODE) as hive:
        assert submit(hive, [NOTE], "doc").state == "approval"
        assert submit(hive, [SHOT], "screenshots").state == "approval"


def test_by_default_no_type_needs_verified_evidence(hive: Hive) -> None:
    assert hivelite_evidence.rules_for(hive).verified == ()
    assert submit(hive, [TESTS]).state == "approval"
    assert submit(hive, [NOTE, MISMATCHED]).state == "approval"


def test_amend_keeps_verified_code_verified(tmp_path: Path) -> None:
    with open_hive(tmp_path, VERIFIED_CODE) as hive:
        receipt = submit(hive, [RECEIPTED])
        assert receipt.state == "approval"
        with pytest.raises(InvalidInput) as caught:  # new evidence, none of it verified
            hive.amend(CODER, receipt.number, evidence=[TESTS])
        assert caught.value.reason == "evidence_refused"
        assert "needs verified evidence" in caught.value.message
        assert hive.get(receipt.number).evidence[0].verified is True
        # a new summary keeps the evidence and the receipts hivelite checked
        assert hive.amend(CODER, receipt.number, summary="done, tidied").state == "approval"
        assert hive.get(receipt.number).evidence[0].verified is True


def test_env_file_sets_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('verified = ["code", "data"]\n')
    monkeypatch.setenv("HIVELITE_EVIDENCE", str(rules))
    with open_hive(tmp_path / "store") as hive:
        assert submit(hive, [TESTS]).state == "routed"
        assert submit(hive, [RECEIPTED]).state == "approval"
        refused = submit(hive, [NOTE], "data")
        assert refusal(hive, refused.number)[1] == [
            "a data result needs verified evidence (a receipt hivelite checked);"
            " its one piece is not verified"]
        assert submit(hive, [NOTE], "doc").state == "approval"


MALFORMED = [
    ("unknown-key", "[evidence]\nrequires = {}\n", "unknown key 'requires'"),
    ("require-not-table", "[evidence]\nrequire = 3\n", "evidence.require must be a table"),
    ("unknown-type", '[evidence.require]\ncod = ["commit"]\n', "unknown deliverable type 'cod'"),
    ("unknown-kind", '[evidence.require]\ncode = ["tests"]\n', "unknown evidence kind 'tests'"),
    ("kinds-not-array", '[evidence.require]\ncode = "commit"\n', "must be an array"),
    ("kind-not-string", "[evidence.require]\ncode = [1]\n", "holds 1 (int)"),
    ("url-not-array", '[evidence]\nurl_required = "link"\n', "url_required must be an array"),
    ("url-unknown-kind", '[evidence]\nurl_required = ["url"]\n', "unknown evidence kind 'url'"),
    ("verified-not-array", '[evidence]\nverified = "code"\n',
     "evidence.verified must be an array of deliverable types, not str 'code'"),
    ("verified-unknown-type", '[evidence]\nverified = ["code", "tests"]\n',
     "evidence.verified: unknown deliverable type 'tests'; known types: code, doc, answer,"
     " screenshots, reviewed_pr, design, data, other"),
    ("verified-not-string", "[evidence]\nverified = [true]\n", "holds True (bool)"),
    ("table-not-table", "evidence = 3\n", "[evidence] in the settings file must be a table"),
]


@pytest.mark.parametrize(("settings", "fragment"), [m[1:] for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])
def test_malformed_settings_refuse_to_open(tmp_path: Path, settings: str,
                                           fragment: str) -> None:
    with pytest.raises(PluginError) as caught:
        open_hive(tmp_path, settings)
    error = caught.value
    assert (error.plugin, error.hook) == (PLUGIN, "hivelite_startup")
    assert f"plugin {PLUGIN!r}" in error.message
    assert fragment in error.message
    if "in the settings file must" not in fragment:
        assert str(tmp_path / "hivelite.toml") in error.message  # names the file


def test_env_file_replaces_the_settings_table(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('url_required = []\n[require]\ncode = ["note"]\n')
    monkeypatch.setenv("HIVELITE_EVIDENCE", str(rules))
    with open_hive(tmp_path / "store", "[evidence.require]\ncode = []\n") as hive:
        assert submit(hive, [NOTE]).state == "approval"
        assert submit(hive, [TESTS]).state == "routed"  # the file's rule, not the table's
        assert submit(hive, [NOTE, {"kind": "link", "summary": "x"}]).state == "approval"


@pytest.mark.parametrize(("content", "fragment"), [
    (None, "does not exist"),
    ("require = [", "is not valid TOML"),
    ('[evidence.require]\ncode = ["note"]\n', "the [evidence] keys go at top level"),
    ('[require]\ncode = ["tests"]\n', "[require] code: unknown evidence kind 'tests'"),
    ('verified = ["cod"]\n', "verified: unknown deliverable type 'cod'; known types: code"),
], ids=["missing", "not-toml", "nested-table", "unknown-kind", "verified-unknown-type"])
def test_a_bad_env_file_refuses_to_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        content: str | None, fragment: str) -> None:
    rules = tmp_path / "rules.toml"
    if content is not None:
        rules.write_text(content)
    monkeypatch.setenv("HIVELITE_EVIDENCE", str(rules))
    with pytest.raises(PluginError) as caught:
        open_hive(tmp_path / "store")
    assert caught.value.plugin == PLUGIN
    assert f"$HIVELITE_EVIDENCE file {rules}" in caught.value.message
    assert fragment in caught.value.message


# -- the real command, the plugin from its entry point ---------------------------------------


HANG_S = float(os.environ.get("HIVELITE_TEST_HANG_S") or 600)
"""A guard against a hung command only: never a limit on how long a slow machine takes."""


def cli_env() -> dict[str, str]:
    """The user's environment without any HIVELITE_ setting: the installed entry point
    acts on a store only once its owner enabled it there (``policy enable evidence``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env.update(HIVELITE_NOW=START)
    return env


def run(db: Path, *args: str, env: dict[str, str]) -> tuple[int, Any, str]:
    command = [str(Path(sys.executable).parent / "hivelite"), "--db", str(db), "--json", *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=HANG_S, env=env,
                          cwd=db.parent)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout else None, proc.stderr


def ours(db: Path, env: dict[str, str]) -> dict[str, Any]:
    """The evidence plugin's row in ``hivelite plugins``."""
    code, rows, err = run(db, "plugins", env=env)
    assert code == 0, err
    [row] = [p for p in rows if p["name"] == "evidence"]
    assert row["source"] == "entry point (hivelite-evidence)"
    return row


def set_enabled(db: Path, verb: str, env: dict[str, str]) -> list[str]:
    """``hivelite policy enable|disable evidence`` as the owner: the store's enabled plugins."""
    code, policy, err = run(db, "policy", verb, "evidence", env=env)
    assert code == 0, err
    return policy["enabled_plugins"]


def submit_a_note(db: Path, env: dict[str, str]) -> tuple[str, str]:
    """Hand a code task to ana/coder, who claims it and returns it with only a note: the
    task's number and its state afterwards."""
    code, view, err = run(db, "handoff", "--requester", "ana/planner", "--assignee",
                          "ana/coder", "--project", "demo", "--task", "Write the parser",
                          "--type", "code", "--accept", "tests pass", env=env)
    assert code == 0, err
    number = str(view["number"])
    code, lease, err = run(db, "claim", number, "--agent", "ana/coder", "--instance", "laptop",
                           env=env)
    assert code == 0, err
    code, _, err = run(db, "submit", number, "--lease", lease["lease_id"], "--token",
                       str(lease["fencing_token"]), "--summary", "done",
                       "--evidence", "note:looked fine", "--agent", "ana/coder",
                       "--instance", "laptop", env=env)
    assert code == 0, err
    code, shown, err = run(db, "show", number, env=env)
    assert code == 0, err
    return number, shown["task"]["state"]


def test_cli_end_to_end_with_the_entry_point(tmp_path: Path) -> None:
    env = cli_env()
    db = tmp_path / "store.db"

    listed = ours(db, env)  # installed, but no store has enabled it
    assert (listed["status"], listed["enabled"], listed["hooks"]) == ("not_enabled", False, [])

    assert run(db, "init", "--owner", "ana", env=env)[0] == 0
    assert "evidence" in set_enabled(db, "enable", env)  # the owner opts this store in
    listed = ours(db, env)
    assert (listed["status"], listed["enabled"]) == ("ok", True)
    assert set(listed["hooks"]) == {"hivelite_startup", "hivelite_check_evidence"}

    number, state = submit_a_note(db, env)
    assert state == "routed"
    code, history, _ = run(db, "history", number, env=env)
    last = history[-1]
    assert (last["from_state"], last["to_state"]) == ("verifying", "routed")
    assert "test_output or commit" in last["reason"]
    assert last["detail"]["problems"] == [
        {"plugin": "evidence",
         "problem": "a code result needs test_output or commit evidence; it has only note"}]

    (tmp_path / "hivelite.toml").write_text('[evidence.require]\nscreenshots = ["photo"]\n')
    code, error, err = run(db, "handoff", "--requester", "ana/planner", "--assignee",
                           "ana/coder", "--project", "demo", "--task", "Write the lexer",
                           "--type", "code", "--accept", "tests pass", env=env)
    assert code == 1  # a process that writes loads the plugin: its settings refuse the open
    assert error["error"]["plugin"] == "evidence"
    assert "unknown evidence kind 'photo'" in err
    code, listed, err = run(db, "list", env=env)  # a read loads no plugin; nothing was written
    assert code == 0, err
    assert [str(item["number"]) for item in listed["items"]] == [number]


def test_cli_installed_is_not_enabled_until_the_owner_enables_it(tmp_path: Path) -> None:
    """Installing enables the plugin nowhere: a code result with only a note reaches
    approval until the owner runs ``policy enable evidence`` on this store, goes back to
    ``routed`` from then on, and reaches approval again once ``policy disable`` ran."""
    env = cli_env()
    db = tmp_path / "store.db"
    assert run(db, "init", "--owner", "ana", env=env)[0] == 0
    number, state = submit_a_note(db, env)
    assert state == "approval"  # installed, not enabled: no rule of the plugin's applies
    code, history, _ = run(db, "history", number, env=env)
    assert not any(e["detail"] and "problems" in e["detail"] for e in history)
    code, info, err = run(db, "info", env=env)
    assert code == 0, err
    assert "evidence" in info["installed_not_enabled"]
    assert "evidence" not in info["enabled_plugins"]
    assert ours(db, env)["status"] == "not_enabled"

    assert "evidence" in set_enabled(db, "enable", env)
    code, info, err = run(db, "info", env=env)
    assert code == 0, err
    assert "evidence" in info["enabled_plugins"]
    assert "evidence" not in info["installed_not_enabled"]
    assert submit_a_note(db, env)[1] == "routed"

    other = tmp_path / "other.db"  # enabling is per store: another store is untouched
    assert run(other, "init", "--owner", "ana", env=env)[0] == 0
    assert submit_a_note(other, env)[1] == "approval"

    assert "evidence" not in set_enabled(db, "disable", env)
    assert ours(db, env)["status"] == "not_enabled"
    assert submit_a_note(db, env)[1] == "approval"
