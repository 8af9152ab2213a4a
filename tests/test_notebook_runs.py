"""docs/notebook.ipynb runs green on a real Jupyter kernel (``nbclient`` and ``ipykernel``),
and shows what a person expects: the store, the pages and the task as tables, the work
loop's count, the history as a timeline (issue 19, point 8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import HANG_S
from .test_notebook import Tables

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "notebook.ipynb"


@pytest.fixture(scope="module")
def ran() -> list[Any]:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells), (
        "docs/notebook.ipynb is committed without outputs: clear them")
    nbclient.NotebookClient(notebook, timeout=HANG_S, startup_timeout=HANG_S,
                            kernel_name="python3").execute()
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def html(cell: Any) -> str:
    return "".join(str(o["data"]["text/html"]) for o in cell.outputs
                   if o.get("output_type") == "execute_result" and "text/html" in o["data"])


def printed(cell: Any) -> str:
    return "".join(str(o.get("text", "")) for o in cell.outputs if o["output_type"] == "stream")


def test_every_cell_runs_without_an_error(ran: list[Any]) -> None:
    errors = [o for cell in ran for o in cell.outputs if o["output_type"] == "error"]
    assert errors == []


def test_what_the_notebook_shows(ran: list[Any]) -> None:
    opened, handed, worked, _, listed, task, history, records, closing, _ = ran
    store = Tables(html(opened)).tables[0]
    assert store["caption"] == "hivelite store"
    assert ["owner", "ana"] in store["rows"]
    first = Tables(html(handed)).tables[0]
    assert first["caption"] == "6 tasks" and {r[2] for r in first["rows"][1:]} == {"routed"}
    assert printed(worked).strip() == "6 submitted"
    assert {r[2] for r in Tables(html(worked)).tables[0]["rows"][1:]} == {"approval"}
    final = Tables(html(listed)).tables[0]["rows"][1:]
    assert len(final) == 6 and {r[2] for r in final} == {"completed"}
    assert Tables(html(task)).tables[0]["caption"] == "#2 Fix the login bug"
    moves = [r[3] for r in Tables(html(history)).tables[0]["rows"][1:]]
    assert moves[0] == "created requested" and moves[-1] == "approval → completed"
    assert "(2, 'Fix the login bug', 'completed')" in records.outputs[0]["data"]["text/plain"]
    assert ["tasks completed", "6"] in Tables(html(closing)).tables[0]["rows"]
