"""Sweeps and the capacity search, against a fake engine whose knee is known in closed form."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import pytest

from pytest_llmperf.client.patterns import Concurrency, Ramp, Rate
from pytest_llmperf.metrics.compute import RunMetrics
from pytest_llmperf.verdict.gate import SLO, UnknownMetricError
from pytest_llmperf.workloads.loads import concurrency_workload, offered_rate, rate_workload
from pytest_llmperf.workloads.slo_check import KEEP_UP, achieved_rate, judge_rate
from pytest_llmperf.workloads.sweeps import Sweep, SweepPoint, find_capacity, sweep
from pytest_llmperf.workloads.workload import Workload
from tests.unit.workloads.builders import dist, run_metrics

BASE = Workload.fixed(input_tokens=128, output_tokens=64, num_requests=200, rate=1.0, seed=3)


@dataclass
class FakeEngine:
    """An M/M/1-like engine: serves at most `capacity` req/s; TTFT p99 = 0.1 / (1 - rho).

    `latency_blind` keeps the latencies at their unloaded values whatever the load: an engine
    whose percentiles look fine while it falls behind (what the keep-up check must catch).
    Completions span (n - 1) / min(offered, capacity), after the fastest request's latency.
    """

    capacity: float = 20.0
    latency_blind: bool = False
    failed: int = 0
    calls: list[Workload] = field(default_factory=list)

    def __call__(self, workload: Workload) -> RunMetrics:
        self.calls.append(workload)
        n = workload.num_requests
        pattern = workload.pattern
        load = pattern.requests_per_s if isinstance(pattern, Rate) else pattern.max_concurrency
        rho = 0.0 if self.latency_blind else min(load / self.capacity, 0.999)
        ttft = 0.1 / (1 - rho)
        tpot = 0.02 / (1 - rho)
        e2el = ttft + 63 * tpot
        window = (n - 1) / min(offered_rate(workload), self.capacity)
        return run_metrics(ttft=dist(ttft / 2, ttft), tpot=dist(tpot / 2, tpot),
                           e2el=dist(e2el), duration_s=window + e2el,
                           completed=n - self.failed, failed=self.failed)


# --- sweep --------------------------------------------------------------------------------

def test_rate_sweep_measures_each_rate_in_the_given_order_keeping_burstiness_and_cap():
    base = Workload.fixed(input_tokens=128, output_tokens=64, num_requests=50, rate=1.0,
                          burstiness=0.5, concurrency=16, name="chat")
    engine = FakeEngine()
    result = sweep(engine, base, rates=[1, 4, 2])
    assert [(p.load, p.kind) for p in result.points] == [
        (1.0, "rate"), (4.0, "rate"), (2.0, "rate")
    ]
    assert [w.name for w in engine.calls] == ["chat-rate1", "chat-rate4", "chat-rate2"]
    assert [w.pattern for w in engine.calls] == [
        Rate(requests_per_s=r, burstiness=0.5, max_concurrency=16) for r in (1, 4, 2)
    ]
    # Everything but the pattern and the name is the base's.
    assert {(w.num_requests, w.seed, w.source) for w in engine.calls} == {
        (50, base.seed, base.source)
    }


def test_concurrency_sweep_is_closed_loop():
    engine = FakeEngine()
    result = sweep(engine, BASE, concurrencies=[1, 8])
    assert [(p.load, p.kind) for p in result.points] == [(1.0, "concurrency"), (8.0, "concurrency")]
    assert [w.pattern for w in engine.calls] == [Concurrency(max_concurrency=c) for c in (1, 8)]
    assert [w.name for w in engine.calls] == [f"{BASE.name}-c1", f"{BASE.name}-c8"]


@pytest.mark.parametrize("kwargs", [{}, {"rates": [1.0], "concurrencies": [1]}])
def test_sweep_needs_exactly_one_kind_of_load(kwargs):
    with pytest.raises(ValueError, match=r"^sweep needs exactly one of rates=\[...\] "
                                         r"\(requests/s\) or concurrencies=\[...\]$"):
        sweep(FakeEngine(), BASE, **kwargs)


def test_empty_sweep_is_an_error():
    with pytest.raises(ValueError, match="^sweep needs at least one load; got an empty list$"):
        sweep(FakeEngine(), BASE, rates=[])


def test_a_bad_load_fails_before_any_run():
    engine = FakeEngine()
    with pytest.raises(ValueError, match="Rate.requests_per_s must be a number > 0"):
        sweep(engine, BASE, rates=[1.0, -2.0])
    with pytest.raises(ValueError, match="Concurrency.max_concurrency must be an int >= 1"):
        sweep(engine, BASE, concurrencies=[4, 0])
    assert engine.calls == []


def two_points() -> Sweep:
    # TTFT 100/200 ms, TPOT 20/40 ms, 1000 and 2500 out tok/s.
    slow = run_metrics(ttft=dist(0.05, 0.1), tpot=dist(0.01, 0.02), e2el=dist(1.0),
                       duration_s=10.0, completed=100, output_tokens=10_000)
    fast = run_metrics(ttft=dist(0.1, 0.2), tpot=dist(0.02, 0.04), e2el=dist(2.0),
                       duration_s=10.0, completed=250, output_tokens=25_000)
    return Sweep([SweepPoint(2.0, "rate", slow), SweepPoint(16.0, "rate", fast)])


def test_table_has_one_aligned_line_per_point_latencies_in_ms():
    assert two_points().table() == [
        "    load    out tok/s  TTFT p50 ms  TTFT p99 ms  TPOT p50 ms  TPOT p99 ms",
        " 2 req/s       1000.0         50.0        100.0         10.0         20.0",
        "16 req/s       2500.0        100.0        200.0         20.0         40.0",
    ]


def test_table_labels_concurrency_points():
    point = two_points().points[0]
    lines = Sweep([SweepPoint(8.0, "concurrency", point.metrics)]).table()
    assert lines[1].startswith(" c=8       1000.0")


def test_curve_is_throughput_against_median_tpot_by_default():
    assert two_points().curve() == [(1000.0, 0.01), (2500.0, 0.02)]
    assert two_points().curve(x="load", y="ttft_s.p99") == [(2.0, 0.1), (16.0, 0.2)]
    with pytest.raises(KeyError, match="unknown metric 'ttft.p99'"):
        two_points().curve(y="ttft.p99")


# --- workloads and rates -------------------------------------------------------------------

def test_rate_workload_from_a_ramp_keeps_the_cap_and_from_concurrency_is_plain_poisson():
    ramp = replace(BASE, pattern=Ramp(start_rps=1, end_rps=4, max_concurrency=3))
    assert rate_workload(ramp, 2.5).pattern == Rate(requests_per_s=2.5, max_concurrency=3)
    closed = Workload.fixed(input_tokens=8, output_tokens=8, num_requests=5, concurrency=2,
                            name="w")
    workload = rate_workload(closed, 2.5)
    assert workload.pattern == Rate(requests_per_s=2.5) and workload.name == "w-rate2.5"
    assert concurrency_workload(closed, 6).pattern == Concurrency(max_concurrency=6)


def test_offered_rate_is_the_seeded_schedule_not_the_nominal_rate():
    workload = rate_workload(BASE, 10.0)
    offsets = workload.pattern.arrival_offsets(200, BASE.seed)
    assert offered_rate(workload) == pytest.approx(199 / offsets[-1])
    assert offered_rate(workload) != pytest.approx(10.0, rel=1e-3)
    one = rate_workload(Workload.fixed(input_tokens=8, output_tokens=8, num_requests=1,
                                       rate=1.0), 10.0)
    assert math.isnan(offered_rate(one))


def test_achieved_rate_leaves_out_the_drain_tail():
    # 11 completions, first send at 0, last completion at 6 s, fastest request 1 s: the 10
    # completion intervals fit in at most 6 - 1 = 5 s, so at least 2 req/s.
    metrics = run_metrics(ttft=dist(0.1), tpot=dist(0.01), e2el=dist(1.0, 1.5),
                          duration_s=6.0, completed=11)
    assert achieved_rate(metrics) == pytest.approx(2.0)
    assert metrics.request_throughput_req_s == pytest.approx(11 / 6)
    single = run_metrics(ttft=dist(0.1), tpot=dist(0.01), e2el=dist(1.0), duration_s=1.0,
                         completed=1)
    assert math.isnan(achieved_rate(single))


def test_a_short_run_that_keeps_up_is_not_read_as_saturated():
    # 20 requests at 10 req/s with 1 s latencies: requests/s over the whole run is ~7 (< 9),
    # only because the last request's second counts; the completion rate is the offered one.
    workload = rate_workload(Workload.fixed(input_tokens=8, output_tokens=8, num_requests=20,
                                            rate=1.0), 10.0)
    metrics = FakeEngine(capacity=1000.0)(workload)
    assert metrics.request_throughput_req_s < KEEP_UP * 10.0
    assert judge_rate(workload, metrics, SLO()).passed


# --- capacity ------------------------------------------------------------------------------

SLO_TTFT = SLO(max={"ttft_s.p99": 0.45})
# TTFT p99 = 0.1 / (1 - r / 20) <= 0.45  <=>  r <= 20 x (1 - 0.1 / 0.45) = 15.56 req/s.
KNEE = 20 * (1 - 0.1 / 0.45)


def test_capacity_is_found_within_rel_tol_of_the_knee():
    engine = FakeEngine(capacity=20.0)
    capacity = find_capacity(engine, BASE, SLO_TTFT, low=1.0, high=4.0)
    assert capacity.converged
    assert capacity.rate_req_s <= KNEE
    assert KNEE / capacity.rate_req_s - 1 < 0.1
    # low 1, high 4 -> 8 -> 16 (fails), then geometric midpoints 11.31, 13.45, 14.67.
    mid1 = math.sqrt(8 * 16)
    mid2 = math.sqrt(mid1 * 16)
    mid3 = math.sqrt(mid2 * 16)
    assert [run.load for run in capacity.runs] == [1, 4, 8, 16, mid1, mid2, mid3]
    assert [run.passed for run in capacity.runs] == [True, True, True, False, True, True, True]
    assert capacity.engine_runs == len(engine.calls) == 7
    assert capacity.limiting_metric == "ttft_s.p99"
    assert capacity.as_metric() == {"slo_capacity_req_s": capacity.rate_req_s}
    assert capacity.note == ("passes at 14.6721 req/s, fails at 16 req/s (9.1% apart, rel_tol "
                             "10.0%): ttft_s.p99 missed its target: 500.0 ms, target <= 450.0 ms")


def test_runs_are_bounded_by_max_runs_and_an_unfinished_search_says_so():
    engine = FakeEngine(capacity=20.0)
    capacity = find_capacity(engine, BASE, SLO_TTFT, low=1.0, high=4.0, rel_tol=0.01,
                             max_runs=5)
    assert capacity.engine_runs == len(engine.calls) == 5
    assert not capacity.converged
    assert capacity.rate_req_s == pytest.approx(11.3137, rel=1e-4)
    assert capacity.note.startswith("not converged after 5 runs (raise max_runs): passes at "
                                    "11.3137 req/s, fails at 16 req/s (41.4% apart")


def test_bracket_that_never_fails_within_max_runs():
    engine = FakeEngine(capacity=1000.0)
    capacity = find_capacity(engine, BASE, SLO_TTFT, low=1.0, high=2.0, max_runs=3)
    assert [run.load for run in capacity.runs] == [1.0, 2.0, 4.0]
    assert capacity.rate_req_s == 4.0 and not capacity.converged
    assert capacity.limiting_metric is None
    assert capacity.note == "still within the SLO at 4 req/s after 3 runs; raise `high` or max_runs"


def test_when_even_low_fails_capacity_is_zero_with_a_clear_note():
    engine = FakeEngine(capacity=20.0)
    capacity = find_capacity(engine, BASE, SLO(max={"ttft_s.p99": 0.05}), low=1.0, high=8.0)
    assert capacity.rate_req_s == 0.0 and not capacity.converged
    assert capacity.engine_runs == 1 and capacity.limiting_metric == "ttft_s.p99"
    assert capacity.as_metric() == {"slo_capacity_req_s": 0.0}
    assert capacity.note == (
        "no capacity: even the lowest rate 1 req/s missed: ttft_s.p99 missed its target: "
        "105.3 ms, target <= 50.0 ms; lower `low`"
    )


def test_saturation_is_caught_even_when_latency_percentiles_look_fine():
    # Latencies never move, but the engine completes at most 10 req/s: offered more than
    # 10 / 0.9 = 11.1 req/s, its queue grows without bound. The seeded schedule of BASE offers a
    # fixed fraction of the nominal rate (same normalized gaps at every rate), and the search
    # is in nominal rates, so the limit in nominal terms is 11.1 / that fraction.
    engine = FakeEngine(capacity=10.0, latency_blind=True)
    capacity = find_capacity(engine, BASE, SLO_TTFT, low=2.0, high=8.0)
    fraction = offered_rate(rate_workload(BASE, 1.0))
    limit = 10.0 / KEEP_UP / fraction
    assert capacity.converged and capacity.rate_req_s <= limit
    assert limit / capacity.rate_req_s - 1 < 0.1
    assert capacity.limiting_metric == "request_throughput_req_s"
    failing = next(run for run in capacity.runs if not run.passed)
    offered = offered_rate(rate_workload(BASE, failing.load))
    assert failing.offered_req_s == offered
    assert failing.reason == (f"saturated: completed 10.00 req/s < 0.9 x offered "
                              f"{offered:.2f} req/s")


def test_failed_requests_fail_a_rate_first():
    workload = rate_workload(BASE, 2.0)
    run = judge_rate(workload, FakeEngine(failed=4)(workload), SLO(max={"ttft_s.p99": 0.01}))
    assert not run.passed and run.limiting_metric == "error_rate"
    assert run.reason == ("4 requests failed (error rate 2.0%); ttft_s.p99 missed its target: "
                          "111.1 ms, target <= 10.0 ms")


def test_client_lag_alone_does_not_fail_a_rate():
    # One lag spike (p99 38 ms) in a run that kept up: a note under the summary, not a failure.
    workload = rate_workload(BASE, 2.0)
    spiky = replace(FakeEngine()(workload), queue_s=dist(0.001, 0.0384))
    assert judge_rate(workload, spiky, SLO_TTFT).passed


def test_a_passing_rate_says_so():
    workload = rate_workload(BASE, 2.0)
    run = judge_rate(workload, FakeEngine()(workload), SLO_TTFT)
    assert run.passed and run.limiting_metric is None and run.reason == "met every target"


def test_a_typo_in_the_slo_fails_before_any_run():
    engine = FakeEngine()
    with pytest.raises(UnknownMetricError, match="did you mean 'ttft_s.p99'"):
        find_capacity(engine, BASE, SLO(max={"ttft_s.p9": 1.0}), low=1.0, high=2.0)
    assert engine.calls == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"low": 2.0, "high": 1.0}, "find_capacity needs 0 < low < high (finite), got low=2.0, "
                                    "high=1.0"),
        ({"low": 0.0, "high": 1.0}, "find_capacity needs 0 < low < high (finite), got low=0.0, "
                                    "high=1.0"),
        ({"low": 1.0, "high": 2.0, "rel_tol": 0.0}, "find_capacity: rel_tol must be > 0, got 0.0"),
        ({"low": 1.0, "high": 2.0, "max_runs": 1},
         "find_capacity: max_runs must be >= 2 (low and high), got 1"),
    ],
)
def test_bad_search_bounds(kwargs, message):
    with pytest.raises(ValueError) as excinfo:
        find_capacity(FakeEngine(), BASE, SLO_TTFT, **kwargs)
    assert str(excinfo.value) == message
