"""Combine the N repeats of one measurement (`--llmperf-repeat N`) into a value and its noise.

The value is the **median** of the repeats and the spread is the **normalised median absolute
deviation**, MAD x 1.4826 (the factor makes it estimate the standard deviation of normal data).
The gate (verdict/gate.py) then allows max(tolerance floor, NOISE_K x noise). Why this pair, in
the light of what other gates do on noisy machines (docs/metrics.md, Gates on noisy machines):

- Repeats are expensive here. One repeat is a full serving benchmark (tens of seconds on a GPU,
  minutes on the CPU), so N is 1-5, never the hundreds a microbenchmark gets. Every choice below
  has to work at N=3.
- asv requires a 10% factor AND a Mann-Whitney U test at p < 0.002. With 3 vs 3 samples the
  smallest two-sided p a rank test can reach is 0.1 (5 vs 5: 0.008), so at our N it could never
  fire; the rank idea survives as a robust, order-based statistic instead of a test. The 10%
  factor survives as the tolerance floor of the band.
- AIPerf stops repeating when the t-interval of the mean is narrower than 10%; Bencher offers
  t-test, z-score and IQR thresholds over a history of runs. The mean and standard deviation
  are moved without bound by one bad repeat (a preemption storm, a noisy neighbour, a
  first-run cache warm-up), and a t-interval at N=3 (t=4.3) is so wide it says little. The
  median and the MAD both have a 50% breakdown point: at N=3 one wild repeat moves neither.
  IQR/1.349 is the other common robust scale, but its breakdown point is 25%, and at N=3 with
  linear interpolation it is dragged halfway to an outlier (1, 2, 10 -> IQR/1.349 = 3.3, while
  MAD x 1.4826 = 1.5). At N=2 MAD x 1.4826 = 0.74 |a - b|, close to the sample standard deviation
  (0.71 |a - b|), where IQR/1.349 would report half of that.
- CodSpeed measured 2.66% CV on shared CI runners and got ~45% false alarms with a 2% gate: a
  gate tighter than the noise is a coin toss. Hence the band is never narrower than K times the
  measured noise. With N=1 (spread 0) a baseline takes its run-to-run spread from the history
  store or from a measured prior instead (verdict/noise.py, docs/noise.md).

The spread is the scale of one repeat, not the standard error of the median (which would be
~1.25 x spread / sqrt(N)). That is deliberately conservative: repeats inside one session share
the machine's state (clocks, thermals, neighbours, page cache), so they understate the
run-to-run noise between the baseline's session and this one, and a scale estimated from 3
values is itself uncertain. Pure: no pytest, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["NORMAL_MAD_SCALE", "Estimate", "combine_repeats", "combine_runs", "relative_spread"]

# 1 / Phi^-1(3/4): makes the MAD an unbiased estimate of sigma for normal data, so a spread
# can be compared with (and combined like) a standard deviation.
NORMAL_MAD_SCALE = 1.4826


@dataclass(frozen=True, slots=True)
class Estimate:
    """A metric over N repeats: median `value`, robust `spread` (sigma units), repeat count `n`.

    `source` says where value and spread came from when they are not one session's repeats:
    "history" for the median and spread of the last N stored runs (history/from_history.py), a
    run-to-run spread that a baseline may store as such (verdict/noise.py). It is no part of
    equality: the same numbers are the same estimate, wherever they came from.

    `direction` ("lower" or "higher" is better) is what a stored estimate says of its metric (a
    run file's, the history store's); None where it is the registry's to say. The history store
    keeps None for a number it was not given (history/record.py)."""

    value: float
    spread: float
    n: int
    direction: str | None = None
    source: str | None = field(default=None, compare=False)


def combine_repeats(values: Sequence[float]) -> Estimate:
    """Median and MAD x 1.4826 of the repeats; spread 0 for one repeat.

    A NaN repeat (e.g. a distribution with no values because every request failed) makes the
    whole estimate NaN: hiding it behind the median of the others would pass a gate on a run
    that partly did not happen.
    """
    data = np.asarray(list(values), dtype=float)
    if data.size == 0:
        raise ValueError("combine_repeats needs at least one value; got none")
    if np.isnan(data).any():
        return Estimate(math.nan, math.nan, int(data.size))
    median = float(np.median(data))
    if data.size == 1:
        return Estimate(median, 0.0, 1)
    mad = float(np.median(np.abs(data - median)))
    return Estimate(median, mad * NORMAL_MAD_SCALE, int(data.size))


def combine_runs(runs: Sequence[Mapping[str, float]]) -> dict[str, Estimate]:
    """Combine repeats given as one flat metrics dict per repeat; keys sorted.

    A metric missing from some repeats is combined over the repeats that have it (its `n` says
    how many), so one repeat that lacks a server-side metric does not drop it everywhere.
    """
    names = sorted({name for run in runs for name in run})
    return {name: combine_repeats([run[name] for run in runs if name in run]) for name in names}


def relative_spread(estimate: Estimate) -> float:
    """Spread as a fraction of |value| (a robust coefficient of variation).

    0 when both are 0 (a metric that is constantly zero, like error_rate on a healthy run); inf
    when only the value is 0; NaN when the estimate is NaN.
    """
    if math.isnan(estimate.value) or math.isnan(estimate.spread):
        return math.nan
    if estimate.value == 0:
        return 0.0 if estimate.spread == 0 else math.inf
    return estimate.spread / abs(estimate.value)
