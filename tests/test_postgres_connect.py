"""A PostgreSQL store that cannot be reached says what failed (issue 46, item 7): a role
the server does not have, a database it does not have, a role it does not let in, a
password it refused or asked for, no server at all. Each has a reason of its own and
words that say what to change, with libpq's text folded onto one line.

Against real servers: the tests' throwaway server (trust authentication) for the role,
the database and the socket folder with no server; a private one started here with
SCRAM passwords for the password. libpq gives a refused connection no SQLSTATE (the
server says why in words only), so the mapping by SQLSTATE, for a psycopg that reports
one, is tried on psycopg's own error classes.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hivelite import Hive
from hivelite.core.errors import HiveliteError, StoreBusy, StoreError

from . import pg
from .inproc import run_main

psycopg = pytest.importorskip("psycopg")
from hivelite.store.postgres import connect_failure  # noqa: E402

_names = itertools.count(1)


@pytest.fixture
def server_dir() -> str:
    """The throwaway server's socket folder (skips without one)."""
    pg.database()
    return dict(item.split("=", 1) for item in pg.SERVER.split())["host"]


def refused(url: str) -> HiveliteError:
    with pytest.raises(HiveliteError) as caught:
        Hive.open(url, owner="ana")
    error = caught.value
    assert "\n" not in error.message and "\t" not in error.message
    assert "\\n" not in error.message
    return error


def test_a_role_the_server_does_not_have(server_dir: str) -> None:
    role = f"nobody_{os.getpid()}_{next(_names)}"
    error = refused(f"postgresql://{role}@/postgres?host={server_dir}")
    assert isinstance(error, StoreError)
    assert (error.code, error.reason, error.exit_code) == (
        "invalid_input", "unknown_role", 6)
    assert f"has no role '{role}'" in error.message
    assert "check the user in the URL" in error.message
    assert f'role "{role}" does not exist' in error.message  # the server's own words


def test_a_database_the_server_does_not_have(server_dir: str) -> None:
    database = f"nowhere_{os.getpid()}_{next(_names)}"
    error = refused(f"postgresql://postgres@/{database}?host={server_dir}")
    assert isinstance(error, StoreError) and error.reason == "unknown_database"
    assert f"has no database '{database}'" in error.message
    assert "createdb" in error.message


def test_a_role_that_may_not_log_in(server_dir: str) -> None:
    role = f"nologin_{os.getpid()}_{next(_names)}"
    with pg.admin() as conn:
        conn.execute(f'CREATE ROLE "{role}" NOLOGIN')
    try:
        error = refused(f"postgresql://{role}@/postgres?host={server_dir}")
    finally:
        with pg.admin() as conn:
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')
    assert isinstance(error, StoreError) and error.reason == "access_refused"
    assert f"does not let role '{role}' connect" in error.message
    assert "is not permitted to log in" in error.message


def test_a_socket_folder_with_no_server(tmp_path: Path) -> None:
    error = refused(f"postgresql://postgres@/postgres?host={tmp_path}")
    assert isinstance(error, StoreBusy)
    assert (error.code, error.reason, error.exit_code) == ("store_busy", "unreachable", 1)
    assert "no PostgreSQL server answers" in error.message
    assert "No such file or directory; Is the server running locally" in error.message


def test_the_cli_says_it_on_one_line(server_dir: str) -> None:
    role = f"nobody_{os.getpid()}_{next(_names)}"
    ran = run_main(["--db", f"postgresql://{role}@/postgres?host={server_dir}", "list"])
    assert ran.returncode == 6, ran.stderr
    assert ran.stderr.startswith("error: invalid_input/unknown_role: the PostgreSQL server")
    assert ran.stderr.count("\n") == 1 and "\\n" not in ran.stderr and "\\t" not in ran.stderr


# -- passwords: a private server that asks for them ---------------------------------------

PASSWORD = "right-horse-battery"


def _bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: [int(x) for x in p.parent.parent.name.split(".")
                                  if x.isdigit()])
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@pytest.fixture(scope="module")
def asks_passwords() -> Iterator[str]:
    """A private server on a unix socket whose every connection proves a SCRAM password;
    its socket folder, in /tmp as .ci/postgres makes it (the server's user must reach it,
    and a socket's path is short). Started with pg_ctl -w: it answers when this yields."""
    if not pg.available():
        pytest.skip("no PostgreSQL server: $HIVELITE_TEST_POSTGRES is not set")
    bin_dir = _bin()
    if bin_dir is None:
        pytest.skip("no initdb on this machine")
    folder = Path(tempfile.mkdtemp(prefix="hivelite-scram.", dir="/tmp"))
    as_server = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_server:
        shutil.chown(folder, "postgres")
    secret = folder / "pw"
    secret.write_text(PASSWORD + "\n")
    if as_server:
        shutil.chown(secret, "postgres")
    subprocess.run([*as_server, str(bin_dir / "initdb"), "-D", f"{folder}/data", "-A",
                    "scram-sha-256", "-U", "postgres", f"--pwfile={secret}", "-E", "UTF8",
                    "--no-sync", "--locale=C.UTF-8"], check=True, capture_output=True)
    subprocess.run([*as_server, str(bin_dir / "pg_ctl"), "-D", f"{folder}/data", "-l",
                    f"{folder}/server.log", "-w", "start", "-o",
                    f"-k {folder} -c listen_addresses='' -c fsync=off"],
                   check=True, capture_output=True)
    try:
        yield str(folder)
    finally:
        subprocess.run([*as_server, str(bin_dir / "pg_ctl"), "-D", f"{folder}/data", "-m",
                        "immediate", "-w", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_wrong_password_is_refused_in_words(asks_passwords: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", os.devnull)
    error = refused(f"postgresql://postgres:wrong-pony@/postgres?host={asks_passwords}")
    assert isinstance(error, StoreError) and error.reason == "password_refused"
    assert "refused the password given for role 'postgres'" in error.message
    assert "~/.pgpass" in error.message and "wrong-pony" not in str(error)
    assert 'password authentication failed for user "postgres"' in error.message

    error = refused(f"postgresql://postgres@/postgres?host={asks_passwords}")
    assert isinstance(error, StoreError) and error.reason == "password_refused"
    assert "asks a password of the role the URL names and none was given" in error.message

    with Hive.open(f"postgresql://postgres:{PASSWORD}@/postgres?host={asks_passwords}",
                   owner="ana") as hive:  # the right one opens (and makes) the store
        assert hive.owner == "ana"
        assert PASSWORD not in hive.store.location


# -- the SQLSTATE, when psycopg has one ---------------------------------------------------


@pytest.mark.parametrize(("error", "reason"), [
    (psycopg.errors.InvalidPassword("FATAL: authentification par mot de passe échouée"),
     "password_refused"),
    (psycopg.errors.InvalidCatalogName('FATAL: la base de données « x » n\'existe pas'),
     "unknown_database"),
    (psycopg.errors.InvalidAuthorizationSpecification("FATAL: le rôle « x » n'existe pas"),
     "access_refused"),
    (psycopg.OperationalError("the database system is starting up\n\tsomething"),
     "unreachable"),
])
def test_the_sqlstate_decides_whatever_the_words(error: Exception, reason: str) -> None:
    """A server speaking another language: the SQLSTATE still names what failed (a role
    the words cannot tell from a pg_hba refusal is ``access_refused``)."""
    mapped = connect_failure(error, "postgresql://ana@db/hive")  # type: ignore[arg-type]
    assert mapped.reason == reason
    assert "\n" not in mapped.message and "\t" not in mapped.message
