"""``hivelite ARGS`` run inside the test process by ``cli.main``, as a subprocess would see
it: its own environment (the ``$HIVELITE_`` variables replaced), its exit code, what it
printed on stdout and on stderr. For tests of what the CLI decides; each path keeps one
real subprocess as its smoke test."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from unittest import mock


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    with mock.patch.dict(os.environ, {**clean, **env}, clear=True):
        yield


def run_main(args: Sequence[str], env: Mapping[str, str] | None = None,
             cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[str]:
    """What ``hivelite *args`` exits with and prints, run by ``cli.main`` here (in the
    folder ``cwd``, when given)."""
    from hivelite.faces.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    logger = logging.getLogger("hivelite")
    handlers = list(logger.handlers)
    code: int | str | None = 0
    where = contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext()
    with environment(env or {}), where, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as ended:
            code = ended.code
        finally:
            logger.handlers = handlers  # main's handler wrote to this call's stderr
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return subprocess.CompletedProcess(["hivelite", *args], returncode, out.getvalue(),
                                       err.getvalue())
