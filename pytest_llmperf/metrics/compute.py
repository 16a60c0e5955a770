"""Turn request records into the run's metrics: every metric the registry computes per run, in
its order (metric.py says what a definition holds; docs/metrics.md, Definitions).

Pure: no HTTP, no pytest.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.machine.disturbance import Disturbance
from pytest_llmperf.metrics import registry
from pytest_llmperf.metrics.metric import STATISTICS, Metric, RunInputs, Summary, Value
from pytest_llmperf.metrics.request_metrics import request_itls, request_tpot
from pytest_llmperf.records import RequestRecord

__all__ = ["DISTRIBUTIONS", "SCALARS", "RunMetrics", "Summary", "compute_metrics",
           "request_itls", "request_samples", "request_tpot"]

# The metrics every run has (RunMetrics' attributes): the distributions, then the scalars.
DISTRIBUTIONS: tuple[str, ...] = tuple(
    m.name for m in registry.COMPUTED
    if isinstance(m, Metric) and m.distribution and not m.absent)
SCALARS: tuple[str, ...] = tuple(
    m.name for m in registry.COMPUTED
    if isinstance(m, Metric) and not m.distribution and not m.absent)


@dataclass(frozen=True, init=False, eq=False, repr=False)
class RunMetrics:
    """Client-side metrics of one run, by name: `metrics.ttft_s.p90`, `metrics.failed`,
    `metrics.get("server:kv_cache_usage_max")`. Distributions cover completed requests only.
    Frozen and hashable, like the Summaries it holds; `dataclasses.replace(metrics, name=value)`
    gives a copy with a metric changed."""

    __slots__ = ("_flat", "_values")
    _values: dict[str, Any]

    def __init__(self, _values: Mapping[str, Any] | None = None, **named: Any) -> None:
        values = {**(_values or {}), **named}
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_flat", dict(_flatten(values)))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # the slot itself, before __init__ (copy, pickle)
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"RunMetrics has no metric {name!r}") from None

    def __reduce__(self):
        return (_restore, (tuple(self._values.items()),))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunMetrics) and _comparable(self) == _comparable(other)

    def __hash__(self) -> int:
        return hash(tuple(_comparable(self).items()))

    def __repr__(self) -> str:
        return f"RunMetrics({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"

    def flat(self) -> dict[str, float]:
        """Every metric by the name `get` accepts: "ttft_s.p50", ..., "output_throughput_tok_s"."""
        return dict(self._flat)

    def get(self, name: str) -> float:
        found = self._flat.get(name)
        if found is not None:
            return found
        metric = registry.lookup(name)
        if metric is not None and metric.absent:
            raise KeyError(metric.absent.format(name=repr(name)))
        raise KeyError(_unknown_metric(name))


def _restore(values: tuple[tuple[str, Any], ...]) -> RunMetrics:
    return RunMetrics(dict(values))


def _comparable(metrics: RunMetrics) -> dict[str, Any]:
    # NaN is no NaN's equal; two runs that both had no goodput are still the same run.
    return {name: "nan" if isinstance(value, float) and math.isnan(value) else value
            for name, value in metrics._values.items()}


def _flatten(values: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    for name, value in values.items():
        if isinstance(value, Summary):
            yield from ((f"{name}.{stat}", float(getattr(value, stat))) for stat in STATISTICS)
        else:
            yield name, float(value)


def _unknown_metric(name: str) -> str:
    return (
        f"unknown metric {name!r}: use a scalar ({', '.join(SCALARS)}) or a distribution with a "
        f"statistic ({DISTRIBUTIONS[0]}.p50; distributions: {', '.join(DISTRIBUTIONS)}; "
        f"statistics: {', '.join(STATISTICS)})"
    )


def request_samples(name: str, records: Sequence[RequestRecord]) -> list[float]:
    """The values a distribution's Summary is computed from ("ttft_s": one per completed
    request), for a writer that shows more than the Summary (the run file's quartiles)."""
    metric = registry.BY_NAME[name]
    if metric.samples is None:
        raise KeyError(f"{name!r} is no distribution of the requests' values")
    return list(metric.samples(RunInputs(records)))


def compute_metrics(records: Sequence[RequestRecord],
                    goodput_limits: Mapping[str, float] | None = None,
                    server_metrics: Mapping[str, float] | None = None, *,
                    disturbance: Disturbance | None = None,
                    engine_start_s: float | None = None) -> RunMetrics:
    """Every metric of registry.COMPUTED that this run has. `goodput_limits`: the test's
    per-request SLO limits (goodput.limits_from; None: no goodput). `server_metrics`: the run's
    /metrics summary (client/server_metrics.py). `disturbance`: the watch over the engine's
    cards, for energy (machine/watch.py). `engine_start_s`: where this session started the
    engine for this run, its time to healthy."""
    run = RunInputs(records, goodput_limits, server_metrics or {}, disturbance, engine_start_s)
    for metric in registry.COMPUTED:
        if isinstance(metric, Metric):
            value: Value = metric.compute(run) if metric.compute else None
            if isinstance(value, Mapping):  # some statistics of a distribution: by their names
                run.values.update((f"{metric.name}.{stat}", v) for stat, v in value.items())
            elif value is not None:
                run.values[metric.name] = value
        else:
            run.values.update(metric.compute(run))
    return RunMetrics(run.values)
