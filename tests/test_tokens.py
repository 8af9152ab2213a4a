"""Access tokens (issue 17): issued by the owner, kept as a hash, bound to one agent on one
instance with its rights (or to the owner), revoked once; ``authenticate`` turns a token
into the caller a face acts as, and refuses anything else with ``401``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hivelite import Caller, ForbiddenRight, Hive, InvalidInput, ManualClock, NotFound
from hivelite.core.errors import Unauthenticated
from hivelite.store.migrations import SCHEMA_VERSION

from .conftest import CODER, OWNER, own_task
from .test_cli_owner import Cli


def test_a_token_is_shown_once_and_kept_as_a_hash(hive: Hive, db_path: Path) -> None:
    issued = hive.add_token(OWNER, "ana/coder", instance="Laptop.")
    prefix, token_id, secret = issued.token.split("_", 2)
    assert (prefix, token_id, len(secret) >= 43) == ("hl", issued.id, True)
    assert (issued.agent, issued.instance, issued.rights) == (
        "ana/coder", "laptop", ["tasks.propose", "tasks.read", "tasks.work"])
    listed = hive.tokens()
    assert [t.id for t in listed] == [issued.id]
    assert "token" not in listed[0].model_dump()
    for entry in hive.journal():  # journaled without the secret
        assert secret not in json.dumps(entry.model_dump())
    hive.close()
    assert secret.encode() not in db_path.read_bytes()  # nowhere in the file


def test_authenticate_gives_the_tokens_caller_and_nothing_from_the_request(
        hive: Hive) -> None:
    agent = hive.add_token(OWNER, "ana/coder", instance="laptop",
                           rights=["tasks.read", "tasks.work"])
    found = hive.authenticate(agent.token, session="s1")
    assert found.caller == Caller.agent("ana/coder", "laptop", "s1")
    assert found.rights == {"tasks.read", "tasks.work"}
    assert found.may("tasks.work") and not found.may("tasks.propose")
    owner = hive.authenticate(hive.add_token(OWNER).token)
    assert owner.caller == OWNER and owner.may("tasks.propose")


@pytest.mark.parametrize("bad", ["", "hl_", "hl_abc", "xx_abc_def", "hl_ab-c_def", None, 7])
def test_anything_but_a_token_is_401(hive: Hive, bad: object) -> None:
    with pytest.raises(Unauthenticated) as err:
        hive.authenticate(bad)
    assert (err.value.status, err.value.code, err.value.reason) == (
        401, "unauthenticated", "invalid_token")


def test_a_wrong_secret_an_unknown_id_a_revoked_and_an_expired_token_are_401(
        hive: Hive, clock: ManualClock) -> None:
    issued = hive.add_token(OWNER, "ana/coder", instance="laptop",
                            expires_at="2026-12-02T10:00:00.000Z")
    _, token_id, secret = issued.token.split("_", 2)
    for token, reason in ((f"hl_{token_id}_{secret}x", "invalid_token"),
                          (f"hl_000000000000_{secret}", "invalid_token")):
        with pytest.raises(Unauthenticated) as err:
            hive.authenticate(token)
        assert err.value.reason == reason
    clock.advance(minutes=60)  # 10:00: the token's last instant has passed
    with pytest.raises(Unauthenticated) as err:
        hive.authenticate(issued.token)
    assert err.value.reason == "expired_token"
    other = hive.add_token(OWNER, "ana/coder", instance="laptop")
    revoked = hive.revoke_token(OWNER, other.id)
    assert revoked.revoked_at is not None
    with pytest.raises(Unauthenticated) as err:
        hive.authenticate(other.token)
    assert err.value.reason == "revoked_token"
    with pytest.raises(NotFound):
        hive.revoke_token(OWNER, other.id)  # once


def test_a_tokens_rights_bound_what_its_caller_may_write(hive: Hive) -> None:
    """tasks.work for claims and results, tasks.propose for handoffs and fields."""
    reader = hive.authenticate(hive.add_token(OWNER, "ana/coder", instance="laptop",
                                              rights=["tasks.read"]).token).caller
    n = own_task(hive)
    with pytest.raises(ForbiddenRight) as err:
        hive.claim(reader, n)
    assert (err.value.reason, err.value.extra["right"]) == ("not_permitted", "tasks.work")
    with pytest.raises(ForbiddenRight):
        hive.handoff(reader, requester="ana/coder", assignee="ana/coder", project="demo",
                     packet={"task": "Write it", "deliverable_type": "code",
                             "acceptance_criteria": ["ok"]})
    worker = hive.authenticate(hive.add_token(OWNER, "ana/coder", instance="laptop",
                                              rights=["tasks.work"]).token).caller
    assert hive.claim(worker, n).holder == "ana/coder"


def test_only_the_owner_issues_and_revokes(hive: Hive) -> None:
    with pytest.raises(ForbiddenRight):
        hive.add_token(CODER, "ana/coder", instance="laptop")
    issued = hive.add_token(OWNER, "ana/coder", instance="laptop")
    with pytest.raises(ForbiddenRight):
        hive.revoke_token(CODER, issued.id)


@pytest.mark.parametrize(("args", "kwargs", "reason"), [
    (("ana/coder",), {}, "instance_required"),
    (("coder",), {"instance": "laptop"}, "invalid_agent"),
    (("ana/coder",), {"instance": "lap top"}, "invalid_instance"),
    (("ana/coder",), {"instance": "laptop", "rights": ["tasks.all"]}, "invalid_rights"),
    (("ana/coder",), {"instance": "laptop", "rights": []}, "invalid_rights"),
    ((), {"instance": "laptop"}, "invalid_token"),
    (("ana/coder",), {"instance": "laptop", "expires_at": "2026-12-02T08:00:00.000Z"},
     "invalid_expiry"),
])
def test_a_token_that_could_not_work_is_refused(hive: Hive, args: tuple[str, ...],
                                                 kwargs: dict[str, object],
                                                 reason: str) -> None:
    with pytest.raises(InvalidInput) as err:
        hive.add_token(OWNER, *args, **kwargs)  # type: ignore[arg-type]
    assert err.value.reason == reason
    assert hive.tokens() == []


def test_the_cli_issues_lists_and_revokes_and_info_names_the_vault(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "store.db")
    cli.ok("init", "--owner", "ana")
    issued = cli.ok("token", "add", "ana/coder", "--instance", "laptop", "--rights",
                    "tasks.read,tasks.work")
    human = cli("token", "add", "--owner")
    assert human.returncode == 0 and human.stdout.startswith("hl_")
    listed = cli.ok("token", "list")
    assert sorted((t["agent"] or "", t["rights"]) for t in listed) == [
        ("", ["owner"]), ("ana/coder", ["tasks.read", "tasks.work"])]
    secret = issued["token"].split("_", 2)[2]  # a secret may itself hold "_"
    assert secret and secret not in json.dumps(listed)
    cli.ok("token", "revoke", issued["id"])
    cli.fails(5, "no_such_token", "token", "revoke", issued["id"])
    cli.fails(4, "not_permitted", "token", "add", "ana/x", "--instance", "pc",
              env={"HIVELITE_AGENT": "ana/coder", "HIVELITE_INSTANCE": "laptop"})
    assert cli("token", "add").returncode == 2  # neither an agent nor --owner
    info = cli.ok("info")
    assert (info["owner"], info["schema_version"], info["live_tokens"]) == (
        "ana", SCHEMA_VERSION, 1)
    assert len(info["vault_id"]) == 32
