"""A token is checked on every request, and its journal rows' seals only when they change.

``authenticate`` reads a token's row and its journal rows on every call; the seals of
journal rows it has checked before, read again exactly as they were, under the same key,
are not checked again (``tokens.Verdicts``). So each test here first makes a server (or a
``Hive``) check a token and remember it, then changes the store behind its back the way
an owner (a revoke), a forger (raw SQL) or the clock (an expiry) would, and the very next
request must see it: through a real ``hivelite serve`` on a loopback port, on a file and
on PostgreSQL, and for the expiry through the app in this process, whose clock the test
moves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import pytest

from hivelite import Hive, ManualClock
from hivelite.core.errors import Unauthenticated
from hivelite.verbs import tokens as token_module
from hivelite.verbs.tokens import VERDICTS_KEPT, Verdicts, _hash

from . import pg
from .conftest import HANG_S, OWNER, START, packet

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from .test_serve import serving  # noqa: E402

ENGINES = ("sqlite", "postgres") if pg.available() else ("sqlite",)
SECRET = "f" * 43
"""A forger's secret, whose hash they write into a token's row."""


@dataclass
class Store:
    """A store of either engine: where ``hivelite serve`` finds it, and raw SQL on it."""

    engine: str
    where: str
    schema: str | None = None

    def open(self, clock: ManualClock | None = None) -> Hive:
        return Hive.open(self.where, owner="ana", clock=clock or ManualClock(START))

    def tamper(self, statement: str) -> None:
        """Run ``statement`` on the tokens table with the store's rules set aside (as a
        forger holding the file or the database would), then put them back."""
        if self.engine == "sqlite":
            conn = apsw.Connection(self.where)
            conn.set_busy_timeout(5000)
            kept = conn.execute("SELECT sql FROM sqlite_schema"
                                " WHERE name = 'tokens_revoked_once'").get
            with conn:
                conn.execute("DROP TRIGGER tokens_revoked_once")
                conn.execute(statement)
                conn.execute(kept)
            conn.close()
            return
        with pg.connect() as conn:
            conn.execute(f"SET search_path = {self.schema}")
            conn.execute("SET session_replication_role = replica")  # the triggers aside
            changed = conn.execute(statement).rowcount
            assert changed == 1, statement


@pytest.fixture(params=ENGINES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        made = Store("sqlite", str(tmp_path / "store.db"))
    else:
        schema = pg.new_schema()
        made = Store("postgres", pg.store_url(schema), schema)
    made.open().close()
    yield made
    if made.schema is not None:
        pg.drop(made.schema)


def whoami(url: str, token: str) -> Any:
    return httpx.get(f"{url}/v1/whoami", headers={"Authorization": f"Bearer {token}"},
                     timeout=HANG_S)


def tasks(url: str, vault: str, token: str, method: str = "GET",
          body: dict[str, Any] | None = None) -> Any:
    return httpx.request(method, f"{url}/v1/vaults/{vault}/tasks", json=body,
                         headers={"Authorization": f"Bearer {token}"}, timeout=HANG_S)


def refused(response: Any, status: int, reason: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["reason"] == reason, response.text


@contextlib.contextmanager
def served(store: Store, tmp_path: Path) -> Iterator[str]:
    with serving(tmp_path, [store.where]) as (url, _, _log):
        yield url


def test_a_revoke_refuses_the_very_next_request(store: Store, tmp_path: Path) -> None:
    with store.open() as hive:
        issued = hive.add_token(OWNER, "ana/coder", instance="laptop")
        vault = hive.info().vault_id
    with served(store, tmp_path) as url:
        for _ in range(2):  # checked, then remembered
            assert tasks(url, vault, issued.token).status_code == 200
        with store.open() as hive:  # another process revokes it
            hive.revoke_token(OWNER, issued.id)
        refused(tasks(url, vault, issued.token), 401, "revoked_token")
        refused(whoami(url, issued.token), 401, "revoked_token")


def test_a_revoke_the_token_row_no_longer_shows_still_refuses(store: Store,
                                                               tmp_path: Path) -> None:
    """The revoke stands in the journal's sealed row: a forger who clears the row's
    ``revoked_at`` after it (before any request came) gains nothing, even from a server
    that checked the token before the revoke."""
    with store.open() as hive:
        issued = hive.add_token(OWNER, "ana/coder", instance="laptop")
        vault = hive.info().vault_id
    with served(store, tmp_path) as url:
        for _ in range(2):
            assert tasks(url, vault, issued.token).status_code == 200
        with store.open() as hive:
            hive.revoke_token(OWNER, issued.id)
        store.tamper(f"UPDATE tokens SET revoked_at = NULL WHERE id = '{issued.id}'")
        refused(tasks(url, vault, issued.token), 401, "revoked_token")


def test_a_token_row_changed_by_raw_sql_is_refused_or_proves_nothing_new(
        store: Store, tmp_path: Path) -> None:
    """After a server has checked them: the owner's token's hash replaced by a forger's
    proves neither secret; an agent's row widened to the owner's still proves the agent
    with the rights the owner sealed."""
    with store.open() as hive:
        owner = hive.add_token(OWNER)
        agent = hive.add_token(OWNER, "ana/planner", instance="desktop",
                               rights=["tasks.read"])
        vault = hive.info().vault_id
    with served(store, tmp_path) as url:
        for _ in range(2):
            assert whoami(url, owner.token).json()["kind"] == "owner"
            assert whoami(url, agent.token).json()["rights"] == ["tasks.read"]
        store.tamper(f"UPDATE tokens SET hash = '{_hash(SECRET)}' WHERE id = '{owner.id}'")
        refused(whoami(url, f"hl_{owner.id}_{SECRET}"), 401, "invalid_token")
        refused(whoami(url, owner.token), 401, "invalid_token")
        store.tamper("UPDATE tokens SET rights = 'owner', agent = NULL, instance = NULL"
                     f" WHERE id = '{agent.id}'")
        proved = whoami(url, agent.token).json()
        assert (proved["kind"], proved["name"], proved["rights"]) == (
            "agent", "ana/planner", ["tasks.read"])
        refused(tasks(url, vault, agent.token, "POST", {
            "requester": "ana/planner", "assignee": "ana/coder", "project": "demo",
            "packet": packet()}), 403, "not_permitted")


def test_an_expired_token_is_refused_on_the_next_request(store: Store) -> None:
    """Through the app served in this process, whose clock the test moves."""
    from .served import LoopbackServer

    clock = ManualClock(START)
    server = LoopbackServer()
    try:
        with store.open(clock) as hive:
            issued = hive.add_token(OWNER, "ana/coder", instance="laptop",
                                    expires_at="2026-12-02T09:30:00.000Z")
            vault = server.vaults.add(hive)
            for _ in range(2):
                assert tasks(server.url, vault, issued.token).status_code == 200
            clock.advance(minutes=30)  # 09:30: its last instant has passed
            refused(tasks(server.url, vault, issued.token), 401, "expired_token")
            server.vaults.discard(vault)
    finally:
        server.stop()


def test_the_seals_are_checked_again_only_when_the_rows_change(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[int] = []
    problem = token_module.row_problem

    def counted(seq: int, *args: Any, **kwargs: Any) -> str | None:
        checked.append(seq)
        return problem(seq, *args, **kwargs)

    monkeypatch.setattr(token_module, "row_problem", counted)
    with store.open() as hive:
        issued = hive.add_token(OWNER, "ana/coder", instance="laptop")
        hive.add_token(OWNER, "ana/coder", instance="laptop")  # another token's rows
        hive.authenticate(issued.token)
        first = len(checked)
        assert first > 0
        hive.authenticate(issued.token, session="s2")
        assert len(checked) == first  # the same rows: not checked again
        hive.revoke_token(OWNER, issued.id)
        with pytest.raises(Unauthenticated) as err:
            hive.authenticate(issued.token)
        assert err.value.reason == "revoked_token"
        assert len(checked) > first  # a row more: all checked again


def test_the_verdicts_kept_are_bounded(store: Store) -> None:
    kept = Verdicts(size=2)
    with store.open() as hive:
        issued = [hive.add_token(OWNER, "ana/coder", instance="laptop") for _ in range(3)]
        key = hive.store.chain_key()
        with hive.store.read() as reader:
            told = {t.id: reader.token_journal(t.id) for t in issued}
    for token in issued:
        facts = kept.facts(token.id, told[token.id], key)
        assert facts is not None and facts["agent"] == "ana/coder"
    assert len(kept) == 2
    assert len(VERDICTS_KEPT) <= VERDICTS_KEPT.size
