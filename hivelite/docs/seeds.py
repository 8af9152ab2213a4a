"""The two tables of ``docs/decisions.md`` that trace hivelite to its seeds, generated from
the protocol module (a test fails when they drift).

``LIFECYCLE_CELLS`` (how each state reads as Hive v5's lifecycle) and ``SEED_004_STATES``
(which seed 000 states each of seed 004's state words covers) in
``hivelite/core/protocol.py`` are the one source of truth: the page shows them, it never
restates them. Each table sits between ``<!-- generated: NAME -->`` and
``<!-- end generated -->``; run ``python -m hivelite.docs.seeds`` after changing either to
rewrite those regions in place.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from ..core.protocol import LIFECYCLE_CELLS, SEED_004_STATES, LifecycleCell, State

DECISIONS = Path(__file__).resolve().parents[2] / "docs" / "decisions.md"
REGION = re.compile(r"(<!-- generated: ([a-z0-9-]+) -->\n)(.*?)(<!-- end generated -->)", re.S)
OWN_WORD = "seed 004's own word"


def _code(value: object) -> str:
    return f"`{value}`"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _lifecycle_row(cell: LifecycleCell) -> str:
    attempts = ("exhausted" if cell.exhausted else "left") if cell.state is State.routed else "any"
    return _row([
        _code(cell.state.value), _code(cell.waiting_on.value) if cell.waiting_on else "—",
        "live" if cell.claim else "none", attempts, _code(cell.lifecycle),
        cell.reason or OWN_WORD])


def lifecycle_table() -> str:
    """Each state, ``waiting_on``, claim and attempts a task rests in, and its lifecycle."""
    head = ["| state | waiting_on | claim | attempts | lifecycle | why |",
            "|---|---|---|---|---|---|"]
    return "\n".join([*head, *map(_lifecycle_row, LIFECYCLE_CELLS)]) + "\n"


def states_table() -> str:
    """Seed 004's state words, each with the seed 000 states it covers."""
    rows = [_row([_code(word), ", ".join(_code(s.value) for s in states)])
            for word, states in SEED_004_STATES.items()]
    return "\n".join(["| seed 004's word | seed 000's states |", "|---|---|", *rows]) + "\n"


TABLES: dict[str, Callable[[], str]] = {"lifecycle": lifecycle_table, "states": states_table}
"""Each generated region's name, and what renders it."""


def regions(text: str) -> dict[str, str]:
    """The body of each marked region of ``text``, by name."""
    return {m.group(2): m.group(3) for m in REGION.finditer(text)}


def rewrite(text: str) -> str:
    """``text`` with every marked region replaced by what its table renders now; a region
    of no known name, or a table with no region, is an error."""
    found = regions(text)
    unknown, missing = set(found) - set(TABLES), set(TABLES) - set(found)
    if unknown or missing:
        raise ValueError(f"generated regions: unknown {sorted(unknown)},"
                         f" missing {sorted(missing)}")
    return REGION.sub(lambda m: m.group(1) + TABLES[m.group(2)]() + m.group(4), text)


def main(path: Path = DECISIONS) -> bool:
    """Rewrite the generated regions of ``path`` in place; whether anything changed."""
    text = path.read_text(encoding="utf-8")
    new = rewrite(text)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DECISIONS
    print(f"{'rewrote' if main(target) else 'already current'}: {target}")
