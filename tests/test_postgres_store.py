"""The PostgreSQL store as its users reach it (issue 20): by URL from Python and the CLI,
moved in and out with export and import, and when its connection goes away."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hivelite import Caller, Hive, InvalidInput, ManualClock, StoreBusy, StoreError
from hivelite.store.transfer import export_lines, import_lines

from . import pg
from .conftest import CODER, HANG_S, REVIEWER, START, own_task, ready
from .test_discovery import clean_env, hivelite_script

pytestmark = pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server")

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]


@pytest.fixture
def schema() -> Iterator[str]:
    name = pg.new_schema()
    yield name
    pg.drop(name)


def busy_store(hive: Hive) -> None:
    """A store with a little of everything: tasks in several states, a verdict, usage, a
    checkpoint, a dependency, a control, a budget, a policy and a token."""
    done = own_task(hive)
    lease = hive.claim(CODER, done)
    hive.checkpoint(CODER, done, lease_id=lease.lease_id, token=lease.fencing_token,
                    progress="half way")
    hive.update(CODER, done, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="tests written", tokens=1200, usd_micros=3400)
    hive.submit(CODER, done, lease_id=lease.lease_id, token=lease.fencing_token,
                summary="done", evidence=EVIDENCE)
    hive.verify(REVIEWER, done, verdict="accept")
    later = own_task(hive, packet={"task": "Ship the parser", "deliverable_type": "code",
                                   "acceptance_criteria": ["released"],
                                   "depends_on": [hive.get(done).task.id]})
    hive.claim(CODER, later)
    hive.set_policy(hive.as_owner(), "threshold", "2")
    hive.hold(hive.as_owner(), agent="ana/tester")
    hive.set_budget(hive.as_owner(), "ana/coder", tasks=20)
    hive.add_token(hive.as_owner(), "ana/coder", instance="laptop")


def test_an_export_moves_a_store_between_engines_unchanged(tmp_path: Path,
                                                           schema: str) -> None:
    """SQLite → PostgreSQL → SQLite: the three exports are the same lines (the server's
    says where its chains per task would begin)."""
    from hivelite.store import SqliteStore
    from hivelite.store.postgres import PostgresStore

    with Hive.open(tmp_path / "first.db", owner="ana", clock=ManualClock(START)) as hive:
        busy_store(hive)
        first = list(export_lines(hive.store.tables()))  # type: ignore[attr-defined]
    assert len(first) >= 25
    server = PostgresStore(pg.store_url(schema))
    try:
        assert import_lines(server.tables(), first) == len(first) - 1
        assert server.chain_sound()
        heard: list[tuple[int, int | None]] = []
        on_server = list(export_lines(server.tables(),
                                      lambda done, total, note="": heard.append((done, total))))
        assert heard[0] == (0, len(first)) and heard[-1] == (len(first),) * 2  # (+ meta)
    finally:
        server.close()
    # the one line more says where the server's chains per task begin: after them all
    assert [line for line in on_server if '"tasks_chained_from"' not in line] == first
    rows = sum('"table": "journal"' in line for line in first)
    assert sum(f'"key": "tasks_chained_from", "value": "{rows + 1}"' in line
               for line in on_server) == 1
    back = SqliteStore(tmp_path / "back.db")
    try:
        import_lines(back.tables(), on_server)
        assert list(export_lines(back.tables())) == first
    finally:
        back.close()
    # and the moved store works: the claim made on SQLite is held on PostgreSQL
    with Hive.open(pg.store_url(schema), clock=ManualClock(START)) as hive:
        view = hive.get(2)
        assert view.claim is not None and view.claim.holder == "ana/coder"
        assert hive.lease(CODER, 2).fencing_token == 1


def test_a_journal_chained_per_task_moves_back_to_a_file_as_one_chain(
        tmp_path: Path, schema: str) -> None:
    """PostgreSQL → SQLite, the server's rows chained per task: the import checks them as
    written, chains them again as one chain (SQLite has one writer), and the file is
    sound, its head witnessed, and writable: doctor is all ok after another claim."""
    from hivelite.store import SqliteStore
    from hivelite.store.doctor import diagnose_file

    with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
        busy_store(hive)
        lines = list(export_lines(hive.store.tables()))  # type: ignore[attr-defined]
    assert any('"tasks_chained_from", "value": "1"' in line for line in lines)
    back = SqliteStore(tmp_path / "back.db")
    try:
        assert import_lines(back.tables(), lines) == len(lines) - 1
    finally:
        back.close()
    found = diagnose_file(tmp_path / "back.db")
    assert all(f.ok for f in found), [f for f in found if not f.ok]
    with Hive.open(tmp_path / "back.db", clock=ManualClock(START)) as hive:
        hive.claim(REVIEWER, own_task(hive, assignee=REVIEWER.name))
    found = diagnose_file(tmp_path / "back.db")
    assert all(f.ok for f in found), [f for f in found if not f.ok]


def test_an_import_needs_an_empty_store_and_leaves_a_full_one_alone(schema: str) -> None:
    with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
        lines = list(export_lines(hive.store.tables()))  # type: ignore[attr-defined]
        before = pg.snapshot(schema)
        with pytest.raises(StoreError) as err:
            import_lines(hive.store.tables(), lines)  # type: ignore[attr-defined]
        assert err.value.reason == "store_not_empty"
        assert pg.snapshot(schema) == before


def test_a_store_is_opened_by_its_url(schema: str) -> None:
    url = pg.store_url(schema)
    with pytest.raises(StoreError) as err:
        Hive.open(url, create=False)
    assert err.value.reason == "no_store" and "init --owner" in err.value.message
    with Hive.open(url, owner="ana") as hive:
        assert hive.store.location == url
        number = own_task(hive)
    with Hive.open(url) as hive:  # a second opener finds the same store
        assert hive.owner == "ana" and hive.get(number).task.state.value == "routed"


def test_a_password_never_shows(schema: str) -> None:
    from hivelite.store.urls import shown

    assert shown("postgresql://ana:s3cret@db.example.org:5433/hive") == (
        "postgresql://ana@db.example.org:5433/hive")
    with pytest.raises(StoreBusy) as err:
        Hive.open("postgresql://ana:s3cret@127.0.0.1:1/hive", owner="ana")
    assert err.value.reason == "unreachable"
    assert "postgresql://ana@127.0.0.1:1/hive" in err.value.message
    assert "s3cret" not in str(err.value)


def test_a_schema_name_is_checked(schema: str) -> None:
    with pytest.raises(StoreError) as err:
        Hive.open(pg.url(pg.database(), "Robert'); DROP"), owner="ana")
    assert err.value.reason == "invalid_schema"


def test_a_lost_connection_is_a_clear_error_and_the_next_call_reconnects(
        schema: str) -> None:
    """The server ends the store's connection between two verbs: the next verb fails with
    ``503 store_busy connection_lost`` and nothing written, and a retry (with the same
    request id) reconnects and answers."""
    with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
        number = own_task(hive)
        with pg.connect() as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE application_name = 'hivelite' AND pid <> pg_backend_pid()"
                          " AND datname = current_database()")
        with pytest.raises(StoreBusy) as err:
            hive.claim(CODER, number, request_id="claim-1")
        assert err.value.reason == "connection_lost"
        assert "request id" in err.value.message
        lease = hive.claim(CODER, number, request_id="claim-1")
        assert hive.claim(CODER, number, request_id="claim-1") == lease  # the first answer


def test_the_cli_takes_a_url(schema: str, tmp_path: Path) -> None:
    url = pg.store_url(schema)
    env = clean_env(HIVELITE_DB=url)

    def run(*args: str, code: int = 0) -> str:
        proc = subprocess.run([str(hivelite_script()), *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=HANG_S)
        assert proc.returncode == code, proc.stderr
        return proc.stdout + proc.stderr

    assert f"store {url} ready (owner ana)" in run("init", "--owner", "ana")
    run("handoff", "--requester", "ana/planner", "--assignee", "ana/coder", "--project", "p",
        "--task", "Write the parser", "--accept", "tests pass")
    assert "accepted by ana/coder" in run("next", "--agent", "ana/coder", "--instance", "l")
    assert "Write the parser" in run("list")
    assert "works on an SQLite store file" in run("backup", "x.db", code=2)
    assert "ok    hash chain" in run("doctor")  # the rows as on a file, the rules here
    exported = tmp_path / "out.jsonl"
    run("export", "--out", str(exported))
    copy = tmp_path / "copy.db"
    assert "doctor: ok" in run("--db", str(copy), "import", str(exported))


def test_without_the_extra_the_error_says_what_to_install(schema: str) -> None:
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from hivelite import Hive, InvalidInput\n"
            "try:\n"
            f"    Hive.open({pg.store_url(schema)!r}, owner='ana')\n"
            "except InvalidInput as exc:\n"
            "    print(exc.reason, exc.message)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=HANG_S, env={**os.environ, "HIVELITE_LOAD_PLUGINS": ""})
    assert out.stdout.startswith("postgres_missing"), out
    assert "pip install 'hivelite[postgres]'" in out.stdout


def test_two_stores_share_a_database_apart() -> None:
    first, second = pg.new_schema(), pg.new_schema()
    try:
        with Hive.open(pg.store_url(first), owner="ana") as one, \
                Hive.open(pg.store_url(second), owner="bob") as two:
            own_task(one)
            assert two.list().items == [] and two.owner == "bob"
            assert Caller.owner("bob") == two.as_owner()
    finally:
        pg.drop(first)
        pg.drop(second)



def test_a_store_on_postgresql_is_served(schema: str, loopback_server: Any) -> None:
    """``hivelite serve`` over a PostgreSQL store: an agent on another machine claims and
    returns work through the HTTP client, as it would from a file."""
    from hivelite.faces.client import Client

    with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
        number = own_task(hive)
        vault = loopback_server.vaults.add(hive)
        try:
            token = hive.add_token(hive.as_owner(), "ana/coder", instance="laptop").token
            client = Client(loopback_server.url, token)
            lease = client.claim_next(client.caller)
            assert lease.number == number
            done = client.submit(client.caller, number, lease_id=lease.lease_id,
                                 token=lease.fencing_token, summary="done", evidence=EVIDENCE)
            assert done.state.value == "approval"
            assert hive.get(number).task.state.value == "approval"
        finally:
            loopback_server.vaults.discard(vault)


def test_next_passes_over_a_task_another_session_holds(schema: str) -> None:
    """``next`` takes its task ``FOR UPDATE SKIP LOCKED``: a task whose row another session
    holds is passed over at once, never waited for."""
    import threading

    with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
        first, second = own_task(hive), own_task(hive)
        with pg.connect() as other:
            other.execute("BEGIN")
            other.execute(f"SELECT number FROM {schema}.tasks WHERE number = %s FOR UPDATE",
                          (first,))
            got: list[int] = []
            worker = threading.Thread(target=lambda: got.append(hive.claim_next(CODER).number))
            worker.start()
            worker.join(timeout=HANG_S)
            blocked = worker.is_alive()
            other.execute("ROLLBACK")
            worker.join(timeout=HANG_S)
        assert not blocked, "next waited for a task another session held"
        assert got == [second]


def test_serve_takes_a_url(schema: str) -> None:
    """``hivelite serve postgresql://…``: the store is a vault like a file's."""
    import json
    import urllib.request

    from .test_serve import free_port

    url = pg.store_url(schema)
    with Hive.open(url, owner="ana") as hive:
        token = hive.add_token(hive.as_owner(), "ana/coder", instance="laptop").token
    port = free_port()
    server = subprocess.Popen([str(hivelite_script()), "serve", url, "--port", str(port)],
                              env=clean_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/whoami",
                                         headers={"Authorization": f"Bearer {token}"})
        def whoami() -> dict[str, str] | None:
            try:
                with urllib.request.urlopen(request, timeout=5) as answer:
                    return dict(json.load(answer))
            except OSError:
                return None

        who = ready(whoami, "hivelite serve on PostgreSQL", server)
        assert (who["name"], who["instance"]) == ("ana/coder", "laptop")
    finally:
        server.terminate()
        server.wait(timeout=HANG_S)


def test_a_write_that_cannot_get_the_lock_is_busy_and_leaves_the_connection_usable(
        schema: str) -> None:
    """Another session holds the store's write lock past the URL's ``lock_timeout``: the
    write is ``503 store_busy busy``, nothing is written, and the next write (the lock
    free again) goes through on the same connection."""
    from hivelite.store.postgres import write_lock

    url = pg.store_url(schema) + "&options=-c%20lock_timeout%3D200ms"
    with Hive.open(url, owner="ana", clock=ManualClock(START)) as hive:
        number = own_task(hive)
        with pg.connect() as other:
            other.execute("BEGIN")
            other.execute("SELECT pg_advisory_xact_lock(%s)", (write_lock(schema),))
            before = pg.snapshot(schema)
            with pytest.raises(StoreBusy) as err:
                hive.claim(CODER, number)
            assert err.value.reason == "busy" and "lock timeout" in err.value.message
            assert pg.snapshot(schema) == before
            other.execute("ROLLBACK")
        assert hive.claim(CODER, number).fencing_token == 1


def test_what_a_store_url_may_name(schema: str) -> None:
    from hivelite.store.urls import shown

    assert shown("postgresql://u@h/db?password=secret&sslmode=require") == (
        "postgresql://u@h/db?sslmode=require")
    assert shown("postgresql://u:pw@h1:5432,h2:5433/db") == "postgresql://u@h1:5432,h2:5433/db"
    for name in ("pg_toast", "Upper", "a-b"):
        with pytest.raises(StoreError) as err:
            Hive.open(pg.url(pg.database(), name), owner="ana")
        assert err.value.reason == "invalid_schema", name
    with pytest.raises(StoreError) as err:  # a schema that exists and is no store
        Hive.open(pg.url(pg.database(), "public"), owner="ana")
    assert err.value.reason == "schema_taken"
    try:
        with Hive.open(pg.url(pg.database(), "user"), owner="ana") as hive:  # a keyword
            assert own_task(hive) == 1
    finally:
        pg.drop('"user"')


def test_a_cursor_past_every_task_is_an_empty_page(schema: str) -> None:
    with Hive.open(pg.store_url(schema), owner="ana") as hive:
        own_task(hive)
        for sort in ("age", "priority", "updated"):
            assert hive.list(sort=sort, cursor=10**20).items == []


def test_a_write_inside_a_read_is_refused(schema: str) -> None:
    from hivelite.core.errors import UnexpectedError

    with Hive.open(pg.store_url(schema), owner="ana") as hive, hive.store.read():
        with pytest.raises(UnexpectedError) as err:
            own_task(hive)
        assert err.value.reason == "nested_write"


def test_a_nul_character_names_no_task_and_is_no_text(schema: str) -> None:
    """No id holds a NUL, on either engine; text with one is refused by PostgreSQL with a
    clear error (SQLite keeps it), and nothing is written."""
    from hivelite import NotFound

    with Hive.open(pg.store_url(schema), owner="ana", clock=ManualClock(START)) as hive:
        number = own_task(hive)
        with pytest.raises(NotFound):
            hive.get("01M8\x00")
        before = pg.snapshot(schema)
        with pytest.raises(InvalidInput) as err:
            hive.cancel(hive.as_owner(), number, reason="not\x00needed")
        assert err.value.reason in ("invalid_text", "invalid_reason"), err.value
        assert pg.snapshot(schema) == before
