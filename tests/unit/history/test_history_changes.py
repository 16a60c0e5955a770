"""The change-point rule (history/changepoints.py), the trend gate's check (history/trend.py)
and baselines from history (history/from_history.py), on series whose noise is known."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from pytest_llmperf.history.changepoints import find_changes
from pytest_llmperf.history.from_history import baseline_estimates
from pytest_llmperf.history.record import MetricValue
from pytest_llmperf.history.series import what_changed
from pytest_llmperf.history.store import Point
from pytest_llmperf.history.trend import TrendCheck
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.verdict import references
from pytest_llmperf.verdict.status import Status

NOISE = [1.0, 1.02, 0.99, 1.01, 0.98, 1.0, 1.02, 0.99, 1.01, 0.98, 1.0, 1.01, 0.99, 1.0]


def series(rng, n: int, sigma: float) -> np.ndarray:
    return np.exp(rng.normal(0.0, sigma, n))


def test_a_step_is_found_at_its_first_run_once_two_runs_show_it():
    values = [2.0 * f for f in NOISE[:10]] + [2.5, 2.52]
    [change] = find_changes(values, 0.1)
    assert change.index == 10
    assert change.before == pytest.approx(2.0, rel=0.01)
    assert change.after == pytest.approx(2.51, rel=1e-3)  # the median of the logs
    assert change.ratio == pytest.approx(1.255, rel=0.01)
    assert find_changes(values[:11], 0.1) == []  # one run of a new level is not a change yet


def test_no_change_in_noise_and_one_wild_run_is_an_outlier():
    rng = np.random.default_rng(7)
    flat = [find_changes(series(rng, 25, 0.05), 0.1) for _ in range(100)]
    assert sum(bool(found) for found in flat) <= 2
    values = [2.0 * f for f in NOISE] + [4.2, 2.0, 2.02, 1.98]  # a 2.1x run among the others
    assert find_changes(values, 0.1) == []


def test_a_change_smaller_than_the_minimum_effect_is_none():
    values = [2.0 * f for f in NOISE[:10]] + [2.16, 2.17, 2.16, 2.15]  # +8%, far above noise
    assert find_changes(values, 0.1) == []
    assert [c.index for c in find_changes(values, 0.05)] == [10]


def test_a_throughput_fall_and_two_changes():
    values = [100 * f for f in NOISE[:8]] + [70 * f for f in NOISE[:6]] + [100 * f for f in
                                                                            NOISE[:4]]
    assert [(c.index, round(c.ratio, 1)) for c in find_changes(values, 0.1)] == [(8, 0.7),
                                                                                 (14, 1.4)]


def test_unusable_series_have_no_change():
    assert find_changes([1.0, 2.0, 2.0], 0.1) == []  # too short
    assert find_changes([1.0] * 5 + [math.nan] + [2.0] * 5, 0.1) == []


def point(run_id, tpot, commit="c1", verdict="pass", vllm="0.32.0") -> Point:
    return Point(run_id=run_id, run_uid=str(run_id), started_at=None, commit=commit,
                 verdict=verdict, series="s", family="cpu-x", engine_label="m",
                 workload_label="w", fingerprint={"vllm": vllm}, engine={"model": "m"}, gate={},
                 values={} if tpot is None else {"tpot_s.p50": MetricValue(tpot, 0.0, 1,
                                                                           "lower")})


def check(values, now_value, changed=None):
    """The trend check of `values` (runs 1, 2, ...) and this run's; `changed`: run -> fields
    of that run's point that differ."""
    changed = changed or {}
    points = [point(i + 1, v, **changed.get(i + 1, {})) for i, v in enumerate(values)]
    now = point(None, None, commit="c2", vllm="0.33.0")
    trend = TrendCheck(points, now, ".llmperf/history.sqlite", "s.py::test_a", window=3)
    return references.judge(references.Current({"tpot_s.p50": Estimate(now_value, 0.0, 1)}), None,
                       gated=("tpot_s.p50",), tolerance=0.1, also=(trend,))


def test_the_trend_check_fails_a_worse_change_with_what_changed():
    before = [0.010 * f for f in NOISE[:8]]
    judgement = check(before + [0.0125], 0.0126, {9: {"commit": "c2", "vllm": "0.33.0"}})
    assert judgement.status == Status.REGRESSION
    assert judgement.failure_text() == (
        "tpot_s.p50 changed for the worse at run 9 (commit c2): 10.0 ms -> 12.5 ms (+25.5%, "
        "allowed +10.0%, lower is better), 2 runs ago in .llmperf/history.sqlite; what changed "
        "at run 9: commit c1 -> c2, vllm 0.32.0 -> 0.33.0; see: llmperf history "
        '"s.py::test_a" --metric tpot_s.p50')


def test_a_better_change_is_a_note_and_an_old_better_one_is_the_level():
    before = [0.010 * f for f in NOISE[:8]]
    better = check(before + [0.0080], 0.0081)
    assert better.status == Status.PASS and better.notes[0].startswith(
        "tpot_s.p50 improved at run 9 (commit c1): 10.0 ms -> 8.0 ms (-19.5%, allowed -9.1%, ")
    old = check(before + [0.0080, 0.0081, 0.0079], 0.0080)  # 4 runs ago: the new level
    assert old.status == Status.PASS and old.notes == []


def test_an_old_change_for_the_worse_stays_red_while_it_is_the_level():
    before = [0.010 * f for f in NOISE[:8]]
    old = check(before + [0.0125, 0.0126, 0.0124], 0.0125)  # 4 runs ago, never acknowledged
    assert old.status == Status.REGRESSION
    assert old.failure_text().startswith(
        "tpot_s.p50 changed for the worse at run 9 (commit c1): 10.0 ms -> 12.5 ms (+25.0%, "
        "allowed +10.0%, lower is better), 4 runs ago in .llmperf/history.sqlite")
    back = check(before + [0.0125, 0.0126, 0.0124, 0.0100, 0.0101], 0.0099)  # fixed: the
    assert back.status == Status.PASS  # level came back, so nothing is open


def test_client_limited_runs_are_never_points():
    values = [0.010 * f for f in NOISE[:8]] + [0.030, 0.031]
    limited = {9: {"verdict": "CLIENT LIMITED"}, 10: {"verdict": "DISTURBED"}}
    assert check(values, 0.0101, limited).status == Status.PASS
    assert check(values, 0.0101).status == Status.REGRESSION  # the same runs, as points


def test_baselines_from_history_take_the_runs_since_the_last_change():
    points = [point(i + 1, v) for i, v in enumerate([0.010] * 6 + [0.0125, 0.0127, 0.0124])]
    estimates, note = baseline_estimates(points, point(None, None), {
        "tpot_s.p50": Estimate(0.0126, 0.0, 1), "ttft_s.p50": Estimate(0.1, 0.0, 1)},
        ("tpot_s.p50",), runs=3, tolerance=0.1)
    assert estimates["tpot_s.p50"] == Estimate(0.0126, pytest.approx(0.0001 * 1.4826), 3)
    assert estimates["ttft_s.p50"] == Estimate(0.1, 0.0, 1)  # not gated: this run's
    assert note == ("baseline from history: median and spread of tpot_s.p50 over 3 runs (run 8 "
                    "to this run since its change at run 7)")


def test_the_search_is_ruptures_binary_segmentation_breakpoint_for_breakpoint():
    """changepoints._candidates is ruptures' Binseg with the L1 cost (kept out of the runtime
    for its import cost): the same breakpoints on 300 series with and without steps."""
    ruptures = pytest.importorskip("ruptures")
    from pytest_llmperf.history import changepoints

    rng = np.random.default_rng(3)
    for _ in range(300):
        size = int(rng.integers(4, 60))
        logs = rng.normal(0.0, 0.05, size)
        logs[int(rng.integers(0, size)):] += rng.choice([0.0, 0.2, -0.3])
        sigma = changepoints.noise(logs)
        penalty = changepoints.PENALTY * sigma * math.log(size)
        expected = ruptures.Binseg(model="l1", min_size=changepoints.MIN_SIZE, jump=1).fit(
            logs.reshape(-1, 1)).predict(pen=penalty)[:-1]
        assert changepoints._candidates(logs, sigma) == expected


def test_what_changed_names_the_host_and_the_cards():
    before = replace(point(1, 0.01), host="gpu-3", fingerprint={"gpu_uuids": ["GPU-a"]})
    after = replace(point(2, 0.01), host="gpu-7", fingerprint={"gpu_uuids": ["GPU-b"]})
    assert what_changed(before, after) == ["GPUs GPU-a -> GPU-b", "host gpu-3 -> gpu-7"]


def test_a_change_before_the_committed_baseline_was_updated_is_accepted():
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    values = [0.010 * f for f in NOISE[:8]] + [0.0125, 0.0126, 0.0124]
    points = [replace(point(i + 1, v), started_at=start + timedelta(days=i))
              for i, v in enumerate(values)]
    now = point(None, None, commit="c2", vllm="0.33.0")

    def judged(baseline_at):
        trend = TrendCheck(points, now, "h.sqlite", "s.py::test_a", window=3,
                           baseline_at=baseline_at)
        return references.judge(references.Current({"tpot_s.p50": Estimate(0.0125, 0.0, 1)}), None,
                           gated=("tpot_s.p50",), tolerance=0.1, also=(trend,))

    assert judged(None).status == Status.REGRESSION  # run 9 (Nov 9) changed it
    before = judged(datetime(2026, 11, 5, tzinfo=timezone.utc))
    assert before.status == Status.REGRESSION  # a table written before the change
    after = judged(datetime(2026, 11, 10, tzinfo=timezone.utc))
    assert after.status == Status.PASS and after.notes[0].endswith(
        "; accepted: the committed baseline was updated since (2026-11-10)")


def test_a_table_written_in_the_second_the_change_began_came_after_it():
    """The table's date is kept to the second; the runs' to the microsecond. Nights a tenth of
    a second apart (tests/plugin/test_acks_plugin.py's) put the change's first run and the
    update in one second: the update came after it, and accepts it."""
    start = datetime(2026, 11, 1, 12, 0, 0, 100_000, tzinfo=timezone.utc)
    values = [0.010 * f for f in NOISE[:8]] + [0.0125, 0.0126, 0.0124]
    points = [replace(point(i + 1, v), started_at=start + timedelta(milliseconds=50 * i))
              for i, v in enumerate(values)]
    written = datetime(2026, 11, 1, 12, 0, 0, tzinfo=timezone.utc)  # as the table keeps it
    trend = TrendCheck(points, point(None, None), "h.sqlite", "s.py::test_a", window=3,
                       baseline_at=written)
    judged = references.judge(references.Current({"tpot_s.p50": Estimate(0.0125, 0.0, 1)}),
                              None, gated=("tpot_s.p50",), tolerance=0.1, also=(trend,))
    assert judged.status == Status.PASS, judged
