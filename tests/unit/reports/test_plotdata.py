"""What the plots draw, read out of small hand-made run files: exact values, no drawing."""

from __future__ import annotations

import math

import pytest

from pytest_llmperf.reports.plotdata import (
    AbMetric,
    CapacitySearch,
    Distribution,
    History,
    HistoryPoint,
    Probe,
    Sweep,
    SweepPoint,
    ab_metrics,
    capacity_searches,
    distributions,
    gather,
    history,
    sweeps,
)
from tests.unit.reports.plot_documents import FILE, RATE, document, result


def test_sweep_points_are_grouped_by_test_and_engine_and_sorted_by_load():
    doc = document(
        result("test_sweep@w-rate8", RATE, output_throughput_tok_s=300.0),
        result("test_sweep@w-rate2", {**RATE, "requests_per_s": 2.0}),
        result("test_sweep@w-c4", {"type": "Concurrency", "max_concurrency": 4}, engine="other"),
        result("test_plain"),  # no "@": not a point
        result("test_ramp@w", {"type": "Ramp", "start_rps": 1.0, "end_rps": 4.0}),  # no one load
    )
    latencies = {"ttft_s.p50": 0.02, "ttft_s.p99": 0.05, "tpot_s.p50": 0.004, "tpot_s.p99": 0.008}
    assert sweeps(doc) == [Sweep(FILE + "test_sweep", {
        "tiny": [SweepPoint(2.0, "rate", 100.0, latencies),
                 SweepPoint(8.0, "rate", 300.0, latencies)],
        "other": [SweepPoint(4.0, "concurrency", 100.0, latencies)]})]
    assert [p.label for p in sweeps(doc)[0].lines["tiny"]] == ["2 req/s", "8 req/s"]


def test_a_capacity_search_is_its_probes_in_order_against_its_slo():
    slo = {"max": {"ttft_s.p90": 0.1}, "min": {}}
    probes = [(4.0, True, 0.02), (32.0, False, 0.4), (11.3137, True, 0.06)]
    doc = document(*[
        {**result(f"test_cap@p-rate{rate:g}", {**RATE, "requests_per_s": rate},
                  **{"ttft_s.p90": ttft}),
         "capacity": {"slo": slo, "passed": passed, "reason": "" if passed else "too slow"}}
        for rate, passed, ttft in probes])
    assert capacity_searches(doc) == [CapacitySearch(
        FILE + "test_cap", "tiny", {"ttft_s.p90": 0.1}, {},
        [Probe(4.0, True, {"ttft_s.p90": 0.02}), Probe(32.0, False, {"ttft_s.p90": 0.4},
                                                       "too slow"),
         Probe(11.3137, True, {"ttft_s.p90": 0.06})], capacity=11.3137)]
    assert sweeps(doc) == [], "a search's probes are not a sweep"


def test_distributions_come_from_the_benchmark_entries():
    stats = {"min": 0.01, "q1": 0.02, "median": 0.03, "q3": 0.04, "max": 0.09, "rounds": 20}
    doc = document(benchmarks=[
        {"group": FILE + "test_a", "extra_info": {"metric": "ttft_s"}, "stats": stats},
        {"group": FILE + "test_a", "extra_info": {"metric": "output_throughput_tok_s"},
         "stats": stats},  # not a latency
        {"group": FILE + "test_b", "extra_info": {"metric": "tpot_s"}, "stats": stats},
    ])
    assert distributions(doc) == {
        "ttft_s": [Distribution(FILE + "test_a", 0.01, 0.02, 0.03, 0.04, 0.09, 20)],
        "tpot_s": [Distribution(FILE + "test_b", 0.01, 0.02, 0.03, 0.04, 0.09, 20)],
    }


def test_ab_ratios_and_the_worst_each_direction_allows():
    entry = {"tolerance": 0.25, "pairs": 2, "metrics": {
        "tpot_s.p50": {"ratios": [1.1, 1.3], "median": 1.2, "interval": [1.1, 1.3],
                       "status": "pass"},
        "output_throughput_tok_s": {"ratios": [0.5, None], "median": 0.5,
                                    "interval": [None, None], "status": "regression"}}}
    doc = document(result("test_ab (A)"), {**result("test_ab (B)"), "ab": entry})
    [throughput, tpot] = ab_metrics(doc)
    assert tpot == AbMetric(FILE + "test_ab (B)", "tpot_s.p50", [1.1, 1.3], 1.2, (1.1, 1.3), 1.25,
                            "pass")
    assert throughput.ratios == [0.5] and throughput.worst_allowed == 1 / 1.25
    assert all(math.isnan(end) for end in throughput.interval)
    untoleranced = document({**result("test_ab (B)"), "ab": {**entry, "tolerance": None}})
    assert all(math.isnan(item.worst_allowed) for item in ab_metrics(untoleranced))


def test_history_with_the_band_of_the_baseline_file(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "test_x.toml").write_text(
        '[test_a.metrics."ttft_s.p50"]\nvalue = 0.02\nspread = 0.0\nn = 1\n'
        'direction = "lower"\ntolerance = 0.5\n')
    older = document(result("test_a", **{"ttft_s.p50": 0.021}), result("test_s@w-rate8", RATE),
                     started="2026-11-19T02:00:00+00:00", commit="c1")
    newer = document(result("test_a", **{"ttft_s.p50": 0.035}), result("side (A)"),
                     started="2026-11-20T02:00:00+00:00", commit="c2")
    found = {(h.test, h.metric): h for h in history([newer, older], tmp_path)}
    # The default gated metrics; no sweep point, no A/B side.
    assert sorted(found) == [(FILE + "test_a", name) for name in
                             ("output_throughput_tok_s", "tpot_s.p50", "ttft_s.p50")]
    # A tolerance of 0.5 is a factor of 1.5 both ways: up to 0.03, down to 0.02 / 1.5.
    ttft = found[(FILE + "test_a", "ttft_s.p50")]
    assert ttft == History(
        FILE + "test_a", "ttft_s.p50",
        [HistoryPoint("2026-11-19T02:00:00+00:00", 0.021, 0.0, "c1"),
         HistoryPoint("2026-11-20T02:00:00+00:00", 0.035, 0.0, "c2")],
        ttft.band, str(tmp_path / "cpu" / "test_x.toml"))
    assert (ttft.band.baseline, ttft.band.high) == (0.02, 0.03)
    assert ttft.band.low == pytest.approx(0.02 / 1.5, rel=1e-12)
    assert found[(FILE + "test_a", "tpot_s.p50")].band is None, "not in the baseline file"


def test_one_file_has_no_history_and_the_newest_gives_the_rest():
    old = document(result("test_s@w-rate8", RATE), started="2026-11-19T02:00:00+00:00")
    new = document(result("test_s@w-rate4", {**RATE, "requests_per_s": 4.0}))
    assert gather([new]).history == []
    both = gather([new, old])
    assert [p.load for p in both.sweeps[0].lines["tiny"]] == [4.0]
    assert {h.metric for h in both.history} == set(), "sweep points are never gated"
