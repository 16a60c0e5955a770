"""Every metric pytest-llmperf reports, gathered from the modules that define and compute them
(metric.py says what a definition holds). The gate, the A/B judge, the run file, the tables and
the plots all ask here, so a metric cannot be better-when-lower in one place and higher in
another, nor shown in a table that does not know it.

A name is a base metric ("output_throughput_tok_s"), a distribution with a statistic
("ttft_s.p99"), an offline run's metric ("offline_output_throughput_tok_s": the same metric
measured by `LLM.generate`), a server metric ("server:kv_cache_usage_max", from /metrics) or a
conversation's metric over one turn index ("turn3:ttft_s.p50", metrics/turns.py).
Units are in the names (docs/metrics.md); `scale` turns the unit into the one a table shows
(seconds into ms, a fraction into %).

A new metric is one Metric in the module that computes it (or a new module and its line in
COMPUTED or METRICS below): its table column, its direction and its place in every run's
metrics follow from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics import (
    agents,
    capacity,
    derived,
    energy,
    engine_start,
    goodput,
    lora,
    reasoning,
    request_metrics,
    server,
    spec_decode,
    turns,
)
from pytest_llmperf.metrics.metric import HIGHER, LOWER, STATISTICS, Column, Family, Metric
from pytest_llmperf.metrics.stats import Estimate, combine_runs
from pytest_llmperf.metrics.turns import TURN_METRICS, TURN_PREFIX, turn_of, turn_problem

__all__ = ["BY_NAME", "COMPUTED", "HIGHER", "LOWER", "METRICS", "OFFLINE_PREFIX", "SERVER_PREFIX",
           "STATISTICS", "TURN_METRICS", "TURN_PREFIX", "Metric", "UnknownMetricError",
           "columns", "combine", "direction", "formatter", "known", "lookup", "turn_of",
           "turn_problem"]

OFFLINE_PREFIX = "offline_"
SERVER_PREFIX = server.PREFIX

# What a run computes, in this order (a metric's `needs` come before it): as RunMetrics.flat()
# lists them.
COMPUTED: tuple[Metric | Family, ...] = (
    *request_metrics.METRICS, *reasoning.METRICS, *agents.METRICS, *goodput.METRICS,
    turns.FAMILY, lora.FAMILY, *server.METRICS,
    *spec_decode.METRICS, spec_decode.FAMILY, *energy.METRICS, *engine_start.METRICS)
METRICS: tuple[Metric, ...] = (
    *(metric for metric in COMPUTED if isinstance(metric, Metric)),
    *derived.METRICS, *capacity.METRICS)
BY_NAME: dict[str, Metric] = {metric.name: metric for metric in METRICS}
FAMILIES: tuple[Family, ...] = tuple(f for f in COMPUTED if isinstance(f, Family))


def check(computed: tuple[Metric | Family, ...], metrics: tuple[Metric, ...]) -> None:
    """ValueError unless each metric is defined once and each computed one's `needs` are
    computed before it (compute_metrics computes them in this order)."""
    names = [metric.name for metric in metrics]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"metric defined twice: {', '.join(twice)}")
    before: set[str] = set()
    for definition in computed:
        name = definition.name if isinstance(definition, Metric) else "a family"
        missing = [need for need in definition.needs if need not in before]
        if missing:
            raise ValueError(f"{name} needs {', '.join(missing)}, computed after it or never")
        before.add(name)


check(COMPUTED, METRICS)


def combine(runs: Sequence[Mapping[str, float]]) -> dict[str, Estimate]:
    """The repeats' metrics (one flat dict per repeat) combined, as stats.combine_runs does,
    with a one-sample metric (Metric.one_sample: an engine start that served every repeat)
    counted as the one sample it is."""
    combined = combine_runs(runs)
    for name, estimate in combined.items():
        metric = BY_NAME.get(name)
        if metric is not None and metric.one_sample:
            combined[name] = replace(estimate, n=1)
    return combined


class UnknownMetricError(InputError):
    """A metric name that no table, gate or target knows; the message lists the known ones."""


def lookup(name: str) -> Metric | None:
    """The metric a name refers to ("ttft_s.p99" -> ttft_s, "turn2:ttft_s.p50" -> ttft_s), or
    None if it is none of ours."""
    for family in FAMILIES:
        found = family.match(name)
        if isinstance(found, str):
            return lookup(found)
        if found is not None:
            return found
    if turn_problem(name):
        return None
    base, dot, stat = name.partition(".")
    if base.startswith(OFFLINE_PREFIX) and base[len(OFFLINE_PREFIX):] in BY_NAME:
        base = base[len(OFFLINE_PREFIX):]
    metric = BY_NAME.get(base)
    if metric is None or bool(dot) != metric.distribution or (dot and stat not in STATISTICS):
        return None
    return metric


def known(name: str) -> Metric:
    """`lookup`, or UnknownMetricError naming the name and the forms a name takes."""
    metric = lookup(name)
    if metric is None and (problem := turn_problem(name)):
        raise UnknownMetricError(f"unknown metric {name!r}: {problem}")
    if metric is None:
        raise UnknownMetricError(
            f"unknown metric {name!r}: use a scalar (output_throughput_tok_s, ...) or a "
            f"distribution with a statistic (ttft_s.p50; statistics: {', '.join(STATISTICS)})")
    return metric


def direction(name: str) -> str:
    """LOWER or HIGHER: which way `name` is better."""
    return known(name).better


def columns() -> list[tuple[str, Metric, Column]]:
    """Every table column, left to right: the name it shows ("ttft_s.p50"), its metric, how."""
    found = [(f"{metric.name}.{column.statistic}" if column.statistic else metric.name, metric,
              column) for metric in METRICS for column in metric.columns]
    return sorted(found, key=lambda item: item[2].order)


def formatter(name: str, *shown: float) -> Callable[[float], str]:
    """How a message shows numbers of `name`: one unit for all of `shown`, chosen from the
    largest, so they line up ("212.0 ms vs 180.5 ms", "1.250 s vs 0.980 s")."""
    metric = lookup(name)
    unit = metric.unit if metric else ""
    if unit in ("tok/s", "req/s"):
        return lambda v: f"{v:.0f} {unit}" if abs(v) >= 100 else f"{v:.2f} {unit}"
    if unit == "x":  # a speedup: 2.83x
        return lambda v: f"{v:.3g}x"
    if unit == "s":
        if max((abs(v) for v in shown if math.isfinite(v)), default=0.0) >= 1:
            return lambda v: f"{v:.3f} s"
        return lambda v: f"{v * 1e3:.1f} ms" if abs(v) >= 1e-3 else f"{v * 1e3:.3f} ms"
    return lambda v: f"{v:.4g}"
