"""Repeats -> Estimate; every expected number is worked out in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_llmperf.metrics.stats import (
    NORMAL_MAD_SCALE,
    Estimate,
    combine_repeats,
    combine_runs,
    relative_spread,
)


def test_one_repeat_has_no_spread():
    assert combine_repeats([0.21]) == Estimate(0.21, 0.0, 1)


def test_median_and_scaled_mad():
    # median 0.20; |deviations| 0.02, 0.00, 0.01 -> MAD 0.01 -> spread 0.014826
    estimate = combine_repeats([0.18, 0.20, 0.21])
    assert estimate.value == pytest.approx(0.20)
    assert estimate.spread == pytest.approx(0.01 * NORMAL_MAD_SCALE)
    assert estimate.n == 3


def test_one_wild_repeat_moves_neither_value_nor_spread():
    # A preempted repeat (10.0) among 1 and 2: median 2, |deviations| 1, 0, 8 -> MAD 1.
    # The mean (4.33) and the standard deviation (4.93) would both be dragged to the outlier.
    estimate = combine_repeats([1.0, 2.0, 10.0])
    assert estimate.value == 2.0
    assert estimate.spread == pytest.approx(NORMAL_MAD_SCALE)


def test_two_repeats_spread_is_close_to_the_standard_deviation():
    # median 1.5, |deviations| 0.5, 0.5 -> MAD 0.5 -> 0.7413; sample std is 0.7071.
    estimate = combine_repeats([1.0, 2.0])
    assert estimate.value == 1.5
    assert estimate.spread == pytest.approx(0.5 * NORMAL_MAD_SCALE)
    assert estimate.spread == pytest.approx(1 / math.sqrt(2), rel=0.05)


def test_normal_data_spread_estimates_sigma():
    rng = np.random.default_rng(7)
    estimate = combine_repeats(rng.normal(100.0, 5.0, 20_000).tolist())
    assert estimate.value == pytest.approx(100.0, abs=0.2)
    assert estimate.spread == pytest.approx(5.0, rel=0.03)


def test_a_nan_repeat_makes_the_estimate_nan():
    estimate = combine_repeats([0.2, math.nan, 0.3])
    assert math.isnan(estimate.value) and math.isnan(estimate.spread)
    assert estimate.n == 3


def test_no_values_is_an_error():
    with pytest.raises(ValueError, match="^combine_repeats needs at least one value; got none$"):
        combine_repeats([])


def test_combine_runs_per_metric_and_sorted():
    runs = [
        {"ttft_s.p50": 0.20, "output_throughput_tok_s": 4300.0},
        {"ttft_s.p50": 0.22, "output_throughput_tok_s": 4200.0, "kv_cache_usage_max": 0.5},
        {"ttft_s.p50": 0.21, "output_throughput_tok_s": 4400.0},
    ]
    combined = combine_runs(runs)
    assert list(combined) == ["kv_cache_usage_max", "output_throughput_tok_s", "ttft_s.p50"]
    assert combined["ttft_s.p50"].value == pytest.approx(0.21)
    # |deviations| from 4300: 0, 100, 100 -> MAD 100
    assert combined["output_throughput_tok_s"].spread == pytest.approx(100 * NORMAL_MAD_SCALE)
    assert combined["kv_cache_usage_max"] == Estimate(0.5, 0.0, 1)


@pytest.mark.parametrize(
    ("estimate", "expected"),
    [
        (Estimate(200.0, 10.0, 3), 0.05),
        (Estimate(-200.0, 10.0, 3), 0.05),
        (Estimate(0.0, 0.0, 3), 0.0),
        (Estimate(0.0, 0.1, 3), math.inf),
    ],
)
def test_relative_spread(estimate, expected):
    assert relative_spread(estimate) == expected


def test_relative_spread_of_nan_is_nan():
    assert math.isnan(relative_spread(Estimate(math.nan, math.nan, 2)))
