"""Command-line details a user meets: refusals that are usage errors, no tracebacks,
output that tells the truth about a task's result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hivelite import Hive
from hivelite.faces.cli.main import main

from .conftest import CODER, HANG_S, OWNER, REVIEWER, own_task

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as done:
        code = int(done.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(db_path: Path) -> Path:
    Hive.open(db_path, owner="ana").close()
    return db_path


def test_an_unreadable_packet_is_an_error_not_a_traceback(
        store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "packet.json"
    bad.write_bytes(b"\xff\xfe\x00not utf-8")
    code, out, err = run(capsys, "--db", str(store), "--json", "handoff", "--requester",
                         "ana/planner", "--assignee", "ana/coder", "--project", "demo",
                         "--packet", str(bad))
    assert code == 6  # a documented refusal naming the option, not internal/unexpected
    assert json.loads(out)["error"]["reason"] == "invalid_utf8"
    assert err.startswith("error: invalid_input/invalid_utf8: --packet is not UTF-8")
    assert "Traceback" not in err


def test_packet_and_packet_options_together_are_a_usage_error(
        store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    packet = tmp_path / "packet.json"
    packet.write_text(json.dumps({"task": "From the file", "deliverable_type": "doc",
                                  "acceptance_criteria": ["x"]}))
    code, _, err = run(capsys, "--db", str(store), "handoff", "--requester", "ana/planner",
                       "--assignee", "ana/coder", "--project", "demo", "--packet",
                       str(packet), "--task", "From the options", "--type", "code")
    assert code == 2
    assert "--task" in err and "--type" in err


def test_verify_takes_exactly_one_verdict(store: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--db", str(store), "verify", "1", "--accept", "--reject",
                       "--reason", "both", "--agent", "ana/reviewer", "--instance", "desktop")
    assert code == 2 and "exactly one of --accept and --reject" in err


def test_show_labels_an_earlier_attempt_and_history_keeps_the_whole_reason(
        store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Hive.open(store) as hive:
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="first try", evidence=EVIDENCE)
        reason = "the tests cover the happy path only; " * 3
        declined = hive.decline(OWNER, number, reason=reason.strip())
        assert (declined.state.value, declined.seq) == ("routed", hive.history(number)[-1].seq)
    code, out, _ = run(capsys, "--db", str(store), "show", str(number))
    assert code == 0
    assert "last try   first try" in out
    assert "needs" not in out  # no threshold shown once the result is no longer awaited
    code, out, _ = run(capsys, "--db", str(store), "history", str(number))
    assert reason.strip() in out


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s ago"), (45, "45s ago"), (89, "1m ago"), (90, "2m ago"), (3 * 3600, "3h ago"),
    (2 * 86400 + 5, "2d ago"), (-599.9, "in 10m"), (-30, "in 30s"),
])
def test_relative_times(seconds: float, text: str) -> None:
    from datetime import timedelta

    from hivelite.core.clock import parse_ts
    from hivelite.faces.render import ago

    stamp = "2026-12-02T09:00:00.000Z"
    assert ago(stamp, parse_ts(stamp) + timedelta(seconds=seconds)) == text


def test_list_and_show_print_relative_times(store: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with Hive.open(store) as hive:  # the fixture's store: created at the wall clock's now
        number = own_task(hive)
        created = hive.get(number).task.created_at
    from datetime import timedelta

    from hivelite.core.clock import format_ts, parse_ts

    monkeypatch.setenv("HIVELITE_NOW", format_ts(parse_ts(created) + timedelta(minutes=3)))
    code, out, _ = run(capsys, "--db", str(store), "list")
    assert code == 0 and "3m ago" in out
    code, out, _ = run(capsys, "--db", str(store), "show", str(number))
    assert code == 0 and "created    3m ago" in out


def test_a_shell_loop_keeps_its_lease_in_the_environment(tmp_path: Path) -> None:
    """``eval "$(hivelite next --export)"``, then the holder verbs with no lease typed: in a
    real bash. A lease left in the environment for another task is refused by its fence
    (stale_claim, exit 3), never swapped for the caller's other claim."""
    import os
    import subprocess

    from .test_cli_e2e import hivelite_command

    script = """
set -e
hivelite init --owner ana >/dev/null
for t in "Fix the login bug" "Fix the logout bug"; do
  hivelite handoff --requester ana/planner --assignee ana/coder --project site \\
    --task "$t" --type code --accept "tests pass" >/dev/null
done
export HIVELITE_AGENT=ana/coder HIVELITE_INSTANCE=laptop
eval "$(hivelite next --export)"
first=$HIVELITE_TASK
hivelite checkpoint "$HIVELITE_TASK" --progress started >/dev/null
eval "$(hivelite next --export)"
hivelite --json submit "$HIVELITE_TASK" --summary done --evidence "test_output:3 passed" \\
  | grep -q '"state": "approval"'
set +e
hivelite update "$first" --summary late 2>err.txt
echo "exit $? task $first"
"""
    bin_dir = str(Path(hivelite_command()[0]).parent)
    env = {**os.environ, "HIVELITE_DB": str(tmp_path / "s.db"),
           "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    for name in ("HIVELITE_AGENT", "HIVELITE_INSTANCE", "HIVELITE_LEASE",
                 "HIVELITE_FENCING_TOKEN"):
        env.pop(name, None)
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=HANG_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "exit 3 task 1"
    assert "stale_claim" in (tmp_path / "err.txt").read_text()
    with Hive.open(tmp_path / "s.db") as hive:
        assert [hive.get(n).task.state for n in (1, 2)] == ["working", "approval"]


def test_the_groups_options_after_the_verb_are_the_commands_own(tmp_path: Path) -> None:
    """``--db`` and ``--json`` after the verb are read by click as the command's options
    (no argument is moved); a refusal then prints as JSON, and a holder verb's own
    ``--token`` stays its fencing token."""
    from .inproc import run_main

    db = str(tmp_path / "s.db")
    assert run_main(["init", "--db", db, "--owner", "ana", "--json"]).returncode == 0
    with Hive.open(db) as hive:
        n = own_task(hive)
    agent = ["--agent", "ana/coder", "--instance", "laptop"]
    claimed = run_main(["claim", str(n), *agent, "--db", db, "--json"])
    lease = json.loads(claimed.stdout)
    missing = run_main(["claim", "99", *agent, "--json", "--db", db])
    assert missing.returncode == 5
    assert json.loads(missing.stdout)["error"]["reason"] == "no_such_task"
    stale = run_main(["renew", str(n), "--lease", lease["lease_id"], "--token", "7", *agent,
                      "--db", db, "--json"])
    assert (stale.returncode, json.loads(stale.stdout)["error"]["reason"]) == (
        3, "stale_claim")
    listed = run_main(["list", "--json", "--db", db])
    assert [t["number"] for t in json.loads(listed.stdout)["items"]] == [n]


def test_show_counts_the_confirmations_a_result_has_of_those_it_needs(tmp_path: Path) -> None:
    """With a threshold of 2, a first confirmation shows "1 of 2", not "awaiting 2"."""
    from .inproc import run_main

    db = tmp_path / "s.db"
    with Hive.open(db, owner="ana") as hive:
        hive.set_policy(OWNER, "threshold", 2)
        n = own_task(hive)
        lease = hive.claim(CODER, n)
        hive.submit(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=[{"kind": "note", "summary": "checked"}])
        before = run_main(["--db", str(db), "show", str(n)]).stdout
        hive.verify(REVIEWER, n)
        after = run_main(["--db", str(db), "show", str(n)]).stdout
    assert "needs      0 of 2 independent confirmations, or the owner's sign-off" in before
    assert "needs      1 of 2 independent confirmations, or the owner's sign-off" in after
