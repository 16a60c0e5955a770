"""Load sweeps and SLO capacity search, driven by a `measure` callable.

A sweep runs one workload at several loads and gives the throughput-versus-latency curve
(Lambda's graphs, `vllm bench serve --request-rate` repeated). A capacity search finds the
highest Poisson rate at which a hard target (gate.SLO) still holds, so "how much load does this
engine serve within its SLO" becomes one number that can be gated like any other metric. For a
trace replay the load is the trace's own arrivals, so the search scales their pace instead: the
highest `speedup` (how many times faster than recorded) that meets the SLO.

Pure: the caller's `measure(workload) -> RunMetrics` does the serving; nothing here imports
HTTP, vLLM or pytest. The workload at each load is loads.py's; whether a probe met the SLO is
slo_check.py's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_llmperf.metrics.compute import RunMetrics
from pytest_llmperf.verdict import gate
from pytest_llmperf.workloads.loads import (
    Knob,
    Measure,
    at_knob,
    concurrency_workload,
    knob_of,
    load_label,
    rate_workload,
)
from pytest_llmperf.workloads.slo_check import KNOWN_METRICS, CapacityRun, judge_rate
from pytest_llmperf.workloads.workload import Workload

__all__ = ["BRACKET_FACTOR", "CAPACITY_METRICS", "Capacity", "Sweep", "SweepPoint",
           "find_capacity", "sweep"]

# Each bracketing step doubles the rate: few runs to get above the knee from a low guess, and the
# bisection that follows needs only ceil(log2(log 2 / log(1 + rel_tol))) more (3 for 10%).
BRACKET_FACTOR = 2.0

LoadKind = Literal["rate", "concurrency"]

CAPACITY_METRICS: dict[str, str] = {"rate": "slo_capacity_req_s",
                                    "speedup": "slo_capacity_speedup"}


@dataclass(frozen=True)
class SweepPoint:
    """One measured load: `load` is requests/s for kind "rate", in-flight requests otherwise."""

    load: float
    kind: LoadKind
    metrics: RunMetrics

    def label(self) -> str:
        return f"{self.load:g} req/s" if self.kind == "rate" else f"c={self.load:g}"

    def value(self, name: str) -> float:
        """"load" or any metric name RunMetrics.get takes."""
        return float(self.load) if name == "load" else self.metrics.get(name)


# (header, metric, scale): latencies are shown in ms, the unit people read them in.
_TABLE_COLUMNS = (
    ("out tok/s", "output_throughput_tok_s", 1.0),
    ("TTFT p50 ms", "ttft_s.p50", 1e3),
    ("TTFT p99 ms", "ttft_s.p99", 1e3),
    ("TPOT p50 ms", "tpot_s.p50", 1e3),
    ("TPOT p99 ms", "tpot_s.p99", 1e3),
)


@dataclass(frozen=True)
class Sweep:
    """The points in the order they were measured (the order the loads were given)."""

    points: list[SweepPoint]

    def table(self) -> list[str]:
        """A header line and one aligned line per point."""
        width = max(len("load"), *(len(p.label()) for p in self.points))
        header = f"{'load':>{width}}" + "".join(f"  {h:>11}" for h, _, _ in _TABLE_COLUMNS)
        lines = [header]
        for point in self.points:
            cells = (point.metrics.get(name) * scale for _, name, scale in _TABLE_COLUMNS)
            lines.append(f"{point.label():>{width}}" + "".join(f"  {v:>11.1f}" for v in cells))
        return lines

    def curve(
        self, x: str = "output_throughput_tok_s", y: str = "tpot_s.p50"
    ) -> list[tuple[float, float]]:
        """(x, y) per point, in sweep order; either name may be "load" or any metric name."""
        return [(point.value(x), point.value(y)) for point in self.points]


def sweep(
    measure: Measure,
    base: Workload,
    *,
    rates: Sequence[float] | None = None,
    concurrencies: Sequence[int] | None = None,
) -> Sweep:
    """Measure `base` at each rate (open loop) or each concurrency (closed loop), in order."""
    if (rates is None) == (concurrencies is None):
        raise ValueError("sweep needs exactly one of rates=[...] (requests/s) or "
                         "concurrencies=[...]")
    loads = list(rates if rates is not None else concurrencies)
    if not loads:
        raise ValueError("sweep needs at least one load; got an empty list")
    # Every workload is built (and so every load validated) before the first run: a bad value
    # at the end of the list must not cost the runs before it.
    if rates is not None:
        plan = [(float(r), "rate", rate_workload(base, r)) for r in loads]
    else:
        plan = [(float(c), "concurrency", concurrency_workload(base, c)) for c in loads]
    points = [SweepPoint(load, kind, measure(workload)) for load, kind, workload in plan]
    return Sweep(points)


@dataclass(frozen=True)
class Capacity:
    """The highest load that met the SLO (0.0 if even `low` failed), and how it was found:
    `value` is a rate in requests/s (`rate_req_s`), or for a trace replay a speedup
    (`speedup`); `knob` says which.

    Rates are nominal (the `rate=` a workload is given). With the seed fixed, a schedule
    offers the same fraction of its nominal rate at every rate, so capacities of one workload
    compare like for like; each run's `offered_req_s` shows the realized rate. A speedup scales
    the trace's own schedule, so it offers exactly `speedup` times the trace's recorded rate.

    `limiting_metric` is what failed at the lowest failing load (None if nothing failed);
    `converged` is True when passing and failing loads are within `rel_tol` of each other.
    """

    value: float
    runs: list[CapacityRun]
    limiting_metric: str | None
    engine_runs: int
    converged: bool
    note: str = ""
    knob: Knob = "rate"

    @property
    def rate_req_s(self) -> float:
        """A rate search's capacity, requests/s."""
        if self.knob != "rate":
            raise AttributeError("a trace replay's capacity is a speedup: read "
                                 "capacity.speedup (gated as slo_capacity_speedup)")
        return self.value

    @property
    def speedup(self) -> float:
        """A trace replay's capacity: how many times faster than recorded it can be replayed."""
        if self.knob != "speedup":
            raise AttributeError("this capacity is a rate: read capacity.rate_req_s (gated as "
                                 "slo_capacity_req_s)")
        return self.value

    def as_metric(self) -> dict[str, float]:
        """The capacity as a metric for the gate and baselines (slo_capacity_req_s, or
        slo_capacity_speedup for a trace replay); higher is better."""
        return {CAPACITY_METRICS[self.knob]: self.value}


def _check_search(slo: gate.SLO, low: float, high: float, rel_tol: float, max_runs: int) -> None:
    # Checked before the first run: a typo found after minutes of serving wastes them all.
    gate.check_names((t.metric for t in slo.targets()), KNOWN_METRICS)
    if not (0 < low < high < math.inf):
        raise ValueError(f"find_capacity needs 0 < low < high (finite), got low={low!r}, "
                         f"high={high!r}")
    if not rel_tol > 0:
        raise ValueError(f"find_capacity: rel_tol must be > 0, got {rel_tol!r}")
    if max_runs < 2:
        raise ValueError(f"find_capacity: max_runs must be >= 2 (low and high), got {max_runs!r}")


def find_capacity(
    measure: Measure,
    base: Workload,
    slo: gate.SLO,
    *,
    low: float,
    high: float,
    rel_tol: float = 0.1,
    max_runs: int = 8,
) -> Capacity:
    """The highest rate (requests/s) at which every SLO target holds, no request fails and the
    engine keeps up (KEEP_UP); at most `max_runs` measurements. For a trace replay
    (Workload.trace) `low` and `high` are speedups and the result is the highest speedup
    (speedup_workload): the trace's own arrivals, replayed faster.

    `low` first (if it fails there is no capacity to find); then `high`, doubled while it still
    passes; then bisection in log space (loads span orders of magnitude and the tolerance is
    relative) until high/low - 1 < rel_tol. The result is the highest load that passed.
    """
    _check_search(slo, low, high, rel_tol, max_runs)
    knob = knob_of(base)
    at = at_knob(knob)
    runs: list[CapacityRun] = []

    def probe(load: float) -> CapacityRun:
        workload = at(base, load)
        runs.append(judge_rate(workload, measure(workload), slo))
        return runs[-1]

    first = probe(low)
    if not first.passed:
        note = (f"no capacity: even the lowest {knob} {load_label(low, knob)} missed: "
                f"{first.reason}; lower `low`")
        return Capacity(0.0, runs, first.limiting_metric, len(runs), False, note, knob)
    lo, hi = low, high
    while (top := probe(hi)).passed:
        lo, hi = hi, hi * BRACKET_FACTOR
        if len(runs) >= max_runs:
            note = (f"still within the SLO at {load_label(lo, knob)} after {len(runs)} runs; "
                    "raise `high` or max_runs")
            return Capacity(lo, runs, None, len(runs), False, note, knob)
    return _bisect(probe, runs, lo, top, rel_tol=rel_tol, max_runs=max_runs)


def _bisect(probe: Callable[[float], CapacityRun], runs: list[CapacityRun], lo: float,
            failing: CapacityRun, *, rel_tol: float, max_runs: int) -> Capacity:
    """Narrow [lo passes, failing.load fails] until within rel_tol or out of runs."""
    hi, knob = failing.load, failing.knob
    while hi / lo - 1 >= rel_tol and len(runs) < max_runs:
        # Geometric midpoint: each step halves log(high / low), which rel_tol bounds.
        mid = probe(math.sqrt(lo * hi))
        if mid.passed:
            lo = mid.load
        else:
            hi, failing = mid.load, mid
    converged = hi / lo - 1 < rel_tol
    state = "" if converged else f"not converged after {len(runs)} runs (raise max_runs): "
    note = (f"{state}passes at {load_label(lo, knob)}, fails at {load_label(hi, knob)} "
            f"({hi / lo - 1:.1%} apart, rel_tol {rel_tol:.1%}): {failing.reason}")
    return Capacity(lo, runs, failing.limiting_metric, len(runs), converged, note, knob)
