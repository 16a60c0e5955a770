"""Two stored nights of one test for the exports' tests: run 1 and run 2 (slower TPOT), each
with a distribution's statistic, a scalar and a metric of no value."""

from __future__ import annotations

import copy
from pathlib import Path

from pytest_llmperf.history import location, record
from pytest_llmperf.history.store import HistoryStore
from tests.unit.history.builders import DOCUMENT

TEST = "suites/test_cpu.py::test_a"
TPOTS = (0.0022, 0.0031)


def night_document(index: int) -> dict:
    out = copy.deepcopy(DOCUMENT)
    out["datetime"] = f"2026-11-{index + 20:02d}T03:00:00+00:00"
    result = out["llmperf"]["results"][0]
    result["metrics"] = {
        "tpot_s.p50": {"value": TPOTS[index], "spread": 0.0001, "n": 3, "direction": "lower"},
        "output_throughput_tok_s": {"value": 450.5 - index, "spread": None, "n": 3,
                                    "direction": "higher"},
        "energy_per_token_j": {"value": None, "spread": None, "n": 3, "direction": "lower"}}
    return out


def make_store(folder: Path, environ: dict[str, str] | None = None, url: str = "") -> str:
    """The two nights in a new SQLite store in `folder`, or in the PostgreSQL store `url`;
    returns the store as --store takes it."""
    path = url or str(folder / "history.sqlite")
    store = HistoryStore.open(location.resolve(path, folder))
    for index in range(len(TPOTS)):
        store.record(record.from_document(night_document(index),
                                          environ=environ or {"LLMPERF_HOST": "node-7"}))
    store.close()
    return path
