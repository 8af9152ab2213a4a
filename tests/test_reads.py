"""The read verbs answered from the store's rows (``hivelite.faces.reading``, issue 32) say
exactly what the library says: the same JSON, key for key and in the same order, as
``Hive.get``, ``Hive.list``, ``Hive.history`` and ``Hive.lease`` dump; and the CLI prints
the same bytes, text and ``--json``, whether a read takes that path or the library's. What
the rows cannot answer as the library would is left to it."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hivelite import Hive, ManualClock
from hivelite.core.protocol import SORTS
from hivelite.faces import reading, render

from .attacks import EVIDENCE, made_by_the_library
from .conftest import CODER, OWNER, PLANNER, REVIEWER, START, own_task
from .inproc import run_main
from .test_discovery import write_distribution

LINK = {"kind": "pull_request", "summary": "the PR", "url": "https://example.com/pr/7"}


def build(hive: Hive) -> dict[str, int]:
    """Every kind of task a view shows: ``made_by_the_library``'s, and a question
    answered, a draft, a merge, a declined result, labels and a priority, attempts run
    out, a stopped instance, a hold, and a live claim."""
    n = made_by_the_library(hive)
    n["answered"] = own_task(hive)
    lease = hive.claim(CODER, n["answered"])
    hive.pause(CODER, n["answered"], lease_id=lease.lease_id, token=lease.fencing_token,
               on="agent", reason="which format?")
    hive.answer(PLANNER, n["answered"], text="JSON lines")
    n["drafted"] = own_task(hive, labels=["ui", "bug-fix"], priority="urgent")
    lease = hive.claim(CODER, n["drafted"])
    hive.update(CODER, n["drafted"], summary="started", tokens=120, usd_micros=3400,
                lease_id=lease.lease_id, token=lease.fencing_token)
    hive.submit(CODER, n["drafted"], summary="done with a draft", evidence=[*EVIDENCE, LINK],
                lease_id=lease.lease_id, token=lease.fencing_token,
                draft={"kind": "patch", "content": "--- a\n+++ b\n", "title": "the fix"})
    hive.verify(REVIEWER, n["drafted"], verdict="reject", reason="a test is missing")
    hive.amend(OWNER, n["completed"], merge_commit="3f2a9c1")
    n["declined"] = own_task(hive)
    lease = hive.claim(CODER, n["declined"])
    hive.submit(CODER, n["declined"], summary="first try", evidence=EVIDENCE,
                lease_id=lease.lease_id, token=lease.fencing_token)
    hive.decline(OWNER, n["declined"], reason="not what was asked")
    n["exhausted"] = own_task(hive)
    hive.set_fields(OWNER, n["exhausted"], base_version=1, max_attempts=1)
    lease = hive.claim(CODER, n["exhausted"])
    hive.submit(CODER, n["exhausted"], summary="could not", evidence=EVIDENCE,
                outcome="failed", lease_id=lease.lease_id, token=lease.fencing_token)
    hive.stop(OWNER, instance="Tablet.", reason="lost it")
    hive.hold(OWNER, agent="ana/ghost")
    n["live"] = own_task(hive, packet={"task": "Ünïcode \x1b[31mred\x1b[0m title here",
                                       "deliverable_type": "doc",
                                       "acceptance_criteria": ["read"]})
    hive.claim(CODER, n["live"])
    return n


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, int]]]:
    db = tmp_path_factory.mktemp("reads") / "store.db"
    clock = ManualClock(START)
    with Hive.open(db, owner="ana", clock=clock) as hive:
        numbers = build(hive)
    yield db, numbers


def text(data: Any) -> str:
    """As ``--json`` prints it (key order counts)."""
    return json.dumps(data, ensure_ascii=False, indent=2)


@contextlib.contextmanager
def both(db: Path) -> Iterator[tuple[Hive, Any]]:
    clock = ManualClock(START)
    with Hive.open(db, clock=clock) as hive, reading.opened(str(db), clock) as quick:
        assert quick is not None, "a plain store file is read from its rows"
        yield hive, quick


def test_every_view_is_the_library_s(store: tuple[Path, dict[str, int]]) -> None:
    db, numbers = store
    now = ManualClock(START)()
    with both(db) as (hive, quick):
        last = max(numbers.values())
        for number in range(1, last + 1):
            for ref in (str(number), hive.get(number).task.id):
                assert text(reading.task(quick, now, ref)) == text(
                    hive.get(ref).model_dump(mode="json")), number
            assert text(reading.history(quick, str(number))) == text(
                [e.model_dump(mode="json") for e in hive.history(number)]), number
        assert reading.task(quick, now, str(last + 1)) is None  # the library says not found
        assert reading.history(quick, "nothing-here") is None


@pytest.mark.parametrize("filters", [
    {}, {"states": ["routed"]}, {"states": ["waiting", "approval"]},
    {"assignee": "ana/coder"}, {"requester": "ana/planner"}, {"project": "demo"},
    {"labels": ["ui"]}, {"priorities": ["urgent", "normal"]}, {"ready": True},
    {"blocked": True}, {"search": "  PARSER "}, {"role": "writer"}, {"limit": 3},
    {"limit": 3, "cursor": 3}, {"limit": 2, "cursor": 4},
], ids=lambda f: ",".join(f) or "all")
@pytest.mark.parametrize("sort", SORTS)
def test_every_page_is_the_library_s(store: tuple[Path, dict[str, int]],
                                     filters: dict[str, Any], sort: str) -> None:
    db, _ = store
    given: dict[str, Any] = {"states": [], "assignee": None, "requester": None,
                             "project": None, "ready": False, "blocked": False, "labels": [],
                             "priorities": [], "search": None, "limit": 50, "cursor": None,
                             "role": None, **filters}
    with both(db) as (hive, quick):
        fast = reading.page(quick, ManualClock(START)(), sort=sort, **given)
        page = hive.list(state=given["states"] or None, assignee=given["assignee"],
                         requester=given["requester"], project=given["project"],
                         ready=given["ready"], blocked=given["blocked"],
                         labels=given["labels"], priority=given["priorities"] or None,
                         search=given["search"], sort=sort, limit=given["limit"],
                         cursor=given["cursor"], role=given["role"])
    assert fast is not None
    assert text(fast) == text(page.model_dump(mode="json"))


def test_the_lease_is_the_library_s_for_its_holder_alone(
        store: tuple[Path, dict[str, int]]) -> None:
    db, numbers = store
    now = ManualClock(START)()
    live = str(numbers["live"])
    with both(db) as (hive, quick):
        assert text(reading.lease(quick, now, live, "ana/coder", " Laptop. ", None)) == text(
            hive.lease(CODER, live).model_dump(mode="json"))
        for agent, instance, session in (("ana/planner", "laptop", None),  # not the holder
                                         ("ana/coder", "desktop", None),  # another machine
                                         ("ana/coder", "laptop", "no good!"),  # a bad name
                                         ("Ana/Coder", "laptop", None)):
            assert reading.lease(quick, now, live, agent, instance, session) is None
        for name in ("routed", "completed", "paused"):  # no live claim
            assert reading.lease(quick, now, str(numbers[name]), "ana/coder", "laptop",
                                 None) is None


def calls(numbers: dict[str, int]) -> list[list[str]]:
    every = range(1, max(numbers.values()) + 1)
    lease = ["show", str(numbers["live"]), "--lease", "--agent", "ana/coder", "--instance",
             "laptop"]
    return [
        ["list"], ["list", "--sort", "priority"], ["list", "--sort", "updated", "--limit", "4"],
        ["list", "--state", "waiting"], ["list", "--label", "ui", "--label", "bug-fix"],
        ["list", "--search", "nothing like it"], ["list", "--after", "5", "--limit", "3"],
        ["list", "--role", "Not A Role"], ["list", "--search", "x" * 300],
        *(["show", str(n)] for n in every), *(["history", str(n)] for n in every),
        ["show", "404"], ["history", "404"], lease,
        [*lease[:-1], "desktop"], ["show", "1", "--lease"],
        ["show", str(numbers["live"]), "--lease", "--agent", "ana/coder"],
    ]


def test_the_cli_prints_the_library_s_bytes(store: tuple[Path, dict[str, int]],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Every read, text and --json, through the rows and then with the rows path turned
    off: the same exit code, stdout and stderr. (And the rows path was taken.)"""
    db, numbers = store
    env = {"HIVELITE_DB": str(db), "HIVELITE_NOW": START}
    answered: list[str] = []
    for name in ("page", "task", "history", "lease"):
        real = getattr(reading, name)

        def spy(*args: Any, real: Any = real, name: str = name, **kwargs: Any) -> Any:
            found = real(*args, **kwargs)
            answered.append(name if found is not None else "")
            return found
        monkeypatch.setattr(reading, name, spy)
    fast = {}
    for args in calls(numbers):
        for json_flag in ([], ["--json"]):
            ran = run_main([*json_flag, *args], env)
            fast[tuple(json_flag + args)] = (ran.returncode, ran.stdout, ran.stderr)
    assert {"page", "task", "history", "lease"} <= set(answered)
    assert answered.count("") >= 4  # not found, a refused role or search, no holder

    @contextlib.contextmanager
    def library_only(*args: Any, **kwargs: Any) -> Iterator[None]:
        yield None
    monkeypatch.setattr(reading, "opened", library_only)
    for key, seen in fast.items():
        ran = run_main(list(key), env)
        assert (ran.returncode, ran.stdout, ran.stderr) == seen, key


def test_a_claim_that_ran_out_is_left_to_the_library(tmp_path: Path) -> None:
    """Opening the store returns it to routed (a write), so the rows path steps aside."""
    db = tmp_path / "s.db"
    clock = ManualClock(START)
    with Hive.open(db, owner="ana", clock=clock) as hive:
        hive.claim(CODER, own_task(hive))
    clock.advance(minutes=11)
    with reading.opened(str(db), clock) as quick:
        assert quick is None
    ran = run_main(["--json", "show", "1"], {"HIVELITE_DB": str(db),
                                             "HIVELITE_NOW": "2026-12-02T09:11:00.000Z"})
    assert json.loads(ran.stdout)["task"]["state"] == "routed"


REFUSER = """
import os

import hivelite


@hivelite.hookimpl
def hivelite_startup(hive):
    if os.environ.get("HL_REFUSE"):  # once enabled: its start-up check now refuses
        raise RuntimeError("this plugin refuses every store")
"""


def test_what_is_no_plain_store_file_is_left_to_the_library(tmp_path: Path) -> None:
    clock = ManualClock(START)
    for db in (tmp_path / "missing.db", "postgresql://nobody@localhost/none"):
        with reading.opened(str(db), clock) as quick:
            assert quick is None
    with Hive.open(tmp_path / "s.db", owner="ana", clock=clock):
        pass
    with reading.opened(str(tmp_path / "s.db"), clock) as quick:
        assert quick is not None  # the check above can fail: a plain file is read here


def test_a_read_loads_no_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plugins decide writes, never what a read shows (issue 46): a store file with a
    plugins folder, and with an installed plugin enabled on it, is still read from its
    rows; neither plugin is imported, and one whose start-up would refuse the store does
    not stop a read. A write starts both, and is refused."""
    clock = ManualClock(START)
    folder = tmp_path / "plugins"
    folder.mkdir(mode=0o700)
    (folder / "refuser.py").write_text(REFUSER)
    site = tmp_path / "site"
    write_distribution(site, "hl-reads-plugin", "hl_reads_plugin",
                       {"reads-plugin": "hl_reads_plugin"}, REFUSER)
    monkeypatch.syspath_prepend(str(site))
    db = tmp_path / "s.db"
    with Hive.open(db, owner="ana", clock=clock) as hive:
        own_task(hive)
        hive.enable_plugin(OWNER, "reads-plugin")  # started here to enable it:
    sys.modules.pop("hl_reads_plugin", None)  # forget it, to see whether a read imports it
    monkeypatch.setenv("HL_REFUSE", "1")
    try:
        with reading.opened(str(db), clock, str(folder)) as quick:
            assert quick is not None  # a plugins folder and an enabled plugin: the rows
        env = {"HIVELITE_DB": str(db), "HIVELITE_NOW": "2026-12-02T09:01:00.000Z"}
        for read in (["list"], ["show", "1"], ["history", "1"]):
            ran = run_main(["--plugins-dir", str(folder), "--json", *read], env, tmp_path)
            assert ran.returncode == 0, ran.stderr
        assert json.loads(ran.stdout)[0]["number"] == 1
        assert "hl_reads_plugin" not in sys.modules
        wrote = run_main(["--plugins-dir", str(folder), "--json", "handoff",
                          "--requester", "ana/planner", "--assignee", "ana/coder",
                          "--project", "demo", "--task", "Write the parser", "--type",
                          "code", "--accept", "tests pass"], env, tmp_path)
        assert wrote.returncode == 1  # a write starts the plugins, and they refuse
        assert "this plugin refuses every store" in wrote.stderr
        assert "hl_reads_plugin" in sys.modules  # the enabled one was loaded to write
    finally:
        sys.modules.pop("hl_reads_plugin", None)


def test_a_control_reads_as_its_model_says_it() -> None:
    from hivelite.core.models import Control

    for kind, agent, instance, task in (("veto", "ana/a", None, 3), ("hold", "ana/a", None, None),
                                        ("stop", None, "desk", None),
                                        ("stop", None, None, None)):
        model = Control.model_construct(id=1, kind=kind, agent=agent, instance=instance,
                                        task=task, at=START, by="ana")
        assert render.scope(model.model_dump(mode="json")) == model.scope
        assert render.control_line(model) == render.control_line(
            model.model_dump(mode="json"))
