"""Figures a benchmark hands to ``python -m bench.report``, and the revision they were
measured at.

A benchmark hands them over in one of two ways: as JSON in a file (``--figures FILE``,
:func:`save`), or as the last line of its output, ``FIGURES {...}`` (:func:`emit`). The
report reads the file when there is one, else the line (:func:`read`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import hivelite


def revision() -> str:
    """The library's git commit (with "+changes" when the library or the benchmarks
    differ from it), if known."""
    here = Path(hivelite.__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=True)
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "hivelite",
                                "bench"], capture_output=True, text=True, timeout=10,
                               check=True)
    except (OSError, subprocess.SubprocessError):
        return "?"
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def save(path: Path | None, figures: dict[str, Any]) -> None:
    """Write ``figures`` to ``path`` when one was given."""
    if path is not None:
        path.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")


LINE = "FIGURES "
"""How the line of figures a benchmark prints begins; JSON follows, on that one line."""


def emit(figures: dict[str, Any]) -> None:
    """Print ``figures`` as one ``FIGURES {...}`` line (the benchmark's last)."""
    print(LINE + json.dumps(figures, sort_keys=True, default=str), flush=True)


def parse(output: str) -> dict[str, Any] | None:
    """The figures of the last ``FIGURES {...}`` line in ``output`` (None: no such line, or
    not a JSON object)."""
    for line in reversed(output.splitlines()):
        if line.startswith(LINE):
            try:
                found = json.loads(line[len(LINE):])
            except ValueError:
                return None
            return found if isinstance(found, dict) else None
    return None


def read(path: Path | None, output: str) -> dict[str, Any] | None:
    """A benchmark's figures: the JSON object in ``path`` if it holds one, else the
    ``FIGURES`` line of its ``output`` (None: neither)."""
    if path is not None and path.is_file():
        try:
            found = json.loads(path.read_text())
        except ValueError:
            found = None
        if isinstance(found, dict):
            return found
    return parse(output)


def without_line(output: str) -> str:
    """``output`` without its ``FIGURES`` lines (for showing it to a person)."""
    return "\n".join(line for line in output.splitlines() if not line.startswith(LINE))
