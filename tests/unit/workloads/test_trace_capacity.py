"""A trace replay's capacity: the highest speedup that meets the SLO (sweeps.find_capacity on a
Workload.trace), against a fake engine whose knee is known in closed form."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace

import pytest

from pytest_llmperf.client.patterns import Rate, Trace
from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics import registry
from pytest_llmperf.metrics.compute import RunMetrics
from pytest_llmperf.verdict.gate import SLO
from pytest_llmperf.workloads.datasets import DatasetError
from pytest_llmperf.workloads.loads import knob_of, offered_rate, rate_workload, speedup_workload
from pytest_llmperf.workloads.slo_check import KEEP_UP
from pytest_llmperf.workloads.sweeps import find_capacity
from pytest_llmperf.workloads.workload import Workload
from tests.unit.workloads.builders import dist, run_metrics

# 41 requests 0.5 s apart: 2 req/s at the trace's own pace, 2 x speedup replayed faster.
ROWS = [{"timestamp": i * 500, "input_length": 64, "output_length": 8, "hash_ids": [i % 3]}
        for i in range(41)]
SLO_TTFT = SLO(max={"ttft_s.p99": 0.45})


@pytest.fixture
def trace(tmp_path) -> Workload:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return Workload.trace(path, format="mooncake", seed=3)


@dataclass
class FakeEngine:
    """Serves at most `capacity` req/s; TTFT p99 = 0.1 / (1 - rho), rho = offered / capacity
    (`latency_blind`: latencies stay unloaded while it falls behind)."""

    capacity: float = 20.0
    latency_blind: bool = False
    calls: list[Workload] = field(default_factory=list)

    def __call__(self, workload: Workload) -> RunMetrics:
        self.calls.append(workload)
        n, offered = workload.num_requests, offered_rate(workload)
        rho = 0.0 if self.latency_blind else min(offered / self.capacity, 0.999)
        ttft, tpot = 0.1 / (1 - rho), 0.02 / (1 - rho)
        e2el = ttft + 7 * tpot
        window = (n - 1) / min(offered, self.capacity)
        return run_metrics(ttft=dist(ttft / 2, ttft), tpot=dist(tpot / 2, tpot),
                           e2el=dist(e2el), duration_s=window + e2el, completed=n)


def test_the_knob_of_a_trace_is_its_speedup_and_a_probe_replays_the_same_rows_faster(trace):
    capped = replace(trace, pattern=Trace(offsets_s=trace.pattern.offsets_s, max_concurrency=4),
                     warmup_requests=2)
    faster = speedup_workload(capped, 4.0)
    assert knob_of(trace) == "speedup" and knob_of(rate_workload(trace, 2.0)) == "rate"
    assert faster.name == "trace-speedup4"
    assert faster.pattern == Trace(offsets_s=tuple(i * 0.125 for i in range(41)),
                                   max_concurrency=4)
    assert faster.source.rows == trace.source.rows and faster.source.speedup == 4.0
    assert (faster.seed, faster.warmup_requests, faster.num_requests) == (3, 2, 41)
    assert faster.to_dict()["source"]["speedup"] == 4.0
    assert offered_rate(faster) == pytest.approx(8.0)


def test_a_trace_capacity_is_the_highest_speedup_within_the_slo(trace):
    # TTFT p99 = 0.1 / (1 - 2s / 20) <= 0.45  <=>  s <= 10 x (1 - 0.1 / 0.45) = 7.78x.
    knee = 10 * (1 - 0.1 / 0.45)
    engine = FakeEngine(capacity=20.0)
    capacity = find_capacity(engine, trace, SLO_TTFT, low=1.0, high=2.0)
    mid1 = math.sqrt(4 * 8)
    mid2 = math.sqrt(mid1 * 8)
    mid3 = math.sqrt(mid2 * 8)
    assert [run.load for run in capacity.runs] == [1, 2, 4, 8, mid1, mid2, mid3]
    assert [run.knob for run in capacity.runs] == ["speedup"] * 7
    assert [run.offered_req_s for run in capacity.runs] == pytest.approx(
        [2 * run.load for run in capacity.runs])
    assert [w.name for w in engine.calls][:3] == ["trace-speedup1", "trace-speedup2",
                                                  "trace-speedup4"]
    assert all(isinstance(w.pattern, Trace) for w in engine.calls)
    assert capacity.converged and capacity.speedup == mid3 <= knee
    assert capacity.knob == "speedup" and capacity.limiting_metric == "ttft_s.p99"
    assert capacity.as_metric() == {"slo_capacity_speedup": mid3}
    assert capacity.note == ("passes at 7.33603x, fails at 8x (9.1% apart, rel_tol 10.0%): "
                             "ttft_s.p99 missed its target: 500.0 ms, target <= 450.0 ms")


def test_a_speedup_capacity_is_not_read_as_a_rate_nor_the_other_way(trace):
    found = find_capacity(FakeEngine(), trace, SLO_TTFT, low=1.0, high=2.0)
    with pytest.raises(AttributeError, match=r"^a trace replay's capacity is a speedup: read "
                                             r"capacity.speedup \(gated as "
                                             r"slo_capacity_speedup\)$"):
        found.rate_req_s  # noqa: B018
    poisson = find_capacity(FakeEngine(), rate_workload(trace, 1.0), SLO_TTFT, low=1.0,
                            high=2.0)
    assert poisson.knob == "rate" and poisson.as_metric() == {
        "slo_capacity_req_s": poisson.rate_req_s}
    assert rate_workload(trace, 1.0).pattern == Rate(requests_per_s=1.0)
    with pytest.raises(AttributeError, match=r"^this capacity is a rate: read "
                                             r"capacity.rate_req_s \(gated as "
                                             r"slo_capacity_req_s\)$"):
        poisson.speedup  # noqa: B018


def test_a_trace_the_engine_falls_behind_is_saturated_at_the_speedup_it_cannot_keep_up_with(
        trace):
    # Latencies never move, but at most 10 req/s finish: above 10 / 0.9 = 11.1 req/s offered
    # (5.56x of this 2 req/s trace) the queue grows without bound.
    engine = FakeEngine(capacity=10.0, latency_blind=True)
    capacity = find_capacity(engine, trace, SLO_TTFT, low=1.0, high=2.0)
    limit = 10.0 / KEEP_UP / 2.0
    assert capacity.converged and capacity.speedup <= limit
    assert limit / capacity.speedup - 1 < 0.1
    assert capacity.limiting_metric == "request_throughput_req_s"
    failing = next(run for run in capacity.runs if not run.passed)
    assert (failing.load, failing.reason) == (8.0, "saturated: completed 10.00 req/s < 0.9 x "
                                                   "offered 16.00 req/s")


def test_notes_of_a_speedup_search_name_speedups(trace):
    none = find_capacity(FakeEngine(), trace, SLO(max={"ttft_s.p99": 0.05}), low=1.0, high=2.0)
    assert none.value == 0.0 and none.as_metric() == {"slo_capacity_speedup": 0.0}
    assert none.note == ("no capacity: even the lowest speedup 1x missed: ttft_s.p99 missed its "
                         "target: 111.1 ms, target <= 50.0 ms; lower `low`")
    unbounded = find_capacity(FakeEngine(capacity=1e4), trace, SLO_TTFT, low=1.0, high=2.0,
                              max_runs=3)
    assert unbounded.note == ("still within the SLO at 4x after 3 runs; raise `high` or "
                              "max_runs")


def test_a_speedup_needs_a_trace_and_a_number_above_zero(trace):
    synthetic = Workload.fixed(input_tokens=8, output_tokens=8, num_requests=4, rate=1.0,
                               name="w")
    with pytest.raises(InputError, match=r"^speedup_workload: 'w' is no trace replay; a speedup "
                                         r"applies to Workload.trace\(...\)$"):
        speedup_workload(synthetic, 2.0)
    with pytest.raises(DatasetError, match=r"^speedup must be a finite number > 0, got inf$"):
        speedup_workload(trace, math.inf)


def test_the_speedup_metric_is_better_higher_and_reads_as_a_factor():
    assert registry.direction("slo_capacity_speedup") == "higher"
    assert registry.formatter("slo_capacity_speedup")(2.8284) == "2.83x"
