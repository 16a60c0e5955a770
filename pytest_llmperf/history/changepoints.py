"""Where a series' level changed: the rule behind the trend gate and `llmperf history`.

The noise model. A run's value of a metric is its series' level times a multiplicative noise,
so the rule works on log(value): a change is a shift of the log level, the same size for a
latency that grows by a factor and a throughput that falls by it (the gate's tolerance is such a
factor, gate.py). The noise is assumed independent from run to run, with heavy tails: on shared
machines a run now and then is far off (a neighbour, a slow start), so every estimate is robust.
The noise's scale sigma is estimated from the series itself, as MAD x 1.4826 / sqrt(2) of the
differences between consecutive runs: a level shift moves one difference, not their median, so
a step does not inflate the noise it is judged against. Per-run spreads (the repeats of one
session) are not used: repeats share the session's machine state and understate the noise
between sessions (metrics/stats.py says the same of baselines).

Candidate change points come from binary segmentation with the L1 (median) cost, penalty
PENALTY x sigma x log(n), each segment at least MIN_SIZE runs: ruptures' Binseg
(https://centre-borelli.github.io/ruptures-docs/user-guide/detection/binseg/,
https://centre-borelli.github.io/ruptures-docs/user-guide/costs/costl1/), done here in a few
lines of numpy that the tests check against ruptures itself, breakpoint for breakpoint.
Importing ruptures costs half a second (it imports scipy.stats), half of what `llmperf history`
may take in all; so ruptures is the reference the tests hold this search to, not a dependency.
A candidate is kept only if all of these hold, else the weakest one is dropped and the segments
are measured again:

1. the minimum effect size: the medians of the segments on either side differ by more than the
   factor 1 + min_effect (the test's tolerance) and by more than Z x sigma, one run's noise:
   the gate's own band, max(tolerance, 3 x noise) (gate.py), since a change smaller than the
   noise of one run is a coin toss (on this machine's closed-loop TTFT, 8% noise, a floor of
   the tolerance alone saw changes in 5 of 200 unchanged series; docs/history.md);
2. significance: that difference is more than Z x its standard error, the standard error of a
   median of m runs being sqrt(pi/2) x sigma / sqrt(m), combined over both sides;
3. it holds: each of the first MIN_SIZE runs after it is beyond the old level by more than the
   floor of rule 1, in the direction of the change (one wild run next to an ordinary one is an
   outlier, not a new level).

So a change is found MIN_SIZE (2) runs after it at the earliest. docs/history.md shows how the
rule behaves on this project's CPU suite (the calibration: unchanged series, and series with a
+25% TPOT step) and what it costs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["MIN_SIZE", "PENALTY", "Z", "Change", "find_changes", "noise"]

MIN_SIZE = 2
Z = 3.0  # as the gate's NOISE_K: 0.13% one-sided for normal noise
PENALTY = 1.0
# A series whose runs are identical has no noise to measure: assume this much (0.1%).
SIGMA_FLOOR = 0.001
_MEDIAN_SE = math.sqrt(math.pi / 2)  # the standard error of a median, in sigma / sqrt(m)
_NORMAL_MAD_SCALE = 1.4826


@dataclass(frozen=True)
class Change:
    """A level change: `index` is the first run of the new level; `before` and `after` the
    medians of the segments on either side, in the metric's own unit."""

    index: int
    before: float
    after: float
    z: float

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before else math.inf


def noise(logs: np.ndarray) -> float:
    """sigma of one run, from the differences of consecutive runs (module docstring)."""
    if logs.size < 3:
        return SIGMA_FLOOR
    mad = float(np.median(np.abs(np.diff(logs)))) * _NORMAL_MAD_SCALE / math.sqrt(2)
    return max(mad, SIGMA_FLOOR)


def _l1(logs: np.ndarray, start: int, end: int) -> float:
    """ruptures' CostL1: the absolute deviations of a segment from its median."""
    segment = logs[start:end]
    return float(np.abs(segment - np.median(segment)).sum())


def _best_split(logs: np.ndarray, start: int, end: int) -> tuple[float, int] | None:
    """The split of [start, end) that lowers the L1 cost most: (gain, index); ties go to the
    later index, as ruptures' Binseg.single_bkp breaks them."""
    whole = _l1(logs, start, end)
    splits = [(whole - _l1(logs, start, b) - _l1(logs, b, end), b)
              for b in range(start + MIN_SIZE, end - MIN_SIZE + 1)]
    return max(splits) if splits else None


def _candidates(logs: np.ndarray, sigma: float) -> list[int]:
    """Binary segmentation with the L1 cost, stopped by the penalty: ruptures'
    Binseg(model="l1", min_size=MIN_SIZE, jump=1).predict(pen=...), which
    tests/unit/history/test_history_changes.py checks this against breakpoint for breakpoint."""
    penalty = PENALTY * sigma * math.log(len(logs))
    bounds = [len(logs)]
    while True:
        found = [split for start, end in zip([0, *bounds], bounds)
                 if (split := _best_split(logs, start, end)) is not None]
        if not found:
            return bounds[:-1]
        gain, index = max(found, key=lambda split: split[0])  # the first of equal gains
        if gain <= penalty:
            return bounds[:-1]
        bounds = sorted([*bounds, index])


def _measure(logs: np.ndarray, bounds: list[int], at: int, sigma: float,
             min_effect: float) -> tuple[bool, float]:
    """Whether the candidate `bounds[at]` passes rules 1-3 (module docstring), and its z."""
    edges = [0, *bounds, len(logs)]
    left, right = logs[edges[at]:edges[at + 1]], logs[edges[at + 1]:edges[at + 2]]
    before = float(np.median(left))
    shift = float(np.median(right)) - before
    z = abs(shift) / (_MEDIAN_SE * sigma * math.sqrt(1 / left.size + 1 / right.size))
    floor = max(math.log1p(min_effect), Z * sigma)  # the gate's band: max(tolerance, 3 x noise)
    holds = bool(((right[:MIN_SIZE] - before) * math.copysign(1, shift) > floor).all())
    return abs(shift) > floor and z >= Z and holds, z


def find_changes(values: Sequence[float], min_effect: float) -> list[Change]:
    """The level changes of `values` (in run order, all positive) larger than the factor
    1 + `min_effect`, oldest first."""
    data = np.asarray(values, dtype=float)
    if data.size < 2 * MIN_SIZE or not np.all(np.isfinite(data)) or np.any(data <= 0):
        return []
    logs = np.log(data)
    sigma = noise(logs)
    bounds = _candidates(logs, sigma)
    while True:  # drop the weakest failing candidate until every one left passes
        judged = [_measure(logs, bounds, i, sigma, min_effect) for i in range(len(bounds))]
        failing = [(z, i) for i, (kept, z) in enumerate(judged) if not kept]
        if not failing:
            break
        del bounds[min(failing)[1]]
    edges = [0, *bounds, len(logs)]
    return [Change(index=b, before=float(np.exp(np.median(logs[edges[i]:b]))),
                   after=float(np.exp(np.median(logs[b:edges[i + 2]]))), z=judged[i][1])
            for i, b in enumerate(bounds)]
