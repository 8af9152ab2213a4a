"""Tests for rules a deliberately broken copy got past (issue 30, part 7): each test here
fails with its rule broken as named, where the suite before it passed.

- A move edited behind its rule: the ``moves`` trigger set aside, a move changed, the
  trigger put back as it was. On SQLite the schema's text is the migrations' again, so
  only the rows tell (broken: ``doctor.schema_problem`` compares the objects alone); on
  PostgreSQL the catalogs are hivelite's again (broken: ``pg_guard.problems`` does not
  compare the rows).
- An export one schema version newer than the store (broken: ``transfer.import_lines``
  refuses only one two versions newer).
- Two stores behind one server (broken: ``Vaults.authenticate`` answers every token from
  the first store).
- A read verb's right (B01, broken: ``Verb.call`` does not check it): refused through
  ``Hive.call``, and over HTTP and ``/mcp`` with the route's own check removed.

The raw-SQL mutants (PostgreSQL's lease and attempt rules, a cancelled dependant, the
token hash's length) are cases of ``tests/test_attacks.py``; ``docs/decisions.md``
lists which case catches which.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hivelite import ForbiddenRight, Hive, InvalidInput, ManualClock, StoreError
from hivelite.core.models import IssuedToken
from hivelite.core.protocol import Right
from hivelite.verbs.table import VERBS, Verb

from . import pg, rawsql
from .conftest import CODER, HANG_S, OWNER, START, own_task
from .test_doctor import findings

ENGINES = ("sqlite", "postgres")


def _moves_fixed_update(raw: Any, schema: str) -> str:
    """The name of PostgreSQL's trigger that keeps the moves from being updated."""
    return str(raw.execute(
        "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
        " WHERE c.relnamespace = %s::regnamespace AND t.tgname LIKE '%%moves_fixed_update'",
        (schema,)).fetchone()[0])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_move_edited_behind_its_rule_is_found_and_refuses_writes(
        tmp_path: Path, engine: str) -> None:
    if engine == "postgres" and not pg.available():
        pytest.skip("no PostgreSQL server")
    schema = pg.new_schema() if engine == "postgres" else ""
    target = pg.store_url(schema) if engine == "postgres" else str(tmp_path / "s.db")
    edit = "UPDATE moves SET to_state = 'completed' WHERE name = 'claim'"
    try:
        with Hive.open(target, owner="ana", clock=ManualClock(START)) as hive:
            own_task(hive)
        if engine == "sqlite":
            conn = rawsql.connect(Path(target))
            made = conn.execute("SELECT sql FROM sqlite_schema WHERE type = 'trigger'"
                                " AND name = 'moves_fixed_update'").get
            with conn:
                conn.execute("DROP TRIGGER moves_fixed_update")
                conn.execute(edit)
                conn.execute(made)  # byte for byte as it was
            conn.close()
            ok, detail = findings(Path(target))["schema"]
        else:
            from hivelite.store.pg_doctor import diagnose_url

            raw = pg.connect()
            raw.execute(f"SET search_path = {schema}")
            rule = _moves_fixed_update(raw, schema)
            raw.execute(f"ALTER TABLE moves DISABLE TRIGGER {rule}")
            raw.execute(edit)
            raw.execute(f"ALTER TABLE moves ENABLE TRIGGER {rule}")
            raw.close()
            schema_finding = next(f for f in diagnose_url(target) if f.check == "schema")
            ok, detail = schema_finding.ok, schema_finding.detail
        assert not ok
        assert detail == "the moves table differs from the protocol's 22 moves"
        with (pytest.raises(StoreError) as err,  # at the open, or at the write
              Hive.open(target, owner="ana", clock=ManualClock(START)) as hive):
            own_task(hive)
        assert err.value.reason == "schema_tampered"
    finally:
        if engine == "postgres":
            pg.drop(schema)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_export_one_schema_version_newer_is_refused(tmp_path: Path, engine: str) -> None:
    """``newer_export``, with nothing written; the same export at the store's own version
    imports (so the refusal is about the version alone)."""
    from hivelite.store import SqliteStore
    from hivelite.store.transfer import export_lines, import_lines

    if engine == "postgres" and not pg.available():
        pytest.skip("no PostgreSQL server")
    with Hive.open(tmp_path / "source.db", owner="ana", clock=ManualClock(START)) as hive:
        own_task(hive)
        lines = list(export_lines(hive.store.tables()))  # type: ignore[attr-defined]
    schema = pg.new_schema() if engine == "postgres" else ""
    try:
        for n, newer in enumerate((1, 0)):
            if engine == "postgres":
                from hivelite.store.postgres import PostgresStore

                store: Any = PostgresStore(pg.store_url(schema) if n == 0
                                           else pg.store_url(pg.new_schema()))
            else:
                store = SqliteStore(tmp_path / f"copy{n}.db")
            try:
                tables = store.tables()
                header = json.loads(lines[0])
                header["schema_version"] = tables.schema_version() + newer
                changed = [json.dumps(header), *lines[1:]]
                if newer:
                    with pytest.raises(InvalidInput) as err:
                        import_lines(tables, changed)
                    assert err.value.reason == "newer_export"
                    assert tables.is_empty()
                else:
                    assert import_lines(tables, changed) == len(lines) - 1
            finally:
                store.close()
    finally:
        if engine == "postgres":
            pg.drop(schema)


# -- two stores behind one server --------------------------------------------------------

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from .test_serve import Server, hivelite, server  # noqa: E402, F401 (server: its fixture)


def whoami(on: Server, token: str) -> Any:
    return httpx.get(f"{on.url}/v1/whoami", headers={"Authorization": f"Bearer {token}"},
                     timeout=HANG_S)


def test_each_served_store_answers_for_its_own_tokens(server: Server) -> None:  # noqa: F811
    """The server holds two stores (``test_serve``'s fixture): a token of the second one
    proves its caller in the second vault, one of the first in the first."""
    other = hivelite(server.db.parent / "other.db", "info")["vault_id"]
    assert other != server.vault
    second = whoami(server, server.tokens["stranger"])
    assert second.status_code == 200, second.text
    assert (second.json()["vault_id"], second.json()["name"]) == (other, "bob/agent")
    first = whoami(server, server.tokens["coder"])
    assert first.status_code == 200, first.text
    assert (first.json()["vault_id"], first.json()["name"]) == (server.vault, "ana/coder")
    listed = httpx.get(server.tasks(vault=other), timeout=HANG_S,
                       headers={"Authorization": f"Bearer {server.tokens['stranger']}"})
    assert listed.status_code == 200, listed.text


# -- a read verb's right, with the route's own check removed (B01) ---------------------

READS = [v for v in VERBS if v.reads]
"""The read verbs: a token without a read verb's right is refused by the verb itself,
through every face, not only by the HTTP route's check in front of it."""


def lacking_right(hive: Hive, verb: Verb) -> IssuedToken:
    """A token of ana/coder on laptop without ``verb``'s right (with the other rights)."""
    others = sorted({r.value for r in (Right.read, Right.propose, Right.work)}
                    - {verb.right.value})
    return hive.add_token(OWNER, CODER.name, instance="laptop", rights=others)


def test_a_read_without_its_right_is_refused_through_hive_call(tmp_path: Path) -> None:
    """``Hive.call`` with the caller a token proves: the verb's own check, whatever face
    called it (the library has no route in front of it)."""
    from .test_parity import example

    assert {v.name for v in READS} >= {"list", "show", "history", "await", "lease"}
    with Hive.open(tmp_path / "s.db", owner="ana", clock=ManualClock(START)) as hive:
        n = own_task(hive)
        hive.claim(CODER, n)
        for verb in READS:
            caller = hive.authenticate(lacking_right(hive, verb).token).caller
            with pytest.raises(ForbiddenRight) as refused:
                hive.call(verb, caller, n if verb.on_task else None, **example(verb))
            assert refused.value.reason == "not_permitted", verb.name
            assert verb.right.value in refused.value.message, verb.name
            allowed = hive.authenticate(hive.add_token(
                OWNER, CODER.name, instance="laptop").token).caller
            hive.call(verb, allowed, n if verb.on_task else None, **example(verb))


def test_a_read_without_its_right_is_refused_over_http_and_mcp_with_the_routes_check_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The route's own check removed (``Authenticated.may`` allows every right): each read
    route still answers ``403 not_permitted``, and each read tool over ``/mcp`` the same
    refusal, from the verb's own check."""
    from mcp import Client as McpClient
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    from hivelite.faces.server.mcp_tools import TOOLS
    from hivelite.verbs.tokens import Authenticated

    from .served import LoopbackServer
    from .test_parity import example

    monkeypatch.setattr(Authenticated, "may", lambda self, right: True)
    hive = Hive.open(tmp_path / "s.db", owner="ana", clock=ManualClock(START))
    n = own_task(hive)
    hive.claim(CODER, n)
    served = LoopbackServer()
    try:
        vault = served.vaults.add(hive)
        for verb in READS:
            token = lacking_right(hive, verb).token
            if verb.http is not None:
                path = verb.http.path.replace("{number}", str(n))
                got = httpx.get(f"{served.url}/v1/vaults/{vault}/tasks{path}",
                                params=example(verb), timeout=HANG_S,
                                headers={"Authorization": f"Bearer {token}"})
                assert got.status_code == 403, (verb.name, got.text)
                assert got.json()["error"]["reason"] == "not_permitted", verb.name
            if verb.tool not in TOOLS["agent"]:
                continue

            async def call(verb: Verb = verb, token: str = token) -> Any:
                http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
                async with McpClient(streamable_http_client(served.url + "/mcp",
                                                            http_client=http)) as mcp:
                    return await mcp.call_tool(str(verb.tool), {
                        **({"number": n} if verb.on_task else {}), **example(verb)})

            result = anyio.run(call)
            assert result.is_error, verb.name
            assert "forbidden_right/not_permitted:" in result.content[0].text, verb.name
    finally:
        served.vaults.discard(vault)
        served.stop()
        hive.close()
