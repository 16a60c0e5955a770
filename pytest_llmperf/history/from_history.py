"""Baselines from history (`--llmperf-update-baselines --llmperf-from-history N`): each gated
metric's baseline value and spread are the median and MAD x 1.4826 (metrics/stats.py, as for
repeats) of its last N runs since its series' last change point, this run included, instead of
this one run's numbers. A baseline then says where the level has been lately, not where one
session happened to land, and never mixes two levels: runs before the last change are left out
even when fewer than N runs remain.

Each such estimate is marked `source="history"`: its spread is a run-to-run spread, measured
between sessions, which the baseline stores as such (`spread_source = "history"`,
verdict/noise.py) when enough runs went into it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from pytest_llmperf.history.series import run_name, series_of
from pytest_llmperf.history.store import Point
from pytest_llmperf.history.trend import with_value
from pytest_llmperf.metrics.stats import Estimate, combine_repeats

__all__ = ["baseline_estimates"]


def baseline_estimates(points: Sequence[Point], now: Point, estimates: Mapping[str, Estimate],
                       gated: Sequence[str], runs: int, tolerance: float
                       ) -> tuple[dict[str, Estimate], str | None]:
    """`estimates` with each gated metric's value from history (module docstring), and one
    note saying over which runs each was taken (None when nothing was taken from history)."""
    out, parts = dict(estimates), []
    for name in gated:
        estimate = estimates.get(name)
        if estimate is None or not math.isfinite(estimate.value):
            continue
        series = series_of([*points, with_value(now, name, estimate.value)], name, tolerance)
        start = series.level_start()
        used = list(zip(series.points, series.values))[start:][-runs:]
        if not used:
            continue
        out[name] = replace(combine_repeats([value for _, value in used]), source="history")
        since = f" since its change at {_short(series.points[start])}" if series.changes else ""
        parts.append(f"{name} over {len(used)} run{'s' if len(used) > 1 else ''} "
                     f"({_short(used[0][0])} to {_short(used[-1][0])}{since})")
    if not parts:
        return out, None
    return out, "baseline from history: median and spread of " + "; ".join(parts)


def _short(point: Point) -> str:
    return run_name(point).split(" (")[0]
