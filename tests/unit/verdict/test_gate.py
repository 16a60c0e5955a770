"""The gate: band, direction, verdicts and their exact one-line messages."""

from __future__ import annotations

import math

import pytest

from pytest_llmperf.metrics.registry import direction as metric_direction
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.verdict.baselines import Baseline, BaselineEntry
from pytest_llmperf.verdict.gate import (
    DEFAULT_GATED,
    NOISE_K,
    SLO,
    GateReport,
    Origin,
    Target,
    UnknownMetricError,
    check_baseline,
    check_metric,
    check_names,
    check_target,
    check_targets,
    make_entries,
)

FILE = "baselines/cpu/test_cpu.toml"
NODEID = "suites/test_cpu.py::test_fixed[64]"
ORIGIN = Origin(f'{FILE} :: "test_fixed[64]"', NODEID)
WHERE = f'[{FILE} :: "test_fixed[64]"]'
UPDATE = f'pytest --llmperf-update-baselines "{NODEID}"'

TTFT = BaselineEntry(value=0.210, spread=0.0, direction="lower", tolerance=0.10, n=1)
TPUT = BaselineEntry(value=4300.0, spread=0.0, direction="higher", tolerance=0.10, n=1)


def test_regression_message():
    verdict = check_metric("ttft_s.p50", Estimate(0.312, 0.0, 1), TTFT, origin=ORIGIN)
    assert verdict.status == "regression" and verdict.failed
    assert verdict.message == (
        "ttft_s.p50 regressed: 312.0 ms vs baseline 210.0 ms (+48.6%, allowed +10.0%, lower is "
        f"better) {WHERE}; if this change is intended, update with: {UPDATE}"
    )
    assert verdict.delta_pct == pytest.approx(48.571, abs=1e-3)
    assert verdict.band == pytest.approx(0.021)
    assert verdict.band_pct == pytest.approx(10.0)


def test_throughput_regression_message_says_higher_is_better():
    verdict = check_metric("output_throughput_tok_s", 3800.0, TPUT, origin=ORIGIN)
    assert verdict.message == (
        "output_throughput_tok_s regressed: 3800 tok/s vs baseline 4300 tok/s (-11.6%, allowed "
        f"-9.1%, higher is better) {WHERE}; if this change is intended, update with: {UPDATE}"
    )


def test_improvement_beyond_the_band_is_a_stale_baseline_warning():
    verdict = check_metric("output_throughput_tok_s", 5100.0, TPUT, origin=ORIGIN)
    assert verdict.status == "improvement" and not verdict.failed
    assert verdict.message == (
        "output_throughput_tok_s improved beyond the band: 5100 tok/s vs baseline 4300 tok/s "
        f"(+18.6%, band +10.0%) {WHERE}: baseline is stale; refresh with: {UPDATE}"
    )


def test_pass_message():
    verdict = check_metric("ttft_s.p50", 0.215, TTFT, origin=ORIGIN)
    assert verdict.status == "pass" and not verdict.failed
    assert verdict.message == (
        f"ttft_s.p50 within the band: 215.0 ms vs baseline 210.0 ms (+2.4%, band +10.0%) {WHERE}"
    )


def test_without_origin_there_is_no_location_or_command():
    verdict = check_metric("ttft_s.p50", 0.312, TTFT)
    assert verdict.message == (
        "ttft_s.p50 regressed: 312.0 ms vs baseline 210.0 ms (+48.6%, allowed +10.0%, lower is "
        "better)"
    )


def test_saved_run_origin_has_no_update_command_and_no_stale_claim():
    origin = Origin('saved run "before-upgrade" :: "test_fixed[64]"')
    verdict = check_metric("output_throughput_tok_s", 5100.0, TPUT, origin=origin)
    assert verdict.message == (
        "output_throughput_tok_s improved beyond the band: 5100 tok/s vs baseline 4300 tok/s "
        '(+18.6%, band +10.0%) [saved run "before-upgrade" :: "test_fixed[64]"]'
    )


# Band = max(floor, K x sqrt(s_base^2 + s_now^2)), checked on both sides of both directions.
# Baseline 100, tolerance 10%: the floor is 10 upwards (110 is 1.1x the baseline) and
# 100 - 100/1.1 = 9.09 downwards (90.91 is 1/1.1x). Spreads 4 and 3 -> noise 5 -> K x 5 = 15
# wins over either floor.
DOWN = 100 - 100 / 1.1


@pytest.mark.parametrize(
    ("direction", "spreads", "value", "status", "band"),
    [
        ("lower", (0.0, 0.0), 109.9, "pass", 10.0),
        ("lower", (0.0, 0.0), 110.0, "pass", 10.0),  # exactly on the edge passes
        ("lower", (0.0, 0.0), 110.1, "regression", 10.0),
        ("lower", (0.0, 0.0), 90.95, "pass", DOWN),
        ("lower", (0.0, 0.0), 100 / 1.1, "pass", DOWN),
        ("lower", (0.0, 0.0), 90.8, "improvement", DOWN),
        ("lower", (4.0, 3.0), 114.9, "pass", 15.0),
        ("lower", (4.0, 3.0), 115.1, "regression", 15.0),
        ("lower", (4.0, 3.0), 85.1, "pass", 15.0),
        ("lower", (4.0, 3.0), 84.9, "improvement", 15.0),
        ("higher", (0.0, 0.0), 90.95, "pass", DOWN),
        ("higher", (0.0, 0.0), 100 / 1.1, "pass", DOWN),
        ("higher", (0.0, 0.0), 90.8, "regression", DOWN),
        ("higher", (0.0, 0.0), 109.9, "pass", 10.0),
        ("higher", (0.0, 0.0), 110.1, "improvement", 10.0),
        ("higher", (4.0, 3.0), 85.1, "pass", 15.0),
        ("higher", (4.0, 3.0), 84.9, "regression", 15.0),
        ("higher", (4.0, 3.0), 114.9, "pass", 15.0),
        ("higher", (4.0, 3.0), 115.1, "improvement", 15.0),
    ],
)
def test_band_on_both_sides_of_each_direction(direction, spreads, value, status, band):
    baseline = BaselineEntry(
        value=100.0, spread=spreads[0], direction=direction, tolerance=0.1, n=3
    )
    verdict = check_metric("metric", Estimate(value, spreads[1], 3), baseline)
    assert verdict.status == status
    assert verdict.band == pytest.approx(band)


def test_a_wide_tolerance_is_a_factor_either_way():
    # 1.5: a latency may grow to 2.5x, a throughput fall to 1/2.5 = 40%; both still can fail.
    latency = BaselineEntry(value=100.0, spread=0.0, direction="lower", tolerance=1.5, n=1)
    throughput = BaselineEntry(value=100.0, spread=0.0, direction="higher", tolerance=1.5, n=1)
    assert check_metric("metric", 250.0, latency).status == "pass"
    assert check_metric("metric", 251.0, latency).status == "regression"
    assert check_metric("metric", 40.0, throughput).status == "pass"
    assert check_metric("metric", 39.9, throughput).status == "regression"
    assert check_metric("metric", 39.9, latency).status == "improvement"
    assert check_metric("metric", 251.0, throughput).status == "improvement"


def test_noise_band_message_says_where_the_band_came_from():
    baseline = BaselineEntry(value=4300.0, spread=150.0, direction="higher", tolerance=0.1, n=3)
    # noise = sqrt(150^2 + 200^2) = 250 -> band 750 = 17.4% > 10%
    verdict = check_metric("output_throughput_tok_s", Estimate(3500.0, 200.0, 3), baseline)
    assert NOISE_K == 3.0
    assert verdict.message == (
        "output_throughput_tok_s regressed: 3500 tok/s vs baseline 4300 tok/s (-18.6%, allowed "
        "-17.4% = 3 x noise, higher is better)"
    )


def test_seconds_above_one_are_printed_in_seconds_in_both_numbers():
    baseline = BaselineEntry(value=0.9, spread=0.0, direction="lower", tolerance=0.1, n=1)
    verdict = check_metric("e2el_s.p50", 1.25, baseline)
    assert verdict.message.startswith("e2el_s.p50 regressed: 1.250 s vs baseline 0.900 s (+38.9%")


def test_zero_baseline_shows_absolute_change():
    baseline = BaselineEntry(value=0.0, spread=0.0, direction="lower", tolerance=0.1, n=1)
    verdict = check_metric("error_rate", 0.01, baseline)
    assert verdict.status == "regression"
    assert verdict.delta_pct == math.inf
    assert verdict.message == (
        "error_rate regressed: 0.01 vs baseline 0 (+0.01, allowed +0, lower is better)"
    )
    assert check_metric("error_rate", 0.0, baseline).status == "pass"


def test_nan_value_is_a_regression():
    verdict = check_metric("ttft_s.p50", Estimate(math.nan, math.nan, 3), TTFT, origin=ORIGIN)
    assert verdict.failed
    assert verdict.message == (
        f"ttft_s.p50 has no value (NaN) vs baseline 210.0 ms {WHERE}; if this change is "
        f"intended, update with: {UPDATE}"
    )


def test_check_baseline_gates_every_baseline_metric_and_reports_missing_ones():
    baseline = Baseline(
        {"ttft_s.p50": TTFT, "output_throughput_tok_s": TPUT, "tpot_s.p50": TTFT},
        path=FILE,
        test_id="test_fixed[64]",
    )
    current = {"ttft_s.p50": 0.312, "output_throughput_tok_s": 5100.0, "itl_s.p50": 1.0}
    report = check_baseline(current, baseline, NODEID)
    assert [v.name for v in report.verdicts] == [
        "output_throughput_tok_s", "tpot_s.p50", "ttft_s.p50"
    ]  # fmt: skip
    assert report.failed
    assert report.failure_text() == "\n".join([
        f"tpot_s.p50 not measured in this run (baseline 210.0 ms) {WHERE}; if this change is "
        f"intended, update with: {UPDATE}",
        "ttft_s.p50 regressed: 312.0 ms vs baseline 210.0 ms (+48.6%, allowed +10.0%, lower is "
        f"better) {WHERE}; if this change is intended, update with: {UPDATE}",
    ])  # fmt: skip
    assert report.warnings == [
        "output_throughput_tok_s improved beyond the band: 5100 tok/s vs baseline 4300 tok/s "
        f"(+18.6%, band +10.0%) {WHERE}: baseline is stale; refresh with: {UPDATE}"
    ]


def test_report_addition_and_empty_report():
    assert not GateReport().failed and GateReport().failure_text() == ""
    miss = check_targets({"ttft_s.p50": 0.2}, SLO(max={"ttft_s.p50": 0.1}))
    both = miss + GateReport((check_metric("ttft_s.p50", 0.215, TTFT),))
    assert both.failed and len(both.verdicts) == 2 and len(both.failures) == 1


# Hard targets


def test_target_miss_message():
    verdict = check_target(Target(metric="ttft_s.p50", max=0.1), 0.132)
    assert verdict.status == "missed" and verdict.failed
    assert verdict.message == "ttft_s.p50 missed its target: 132.0 ms, target <= 100.0 ms"
    assert verdict.delta_pct == pytest.approx(32.0)


def test_target_pass_message():
    verdict = check_target(Target(metric="output_throughput_tok_s", min=15000), 16200.0)
    assert verdict.status == "pass" and not verdict.failed
    assert verdict.message == (
        "output_throughput_tok_s met its target: 16200 tok/s, target >= 15000 tok/s"
    )


def test_target_bounds_are_inclusive_so_zero_errors_can_be_required():
    assert check_target(Target(metric="error_rate", max=0), 0.0).status == "pass"
    verdict = check_target(Target(metric="error_rate", max=0), 0.002)
    assert verdict.message == "error_rate missed its target: 0.002, target <= 0"


def test_target_with_both_bounds():
    target = Target(metric="kv_cache_usage_max", min=0.2, max=0.9)
    assert check_target(target, 0.5).message == (
        "kv_cache_usage_max met its target: 0.5, target >= 0.2 and <= 0.9"
    )
    assert check_target(target, 0.1).status == "missed"
    assert check_target(target, 0.95).status == "missed"


def test_target_uses_the_median_of_repeats_and_reports_nan_and_absence():
    target = Target(metric="ttft_s.p50", max=0.1)
    assert check_target(target, Estimate(0.09, 0.05, 3)).status == "pass"
    assert check_target(target, Estimate(math.nan, math.nan, 3)).message == (
        "ttft_s.p50 missed its target: no value (NaN), target <= 100.0 ms"
    )
    assert check_target(target, None).message == (
        "ttft_s.p50 missed its target: not measured in this run, target <= 100.0 ms"
    )


def test_slo_checks_every_target_in_name_order():
    slo = SLO(
        max={"ttft_s.p50": 0.1, "tpot_s.p50": 0.02}, min={"output_throughput_tok_s": 15000}
    )
    values = {"ttft_s.p50": 0.132, "tpot_s.p50": 0.012, "output_throughput_tok_s": 16000.0}
    report = check_targets(values, slo)
    assert [v.name for v in report.verdicts] == [
        "output_throughput_tok_s", "tpot_s.p50", "ttft_s.p50"
    ]  # fmt: skip
    assert report.failure_text() == "ttft_s.p50 missed its target: 132.0 ms, target <= 100.0 ms"


@pytest.mark.parametrize(
    ("make", "error", "text"),
    [
        (lambda: Target(metric="ttft_s.p50"), ValueError,
         "Target(metric='ttft_s.p50') needs max=, min= or both"),
        (lambda: SLO(max={"ttft_s.p50": "<0.1"}), TypeError,
         "Target(metric='ttft_s.p50'): max must be a number in the metric's unit, got '<0.1'"),
        (lambda: SLO(max={"x": 1}, min={"x": 2}), ValueError,
         "Target(metric='x'): min 2 is above max 1"),
        (lambda: Target("ttft_s.p50", 0.1), TypeError, None),  # keyword-only: no positional mixups
    ],
)  # fmt: skip
def test_bad_targets_fail_where_they_are_written(make, error, text):
    with pytest.raises(error) as info:
        make()
    if text is not None:
        assert str(info.value) == text


def test_unknown_slo_metric_is_one_line_with_a_suggestion():
    known = {"ttft_s.p50", "tpot_s.p50", "output_throughput_tok_s"}
    with pytest.raises(UnknownMetricError) as info:
        check_targets({}, SLO(max={"ttft.p50": 0.1}), known=known)
    assert str(info.value) == (
        "SLO names unknown metric 'ttft.p50' (did you mean 'ttft_s.p50'?); use the metric names "
        "of the report, e.g. 'ttft_s.p50' or 'output_throughput_tok_s'"
    )


def test_unknown_metric_names_with_a_predicate():
    with pytest.raises(UnknownMetricError) as info:
        check_names(["bogus", "ttft_s.p50", "nope"], lambda name: name.startswith("ttft_s"))
    assert str(info.value) == (
        "SLO names unknown metrics 'bogus', 'nope'; use the metric names of the report, e.g. "
        "'ttft_s.p50' or 'output_throughput_tok_s'"
    )
    check_names(["ttft_s.p99"], lambda name: True)  # all known: no error


def test_a_server_metric_this_server_did_not_report_says_so():
    with pytest.raises(UnknownMetricError) as info:
        check_names(["server:spec_decode_acceptance_rate"], lambda name: False, what="gate")
    assert str(info.value) == (
        "gate names unknown metric 'server:spec_decode_acceptance_rate' (this run's server did "
        "not report it: server metrics are read from vLLM's /metrics; spec_decode_* needs "
        "speculative decoding)")


def test_a_metric_this_run_lacks_says_why_in_its_definitions_words():
    # Metric.absent, as the engine's start says it for an endpoint's server: no metric's name
    # is special-cased in the gate.
    with pytest.raises(UnknownMetricError) as info:
        check_names(["ttfo_s.p50", "engine_start_s"], lambda name: False, what="gate")
    assert str(info.value) == (
        "gate names unknown metrics 'ttfo_s.p50' (the run sent no reasoning requests "
        "(Workload.reasoning, on an engine with a reasoning parser)), 'engine_start_s' (this "
        "session did not start the engine (--llmperf-endpoint): no start time)")


# Directions and new baseline entries


@pytest.mark.parametrize(
    ("name", "direction"),
    [
        ("ttft_s.p50", "lower"),
        ("tpot_s.p99", "lower"),
        ("error_rate", "lower"),
        ("failed", "lower"),
        ("output_throughput_tok_s", "higher"),
        ("request_throughput_req_s", "higher"),
        ("completed", "higher"),
        ("goodput_req_s", "higher"),
        ("server:prefix_cache_hit_rate", "higher"),
        ("server:kv_cache_usage_max", "lower"),
        ("server:preemptions", "lower"),
    ],
)
def test_metric_direction(name, direction):
    assert metric_direction(name) == direction


def test_make_entries_defaults():
    estimates = {
        "ttft_s.p50": Estimate(0.21, 0.004, 3),
        "output_throughput_tok_s": Estimate(4300.0, 50.0, 3),
        "ttft_s.p99": Estimate(0.9, 0.3, 3),  # not gated by default
        "tpot_s.p50": Estimate(math.nan, math.nan, 3),  # nothing to store
    }
    entries = make_entries(estimates)
    assert set(DEFAULT_GATED) >= set(entries)
    assert entries == {
        "output_throughput_tok_s": BaselineEntry(value=4300.0, spread=50.0, direction="higher",
                                                 tolerance=0.1, n=3),
        "ttft_s.p50": BaselineEntry(value=0.21, spread=0.004, direction="lower", tolerance=0.1,
                                    n=3),
    }


def test_make_entries_keeps_hand_edits_and_applies_overrides():
    previous = Baseline({
        "ttft_s.p50": BaselineEntry(value=0.2, spread=0.0, direction="lower", tolerance=0.25, n=1),
        "custom_metric": BaselineEntry(value=5.0, spread=0.0, direction="higher", tolerance=0.05,
                                       n=1),
    })  # fmt: skip
    estimates = {
        "ttft_s.p50": Estimate(0.21, 0.0, 1),
        "custom_metric": Estimate(6.0, 0.0, 1),
        "e2el_s.p50": Estimate(1.5, 0.0, 1),
    }
    entries = make_entries(
        estimates, previous=previous, overrides={"e2el_s.p50": 0.2}, directions={"x": "higher"}
    )
    assert entries == {
        "custom_metric": BaselineEntry(value=6.0, spread=0.0, direction="higher", tolerance=0.05,
                                       n=1),
        "e2el_s.p50": BaselineEntry(value=1.5, spread=0.0, direction="lower", tolerance=0.2, n=1),
        "ttft_s.p50": BaselineEntry(value=0.21, spread=0.0, direction="lower", tolerance=0.25, n=1),
    }


def test_capacity_and_offline_throughput_are_higher_is_better():
    assert metric_direction("slo_capacity_req_s") == "higher"
    assert metric_direction("offline_output_throughput_tok_s") == "higher"
    assert metric_direction("server:kv_cache_usage_max") == "lower"
