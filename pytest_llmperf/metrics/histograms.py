"""Prometheus histograms as a server's /metrics page shows them, the part of them one measured
window added, and that part's mean and percentiles.

A histogram is cumulative since the server started: `<name>_bucket{le="0.1"}` counts every
observation <= 0.1 s so far, `_sum` adds them up, `_count` counts them. Read at the start and at
the end of a measured window, the difference of the two readings holds exactly the observations
made in between (`Histogram.since`); under data parallelism each engine reports its own label
set, and the readings are summed over them (client/server_metrics.py sums its counters alike).

Percentiles follow Prometheus' histogram_quantile
(https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile, the code:
https://github.com/prometheus/prometheus/blob/main/promql/quantile.go): the rank q x count is
found in the first bucket whose cumulative count reaches it, and the value is interpolated
linearly between that bucket's lower and upper bounds (the lowest bucket's lower bound is 0); a
rank in the +Inf bucket gives the highest finite bound. So a percentile is only as fine as the
buckets around it: vLLM's request-latency buckets step 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5 s ...
(docs/phases.md). The mean is exact: `_sum` / `_count`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass

__all__ = ["Histogram", "parse_histograms", "window_values"]

_QUANTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}
_SUFFIXES = ("_bucket", "_sum", "_count")


@dataclass(frozen=True)
class Histogram:
    """One histogram, summed over label sets: `bounds` the buckets' upper bounds, ascending, the
    last +Inf; `counts` their cumulative counts; `total` the sum of the observations."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    total: float
    count: float

    def since(self, earlier: Histogram | None) -> Histogram | None:
        """The observations made after `earlier` (this histogram read before); all of them when
        there was none then (a series appears with its first observation). None when the two
        readings do not belong together: other buckets, or fewer observations than before (the
        server restarted in between)."""
        if earlier is None:
            return self
        if earlier.bounds != self.bounds or earlier.count > self.count:
            return None
        return Histogram(self.bounds, tuple(b - a for a, b in zip(earlier.counts, self.counts)),
                         self.total - earlier.total, self.count - earlier.count)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count > 0 else math.nan

    def quantile(self, q: float) -> float:
        """Prometheus' histogram_quantile(q) of this histogram (module docstring); NaN without
        observations or without a +Inf bucket."""
        if not self.bounds or not math.isinf(self.bounds[-1]) or len(self.bounds) < 2:
            return math.nan
        counts = _monotonic(self.counts)
        observations = counts[-1]
        if observations <= 0:
            return math.nan
        rank = q * observations
        b = next(i for i, count in enumerate(counts) if count >= rank or i == len(counts) - 1)
        if b == len(counts) - 1:
            return self.bounds[-2]
        if b == 0 and self.bounds[0] <= 0:
            return self.bounds[0]
        start, below = (self.bounds[b - 1], counts[b - 1]) if b > 0 else (0.0, 0.0)
        in_bucket = counts[b] - below
        if in_bucket <= 0:  # q = 0 over an empty first bucket: no observation to place
            return self.bounds[b]
        return start + (self.bounds[b] - start) * (rank - below) / in_bucket


def _monotonic(counts: tuple[float, ...]) -> list[float]:
    """Cumulative counts that never go down, as Prometheus makes them before it interpolates:
    a page rendered while an observation was being recorded can show one bucket ahead."""
    out, highest = [], 0.0
    for count in counts:
        highest = max(highest, count)
        out.append(highest)
    return out


def parse_histograms(text: str, names: Collection[str]) -> dict[str, Histogram]:
    """The histograms `names` from a Prometheus exposition page, each summed over its label sets
    (one per engine); a name the page lacks is left out."""
    # Imported here so that importing the plugin does not import prometheus_client.
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {name + suffix: name for name in names for suffix in _SUFFIXES}
    # Only those lines, and no comments: without `# TYPE` the parser keeps each sample under the
    # name it is exposed as, and a ~600-line page parses in a fraction of the time.
    kept = [line for line in text.splitlines()
            if line and line[0] != "#" and line.split("{", 1)[0].split(" ", 1)[0] in wanted]
    buckets: dict[str, dict[float, float]] = {}
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families("\n".join(kept) + "\n"):
        for sample in family.samples:
            name = wanted.get(sample.name)
            if name is None:
                continue
            if sample.name.endswith("_bucket") and "le" in sample.labels:
                bound = float(sample.labels["le"])
                found = buckets.setdefault(name, {})
                found[bound] = found.get(bound, 0.0) + sample.value
            elif sample.name.endswith("_sum"):
                sums[name] = sums.get(name, 0.0) + sample.value
            elif sample.name.endswith("_count"):
                counts[name] = counts.get(name, 0.0) + sample.value
    return {name: Histogram(tuple(sorted(found)), tuple(found[b] for b in sorted(found)),
                            sums.get(name, math.nan), counts.get(name, found[max(found)]))
            for name, found in buckets.items()}


def window_values(start: Mapping[str, Histogram], end: Mapping[str, Histogram],
                  names: Mapping[str, str]) -> dict[str, float]:
    """{"queue_s.mean": ..., "queue_s.p50": ..., "queue_s.n": ...} for each `names` key (its
    histogram's name as the value) over the window between the readings `start` and `end`.
    A histogram missing at the end, whose two readings do not belong together, or without an
    observation in the window gives none: nothing was timed."""
    out: dict[str, float] = {}
    for key, name in names.items():
        found = end.get(name)
        window = found.since(start.get(name)) if found is not None else None
        if window is None or window.count <= 0:
            continue
        out[f"{key}.n"] = window.count
        out[f"{key}.mean"] = window.mean
        for stat, q in _QUANTILES.items():
            out[f"{key}.{stat}"] = window.quantile(q)
    return out
