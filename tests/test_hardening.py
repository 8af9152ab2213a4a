"""Rules added after review: the side tables' triggers, the clock read under the lock,
and inputs that used to slip through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import hivelite
from hivelite import (
    Caller,
    Hive,
    InvalidInput,
    InvalidState,
    ManualClock,
    PluginError,
    StoreBusy,
    StoreError,
)
from hivelite.core.protocol import State

from . import rawsql
from .conftest import CODER, OWNER, REVIEWER, OpenHive, own_task

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]


def completed(hive: Hive) -> int:
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    receipt = hive.verify(REVIEWER, number)
    assert receipt.state is State.completed
    assert hive.get(number).task.state is State.completed
    return number


refused = rawsql.refused


# -- a closed task's side tables ------------------------------------------------------


def test_a_completed_result_cannot_be_rewritten(hive: Hive, db_path: Path) -> None:
    number = completed(hive)
    raw = rawsql.connect(db_path)
    refused(raw, "invalid_state:task_closed",
            "UPDATE results SET body = json_set(body, '$.summary', 'rewritten') WHERE task = ?",
            (number,))
    refused(raw, "invalid_state:task_closed",
            "UPDATE results SET worker = 'ana/other' WHERE task = ?", (number,))
    # the one change a closed result takes is its merge record, once, journaled first
    raw.execute("INSERT INTO journal(task, at, actor, from_state, to_state, reason, detail,"
                " prev) VALUES (?, '2026-12-02T10:00:00.000Z', 'ana', 'completed', 'completed',"
                " 'merge_recorded', '{\"merge_commit\": \"abcdef1\"}',"
                " (SELECT last_seq FROM tasks WHERE number = ?))", (number, number))
    raw.execute("UPDATE results SET merge_commit = 'abcdef1', merged_by = 'ana' WHERE task = ?",
                (number,))
    refused(raw, "invalid_state:task_closed",
            "UPDATE results SET merge_commit = '1234567' WHERE task = ?", (number,))


# -- the clock is read under the write lock --------------------------------------------


class SlowEvidenceCheck:
    """An evidence hook that takes 20 minutes of the (manual) clock."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock

    @hivelite.hookimpl
    def hivelite_check_evidence(self, task: Any, result: Any, hive: Any) -> list[str]:
        self.clock.advance(minutes=20)
        return []


def test_a_lease_that_runs_out_while_plugins_think_is_stale(open_hive: OpenHive,
                                                            clock: ManualClock) -> None:
    hive = open_hive(plugins=[SlowEvidenceCheck(clock)])
    number = own_task(hive)
    lease = hive.claim(CODER, number, minutes=5)
    with pytest.raises(InvalidState) as err:
        hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)
    assert err.value.reason == "stale_claim"
    assert hive.get(number).task.result is None


def test_returned_at_is_the_time_the_result_landed(open_hive: OpenHive,
                                                    clock: ManualClock) -> None:
    class SlowButInTime(SlowEvidenceCheck):
        @hivelite.hookimpl
        def hivelite_check_evidence(self, task: Any, result: Any, hive: Any) -> list[str]:
            self.clock.advance(minutes=2)
            return []

    hive = open_hive(plugins=[SlowButInTime(clock)])
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    receipt = hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                          summary="done", evidence=EVIDENCE)
    assert receipt.at == "2026-12-02T09:02:00.000Z"
    view = hive.get(receipt.number)
    assert view.task.result is not None
    assert view.task.result.returned_at == "2026-12-02T09:02:00.000Z"
    assert view.task.updated_at == "2026-12-02T09:02:00.000Z"


# -- verdicts a policy does not count ---------------------------------------------------


class TeamOnly:
    @hivelite.hookimpl
    def hivelite_count_confirmation(self, task: Any, confirmation: Any, hive: Any) -> bool:
        return confirmation.reviewer.startswith("ana/team-")


def test_an_uncounted_reviewer_cannot_send_a_result_back(open_hive: OpenHive) -> None:
    hive = open_hive(plugins=[TeamOnly()])
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    receipt = hive.verify(Caller.agent("ana/outsider", "desktop"), number, verdict="reject",
                          reason="I say no")
    assert receipt.state is State.approval
    view = hive.get(number)
    assert view.task.state is State.approval
    assert [(c.verdict, c.counted) for c in view.confirmations] == [("reject", False)]
    assert hive.history(number)[-1].reason == "not_counted"
    assert receipt.seq == hive.history(number)[-1].seq
    receipt = hive.verify(Caller.agent("ana/team-lead", "phone"), number, verdict="reject",
                          reason="missing tests")
    assert receipt.state is State.routed
    assert hive.get(number).task.state is State.routed
    assert receipt.seq == hive.history(number)[-1].seq


# -- inputs ------------------------------------------------------------------------------


def test_synchronous_takes_only_normal_or_full(db_path: Path) -> None:
    Hive.open(db_path, owner="ana").close()
    with pytest.raises(InvalidInput) as err:
        Hive.open(db_path, synchronous="OFF; DROP TRIGGER task_update")  # type: ignore[arg-type]
    assert err.value.reason == "invalid_synchronous"
    raw = rawsql.connect(db_path)
    assert raw.execute(
        "SELECT count(*) FROM sqlite_schema WHERE name = 'task_update'").get == 1


def test_a_threshold_beyond_reason_is_a_plugin_error(open_hive: OpenHive) -> None:
    class Huge:
        @hivelite.hookimpl
        def hivelite_merge_threshold(self, task: Any, hive: Any) -> int:
            return 2**63

    hive = open_hive(plugins=[Huge()])
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    with pytest.raises(PluginError) as err:
        hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)
    assert err.value.hook == "hivelite_merge_threshold"
    assert hive.get(number).task.state is State.accepted


def test_release_with_a_token_that_is_no_integer(hive: Hive) -> None:
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    with pytest.raises(InvalidInput) as err:
        hive.release(CODER, number, lease_id=lease.lease_id,
                     token="abc")  # type: ignore[arg-type]
    assert err.value.reason == "invalid_token"


def test_amend_moves_updated_at(hive: Hive, clock: ManualClock) -> None:
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    clock.advance(minutes=1)
    receipt = hive.amend(CODER, number, summary="done, and documented")
    assert receipt.at == "2026-12-02T09:01:00.000Z"
    assert receipt.seq == hive.history(number)[-1].seq  # the "amended" event
    assert hive.get(number).task.updated_at == "2026-12-02T09:01:00.000Z"


@pytest.mark.parametrize("ref", ["99999999999999999999999", "\u00b2", "0", "-1"])
def test_odd_task_numbers_are_simply_not_found(hive: Hive, ref: str) -> None:
    with pytest.raises(hivelite.NotFound):
        hive.get(ref)


def test_a_missing_settings_file_leaves_no_store(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIVELITE_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(InvalidInput) as err:
        Hive.open(tmp_path / "new.db", owner="ana")
    assert err.value.reason == "invalid_config"
    assert not (tmp_path / "new.db").exists()


def test_a_busy_store_is_its_own_error(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer holding the lock past the busy timeout: StoreBusy (exit 1), not a
    complaint about the caller's input."""
    from hivelite.store import sqlite as store_module

    Hive.open(db_path, owner="ana").close()
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 200)
    other = rawsql.connect(db_path)
    other.execute("BEGIN IMMEDIATE")
    try:
        with Hive.open(db_path) as hive, pytest.raises(StoreBusy) as err:
            own_task(hive)
    finally:
        other.execute("ROLLBACK")
    assert not isinstance(err.value, StoreError)
    assert (err.value.code, err.value.exit_code) == ("store_busy", 1)


class Listener:
    def __init__(self) -> None:
        self.heard: list[tuple[int, str, str, str | None, int | None]] = []

    @hivelite.hookimpl
    def hivelite_on_transition(self, task: Any, move: Any, actor: str, entry: Any) -> None:
        assert entry is not None
        self.heard.append((move.number, entry.from_state.value, entry.to_state.value,
                           entry.waiting_on.value if entry.waiting_on else None, entry.seq))


def test_a_notifier_gets_each_move_with_its_journal_row(open_hive: OpenHive) -> None:
    listener = Listener()
    hive = open_hive(plugins=[listener])
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.pause(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token, on="human",
               reason="which colour?")
    lease = hive.resume(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    assert list(hive.notify_failures) == []
    moves = [(n, f, t, w) for n, f, t, w, _ in listener.heard]
    assert moves == [
        (1, "requested", "routed", None), (6, "routed", "accepted", None),
        (7, "accepted", "working", None), (10, "working", "waiting", "human"),
        (11, "waiting", "working", None), (12, "working", "verifying", None),
        (14, "verifying", "approval", None)]
    seqs = [s for *_, s in listener.heard]
    # each move its row's seq: the submission's two moves are its one row (migration 19)
    assert seqs == sorted(seqs) and len(set(seqs[:-1])) == len(seqs) - 1
    assert seqs[-1] == seqs[-2]


def test_an_instance_name_in_other_letters_is_the_same_instance(hive: Hive) -> None:
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    with pytest.raises(InvalidState) as err:
        hive.verify(Caller.agent("ana/reviewer", "LapTop"), number)
    assert err.value.reason == "reviewer_not_independent"


def test_the_owner_releasing_an_unclaimed_task_is_told_why(hive: Hive) -> None:
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    with pytest.raises(InvalidState) as err:
        hive.release(OWNER, number)  # in approval: nobody holds it
    assert err.value.reason == "not_claimed"
    assert hive.sign_off(OWNER, number).state is State.completed
    with pytest.raises(InvalidState) as err:
        hive.release(OWNER, number)
    assert err.value.reason == "task_closed"
