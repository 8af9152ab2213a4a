"""The sweep as a statement (issue 47, item 1), on both engines: a lease that ran out no
longer sends the verb that meets it to the full run. The statement's transaction ends every
such claim first, as the full run's sweep does, then writes its verb; ``expire`` itself is
that sweep alone. The journal, the answers and the refusals are the full run's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hivelite import Caller, Hive, HiveliteError, State, hookimpl

from .both_ways import refusals_both_ways, written_both_ways
from .conftest import CODER, OWNER, OpenHive, own_task
from .test_statements import FullRuns

pytestmark = pytest.mark.contract

OTHER = Caller.agent("ana/other", "desk")


def journal(hive: Hive) -> list[tuple[Any, ...]]:
    return [(e.seq, e.number, e.from_state, e.to_state, e.actor, e.reason)
            for e in hive.journal()]


def lapsed(hive: Hive, *, then: Callable[[], Any] = lambda: None) -> tuple[int, Any]:
    """A task whose claim (the coder's, 5 minutes long) ran out a minute ago, and no write
    since (any write sweeps it): ``then`` writes first."""
    number = own_task(hive, priority="high")
    lease = hive.claim(CODER, number, minutes=5)
    then()
    hive.clock.advance(minutes=6)  # type: ignore[attr-defined]
    return number, lease


def test_next_sweeps_a_lease_that_ran_out_and_takes_its_task_in_one_statement(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def scenario(hive: Hive) -> Any:
        fresh: list[int] = []
        number, _ = lapsed(hive, then=lambda: fresh.append(own_task(hive)))
        lease = hive.claim_next(CODER)
        return (lease.number == number, lease.fencing_token, lease.seq,
                hive.get(fresh[0]).task.state, journal(hive))

    written, ran = written_both_ways(open_hive, tmp_path, scenario, monkeypatch, "next")
    assert ran == [0, 1]
    took_it, token, seq, fresh, rows = written
    assert took_it and token == 2 and fresh is State.routed
    assert [r[3:] for r in rows[-2:]] == [("routed", "clock", "expired"),
                                          ("accepted", "ana/coder", "claimed")]
    assert seq == rows[-1][0]


def test_expire_is_the_sweep_alone_and_answers_what_it_ended(
        open_hive: OpenHive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def scenario(hive: Hive) -> Any:
        other = own_task(hive, assignee="ana/other")
        _, lease = lapsed(hive, then=lambda: hive.claim(OTHER, other, minutes=15))
        ended = hive.expire(OWNER)
        again = hive.expire(CODER)
        return ([(e.number, e.holder, e.from_state, e.expired_at) for e in ended], again,
                lease.expires_at, hive.get(other).task.state, journal(hive))

    written, ran = written_both_ways(open_hive, tmp_path, scenario, monkeypatch, "expire")
    assert ran == [0, 2]
    ended, again, expires_at, other, rows = written
    assert [e[:3] for e in ended] == [(2, "ana/coder", State.accepted)]
    assert ended[0][3] == expires_at
    assert again == [] and other is State.accepted
    assert rows[-1][3:] == ("routed", "clock", "expired")


def test_the_moves_a_statement_swept_are_told_to_notifiers(open_hive: OpenHive) -> None:
    told: list[tuple[int, str, str]] = []

    class Notifier:
        @hookimpl
        def hivelite_on_transition(self, task: Any, move: Any, actor: str, hive: Any,
                                   entry: Any) -> None:
            told.append((entry.seq, actor, entry.reason))

    hive = open_hive(plugins=[Notifier()])
    number, _ = lapsed(hive)
    before = hive.last_seq()
    hive.claim(CODER, number)
    assert told[-2:] == [(before + 1, "clock", "expired"), (before + 2, "ana/coder", "claimed")]


def wrong_cases(hive: Hive) -> dict[str, Callable[[], Any]]:
    """Verbs that meet a lease that ran out, each refused once it is swept (nothing is
    kept: the sweep is undone with the refused verb, and the next write sweeps again)."""
    number, lease = lapsed(hive)
    fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
    return {
        "checkpoint": lambda: hive.checkpoint(CODER, number, progress="half", **fence),
        "renew": lambda: hive.renew(CODER, number, **fence),
        "release": lambda: hive.release(CODER, number, **fence),
        "claim by another": lambda: hive.claim(OTHER, number),
        "sign off": lambda: hive.sign_off(OWNER, number),
    }


def test_a_verb_refused_after_the_sweep_refuses_as_the_full_run(
        open_hive: OpenHive, tmp_path: Path) -> None:
    said = refusals_both_ways(open_hive, tmp_path, wrong_cases)
    assert {case: reason for case, (_, reason, _) in said.items()} == {
        "checkpoint": "stale_claim", "renew": "stale_claim", "release": "stale_claim",
        "claim by another": "not_permitted",
        "sign off": "not_submitted"}


def test_a_stopped_agent_s_expire_is_refused_and_the_owner_s_is_not(
        open_hive: OpenHive, monkeypatch: pytest.MonkeyPatch) -> None:
    hive = open_hive()
    lapsed(hive, then=lambda: hive.stop(OWNER, agent="ana/other"))
    runs = FullRuns(monkeypatch)
    with pytest.raises(HiveliteError) as refused:
        hive.expire(OTHER)
    assert refused.value.reason == "vetoed"
    assert [e.number for e in hive.expire(OWNER)] == [1]
    assert runs.verbs == []  # (the stop's words, asked in the statement's transaction)
