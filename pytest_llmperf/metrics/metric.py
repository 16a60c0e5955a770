"""What a metric is: one definition holds its name, unit, which way is better, how a table shows
it, what it is computed from and how. The definitions live beside their computations
(request_metrics.py, goodput.py, energy.py, server.py, turns.py, engine_start.py, derived.py,
capacity.py); registry.py gathers them, compute.py computes a run's from them, and every table,
gate and file asks the registry. AIPerf declares its metrics the same way, one class each with
its tag, unit, header, required inputs and compute
(https://github.com/ai-dynamo/aiperf/blob/main/aiperf/metrics/base_metric.py); a frozen
dataclass does it here without subclass registration.

Nothing here imports a definition module, so every one of them can import this one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from pytest_llmperf.machine.disturbance import Disturbance
from pytest_llmperf.records import RequestRecord

__all__ = ["HIGHER", "LOWER", "STATISTICS", "Column", "Family", "Metric", "RunInputs",
           "Summary", "Value"]

LOWER, HIGHER = "lower", "higher"
# As Summary has them (a unit test holds the two together).
STATISTICS = ("n", "mean", "std", "p50", "p90", "p95", "p99", "min", "max")


@dataclass(frozen=True, slots=True)
class Summary:
    """Statistics of one distribution; NaN everywhere (n=0) when it has no values."""

    n: int
    mean: float
    std: float
    p50: float
    p90: float
    p95: float
    p99: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Summary:
        data = np.asarray(list(values), dtype=float)
        if data.size == 0:
            # An empty distribution is a legitimate outcome (every request failed, or all
            # outputs were one token so no TPOT); NaN makes any threshold on it fail visibly.
            nan = math.nan
            return cls(0, nan, nan, nan, nan, nan, nan, nan, nan)
        # Linear-interpolated percentiles and the population std (ddof=0) are numpy's defaults
        # and exactly what `vllm bench serve` reports, so the two tools agree on the same data.
        p50, p90, p95, p99 = (float(p) for p in np.percentile(data, [50, 90, 95, 99]))
        return cls(n=int(data.size), mean=float(data.mean()), std=float(data.std(ddof=0)),
                   p50=p50, p90=p90, p95=p95, p99=p99, min=float(data.min()),
                   max=float(data.max()))

    def get(self, stat: str) -> float:
        if stat not in STATISTICS:
            raise KeyError(f"unknown statistic {stat!r}: use one of {', '.join(STATISTICS)}")
        return getattr(self, stat)


# What a metric's computation gives for one run: a number, a whole distribution, some
# statistics of one ({"mean": ...}: a server's histogram has no std), or None: not in this run.
Value = float | int | Summary | Mapping[str, float] | None


@dataclass
class RunInputs:
    """What one run's metrics are computed from. `values` holds what the metrics computed so far
    gave, by name, so a metric reads the ones it `needs` (goodput the duration, energy the token
    counts)."""

    records: Sequence[RequestRecord]
    goodput_limits: Mapping[str, float] | None = None  # goodput.limits_from
    server: Mapping[str, float] = field(default_factory=dict)  # client/server_metrics.py
    disturbance: Disturbance | None = None  # machine/watch.py's reading of the engine's cards
    engine_start_s: float | None = None  # where this session started the engine
    values: dict[str, Value] = field(default_factory=dict)

    @cached_property
    def done(self) -> list[RequestRecord]:
        """Same as vllm: a request completes when it streamed tokens without an error; failed
        ones are counted, never folded into the distributions."""
        return [r for r in self.records if r.ok]

    @cached_property
    def sent(self) -> list[RequestRecord]:
        return [r for r in self.records if r.sent_s is not None]

    def value(self, name: str) -> Any:
        return self.values[name]


@dataclass(frozen=True)
class Column:
    """How a table shows a metric: `fmt` of the value x its scale, `order` from the left in a
    full table, `priority` in the short one (1 is the most telling; None: only with -v)."""

    fmt: str
    order: int
    priority: int | None = None
    statistic: str = ""  # a distribution's statistic ("p50")
    optional: bool = False  # shown only where some row has a value (cost, goodput)


@dataclass(frozen=True)
class Metric:
    """One metric. Exactly one of `compute` (per run, from RunInputs), `derive` (per result,
    from its medians and its machine: metrics/derived.py) or neither (a number found by a search
    or an offline run, not by a run's requests: capacity.py) says where its value comes from."""

    name: str
    unit: str  # "s", "tok/s", "req/s", "requests", "tokens", "fraction", "USD/1M tok"
    better: str  # LOWER or HIGHER
    header: str = ""  # a table's column header for it ("TTFT"); "" where no table shows it
    scale: float = 1.0  # from `unit` to the unit a table shows (s -> ms: 1e3)
    meaning: str = ""  # for the legend under a table
    distribution: bool = False  # summarised by statistics: "ttft_s.p50"
    columns: tuple[Column, ...] = ()
    needs: tuple[str, ...] = ()  # metrics computed before it that `compute` reads
    compute: Callable[[RunInputs], Value] | None = field(default=None, compare=False)
    # A distribution's values, one per request, chunk gap or token, that `compute` summarises:
    # for a writer that wants more than the Summary (quartiles, outliers).
    samples: Callable[[RunInputs], Iterable[float]] | None = field(default=None, compare=False)
    derive: Callable[[Any], float | None] | None = field(default=None, compare=False)
    # Why a run may lack it, for a message that names it; "" for a metric every run has.
    absent: str = ""
    # The family whose measured run-to-run spread is its prior (verdict/noise.py PRIORS): "TTFT",
    # "TPOT", "ITL", "E2EL", "throughput", "engine start"; "" for a metric with no prior.
    noise: str = ""
    # One sample serves every repeat of a test (an engine's start): combined, its n is 1.
    one_sample: bool = False


def latency(name: str, header: str = "", meaning: str = "", **more: Any) -> Metric:
    """A distribution in seconds, shown in ms; given its `samples`, computed as their Summary."""
    if more.get("samples") and not more.get("compute"):
        samples = more["samples"]
        more["compute"] = lambda run: Summary.of(samples(run))
    return Metric(name, "s", LOWER, header, 1e3, meaning, distribution=True, **more)


@dataclass(frozen=True)
class Family:
    """Metrics named by a form rather than listed, as many as a run has: a conversation's turns
    ("turn3:ttft_s.p50"), a drafter's positions. `match` gives the metric a name of the form
    stands for (None: not of this family); `compute` every name and value of one run."""

    match: Callable[[str], Metric | str | None]  # a str: the name of the metric it stands for
    compute: Callable[[RunInputs], Mapping[str, float]]
    needs: tuple[str, ...] = ()
    absent: str = ""
