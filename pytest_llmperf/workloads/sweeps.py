"""Load sweeps and SLO capacity search, driven by a `measure` callable.

A sweep runs one workload at several loads and gives the throughput-versus-latency curve
(Lambda's graphs, `vllm bench serve --request-rate` repeated). A capacity search finds the
highest Poisson rate at which a hard target (gate.SLO) still holds, so "how much load does this
engine serve within its SLO" becomes one number that can be gated like any other metric.

Pure: the caller's `measure(workload) -> RunMetrics` does the serving; nothing here imports
HTTP, vLLM or pytest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pytest_llmperf.client.loadgen import Concurrency, Ramp, Rate, arrival_offsets
from pytest_llmperf.metrics.compute import DISTRIBUTIONS, SCALARS, STATISTICS, RunMetrics
from pytest_llmperf.verdict import gate
from pytest_llmperf.workloads.workload import Workload

__all__ = [
    "BRACKET_FACTOR",
    "KEEP_UP",
    "Capacity",
    "CapacityRun",
    "Measure",
    "Sweep",
    "SweepPoint",
    "achieved_rate",
    "concurrency_workload",
    "find_capacity",
    "judge_rate",
    "offered_rate",
    "rate_workload",
    "sweep",
]

Measure = Callable[[Workload], RunMetrics]

# The completion rate must reach this share of the offered rate. Below it, requests arrive
# faster than they finish: the queue, and so every latency, grows without bound the longer the
# run lasts. A short run can still show fine percentiles (most requests finished before the
# queue got long), so latency alone would report a capacity the engine cannot sustain.
KEEP_UP = 0.9
# Each bracketing step doubles the rate: few runs to get above the knee from a low guess, and the
# bisection that follows needs only ceil(log2(log 2 / log(1 + rel_tol))) more (3 for 10%).
BRACKET_FACTOR = 2.0

LoadKind = Literal["rate", "concurrency"]


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


def rate_workload(base: Workload, rate: float) -> Workload:
    """`base` at `rate` requests/s; only the rate changes.

    A Rate keeps its burstiness and concurrency cap, a Ramp its cap (a Ramp is Poisson); a
    closed-loop base becomes plain Poisson, since its concurrency is what a rate replaces.
    """
    pattern = base.pattern
    if isinstance(pattern, Rate):
        new = replace(pattern, requests_per_s=rate)
    elif isinstance(pattern, Ramp):
        new = Rate(requests_per_s=rate, max_concurrency=pattern.max_concurrency)
    else:
        new = Rate(requests_per_s=rate)
    return replace(base, name=f"{base.name}-rate{rate:g}", pattern=new)


def concurrency_workload(base: Workload, concurrency: int) -> Workload:
    pattern = Concurrency(max_concurrency=concurrency)
    return replace(base, name=f"{base.name}-c{concurrency}", pattern=pattern)


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


def offered_rate(workload: Workload) -> float:
    """The rate the workload's seeded schedule really offers: (n - 1) / span of arrivals.

    A Poisson run of n requests offers its nominal rate only on average (relative spread about
    1/sqrt(n), 10% at n = 100); the schedule is fixed by the seed, so the exact figure is known
    and the keep-up check need not allow for that noise. NaN when there is no span to divide by
    (one request, or everything sent at once).
    """
    n = workload.num_requests
    span = float(arrival_offsets(workload.pattern, n, workload.seed)[-1]) if n > 1 else 0.0
    return (n - 1) / span if span > 0 else math.nan


def achieved_rate(metrics: RunMetrics) -> float:
    """Completions per second over the completion window, estimated from the summaries.

    request_throughput_req_s divides by first send -> last completion, which includes one
    request's latency as a drain tail: on a short run that alone reads as "not keeping up". The
    first completion is at least the fastest latency after the first send, so subtracting
    e2el_s.min gives a window that is never too short: the estimate errs low, by at most the
    latency spread over the run length. NaN with fewer than two completions.
    """
    window = metrics.duration_s - metrics.e2el_s.min
    if metrics.completed < 2 or not window > 0:
        return math.nan
    return (metrics.completed - 1) / window


@dataclass(frozen=True)
class CapacityRun:
    """One probe of the search: the nominal rate, whether it met everything, and why not.

    `offered_req_s` is what the probe's seeded schedule really offered (offered_rate).
    """

    rate: float
    passed: bool
    metrics: RunMetrics
    limiting_metric: str | None = None
    reason: str = ""
    offered_req_s: float = math.nan


@dataclass(frozen=True)
class Capacity:
    """The highest rate that met the SLO (0.0 if even `low` failed), and how it was found.

    Rates are nominal (the `rate=` a workload is given). With the seed fixed, a schedule
    offers the same fraction of its nominal rate at every rate, so capacities of one workload
    compare like for like; each run's `offered_req_s` shows the realized rate.

    `limiting_metric` is what failed at the lowest failing rate (None if nothing failed);
    `converged` is True when passing and failing rates are within `rel_tol` of each other.
    """

    rate_req_s: float
    runs: list[CapacityRun]
    limiting_metric: str | None
    engine_runs: int
    converged: bool
    note: str = ""

    def as_metric(self) -> dict[str, float]:
        """The capacity as a metric for the gate and baselines; higher is better."""
        return {"slo_capacity_req_s": self.rate_req_s}


_KNOWN_METRICS = tuple(f"{d}.{s}" for d in DISTRIBUTIONS for s in STATISTICS) + SCALARS


def judge_rate(workload: Workload, metrics: RunMetrics, slo: gate.SLO) -> CapacityRun:
    """Does this run of a rate workload count as served within the SLO? Every reason it does
    not, joined into one line; the first one is the limiting metric."""
    rate = workload.pattern.requests_per_s
    failures: list[tuple[str, str]] = []
    if metrics.error_rate > 0:
        failures.append(("error_rate", f"{metrics.failed} requests failed "
                                       f"(error rate {metrics.error_rate:.1%})"))
    offered, achieved = offered_rate(workload), achieved_rate(metrics)
    # NaN offered: a one-request run has no rate to keep up with. NaN achieved fails (not >=).
    if not math.isnan(offered) and not achieved >= KEEP_UP * offered:
        failures.append(("request_throughput_req_s",
                         f"saturated: completed {achieved:.2f} req/s < {KEEP_UP:g} x offered "
                         f"{offered:.2f} req/s"))
    # Client lag is left to the note under the summary (session.run), not failed here: a client
    # that cannot keep up for the whole run fails KEEP_UP above, and failing on its p99 made one
    # 16 ms spike at 32 req/s halve the CPU suite's capacity.
    report = gate.check_targets(metrics.flat(), slo)
    failures += [(verdict.name, verdict.message) for verdict in report.failures]
    if not failures:
        return CapacityRun(rate, True, metrics, None, "met every target", offered)
    reason = "; ".join(message for _, message in failures)
    return CapacityRun(rate, False, metrics, failures[0][0], reason, offered)


def _check_search(slo: gate.SLO, low: float, high: float, rel_tol: float, max_runs: int) -> None:
    # Checked before the first run: a typo found after minutes of serving wastes them all.
    gate.check_names((t.metric for t in slo.targets()), _KNOWN_METRICS)
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
    engine keeps up (KEEP_UP); at most `max_runs` measurements.

    `low` first (if it fails there is no capacity to find); then `high`, doubled while it still
    passes; then bisection in log space (rates span orders of magnitude and the tolerance is
    relative) until high/low - 1 < rel_tol. The result is the highest rate that passed.
    """
    _check_search(slo, low, high, rel_tol, max_runs)
    runs: list[CapacityRun] = []

    def probe(rate: float) -> CapacityRun:
        workload = rate_workload(base, rate)
        runs.append(judge_rate(workload, measure(workload), slo))
        return runs[-1]

    first = probe(low)
    if not first.passed:
        note = (f"no capacity: even the lowest rate {low:g} req/s missed: {first.reason}; "
                "lower `low`")
        return Capacity(0.0, runs, first.limiting_metric, len(runs), False, note)
    lo, hi = low, high
    while (top := probe(hi)).passed:
        lo, hi = hi, hi * BRACKET_FACTOR
        if len(runs) >= max_runs:
            note = (f"still within the SLO at {lo:g} req/s after {len(runs)} runs; "
                    "raise `high` or max_runs")
            return Capacity(lo, runs, None, len(runs), False, note)
    return _bisect(probe, runs, lo, top, rel_tol=rel_tol, max_runs=max_runs)


def _bisect(probe: Callable[[float], CapacityRun], runs: list[CapacityRun], lo: float,
            failing: CapacityRun, *, rel_tol: float, max_runs: int) -> Capacity:
    """Narrow [lo passes, failing.rate fails] until within rel_tol or out of runs."""
    hi = failing.rate
    while hi / lo - 1 >= rel_tol and len(runs) < max_runs:
        # Geometric midpoint: each step halves log(high / low), which rel_tol bounds.
        mid = probe(math.sqrt(lo * hi))
        if mid.passed:
            lo = mid.rate
        else:
            hi, failing = mid.rate, mid
    converged = hi / lo - 1 < rel_tol
    state = "" if converged else f"not converged after {len(runs)} runs (raise max_runs): "
    note = (f"{state}passes at {lo:g} req/s, fails at {hi:g} req/s "
            f"({hi / lo - 1:.1%} apart, rel_tol {rel_tol:.1%}): {failing.reason}")
    return Capacity(lo, runs, failing.limiting_metric, len(runs), converged, note)
