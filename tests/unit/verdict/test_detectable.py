"""What a gated metric can detect (verdict/detectable.py): the formula against a seeded
simulation of the gate with known noise, and what it reads of a baseline entry."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.verdict import detectable
from pytest_llmperf.verdict.baselines import BaselineEntry
from pytest_llmperf.verdict.gate import check_metric

DRAWS = 200_000


def simulated(spread: float, n_baseline: int, n_now: int, alpha: float, power: float,
              seed: int, direction: str = "lower") -> float:
    """The smallest relative change for the worse (a rise where lower is better, a fall where
    higher is) that a one-sided gate on the change from the baseline, relative to it, its
    threshold the (1 - alpha) quantile of unchanged sessions, fails `power` of the time: each
    session's value the median of its runs, each run 1 + spread x a normal draw."""
    rng = np.random.default_rng(seed)
    base = 1 + spread * np.median(rng.standard_normal((DRAWS, n_baseline)), axis=1)
    now = 1 + spread * np.median(rng.standard_normal((DRAWS, n_now)), axis=1)
    sign = 1 if direction == "lower" else -1
    threshold = np.quantile(sign * (now - base) / base, 1 - alpha)
    low, high = 0.0, 1.0
    for _ in range(40):  # the same draws for every shift: caught is monotone in it
        shift = (low + high) / 2
        caught = np.mean(sign * ((1 + sign * shift) * now - base) / base > threshold)
        low, high = (shift, high) if caught < power else (low, shift)
    return high


@pytest.mark.parametrize(("spread", "n_baseline", "n_now", "alpha", "direction"), [
    (0.05, 1, 1, detectable.ALPHA, "lower"),  # one run a side, the gate's own 3 sigma
    (0.08, 5, 1, detectable.ALPHA, "lower"),  # a baseline from five nights of history
    (0.02, 3, 3, 0.01, "lower"),
    (0.10, 1, 1, 0.05, "lower"),
    (0.065, 1, 1, detectable.ALPHA, "higher"),  # a CPU throughput's prior: a fall
    (0.15, 9, 1, detectable.ALPHA, "higher"),
])
def test_detectable_change_is_within_20_percent_of_a_simulation(spread, n_baseline, n_now,
                                                                alpha, direction):
    found = detectable.detectable(spread, n_baseline=n_baseline, n_now=n_now, alpha=alpha,
                                  direction=direction)
    truth = simulated(spread, n_baseline, n_now, alpha, 0.8, seed=62, direction=direction)
    assert found == pytest.approx(truth, rel=0.20)


def test_more_history_lowers_what_a_test_needs_to_see():
    one, nine = (detectable.detectable(0.08, n_baseline=n) for n in (1, 9))
    assert nine < one * 0.8
    # One run a side at the gate's 3 sigma and 80% power: (3 + 0.84) x sqrt(2) x spread on
    # the log scale, up for lower-is-better, down for higher-is-better.
    assert one == pytest.approx(math.expm1((3 + 0.8416) * math.sqrt(2) * 0.08), rel=1e-3)
    assert detectable.detectable(0.08, direction="higher") == pytest.approx(
        -math.expm1(-(3 + 0.8416) * math.sqrt(2) * 0.08), rel=1e-3)


def test_median_variance_is_exact_for_one_run_and_pi_over_2n_for_many():
    assert detectable.median_variance(1) == 1
    assert detectable.median_variance(10_000) == pytest.approx(math.pi / 20_000, rel=1e-3)


def entry(spread: float, source: str | None = "prior", n: int = 1, direction: str = "lower",
          tolerance: float = 0.1) -> BaselineEntry:
    return BaselineEntry(value=100.0, spread=spread, direction=direction, tolerance=tolerance,
                         n=n, spread_source=source)


def test_of_entry_counts_history_runs_and_never_one_sessions_repeats():
    now = Estimate(100.0, 0.0, 1)
    assert detectable.of_entry(entry(8.0, "history", n=9), now) == pytest.approx(
        detectable.detectable(0.08, n_baseline=9))
    assert detectable.of_entry(entry(8.0, "repeats", n=9), now) == pytest.approx(
        detectable.detectable(0.08))


def test_of_entry_reads_a_noisier_session_as_the_gate_does():
    assert detectable.of_entry(entry(8.0), Estimate(100.0, 20.0, 3)) == pytest.approx(
        detectable.detectable(0.20))


def test_of_entry_without_a_source_adds_the_repeats_spreads_in_quadrature():
    found = detectable.of_entry(entry(3.0, None, n=3), Estimate(100.0, 4.0, 3))
    assert found == pytest.approx(math.expm1((3 + 0.8416) * 0.05), rel=1e-3)


def test_unmeasured_noise_has_no_number():
    assert detectable.of_entry(entry(0.0, None), Estimate(100.0, 0.0, 1)) is None
    assert detectable.of_entry(entry(0.0, "prior"), Estimate(100.0, 0.0, 1)) is None


def test_tolerance_change_is_the_factor_on_the_worse_side():
    assert detectable.tolerance_change(entry(1.0, tolerance=0.5)) == 0.5
    assert detectable.tolerance_change(entry(1.0, direction="higher", tolerance=0.5)) == \
        pytest.approx(1 / 3)


def test_blind_line_names_what_the_test_cannot_see():
    seen = {"ttft_s.p50": {"detectable": 0.27, "tolerance": 0.10},
            "tpot_s.p50": {"detectable": 0.08, "tolerance": 0.10}}
    assert detectable.blind_line(seen) == (
        "this test cannot see a 10% regression of ttft_s.p50; it sees 27% at a 0.135% "
        "false-alarm rate and 80% power: add requests, or write its baseline from more runs "
        "(--llmperf-from-history N)")
    seen["tpot_s.p50"]["detectable"] = 0.31
    assert detectable.blind_line(seen).startswith(
        "this test cannot see the regressions its tolerances allow: tpot_s.p50 10% (it sees "
        "31%), ttft_s.p50 10% (it sees 27%) at a 0.135% false-alarm rate")
    assert "at a 0.185% false-alarm rate" in detectable.blind_line(seen, 1 / 30 / 18)
    assert detectable.blind_line({"tpot_s.p50": {"detectable": 0.08, "tolerance": 0.1}}) is None


def test_of_report_and_worst_read_the_gate_verdicts():
    verdicts = [check_metric("ttft_s.p50", Estimate(100.0, 0.0, 1), entry(8.0)),
                check_metric("tpot_s.p50", Estimate(100.0, 0.0, 1), entry(0.0, None))]
    seen = detectable.of_report(verdicts)
    assert seen == {"ttft_s.p50": {"detectable": round(detectable.detectable(0.08), 4),
                                   "tolerance": 0.1}}
    assert detectable.worst(seen) == "54% ttft_s.p50"
    # At the false-alarm rate of a run's budget shared by 18 comparisons: less strict, less.
    assert detectable.of_report(verdicts, 1 / 30 / 18)["ttft_s.p50"]["detectable"] == \
        round(detectable.detectable(0.08, alpha=1 / 30 / 18), 4)
    assert detectable.worst({}) == "-"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"spread": -0.1}, "spread -0.1 must be a finite relative spread >= 0, e.g. 0.05"),
    ({"spread": 0.1, "n_baseline": 0},
     "n_baseline 0 must be a whole number of sessions >= 1"),
    ({"spread": 0.1, "alpha": 0.7},
     "false-alarm rate 0.7 must be between 0 and 0.5 (one-sided, per comparison), e.g. 0.001"),
    ({"spread": 0.1, "power": 1.0}, "power 1.0 must be at least 0.5 and below 1, e.g. 0.8"),
])
def test_bad_input_is_one_line_naming_the_fix(kwargs, message):
    with pytest.raises(InputError) as caught:
        detectable.detectable(**kwargs)
    assert str(caught.value) == message
