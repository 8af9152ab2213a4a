"""The hot-path benchmark of DESIGN §4a: a claim -> submit cycle at one worker.

``python -m bench`` times hivelite against a raw baseline (one narrow table,
two ``BEGIN IMMEDIATE`` transactions an item) measured in the same run, and
reports the ratio, the DESIGN targets and the WAL pages each transaction
writes. See ``bench/README.md``.
"""

TARGETS = {"NORMAL": 0.20, "FULL": 0.45}
"""DESIGN §4a: hivelite items/s divided by raw items/s, at least this much."""
SCALE_TARGET = 0.9
"""A 100,000-task store keeps at least this share of a 1,000-task store's cycle rate."""
