"""No silent defaults that bite (issue 19, point 4): a new store needs its owner, named or
from ``$HIVELITE_OWNER``, never guessed from the login; a path whose folder does not exist
is an error unless asked to make it; the holder can see its lease again."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hivelite import (
    Caller,
    ForbiddenRight,
    Hive,
    InvalidInput,
    InvalidState,
    ManualClock,
    StoreError,
)

from .conftest import CODER, HANG_S, own_task
from .test_discovery import clean_env, hivelite_script


def test_a_new_store_needs_its_owner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HIVELITE_OWNER", raising=False)
    path = tmp_path / "work.db"
    with pytest.raises(InvalidInput) as err:
        Hive.open(path)
    assert err.value.reason == "owner_required"
    assert "init --owner NAME" in err.value.message
    assert list(tmp_path.iterdir()) == []  # nothing was created
    monkeypatch.setenv("HIVELITE_OWNER", "ana")
    with Hive.open(path) as hive:
        assert hive.owner == "ana"
    monkeypatch.setenv("HIVELITE_OWNER", "bob")  # names the owner of new stores only
    with Hive.open(path) as hive:
        assert hive.owner == "ana"
    monkeypatch.setenv("HIVELITE_OWNER", "Not A Slug")
    with pytest.raises(InvalidInput) as bad:
        Hive.open(tmp_path / "other.db")
    assert bad.value.reason == "invalid_owner" and "$HIVELITE_OWNER" in bad.value.message


def test_a_missing_folder_is_an_error_unless_asked(tmp_path: Path) -> None:
    typo = tmp_path / "projcts" / "work.db"
    with pytest.raises(StoreError) as err:
        Hive.open(typo, owner="ana")
    assert err.value.reason == "no_folder" and "parents=True" in err.value.message
    assert not (tmp_path / "projcts").exists()
    with Hive.open(typo, owner="ana", parents=True) as hive:
        assert hive.owner == "ana"
    assert typo.is_file()


def cli(*args: str, cwd: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(hivelite_script()), *args], cwd=cwd,
                          env=clean_env(**env), capture_output=True, text=True, timeout=HANG_S)


def test_the_cli_asks_for_the_owner_and_the_demo_says_whose_store_it_makes(
        tmp_path: Path) -> None:
    refused = cli("--db", "work.db", "init", cwd=tmp_path)
    assert refused.returncode != 0 and "owner_required" in refused.stderr
    assert not (tmp_path / "work.db").exists()
    assert cli("--db", "work.db", "init", cwd=tmp_path, HIVELITE_OWNER="ana").returncode == 0
    missing = cli("--db", "sub/work.db", "init", "--owner", "ana", cwd=tmp_path)
    assert missing.returncode != 0 and "no_folder" in missing.stderr
    assert cli("--db", "sub/work.db", "init", "--owner", "ana", "--parents",
               cwd=tmp_path).returncode == 0
    demo = cli("demo", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.startswith("making hivelite.db for owner ")
    assert "your login name; choose another with --owner" in demo.stdout.splitlines()[0]


@pytest.mark.contract
def test_the_holder_sees_its_lease_again(hive: Hive, clock: ManualClock) -> None:
    """On the file and over HTTP (``GET …/tasks/N/claim``): the same answer, the same
    refusals."""
    number, idle = own_task(hive), own_task(hive)
    claimed = hive.claim(CODER, number, minutes=5)
    again = hive.lease(CODER, number)
    assert (again.lease_id, again.fencing_token, again.expires_at, again.holder,
            again.instance) == (claimed.lease_id, claimed.fencing_token,
                                claimed.expires_at, "ana/coder", "laptop")
    for other in (Caller.agent("ana/coder", "desktop"), Caller.agent("ana/tester", "laptop")):
        with pytest.raises(ForbiddenRight) as err:
            hive.lease(other, number)
        assert err.value.reason == "not_permitted" and err.value.extra["number"] == number
    with pytest.raises(ForbiddenRight):
        hive.lease(hive.as_owner(), number)  # the owner releases; it holds nothing
    with pytest.raises(InvalidState) as none:
        hive.lease(CODER, idle)
    assert none.value.reason == "no_claim"
    clock.advance(minutes=6)
    with pytest.raises(InvalidState) as expired:
        hive.lease(CODER, number)
    assert expired.value.reason == "no_claim"


def test_show_lease_on_the_cli(tmp_path: Path) -> None:
    env = {"HIVELITE_DB": str(tmp_path / "s.db"), "HIVELITE_OWNER": "ana"}
    assert cli("init", cwd=tmp_path, **env).returncode == 0
    assert cli("handoff", "--requester", "ana/planner", "--assignee", "ana/coder",
               "--project", "p", "--task", "Write the parser", "--accept", "ok",
               cwd=tmp_path, **env).returncode == 0
    agent = ["--agent", "ana/coder", "--instance", "laptop"]
    claimed = cli("--json", "claim", "1", *agent, cwd=tmp_path, **env)
    assert claimed.returncode == 0, claimed.stderr
    shown = cli("show", "1", "--lease", *agent, cwd=tmp_path, **env)
    assert shown.returncode == 0, shown.stderr
    lease_id = next(line.split()[1] for line in shown.stdout.splitlines()
                    if line.strip().startswith("lease_id"))
    with Hive.open(tmp_path / "s.db") as hive:
        assert hive.lease(Caller.agent("ana/coder", "laptop"), 1).lease_id == lease_id
    other = cli("show", "1", "--lease", "--agent", "ana/coder", "--instance", "desktop",
                cwd=tmp_path, **env)
    assert other.returncode != 0 and "not_permitted" in other.stderr
    assert lease_id not in cli("show", "1", cwd=tmp_path, **env).stdout
