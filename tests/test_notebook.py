"""What a notebook shows (issue 19, point 1): short reprs, HTML for a task, a page, a
history, a receipt and a store, pages that behave as sequences, and flat records.

The HTML is parsed (``html.parser``) and its cells compared with what the store holds."""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from typing import Any

import pytest

from hivelite import ClaimReceipt, History, Hive, Page, Receipt, TaskView
from hivelite.core.notebook import TASK_COLUMNS

from .conftest import CODER, OWNER, REVIEWER, own_task, packet

EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]


class Tables(HTMLParser):
    """Every table of an HTML text: its caption and its rows of cell texts; any other tag
    (a script) is noted."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: list[dict[str, Any]] = []
        self.tags: set[str] = set()
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._caption: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "table":
            self.tables.append({"caption": "", "rows": []})
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "caption":
            self._caption = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[-1]["rows"].append(self._row)
            self._row = None
        elif tag == "caption" and self._caption is not None:
            self.tables[-1]["caption"] = "".join(self._caption)
            self._caption = None

    def handle_data(self, data: str) -> None:
        for part in (self._cell, self._caption):
            if part is not None:
                part.append(data)


def facts(html: str) -> dict[str, list[str]]:
    """A two-column table's rows as name -> values."""
    found: dict[str, list[str]] = {}
    for row in Tables(html).tables[0]["rows"][1:]:
        found.setdefault(row[0], []).append(row[1])
    return found


def busy(hive: Hive) -> list[int]:
    """Twelve tasks: one claimed, one completed through a reviewer, the rest routed."""
    numbers = [own_task(hive, priority=("high" if n % 3 == 0 else "normal"))
               for n in range(12)]
    lease = hive.claim(CODER, numbers[0])
    done = hive.claim(CODER, numbers[1])
    hive.submit(CODER, numbers[1], lease_id=done.lease_id, token=done.fencing_token,
                summary="parser written", evidence=EVIDENCE)
    hive.verify(REVIEWER, numbers[1])
    assert lease.state.value == "accepted"
    return numbers


def test_a_page_is_a_sequence_of_its_tasks(hive: Hive) -> None:
    numbers = busy(hive)
    page = hive.list()
    assert isinstance(page, Page)
    assert len(page) == 12 and bool(page)
    assert page[0].number == numbers[0] and page[-1].number == numbers[-1]
    assert [v.number for v in page[2:4]] == numbers[2:4]
    assert [v.number for v in page] == numbers
    assert all(isinstance(v, TaskView) for v in page)
    assert not hive.list(state="cancelled")
    with pytest.raises(IndexError):
        page[12]


def test_reprs_are_short(hive: Hive) -> None:
    numbers = busy(hive)
    view = hive.get(numbers[0])
    assert repr(view) == (f"TaskView(#{numbers[0]} 'Write the parser', accepted, ana/coder,"
                          " high)")
    shown = repr(hive.list())
    assert len(shown) < 200 and shown.startswith("Page(12 tasks: #1, #2") and "2 more" in shown
    assert repr(hive) == f"<Hive {hive.store.location} owner=ana>"


def test_a_page_in_a_notebook_is_a_table_of_its_tasks(hive: Hive) -> None:
    numbers = busy(hive)
    hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
                 packet=packet(task="<script>alert(1)</script> & more"))
    page = hive.list(limit=13)
    parsed = Tables(page._repr_html_())
    assert "script" not in parsed.tags
    table = parsed.tables[0]
    assert table["caption"] == "13 tasks"
    head, *rows = table["rows"]
    assert head == list(TASK_COLUMNS)
    assert [int(r[0]) for r in rows] == [v.number for v in page]
    claimed = rows[0]
    lease = hive.get(numbers[0]).claim
    assert lease is not None
    assert claimed[1:] == ["Write the parser", "accepted", "ana/coder", "high",
                           lease.expires_at]
    assert rows[1][2] == "completed"
    assert rows[-1][1] == "<script>alert(1)</script> & more"  # shown as text, escaped
    more = Tables(hive.list(limit=5)._repr_html_()).tables[0]["caption"]
    assert more == "5 tasks (more on the next page)"


def test_a_task_in_a_notebook_shows_its_facts_claim_result_and_verdicts(hive: Hive) -> None:
    numbers = busy(hive)
    claimed = facts(hive.get(numbers[0])._repr_html_())
    assert claimed["state"] == ["accepted"] and claimed["priority"] == ["high"]
    assert claimed["claim"][0].startswith("ana/coder on laptop, expires ")
    done = hive.get(numbers[1])._repr_html_()
    assert Tables(done).tables[0]["caption"] == f"#{numbers[1]} Write the parser"
    shown = facts(done)
    assert shown["result"] == ["parser written (by ana/coder)"]
    assert shown["verdict"] == ["accept by ana/reviewer"]
    assert shown["state"] == ["completed"]


def test_a_history_in_a_notebook_is_a_timeline(hive: Hive) -> None:
    numbers = busy(hive)
    history = hive.history(numbers[1])
    assert isinstance(history, History) and isinstance(history, list)
    rows = Tables(history._repr_html_()).tables[0]["rows"][1:]
    assert [int(r[0]) for r in rows] == [e.seq for e in history]
    moves = [r[3] for r in rows]
    assert moves[0] == "created requested"
    assert "routed → accepted" in moves and moves[-1] == "approval → completed"
    assert rows[-1][2] == "ana/reviewer"


def test_receipts_and_the_store_in_a_notebook(hive: Hive) -> None:
    number = own_task(hive)
    receipt = hive.claim(CODER, number)
    assert isinstance(receipt, ClaimReceipt) and isinstance(receipt, Receipt)
    shown = facts(receipt._repr_html_())
    assert shown["state"] == ["accepted"] and shown["holder"] == ["ana/coder"]
    assert shown["fencing token"] == [str(receipt.fencing_token)]
    assert shown["journal seq"] == [str(receipt.seq)]
    store = facts(hive._repr_html_())
    assert store["owner"] == ["ana"] and store["store"] == [hive.store.location]
    assert store["live claims"] == ["1"] and store["tasks accepted"] == ["1"]


def test_records_and_pandas(hive: Hive, monkeypatch: pytest.MonkeyPatch) -> None:
    numbers = busy(hive)
    records = hive.list().to_records()
    assert [r["number"] for r in records] == numbers
    first = records[0]
    assert first["title"] == "Write the parser" and first["state"] == "accepted"
    assert first["holder"] == "ana/coder" and first["claim_expires"]
    assert records[2]["holder"] is None
    rows = hive.history(numbers[1]).to_records()
    assert rows[0]["to_state"] == "requested" and rows[-1]["to_state"] == "completed"
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    with pytest.raises(ImportError, match="pip install pandas"):
        hive.list().to_pandas()
