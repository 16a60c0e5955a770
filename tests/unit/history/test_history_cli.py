"""`llmperf history`: the table of a test's series with its change points marked, the list of
tests and one-line errors (the dashboard and --json: test_history_dashboard.py)."""

from __future__ import annotations

import copy

import pytest

from pytest_llmperf.cli import main
from pytest_llmperf.history import location, record
from pytest_llmperf.history.store import HistoryStore
from tests.unit.history.builders import DOCUMENT

TEST = "suites/test_cpu.py::test_a"
TPOTS = [0.0100, 0.0102, 0.0099, 0.0101, 0.0098, 0.0100, 0.0125, 0.0126, 0.0124]


def document(index: int, tpot: float, verdict: str = "pass") -> dict:
    out = copy.deepcopy(DOCUMENT)
    out["datetime"] = f"2026-11-{index + 1:02d}T03:00:00+00:00"
    out["commit_info"]["id"] = "aaaaaaaaaaaa" if index < 6 else "bbbbbbbbbbbb"
    out["llmperf"]["fingerprint"]["vllm"] = "0.32.0" if index < 6 else "0.33.0"
    result = out["llmperf"]["results"][0]
    result["verdict"] = verdict
    result["gate"] = {"tolerance": 0.1, "metrics": ["tpot_s.p50"]}
    result["metrics"]["tpot_s.p50"]["value"] = tpot
    return out


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "history.sqlite"
    store = HistoryStore.open(location.resolve(str(path), tmp_path))
    for index, tpot in enumerate(TPOTS):
        store.record(record.from_document(document(index, tpot), environ={}))
    store.record(record.from_document(document(9, 0.05, "CLIENT LIMITED"), environ={}))
    return path


def test_the_table_marks_the_change_and_what_changed(store_path, capsys):
    assert main(["history", TEST, "--history", str(store_path), "--baselines", "none"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"{TEST}  tpot_s.p50  (lower is better; a change counts beyond x1.1)")
    assert lines[1].startswith("hardware cpu: AMD EPYC, 2 cores (cpu-") and lines[1].endswith(
        "| engine tiny-llama | workload a x48")
    assert lines[2:4] == [
        "run  date        commit      vllm      value  verdict         change",
        "---  ----------  ----------  ------  -------  --------------  " + "-" * 93]
    assert lines[9] == "  6  2026-11-06  aaaaaaaaaa  0.32.0  10.0 ms  pass"
    assert lines[10] == ("  7  2026-11-07  bbbbbbbbbb  0.33.0  12.5 ms  pass            >> 10.0 "
                         "ms -> 12.5 ms (+25.0%, worse); commit aaaaaaaaaa -> bbbbbbbbbb, vllm "
                         "0.32.0 -> 0.33.0")
    assert lines[13] == " 10  2026-11-10  bbbbbbbbbb  0.33.0  50.0 ms  CLIENT LIMITED  not a point"
    assert lines[14] == "1 change(s) in 9 points (10 runs)"


def test_the_list_of_tests_and_bad_names(store_path, capsys):
    assert main(["history", "--history", str(store_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"    10  {TEST}", f"1 tests in {store_path}",
        f"open: {TEST} tpot_s.p50 +25.0% since run 7 (2026-11-07, commit bbbbbbbbbb), 3 nights"]
    assert main(["history", "nothing_like_it", "--history", str(store_path)]) == 2
    assert capsys.readouterr().err == ("llmperf: error: 'nothing_like_it' names no test in the "
                                       "store; run `llmperf history` for the list\n")
    assert main(["history", "--history", str(store_path.parent / "none.sqlite")]) == 2
    assert capsys.readouterr().err == (
        f"llmperf: error: --history {store_path.parent / 'none.sqlite'}: no store here yet; a "
        "pytest run with pytest-llmperf makes it, or give another with --history PATH|URL\n")

