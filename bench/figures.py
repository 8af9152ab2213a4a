"""Figures a benchmark hands to ``python -m bench.report`` (``--figures FILE``: JSON)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def save(path: Path | None, figures: dict[str, Any]) -> None:
    """Write ``figures`` to ``path`` when one was given."""
    if path is not None:
        path.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
