"""What a gated metric can detect: the smallest change its measured noise lets the gate see at a
stated false-alarm rate and power (docs/noise.md, "What each test can detect").

The model. A session's value of a metric (the median of its runs' values) moves between
unchanged sessions with a relative standard deviation `s`, the entry's run-to-run spread
(noise.py: from the history store, repeats or a measured prior), or this run's repeats' where
they spread wider, as the gate reads it (gate._run_to_run_band). The gate compares this session's
value with the baseline's, so what it judges is a difference of two such values:

    sd of the difference = s x sqrt(v(n_baseline) + v(n_now))

where v(n) is the variance of the median of n normal values in units of one value's:
pi / (2n + pi - 2), exact for n = 1, within 2% of the simulated for odd n up to 9 and a few per
cent over it for even n (conservative), pi / 2n for large n. Only separate sessions average
the noise between sessions: a baseline written from the store's last N runs (spread_source
"history") counts N; repeats in one session share its machine state, so a session counts 1
however many repeats it ran.

A one-sided test at false-alarm rate alpha with power p then detects a change of the ratio
now / baseline, read on a log scale (a ratio's noise is about symmetric there, not on a linear
one: a baseline that read low makes a wide upward change), of

    x = (z(1 - alpha) + z(p)) x sd of the difference
    mde = exp(x) - 1 upwards (lower is better), 1 - exp(-x) downwards (higher is better)

relative to the value, in the metric's worse direction. The default alpha is the gate's own:
one-sided K = 3 sigma, 0.13% a comparison; the default power 80%. An entry without a
spread_source (its spread is its repeats', gate._repeats_band) is read as the gate reads it:
the two sides' spreads in quadrature are the sd of the difference. A metric whose noise is
unmeasured (spread 0) has no number: None. Pure: no pytest, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from statistics import NormalDist
from typing import Any

from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.verdict import noise
from pytest_llmperf.verdict.baselines import BaselineEntry

__all__ = ["ALPHA", "POWER", "blind_line", "detectable", "median_variance", "noise_sd",
           "of_entry", "of_report", "tolerance_change", "worst"]

_NORMAL = NormalDist()
# The gate's false-alarm chance per comparison for normal noise: one-sided K sigma (gate.py).
ALPHA = _NORMAL.cdf(-noise.K)
POWER = 0.8


def median_variance(n: int) -> float:
    """The variance of the median of n normal values over one value's (module docstring)."""
    return math.pi / (2 * n + math.pi - 2)


def _z_sum(alpha: float, power: float) -> float:
    if not 0 < alpha < 0.5:
        raise InputError(f"false-alarm rate {alpha!r} must be between 0 and 0.5 "
                         "(one-sided, per comparison), e.g. 0.001")
    if not 0.5 <= power < 1:
        raise InputError(f"power {power!r} must be at least 0.5 and below 1, e.g. 0.8")
    return _NORMAL.inv_cdf(1 - alpha) + _NORMAL.inv_cdf(power)


def detectable(spread: float, *, n_baseline: int = 1, n_now: int = 1, alpha: float = ALPHA,
               power: float = POWER, direction: str = "lower") -> float:
    """The smallest relative change a one-sided test at `alpha` detects with `power`, for a
    session's value of relative run-to-run spread `spread`, the baseline's the median of
    `n_baseline` sessions and this run's of `n_now`: a rise where lower is better, a fall
    where higher is."""
    if not (math.isfinite(spread) and spread >= 0):
        raise InputError(f"spread {spread!r} must be a finite relative spread >= 0, e.g. 0.05")
    for what, n in (("n_baseline", n_baseline), ("n_now", n_now)):
        if not (isinstance(n, int) and n >= 1):
            raise InputError(f"{what} {n!r} must be a whole number of sessions >= 1")
    sd = spread * math.sqrt(median_variance(n_baseline) + median_variance(n_now))
    return _worse(_z_sum(alpha, power) * sd, direction)


def _worse(log_change: float, direction: str) -> float:
    """A change of `log_change` on the log scale as a relative change on the worse side."""
    return math.expm1(log_change) if direction == "lower" else -math.expm1(-log_change)


def noise_sd(entry: BaselineEntry, current: Estimate) -> float | None:
    """The standard deviation of the change between `entry` and this run's `current` estimate,
    on the log scale, as the module docstring models it; None where the noise is unmeasured
    (spread 0) or there is no value to be relative to."""
    if entry.value == 0 or not math.isfinite(entry.value):
        return None
    spread = entry.spread if math.isfinite(entry.spread) else 0.0
    now = current.spread if math.isfinite(current.spread) else 0.0
    if entry.spread_source is None:  # the repeats' spreads, read as the gate reads them
        sd = math.hypot(spread, now) / abs(entry.value)
        return sd if sd > 0 else None
    relative = noise.relative_spread_of(entry)
    if current.n > 1 and now > spread:  # a noisier session, as the gate reads it
        relative = now / abs(entry.value)
    if relative <= 0:
        return None
    sessions = max(entry.n, 1) if entry.spread_source == "history" else 1
    return relative * math.sqrt(median_variance(sessions) + median_variance(1))


def of_entry(entry: BaselineEntry, current: Estimate, *, alpha: float = ALPHA,
             power: float = POWER) -> float | None:
    """What the gate can detect of one metric judged against `entry` with this run's `current`
    estimate (noise_sd); None where the noise is unmeasured."""
    sd = noise_sd(entry, current)
    return None if sd is None else _worse(_z_sum(alpha, power) * sd, entry.direction)


def tolerance_change(entry: BaselineEntry) -> float:
    """The worse-side change the entry's tolerance allows, relative to its value: the tolerance
    upwards (lower is better), tolerance / (1 + tolerance) downwards (gate.py's factor)."""
    tolerance = entry.tolerance
    return tolerance if entry.direction == "lower" else tolerance / (1 + tolerance)


def of_report(verdicts: Iterable[Any], alpha: float = ALPHA) -> dict[str, dict[str, float]]:
    """The run file's "detectable" of a test: per gated metric with a measured noise (gate.Verdict's
    `noise_sd`, `direction` and `tolerance`), what it can detect at `alpha` (the run's
    false-alarm budget a comparison, verdict/budget.py) and 80% power, and the change its
    tolerance allows, both relative, to four decimals."""
    z = _z_sum(alpha, POWER)
    return {verdict.name: {"detectable": round(_worse(z * verdict.noise_sd, verdict.direction), 4),
                           "tolerance": round(verdict.tolerance, 4)}
            for verdict in verdicts if verdict.noise_sd is not None
            and verdict.direction is not None and verdict.tolerance is not None}


def blind_line(seen: Mapping[str, Mapping[str, float]], alpha: float = ALPHA) -> str | None:
    """The note naming a test's metrics whose detectable change exceeds the change their
    tolerance allows (`of_report`'s form); None where the test sees what its tolerances say.
    One line per test, so that the same line of many tests folds into one (reports/notes.py)."""
    blind = [(name, found["tolerance"], found["detectable"])
             for name, found in sorted(seen.items()) if found["detectable"] > found["tolerance"]]
    if not blind:
        return None
    if len(blind) == 1:
        name, tolerance, sees = blind[0]
        head = f"this test cannot see a {tolerance:.0%} regression of {name}; it sees {sees:.0%}"
    else:
        head = "this test cannot see the regressions its tolerances allow: " + ", ".join(
            f"{name} {tolerance:.0%} (it sees {sees:.0%})" for name, tolerance, sees in blind)
    return (f"{head} at a {alpha:.3%} false-alarm rate and {POWER:.0%} power: add requests, "
            "or write its baseline from more runs (--llmperf-from-history N)")


def worst(seen: Mapping[str, Mapping[str, float]] | None) -> str:
    """The -v summary's cell: the largest detectable change of a test's gated metrics and whose
    ("27% ttft_s.p50"); "-" for none."""
    if not seen:
        return "-"
    name = max(sorted(seen), key=lambda key: seen[key]["detectable"])
    return f"{seen[name]['detectable']:.0%} {name}"
