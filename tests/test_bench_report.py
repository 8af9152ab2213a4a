"""``python -m bench.report``: each target's verdict and the page it writes (figures made
up here; the benchmarks themselves are run by hand, never by the tests)."""

from __future__ import annotations

from bench.report import RUNS, Target, page, targets

FOUND = {
    "cycle": {"NORMAL": {"ratio": 0.075}, "FULL": {"ratio": 0.61},
              "pages": {"hivelite": {"all": 5.9}}},
    "drain NORMAL": {"W=2": {"ratio": 0.12}},
    "drain FULL": {"W=2": {"ratio": 0.3}},
    "startup": {"pass_ms": 30.0, "--version": {"ratio": 2.9}, "list": {"ratio": 9.0},
                "--json show 1": {"ratio": 5.0}},
    "sizes": {
        "1000": {"next (ms)": 1.0, "claim -> submit (ms)": 1.0, "show (ms)": 1.0,
                 "history (ms)": 1.0, "list --ready --limit 50 (ms)": 1.0,
                 "list --state completed --limit 50 (ms)": 1.0, "walk all RSS (MB)": 40.0,
                 "export RSS (MB)": 40.0, "build (s)": 0.3},
        "1000000": {"next (ms)": 1.2, "claim -> submit (ms)": 1.6, "show (ms)": 1.0,
                    "history (ms)": 1.0, "list --ready --limit 50 (ms)": 4.0,
                    "list --state completed --limit 50 (ms)": 1.5,
                    "walk all RSS (MB)": 70.0, "export RSS (MB)": 151.0,
                    "build (s)": 240.0}},
}


def verdicts() -> dict[str, str]:
    return {t.what: t.verdict() for t in targets(FOUND)}


def test_a_ratio_to_raw_must_reach_its_target() -> None:
    found = verdicts()
    assert found["claim -> submit, W=1, NORMAL (x raw)"] == "short: 50% of the target"
    assert found["claim -> submit, W=1, FULL (x raw)"] == "met"
    assert found["next -> submit, W=2, NORMAL (x raw queue)"] == "met"
    assert found["next -> submit, W=2, FULL (x raw queue)"] == "short: 75% of the target"


def test_a_limit_must_not_be_passed() -> None:
    found = verdicts()
    assert found["WAL pages per transaction"] == "short: 2.4x the limit"
    assert found["`hivelite --version` (x `python -c pass`, 30 ms)"] == "met"
    assert found["`hivelite list` (x `python -c pass`, 30 ms)"] == "short: 1.8x the limit"
    assert found["`hivelite --json show 1` (x `python -c pass`, 30 ms)"] == "met"  # equal


def test_the_big_store_is_compared_with_the_small_one() -> None:
    found = verdicts()
    assert found["`next` at 1,000,000 tasks (x 1,000)"] == "met"
    assert found["`claim -> submit` at 1,000,000 tasks (x 1,000)"] == "short: 1.1x the limit"
    assert found["`list --ready --limit 50` at 1,000,000 tasks (x 1,000)"] == (
        "short: 2.7x the limit")
    assert found["RSS, listing all 1,000,000 tasks"] == "met"
    assert found["RSS, export of 1,000,000 tasks"] == "short: 1.0x the limit"
    assert found["bulk handoff of 1,000,000 tasks"] == "short: 1.3x the limit"


def test_a_missing_figure_is_said_so() -> None:
    assert Target("x", None, 1.0, "", True).verdict() == "not measured"
    rows = targets({"cycle": {}})
    assert {t.verdict() for t in rows} == {"not measured"}


def test_the_page_holds_the_table_and_every_output() -> None:
    outputs = {run.name: f"output of {run.name}" for run in RUNS}
    text = page(FOUND, outputs, "python -m bench.report", False, 1800.0)
    assert "in 30 minutes" in text and "--quick" not in text
    assert "| WAL pages per transaction | 5.9 | <= 2.5  | short: 2.4x the limit |" in text
    for run in RUNS:
        assert f"python -m {' '.join(run.args)}" in text
        assert f"output of {run.name}" in text
