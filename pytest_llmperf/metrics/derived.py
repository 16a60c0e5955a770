"""What a result's numbers come to on its machine, worked out once per result: the engine's output
tok/s per GPU (gpus.py), its dollars per million tokens at its share of a price (cost.py) and its
decode roofline (roofline.py), each from the medians over the repeats (what the gate judges).

The tables (reports/model.py) and the run file (reports/runfile.py) read these; neither works one
out for itself, so the two cannot disagree. Each number a row shows is a metric of METRICS,
defined with how it is read off a Derived.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pytest_llmperf.machine.hardware import is_gpu_fingerprint
from pytest_llmperf.metrics import cost, gpus, roofline
from pytest_llmperf.metrics.metric import HIGHER, LOWER, Column, Metric
from pytest_llmperf.metrics.stats import combine_runs
from pytest_llmperf.numbers import finite_or_none

__all__ = ["METRICS", "Derived", "by_test", "derive", "derive_all"]


class Result(Protocol):
    """What a derivation reads of a Result (result.py), which it cannot import: the registry,
    which Result's metrics ask, gathers this module's METRICS."""

    test_id: str
    runs: Sequence[Any]  # RunMetrics
    metrics: Any  # RunMetrics
    engine: Any  # metrics/facts.py's EngineFacts
    fingerprint: Any  # the machine's Fingerprint, or None


# The measured metrics the cost is worked out from.
THROUGHPUTS = ("output_throughput_tok_s", "total_throughput_tok_s")


@dataclass(frozen=True)
class Derived:
    """One result's derived numbers; None where there is none (a CPU has no GPUs, no price was
    given, a throughput is missing)."""

    engine_gpus: int | None  # the engine's GPUs, TP x PP x DP; None on a CPU machine
    output_per_gpu: float | None  # the median output tok/s over them
    share: cost.Share | None  # the engine's share of the price; None without a price
    usd_per_1m: Mapping[str, float | None]  # cost.PER_OUTPUT and PER_TOTAL
    roofline: roofline.Roofline | None
    no_roofline: str = ""  # why there is no roofline, in one line
    # Whose numbers they are (the result's measurement id), so a reader finds a result's own
    # by its id rather than by its place in a list.
    test_id: str = ""

    def values(self) -> dict[str, float | None]:
        """A report row's derived columns: every metric of METRICS."""
        return {metric.name: metric.derive(self) for metric in METRICS if metric.derive}

    def to_dict(self) -> dict[str, Any]:
        """A run file result's "cost" ({} without a price), "per_gpu" ({} on a CPU) and
        "roofline" ({"none": why} where there is none)."""
        priced = {} if self.share is None else {**self.share.to_dict(), **self.usd_per_1m}
        per_gpu = {} if self.engine_gpus is None else {"gpus": self.engine_gpus,
                                                       gpus.PER_GPU: self.output_per_gpu}
        found = {"none": self.no_roofline} if self.roofline is None else {
            name: finite_or_none(value) for name, value in self.roofline.to_dict().items()}
        return {"cost": priced, "per_gpu": per_gpu, "roofline": found}


def _roofline_fraction(found: Derived) -> float | None:
    return None if found.roofline is None else finite_or_none(found.roofline.fraction)


_COST = ("$/1M out, $/1M tot = dollars per million output and total tokens, at the engine's "
         "share of the price (on its engine line)")
METRICS = (
    # Output tok/s over the engine's GPUs (TP x PP x DP), GPU runs only (gpus.py).
    Metric(gpus.PER_GPU, "tok/s", HIGHER, "out/GPU",
           meaning="out/GPU = output tok/s per GPU the engine uses (TP x PP x DP)",
           columns=(Column("{:.1f}", 40, optional=True),),
           derive=lambda found: found.output_per_gpu),
    Metric(cost.PER_OUTPUT, "USD/1M tok", LOWER, "$/1M out", meaning=_COST,
           columns=(Column("{:.4g}", 180, 9, optional=True),),
           derive=lambda found: found.usd_per_1m[cost.PER_OUTPUT]),
    Metric(cost.PER_TOTAL, "USD/1M tok", LOWER, "$/1M tot",
           columns=(Column("{:.4g}", 190, 18, optional=True),),
           derive=lambda found: found.usd_per_1m[cost.PER_TOTAL]),
    Metric(roofline.FRACTION, "fraction", HIGHER, "roof%", 100, (
        "roof% = the GPU memory-bandwidth lower bound of a decode step as a share of the "
        "measured TPOT p50 (docs/roofline.md)"),
        columns=(Column("{:.0f}", 200, 10, optional=True),), derive=_roofline_fraction),
)


def derive(result: Result, price: cost.Price | None = None, root: Path | None = None) -> Derived:
    """`price`: the session's (cost.for_hardware); `root`: where a relative model path is, for
    the roofline's model config."""
    estimates = combine_runs([run.flat() for run in result.runs or (result.metrics,)])
    medians = {name: estimate.value for name, estimate in estimates.items()}
    output = finite_or_none(medians["output_throughput_tok_s"])
    machine = result.fingerprint.to_dict() if result.fingerprint else {}
    on_gpu = is_gpu_fingerprint(machine)
    share = None if price is None else cost.share_of(price, result.engine, machine)
    throughputs = {name: finite_or_none(medians[name]) for name in THROUGHPUTS}
    inputs = {name: medians[name] for name in roofline.INPUTS if name in medians}
    try:
        found, why = roofline.roofline(result.engine, machine, inputs, root=root), ""
    except roofline.NoRoofline as exc:
        found, why = None, str(exc)
    return Derived(
        engine_gpus=gpus.parallelism(result.engine).gpus if on_gpu else None,
        output_per_gpu=gpus.output_per_gpu(output, result.engine, machine),
        share=share,
        usd_per_1m=cost.per_million_tokens(throughputs, share and share.usd_per_hour),
        roofline=found,
        no_roofline=why,
        test_id=result.test_id)


def derive_all(results: Sequence[Result], price: cost.Price | float | None = None,
               root: Path | None = None) -> list[Derived]:
    """derive for each result; a bare number as `price` is the whole machine's (cost.as_price)."""
    price = cost.as_price(price)
    return [derive(result, price, root) for result in results]


def by_test(derived: Sequence[Derived]) -> dict[str, Derived]:
    """Each result's derived numbers by its measurement id."""
    return {found.test_id: found for found in derived}
