"""The work queue (issue 15): ``next`` takes the most pressing ready task in one step;
priority as a rank, dependencies by number or id, attempts and their limit, fields with
``stale_base``; each rule held by the store too."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import apsw
import pytest

import hivelite
from hivelite import Caller, Hive, HiveliteError, InvalidState, ManualClock, NotFound, State
from hivelite.core.clock import system_clock
from hivelite.core.errors import ForbiddenRight, InvalidInput
from hivelite.store import SCHEMA_VERSION
from hivelite.store.schema import RANK, READY

from .conftest import (
    CODER,
    GUEST,
    HANG_S,
    OWNER,
    PLANNER,
    REVIEWER,
    START,
    Snap,
    own_task,
    packet,
    refused,
)
from .downgrade import submitted_in_three_moves, to_version
from .test_claims import EVIDENCE, complete, fence

pytestmark = pytest.mark.contract

S = State




def fail(hive: Hive, number: int) -> None:
    lease = hive.claim(CODER, number)
    hive.submit(CODER, number, **fence(lease), summary="could not", evidence=EVIDENCE,
                outcome="failed")


# -- next -------------------------------------------------------------------------------


def test_next_takes_the_most_pressing_then_the_oldest(hive: Hive) -> None:
    made = {p: own_task(hive, priority=p) for p in ("low", "normal", "urgent", "high")}
    second_urgent = own_task(hive, priority="urgent")
    order = [hive.claim_next(CODER).number for _ in range(5)]
    assert order == [made["urgent"], second_urgent, made["high"], made["normal"],
                     made["low"]]


def test_next_answers_with_the_claim(hive: Hive) -> None:
    number = own_task(hive)
    lease = hive.claim_next(CODER, minutes=5)
    assert (lease.number, lease.state, lease.fencing_token, lease.holder, lease.instance) == (
        number, S.accepted, 1, "ana/coder", "laptop")
    assert lease.expires_at == "2026-12-02T09:05:00.000Z"
    assert lease.seq == hive.history(number)[-1].seq
    assert lease.task == hive.get(number)  # the task as the claim left it


def test_next_reads_the_task_view_when_first_asked_for(hive: Hive) -> None:
    """The claim is the write's answer; the view is read after it, once, when asked for
    (a worker that needs only the lease never reads it), and every face that shows the
    answer asks for it."""
    number = own_task(hive)
    lease = hive.claim_next(CODER)
    hive.checkpoint(CODER, number, **fence(lease), progress="started")  # after the claim
    assert lease.state is S.accepted  # the claim as the write left it
    view = lease.task  # read now: the task as it stands when asked for
    assert (view.number, view.task.state, view.claim) == (number, S.working, hive.get(
        number).claim)
    hive.update(CODER, number, **fence(lease), summary="more")
    assert lease.task is view  # read once, then kept
    shown = lease.model_dump(mode="json")  # what the faces print and send
    assert shown["task"] == view.model_dump(mode="json")
    again = type(lease).model_validate(shown)  # an answer read from JSON (the client's)
    assert again.task == view and again.lease_id == lease.lease_id


def test_an_empty_queue_is_not_found_and_writes_nothing(hive: Hive, snap: Snap) -> None:
    own_task(hive, assignee="ana/reviewer")  # someone else's
    err = refused(snap, NotFound, "queue_empty", lambda: hive.claim_next(CODER))
    assert "no task is ready for ana/coder" in err.message
    assert err.status == 404 and err.extra == {"agent": "ana/coder"}


def test_next_skips_what_is_not_ready(hive: Hive, snap: Snap) -> None:
    first = own_task(hive, priority="low")
    own_task(hive, priority="urgent", packet=packet(depends_on=[str(first)]))  # blocked
    held = own_task(hive, priority="urgent", requester="guest/scout")  # waiting on the owner
    assert hive.get(held).task.state is S.waiting
    exhausted = own_task(hive, priority="urgent")
    for _ in range(3):
        fail(hive, exhausted)
    taken = own_task(hive, priority="high")
    hive.claim(CODER, taken)  # already claimed
    assert hive.claim_next(CODER).number == first
    refused(snap, NotFound, "queue_empty", lambda: hive.claim_next(CODER))


def test_next_filters_by_project_and_label(hive: Hive) -> None:
    own_task(hive, priority="urgent")
    web = own_task(hive, project="web")
    tagged = own_task(hive, labels=["parser"])
    assert hive.claim_next(CODER, project="web").number == web
    assert hive.claim_next(CODER, label="parser").number == tagged
    with pytest.raises(NotFound) as err:
        hive.claim_next(CODER, project="web")
    assert "in project 'web'" in err.value.message


def test_next_returns_expired_claims_to_the_queue_first(hive: Hive,
                                                         clock: ManualClock) -> None:
    number = own_task(hive)
    hive.claim(Caller.agent(CODER.name, "desktop"), number)
    clock.advance(minutes=11)
    lease = hive.claim_next(CODER)
    assert (lease.number, lease.fencing_token) == (number, 2)


def test_next_is_an_agents_verb(hive: Hive) -> None:
    own_task(hive)
    with pytest.raises(ForbiddenRight) as err:
        hive.claim_next(OWNER)
    assert err.value.reason == "agent_only"


def test_next_checks_the_lease_length(hive: Hive) -> None:
    own_task(hive)
    with pytest.raises(InvalidInput) as err:
        hive.claim_next(CODER, minutes=16)
    assert err.value.reason == "lease_minutes"


def test_threads_draining_one_queue_are_never_refused(open_hive: Any) -> None:
    """Four threads share one Hive, each an instance of the assignee: every task claimed
    once, and no thread ever gets anything but its task or queue_empty."""
    hive = open_hive(clock=system_clock)
    numbers = [own_task(hive, priority=("low", "normal", "high", "urgent")[i % 4])
               for i in range(40)]
    taken: list[int] = []
    errors: list[HiveliteError] = []
    lock = threading.Lock()

    def work(instance: str) -> None:
        me = Caller.agent("ana/coder", instance)
        while True:
            try:
                lease = hive.claim_next(me)
            except NotFound:
                return
            except HiveliteError as exc:  # pragma: no cover - the failure this test seeks
                with lock:
                    errors.append(exc)
                return
            with lock:
                taken.append(lease.number)

    threads = [threading.Thread(target=work, args=(f"box{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=HANG_S)
    assert errors == []
    assert sorted(taken) == sorted(numbers)


LIST_READY = (f"SELECT t.number FROM tasks t INDEXED BY tasks_queue WHERE {READY}"
              " ORDER BY t.number LIMIT ?")


@pytest.mark.sqlite_only
def test_next_reads_the_queue_index(hive: Hive) -> None:
    """The ready tasks are found through the partial index, never by scanning tasks."""
    own_task(hive)
    conn = hive.store.conn  # type: ignore[attr-defined]
    plan = " ".join(str(r[-1]) for r in conn.execute(
        f"EXPLAIN QUERY PLAN SELECT number FROM tasks WHERE assignee = ? AND {READY}"
        f" ORDER BY assignee, {RANK}, number LIMIT 1", ("ana/coder",)))
    assert "USING INDEX tasks_queue" in plan and "TEMP B-TREE" not in plan, plan
    plan = " ".join(str(r[-1]) for r in conn.execute(
        f"EXPLAIN QUERY PLAN {LIST_READY}", (50,)))
    assert "USING INDEX tasks_queue" in plan, plan


# -- priority and fields ----------------------------------------------------------------


def test_priority_sorts_as_a_rank_not_as_text(hive: Hive) -> None:
    made = [own_task(hive, priority=p) for p in ("high", "low", "urgent", "normal")]
    page = hive.list(sort="priority")
    assert [v.number for v in page.items] == [made[2], made[0], made[3], made[1]]
    assert [v.priority for v in hive.list(priority="high").items] == ["high"]


def test_set_fields_changes_priority_and_labels_under_the_version(hive: Hive) -> None:
    number = own_task(hive, labels=["parser"])
    receipt = hive.set_fields(PLANNER, number, base_version=1, priority="urgent",
                              add_labels=["api", "parser"])
    view = hive.get(number)
    assert (view.priority, view.labels, view.fields_version) == ("urgent", ["api", "parser"],
                                                                2)
    assert receipt.seq == hive.history(number)[-1].seq
    entry = hive.history(number)[-1]
    assert (entry.reason, entry.actor, entry.detail) == (
        "fields", "ana/planner", {"fields_version": 2, "priority": "urgent",
                                  "labels": ["api", "parser"]})
    hive.set_fields(CODER, number, base_version=2, remove_labels=["parser"])
    hive.set_fields(OWNER, number, base_version=3, labels=["x", "y"])
    assert (hive.get(number).labels, hive.get(number).fields_version) == (["x", "y"], 4)


def test_a_stale_base_changes_nothing(hive: Hive, snap: Snap) -> None:
    number = own_task(hive)
    hive.set_fields(OWNER, number, base_version=1, priority="high")
    err = refused(snap, InvalidState, "stale_base", lambda: hive.set_fields(
        CODER, number, base_version=1, priority="low"))
    assert err.status == 409 and err.extra == {"fields_version": 2, "number": number}


@pytest.mark.parametrize(("kwargs", "kind", "reason"), [
    ({"priority": "asap"}, InvalidInput, "invalid_priority"),
    ({"add_labels": ["Not OK"]}, InvalidInput, "invalid_label"),
    ({"add_labels": ["x" * 33]}, InvalidInput, "invalid_label"),
    ({"add_labels": [f"l{i}" for i in range(11)]}, InvalidInput, "too_many_labels"),
    ({}, InvalidInput, "no_fields"),
    ({"base_version": 0, "priority": "low"}, InvalidInput, "invalid_base_version"),
    ({"base_version": True, "priority": "low"}, InvalidInput, "invalid_base_version"),
    ({"max_attempts": 5}, ForbiddenRight, "not_permitted"),
])
def test_bad_fields_are_refused(hive: Hive, snap: Snap, kwargs: dict[str, Any],
                                kind: type[HiveliteError], reason: str) -> None:
    number = own_task(hive)
    arguments = {"base_version": 1, **kwargs}
    refused(snap, kind, reason, lambda: hive.set_fields(CODER, number, **arguments))


@pytest.mark.parametrize("who", [REVIEWER, GUEST])
def test_only_requester_assignee_or_owner_set_fields(hive: Hive, snap: Snap,
                                                     who: Caller) -> None:
    number = own_task(hive)
    refused(snap, ForbiddenRight, "not_permitted",
            lambda: hive.set_fields(who, number, base_version=1, priority="low"))


def test_a_closed_task_keeps_its_fields(hive: Hive, snap: Snap) -> None:
    number = own_task(hive)
    hive.cancel(OWNER, number)
    refused(snap, InvalidState, "task_closed",
            lambda: hive.set_fields(OWNER, number, base_version=1, priority="low"))


# -- dependencies -----------------------------------------------------------------------


def test_dependencies_by_number_or_id_are_kept_as_ids_and_shown_by_number(hive: Hive) -> None:
    first, second = own_task(hive), own_task(hive)
    second_id = hive.get(second).task.id
    number = own_task(hive, packet=packet(depends_on=[str(first), second_id, str(first)]))
    view = hive.get(number)
    assert view.task.packet.depends_on == [hive.get(first).task.id, second_id]
    assert [(d.number, d.state) for d in view.depends_on] == [(first, S.routed),
                                                              (second, S.routed)]
    assert view.blocked_by == [first, second]
    complete(hive, first)
    assert hive.get(number).blocked_by == [second]


def test_an_unknown_dependency_is_named(hive: Hive, snap: Snap) -> None:
    own_task(hive)
    err = refused(snap, InvalidInput, "unknown_dependency", lambda: own_task(
        hive, packet=packet(depends_on=["1", "99", "no-such-id"])))
    assert "99, no-such-id" in err.message


def test_list_marks_blocked_and_ready(hive: Hive) -> None:
    first = own_task(hive)
    blocked = own_task(hive, packet=packet(depends_on=[str(first)]))
    assert [v.number for v in hive.list(blocked=True).items] == [blocked]
    assert [v.number for v in hive.list(ready=True).items] == [first]
    complete(hive, first)
    assert hive.list(blocked=True).items == []
    assert [v.number for v in hive.list(ready=True).items] == [blocked]
    assert hive.claim_next(CODER).number == blocked


def test_list_searches_titles_assignees_and_labels(hive: Hive) -> None:
    """``search`` finds the text in a title, an assignee or a label, case ignored, and
    combines with the other filters; a search too long is refused by name."""
    login = own_task(hive, packet=packet(task="Fix the Login bug"), labels=["auth"])
    web = own_task(hive, packet=packet(task="Style the page"), labels=["web-ui"],
                   priority="high")
    tester = own_task(hive, assignee="ana/tester", packet=packet(task="Port the tests"))

    def found(text: str, **more: Any) -> list[int]:
        return [v.number for v in hive.list(search=text, **more).items]

    assert found("LOGIN") == [login]
    assert found("web-") == [web]
    assert found("tester") == [tester]
    assert found("the") == [login, web, tester]
    assert found("the", sort="priority") == [web, login, tester]
    assert found("the", assignee="ana/coder") == [login, web]
    assert found("the", ready=True, labels=["auth"]) == [login]
    assert found("no such words") == []
    assert found("  ") == [login, web, tester]  # blank: no search
    with pytest.raises(InvalidInput) as refusal:
        hive.list(search="x" * 201)
    assert refusal.value.reason == "invalid_search"


@pytest.mark.parametrize("end", ["cancel", "deny"])
def test_a_dependency_that_never_completes_keeps_its_dependents_blocked(
        hive: Hive, snap: Snap, end: str) -> None:
    """Decided: a cancelled or rejected dependency blocks for good; the owner cancels the
    dependent or hands the work off again without it (docs/decisions.md)."""
    first = own_task(hive, requester="guest/scout") if end == "deny" else own_task(hive)
    number = own_task(hive, packet=packet(depends_on=[str(first)]))
    if end == "deny":
        hive.deny(OWNER, first)
    else:
        hive.cancel(OWNER, first)
    state = "rejected" if end == "deny" else "cancelled"
    assert [(d.number, d.state.value) for d in hive.get(number).depends_on] == [(first, state)]
    err = refused(snap, InvalidState, "blocked", lambda: hive.claim(CODER, number))
    assert f"{first} ({state})" in err.message and "the owner cancels it" in err.message
    refused(snap, NotFound, "queue_empty", lambda: hive.claim_next(CODER))
    assert hive.cancel(OWNER, number).state is S.cancelled


# -- attempts ---------------------------------------------------------------------------


def test_failed_attempts_run_out_and_the_owner_reopens(hive: Hive, snap: Snap) -> None:
    number = own_task(hive)
    for attempt in (1, 2):
        fail(hive, number)
        view = hive.get(number)
        assert (view.attempts, view.lifecycle) == (attempt, "queued")
    fail(hive, number)
    view = hive.get(number)
    assert (view.attempts, view.max_attempts, view.lifecycle) == (3, 3, "failed")
    err = refused(snap, InvalidState, "attempts_exhausted", lambda: hive.claim(CODER, number))
    assert "--max-attempts" in err.message
    refused(snap, NotFound, "queue_empty", lambda: hive.claim_next(CODER))
    assert hive.list(ready=True).items == []
    hive.set_fields(OWNER, number, base_version=1, max_attempts=4)
    assert hive.get(number).lifecycle == "queued"
    assert hive.claim_next(CODER).number == number


class SendsBack:
    """A policy that refuses every result's evidence: each submission comes straight back."""

    @hivelite.hookimpl
    def hivelite_check_evidence(self, task: Any, result: Any, hive: Any) -> list[str]:
        return ["no commit named"]


def test_every_result_that_comes_back_counts_an_attempt(open_hive: Any, snap: Snap) -> None:
    """Evidence refused, a verifier's reject and the owner's decline each count one attempt,
    as a failed outcome does: a result that comes back can never hand the same task out
    for ever (issue 46)."""
    hive = open_hive(plugins=[SendsBack()])
    bounced = own_task(hive)
    lease = hive.claim(CODER, bounced)
    receipt = hive.submit(CODER, bounced, **fence(lease), summary="done", evidence=EVIDENCE)
    assert receipt.state is S.routed and hive.get(bounced).attempts == 1
    hive.close()
    hive = open_hive()
    rejected = own_task(hive)
    lease = hive.claim(CODER, rejected)
    hive.submit(CODER, rejected, **fence(lease), summary="done", evidence=EVIDENCE)
    assert hive.verify(REVIEWER, rejected, verdict="reject", reason="wrong file").state \
        is S.routed
    assert hive.get(rejected).attempts == 1
    lease = hive.claim(CODER, rejected)
    hive.submit(CODER, rejected, **fence(lease), summary="done", evidence=EVIDENCE)
    assert hive.decline(OWNER, rejected, reason="not what I asked").state is S.routed
    assert hive.get(rejected).attempts == 2
    fail(hive, rejected)
    view = hive.get(rejected)
    assert (view.attempts, view.lifecycle) == (3, "failed")
    err = refused(snap, InvalidState, "attempts_exhausted",
                  lambda: hive.claim(CODER, rejected))
    assert "came back 3 time(s)" in err.message
    hive.close()


def test_the_attempt_limit_comes_from_the_settings(open_hive: Any, db_path: Path) -> None:
    (db_path.parent / "hivelite.toml").write_text("[queue]\nmax_attempts = 1\n")
    hive = open_hive()
    number = own_task(hive)
    fail(hive, number)
    assert hive.get(number).lifecycle == "failed"
    (db_path.parent / "hivelite.toml").write_text("[queue]\nmax_attempts = 0\n")
    with pytest.raises(InvalidInput) as err:
        own_task(open_hive())
    assert "max_attempts" in err.value.message


# -- stores from before the queue -------------------------------------------------------


def before_the_queue(path: Path) -> tuple[int, int]:
    """A store as schema 4 left it (no dependency rows, no counts), with a task that
    depends on another that failed once: (that other, the dependent)."""
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive, \
            submitted_in_three_moves():
        first = own_task(hive)
        dependent = own_task(hive, packet=packet(depends_on=[str(first)]))
        fail(hive, first)
    conn = apsw.Connection(str(path))
    with conn:
        to_version(conn, 6)
        for name, kind in list(conn.execute(
                "SELECT name, type FROM sqlite_schema WHERE name IN ('deps_by_dependency',"
                " 'tasks_queue', 'task_unblocks', 'task_attempt_failed', 'task_claim_ready',"
                " 'task_fields', 'requests_by_age') OR (type = 'trigger' AND tbl_name ="
                " 'deps')")):
            conn.execute(f"DROP {kind.upper()} {name}")
        conn.execute("DROP TABLE deps")
        conn.execute("DROP TABLE requests")
        for column in ("attempt_limit", "attempts", "waits"):
            conn.execute(f"ALTER TABLE tasks DROP COLUMN {column}")
        conn.execute("PRAGMA user_version = 4")
    conn.close()
    return first, dependent


def test_an_upgraded_store_gets_its_dependencies_and_attempts(tmp_path: Path) -> None:
    """A store from before the queue: its depends_on ids become rows, and the failed
    attempts in its journal are counted."""
    first, dependent = before_the_queue(tmp_path / "old.db")
    with Hive.open(tmp_path / "old.db", clock=ManualClock(START)) as hive:
        assert hive.store.schema_version == SCHEMA_VERSION
        assert (hive.get(dependent).blocked_by, hive.get(first).attempts) == ([first], 1)
        assert hive.claim_next(CODER).number == first


def test_an_export_from_before_the_queue_gets_them_on_import(tmp_path: Path) -> None:
    from hivelite.store import SqliteStore
    from hivelite.store.doctor import diagnose_file
    from hivelite.store.transfer import export_lines, import_lines

    first, dependent = before_the_queue(tmp_path / "old.db")
    source = apsw.Connection(str(tmp_path / "old.db"), flags=apsw.SQLITE_OPEN_READONLY)
    lines = list(export_lines(source))
    source.close()
    assert json.loads(lines[0])["schema_version"] == 4
    store = SqliteStore(tmp_path / "new.db")
    import_lines(store.conn, lines)
    store.close()
    assert all(f.ok for f in diagnose_file(tmp_path / "new.db"))
    with Hive.open(tmp_path / "new.db", clock=ManualClock(START)) as hive:
        assert (hive.get(dependent).blocked_by, hive.get(first).attempts) == ([first], 1)


def test_an_upgraded_store_counts_the_results_that_came_back(tmp_path: Path) -> None:
    """A store from before migration 18 counts every result its journal shows sent back; an
    open task the recount alone would retire gets one more attempt, and doctor agrees."""
    from hivelite.store.doctor import diagnose_file

    path = tmp_path / "old.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive, \
            submitted_in_three_moves():
        number = own_task(hive)
        for _ in range(3):
            lease = hive.claim(CODER, number)
            hive.submit(CODER, number, **fence(lease), summary="done", evidence=EVIDENCE)
            hive.verify(REVIEWER, number, verdict="reject", reason="not yet")
        assert hive.get(number).attempts == 3
    conn = apsw.Connection(str(path))
    with conn:
        to_version(conn, 17)
        rule = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'task_fields'").get
        conn.execute("DROP TRIGGER task_fields")  # the count as migration 17's rule kept it
        conn.execute("UPDATE tasks SET attempts = 0")
        conn.execute(rule)
    conn.close()
    with Hive.open(path, clock=ManualClock(START)) as hive:
        view = hive.get(number)
        assert (view.attempts, view.max_attempts, view.lifecycle) == (3, 4, "queued")
        assert hive.claim_next(CODER).number == number
    assert all(f.ok for f in diagnose_file(path))


def test_an_upgrade_leaves_retired_a_task_its_failures_retired(tmp_path: Path) -> None:
    """A task whose failed outcomes used up its attempts before migration 18 stays retired,
    though a reject came back earlier too: only a task the recount alone would retire gets
    one more attempt. (Mutation caught: bumping every task the recount raised.)"""
    path = tmp_path / "old.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive, \
            submitted_in_three_moves():
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        hive.submit(CODER, number, **fence(lease), summary="done", evidence=EVIDENCE)
        hive.verify(REVIEWER, number, verdict="reject", reason="not yet")
        hive.set_fields(OWNER, number, base_version=1, max_attempts=4)
        for _ in range(3):
            fail(hive, number)
        assert hive.get(number).lifecycle == "failed"
    conn = apsw.Connection(str(path))
    with conn:
        to_version(conn, 17)
        rule = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'task_fields'").get
        conn.execute("DROP TRIGGER task_fields")  # the limit and count as 17 kept them
        conn.execute("UPDATE tasks SET attempts = 3, attempt_limit = 3")
        conn.execute(rule)
    conn.close()
    with Hive.open(path, clock=ManualClock(START)) as hive:
        view = hive.get(number)
        assert (view.attempts, view.max_attempts, view.lifecycle) == (4, 3, "failed")


# -- the CLI ----------------------------------------------------------------------------


def test_cli_next_fields_and_list(tmp_path: Path) -> None:
    from .test_cli_e2e import Shell  # the real CLI in a subprocess

    sh = Shell(tmp_path / "cli.db", tmp_path)
    with Hive.open(sh.db, owner="ana", clock=ManualClock(START)) as hive:
        low = own_task(hive, priority="low")
        urgent = own_task(hive, priority="urgent", labels=["api"])
    coder = ("--agent", "ana/coder", "--instance", "laptop")
    doc = sh("next", *coder)
    assert (doc["number"], doc["fencing_token"], doc["task"]["number"]) == (urgent, 1, urgent)
    assert doc["task"]["claim"]["holder"] == "ana/coder"
    assert [i["number"] for i in sh("list", "--priority", "low")["items"]] == [low]
    after = sh.raw("list", "--label", "api", "--json")  # --json after the verb too
    assert [i["number"] for i in json.loads(after.out)["items"]] == [urgent]
    sh.refused("fields", str(low), "--priority", "high", "--base-version", "3", t=0,
               exit_code=3, reason="stale_base")
    assert sh("fields", str(low), "--priority", "high", "--base-version", "1")[
        "fields_version"] == 2
    sh("next", *coder)
    sh.refused("next", *coder, t=0, exit_code=5, reason="queue_empty")
    assert "not_found/queue_empty" in sh.raw("next", *coder).err
