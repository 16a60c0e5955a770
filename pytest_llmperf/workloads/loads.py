"""A workload at another load: a rate, a concurrency, or a trace replay's speedup; the load a
workload's schedule really offers. What sweeps and the capacity search (sweeps.py) turn.

Pure: nothing here measures; `Measure` is the caller's `measure(workload) -> RunMetrics`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Literal

from pytest_llmperf.client.patterns import Concurrency, Trace
from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.compute import RunMetrics
from pytest_llmperf.workloads.workload import Workload

__all__ = ["Knob", "Measure", "at_knob", "concurrency_workload", "knob_of", "load_label",
           "load_of", "offered_rate", "rate_workload", "speedup_workload"]

Measure = Callable[[Workload], RunMetrics]

# What a capacity search turns: a Poisson rate, or the pace of a trace replay.
Knob = Literal["rate", "speedup"]


def rate_workload(base: Workload, rate: float) -> Workload:
    """`base` at `rate` requests/s; only the rate changes.

    The pattern says what of it a rate keeps (LoadPattern.with_rate): a Rate its burstiness and
    concurrency cap, a Ramp its cap (a Ramp is Poisson); a closed-loop base becomes plain
    Poisson, since its concurrency is what a rate replaces. So does a conversation (Sessions).
    """
    return replace(base, name=f"{base.name}-rate{rate:g}", pattern=base.pattern.with_rate(rate))


def speedup_workload(base: Workload, speedup: float) -> Workload:
    """`base`, a trace replay, `speedup` times faster than recorded: the rate_workload of a
    trace. Only the pace changes; the rows, their lengths and prompts, the concurrency cap, the
    seed and the warm-up stay. (A trace's arrivals are its point: a search that swapped them for
    Poisson ones would measure another workload.)"""
    source = base.source.at_speedup(speedup)
    if source is None:
        raise InputError(f"speedup_workload: {base.name!r} is no trace replay; a speedup "
                         "applies to Workload.trace(...)")
    pattern = Trace(offsets_s=source.offsets_s, max_concurrency=base.pattern.max_concurrency)
    return replace(base, name=f"{base.name}-speedup{source.speedup:g}", pattern=pattern,
                   source=source)


def concurrency_workload(base: Workload, concurrency: int) -> Workload:
    pattern = Concurrency(max_concurrency=concurrency)
    return replace(base, name=f"{base.name}-c{concurrency}", pattern=pattern)


def knob_of(workload: Workload) -> Knob:
    """What a capacity search of `workload` turns: a trace replay's speedup, else the rate."""
    return "speedup" if workload.pattern.replay else "rate"


def at_knob(knob: Knob) -> Callable[[Workload, float], Workload]:
    """How a workload is put at a load of this knob."""
    return speedup_workload if knob == "speedup" else rate_workload


def load_of(workload: Workload, knob: Knob) -> float:
    """The load a workload is at: its speedup, or its rate (requests/s)."""
    return workload.source.speedup if knob == "speedup" else workload.pattern.requests_per_s


def load_label(load: float, knob: Knob) -> str:
    """"2x" or "4 req/s"."""
    return f"{load:g}x" if knob == "speedup" else f"{load:g} req/s"


def offered_rate(workload: Workload) -> float:
    """The rate the workload's seeded schedule really offers: (n - 1) / span of arrivals.

    A Poisson run of n requests offers its nominal rate only on average (relative spread about
    1/sqrt(n), 10% at n = 100); the schedule is fixed by the seed, so the exact figure is known
    and the keep-up check need not allow for that noise. NaN when there is no span to divide by
    (one request, or everything sent at once).
    """
    n = workload.num_requests
    span = float(workload.pattern.arrival_offsets(n, workload.seed)[-1]) if n > 1 else 0.0
    return (n - 1) / span if span > 0 else math.nan
