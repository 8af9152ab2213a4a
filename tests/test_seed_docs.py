"""docs/decisions.md traced to the seeds (issue 31): its generated tables are what the
protocol module renders now, the lifecycle table covers every place a task can rest, seed
004's state words cover every seed 000 state, and the page opens by naming the seeds."""

from __future__ import annotations

import pytest

from hivelite.core.protocol import (
    LIFECYCLE_CELLS,
    SEED_004_STATES,
    LifecycleCell,
    State,
    WaitingOn,
    lifecycle,
)
from hivelite.docs.seeds import DECISIONS, TABLES, regions, rewrite

REGENERATE = "docs/decisions.md drifted from the protocol: run `python -m hivelite.docs.seeds`"
SEED_004_WORDS = ("proposed", "open", "claimed", "submitted", "done", "rejected", "cancelled")
"""The words of seed 004's state diagram."""
LEASED = frozenset({State.accepted, State.working})
"""The states that hold a live claim (the store refuses a lease on any other)."""


def test_generated_regions_are_what_the_protocol_renders() -> None:
    text = DECISIONS.read_text(encoding="utf-8")
    found = regions(text)
    assert sorted(found) == sorted(TABLES), REGENERATE
    for name, render in TABLES.items():
        assert found[name] == render(), f"the {name} table: {REGENERATE}"
    assert rewrite(text) == text, REGENERATE


def test_rewrite_restores_a_hand_edited_table() -> None:
    text = DECISIONS.read_text(encoding="utf-8")
    edited = text.replace("| `working` | — | live | any | `running` |",
                          "| `working` | — | live | any | `claimed` |")
    assert edited != text
    assert regions(edited)["lifecycle"] != TABLES["lifecycle"]()
    assert rewrite(edited) == text


@pytest.mark.parametrize("broken", [
    "<!-- generated: lifecycle -->\n<!-- end generated -->\n",
    "<!-- generated: states -->\n<!-- end generated -->\n"
    "<!-- generated: lifecycle -->\n<!-- end generated -->\n"
    "<!-- generated: nonesuch -->\n<!-- end generated -->\n",
])
def test_rewrite_refuses_a_missing_or_unknown_region(broken: str) -> None:
    with pytest.raises(ValueError, match="generated regions"):
        rewrite(broken)


@pytest.mark.parametrize("cell", LIFECYCLE_CELLS, ids=lambda c: (
    f"{c.state.value}-{c.waiting_on.value if c.waiting_on else 'none'}"
    f"{'-exhausted' if c.exhausted else ''}"))
def test_lifecycle_agrees_with_every_cell(cell: LifecycleCell) -> None:
    assert lifecycle(cell.state, cell.waiting_on, exhausted=cell.exhausted) == cell.lifecycle
    assert cell.claim == (cell.state in LEASED)
    assert not cell.exhausted or cell.state is State.routed


def test_every_place_a_task_rests_has_exactly_one_cell() -> None:
    """Every state with each ``waiting_on`` it may carry (``waiting``: each value, any
    other state: none), and a routed task with attempts left and used up."""
    keys = [(c.state, c.waiting_on, c.exhausted) for c in LIFECYCLE_CELLS]
    expected = {(s, w, False) for s in State
                for w in (tuple(WaitingOn) if s is State.waiting else (None,))}
    expected.add((State.routed, None, True))
    assert len(keys) == len(set(keys)), "two cells for one place"
    assert set(keys) == expected
    assert {c.state for c in LIFECYCLE_CELLS} == set(State)


def test_exhausted_attempts_count_only_for_a_routed_task() -> None:
    for state in State:
        if state is State.waiting:
            continue
        plain = lifecycle(state, None)
        assert lifecycle(state, None, exhausted=True) == (
            "failed" if state is State.routed else plain)


def test_seed_004_words_cover_every_seed_000_state() -> None:
    assert tuple(SEED_004_STATES) == SEED_004_WORDS
    covered = [s for states in SEED_004_STATES.values() for s in states]
    assert set(covered) == set(State), f"no seed 004 word for {set(State) - set(covered)}"
    assert all(states for states in SEED_004_STATES.values())


def test_the_page_opens_with_the_seeds() -> None:
    opening = "\n".join(DECISIONS.read_text(encoding="utf-8").splitlines()[:10]).lower()
    assert "design.md" not in opening
    assert "seed 000" in opening and "seed 004" in opening


def test_the_page_cites_no_file_outside_the_project() -> None:
    text = DECISIONS.read_text(encoding="utf-8")
    assert "DESIGN.md" not in text and "DESIGN §" not in text
