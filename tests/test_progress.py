"""Progress on long work (issue 29, point 7): export, import, a bulk handoff, backup and
doctor tell a callback how far they are; the CLI draws that as a bar on stderr when it is
a terminal, and prints nothing extra into a pipe or with ``--json``."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
from itertools import pairwise
from pathlib import Path

import apsw
import pytest

from hivelite import Hive
from hivelite.core.progress import STEP, counted, lines_in
from hivelite.faces.cli.progress import Bar, line
from hivelite.store.doctor import CHECKS, diagnose_file
from hivelite.store.sqlite import SqliteStore
from hivelite.store.transfer import backup, export, import_lines

from .conftest import HANG_S, OWNER, own_task
from .test_discovery import clean_env, hivelite_script
from .test_terminal import drained

Heard = list[tuple[int, "int | None", str]]


def listener() -> tuple[Heard, object]:
    heard: Heard = []

    def told(done: int, total: int | None, note: str = "") -> None:
        heard.append((done, total, note))

    return heard, told


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of more rows than one step of progress."""
    path = tmp_path_factory.mktemp("progress") / "work.db"
    with Hive.open(path, owner="ana") as hive:
        hive.handoff_many(OWNER, ({"requester": "ana/planner", "assignee": "ana/coder",
                                   "project": "demo", "packet": {
                                       "task": f"Task {k}", "deliverable_type": "code",
                                       "acceptance_criteria": ["ok"]}}
                                  for k in range(300)))
        own_task(hive)
    return path


def test_counted_tells_every_step_and_the_end() -> None:
    heard, told = listener()
    assert list(counted(range(STEP * 2 + 5), told, STEP * 2 + 5, "rows")) == list(
        range(STEP * 2 + 5))  # type: ignore[arg-type]
    assert [d for d, _, _ in heard] == [0, STEP, STEP * 2, STEP * 2 + 5]
    assert heard[-1] == (STEP * 2 + 5, STEP * 2 + 5, "rows")
    assert list(counted("abc", None)) == ["a", "b", "c"]


def test_lines_in_counts_a_file_without_moving_it(tmp_path: Path) -> None:
    path = tmp_path / "lines.jsonl"
    path.write_text("one\ntwo\nthree")  # no newline at the end: still three lines
    with path.open() as handle:
        assert lines_in(handle) == 3
        assert handle.readline() == "one\n"
    assert lines_in(io.StringIO("a\nb\n")) is None and lines_in(["a"]) is None
    read, write = os.pipe()
    with os.fdopen(read) as pipe:
        os.close(write)
        assert lines_in(pipe) is None


def test_export_import_backup_and_doctor_tell_how_far_they_are(store: Path,
                                                                tmp_path: Path) -> None:
    conn = apsw.Connection(str(store))
    rows = sum(conn.execute(f"SELECT count(*) FROM {t}").get for t in ("tasks", "journal"))
    heard, told = listener()
    out = io.StringIO()
    written = export(conn, out, told)  # type: ignore[arg-type]
    assert heard[0][:2] == (0, written) and heard[-1][:2] == (written, written)
    assert written > rows and len(heard) >= 3  # every table counted ahead
    assert {note for _, _, note in heard[1:-1]} <= {"meta", "tasks", "packets", "journal",
                                                    "updates", "deps", "checkpoints"}
    assert all(a[0] <= b[0] for a, b in pairwise(heard))

    lines = tmp_path / "work.jsonl"
    lines.write_text(out.getvalue())
    heard, told = listener()
    copy = SqliteStore(tmp_path / "copy.db")
    with lines.open() as source:
        imported = import_lines(copy.conn, source, told)  # type: ignore[arg-type]
    copy.close()
    assert imported == written and heard[0][:2] == (0, written + 1)  # and its header
    assert heard[-1][:2] == (written + 1, written + 1)

    heard, told = listener()
    backup(conn, tmp_path / "backup.db", told)  # type: ignore[arg-type]
    pages = conn.execute("PRAGMA page_count").get
    assert heard[-1] == (pages, pages, "")

    heard, told = listener()
    assert all(f.ok for f in diagnose_file(store, progress=told))  # type: ignore[arg-type]
    assert [n for _, _, n in heard] == ["integrity_check", *(c for c, _ in CHECKS),
                                        "witnesses", ""]
    assert heard[-1][:2] == (len(CHECKS) + 2,) * 2


def test_the_bar_fits_and_says_counts_rate_and_time_left() -> None:
    text = line("export", "rows", 412_000, 1_000_000, 35.0, "journal", width=200)
    assert text.startswith("export  [========>           ]   41%  412,000 of 1,000,000 rows")
    assert "11,771/s" in text and "50 s left" in text and text.endswith("journal")
    narrow = line("export", "rows", 412_000, 1_000_000, 35.0, "journal", width=60)
    assert len(narrow) <= 59 and "[" not in narrow and "412,000 of 1,000,000" in narrow
    assert line("handoff", "lines", 900, None, 3.0) == "handoff  900 lines  300/s"
    assert "left" not in line("backup", "pages", 10, 10, 3.0)  # done: no rate, no wait
    assert line("doctor", "checks", 4, 9, 30.0, "tokens", timed=False) == (
        "doctor  [========>           ]   44%  4 of 9 checks  tokens")  # steps unequal


def test_the_bar_redraws_ten_times_a_second_and_is_erased_at_the_end() -> None:
    now = [0.0]
    stream = io.StringIO()
    bar = Bar("export", "rows", stream, clock=lambda: now[0])
    bar(0, 100)
    for done in range(1, 100):
        now[0] += 0.01
        bar(done, 100)
    bar(100, 100)
    drawn = stream.getvalue().split("\r")[1:]
    assert 9 <= len(drawn) <= 12 and "100%" in drawn[-1]
    bar.close()
    assert stream.getvalue().endswith("\r" + " " * len(drawn[-1].rstrip()) + "\r")
    assert all(len(d) <= 79 for d in drawn)


def run(args: list[str], *, cwd: Path, terminal: bool, stdin: int | None = None
        ) -> tuple[int, str, str]:
    """The real command, its stderr on a pseudo-terminal of 100 columns (``terminal``) or a
    pipe, its stdout a pipe; its exit code, stdout and stderr."""
    leader, follower = pty.openpty() if terminal else (-1, -1)
    proc = subprocess.run([str(hivelite_script()), *args], cwd=cwd, stdin=stdin,
                          stdout=subprocess.PIPE,
                          stderr=follower if terminal else subprocess.PIPE,
                          env=clean_env(COLUMNS="100", TERM="xterm"), timeout=HANG_S)
    if not terminal:
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    os.close(follower)
    try:
        return proc.returncode, proc.stdout.decode(), drained(leader)
    finally:
        os.close(leader)


@pytest.mark.slow
def test_each_long_command_draws_a_bar_on_a_terminal_and_nothing_into_a_pipe(
        store: Path, tmp_path: Path) -> None:
    work = tmp_path / "work.jsonl"
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({
        "requester": "ana/planner", "assignee": "ana/coder", "project": "demo",
        "packet": {"task": f"Bulk {k}", "deliverable_type": "code",
                   "acceptance_criteria": ["ok"]}}) + "\n" for k in range(40)))
    db = ["--db", str(store)]
    commands = {
        "export": [*db, "export", "--out", str(work)],
        "import": ["--db", str(tmp_path / "copy.db"), "import", str(work)],
        "backup": [*db, "backup", str(tmp_path / "backup.db")],
        "doctor": [*db, "doctor"],
        "handoff": [*db, "handoff", "--from-jsonl", str(tasks)],
    }
    for label, args in commands.items():
        code, out, err = run(args, cwd=tmp_path, terminal=True)
        assert code == 0, (label, err)
        drawn = [d for d in re.split(r"\r", err) if d.strip()]
        bars = (label, "doctor") if label == "import" else (label,)  # then its own check
        assert drawn and all(d.startswith(bars) for d in drawn[:-1]), (label, err)
        assert drawn[0].startswith(label), (label, err)
        assert "100%" in err and "[====================]" in err, (label, err)
        assert all(len(d.rstrip()) <= 99 for d in drawn), (label, err)
        assert err.rstrip(" ").endswith("\r"), (label, err)  # erased: the cursor at its start
        assert "\r" not in out and out.strip(), (label, out)  # the command's own answer
    # into a pipe, and with --json on a terminal: the answer alone
    code, out, err = run([*db, "export"], cwd=tmp_path, terminal=False)
    assert code == 0 and err == "" and out.splitlines()[0].startswith('{"format"')
    code, out, err = run([*db, "--json", "doctor"], cwd=tmp_path, terminal=True)
    assert code == 0 and err == "" and json.loads(out)["ok"] is True
