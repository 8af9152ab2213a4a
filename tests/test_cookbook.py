"""docs/cookbook.md runs as printed: each ``python title=policies/NAME.py`` block is saved
to a plugins folder of its own (the ``toml title=hivelite.toml`` block beside the store),
loaded as a real plugin, and made to decide (issue 19, point 6)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hivelite import Caller, Hive, ManualClock, State

from .conftest import CODER, OWNER, REVIEWER, own_task, packet

ROOT = Path(__file__).resolve().parents[1]
COOKBOOK = ROOT / "docs" / "cookbook.md"
FENCE = re.compile(r"^```(\w+) title=(\S+)\n(.*?)^```[ \t]*$", re.M | re.S)
EVIDENCE = [{"kind": "test_output", "summary": "3 passed"}]
TESTER = Caller.agent("ana/tester", "tablet")


def blocks() -> dict[str, str]:
    """Every titled block of the cookbook, by its title (a path)."""
    found = {title: body for _, title, body in FENCE.findall(COOKBOOK.read_text())}
    assert found, "docs/cookbook.md has no titled blocks"
    return found


def policy_hive(tmp_path: Path, name: str, clock: ManualClock,
                settings: bool = False) -> Hive:
    """A store whose plugins folder holds only the cookbook's ``name`` policy."""
    folder = tmp_path / "policies"
    folder.mkdir(mode=0o700)
    (folder / f"{name}.py").write_text(blocks()[f"policies/{name}.py"])
    store = tmp_path / "store.db"
    if settings:
        (tmp_path / "hivelite.toml").write_text(blocks()["hivelite.toml"])
    return Hive.open(store, owner="ana", plugins_dir=folder, clock=clock)


def test_every_policy_of_the_cookbook_is_tested() -> None:
    named = {t.removeprefix("policies/").removesuffix(".py") for t in blocks()
             if t.startswith("policies/")}
    assert named == {"night_hold", "code_review", "sensitive_paths"}


def test_night_hold(tmp_path: Path) -> None:
    clock = ManualClock("2026-12-02T23:30:00.000Z")
    with policy_hive(tmp_path, "night_hold", clock) as hive:
        night = hive.get(own_task(hive)).task
        assert (night.state, night.waiting_on.value if night.waiting_on else None) == (
            State.waiting, "owner_approval")
        assert hive.get(1).last_reason == (
            "handed off at 23:30 UTC, at night: ana looks in the morning")
        clock.advance(hours=8, minutes=30)  # 08:00 UTC
        assert hive.get(own_task(hive)).task.state is State.routed
        hive.set_policy(OWNER, "timezone", "Asia/Tokyo")  # 08:00 UTC is 17:00 there
        assert hive.get(own_task(hive)).task.state is State.routed
        clock.advance(hours=6)  # 14:00 UTC, 23:00 in Tokyo
        held = hive.get(own_task(hive))
        assert held.task.state is State.waiting
        assert held.last_reason == "handed off at 23:00 JST, at night: ana looks in the morning"


def test_two_confirmations_for_code(tmp_path: Path) -> None:
    with policy_hive(tmp_path, "code_review", ManualClock("2026-12-02T10:00:00.000Z")) as hive:
        code, doc = own_task(hive), own_task(hive, packet=packet(deliverable_type="doc"))
        for number in (code, doc):
            lease = hive.claim(CODER, number)
            hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                        summary="done", evidence=EVIDENCE)
        assert (hive.get(code).threshold, hive.get(doc).threshold) == (2, 1)
        assert hive.verify(REVIEWER, doc).state is State.completed
        assert hive.verify(REVIEWER, code).state is State.approval
        assert hive.verify(TESTER, code).state is State.completed


@pytest.mark.parametrize("with_settings", [True, False])
def test_sensitive_paths(tmp_path: Path, with_settings: bool) -> None:
    clock = ManualClock("2026-12-02T10:00:00.000Z")
    with policy_hive(tmp_path, "sensitive_paths", clock, settings=with_settings) as hive:
        sensitive = "infra/main.tf" if with_settings else "secrets/api.key"
        held = hive.get(own_task(hive, packet=packet(files=[sensitive, "src/app.py"])))
        assert held.task.state is State.waiting
        assert held.last_reason == f"touches {sensitive}: ana looks first"
        plain = own_task(hive, packet=packet(files=["src/app.py", "infra.md"]))
        assert hive.get(plain).task.state is State.routed
