"""Gaps issue 14 found by mutating the code, and the smaller rules it lists.

Each test here failed against a deliberately broken rule (the mutation is named in
its docstring) and passes against the rule:

- reads are honest about a lease that ran out, with no write between (DESIGN §5);
- the busy timeout is the promised one, measured against a second process holding the
  write lock (DESIGN §4, §4a);
- an instance or session name is 1-64 of the allowed characters, no newline (§8);
- ``stale_claim`` speaks of expiry only for the very claim the clock ended (§5);
- the expiry sweep and a task's history read their indexes (§4a), by query plan;
- evidence URLs are http(s) only (issue 14);
- fencing tokens are integers at the API (issue 14);
- terminal control characters are escaped in human output, never in JSON (issue 14).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from jsonschema import Draft202012Validator, FormatChecker

from hivelite import (
    Caller,
    ClaimReceipt,
    Hive,
    HiveliteError,
    InvalidInput,
    InvalidState,
    ManualClock,
    State,
    StoreBusy,
)
from hivelite.core.clock import format_ts
from hivelite.faces import render
from hivelite.faces.terminal import printable
from hivelite.store import sqlite as store_module

from . import rawsql
from .conftest import CODER, HANG_S, OWNER, START, at, own_task, packet
from .test_cli_e2e import hivelite_command

NOTE = [{"kind": "note", "summary": "checked by hand"}]
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "hivelite" / "data" / "task.schema.json"


def snap(db_path: Path) -> dict[str, list[tuple[object, ...]]]:
    return rawsql.snapshot_file(db_path)


def refused(db_path: Path, kind: type[HiveliteError], reason: str,
            call: Callable[[], object]) -> HiveliteError:
    """``call`` raises exactly ``kind`` with ``reason`` and leaves every row as it was."""
    before = snap(db_path)
    with pytest.raises(HiveliteError) as err:
        call()
    assert type(err.value) is kind, err.value
    assert err.value.reason == reason, err.value
    assert snap(db_path) == before
    return err.value


# == 1. reads are honest about a lease that ran out ====================================


@pytest.mark.parametrize(("minutes", "expired"), [
    (9, False), (10 - 1 / 60_000, False), (10, True), (11, True)],
    ids=["+9m", "+10m-1ms", "+10m", "+11m"])
def test_a_run_out_lease_reads_as_expired_with_no_write_between(
        hive: Hive, clock: ManualClock, db_path: Path, minutes: float, expired: bool) -> None:
    """A 10-minute claim is live at +9 minutes and expired at exactly +10, in ``get`` and in
    ``list``, though no write has swept it yet; the read changes nothing, and the stored
    state and lifecycle stay as they are until the next write. (Mutations caught:
    ``expired=expires < now`` and ``expired=False`` in ``views.view_of``.)"""
    n = own_task(hive)
    lease = hive.claim(CODER, n)
    assert lease.expires_at == at(10)
    before = snap(db_path)
    clock.advance(minutes=minutes)

    view = hive.get(n)
    [listed] = [v for v in hive.list().items if v.number == n]
    for seen in (view, listed):
        assert seen.claim is not None and seen.claim.expires_at == at(10)
        assert seen.claim.expired is expired
        assert (seen.task.state, seen.lifecycle) == (State.accepted, "claimed")  # as stored
    assert snap(db_path) == before  # reads never write

    # The next write returns it, exactly when the read said it had run out.
    hive.expire(OWNER)
    after = hive.get(n)
    assert after.task.state is (State.routed if expired else State.accepted)
    assert (after.claim is None) is expired


def test_a_renewed_lease_reads_as_live_until_its_new_expiry(
        hive: Hive, clock: ManualClock) -> None:
    """Renewal moves the expiry a read compares with: renewed at +5 for 10 minutes, the claim
    reads live at +14 and expired at +15."""
    n = own_task(hive)
    lease = hive.claim(CODER, n)
    clock.advance(minutes=5)
    hive.renew(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token)
    clock.advance(minutes=9)
    claim = hive.get(n).claim
    assert claim is not None and not claim.expired
    clock.advance(minutes=1)
    claim = hive.get(n).claim
    assert claim is not None and claim.expired and claim.expires_at == at(15)


@pytest.mark.parametrize(("minutes", "expired"), [(9, False), (10, True)], ids=["+9m", "+10m"])
def test_human_output_says_a_lease_ran_out(hive: Hive, clock: ManualClock, minutes: int,
                                           expired: bool) -> None:
    """``show`` and ``list`` keep the stored state but say the lease expired and what the
    next write does. (Mutation caught: the ``claim.expired`` branches in ``render``.)"""
    n = own_task(hive)
    hive.claim(CODER, n)
    clock.advance(minutes=minutes)
    block = render.task_block(hive.get(n), clock())
    table = render.task_table(hive.list().items, clock())
    claim_line = next(line for line in block.splitlines() if line.lstrip().startswith("claim"))
    row = table.splitlines()[1]
    if expired:
        assert "lease expired 0s ago" in claim_line
        assert "the next write returns the task to routed" in claim_line
        assert "accepted, lease expired" in row
        assert "state      accepted, lease expired" in block
    else:
        assert claim_line.endswith("expires in 1m")
        assert "expired" not in block and "expired" not in table


# == 2. the busy timeout is the promised one ===========================================

HOLD_LOCK = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()          # hold the write lock until the test closes our stdin
conn.execute("ROLLBACK")
"""


@pytest.fixture
def lock_holder(db_path: Path) -> Iterator[Callable[[], None]]:
    """Start another process that takes the store's write lock and keeps it."""
    procs: list[subprocess.Popen[str]] = []

    def start() -> None:
        proc = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(db_path)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"

    yield start
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=HANG_S)


def test_the_promised_busy_timeout_is_ten_seconds_on_every_connection(hive: Hive) -> None:
    """DESIGN §4/§4a and docs/decisions.md promise a 10 s busy timeout: the constant is that,
    and every connection (the opener's and another thread's) carries it."""
    assert store_module.BUSY_TIMEOUT_MS == 10_000
    assert hive.store.conn.execute("PRAGMA busy_timeout").get == 10_000  # type: ignore[attr-defined]
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(
        hive.store.conn.execute("PRAGMA busy_timeout").get))  # type: ignore[attr-defined]
    thread.start()
    thread.join(timeout=HANG_S)
    assert seen == [10_000]


def test_a_write_waits_the_busy_timeout_for_another_process(
        open_hive: Callable[..., Hive], monkeypatch: pytest.MonkeyPatch,
        lock_holder: Callable[[], None], db_path: Path) -> None:
    """With another process holding the write lock, a write waits about the busy timeout,
    then fails with ``StoreBusy`` and changes nothing. The constant is patched to 1.5 s so
    the test does not spend the real 10 s; the connection reads it when it is made.
    (Mutations caught: ``set_busy_timeout(BUSY_TIMEOUT_MS // 10)``; a 100 ms timeout.)"""
    timeout_ms = 1500
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", timeout_ms)
    hive = open_hive()
    n = own_task(hive)
    lock_holder()
    before = snap(db_path)
    started = time.monotonic()
    with pytest.raises(StoreBusy) as err:
        hive.claim(CODER, n)
    waited = time.monotonic() - started
    assert 0.9 * timeout_ms / 1000 <= waited < 3 * timeout_ms / 1000, waited
    assert (err.value.code, err.value.reason) == ("store_busy", "busy")
    assert snap(db_path) == before


# == 3. instance and session names: 1-64 allowed characters, no newline ================

GOOD_NAMES = ["a" * 64, "L", "laptop.home_2-b", "9" + "z" * 63]
BAD_NAMES = ["a" * 65, "laptop\n", "laptop\r\n", "a" * 64 + "\n", "", "-laptop", ".x",
             "lap top", "laptop\x00", "l\u00e4ptop"]


@pytest.mark.parametrize("name", GOOD_NAMES, ids=lambda s: f"len{len(s)}")
def test_instance_and_session_names_up_to_64_are_accepted(hive: Hive, name: str) -> None:
    caller = Caller.agent("ana/coder", name, name)
    # an instance is compared in lowercase, so it is kept so; a session as given
    assert (caller.instance, caller.session) == (name.lower(), name)
    n = own_task(hive)
    lease = hive.claim(caller, n)
    assert (lease.instance, lease.session) == (name.lower(), name)
    claim = hive.get(n).claim
    assert claim is not None and (claim.instance, claim.session) == (name.lower(), name)


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_instance_and_session_names_beyond_the_rule_are_refused(name: str) -> None:
    """65 characters, a trailing newline (which Python's ``$`` would let through) and any
    character outside ``[A-Za-z0-9._-]`` are refused, naming the field. (Mutations
    caught: ``{0,64}`` in the pattern without ``max_length``; the pattern on Python's
    engine, ``regex_engine="python-re"``, for the newline.)"""
    with pytest.raises(InvalidInput) as err:
        Caller.agent("ana/coder", name)
    assert (err.value.reason, err.value.extra["field"]) == ("invalid_instance", "instance")
    assert "1 to 64" in err.value.message or "at most 64 characters" in err.value.message
    with pytest.raises(InvalidInput) as err:
        Caller.agent("ana/coder", "laptop", name)
    assert (err.value.reason, err.value.extra["field"]) == ("invalid_session", "session")


# == 4. stale_claim names an expiry only for the claim the clock ended ================


def test_a_released_claim_is_not_said_to_have_expired(
        hive: Hive, clock: ManualClock, db_path: Path) -> None:
    """Token 1 runs out, token 2 is claimed and released: a write with token 2 is stale
    because it was *released*, so the message must not say it expired at token 1's time.
    Token 1's own write is told when it expired. (Mutation caught: dropping
    ``ended.token != token`` from ``HiveBase._fence``.)"""
    n = own_task(hive)
    first = hive.claim(CODER, n)
    clock.advance(minutes=11)
    second = hive.claim(CODER, n)
    assert (first.fencing_token, second.fencing_token) == (1, 2)
    hive.release(CODER, n, lease_id=second.lease_id, token=second.fencing_token)

    for call in (
        lambda: hive.update(CODER, n, lease_id=second.lease_id, token=2, summary="half way"),
        lambda: hive.checkpoint(CODER, n, lease_id=second.lease_id, token=2, progress="half"),
        lambda: hive.renew(CODER, n, lease_id=second.lease_id, token=2),
        lambda: hive.release(CODER, n, lease_id=second.lease_id, token=2),
        lambda: hive.submit(CODER, n, lease_id=second.lease_id, token=2, summary="done",
                            evidence=NOTE),
    ):
        error = refused(db_path, InvalidState, "stale_claim", call)
        assert "expired" not in error.message, error.message
        assert at(10) not in error.message
        assert "token 2" in error.message

    error = refused(db_path, InvalidState, "stale_claim", lambda: hive.update(
        CODER, n, lease_id=first.lease_id, token=1, summary="still here"))
    assert error.message == (f"the claim with token 1 on task {n} expired at {at(10)}; it is"
                             " routed again: claim it to take it back, with a new lease and"
                             " token")


def test_a_claim_that_ran_out_is_told_its_own_expiry(hive: Hive, clock: ManualClock,
                                                     db_path: Path) -> None:
    """Token 1 released, token 2 runs out: token 2's write is told when token 2 expired,
    token 1's is not told of any expiry."""
    n = own_task(hive)
    first = hive.claim(CODER, n)
    hive.release(CODER, n, lease_id=first.lease_id, token=1)
    clock.advance(minutes=3)
    second = hive.claim(CODER, n)
    clock.advance(minutes=10)
    error = refused(db_path, InvalidState, "stale_claim", lambda: hive.update(
        CODER, n, lease_id=second.lease_id, token=2, summary="late"))
    assert error.message == (f"the claim with token 2 on task {n} expired at {at(13)}; it is"
                             " routed again: claim it to take it back, with a new lease and"
                             " token")
    error = refused(db_path, InvalidState, "stale_claim", lambda: hive.update(
        CODER, n, lease_id=first.lease_id, token=1, summary="later"))
    assert "expired" not in error.message


# == 5. the indexes the hot reads depend on, by query plan =============================


def plans(hive: Hive, call: Callable[[], object]) -> list[tuple[str, list[str]]]:
    """Every SELECT ``call`` runs on this thread's connection or the write connection,
    with its query plan."""
    conn: apsw.Connection = hive.store.conn  # type: ignore[attr-defined]
    writer: apsw.Connection = hive.store.writer  # type: ignore[attr-defined]
    seen: list[tuple[str, Any]] = []

    def trace(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        if sql.lstrip().upper().startswith(("SELECT", "WITH")):
            seen.append((sql, bindings))
        return True

    conn.exec_trace = writer.exec_trace = trace
    try:
        call()
    finally:
        conn.exec_trace = writer.exec_trace = None
    return [(sql, [str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, bindings)])
            for sql, bindings in seen]


def _busy_store(hive: Hive, clock: ManualClock) -> int:
    """Tasks with and without live leases, one of them run out; returns a task number."""
    numbers = [own_task(hive) for _ in range(6)]
    for n in numbers[:3]:
        hive.claim(CODER, n)
    clock.advance(minutes=11)
    hive.claim(CODER, numbers[3])
    return numbers[0]


def test_the_expiry_sweep_reads_the_live_lease_index(hive: Hive, clock: ManualClock) -> None:
    """Every write starts with the sweep; it must search ``tasks_live_leases`` (the partial
    index on ``lease_expires WHERE lease_id IS NOT NULL``) and never scan the task table.
    (Mutation caught: ``SqliteTx.overdue`` without ``lease_id IS NOT NULL``: same rows,
    but a full scan on every write.)"""
    _busy_store(hive, clock)
    clock.advance(minutes=16)  # past the last live lease: the sweep must look
    seen = plans(hive, lambda: hive.expire(OWNER))
    on_tasks = [(sql, plan) for sql, plan in seen if re.search(r"\bFROM tasks\b", sql)]
    assert on_tasks, seen
    for sql, plan in on_tasks:
        assert any("USING INDEX tasks_live_leases" in step for step in plan), (sql, plan)
        assert not any(step.startswith("SCAN") for step in plan), (sql, plan)
    with hive.store.read() as reader:  # and the read the opener makes, the same query
        read = plans(hive, lambda: reader.overdue(format_ts(clock())))
    assert [p for _, p in read] and all(
        any("USING INDEX tasks_live_leases" in s for s in p) for _, p in read), read


@pytest.mark.parametrize("read", ["history", "get"])
def test_a_tasks_journal_is_read_through_its_links(hive: Hive, clock: ManualClock,
                                                   read: str) -> None:
    """A task's history, and the journal rows its view reads (its creator, decision,
    question, submission), walk its links by seq and never scan the journal (migration
    13). (Mutations caught: ``j.prev`` dropped from the walk; a view reading
    ``WHERE j.task = ?``.)"""
    n = _busy_store(hive, clock)
    seen = plans(hive, lambda: getattr(hive, read)(n))
    on_journal = [(sql, plan) for sql, plan in seen if "FROM journal" in sql]
    assert on_journal, seen
    for sql, plan in on_journal:
        assert any("journal USING INTEGER PRIMARY KEY" in step
                   or "j USING INTEGER PRIMARY KEY" in step for step in plan), (sql, plan)
        assert not any(re.match(r"SCAN (j|journal)\b", step) for step in plan), (sql, plan)


# == 6. evidence URLs are http(s) only ================================================


def claimed(hive: Hive) -> tuple[int, ClaimReceipt]:
    n = own_task(hive)
    return n, hive.claim(CODER, n)


@pytest.mark.parametrize("url", [
    "javascript:alert(1)", "JavaScript:alert(document.cookie)", "file:///etc/passwd",
    "data:text/html,hello", "ftp://example.com/x", "http:example.com", "https://",
    "mailto:ana@example.com"])
def test_an_evidence_url_other_than_http_is_refused(hive: Hive, db_path: Path,
                                                    url: str) -> None:
    """422 ``invalid_result`` naming ``evidence.1.url`` and saying http(s); nothing written.
    (Mutation caught: the ``BeforeValidator(_web_url)`` on ``Evidence.url`` removed.)"""
    n, lease = claimed(hive)
    evidence = [*NOTE, {"kind": "link", "summary": "the page", "url": url}]
    error = refused(db_path, InvalidInput, "invalid_result", lambda: hive.submit(
        CODER, n, lease_id=lease.lease_id, token=lease.fencing_token, summary="done",
        evidence=evidence))
    assert error.status == 422
    assert error.extra["field"] == "evidence.1.url"
    assert "the url of the evidence, item 2" in error.message and "http" in error.message
    if ":" in url and not url.lower().startswith("http"):
        assert repr(url.split(":")[0]) in error.message  # names the scheme it refused


@pytest.mark.parametrize("url", [
    "http://example.com/pr/7", "https://example.com/pr/7?tab=files#top",
    "HTTPS://Example.COM/x", "http://[::1]:8080/report", "https://user@ci.example.com/b/9"])
def test_http_and_https_evidence_urls_are_accepted_and_fit_the_seed_schema(
        hive: Hive, url: str) -> None:
    n, lease = claimed(hive)
    hive.submit(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token, summary="done",
                evidence=[{"kind": "link", "summary": "the page", "url": url}])
    task = hive.get(n).task
    assert task.result is not None and task.result.evidence[0].url == url
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    validator = Draft202012Validator(schema, format_checker=FormatChecker())
    assert [e.message for e in validator.iter_errors(task.to_json_dict())] == []


def test_amend_refuses_a_javascript_url_too(hive: Hive, db_path: Path) -> None:
    n, lease = claimed(hive)
    hive.submit(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token, summary="done",
                evidence=NOTE)
    error = refused(db_path, InvalidInput, "invalid_result", lambda: hive.amend(
        CODER, n, evidence=[{"kind": "link", "summary": "x", "url": "javascript:alert(1)"}]))
    assert error.extra["field"] == "evidence.0.url"


# == 7. fencing tokens are integers at the API =========================================

HOLDER_VERBS: dict[str, Callable[[Hive, int, str, Any], object]] = {
    "renew": lambda h, n, lease, t: h.renew(CODER, n, lease_id=lease, token=t),
    "checkpoint": lambda h, n, lease, t: h.checkpoint(CODER, n, lease_id=lease, token=t,
                                                      progress="half way"),
    "update": lambda h, n, lease, t: h.update(CODER, n, lease_id=lease, token=t,
                                              summary="half way"),
    "pause": lambda h, n, lease, t: h.pause(CODER, n, lease_id=lease, token=t, on="human",
                                            reason="which API?"),
    "submit": lambda h, n, lease, t: h.submit(CODER, n, lease_id=lease, token=t,
                                              summary="done", evidence=NOTE),
    "release": lambda h, n, lease, t: h.release(CODER, n, lease_id=lease, token=t),
}


@pytest.mark.parametrize("verb", HOLDER_VERBS)
@pytest.mark.parametrize(("live", "token"), [
    (1, 1.0), (1, True), (1, "1"), (2, 2.0), (2, "2"), (2, True), (1, None)],
    ids=["1.0", "True", "'1'", "2.0", "'2'", "True-for-2", "None"])
def test_a_fencing_token_that_is_not_an_int_is_refused(
        hive: Hive, clock: ManualClock, db_path: Path, verb: str, live: int,
        token: Any) -> None:
    """``2.0 == 2`` and ``True == 1`` in Python; the fence must not take them for the token.
    Refused as ``422 invalid_token`` before any write (the store unchanged); the same call
    with the real token then goes through. (Mutation caught: ``fencing_token`` removed from
    ``_holder_write``, ``renew``, ``submit`` or ``release``.)"""
    n = own_task(hive)
    lease = hive.claim(CODER, n)
    if live == 2:
        hive.release(CODER, n, lease_id=lease.lease_id, token=1)
        lease = hive.claim(CODER, n)
    assert lease.fencing_token == live
    call = HOLDER_VERBS[verb]
    if token is None and verb == "release":
        reason, kind = "lease_required", InvalidInput  # the holder's release needs both
    else:
        reason, kind = "invalid_token", InvalidInput
    error = refused(db_path, kind, reason, lambda: call(hive, n, lease.lease_id, token))
    assert error.status == 422 and error.extra["field"] in ("token", "lease_id")
    call(hive, n, lease.lease_id, live)  # the integer itself is fine


# == 8. terminal control characters are escaped in human output ======================

NASTY_TASK = "Fix\athe\rlogin \x1b[31mbug\x1b[0m now"
NASTY_CRITERION = "tests pass\x1b]0;owned\x07"
NASTY_PROGRESS = "half\x9bway\x7f"
NASTY_REASON = "stop\x1b[2Jnow\x08"
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # anything but the newline


@pytest.fixture
def nasty_store(tmp_path: Path) -> Path:
    """A store whose task text, criterion, checkpoint and last reason carry controls."""
    path = tmp_path / "nasty.db"
    with Hive.open(path, owner="ana", clock=ManualClock(START)) as hive:
        n = own_task(hive, packet=packet(task=NASTY_TASK, acceptance_criteria=[NASTY_CRITERION]))
        lease = hive.claim(CODER, n)
        hive.checkpoint(CODER, n, lease_id=lease.lease_id, token=1, progress=NASTY_PROGRESS)
        hive.release(OWNER, n, reason=NASTY_REASON)
    return path


def cli(db: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env.update(HIVELITE_LOAD_PLUGINS="", HIVELITE_NOW=at(1))
    done = subprocess.run([*hivelite_command(), "--db", str(db), *args], capture_output=True,
                          text=True, timeout=HANG_S, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("verb", [("list",), ("show", "1"), ("history", "1")],
                         ids=lambda v: v[0])
def test_control_characters_print_escaped_in_human_output(nasty_store: Path,
                                                          verb: tuple[str, ...]) -> None:
    """BEL, CR, ESC (and DEL, C1's CSI, backspace) in what agents wrote print as ``\\x07``,
    ``\\r``, ``\\x1b``... in ``list``, ``show`` and ``history``; nothing raw reaches the
    terminal. (Mutation caught: ``printable`` returning its text unchanged.)"""
    out = cli(nasty_store, *verb)
    assert not CONTROL.search(out), repr(out)
    if verb[0] != "history":
        assert r"Fix\x07the\rlogin \x1b[31mbug\x1b[0m now"[:40] in out
    if verb[0] == "show":
        assert r"tests pass\x1b]0;owned\x07" in out
        assert r"half\x9bway\x7f" in out
        assert r"(stop\x1b[2Jnow\x08)" in out
    if verb[0] == "history":
        assert r"stop\x1b[2Jnow\x08" in out


@pytest.mark.slow
def test_json_output_keeps_the_text_exactly(nasty_store: Path) -> None:
    shown = json.loads(cli(nasty_store, "--json", "show", "1"))
    assert shown["task"]["packet"]["task"] == NASTY_TASK
    assert shown["task"]["packet"]["acceptance_criteria"] == [NASTY_CRITERION]
    assert shown["task"]["latest_checkpoint"]["progress"] == NASTY_PROGRESS
    assert shown["last_reason"] == NASTY_REASON
    listed = json.loads(cli(nasty_store, "--json", "list"))
    assert listed["items"][0]["task"]["packet"]["task"] == NASTY_TASK
    history = json.loads(cli(nasty_store, "--json", "history", "1"))
    assert history[-1]["reason"] == NASTY_REASON


def test_printable_escapes_every_terminal_control_and_nothing_else() -> None:
    assert printable("a\x07b\rc\x1bd\ne\tf\x00\x7f\x85\x9f\u2028") == (
        r"a\x07b\rc\x1bd\ne\tf\x00\x7f\x85\x9f\u2028")
    kept = "plain ASCII, Ünïcödé, 日本語, emoji 🐝, backslash \\ and tabs escaped only"
    assert printable(kept) == kept
    assert printable(printable("\x1b[0m")) == r"\x1b[0m"  # idempotent
    # table widths are measured on the escaped text, so columns still line up
    out = render.table(["a", "b"], [["\x07\x07", "x"], ["yyyyyyy", "z"]])
    lines = out.splitlines()
    assert lines[1].endswith("  x") and lines[2].endswith("  z")
    assert len(lines[1]) == len(lines[2])

