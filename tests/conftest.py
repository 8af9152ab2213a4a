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
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Iterator
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

HANG_S = float(os.environ.get("HIVELITE_TEST_HANG_S") or 600)
"""The longest any one wait of a test may last before the test fails as hung: 10 minutes,
or ``$HIVELITE_TEST_HANG_S``. A guard against a hang, never a deadline to start in: a test
waits until its process or server is ready or has ended (``ready``), and a machine busy
with other work only makes the wait longer. Every wait names it (``timeout=HANG_S``), so
that no test hangs for ever."""


def ready(check: Callable[[], Any], what: str,
          process: subprocess.Popen[Any] | None = None,
          output: Callable[[], str] | None = None, every: float = 0.02) -> Any:
    """Wait until ``check()`` answers something true, and return it. If ``process`` ends
    first, fail at once with what it printed (``output()``); if nothing happens for
    ``HANG_S`` seconds, fail as hung. ``what`` names what is waited for."""
    start = time.monotonic()
    while True:
        got = check()
        if got:
            return got
        if process is not None and process.poll() is not None:
            said = output() if output is not None else ""
            raise AssertionError(f"{what}: the process ended (exit {process.returncode})"
                                 f" before it was ready\n{said}")
        if time.monotonic() - start > HANG_S:
            said = output() if output is not None else ""
            raise AssertionError(f"{what}: not ready after {HANG_S:.0f} s (hung?; the"
                                 f" guard is $HIVELITE_TEST_HANG_S)\n{said}")
        time.sleep(every)


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


def traced(hive: Hive) -> list[str]:
    """The statements this thread's connection and the write connection run from now on,
    as they are run."""
    seen: list[str] = []

    def trace(cursor: Any, sql: str, bindings: Any) -> bool:
        seen.append(" ".join(sql.split()))
        return True

    hive.store.conn.exec_trace = trace  # type: ignore[attr-defined]
    hive.store.writer.exec_trace = trace  # type: ignore[attr-defined]
    return seen


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


ALL_OF_IT = ('eval "$(.ci/postgres start)" && HIVELITE_NEED_POSTGRES=1 HIVELITE_NEED_BROWSER=1'
             ' HIVELITE_NEED_SQLITE3=1 python -m pytest -q; .ci/postgres stop')
"""The one line that runs the whole suite (in the venv of the README's test command, with
Debian's postgresql, chromium, chromium-driver and sqlite3 installed): a missing server or
tool then fails its tests instead of skipping them (what .ci/run does)."""

LEFT_OUT = (
    ("PostgreSQL", "PostgreSQL", lambda: bool(pg.SERVER),
     "no server ($HIVELITE_TEST_POSTGRES is not set)",
     'eval "$(.ci/postgres start)" (a throwaway server; .ci/postgres stop removes it)'),
    ("Chromium", "chromium", lambda: None not in (shutil.which("chromium"),
                                                  shutil.which("chromedriver")),
     "no chromium or chromedriver on the PATH", "apt-get install chromium chromium-driver"),
    ("sqlite3", "sqlite3 shell", lambda: shutil.which("sqlite3") is not None,
     "no sqlite3 shell on the PATH", "apt-get install sqlite3"),
)
"""What a run on this machine may leave out: its name, the words its skips give, whether
it is here, why not, and how to include it."""

_NOT_COLLECTED = "hivelite_not_collected"
"""How many PostgreSQL twins of contract tests a worker did not collect (xdist's
``workeroutput`` key)."""
_not_collected: list[int] = []


def _pg_twins(items: list[pytest.Item]) -> int:
    """How many of ``items`` would have a PostgreSQL twin if a server were named: the
    contract tests generated for SQLite on the file (not the ``sqlite_only`` ones)."""
    def twin(item: pytest.Item) -> bool:
        params = getattr(getattr(item, "callspec", None), "params", {})
        function = getattr(item, "function", None)
        return (params.get("backend") == "sqlite" and params.get("transport", "file") == "file"
                and function is not None
                and item.get_closest_marker("contract") is not None
                and item.get_closest_marker("sqlite_only") is None
                and not RAW_SQLITE & set(inspect.signature(function).parameters))
    return sum(1 for item in items if twin(item))


def pytest_collection_finish(session: pytest.Session) -> None:
    if pg.SERVER:
        return
    count = _pg_twins(session.items)
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: tell the controller
        workeroutput[_NOT_COLLECTED] = count
    else:
        _not_collected.append(count)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """An xdist worker ended: keep the count it collected (each collects the whole run)."""
    count = getattr(node, "workeroutput", {}).get(_NOT_COLLECTED)
    if count is not None and not _not_collected:
        _not_collected.append(int(count))


def _reason(report: Any) -> str:
    longrepr = report.longrepr
    return str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)


def left_out(stats: dict[str, list[Any]]) -> list[str]:
    """One line for each thing this run left out, with how many tests and how to include
    it (none when nothing was)."""
    said = []
    skips = [_reason(r) for r in stats.get("skipped", [])]
    for name, words, present, why, how in LEFT_OUT:
        if present():
            continue
        skipped = sum(1 for reason in skips if words.lower() in reason.lower())
        twins = sum(_not_collected[:1]) if name == "PostgreSQL" else 0
        if not skipped and not twins:
            continue
        counted = " and ".join(
            part for part in (f"{twins} not collected (the contract tests' second engine)"
                              if twins else "", f"{skipped} skipped" if skipped else "")
            if part)
        total = skipped + twins
        said.append(f"{total} {name} test{'s' * (total != 1)} left out: {why}: {counted}."
                    f" Include them with {how}.")
    return said


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: Any) -> Generator[None, Any, Any]:
    """At the very end of a run (after the short summary, before the counts): what it left
    out for want of a server or a tool, how many tests, and how to include them, so that a
    green run on a contributor's machine never passes for a whole one."""
    result = yield
    said = left_out(terminalreporter.stats)
    if said:
        terminalreporter.section("left out of this run", yellow=True, bold=True)
        for line in said:
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"The whole suite: {ALL_OF_IT}")
    return result
