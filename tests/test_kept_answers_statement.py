"""A call with a request id as its statement (issue 47, item 1), on both engines: the first
call keeps its answer with its writes, and a retry is answered with it under the write
lock, both without the full run; the answers, their seqs and the journal are the full
run's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hivelite import Hive, State

from .both_ways import written_both_ways
from .conftest import CODER, OWNER, OpenHive, packet
from .test_statements import EVIDENCE

pytestmark = pytest.mark.contract


def said(answer: Any) -> tuple[Any, ...]:
    return (answer.number, answer.state, answer.seq, getattr(answer, "fencing_token", None))


def scenario(hive: Hive) -> Any:
    """Each write called twice with the same request id, the second a retry."""
    answers = []
    for _ in range(2):
        answers.append(said(hive.handoff(OWNER, requester="ana/planner", assignee=CODER.name,
                                         project="demo", packet=packet(),
                                         request_id="hand-1")))
    number = answers[0][0]
    leases = [hive.claim(CODER, number, request_id="claim-1") for _ in range(2)]
    assert leases[0] == leases[1]
    answers += [said(lease) for lease in leases]
    fence = {"lease_id": leases[0].lease_id, "token": leases[0].fencing_token}
    for _ in range(2):
        answers.append(said(hive.checkpoint(CODER, number, progress="half",
                                            request_id="cp-1", **fence)))
    for _ in range(2):
        answers.append(said(hive.submit(CODER, number, summary="done", evidence=EVIDENCE,
                                        request_id="submit-1", **fence)))
    for _ in range(2):
        answers.append(said(hive.sign_off(OWNER, number, request_id="sign-1")))
    journal = [(e.seq, e.number, e.from_state, e.to_state, e.actor, e.reason)
               for e in hive.journal()]
    return answers, journal


@pytest.mark.parametrize("verb", ["handoff", "claim", "checkpoint", "submit", "sign_off"])
def test_a_call_and_its_retry_take_no_full_run_and_answer_as_it(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        verb: str) -> None:
    written, ran = written_both_ways(open_hive, tmp_path, scenario, monkeypatch, verb)
    # (a retried submission's fence fails before the lock: its answer is read from a
    # snapshot, by either path)
    assert ran == [0, 1 if verb == "submit" else 2]
    answers, journal = written
    for first, again in zip(answers[::2], answers[1::2], strict=True):
        assert first == again  # the retry: the first answer, its seq included
    assert answers[-1][1] is State.completed
    assert answers[-1][2] == journal[-1][0]  # the sign-off's own row, not a later one
