"""Bare ``hivelite`` (and a bare group such as ``hivelite token``) prints its help as
``--help`` does, on the newest click pip installs and on the lowest ``pyproject.toml``
allows: click 8.2 began raising the help as a usage error, which printed it as one
``Error:`` line with literal ``\\n``s."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import HANG_S
from .test_cli_e2e import hivelite_command

LOWEST_CLICK = "8.1.8"
"""The last 8.1 release: the oldest click ``click>=8.1`` admits, and the one before the
change."""


def readable(out: str) -> None:
    assert out.startswith("Usage: hivelite [OPTIONS] COMMAND [ARGS]...\n")
    assert "\\n" not in out
    assert "\n  claim " in out and "Error" not in out


def test_bare_hivelite_prints_its_help(tmp_path: Path) -> None:
    done = subprocess.run(hivelite_command(), capture_output=True, text=True, cwd=tmp_path,
                          timeout=HANG_S)
    assert done.returncode == 0, done.stderr
    readable(done.stdout)
    assert done.stderr == ""
    assert not (tmp_path / "hivelite.db").exists()


def test_a_bare_group_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    from hivelite.faces.cli.main import main

    with pytest.raises(SystemExit) as ended:
        main(["token"])
    assert ended.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: hivelite token [OPTIONS] COMMAND [ARGS]...\n")
    assert "\n  add " in out


@pytest.mark.slow
def test_bare_hivelite_on_the_lowest_click_allowed(tmp_path: Path) -> None:
    """click 8.1 in a folder of its own, put before the installed one."""
    target = tmp_path / "click81"
    got = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                          "--disable-pip-version-check", "--target", str(target),
                          f"click=={LOWEST_CLICK}"], capture_output=True, text=True,
                         timeout=HANG_S)
    if got.returncode != 0 and os.environ.get("HIVELITE_NEED_OLD_CLICK") != "1":
        pytest.skip(f"click {LOWEST_CLICK} could not be installed: {got.stderr[-300:]}")
    assert got.returncode == 0, got.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(target), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run(
        [sys.executable, "-c", "import click, sys; from hivelite.faces.cli.main import main;"
         " print(click.__version__, file=sys.stderr); main()"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=HANG_S)
    assert done.stderr.strip() == LOWEST_CLICK
    assert done.returncode == 0
    readable(done.stdout)
