"""Paired A/B judging (pytest_llmperf/verdict/paired_ratios.py): order, ratios, the median's interval, verdicts."""

from __future__ import annotations

import math

import pytest

from pytest_llmperf.engines.overrides import parse_overrides, with_overrides
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.verdict.gate import IMPROVEMENT, INCONCLUSIVE, PASS, REGRESSION
from pytest_llmperf.verdict.paired_ratios import (
    PairedRatios,
    ab_entry,
    ab_line,
    abba_order,
    judge_pairs,
    median_interval,
    null_pairs,
    paired_ratios,
    pairs_to_settle,
)


def test_abba_order_alternates_which_side_goes_first():
    assert abba_order(1) == ["A", "B"]
    assert abba_order(3) == ["A", "B", "B", "A", "A", "B"]


@pytest.mark.parametrize(("n", "expected"), [
    (1, (5.0, 5.0, 0.0)),
    (4, (1.0, 4.0, 0.875)),  # 1 - 2/16: four values cannot reach 90%
    (6, (1.0, 6.0, 0.96875)),  # k = 2 would cover only 78%
    (8, (2.0, 7.0, 0.9296875)),  # 1 - 2 x 9/256
])
def test_median_interval_is_the_sign_tests_order_statistics(n, expected):
    values = [5.0] if n == 1 else [float(v) for v in range(n, 0, -1)]
    assert median_interval(values) == expected


def test_median_interval_of_nothing_is_nan():
    low, high, confidence = median_interval([])
    assert math.isnan(low) and math.isnan(high) and confidence == 0.0


def test_ratios_pair_the_nth_a_run_with_the_nth_b_run():
    a = [{"tpot_s.p50": 0.010}, {"tpot_s.p50": 0.020}]
    b = [{"tpot_s.p50": 0.012}, {"tpot_s.p50": 0.020}]
    ratios = paired_ratios(a, b, ["tpot_s.p50"])["tpot_s.p50"]
    assert ratios.ratios == pytest.approx((1.2, 1.0))


def test_a_zero_or_missing_side_gives_nan_for_that_pair():
    a = [{"x_tok_s": 0.0}, {"x_tok_s": 10.0}, {}]
    b = [{"x_tok_s": 5.0}, {"x_tok_s": 10.0}, {"x_tok_s": 1.0}]
    assert paired_ratios(a, b, ["x_tok_s"])["x_tok_s"].ratios[1] == 1.0
    ratios = paired_ratios(a, b, ["x_tok_s"])["x_tok_s"].ratios
    assert math.isnan(ratios[0]) and math.isnan(ratios[2])


def test_a_latency_20_percent_worse_in_every_pair_regresses_with_one_line():
    verdict = PairedRatios("tpot_s.p50", (1.18, 1.22, 1.21, 1.19)).judge(0.10)
    assert verdict.status == REGRESSION
    assert verdict.message == (
        "tpot_s.p50 regressed in A/B: B/A median 1.200 (88% interval 1.180-1.220 over 4 ABBA "
        "pairs), allowed <= 1.100 (lower is better; A/B tolerance 0.1)")
    assert verdict.failed


def test_a_throughput_falls_by_the_same_factor_rule():
    # 1 / 1.1 = 0.909: a 9.1% fall is the edge, an 8% fall passes, a 12% fall fails.
    assert PairedRatios("output_throughput_tok_s", (0.92,) * 4).judge(0.10).status == PASS
    verdict = PairedRatios("output_throughput_tok_s", (0.88,) * 4).judge(0.10)
    assert verdict.status == REGRESSION
    assert "allowed >= 0.909 (higher is better" in verdict.message


def test_one_odd_pair_cannot_make_a_regression():
    # The median is past the band, but one pair went the other way: the interval includes 1.
    verdict = PairedRatios("tpot_s.p50", (1.3, 1.25, 0.95, 1.2)).judge(0.10)
    assert verdict.status == PASS
    assert verdict.message == (
        "tpot_s.p50 no change detected in A/B: B/A median 1.225 (88% interval 0.950-1.300 over 4 "
        "ABBA pairs), allowed <= 1.100 (lower is better; A/B tolerance 0.1); about 5 pairs would "
        "likely settle it")


def test_an_improvement_whose_interval_holds_1_is_no_change_detected():
    # Three pairs near 1.16 and one below 1: the median is beyond the band, the interval holds 1.
    verdict = PairedRatios("output_throughput_tok_s", (0.98, 1.18, 1.16, 1.15)).judge(0.10)
    assert verdict.status == PASS
    assert verdict.message.startswith("output_throughput_tok_s no change detected in A/B: B/A "
                                      "median 1.155 (88% interval 0.980-1.180 over 4 ABBA pairs)")
    assert verdict.message.endswith("; about 5 pairs would likely settle it")


def test_pairs_too_noisy_for_the_tolerance_are_inconclusive_never_a_regression():
    # B = A on a 2-core VM, as measured: 7 of 8 pairs below 1, the sign test's interval leaves
    # 1 out, but the pairs spread so widely (0.32-2.33) that 10% cannot be resolved.
    ratios = (0.72, 0.87, 0.32, 0.93, 0.66, 0.96, 2.33, 0.43)
    verdict = PairedRatios("output_throughput_tok_s", ratios).judge(0.10)
    assert verdict.status == INCONCLUSIVE
    assert not verdict.failed
    assert verdict.message == (
        "output_throughput_tok_s inconclusive on this machine in A/B: B/A median 0.795 (93% "
        "interval 0.430-0.960 over 8 ABBA pairs), allowed >= 0.909 (higher is better; A/B "
        "tolerance 0.1): the pairs spread 32% (robust sd), so 8 pairs resolve only about 22%, "
        "wider than the tolerance 10%; about 37 pairs, or a quieter machine, would settle it")
    # The same spread around no change is no more a pass than a regression.
    centred = tuple(r / 0.795 for r in ratios)
    assert PairedRatios("output_throughput_tok_s", centred).judge(0.10).status == INCONCLUSIVE


def test_a_regression_beyond_the_band_whatever_the_noise_still_fails():
    # Noisy pairs (robust sd ~30%) whose whole interval lies past 1.1: resolved.
    verdict = PairedRatios("tpot_s.p50", (1.6, 2.4, 1.5, 3.1, 1.9, 2.0, 1.45, 2.8)).judge(0.10)
    assert verdict.status == REGRESSION
    # The same noise with the interval reaching under the band's edge: inconclusive.
    assert PairedRatios("tpot_s.p50", (1.0, 2.4, 1.05, 3.1, 1.9, 2.0, 1.45, 2.8)
                        ).judge(0.10).status == INCONCLUSIVE


def test_an_engine_whose_own_back_to_back_runs_disagree_makes_the_ab_inconclusive():
    # Tight pairs, but each side's consecutive runs differ by ~20%: the pairs' own spread
    # understates the noise they carry.
    paired = PairedRatios("tpot_s.p50", (1.01, 0.99, 1.0, 1.02), nulls=(1.2, 0.8, 1.25))
    verdict = paired.judge(0.10)
    assert verdict.status == INCONCLUSIVE
    assert verdict.message.endswith(
        ": one engine's own back-to-back runs spread 39% (robust sd), so 4 pairs resolve only "
        "about 41%, wider than the tolerance 10%; about 52 pairs, or a quieter machine, would "
        "settle it")
    assert PairedRatios("tpot_s.p50", (1.01, 0.99, 1.0, 1.02), nulls=(1.02, 0.97, 1.05)
                        ).judge(0.10).status == PASS


def test_null_pairs_are_each_sides_runs_measured_back_to_back_in_abba_order():
    # Order A0 B0 | B1 A1 | A2 B2 | B3 A3: back to back are B0-B1, A1-A2, B2-B3.
    a = [{"tpot_s.p50": v} for v in (1.0, 2.0, 4.0, 8.0)]
    b = [{"tpot_s.p50": v} for v in (10.0, 30.0, 90.0, 270.0)]
    assert null_pairs(a, b, "tpot_s.p50") == (3.0, 2.0, 3.0)
    # Not across the start of deferred confirm pairs (first_round=2: B1-B2... is A1-A2 here).
    assert null_pairs(a, b, "tpot_s.p50", first_round=2) == (3.0, 3.0)
    assert paired_ratios(a, b, ["tpot_s.p50"])["tpot_s.p50"].nulls == (3.0, 2.0, 3.0)
    ratios = paired_ratios(a, b, ["tpot_s.p50"])
    entry = ab_entry(ratios, 0.1, judge_pairs(ratios, 0.1))
    assert entry.to_plain()["metrics"]["tpot_s.p50"]["nulls"] == [3.0, 2.0, 3.0]  # judged again


def test_pairs_to_settle_grow_with_the_spread_and_say_nothing_without_one():
    assert pairs_to_settle((1.2, 1.2, 1.2)) is None  # no spread: nothing to extrapolate
    assert pairs_to_settle((1.2,)) is None
    assert pairs_to_settle((1.1, 1.3, 1.2, 1.25)) == 5  # at least one pair more than now
    assert pairs_to_settle((0.7, 1.6, 1.2, 1.3)) == 11


def test_a_clear_improvement_is_reported_not_failed():
    verdict = PairedRatios("ttft_s.p50", (0.7, 0.72, 0.71, 0.69)).judge(0.10)
    assert verdict.status == IMPROVEMENT
    assert not verdict.failed


def test_confirm_pairs_must_show_the_regression_by_themselves():
    """The calibration's false alarm: the first 4 pairs (chosen for confirming because they
    looked worse) pull the median of all 8 just past the band, while the confirm pairs alone sit
    inside it. Not a regression; the same pairs with a slower confirm round are."""
    first = (1.37, 1.17, 1.14, 1.02)
    verdict = PairedRatios("tpot_s.p50", first + (1.08, 0.88, 1.18, 1.01), first_round=4).judge(0.10)
    assert verdict.status == PASS
    assert verdict.message == (
        "tpot_s.p50 not confirmed in A/B: B/A median 1.110 (93% interval 1.010-1.180 over 8 ABBA "
        "pairs; the 4 confirm pairs alone 1.045), allowed <= 1.100 (lower is better; A/B "
        "tolerance 0.1)")
    slower = PairedRatios("tpot_s.p50", first + (1.18, 1.08, 1.22, 1.14), first_round=4)
    assert slower.judge(0.10).status == REGRESSION
    # Throughput: the confirm pairs' median must fall below 1 / 1.1 too.
    cleared = PairedRatios("output_throughput_tok_s", (0.8,) * 4 + (0.95, 0.8, 0.95, 0.95),
                           first_round=4)
    assert cleared.judge(0.10).status == PASS
    assert PairedRatios("output_throughput_tok_s", (0.8,) * 8, first_round=4).judge(
        0.10).status == REGRESSION


def test_confirm_pairs_that_measured_nothing_clear_nothing():
    verdict = PairedRatios("tpot_s.p50", (1.5,) * 4 + (math.nan,), first_round=4).judge(0.10)
    assert verdict.status == REGRESSION


def test_without_confirm_pairs_the_message_is_unchanged():
    verdict = PairedRatios("tpot_s.p50", (1.5,) * 4, first_round=4).judge(0.10)
    assert "confirm" not in verdict.message and verdict.status == REGRESSION


def test_a_metric_with_no_ratio_fails_and_says_why():
    verdict = PairedRatios("tpot_s.p50", (math.nan, math.nan)).judge(0.10)
    assert verdict.status == REGRESSION
    assert verdict.message == "tpot_s.p50 has no B/A ratio: one side measured nothing (2 pairs)"


def test_judge_pairs_gives_one_report_in_name_order():
    report = judge_pairs({
        "tpot_s.p50": PairedRatios("tpot_s.p50", (1.5,) * 4),
        "e2el_s.p50": PairedRatios("e2el_s.p50", (1.0,) * 4),
    }, 0.10)
    assert [v.name for v in report.verdicts] == ["e2el_s.p50", "tpot_s.p50"]
    assert report.failed and [v.name for v in report.failures] == ["tpot_s.p50"]


def test_side_b_adds_env_and_extra_args_to_the_tests_own():
    """'{"env": {...}}' must not drop the engine's own environment (on the CPU, the core it is
    pinned to); null removes a key; plain fields are replaced."""
    a = Engine(model="m", max_num_seqs=4, env={"BIND": "0", "OLD": "1"},
               extra_args={"seed": 1})
    b = with_overrides(a, parse_overrides('{"env": {"NEW": "2", "OLD": null}, "max_num_seqs": 8, '
                                  '"extra_args": {"max-num-batched-tokens": 512}}'))
    assert b.environment() == {"BIND": "0", "NEW": "2"}
    assert b.max_num_seqs == 8
    assert "--seed" in b.server_args() and "--max-num-batched-tokens" in b.server_args()
    assert a.environment() == {"BIND": "0", "OLD": "1"}  # side A untouched


def test_ab_line_gives_every_gated_metrics_median_ratio():
    ratios = {"ttft_s.p50": PairedRatios("ttft_s.p50", (1.0, 1.2, 1.1, math.nan)),
              "tpot_s.p50": PairedRatios("tpot_s.p50", (math.nan,) * 4)}
    entry = ab_entry(ratios, 0.1, judge_pairs(ratios, 0.1))
    assert ab_line(entry) == ("B/A over 4 ABBA pairs (tolerance 0.1): tpot_s.p50 -, "
                              "ttft_s.p50 1.100")
