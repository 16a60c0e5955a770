"""The MLPerf Server peak search (workloads/peak_qps.py) against a server whose capacity is known:
one queue that serves a request in SERVICE_S, fed Poisson arrivals at the target QPS, each run
judged by the real judge_server. The true peak is found by scanning every rate; the search must
land within one of its steps below it, in a handful of runs, from any start."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.workloads.peak_qps import find_peak_qps
from pytest_llmperf.workloads.scenarios import ServerScenario, judge_server

# 20 requests/s at most: above that the queue grows without bound, but over a run of MLPerf's
# 459 queries it passes the 2 s TTFT limit only from 22.5 QPS on (the scan finds 22.25).
SERVICE_S = 0.05
TOKENS = 8


def server_run(qps: float, seed: int = 7):
    """A Server run at `qps` against the one-queue server: records as the client takes them."""
    scenario = ServerScenario.for_model("llama2-70b", qps, min_duration_s=10.0, min_queries=459)
    rng = np.random.default_rng(seed)
    count = max(scenario.min_queries, int(np.ceil(scenario.min_duration_s * qps)) + 1)
    arrivals = np.cumsum(rng.exponential(1.0 / qps, count))
    records, free_at = [], 0.0
    for index, arrival in enumerate(arrivals):
        start = max(arrival, free_at)
        free_at = start + SERVICE_S
        step = SERVICE_S / TOKENS
        records.append(RequestRecord(
            index=index, expected_prompt_tokens=16, expected_output_tokens=TOKENS,
            scheduled_s=arrival, sent_s=arrival,
            chunk_times_s=[start + step * (k + 1) for k in range(TOKENS)],
            chunk_tokens=[1] * TOKENS, usage_prompt_tokens=16, usage_output_tokens=TOKENS))
    return judge_server(scenario, compute_metrics(records), records=records)


def true_peak() -> float:
    """The highest VALID rate on a grid of 0.25 QPS: what the search must approach."""
    valid = [qps for qps in np.arange(1.0, 30.0, 0.25) if server_run(float(qps)).valid]
    return max(valid)


@pytest.fixture(scope="module")
def peak() -> float:
    found = true_peak()
    assert 16.0 < found < 24.0  # between the starts below it and the starts above it
    return found


@pytest.mark.parametrize("start", [4.0, 10.0, 16.0, 24.0, 40.0])
def test_the_search_finds_the_peak_within_one_step_from_any_start(peak, start):
    ran: list[float] = []

    def run_at(qps):
        ran.append(qps)
        return server_run(qps)

    found = find_peak_qps(run_at, start=start, high=max(start, 30.0), rel_tol=0.3, max_runs=5)
    assert found.found, found.note
    assert peak / 1.3 <= found.qps <= peak, (found.qps, peak, found.table())
    assert len(ran) <= 5 and [run.qps for run in found.runs] == ran
    assert server_run(found.qps).valid


def test_a_start_at_the_most_offered_that_holds_is_one_run():
    found = find_peak_qps(server_run, start=8.0, high=8.0)
    assert (found.qps, len(found.runs)) == (8.0, 1)
    assert found.note == "VALID at 8 QPS (the most offered, 8) after 1 runs"


def test_no_valid_rate_is_a_finding_naming_the_last_reason():
    def never(qps):
        return server_run(qps * 100)  # 100 times over the capacity

    found = find_peak_qps(never, start=10.0, high=40.0, low=4.0, max_runs=8)
    assert not found.found and found.qps == 0.0
    assert [round(run.qps, 2) for run in found.runs] == [10.0, 7.0, 4.9]
    assert found.note.startswith("no VALID rate from 10 QPS down to 4.9: none was; TTFT p99 ")


def test_the_table_shows_each_run_and_why_it_was_invalid():
    found = find_peak_qps(server_run, start=24.0, high=24.0, max_runs=2)
    first, second = found.table()
    assert first.startswith("      24 QPS  INVALID  (TTFT p99 ")
    assert second.strip().startswith("16.8 QPS  ")


@pytest.mark.parametrize("kwargs, message", [
    ({"start": 50.0, "high": 40.0},
     "find_peak_qps: need 0 < low <= start <= high, got low=1.0, start=50.0, high=40.0; start "
     "between the two bounds"),
    ({"start": 10.0, "high": 40.0, "max_runs": 0},
     "find_peak_qps: rel_tol must be > 0 and max_runs >= 1, got rel_tol=0.3, max_runs=0"),
])
def test_bounds_that_cannot_hold_are_one_line(kwargs, message):
    with pytest.raises(InputError) as raised:
        find_peak_qps(server_run, **kwargs)
    assert str(raised.value) == message
