"""A CLI that fits (issue 19, point 5): ``list`` never wraps on the terminal it prints to
(titles cut, the less needed columns dropped on a narrow one), colour only on a terminal
and never with ``$NO_COLOR``, and ``hivelite completion`` for bash, zsh and fish."""

from __future__ import annotations

import os
import pty
import re
import subprocess
from pathlib import Path

import pytest

from .conftest import HANG_S
from .test_discovery import clean_env, hivelite_script

LONG = "Fix the login bug on the settings page when two factor authentication is on"


def cli(*args: str, cwd: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(hivelite_script()), *args], cwd=cwd, env=clean_env(**env),
                          capture_output=True, text=True, timeout=HANG_S)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("terminal")
    db = folder / "work.db"
    assert cli("--db", str(db), "init", "--owner", "ana", cwd=folder).returncode == 0
    for text in (LONG, "Write the CSV parser"):
        assert cli("--db", str(db), "handoff", "--requester", "ana/planner", "--assignee",
                   "ana/coder", "--project", "shop-frontend", "--task", text, "--accept",
                   "ok", cwd=folder).returncode == 0
    held = cli("--db", str(db), "handoff", "--agent", "bob/scout", "--instance", "box",
               "--requester", "bob/scout", "--assignee", "ana/coder", "--project", "shop",
               "--task", "A stranger's task", "--accept", "ok", cwd=folder)
    assert held.returncode == 0, held.stderr
    return db


@pytest.mark.parametrize("columns", [80, 60, 44])
def test_list_never_wraps(store: Path, columns: int) -> None:
    ran = cli("--db", str(store), "list", cwd=store.parent, COLUMNS=str(columns))
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert all(len(line) <= columns for line in lines), [len(x) for x in lines]
    assert lines[0].split()[:2] == ["#", "STATE"] and lines[0].split()[-1] == "TASK"
    first = lines[1]
    assert first.split()[:2] == ["1", "routed"] and first.endswith("…")
    assert "waiting: owner" in lines[3]
    if columns < 60:  # the less needed columns went first
        assert "PROJECT" not in lines[0] and "PRIORITY" not in lines[0]


def test_a_pipe_gets_whole_rows(store: Path) -> None:
    ran = cli("--db", str(store), "list", cwd=store.parent, COLUMNS=None)
    lines = ran.stdout.splitlines()
    assert lines[0].split() == ["#", "STATE", "ASSIGNEE", "PROJECT", "PRIORITY", "UPDATED",
                                "TASK"]
    assert LONG[:47] in lines[1] and "\x1b[" not in ran.stdout


def drained(leader: int) -> str:
    """All a pseudo-terminal holds once the process writing to it has ended."""
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


def on_a_terminal(store: Path, *args: str, columns: int = 100, **env: str | None) -> str:
    """``hivelite list`` (or ``args``) with its stdout on a pseudo-terminal of ``columns``;
    what it printed."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([str(hivelite_script()), "--db", str(store), *(args or ["list"])],
                              stdout=follower, stderr=subprocess.PIPE, cwd=store.parent,
                              env=clean_env(COLUMNS=str(columns), **env), timeout=HANG_S)
        assert proc.returncode == 0, proc.stderr
        os.close(follower)
        follower = -1
        return drained(leader)
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)


def test_colour_only_on_a_terminal_and_never_with_no_color(store: Path) -> None:
    painted = on_a_terminal(store, NO_COLOR=None)
    assert "\x1b[33mwaiting: owner\x1b[0m" in painted  # yellow: waits for ana
    plain = [line.replace("\x1b[33m", "").replace("\x1b[0m", "")
             for line in painted.splitlines()]
    assert all(len(line) <= 100 for line in plain)
    assert "\x1b[" not in on_a_terminal(store, NO_COLOR="1")


@pytest.mark.parametrize(("shell", "marker"), [("bash", "complete -o nosort -F"),
                                               ("zsh", "compdef"),
                                               ("fish", "complete --no-files --command")])
def test_completion_scripts(tmp_path: Path, shell: str, marker: str) -> None:
    ran = cli("completion", shell, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "_HIVELITE_COMPLETE" in ran.stdout and marker in ran.stdout
    assert cli("completion", "tcsh", cwd=tmp_path).returncode == 2


def test_even_a_state_too_long_for_the_width_is_cut(store: Path) -> None:
    """The last resort: every column but the number, the state and the title gone, and
    a line still too long is cut, never wrapped. (Mutation caught: no final cut.)"""
    from hivelite import Hive
    from hivelite.faces import render

    with Hive.open(store) as hive:
        page = hive.list()
        shown = render.task_table(page.items, hive.clock(), width=12)
    lines = shown.splitlines()
    assert all(len(line) <= 12 for line in lines), lines
    assert lines[3].startswith("3  waiting:") and lines[3].endswith("…")


@pytest.mark.parametrize(("seconds", "words"), [
    (0, "0 s"), (1, "1 s"), (59, "59 s"), (60, "1 min"), (200, "3 min 20 s"),
    (600, "10 min"), (659, "10 min"), (3600, "1 h"), (22482, "6 h 14 min"),
    (90000, "25 h")])
def test_a_wait_reads_in_words(seconds: int, words: str) -> None:
    from hivelite.core.clock import duration

    assert duration(seconds) == words


def test_priorities_are_coloured_on_a_terminal_alone(tmp_path: Path) -> None:
    """urgent bold red, high yellow, low dim, normal plain: painted in place, the columns
    measured without the codes; never without ``colour``."""
    from hivelite import Hive
    from hivelite.faces import render

    from .conftest import own_task

    with Hive.open(tmp_path / "s.db", owner="ana") as hive:
        for priority in ("urgent", "high", "normal", "low"):
            own_task(hive, priority=priority)
        items = hive.list(sort="priority").items
        painted = render.task_table(items, hive.clock(), width=200, colour=True)
        plain = render.task_table(items, hive.clock(), width=200)
    assert "\x1b[1;31murgent\x1b[0m" in painted and "\x1b[33mhigh\x1b[0m" in painted
    assert "\x1b[2mlow\x1b[0m" in painted and "normal\x1b" not in painted
    unpainted = re.sub(r"\x1b\[[0-9;]*m", "", painted)
    assert unpainted == plain and "\x1b" not in plain


LONG_REASON = "the parser will not parse the nested lists of the second example " * 2


@pytest.mark.parametrize("columns", [80, 200])
def test_history_fits_the_terminal_with_relative_times(tmp_path: Path, columns: int) -> None:
    """``history`` on a terminal of 80 or 200 columns: no line longer, times relative, a
    long reason cut; into a pipe every reason whole."""
    from hivelite import Hive

    from .conftest import CODER, own_task

    db = tmp_path / "s.db"
    with Hive.open(db, owner="ana") as hive:
        n = own_task(hive)
        lease = hive.claim(CODER, n)
        hive.release(CODER, n, lease_id=lease.lease_id, token=lease.fencing_token,
                     reason=LONG_REASON.strip())
    shown = on_a_terminal(db, "history", str(n), columns=columns, NO_COLOR="1")
    lines = [line.rstrip("\r") for line in shown.splitlines() if line.strip()]
    assert lines[0].startswith("SEQ  AT ") and "#" not in lines[0].split()
    assert all(len(line) <= columns for line in lines), max(map(len, lines))
    assert "ago" in lines[1] and "T0" not in lines[1]  # "3s ago", not a timestamp
    assert ("…" in lines[-1]) == (columns == 80)
    piped = subprocess.run([str(hivelite_script()), "--db", str(db), "history", str(n)],
                           capture_output=True, text=True, env=clean_env(), timeout=HANG_S)
    assert LONG_REASON.strip() in piped.stdout
