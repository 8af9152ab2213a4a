"""Idempotent retries (issue 15): a write verb called again with the same ``request_id``
and the same arguments answers as it first did, without writing again; other arguments
under the same id are ``409 idempotency_conflict``; records last a day."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import apsw
import pytest

from hivelite import Caller, Hive, InvalidState, ManualClock, NotFound
from hivelite.core.errors import InvalidInput

from .conftest import CODER, HANG_S, OWNER, REVIEWER, Snap, own_task, refused
from .test_claims import EVIDENCE, fence

pytestmark = pytest.mark.contract


@pytest.fixture
def snap(snap: Snap) -> Snap:
    """Every kept row (request records are a cache of answers, so not among them)."""
    def taken() -> dict[str, list[tuple[object, ...]]]:
        rows = snap()
        rows.pop("requests", None)
        return rows
    return taken


def requests(hive_raw: apsw.Connection) -> list[tuple[object, ...]]:
    return list(hive_raw.execute("SELECT caller, id, verb FROM requests ORDER BY at, id"))


def test_a_retried_claim_gets_the_same_lease(hive: Hive, snap: Snap) -> None:
    number = own_task(hive)
    first = hive.claim(CODER, number, request_id="claim-1")
    before = snap()
    again = hive.claim(CODER, number, request_id="claim-1")  # the first answer was lost
    assert again == first
    assert snap() == before
    with pytest.raises(InvalidState) as err:  # without the id it is a new claim: refused
        hive.claim(CODER, number)
    assert err.value.reason == "task_claimed"


def test_a_retried_next_gets_the_same_task_not_another(hive: Hive, snap: Snap) -> None:
    own_task(hive)
    own_task(hive)
    first = hive.claim_next(CODER, request_id="next-1")
    before = snap()
    assert hive.claim_next(CODER, request_id="next-1") == first
    assert snap() == before
    assert hive.claim_next(CODER, request_id="next-2").number != first.number


def test_a_retried_submit_returns_the_first_result(hive: Hive, snap: Snap) -> None:
    number = own_task(hive)
    lease = hive.claim(CODER, number)
    arguments: dict[str, Any] = {**fence(lease), "summary": "done", "evidence": EVIDENCE}
    first = hive.submit(CODER, number, **arguments, request_id="submit-1")
    before = snap()
    # the lease is gone now: a new submit would be stale_claim, the retry is not
    assert hive.submit(CODER, number, **arguments, request_id="submit-1") == first
    assert snap() == before
    assert [e.move for e in hive.history(number)].count(12) == 1


def test_the_same_id_with_other_arguments_is_a_conflict(hive: Hive, snap: Snap) -> None:
    number = own_task(hive)
    other = own_task(hive)
    hive.claim(CODER, number, request_id="r-1")
    err = refused(snap, InvalidState, "idempotency_conflict",
                  lambda: hive.claim(CODER, other, request_id="r-1"))
    assert err.status == 409 and "r-1" in err.message
    refused(snap, InvalidState, "idempotency_conflict",
            lambda: hive.claim(CODER, number, minutes=5, request_id="r-1"))
    refused(snap, InvalidState, "idempotency_conflict",
            lambda: hive.claim_next(CODER, request_id="r-1"))


def test_leaving_out_a_default_is_the_same_call(hive: Hive) -> None:
    number = own_task(hive)
    first = hive.claim(CODER, number, request_id="r-1")
    assert hive.claim(CODER, number, minutes=10, request_id="r-1") == first


def test_request_ids_belong_to_their_caller(hive: Hive, hive_raw: apsw.Connection) -> None:
    mine = own_task(hive)
    theirs = own_task(hive, assignee="ana/reviewer")
    hive.claim(CODER, mine, request_id="shared")
    lease = hive.claim(REVIEWER, theirs, request_id="shared")
    assert lease.number == theirs
    assert requests(hive_raw) == [("ana/coder", "shared", "claim"),
                             ("ana/reviewer", "shared", "claim")]


def test_a_refused_call_is_not_kept(hive: Hive, hive_raw: apsw.Connection) -> None:
    """Nothing was written, so nothing is remembered: the retry is judged again."""
    with pytest.raises(NotFound):
        hive.claim_next(CODER, request_id="early")
    assert requests(hive_raw) == []
    number = own_task(hive)
    assert hive.claim_next(CODER, request_id="early").number == number


def test_records_last_a_day_and_are_pruned(hive: Hive, clock: ManualClock,
                                           hive_raw: apsw.Connection) -> None:
    number = own_task(hive)
    lease = hive.claim(CODER, number, request_id="old")
    hive.release(CODER, number, **fence(lease), request_id="let-go")
    clock.advance(minutes=24 * 60 + 1)
    again = hive.claim(CODER, number, request_id="old")  # a day later: a new call
    assert again.fencing_token == 2 and again.lease_id != lease.lease_id
    clock.advance(minutes=24 * 60)  # a store may keep expired records a day longer
    hive.claim(CODER, number, request_id="later")  # the lease has run out: a new claim
    assert requests(hive_raw) == [("ana/coder", "old", "claim"),  # the first two pruned
                                  ("ana/coder", "later", "claim")]


def test_owner_verbs_and_handoff_take_request_ids_too(hive: Hive, snap: Snap) -> None:
    made = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                        project="demo", packet={"task": "Write the parser",
                                                "deliverable_type": "code",
                                                "acceptance_criteria": ["tests pass"]},
                        request_id="hand-1")
    before = snap()
    again = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                         project="demo", packet={"task": "Write the parser",
                                                 "deliverable_type": "code",
                                                 "acceptance_criteria": ["tests pass"]},
                         request_id="hand-1")
    assert again == made and snap() == before
    first = hive.cancel(OWNER, made.number, reason="not now", request_id="c-1")
    assert hive.cancel(OWNER, made.number, reason="not now", request_id="c-1") == first
    assert hive.expire(OWNER, request_id="e-1") == hive.expire(OWNER, request_id="e-1") == []


@pytest.mark.parametrize("bad", ["", "has space", "x" * 129, 7, "ünïcode"])
def test_a_bad_request_id_is_refused(hive: Hive, snap: Snap, bad: object) -> None:
    number = own_task(hive)
    refused(snap, InvalidInput, "invalid_request_id",
            lambda: hive.claim(CODER, number, request_id=bad))  # type: ignore[arg-type]


def test_a_retry_racing_its_first_call_gets_its_answer(hive: Hive) -> None:
    """Two threads send the same request at once (a client retrying too early): one claim
    is made, and both get its lease."""
    number = own_task(hive)
    answers: list[object] = []
    start = threading.Barrier(2, timeout=HANG_S)

    def send(instance: str) -> None:
        start.wait()
        answers.append(hive.claim(Caller.agent("ana/coder", "laptop", instance), number,
                                  request_id="race"))

    threads = [threading.Thread(target=send, args=(s,)) for s in ("s1", "s2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=HANG_S)
    assert len(answers) == 2 and answers[0] == answers[1]
    assert [e.move for e in hive.history(number)].count(6) == 1


def test_the_cli_takes_request_id(tmp_path: Path) -> None:
    from .test_cli_e2e import Shell

    sh = Shell(tmp_path / "cli.db", tmp_path)
    with Hive.open(sh.db, owner="ana", clock=ManualClock("2026-12-02T09:00:00Z")) as hive:
        number = own_task(hive)
    coder = ("--agent", "ana/coder", "--instance", "laptop")
    first = sh("claim", str(number), *coder, "--request-id", "cli-1")
    assert sh("claim", str(number), *coder, "--request-id", "cli-1") == first
    sh.refused("claim", str(number), *coder, t=0, exit_code=3, reason="task_claimed")
    error = sh.refused("release", str(number), "--lease", first["lease_id"], "--token", "1",
                       *coder, "--request-id", "cli-1", t=0, exit_code=3,
                       reason="idempotency_conflict")
    assert "cli-1" in error["message"]
    help_text = sh.raw("submit", "--help").out
    assert "--request-id" in help_text
    json.dumps(first)
