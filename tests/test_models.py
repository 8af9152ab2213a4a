"""The models against the seed schema (DESIGN §4, §4a, §8).

Three promises are checked here:

- every task object the library hands out (and every one built directly from the
  models) validates against the shipped seed schema, with format checking on;
- the Rust-engine patterns in ``hivelite.core.models`` accept exactly what the seed's
  look-ahead patterns accept (hypothesis compares them string by string);
- bad input is refused as ``422 invalid_input`` naming the field, before anything
  reaches the journal.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker
from pydantic import TypeAdapter, ValidationError

import hivelite
from hivelite import (
    Checkpoint,
    Evidence,
    Hive,
    InvalidInput,
    Packet,
    Result,
    State,
    Task,
    TaskView,
    WaitingOn,
)
from hivelite.core.models import AgentName, Slug, Timestamp
from hivelite.core.wording import field_words

from .conftest import GUEST, OWNER, START, OpenHive, held_task, own_task, packet

SCHEMA: dict[str, Any] = json.loads(
    resources.files("hivelite").joinpath("data/task.schema.json").read_text(encoding="utf-8")
)
FORMATS = FormatChecker()
VALIDATOR = Draft202012Validator(SCHEMA, format_checker=FORMATS)
PROPS: dict[str, Any] = SCHEMA["properties"]
SLUG_PATTERN: str = PROPS["project"]["pattern"]
AGENT_PATTERN: str = PROPS["requester"]["pattern"]
DATE_TIME_PATTERN: str = PROPS["created_at"]["pattern"]

SLUG = TypeAdapter(Slug)
AGENT = TypeAdapter(AgentName)
TIMESTAMP = TypeAdapter(Timestamp)

# One bounded profile for every property test: the whole file stays well under 20 s.
BOUNDED = settings(max_examples=300, deadline=None, database=None)
# Store tests: 21 ways of breaking a packet x 5 examples, each way against one store.
STORE_BOUNDED = settings(
    max_examples=5, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def schema_errors(instance: Any, validator: Draft202012Validator = VALIDATOR) -> list[str]:
    """Every schema violation as ``path: message`` (empty when the instance is valid)."""
    return sorted(
        f"{'/'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"
        for err in validator.iter_errors(instance)
    )


def leaf_errors(instance: Any) -> list[tuple[str, list[str | int]]]:
    """Every (keyword, path) that failed, looking inside ``anyOf`` branches too."""
    out: list[tuple[str, list[str | int]]] = []
    pending = list(VALIDATOR.iter_errors(instance))
    while pending:
        err = pending.pop()
        out.append((str(err.validator), list(err.absolute_path)))
        pending.extend(err.context or ())
    return out


def assert_seed_valid(task: Task) -> None:
    """The task's exported form validates against the seed schema, formats checked."""
    data = task.to_json_dict()
    assert schema_errors(data) == [], data


def accepts(adapter: TypeAdapter[Any], value: Any) -> bool:
    try:
        adapter.validate_python(value)
    except ValidationError:
        return False
    return True


def sub_validator(*path: str | int) -> Draft202012Validator:
    node: Any = SCHEMA
    for key in path:
        node = node[key]
    return Draft202012Validator(node, format_checker=FORMATS)


# -- the checker really checks -------------------------------------------------------


def test_shipped_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["additionalProperties"] is False


def test_format_checker_really_checks_uri_and_date_time() -> None:
    assert {"uri", "date-time"} <= set(FORMATS.checkers)
    assert FORMATS.conforms("https://example.com/x", "uri")
    assert not FORMATS.conforms("not a url", "uri")
    assert FORMATS.conforms("2024-02-29T00:00:00Z", "date-time")
    assert not FORMATS.conforms("2023-02-29T00:00:00Z", "date-time")
    assert not FORMATS.conforms("yesterday", "date-time")


def _valid_task_dict(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "t1", "project": "demo", "state": "verifying", "waiting_on": None,
        "requester": "ana/planner", "assignee": "ana/coder",
        "packet": {"task": "Write the parser", "deliverable_type": "code",
                   "acceptance_criteria": ["tests pass"], "context": "", "files": [],
                   "depends_on": []},
        "result": {"summary": "done", "provenance": "agent_generated",
                   "returned_by": "ana/coder", "returned_at": START,
                   "evidence": [{"kind": "link", "summary": "the PR",
                                 "url": "https://example.com/x"}]},
        "latest_checkpoint": None, "created_at": START, "updated_at": START,
    }
    data.update(overrides)
    return data


def test_validator_rejects_bad_uri_and_bad_date_time_through_format_alone() -> None:
    assert schema_errors(_valid_task_dict()) == []
    # evidence.url has no pattern: only the format checker can refuse it.
    bad_url = _valid_task_dict()
    bad_url["result"]["evidence"][0]["url"] = "not a url"
    assert schema_errors(bad_url)
    assert ("format", ["result", "evidence", 0, "url"]) in leaf_errors(bad_url)
    # Non-ASCII digits pass the seed's pattern under Python's re, so only format refuses them.
    odd_digits = "\u0662\u0660\u0662\u0664-01-01T00:00:00Z"
    assert re.fullmatch(DATE_TIME_PATTERN, odd_digits)
    errors = schema_errors(_valid_task_dict(created_at=odd_digits))
    assert errors and all(e.startswith("created_at") for e in errors)
    assert leaf_errors(_valid_task_dict(created_at=odd_digits)) == [("format", ["created_at"])]
    # And the pattern still works for what it covers.
    assert schema_errors(_valid_task_dict(updated_at="2023-02-29T00:00:00Z"))


# -- tasks the library returns -------------------------------------------------------


class DenyGate:
    """A policy plugin that refuses every handoff; it keeps the tasks it was shown."""

    def __init__(self) -> None:
        self.seen: list[Task] = []

    @hivelite.hookimpl
    def hivelite_permission_gate(self, task: Task, hive: Any) -> str:
        self.seen.append(task)
        return "deny"


def _check_view(view: TaskView) -> None:
    assert_seed_valid(view.task)
    dumped = view.task.model_dump(mode="json")
    assert schema_errors(dumped) == [], dumped
    assert dumped == view.task.to_json_dict()


def _check_whole_store(hive: Hive) -> int:
    items = hive.list(limit=500).items
    for view in items:
        _check_view(view)
        _check_view(hive.get(view.number))
    return len(items)


def test_routed_waiting_and_cancelled_tasks_validate(hive: Hive) -> None:
    routed = hive.get(own_task(hive))
    assert routed.task.state is State.routed
    held = hive.get(held_task(hive))
    assert (held.task.state, held.task.waiting_on) == (State.waiting, WaitingOn.owner_approval)
    for view in (routed, held):
        _check_view(view)

    approved = hive.approve(OWNER, held_task(hive))
    assert approved.state is State.routed
    denied = hive.deny(OWNER, held_task(hive), reason="not now")
    assert denied.state is State.rejected
    cancelled_routed = hive.cancel(OWNER, own_task(hive))
    cancelled_held = hive.cancel(OWNER, held_task(hive), reason="changed my mind")
    for receipt in (approved, denied, cancelled_routed, cancelled_held):
        view = hive.get(receipt.number)
        assert (view.task.id, view.task.state, view.task.waiting_on) == (
            receipt.id, receipt.state, receipt.waiting_on)
        _check_view(view)
    assert cancelled_routed.state is cancelled_held.state is State.cancelled
    assert cancelled_held.waiting_on is None

    states = {v.task.state for v in hive.list(limit=500).items}
    assert {State.routed, State.waiting, State.rejected, State.cancelled} <= states
    assert _check_whole_store(hive) == 6


def test_tasks_rejected_by_a_deny_plugin_validate(open_hive: OpenHive) -> None:
    gate = DenyGate()
    hive = open_hive(plugins=[gate])
    own = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder", project="demo",
                       packet=packet())
    assert (own.state, own.waiting_on) == (State.rejected, None)
    view = hive.get(own.number)
    assert view.task.state is State.rejected
    assert view.task.waiting_on is None
    _check_view(view)
    guest = hive.handoff(GUEST, requester="guest/scout", assignee="ana/coder", project="demo",
                         packet=packet(context="from outside"))
    assert guest.state is State.rejected
    assert hive.get(guest.number).task.state is State.rejected
    _check_view(hive.get(guest.number))
    assert _check_whole_store(hive) == 2
    # What the gate was shown is a seed-valid task too (in state requested).
    assert [t.state for t in gate.seen] == [State.requested, State.requested]
    for task in gate.seen:
        assert_seed_valid(task)


def _at_limit(char: str, length: int, tag: str = "") -> str:
    return (tag + char * length)[:length]


def test_packet_with_every_optional_field_at_its_limits_validates(hive: Hive) -> None:
    # 20 dependencies with 64-character ids (the id limit).
    dep_ids = [f"dep{i:02d}" + "_" * 59 for i in range(20)]
    assert all(len(i) == 64 for i in dep_ids)
    for dep in dep_ids:
        own_task(hive, id=dep)
    half = "a" + "-b" * 19  # 39 characters with hyphens: the longest slug
    assert len(half) == 39
    big = {
        # Code points, not bytes: astral and accented characters count one each.
        "task": _at_limit("\N{GRINNING FACE}", 500, "Write "),
        "deliverable_type": "reviewed_pr",
        "acceptance_criteria": [_at_limit("\u00e9", 500, f"c{i} ") for i in range(20)],
        "context": _at_limit("x", 4000, "ctx \N{SNOWMAN} "),
        "files": [_at_limit("f", 300, f"src/{i}/") for i in range(50)],
        "depends_on": dep_ids,
    }
    receipts = [
        hive.handoff(OWNER, requester=f"ana/{half}", assignee="ana/coder", project=half,
                     packet=big, labels=[f"l{i}" for i in range(10)], priority="urgent",
                     id="z" * 64),
        hive.handoff(OWNER, requester=f"{half}/{half}", assignee=f"{half}/{half}",
                     project=half, packet=big),
    ]
    assert receipts[0].id == "z" * 64
    assert receipts[0].state is State.routed
    assert receipts[1].state is State.waiting
    views = [hive.get(r.number) for r in receipts]
    assert views[0].task.state is State.routed
    assert views[1].task.state is State.waiting
    for view in views:
        assert view.task.packet.model_dump() == big
        _check_view(view)
    assert hive.cancel(OWNER, views[1].number).state is State.cancelled
    views.append(hive.get(views[1].number))
    _check_view(views[-1])
    assert _check_whole_store(hive) == 22


# -- models built directly -----------------------------------------------------------


def _full_result(evidence_count: int = 20) -> Result:
    evidence = [
        Evidence(kind="link", summary=_at_limit("s", 500), url="https://example.com/x",
                 content=_at_limit("c", 8000)),
        Evidence(kind="note", summary="only a note"),
        Evidence(kind="test_output", summary="pytest", content="12 passed"),
        Evidence(kind="pull_request", summary="the PR", url="https://example.com/pr/1"),
    ]
    while len(evidence) < evidence_count:
        evidence.append(Evidence(kind="commit", summary=f"c{len(evidence)}",
                                 url=f"https://git.example.com/c/{len(evidence):07x}"))
    return Result(summary=_at_limit("r", 4000), evidence=evidence[:evidence_count],
                  provenance="from_approved_context", returned_by="ana/coder",
                  returned_at="2024-02-29T23:59:59.999+05:30")


def _full_checkpoint() -> Checkpoint:
    return Checkpoint(
        progress=_at_limit("p", 2000),
        decisions=[_at_limit("d", 500)] * 20,
        files_touched=[_at_limit("f", 300)] * 100,
        next_steps=[""] * 20,
        open_questions=[_at_limit("q", 500)] * 20,
    )


def _direct_task(state: State, waiting_on: WaitingOn | None, **overrides: Any) -> Task:
    fields: dict[str, Any] = {
        "id": "A-z_0" * 12 + "1234", "project": "demo", "state": state,
        "waiting_on": waiting_on, "requester": "ana/planner", "assignee": "bob/coder",
        "packet": Packet(task="Write the parser", deliverable_type="code",
                         acceptance_criteria=["tests pass"]),
        "result": _full_result(), "latest_checkpoint": _full_checkpoint(),
        "created_at": "2000-02-29T00:00:00Z", "updated_at": "2026-12-02T09:00:00.123-00:00",
    }
    fields.update(overrides)
    return Task(**fields)


@pytest.mark.parametrize(
    ("state", "waiting_on"),
    [(s, None) for s in State if s is not State.waiting]
    + [(State.waiting, w) for w in WaitingOn],
)
def test_directly_built_tasks_validate(state: State, waiting_on: WaitingOn | None) -> None:
    task = _direct_task(state, waiting_on)
    assert_seed_valid(task)
    data = task.to_json_dict()
    evidence = data["result"]["evidence"]
    assert set(evidence[0]) == {"kind", "summary", "url", "content"}
    assert set(evidence[1]) == {"kind", "summary"}
    # A round trip through the exported form gives the same task back.
    assert Task.model_validate(data) == task


def test_directly_built_task_without_result_or_checkpoint_validates() -> None:
    task = _direct_task(State.routed, None, result=None, latest_checkpoint=None)
    assert_seed_valid(task)
    assert schema_errors(task.model_dump(mode="json")) == []


def test_result_evidence_and_checkpoint_validate_against_their_subschemas() -> None:
    result_schema = sub_validator("properties", "result")
    checkpoint_schema = sub_validator("properties", "latest_checkpoint")
    evidence_schema = sub_validator("properties", "result", "anyOf", 0, "properties",
                                    "evidence", "items")
    result = _full_result()
    for item in result.evidence:
        assert schema_errors(item.model_dump(mode="json", exclude_none=True),
                             evidence_schema) == []
    assert schema_errors(result.model_dump(mode="json", exclude_none=True), result_schema) == []
    assert schema_errors(_full_checkpoint().model_dump(mode="json"), checkpoint_schema) == []
    assert schema_errors(Checkpoint(progress="p").model_dump(mode="json"),
                         checkpoint_schema) == []


def test_model_dump_of_task_with_result_validates() -> None:
    task = _direct_task(State.completed, None)
    assert schema_errors(task.model_dump(mode="json")) == []


# -- evidence rules ------------------------------------------------------------------


def test_evidence_url_must_be_a_uri() -> None:
    with pytest.raises(ValidationError) as err:
        Evidence(kind="link", summary="s", url="not a url")
    assert err.value.errors()[0]["loc"] == ("url",)
    assert Evidence(kind="link", summary="s", url="https://example.com/x").url == (
        "https://example.com/x")


def test_evidence_content_at_most_8000() -> None:
    assert Evidence(kind="note", summary="s", content="c" * 8000).content == "c" * 8000
    with pytest.raises(ValidationError) as err:
        Evidence(kind="note", summary="s", content="c" * 8001)
    assert err.value.errors()[0]["loc"] == ("content",)


@pytest.mark.parametrize("summary", ["", "s" * 501])
def test_evidence_summary_is_1_to_500(summary: str) -> None:
    with pytest.raises(ValidationError):
        Evidence(kind="note", summary=summary)


@pytest.mark.parametrize("count", [0, 21])
def test_result_evidence_is_1_to_20_items(count: int) -> None:
    base = _full_result(1).model_dump()
    base["evidence"] = [{"kind": "note", "summary": f"n{i}"} for i in range(count)]
    with pytest.raises(ValidationError) as err:
        Result.model_validate(base)
    assert err.value.errors()[0]["loc"] == ("evidence",)


@pytest.mark.parametrize("count", [1, 20])
def test_result_evidence_bounds_are_accepted(count: int) -> None:
    task = _direct_task(State.completed, None, result=_full_result(count))
    assert len(task.result.evidence) == count  # type: ignore[union-attr]
    assert_seed_valid(task)


URI_ALPHABET = "ab1:/?#[]@%!$&'()*+,;=-._~ "


@BOUNDED
@given(st.text(alphabet=URI_ALPHABET, max_size=20).map(lambda s: "h" + s))
@example("https://example.com/x")
@example("a:%zz")
@example("http://[bad")
@example("x:#a#b")
@example("http://h:port/")
def test_every_url_evidence_accepts_passes_the_seed_format(url: str) -> None:
    """An evidence url the model takes must also pass the schema's ``format: uri``."""
    try:
        Evidence(kind="link", summary="s", url=url)
    except ValidationError:
        return
    assert FORMATS.conforms(url, "uri"), f"Evidence accepts {url!r}; format 'uri' refuses it"


# -- the Rust-engine patterns agree with the seed's look-ahead patterns ----------------


def test_seed_agent_fields_share_one_pattern() -> None:
    result_props = PROPS["result"]["anyOf"][0]["properties"]
    assert PROPS["assignee"]["pattern"] == AGENT_PATTERN
    assert result_props["returned_by"]["pattern"] == AGENT_PATTERN
    assert PROPS["updated_at"]["pattern"] == DATE_TIME_PATTERN
    assert result_props["returned_at"]["pattern"] == DATE_TIME_PATTERN


SMALL = "abcdefghijklmnopqrstuvwxyz0123456789-/A_."
_half = st.text(alphabet="ab09-", max_size=42)
slugish = st.one_of(
    st.text(alphabet=SMALL, max_size=90),
    _half,
    st.builds(lambda a, b: f"{a}/{b}", _half, _half),
    st.builds(lambda n, c: c * n, st.integers(0, 45), st.sampled_from("a0-")),
    st.builds(lambda a, n, b: f"{a}/{'x' * n}{b}", _half, st.integers(30, 45), _half),
)

EDGE_SLUGS = [
    "", "a", "0", "-", "a-", "-a", "a-b", "a--b", "a-b-c", "a" * 39, "a" * 40,
    "a-" * 19 + "a", "a-" * 20, "A", "aB", "a_b", "a.b", "a/b", "a/b/c", "/a", "a/",
    "a" * 39 + "/" + "b" * 39, "a" * 40 + "/b", "a/" + "b" * 40, "a-/b", "a/-b",
    "a\n", "a\n/b",
]


def _edge_examples(fn: Any) -> Any:
    for value in EDGE_SLUGS:
        fn = example(value)(fn)
    return fn


@BOUNDED
@given(slugish)
@_edge_examples
def test_slug_agrees_with_seed_project_pattern(text: str) -> None:
    seed = bool(re.fullmatch(SLUG_PATTERN, text))
    event(f"seed accepts: {seed}")
    assert accepts(SLUG, text) == seed, text


@BOUNDED
@given(slugish)
@_edge_examples
def test_agent_name_agrees_with_seed_requester_pattern(text: str) -> None:
    seed = bool(re.fullmatch(AGENT_PATTERN, text))
    event(f"seed accepts: {seed}")
    assert accepts(AGENT, text) == seed, text


def _two(lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.integers(lo, hi).map(lambda n: f"{n:02d}")


timestampish = st.one_of(
    st.builds(
        lambda y, mo, d, sep, h, mi, s, frac, tz: f"{y}-{mo}-{d}{sep}{h}:{mi}:{s}{frac}{tz}",
        st.one_of(st.sampled_from(["2024", "2023", "2000", "1900", "2100", "2400", "0000",
                                   "0004", "1996", "9999"]),
                  st.integers(0, 9999).map(lambda n: f"{n:04d}")),
        _two(0, 13), _two(0, 32), st.sampled_from(["T", "T", "T", "t", " "]),
        _two(0, 25), _two(0, 61), _two(0, 61),
        st.sampled_from(["", "", ".", ".1", ".123", ".123456789"]),
        st.one_of(st.sampled_from(["Z", "Z", "z", "", "+0000", "+05:60", "+24:00"]),
                  st.builds(lambda sign, h, m: f"{sign}{h}:{m}",
                            st.sampled_from("+-"), _two(0, 25), _two(0, 61))),
    ),
    st.text(alphabet="0123456789-:TZ.+", max_size=40),
)

EDGE_TIMESTAMPS = {
    "2024-02-29T00:00:00Z": True,
    "2023-02-29T00:00:00Z": False,
    "2000-02-29T12:00:00Z": True,
    "1900-02-29T12:00:00Z": False,
    "2100-02-29T12:00:00Z": False,
    "2400-02-29T12:00:00Z": True,
    "2023-02-28T23:59:59.999Z": True,
    "2023-13-01T00:00:00Z": False,
    "2023-00-10T00:00:00Z": False,
    "2023-04-31T00:00:00Z": False,
    "2023-04-30T00:00:00Z": True,
    "2023-12-31T23:59:59+05:30": True,
    "2023-12-31T23:59:59-23:59": True,
    "2023-12-31T23:59:59+24:00": False,
    "2023-12-31T23:59:59+05:60": False,
    "2023-12-31T23:59:59+0530": False,
    "2023-12-31T24:00:00Z": False,
    "2023-12-31T23:59:60Z": False,
    "2023-12-31T23:59:59": False,
    "2023-12-31t23:59:59Z": False,
    "2023-12-31T23:59:59z": False,
    "2023-12-31T23:59:59.Z": False,
    "2023-12-31 23:59:59Z": False,
    "2023-12-31T23:59:59Z\n": False,
    START: True,
}


@pytest.mark.parametrize(("text", "ok"), EDGE_TIMESTAMPS.items())
def test_timestamp_edges(text: str, ok: bool) -> None:
    assert bool(re.fullmatch(DATE_TIME_PATTERN, text)) is ok
    assert accepts(TIMESTAMP, text) is ok


@BOUNDED
@given(timestampish)
def test_timestamp_agrees_with_seed_date_time_pattern(text: str) -> None:
    """The model takes what the seed's pattern takes, less what its date-time format refuses:
    digits other than ASCII, and year 0000."""
    seed = bool(re.fullmatch(DATE_TIME_PATTERN, text, flags=re.ASCII))
    seed = seed and not text.startswith("0000")
    event(f"seed accepts: {seed}")
    assert accepts(TIMESTAMP, text) == seed, text


@pytest.mark.parametrize("text", [
    *[t for t, ok in EDGE_TIMESTAMPS.items() if ok],
    "\uff12\uff10\uff12\uff14-01-01T00:00:00Z",  # full-width digits
    "\u0662\u0660\u0662\u0664-01-01T00:00:00Z",  # Arabic-Indic digits
    "0000-01-01T00:00:00Z",  # year 0: the seed's pattern takes it, format date-time does not
])
def test_every_timestamp_the_model_accepts_passes_the_seed_schema(text: str) -> None:
    """The schema's timestamp fields also carry ``format: date-time``; the model must not be
    looser than pattern and format together (JSON Schema's ``\\d`` is ASCII, ECMA-262)."""
    if not accepts(TIMESTAMP, text):
        return
    assert schema_errors(text, sub_validator("properties", "created_at")) == [], (
        f"Timestamp accepts {text!r}; the seed schema refuses it")


# -- bad packets are refused, naming the field, and nothing is journaled -------------

_text = st.text(max_size=40)
valid_packets = st.fixed_dictionaries(
    {
        "task": st.text(min_size=5, max_size=500),
        "deliverable_type": st.sampled_from(
            ["code", "doc", "answer", "screenshots", "reviewed_pr", "design", "data", "other"]),
        "acceptance_criteria": st.lists(st.text(min_size=1, max_size=60), min_size=1,
                                        max_size=20),
    },
    optional={
        "context": st.text(max_size=200),
        "files": st.lists(st.text(min_size=1, max_size=30), max_size=50),
        "depends_on": st.just([]),
    },
)

WRONG_TYPES: dict[str, list[Any]] = {
    "task": [12345, None, ["Write the parser"], {"t": 1}, 1.5],
    "deliverable_type": [None, 3, ["code"], "CODE", "video", ""],
    "acceptance_criteria": ["tests pass", None, 7, {"a": "b"}, [1], [None]],
    "context": [None, 4, ["x"], {"c": 1}],
    "files": ["a.py", None, 3, [1], [["a.py"]]],
    "depends_on": ["t1", None, 3, [True], [0], [None]],
}


BREAKAGES = [
    "task_short", "task_long", "deliverable", "criteria_empty", "criteria_21",
    "criteria_empty_item", "criteria_long_item", "context_long", "files_51",
    "files_bad_item", "depends_21", "depends_bad_item", "extra_key", "missing", "not_a_dict",
    *(f"wrong_type:{name}" for name in WRONG_TYPES),
]


@st.composite
def broken_packets(draw: st.DrawFn, how: str) -> tuple[Any, str]:
    """A valid packet with exactly one field broken (``how``), and the field the error names."""
    good = draw(valid_packets)
    Packet.model_validate(good)  # it really was valid before we broke it
    bad = dict(good)
    if how == "task_short":
        bad["task"] = draw(st.text(max_size=4))
        return bad, "packet.task"
    if how == "task_long":
        bad["task"] = draw(st.text(min_size=501, max_size=520))
        return bad, "packet.task"
    if how == "deliverable":
        bad["deliverable_type"] = draw(_text.filter(lambda s: s not in {
            "code", "doc", "answer", "screenshots", "reviewed_pr", "design", "data",
            "other"}))
        return bad, "packet.deliverable_type"
    if how == "criteria_empty":
        bad["acceptance_criteria"] = []
        return bad, "packet.acceptance_criteria"
    if how == "criteria_21":
        bad["acceptance_criteria"] = draw(st.lists(st.text(min_size=1, max_size=10),
                                                   min_size=21, max_size=25))
        return bad, "packet.acceptance_criteria"
    if how in ("criteria_empty_item", "criteria_long_item"):
        items = list(good["acceptance_criteria"])
        item = "" if how == "criteria_empty_item" else "x" * draw(st.integers(501, 600))
        items.insert(draw(st.integers(0, len(items) - 1)), item)
        bad["acceptance_criteria"] = items[:20]
        return bad, "packet.acceptance_criteria"
    if how == "context_long":
        bad["context"] = "c" * draw(st.integers(4001, 4100))
        return bad, "packet.context"
    if how == "files_51":
        bad["files"] = [f"f{i}.py" for i in range(draw(st.integers(51, 60)))]
        return bad, "packet.files"
    if how == "files_bad_item":
        bad["files"] = [*good.get("files", [])[:49], draw(st.sampled_from(["", "p" * 301]))]
        return bad, "packet.files"
    if how == "depends_21":
        bad["depends_on"] = [f"t{i}" for i in range(draw(st.integers(21, 30)))]
        return bad, "packet.depends_on"
    if how == "depends_bad_item":
        bad["depends_on"] = [draw(st.sampled_from(["", "d" * 301]))]
        return bad, "packet.depends_on"
    if how == "extra_key":
        key = draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
                   .filter(lambda k: k not in Packet.model_fields))
        bad[key] = draw(st.one_of(_text, st.integers(), st.none()))
        return bad, f"packet.{key}"
    if how.startswith("wrong_type:"):
        name = how.partition(":")[2]
        bad[name] = draw(st.sampled_from(WRONG_TYPES[name]))
        return bad, f"packet.{name}"
    if how == "missing":
        name = draw(st.sampled_from(["task", "deliverable_type", "acceptance_criteria"]))
        del bad[name]
        return bad, f"packet.{name}"
    assert how == "not_a_dict"
    return draw(st.sampled_from([None, "a packet", ["task"], 7])), "packet"


def _assert_refused_naming(err: InvalidInput, field: str) -> None:
    named = err.extra["field"]
    assert named == field or named.startswith(field + "."), (named, field, err.message)
    words = field_words(field.split("."), "handoff")  # as a person names it
    assert words in err.message, (words, err.message)
    assert err.status == 422
    assert err.code == "invalid_input"


@pytest.mark.parametrize("how", BREAKAGES)
def test_broken_packets_are_refused_naming_the_field(hive: Hive, how: str) -> None:
    """Every way of breaking a packet, 5 hypothesis examples each (~100 in all), one store."""

    @STORE_BOUNDED
    @given(broken_packets(how))
    def refused(broken: tuple[Any, str]) -> None:
        bad, field = broken
        event(field)
        with pytest.raises(InvalidInput) as err:
            hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                         project="demo", packet=bad)
        _assert_refused_naming(err.value, field)
        assert hive.journal() == []

    refused()


def test_a_valid_packet_is_still_accepted_by_the_same_store(hive: Hive) -> None:
    """The control for the test above: the same call with a good packet goes through."""
    receipt = hive.handoff(OWNER, requester="ana/planner", assignee="ana/coder",
                           project="demo",
                           packet=packet(task="abcde", acceptance_criteria=["x"] * 20,
                                         context="c" * 4000, files=["f"] * 50))
    assert receipt.state is State.routed
    assert hive.get(receipt.number).task.state is State.routed
    assert len(hive.journal()) == 2
    assert receipt.seq == hive.journal()[-1].seq


BAD_AGENTS = ["Ana/coder", "ana/Coder", "-ana/coder", "ana/-coder", "ana-/coder",
              "ana--x/coder", "ana/co--der", "a" * 40 + "/coder", "ana/" + "c" * 40,
              "anacoder", "ana/coder/x", "ana_x/coder", "ana.x/coder", "", "ana /coder"]
BAD_PROJECTS = ["Demo", "-demo", "demo-", "de--mo", "d" * 40, "a/b", "", "de_mo", "de.mo"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("requester", v) for v in BAD_AGENTS] + [("assignee", v) for v in BAD_AGENTS]
    + [("project", v) for v in BAD_PROJECTS],
)
def test_bad_names_are_refused_naming_the_field(hive: Hive, field: str, value: str) -> None:
    fields: dict[str, Any] = {"requester": "ana/planner", "assignee": "ana/coder",
                              "project": "demo", "packet": packet()}
    fields[field] = value
    with pytest.raises(InvalidInput) as err:
        hive.handoff(OWNER, **fields)
    _assert_refused_naming(err.value, field)
    assert hive.journal() == []


def test_longest_names_are_accepted(hive: Hive) -> None:
    name = "a" * 39
    receipt = hive.handoff(OWNER, requester=f"{name}/{name}", assignee=f"ana/{name}",
                           project=name, packet=packet())
    view = hive.get(receipt.number)
    assert view.task.requester == f"{name}/{name}"
    _check_view(view)


# -- answers made from the library's own rows -------------------------------------------


def test_made_is_model_construct_for_values_naming_every_field() -> None:
    from hivelite.core.models import ClaimReceipt, NextClaim, Receipt, made
    from hivelite.core.protocol import State

    values: dict[str, Any] = {
        "number": 3, "id": "t-1", "state": State.accepted, "waiting_on": None,
        "at": "2026-12-02T09:00:00.000Z", "seq": 7, "lease_id": "L", "fencing_token": 2,
        "holder": "ana/coder", "instance": "laptop", "session": None,
        "expires_at": "2026-12-02T09:10:00.000Z", "question": None}
    fast, slow = made(ClaimReceipt, dict(values)), ClaimReceipt.model_construct(**values)
    assert type(fast) is ClaimReceipt and fast == slow
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump_json() == slow.model_dump_json()
    fast.seq = 8  # an answer the write path completes after its body
    assert fast.seq == 8
    short = {k: v for k, v in values.items() if k != "question"}  # a default left out
    assert made(ClaimReceipt, dict(short)) == slow
    assert made(ClaimReceipt, dict(short)).model_fields_set == set(short)
    extra = {**values, "lease_id": "L", "task": None}  # a name the model lacks: not kept
    assert made(Receipt, extra) == Receipt.model_construct(**extra)
    assert "task" not in made(Receipt, extra).__dict__
    private = made(NextClaim, dict(values))  # private attributes: model_construct's way
    assert private.__pydantic_private__ == {"_view": None, "_read": None}
