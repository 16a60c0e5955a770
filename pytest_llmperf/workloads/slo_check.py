"""Whether one run of a workload was served within an SLO: every target met, no request failed,
and the engine kept up with the load offered (KEEP_UP). One probe of the capacity search
(sweeps.find_capacity), and the scenarios' keep-up check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_llmperf.metrics.compute import DISTRIBUTIONS, SCALARS, RunMetrics
from pytest_llmperf.metrics.registry import STATISTICS
from pytest_llmperf.verdict import gate
from pytest_llmperf.workloads.loads import Knob, knob_of, load_of, offered_rate
from pytest_llmperf.workloads.workload import Workload

__all__ = ["KEEP_UP", "KNOWN_METRICS", "CapacityRun", "achieved_rate", "judge_rate"]

# The completion rate must reach this share of the offered rate. Below it, requests arrive
# faster than they finish: the queue, and so every latency, grows without bound the longer the
# run lasts. A short run can still show fine percentiles (most requests finished before the
# queue got long), so latency alone would report a capacity the engine cannot sustain.
KEEP_UP = 0.9


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
    """One probe of the search: its load (the nominal rate in requests/s, or a trace's speedup:
    `knob` says which), whether it met everything, and why not.

    `offered_req_s` is what the probe's schedule really offered (offered_rate).
    """

    load: float
    passed: bool
    metrics: RunMetrics
    limiting_metric: str | None = None
    reason: str = ""
    offered_req_s: float = math.nan
    knob: Knob = "rate"


KNOWN_METRICS = tuple(f"{d}.{s}" for d in DISTRIBUTIONS for s in STATISTICS) + SCALARS


def judge_rate(workload: Workload, metrics: RunMetrics, slo: gate.SLO) -> CapacityRun:
    """Does this run of a rate workload (or a trace replay at a speedup) count as served within
    the SLO? Every reason it does not, joined into one line; the first one is the limiting
    metric."""
    knob = knob_of(workload)
    load = load_of(workload, knob)
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
        return CapacityRun(load, True, metrics, None, "met every target", offered, knob)
    reason = "; ".join(message for _, message in failures)
    return CapacityRun(load, False, metrics, failures[0][0], reason, offered, knob)
