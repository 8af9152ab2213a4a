"""Figures a benchmark hands to ``python -m bench.report`` (``--figures FILE``: JSON), and
the revision they were measured at."""

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
