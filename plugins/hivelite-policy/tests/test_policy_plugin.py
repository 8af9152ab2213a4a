"""hivelite-policy: the owner's TOML rules as a permission gate, in-process and through the CLI.

In-process tests hand the module to ``Hive.open(plugins=[...])`` with entry points
switched off (``HIVELITE_LOAD_PLUGINS=""``), so other installed plugins never
change the answers; the CLI tests use the installed entry point ``policy``, which
acts on a store only once its owner enabled it there (``hivelite policy enable policy``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hivelite
import pytest
from hivelite import Caller, Hive, ManualClock, PluginError, Receipt, State, WaitingOn

import hivelite_policy

START = "2026-12-02T09:00:00.000Z"
PLUGIN = "hivelite_policy"  # the name a module handed to Hive.open gets
ENV_KEYS = ("HIVELITE_POLICY", "HIVELITE_CONFIG", "HIVELITE_PLUGINS_DIR", "HIVELITE_NOW",
            "HIVELITE_DB", "HIVELITE_OWNER", "HIVELITE_TRACE_PLUGINS", "HIVELITE_AGENT",
            "HIVELITE_INSTANCE", "HIVELITE_SESSION")
OWNER = Caller.owner("ana")
"""The store's owner, acting as owner (hands off for any requester)."""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HIVELITE_LOAD_PLUGINS", "")  # no entry points in-process


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def opened() -> Iterator[list[Hive]]:
    hives: list[Hive] = []
    yield hives
    for hive in hives:
        hive.close()


def open_hive(db: Path, opened: list[Hive]) -> Hive:
    hive = Hive.open(db, owner="ana", clock=ManualClock(START), plugins=[hivelite_policy])
    opened.append(hive)
    return hive


def with_policy(db: Path, opened: list[Hive], text: str, monkeypatch: pytest.MonkeyPatch,
                name: str = "policy.toml") -> Hive:
    """A store whose policy file (named by ``$HIVELITE_POLICY``) holds ``text``."""
    path = db.parent / name
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("HIVELITE_POLICY", str(path))
    return open_hive(db, opened)


def handoff(hive: Hive, *, requester: str = "ana/planner", assignee: str = "ana/coder",
            project: str = "demo", kind: str = "code", files: list[str] | None = None,
            caller: Caller = OWNER) -> Receipt:
    """A handoff by ``caller`` (the owner unless given); the gate's answer is in its receipt."""
    return hive.handoff(caller, requester=requester, assignee=assignee, project=project,
                        packet={"task": "Write the parser", "deliverable_type": kind,
                                "acceptance_criteria": ["tests pass"], "files": files or []})


def reason(hive: Hive, receipt: Receipt) -> str | None:
    """The task's last reason (the gate's, right after a handoff), from its full view."""
    return hive.get(receipt.number).last_reason


def gate_row(hive: Hive, number: int) -> hivelite.JournalEntry:
    rows = [r for r in hive.history(number) if r.from_state is State.requested]
    assert len(rows) == 1
    return rows[0]


def rule(action: str = "deny", reason: str = "no", **keys: Any) -> str:
    """One ``[[rule]]`` table in TOML (values written as JSON, which TOML reads the same)."""
    lines = ["[[rule]]"] + [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    return "\n".join([*lines, f'action = "{action}"', f"reason = {json.dumps(reason)}", ""])


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# -- no file: no opinion ---------------------------------------------------------


def test_no_policy_configured_has_no_opinion(db: Path, opened: list[Hive]) -> None:
    hive = open_hive(db, opened)
    own = handoff(hive)
    assert own.state is State.routed
    detail = gate_row(hive, own.number).detail or {}
    assert [a["plugin"] for a in detail["answers"]] == ["hivelite.default_gate"]
    assert hive.plugins.has_plugin(PLUGIN)


# -- each matcher key ----------------------------------------------------------------

MATCHERS = [
    ("requester", "ana/plan*", {"requester": "ana/planner"}, {"requester": "ana/writer"}),
    ("assignee", "ana/cod*", {"assignee": "ana/coder"}, {"assignee": "ana/tester"}),
    ("project", "secret-*", {"project": "secret-site"}, {"project": "site-secret"}),
    ("deliverable_type", "design", {"kind": "design"}, {"kind": "code"}),
    ("files", ["infra/**"], {"files": ["README.md", "infra/main.tf"]},
     {"files": ["src/infra.py"]}),
]


@pytest.mark.parametrize(("key", "glob", "hit", "miss"), MATCHERS, ids=[m[0] for m in MATCHERS])
def test_each_matcher_alone(db: Path, opened: list[Hive], monkeypatch: pytest.MonkeyPatch,
                            key: str, glob: Any, hit: dict[str, Any],
                            miss: dict[str, Any]) -> None:
    hive = with_policy(db, opened, rule("deny", "blocked", **{key: glob}), monkeypatch)
    assert handoff(hive, **hit).state is State.rejected
    assert handoff(hive, **miss).state is State.routed


def test_all_given_keys_must_match(db: Path, opened: list[Hive],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    text = rule("deny", "all five", requester="ana/plan*", assignee="ana/cod*",
                project="secret-*", deliverable_type=["code", "design"], files=["*.tf"])
    hive = with_policy(db, opened, text, monkeypatch)
    full = {"requester": "ana/planner", "assignee": "ana/coder", "project": "secret-x",
            "kind": "design", "files": ["infra/main.tf"]}
    assert handoff(hive, **full).state is State.rejected
    for key, other in [("requester", "ana/writer"), ("assignee", "ana/tester"),
                       ("project", "public"), ("kind", "doc"), ("files", ["main.py"])]:
        receipt = handoff(hive, **{**full, key: other})
        assert receipt.state is State.routed, key


def test_a_rule_without_matchers_matches_every_handoff(
        db: Path, opened: list[Hive], monkeypatch: pytest.MonkeyPatch) -> None:
    hive = with_policy(db, opened, rule("hold", "ask me first"), monkeypatch)
    receipt = handoff(hive, project="anything", kind="answer")
    assert (receipt.state, receipt.waiting_on) == (State.waiting, WaitingOn.owner_approval)


def test_first_matching_rule_wins(db: Path, opened: list[Hive],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    text = (rule("deny", "never this", project="other")      # 1: does not match
            + rule("hold", "owner looks first", project="demo")  # 2: decides
            + rule("deny", "would deny", project="de*"))     # 3: never reached
    hive = with_policy(db, opened, text, monkeypatch)
    receipt = handoff(hive)
    assert receipt.state is State.waiting
    assert reason(hive, receipt) == "rule 2: owner looks first"
    assert reason(hive, handoff(hive, project="delta")) == "rule 3: would deny"
    assert handoff(hive, project="zeta").state is State.routed  # none matches


@pytest.mark.parametrize("value", ["design", ["design"], ["doc", "design"], "des*"])
def test_deliverable_type_string_list_or_glob(db: Path, opened: list[Hive],
                                              monkeypatch: pytest.MonkeyPatch,
                                              value: Any) -> None:
    hive = with_policy(db, opened, rule("deny", "no", deliverable_type=value), monkeypatch)
    assert handoff(hive, kind="design").state is State.rejected
    assert handoff(hive, kind="code").state is State.routed


@pytest.mark.parametrize(("globs", "files", "hit"), [
    (["infra/**"], ["infra/a/b/main.tf"], True),
    (["infra/**"], ["infra"], False),
    (["*.tf"], ["deep/in/tree/main.tf"], True),  # fnmatch: '*' crosses '/'
    (["*.tf", "infra/**"], ["docs/x.md", "vars.tf"], True),  # any file, any glob
    (["*.tf"], ["main.TF"], False),  # case-sensitive everywhere
    (["*.tf"], [], False),  # no files never matches a files rule
    ("*.tf", ["main.tf"], True),  # a single string is one glob
], ids=["doublestar", "folder-itself", "star-crosses-slash", "any-any", "case",
        "no-files", "string"])
def test_file_globs(db: Path, opened: list[Hive], monkeypatch: pytest.MonkeyPatch,
                    globs: Any, files: list[str], hit: bool) -> None:
    hive = with_policy(db, opened, rule("deny", "infra", files=globs), monkeypatch)
    state = handoff(hive, files=files).state
    assert state is (State.rejected if hit else State.routed)


# -- actions, and what the journal says ---------------------------------------------


@pytest.mark.parametrize(("action", "state", "waiting"), [
    ("deny", State.rejected, None),
    ("hold", State.waiting, WaitingOn.owner_approval),
    ("allow", State.routed, None),
])
def test_actions_and_the_journal(db: Path, opened: list[Hive], monkeypatch: pytest.MonkeyPatch,
                                 action: str, state: State,
                                 waiting: WaitingOn | None) -> None:
    text = rule("deny", "unused", project="zzz") + rule(action, "the owner said so")
    hive = with_policy(db, opened, text, monkeypatch)
    receipt = handoff(hive)
    assert (receipt.state, receipt.waiting_on) == (state, waiting)
    row = gate_row(hive, receipt.number)
    assert receipt.seq == row.seq == hive.history(receipt.number)[-1].seq
    assert hive.history(receipt.number)[0].actor == OWNER.name  # the caller created it
    assert row.actor == "gate"
    assert row.to_state is state
    assert row.reason == "rule 2: the owner said so"
    detail = row.detail or {}
    assert detail["decided_by"] == PLUGIN
    assert {"plugin": PLUGIN, "action": action,
            "reason": "rule 2: the owner said so"} in detail["answers"]


def test_allow_cannot_open_another_owners_handoff(db: Path, opened: list[Hive],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    hive = with_policy(db, opened, rule("allow", "guests welcome"), monkeypatch)
    receipt = handoff(hive, requester="bob/planner",
                      caller=Caller.agent("bob/planner", "elsewhere"))
    assert (receipt.state, receipt.waiting_on) == (State.waiting, WaitingOn.owner_approval)
    assert (gate_row(hive, receipt.number).detail or {})["decided_by"] \
        == "hivelite.default_gate"


def test_a_500_character_reason_still_fits(db: Path, opened: list[Hive],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    hive = with_policy(db, opened, rule("deny", "x" * 500), monkeypatch)
    receipt = handoff(hive)
    assert receipt.state is State.rejected
    last_reason = reason(hive, receipt)
    assert last_reason is not None
    assert len(last_reason) == 500
    assert last_reason.startswith("rule 1: xxx")


# -- where the file comes from, and when it is read --------------------------------


def test_settings_file_relative_to_the_settings_folder(db: Path, opened: list[Hive],
                                                       tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "conf"
    (conf / "rules").mkdir(parents=True)
    (conf / "rules" / "p.toml").write_text(rule("deny", "from settings"), encoding="utf-8")
    (conf / "hive.toml").write_text('[policy]\nfile = "rules/p.toml"\n', encoding="utf-8")
    monkeypatch.setenv("HIVELITE_CONFIG", str(conf / "hive.toml"))
    monkeypatch.chdir(tmp_path)  # not the folder the path is relative to
    hive = open_hive(db, opened)
    assert reason(hive, handoff(hive)) == "rule 1: from settings"


def test_settings_file_beside_the_store(db: Path, opened: list[Hive]) -> None:
    (db.parent / "p.toml").write_text(rule("hold", "beside"), encoding="utf-8")
    (db.parent / "hivelite.toml").write_text('[policy]\nfile = "p.toml"\n', encoding="utf-8")
    hive = open_hive(db, opened)
    assert reason(hive, handoff(hive)) == "rule 1: beside"


def test_env_beats_the_settings_file(db: Path, opened: list[Hive],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (db.parent / "p.toml").write_text(rule("hold", "from settings"), encoding="utf-8")
    (db.parent / "hivelite.toml").write_text('[policy]\nfile = "p.toml"\n', encoding="utf-8")
    hive = with_policy(db, opened, rule("deny", "from env"), monkeypatch, name="env.toml")
    assert reason(hive, handoff(hive)) == "rule 1: from env"


def test_the_file_is_read_once_at_start_up(db: Path, opened: list[Hive],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    hive = with_policy(db, opened, rule("deny", "at start-up"), monkeypatch)
    Path(os.environ["HIVELITE_POLICY"]).write_text("not toml [[[", encoding="utf-8")
    assert reason(hive, handoff(hive)) == "rule 1: at start-up"
    Path(os.environ["HIVELITE_POLICY"]).unlink()
    assert reason(hive, handoff(hive)) == "rule 1: at start-up"


def test_each_store_keeps_its_own_policy(tmp_path: Path, opened: list[Hive],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = with_policy(tmp_path / "a" / "s.db", opened, rule("deny", "a"), monkeypatch)
    second = with_policy(tmp_path / "b" / "s.db", opened, rule("hold", "b"), monkeypatch)
    assert reason(first, handoff(first)) == "rule 1: a"
    assert reason(second, handoff(second)) == "rule 1: b"


def test_a_hive_that_skipped_start_up_still_reads_its_policy(
        db: Path, opened: list[Hive], monkeypatch: pytest.MonkeyPatch) -> None:
    hive = with_policy(db, opened, rule("deny", "late"), monkeypatch)
    del hivelite_policy._POLICIES[hive]
    assert reason(hive, handoff(hive)) == "rule 1: late"


# -- malformed files refuse to start ----------------------------------------------

MALFORMED: list[tuple[str, str | None, list[str]]] = [
    ("missing-file", None, ["cannot be read"]),
    ("bad-toml", "[[rule]\naction = ", ["is not valid TOML"]),
    ("rule-not-a-list", 'rule = "deny everything"\n', ["rule must be an array of tables"]),
    ("rule-a-single-table", '[rule]\naction = "deny"\nreason = "x"\n',
     ["rule must be an array of tables"]),
    ("rule-entry-not-a-table", "rule = [1]\n", ["rule 1", "must be a table"]),
    ("unknown-top-level-key", '[[rules]]\naction = "deny"\nreason = "x"\n',
     ["unknown top-level key(s) rules"]),
    ("unknown-rule-key", rule(project="x") + rule(projet="x"), ["rule 2", "unknown key(s) projet"]),
    ("missing-action", '[[rule]]\nreason = "x"\n', ["rule 1", "missing action"]),
    ("missing-reason", '[[rule]]\naction = "deny"\n', ["rule 1", "missing reason"]),
    ("action-outside-three", rule() + rule("block"), ["rule 2", "action must be one of"]),
    ("empty-reason", rule(reason=""), ["rule 1", "reason must be"]),
    ("long-reason", rule(reason="x" * 501), ["rule 1", "reason must be"]),
    ("reason-not-a-string", '[[rule]]\naction = "deny"\nreason = 5\n', ["rule 1", "reason"]),
    ("glob-not-a-string", rule(requester=5), ["rule 1", "requester must be a string"]),
    ("glob-list-of-ints", rule(files=[1]), ["rule 1", "files must hold non-empty strings"]),
    ("glob-table", '[[rule]]\naction = "deny"\nreason = "x"\nproject = {a = 1}\n',
     ["rule 1", "project must be a string"]),
    ("empty-glob-list", rule(assignee=[]), ["rule 1", "assignee must be a string or a non-empty"]),
    ("unknown-deliverable-type", rule(deliverable_type=["code", "cdoe"]),
     ["rule 1", "'cdoe' matches no deliverable type"]),
]


@pytest.mark.parametrize(("text", "expected"), [(m[1], m[2]) for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])
def test_malformed_policy_refuses_to_open(db: Path, opened: list[Hive],
                                          monkeypatch: pytest.MonkeyPatch,
                                          text: str | None, expected: list[str]) -> None:
    open_hive(db, opened).close()  # an existing store, with no policy yet
    before = snapshot(db.parent)
    path = db.parent / "bad-policy.toml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("HIVELITE_POLICY", str(path))
    with pytest.raises(PluginError) as caught:
        open_hive(db, opened)
    error = caught.value
    assert (error.plugin, error.hook) == (PLUGIN, "hivelite_startup")
    assert str(path) in error.message
    for part in expected:
        assert part in error.message
    assert {k: v for k, v in snapshot(db.parent).items() if k != path.name} == before


def test_policy_path_that_is_a_folder_refuses_to_open(db: Path, opened: list[Hive],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIVELITE_POLICY", str(db.parent))
    with pytest.raises(PluginError, match="cannot be read"):
        open_hive(db, opened)


@pytest.mark.parametrize(("settings", "expected"), [
    ('[policy]\npath = "p.toml"\n', "unknown key(s) path"),
    ("[policy]\nfile = 3\n", "file must be a non-empty string"),
    ('[policy]\nfile = ""\n', "file must be a non-empty string"),
    ('[policy]\nfile = "nowhere.toml"\n', "nowhere.toml cannot be read"),
    ('policy = "p.toml"\n', "hivelite.toml: [policy] in the settings file must be a table"),
], ids=["unknown-key", "not-a-string", "empty", "missing-file", "not-a-table"])
def test_malformed_settings_refuse_to_open(db: Path, opened: list[Hive], settings: str,
                                           expected: str) -> None:
    (db.parent / "hivelite.toml").write_text(settings, encoding="utf-8")
    with pytest.raises(PluginError) as caught:
        open_hive(db, opened)
    assert (caught.value.plugin, caught.value.hook) == (PLUGIN, "hivelite_startup")
    assert expected in caught.value.message


def test_an_empty_policy_file_has_no_rules(db: Path, opened: list[Hive],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    hive = with_policy(db, opened, "# nothing yet\n", monkeypatch)
    assert handoff(hive).state is State.routed


# -- end to end through the CLI and the installed entry point ---------------------


HANG_S = float(os.environ.get("HIVELITE_TEST_HANG_S") or 600)
"""A guard against a hung command only: never a limit on how long a slow machine takes."""
EXE = Path(sys.executable).parent / "hivelite"
INFRA = rule("deny", "infrastructure changes need the owner", files=["infra/**", "*.tf"])
"""The policy file of the CLI tests: a handoff touching infra/ or a .tf file is denied."""
HANDOFF = ("handoff", "--requester", "ana/planner", "--assignee", "ana/coder",
           "--project", "demo", "--task", "Write the parser", "--type", "code",
           "--accept", "tests pass", "--file", "infra/main.tf")
"""A handoff the INFRA rule denies."""


def cli_env(policy: Path) -> dict[str, str]:
    """The user's environment, no HIVELITE_ setting but the policy file: the installed
    entry point acts on a store only once its owner enabled it there."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env.update(HIVELITE_NOW=START, HIVELITE_POLICY=str(policy))
    return env


def cli(store: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), "--db", str(store), "--json", *args], env=env,
                          capture_output=True, text=True, timeout=HANG_S, check=False)


def policy_row(store: Path, env: dict[str, str]) -> dict[str, Any]:
    """The plugin's row in ``hivelite plugins``."""
    listed = cli(store, env, "plugins")
    assert listed.returncode == 0, listed.stderr
    mine = [p for p in json.loads(listed.stdout) if p["name"] == "policy"]
    assert len(mine) == 1
    assert mine[0]["source"].startswith("entry point")
    return mine[0]


def set_enabled(store: Path, env: dict[str, str], verb: str) -> list[str]:
    """``hivelite policy enable|disable policy`` as the owner: the store's enabled plugins."""
    done = cli(store, env, "policy", verb, "policy")
    assert done.returncode == 0, done.stderr
    enabled: list[str] = json.loads(done.stdout)["enabled_plugins"]
    return enabled


def test_cli_end_to_end_with_the_entry_point(tmp_path: Path) -> None:
    store = tmp_path / "cli.db"
    policy = tmp_path / "policy.toml"
    policy.write_text(INFRA, encoding="utf-8")
    env = cli_env(policy)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return cli(store, env, *args)

    mine = policy_row(store, env)  # installed; no store enabled it
    assert (mine["status"], mine["enabled"], mine["hooks"]) == ("not_enabled", False, [])

    assert run("init", "--owner", "ana").returncode == 0
    assert "policy" in set_enabled(store, env, "enable")  # the owner opts this store in
    mine = policy_row(store, env)
    assert (mine["enabled"], mine["loaded"]) == (True, True)
    assert "hivelite_permission_gate" in mine["hooks"]

    done = run(*HANDOFF)
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["task"]["state"] == "rejected"
    assert view["last_reason"] == "rule 1: infrastructure changes need the owner"

    before = snapshot(tmp_path)
    policy.write_text('[[rule]]\naction = "block"\nreason = "x"\n', encoding="utf-8")
    failed = run(*HANDOFF)  # a process that writes loads the plugin: the policy refuses it
    assert failed.returncode == 1
    assert "plugin 'policy'" in failed.stderr
    assert str(policy) in failed.stderr
    assert "rule 1: action must be one of allow, hold, deny" in failed.stderr
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if k != policy.name} == {
        k: v for k, v in before.items() if k != policy.name}


def test_cli_installed_is_not_enabled_until_the_owner_enables_it(tmp_path: Path) -> None:
    """Installing enables the plugin nowhere: the policy's deny rule does not apply until
    the owner runs ``policy enable policy`` on this store, applies from then on, and stops
    applying once ``policy disable policy`` ran."""
    store = tmp_path / "cli.db"
    policy = tmp_path / "policy.toml"
    policy.write_text(INFRA, encoding="utf-8")
    env = cli_env(policy)

    def handoff_state() -> str:
        done = cli(store, env, *HANDOFF)
        assert done.returncode == 0, done.stderr
        state: str = json.loads(done.stdout)["task"]["state"]
        return state

    assert cli(store, env, "init", "--owner", "ana").returncode == 0
    assert handoff_state() == "routed"  # installed, not enabled: the rule does not apply
    info = json.loads(cli(store, env, "info").stdout)
    assert "policy" in info["installed_not_enabled"]
    assert "policy" not in info["enabled_plugins"]
    assert policy_row(store, env)["status"] == "not_enabled"

    assert "policy" in set_enabled(store, env, "enable")
    assert handoff_state() == "rejected"

    assert "policy" not in set_enabled(store, env, "disable")
    assert policy_row(store, env)["status"] == "not_enabled"
    assert handoff_state() == "routed"
