"""What each protocol trigger on ``tasks`` costs: the same cycles with triggers dropped.

Only a scratch copy of the store loses its triggers; the library is unchanged.
A variant without ``task_journal`` writes no journal rows, so it shows the
price of the journal; the others only check, so they show the price of checking.
Since migration 13 a move names the journal row it is about to write as its task's
head, and ``task_head`` refuses a head that is not the next row: a variant without the
journal's rows drops that check too (else its second move is refused).
"""

from __future__ import annotations

from pathlib import Path

import apsw

VARIANTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("as shipped", ()),
    ("- task_journal", ("task_journal", "task_head")),
    ("- task_move", ("task_move",)),
    ("- task_update", ("task_update",)),
    ("- all three", ("task_journal", "task_head", "task_move", "task_update")),
)


def drop(path: Path, triggers: tuple[str, ...]) -> None:
    conn = apsw.Connection(str(path))
    try:
        with conn:
            for name in triggers:
                conn.execute(f"DROP TRIGGER {name}")
    finally:
        conn.close()
