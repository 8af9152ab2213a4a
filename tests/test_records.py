"""The store's rows as plain records (``store/records.py``): what they promise in place of
``dataclasses`` (fields in order, defaults, equality, hashing, frozen fields, copies), on
the real row types the store hands across its contract."""

from __future__ import annotations

import copy
import pickle

import pytest

from hivelite.store.records import FrozenRecord, fields, record, replace
from hivelite.store.rows import ControlRow, Expiry, JournalRow, TaskRow

TASK = (1, "01ABC", "routed", None, "demo", "ana/planner", "ana/coder", "2026-12-01",
        "2026-12-01", None, 0, None, None, None, None, "normal", "[]", 1, None)


def test_a_record_takes_its_fields_in_order_or_by_name_with_defaults_last() -> None:
    row = TaskRow(*TASK)
    assert fields(TaskRow)[:3] == ("number", "id", "state") and fields(row) == fields(TaskRow)
    assert (row.depends, row.waits, row.attempts, row.attempt_limit, row.role) == (
        0, 0, 0, 3, None)
    named = TaskRow(**dict(zip(fields(TaskRow), TASK, strict=False)), attempts=3)
    assert named.exhausted and not row.exhausted
    with pytest.raises(TypeError, match="missing"):
        TaskRow(*TASK[:5])
    with pytest.raises(TypeError):
        TaskRow(*TASK, nonsense=1)


def test_records_compare_by_class_and_fields_and_show_them() -> None:
    a, b = Expiry("2026-12-01T09:00:00.000Z", 3), Expiry("2026-12-01T09:00:00.000Z", 3)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != Expiry("2026-12-01T09:00:00.000Z", 4)
    assert a != ("2026-12-01T09:00:00.000Z", 3)  # not a tuple, whatever its fields
    assert repr(a) == "Expiry(expired_at='2026-12-01T09:00:00.000Z', token=3)"
    with pytest.raises(TypeError):
        hash(TaskRow(*TASK))  # a record that can change has no hash


def test_a_frozen_record_refuses_a_change_and_replace_makes_a_copy() -> None:
    row = ControlRow(1, "hold", "ana/coder", None, None, "2026-12-01", "ana", None)
    with pytest.raises(FrozenRecord):
        row.kind = "stop"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del row.kind  # type: ignore[misc]
    lifted = replace(row, lifted_at="2026-12-02", lifted_by="ana")
    assert (lifted.lifted_at, row.lifted_at, lifted.kind) == ("2026-12-02", None, "hold")
    with pytest.raises(TypeError, match="no field 'colour'"):
        replace(row, colour="red")
    task = TaskRow(*TASK)
    task.state = "accepted"  # a task row the write path updates in place
    assert task.state == "accepted"


def test_records_copy_and_pickle_frozen_or_not() -> None:
    entry = JournalRow(7, "01ABC", 1, "2026-12-01", "ana", "routed", "accepted", None, 5,
                       "claimed", {"fencing_token": 1})
    for made in (copy.copy(entry), copy.deepcopy(entry), pickle.loads(pickle.dumps(entry))):
        assert made == entry and made.fields() == entry.fields()
    task = TaskRow(*TASK)
    assert pickle.loads(pickle.dumps(task)) == task


def test_a_field_without_a_default_after_one_with_is_refused_as_the_class_is_made() -> None:
    with pytest.raises(TypeError, match="follows one with a default"):
        @record()
        class Bad:
            first: int = 0
            second: int
