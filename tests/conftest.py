"""Shared fixtures: a real store in a tmp dir (one per backend), a clock that moves only when
told, and the callers the tests act as.

Hive-level tests take ``hive`` or ``open_hive``: both open ``Hive.open(store=...)`` on a store
from ``make_store``, which makes one per ``backend``; tests marked ``contract`` run on each engine
of ``BACKENDS``: SQLite, and PostgreSQL when a test server is named (``tests/pg.py``).
"""

from __future__ import annotations

import atexit
import inspect
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import apsw
import pytest

from hivelite import Caller, Hive, HiveliteError, ManualClock
from hivelite.core.clock import format_ts, parse_ts
from hivelite.store import SqliteStore, Store

from . import pg, rawsql

# The width of the terminal the suite started from (or the one pytest-xdist sets in each
# worker) must not change what a command prints into a pipe: a test that wants a width
# names it.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)
# Installed entry-point plugins must not change test results (a test may opt in).
sys._hivelite_under_test = True  # type: ignore[attr-defined]
# The entry points the CLI finds are cached in the user's cache folder: not this user's.
_CACHE = tempfile.mkdtemp(prefix="hivelite-tests-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)
# The owner's chain keys and witnessed heads (in the config folder): the run's own, never
# the user's; a command run with the $HIVELITE_ variables cleared still finds them.
# A process a test starts that imports this module again (a worker) keeps its parent's.
if "hivelite-tests-config-" not in os.environ.get("XDG_CONFIG_HOME", ""):
    os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="hivelite-tests-config-")
    atexit.register(shutil.rmtree, os.environ["XDG_CONFIG_HOME"], True)
os.environ.pop("HIVELITE_KEYS", None)
atexit.register(pg.drop_database)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile hivelite's bytecode once, as installing a package does (an editable install
    does not, and with ``$PYTHONDONTWRITEBYTECODE`` nothing writes it): each of the run's
    hundreds of ``hivelite`` processes then starts from the cache, as a user's does,
    instead of compiling every module again."""
    import compileall

    import hivelite

    compileall.compile_dir(Path(hivelite.__file__).parent, quiet=1)

START = "2026-12-02T09:00:00.000Z"
BACKENDS = ("sqlite", "postgres") if pg.available() else ("sqlite",)
"""The engines the contract suite runs on (PostgreSQL when a test server is named)."""

OWNER = Caller.owner("ana")
"""The store's owner, acting as owner."""
CODER = Caller.agent("ana/coder", "laptop")
"""The assignee of every ``own_task``, on the laptop."""
PLANNER = Caller.agent("ana/planner", "desktop")
"""The requester of every ``own_task``, on the desktop."""
REVIEWER = Caller.agent("ana/reviewer", "desktop")
"""An independent reviewer: another agent on another instance than the coder's."""
GUEST = Caller.agent("guest/scout", "elsewhere")
"""Someone else's agent."""


def packet(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "task": "Write the parser",
        "deliverable_type": "code",
        "acceptance_criteria": ["tests pass"],
    }
    base.update(overrides)
    return base


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The engine of this test's stores (``contract`` tests run on each of ``BACKENDS``)."""
    return str(getattr(request, "param", "sqlite"))


MakeStore = Callable[..., Store]
OpenHive = Callable[..., Hive]


@pytest.fixture
def make_store(backend: str, db_path: Path) -> Iterator[MakeStore]:
    """Make this test's store of the backend (``path`` and the backend's own options are
    optional); every store made is closed at the end of the test. On PostgreSQL each path
    stands for a store (a schema) of its own, made for the test and dropped after it."""
    made: list[Store] = []
    databases: dict[Path, str] = {}

    def make(path: Path | None = None, **options: Any) -> Store:
        if backend == "sqlite":
            store: Store = SqliteStore(path or db_path, **options)
        else:
            from hivelite.store.postgres import PostgresStore

            key = path or db_path
            if key not in databases:
                databases[key] = pg.reused_schema()
            store = PostgresStore(pg.store_url(databases[key]),
                                  **{k: v for k, v in options.items() if k == "create"})
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
    for name in databases.values():
        pg.give_back(name)


@pytest.fixture
def open_hive(make_store: MakeStore, clock: ManualClock) -> OpenHive:
    """Open a ``Hive`` on this test's store (owner ana, the test's clock unless given)."""
    def open_(**options: Any) -> Hive:
        options = {"owner": "ana", "clock": clock, **options}
        store_options = {k: options.pop(k) for k in ("create", "synchronous") if k in options}
        return Hive.open(store=make_store(options.pop("path", None), **store_options),
                         **options)

    return open_


TRANSPORTS = ("file", "http")
"""How a ``contract`` test reaches its store: the ``Hive`` itself, or ``hivelite serve``
through ``hivelite.faces.client.Client`` (``tests/served.py``)."""


RAW_SQLITE = frozenset({"hive_raw", "raw", "db_path"})
"""Fixtures that reach an SQLite file itself: a test that asks for one runs on SQLite."""


OVER_HTTP = frozenset({"test_claims", "test_retries", "test_results", "test_handoff",
                       "test_independence", "test_defaults", "test_questions", "test_scope",
                       "test_seed_rows", "test_awaiting"})
"""The contract modules that also run over HTTP: what crosses the transport (leases and
their fences, idempotent retries, results' receipts and refusals, the handoff's body,
instances as tokens carry them). The rest run on SQLite and PostgreSQL, and the parity
suite (test_parity) holds every face to the same inputs, rights and refusals."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked ``contract`` that take ``hive`` run once per transport when their module
    is one of ``OVER_HTTP`` (``file_only`` ones once: they pass the ``Hive`` a caller no
    token stands for, such as ``None``), else on the file alone; and
    once more on each other engine of ``BACKENDS`` (on the store itself: the transport
    does not depend on the engine)."""
    contract = any(metafunc.definition.iter_markers("contract"))
    if not contract or "backend" not in metafunc.fixturenames:
        return
    own = set(inspect.signature(metafunc.function).parameters)
    sqlite_only = own & RAW_SQLITE or metafunc.definition.get_closest_marker("sqlite_only")
    engines = BACKENDS[:1] if sqlite_only else BACKENDS
    only_file = (any(metafunc.definition.iter_markers("file_only"))
                 or metafunc.module.__name__.rpartition(".")[2] not in OVER_HTTP)
    transports = TRANSPORTS[:1] if only_file else TRANSPORTS
    if "transport" in metafunc.fixturenames:
        combos = [("sqlite", t) for t in transports] + [(e, "file") for e in engines[1:]]
        metafunc.parametrize("backend,transport", combos, indirect=True,
                             ids=[f"{e}-{t}" for e, t in combos])
    else:
        metafunc.parametrize("backend", engines, indirect=True)


@pytest.fixture
def transport(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "file"))


@pytest.fixture(scope="session")
def loopback_server() -> Iterator[Any]:
    """One real uvicorn server on a loopback port for the whole run (started on first use)."""
    from .served import LoopbackServer

    server = LoopbackServer()
    yield server
    server.stop()


@pytest.fixture
def hive(open_hive: OpenHive, transport: str, request: pytest.FixtureRequest) -> Iterator[Hive]:
    opened = open_hive()
    if transport == "file":
        yield opened
        return
    from .served import ServedHive

    served = ServedHive(opened, request.getfixturevalue("loopback_server"),
                        iter((OWNER, CODER, PLANNER, REVIEWER, GUEST)))
    yield cast(Hive, served)
    served.close()


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[apsw.Connection]:
    """A fresh store made by the library, reached through a second, raw connection."""
    path = tmp_path / "store.db"
    Hive.open(path, owner="ana").close()
    conn = rawsql.connect(path)
    yield conn
    conn.close()


@pytest.fixture
def hive_raw(hive: Hive, db_path: Path) -> Iterator[apsw.Connection]:
    """A second, raw connection on the ``hive`` fixture's store file."""
    conn = rawsql.connect(db_path)
    yield conn
    conn.close()


Snap = Callable[[], dict[str, list[tuple[object, ...]]]]


@pytest.fixture
def snap(hive: Hive, backend: str, request: pytest.FixtureRequest) -> Snap:
    """Every row of the ``hive`` fixture's store, read through a raw connection of its own
    (over HTTP, without the tokens the transport issues for the test's callers as they
    come)."""
    if backend == "postgres":
        schema = hive.store.schema  # type: ignore[attr-defined]
        return lambda: rawsql.without_tokens(pg.snapshot(schema), issued_by(hive))
    raw: apsw.Connection = request.getfixturevalue("hive_raw")
    return lambda: rawsql.without_tokens(rawsql.snapshot(raw), issued_by(hive))


def issued_by(hive: object) -> frozenset[str]:
    """The tokens a served hive's transport issued (none for the file itself)."""
    return frozenset(getattr(hive, "issued", ()))


def refused(snap: Snap, kind: type[HiveliteError], reason: str,
            call: Callable[[], object]) -> HiveliteError:
    """``call`` raises exactly ``kind`` with ``reason`` and leaves every row as it was."""
    before = snap()
    with pytest.raises(HiveliteError) as err:
        call()
    assert type(err.value) is kind, err.value
    assert err.value.reason == reason, err.value
    assert err.value.status == kind.status
    assert snap() == before
    return err.value


def at(minutes: float) -> str:
    """``START`` plus ``minutes``, as ``HIVELITE_NOW`` takes it."""
    return format_ts(parse_ts(START) + timedelta(minutes=minutes))


def own_task(hive: Hive, **overrides: Any) -> int:
    """A routed task between the owner's own agents; returns its number."""
    fields: dict[str, Any] = {"requester": "ana/planner", "assignee": "ana/coder",
                              "project": "demo", "packet": packet()}
    fields.update(overrides)
    return hive.handoff(OWNER, **fields).number


def held_task(hive: Hive, **overrides: Any) -> int:
    """A task the built-in gate held for the owner (a guest's request, by the guest)."""
    fields: dict[str, Any] = {"requester": GUEST.name, "assignee": "ana/coder",
                              "project": "demo", "packet": packet()}
    fields.update(overrides)
    return hive.handoff(GUEST, **fields).number


LEFT_OUT = (
    ("PostgreSQL", lambda: pg.available(),
     "the contract suite's second engine and the PostgreSQL tests were not collected;"
     ' include them with eval "$(.ci/postgres start)" (a throwaway server; .ci/postgres'
     " stop removes it)"),
    ("Chromium", lambda: None not in (shutil.which("chromium"), shutil.which("chromedriver")),
     "the board's browser tests were skipped; include them with apt-get install chromium"
     " chromium-driver"),
    ("sqlite3", lambda: shutil.which("sqlite3") is not None,
     "the task_board view's shell tests were skipped; include them with apt-get install"
     " sqlite3"),
)
"""What a run on this machine may leave out, and how to include it (.ci/run includes all,
and fails instead of leaving any out)."""


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """At the end of a run: what it left out for want of a server or a tool, and how to
    include it, so a green run on a contributor's machine never passes for a whole one."""
    missing = [(name, how) for name, present, how in LEFT_OUT if not present()]
    if not missing:
        return
    terminalreporter.section("left out of this run")
    for name, how in missing:
        terminalreporter.write_line(f"{name}: {how}")
