"""``hivelite serve`` refuses to start on a store whose every write it would refuse
(issue 46, item 7): a store that requires a policy plugin this process lacks, runs as
other code or with other settings, or a policy plugin loaded here that the store does not
require. It exits before it listens, naming each store, each plugin and how to mend it,
with the write's own error (``forbidden_right``, exit 4). Every served store is checked.

In process: ``vaults.writes_refused`` on real stores and real plugin files, and the CLI
by ``cli.main``. One real ``hivelite serve`` process: refused where the plugin is not
loaded, serving where it is.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn")

from hivelite import Hive, ManualClock
from hivelite.core.errors import ForbiddenRight
from hivelite.faces.server.vaults import writes_refused
from hivelite.store import RequiredPlugin

from .conftest import HANG_S, ready
from .inproc import run_main
from .test_cli_e2e import hivelite_command
from .test_serve import free_port

PLUGIN = "needs_two"
NEEDS_TWO = '''"""Code needs two confirmations (the [needs_two] table's n, when set)."""
import hivelite


@hivelite.hookimpl
def hivelite_merge_threshold(task, hive):
    return int(hive.settings("needs_two").get("n", 2))
'''
SECOND = '''"""Another policy plugin: it finds nothing wrong with any evidence."""
import hivelite


@hivelite.hookimpl
def hivelite_check_evidence(task, result, hive):
    return []
'''
START = "2026-12-02T09:00:00.000Z"


@pytest.fixture(autouse=True)
def no_outside_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process "without the plugin" has none: no folder or settings from outside."""
    for name in ("HIVELITE_PLUGINS_DIR", "HIVELITE_CONFIG", "HIVELITE_LOAD_PLUGINS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def never_listens(monkeypatch: pytest.MonkeyPatch) -> None:
    """``hivelite serve`` run in this process must refuse before it listens: reaching
    uvicorn fails the test at once (instead of serving for ever)."""
    import uvicorn

    def listen(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("hivelite serve went on to listen")

    monkeypatch.setattr(uvicorn, "run", listen)


def plugin_folder(parent: Path, *sources: tuple[str, str]) -> Path:
    """A plugins folder (0700) holding each (name, source) as ``name.py`` (0600)."""
    folder = parent / "plugins"
    folder.mkdir(mode=0o700, exist_ok=True)
    folder.chmod(0o700)
    for name, source in sources:
        path = folder / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        path.chmod(0o600)
    return folder


def new_store(path: Path, clock: ManualClock) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Hive.open(path, owner="ana", clock=clock).close()
    return path


def require(path: Path, folder: Path, clock: ManualClock, name: str = PLUGIN) -> None:
    """The owner requires ``name`` as a process loading ``folder`` has it."""
    with Hive.open(path, plugins_dir=folder, clock=clock) as hive:
        hive.require_plugin(hive.as_owner(), name)


@pytest.fixture
def stores(tmp_path: Path, clock: ManualClock) -> Iterator[tuple[Path, Path, Path]]:
    """Two stores, each in a folder of its own (its hivelite.toml beside it); the second
    requires ``needs_two`` from the plugins folder (the third path)."""
    plain = new_store(tmp_path / "plain" / "hive.db", clock)
    bound = new_store(tmp_path / "bound" / "hive.db", clock)
    folder = plugin_folder(tmp_path, (PLUGIN, NEEDS_TWO))
    require(bound, folder, clock)
    yield plain, bound, folder


def refusal(paths: list[Path], clock: ManualClock, **options: Any) -> ForbiddenRight | None:
    """What ``writes_refused`` says of these stores opened as ``serve`` opens them."""
    hives = [Hive.open(p, clock=clock, create=False, **options) for p in paths]
    try:
        return writes_refused(hives)
    finally:
        for hive in hives:
            hive.close()


# -- in process: which stores and plugins refuse, and the words --------------------------


def test_a_store_whose_required_plugin_is_missing_is_named_with_both_fixes(
        stores: tuple[Path, Path, Path], clock: ManualClock) -> None:
    plain, bound, folder = stores
    assert refusal([plain], clock) is None  # a store that requires nothing binds nothing
    assert refusal([plain, bound], clock, plugins_dir=folder) is None  # loaded as approved
    error = refusal([plain, bound], clock)
    assert error is not None
    assert (error.reason, error.exit_code, error.status) == ("policy_missing", 4, 403)
    assert error.extra["plugins"] == [PLUGIN]
    assert error.extra["stores"] == [str(bound)]  # the store that lacks it, not the other
    assert str(plain) not in error.message
    assert f"{bound} requires the policy plugin 'needs_two'" in error.message
    assert "--plugins-dir" in error.message  # how to load it
    assert f"hivelite --db {bound} policy unrequire needs_two" in error.message
    assert "\n" not in error.message
    # the first store is checked as well as the last
    assert refusal([bound, plain], clock).extra["stores"] == [str(bound)]  # type: ignore[union-attr]


def test_a_changed_plugin_or_changed_settings_refuse_as_the_write_would(
        stores: tuple[Path, Path, Path], clock: ManualClock) -> None:
    _, bound, folder = stores
    (bound.parent / "hivelite.toml").write_text("[needs_two]\nn = 3\n", encoding="utf-8")
    error = refusal([bound], clock, plugins_dir=folder)
    assert error is not None and error.reason == "policy_changed"
    assert "other settings" in error.message
    assert f"hivelite --db {bound} policy require needs_two" in error.message
    (bound.parent / "hivelite.toml").unlink()
    assert refusal([bound], clock, plugins_dir=folder) is None
    plugin_folder(folder.parent, (PLUGIN, NEEDS_TWO.replace('get("n", 2)', 'get("n", 3)')))
    error = refusal([bound], clock, plugins_dir=folder)
    assert error is not None and error.reason == "policy_changed"
    assert "other code" in error.message and error.extra["plugins"] == [PLUGIN]


def test_a_policy_plugin_the_store_does_not_require_refuses(
        stores: tuple[Path, Path, Path], clock: ManualClock) -> None:
    """Writes are refused while the store requires a plugin and this process loads one
    more (``policy_unapproved``); a store that requires none takes it."""
    plain, bound, folder = stores
    plugin_folder(folder.parent, ("second_opinion", SECOND))
    assert refusal([plain], clock, plugins_dir=folder) is None
    error = refusal([plain, bound], clock, plugins_dir=folder)
    assert error is not None and error.reason == "policy_unapproved"
    assert error.extra["plugins"] == ["second_opinion"]
    assert f"hivelite --db {bound} policy require second_opinion" in error.message


def test_missing_outranks_changed_and_every_problem_is_named(
        tmp_path: Path, stores: tuple[Path, Path, Path], clock: ManualClock) -> None:
    """Two stores, two problems: one error naming both, the reason the worse one's."""
    plain, bound, _ = stores
    other_folder = tmp_path / "other"
    other_folder.mkdir(mode=0o700)
    other_folder.chmod(0o700)
    (other_folder / "second_opinion.py").write_text(SECOND, encoding="utf-8")
    (other_folder / "second_opinion.py").chmod(0o600)
    require(plain, other_folder, clock, "second_opinion")
    error = refusal([plain, bound], clock, plugins_dir=other_folder)
    assert error is not None and error.reason == "policy_missing"  # not policy_unapproved
    assert error.extra["plugins"] == [PLUGIN, "second_opinion"]  # unapproved by bound
    assert error.extra["stores"] == [str(bound)]  # plain has it as approved
    assert "which is in no plugins folder" in error.message
    assert "which the store does not require" not in error.message
    assert f"which {bound} does not require" in error.message
    error = refusal([plain, bound], clock)
    assert error is not None
    assert error.extra["plugins"] == [PLUGIN, "second_opinion"]
    assert error.extra["stores"] == [str(plain), str(bound)]


@pytest.mark.parametrize(("dist", "words"), [
    ("hivelite-nowhere", "which is not installed here: install the distribution"
     " hivelite-nowhere (pip install hivelite-nowhere; the owner approved hivelite-nowhere"
     " 0.1.0)"),
    ("hivelite-evidence", "which this process did not load (hivelite-evidence is"
     " installed): load it"),
])
def test_an_installed_plugin_names_its_distribution(
        tmp_path: Path, clock: ManualClock, dist: str, words: str) -> None:
    """A required plugin from a distribution (an entry point): where it is not installed,
    the distribution to install; where it is installed but not loaded, how to load it.
    (The row is the one ``policy require`` keeps for an entry point; this process loads no
    entry point, as every test process.)"""
    store = new_store(tmp_path / "hive.db", clock)
    with Hive.open(store, clock=clock) as hive, hive.store.write() as tx:
        tx.require_plugin(RequiredPlugin("needs_proof", "entry_point", f"{dist} 0.1.0", "{}",
                                         START, "ana"))
    error = refusal([store], clock)
    assert error is not None and error.reason == "policy_missing"
    assert f"{store} requires the policy plugin 'needs_proof', {words}" in error.message
    assert "policy unrequire needs_proof" in error.message


# -- in process: the CLI's answer ---------------------------------------------------------


def test_serve_exits_4_naming_the_plugin_before_it_listens(
        stores: tuple[Path, Path, Path], never_listens: None) -> None:
    plain, bound, _ = stores
    env = {"HIVELITE_LOAD_PLUGINS": "", "HIVELITE_NOW": START}
    ran = run_main(["serve", str(plain), str(bound), "--port", "0"], env)
    assert ran.returncode == 4, ran.stderr
    assert ran.stderr.startswith("error: forbidden_right/policy_missing: hivelite serve did"
                                 " not start"), ran.stderr
    assert "needs_two" in ran.stderr and "serving" not in ran.stderr
    assert ran.stderr.count("\n") == 1  # one line, no escaped newline in it
    ran = run_main(["--json", "--db", str(bound), "serve", "--port", "0"], env)
    assert ran.returncode == 4
    error = json.loads(ran.stdout)["error"]
    assert (error["code"], error["reason"], error["plugins"]) == (
        "forbidden_right", "policy_missing", ["needs_two"])


# -- one real process ----------------------------------------------------------------------


def test_serve_refuses_in_a_real_process_then_serves_with_the_plugin(
        tmp_path: Path, stores: tuple[Path, Path, Path]) -> None:
    """``hivelite serve`` where the plugin is not loaded exits 4 at once, naming it and
    both fixes, and never listens; given the plugins folder, the same stores are served."""
    plain, bound, folder = stores
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    env = {**clean, "HIVELITE_LOAD_PLUGINS": "", "HIVELITE_NOW": START}
    port = free_port()
    ran = subprocess.run([*hivelite_command(), "serve", str(plain), str(bound), "--port",
                          str(port)], capture_output=True, text=True, env=env, timeout=HANG_S)
    assert ran.returncode == 4, ran.stderr
    line = ran.stderr.strip()
    assert line.startswith("error: forbidden_right/policy_missing: "), line
    assert "\n" not in line and "\\n" not in line
    assert f"{bound} requires the policy plugin 'needs_two'" in line
    assert "--plugins-dir" in line
    assert f"hivelite --db {bound} policy unrequire needs_two" in line
    with socket.socket() as probe:  # nothing listened there
        assert probe.connect_ex(("127.0.0.1", port)) != 0

    log = tmp_path / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen([*hivelite_command(), "--plugins-dir", str(folder), "serve",
                                   str(plain), str(bound), "--port", str(port)], stdout=out,
                                  stderr=subprocess.STDOUT, text=True, env=env)
        try:
            answered = until_it_answers(f"http://127.0.0.1:{port}/openapi.json", server)
            assert answered, log.read_text()
            assert log.read_text().count("serving ") == 2
        finally:
            server.terminate()
            server.wait(timeout=HANG_S)


def until_it_answers(url: str, server: subprocess.Popen[str]) -> bool:
    """Whether the server answers ``url`` (looked at again every 50 ms) before its process
    ends (``ready`` fails the test at once if it ends first; ``HANG_S`` guards a hang)."""
    import httpx

    def answers() -> bool:
        try:
            return httpx.get(url, timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    return bool(ready(answers, f"the server to answer {url}", server, every=0.05))
