"""Run-to-run noise: how far a metric moves between two unchanged runs, where that number comes
from, and the gate band it makes. The numbers and their derivation are in docs/noise.md.

A baseline written from one run used to record spread 0, so its band was the tolerance alone, a
flat 10%: on an H200 that let a 3% throughput loss pass while TTFT p50, which moved 36% between
two quiet runs minutes apart, failed the next night. Now each entry stores its metric's
run-to-run spread `s` (relative to its value) and where it came from:

- "history": the spread of the last runs stored for the series, when the baseline is written
  from them (`--llmperf-from-history N`, history/from_history.py) and HISTORY_MIN_RUNS or more
  went into it: value and spread then come from the same runs;
- "repeats": the spread of this session's repeats (`--llmperf-repeat N`, N > 1), where it is
  wider than the prior: repeats in one session understate the spread between sessions;
- "prior": else the measured spread of the metric's family on this kind of hardware (PRIORS).

A metric with no prior for its kind keeps the old band (max(tolerance, 3 x its repeats'
spread)) unless history measured it: nothing says how far it moves between sessions.

The band is then max(floor, K x s), as a factor like the tolerance (gate.py): K x s above the
baseline for a lower-is-better metric, K x s / (1 + K x s) below it for a higher-is-better one.
A metric whose K x s exceeds NOISY_BAND is too noisy to gate: it is reported, stored and
trended, and gated only where a test names it in `gate=` (references.BaselineTable). Pure: no
pytest, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace

from pytest_llmperf.machine.hardware import is_gpu_class
from pytest_llmperf.metrics import registry
from pytest_llmperf.metrics.registry import OFFLINE_PREFIX, turn_of
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.verdict.baselines import Baseline, BaselineEntry

__all__ = ["FLOOR", "HISTORY_MIN_RUNS", "K", "NOISY_BAND", "PRIORS", "Prior", "Spread",
           "UNMEASURED", "band_of", "is_unmeasured", "kind_of", "noisy_line", "prior_for",
           "relative_spread_of", "split_noisy", "spread_for", "unmeasured_here", "with_spreads"]

# docs/noise.md, "Choosing K, the floor and the limit": on the H200 reruns K = 2 to 6 gave the
# same false alarms and 3 caught 10% losses where 4 missed a third of them. As the gate's
# NOISE_K, the usual 3 sigma; the priors are already the largest spread over the tests.
K = 3.0
# Below the 3% throughput or TPOT loss that must fail on an H200, above its measured rerun
# changes of those metrics (0.3%) with room for day-to-day drift (docs/noise.md).
FLOOR = 0.02
# A band wider than this gates nothing a night could act on (docs/noise.md).
NOISY_BAND = 0.30
# A spread from fewer runs is too uncertain to replace the prior (MAD of 2 values: one gap).
HISTORY_MIN_RUNS = 3
GPU, CPU = "gpu", "cpu"
# The band of a baseline whose noise was never measured on its machine (one run, its spread a
# prior measured elsewhere), until repeats or history measure it: only larger changes fail. CPU:
# the CPU suite's 2.5x, which no unchanged run of 10 on the CI machine exceeded (medians moved
# up to 2.09x; docs/gate.md); GPU: the widest band a gate may have (NOISY_BAND).
UNMEASURED = {CPU: 1.5, GPU: NOISY_BAND}
UNMEASURED_WHY = ("this machine's run-to-run spread is unmeasured (one run, a prior from "
                  "elsewhere; measure it: llmperf bootstrap-baselines)")
# The hardware classes whose reruns measured the priors (docs/noise.md): there a prior is this
# kind of machine's own spread. The CPU priors were measured on one VM, whose neighbours another
# machine does not share, so on a CPU a prior is never this machine's measurement.
PRIORS_MEASURED_ON = {GPU: frozenset({"h200"}), CPU: frozenset()}


@dataclass(frozen=True)
class Prior:
    """A metric family's measured run-to-run spread on one kind of hardware."""

    spread: float  # relative to the value, one run's (MAD x 1.4826, stats.py)
    what: str  # "GPU TTFT p50", for the summary


# The families of the priors below that are no distribution's: each metric names its own
# family (Metric.noise, as the summary shows it).
THROUGHPUT, ENGINE_START = "throughput", "engine start"
# The statistics priors are measured for; min, max and std have none.
_STATISTICS = ("p50", "mean", "p90", "p95", "p99")


def _priors(kind: str, table: Mapping[tuple[str, str], float]) -> dict[tuple[str, str], Prior]:
    return {(family, stat): Prior(spread, " ".join(filter(None, (kind.upper(), family, stat))))
            for (family, stat), spread in table.items()}


# GPU: the largest spread of each over the four tests two H200 runs both measured, rounded up
# to two digits (docs/noise.md, "GPU"; tests/unit/data/h200_reruns.json holds the numbers).
# CPU: the median over the CPU suite's 22 gated tests of their spread between two whole runs of
# the suite minutes apart on the 2-core VM (docs/noise.md, "CPU"), where that is wider than what
# docs/history.md, docs/cpu-engine.md and one rerun pair measured; a family not listed has no
# prior and keeps the tolerance band.
PRIORS: dict[str, dict[tuple[str, str], Prior]] = {
    GPU: _priors(GPU, {
        ("TTFT", "p50"): 0.33, ("TTFT", "mean"): 0.11, ("TTFT", "p90"): 0.030,
        ("TTFT", "p95"): 0.034, ("TTFT", "p99"): 0.036,
        ("TPOT", "p50"): 0.0018, ("TPOT", "mean"): 0.0068, ("TPOT", "p90"): 0.016,
        ("TPOT", "p95"): 0.029, ("TPOT", "p99"): 0.0059,
        ("ITL", "p50"): 0.0080, ("ITL", "mean"): 0.0070, ("ITL", "p90"): 0.030,
        ("ITL", "p95"): 0.040, ("ITL", "p99"): 0.41,
        ("E2EL", "p50"): 0.029, ("E2EL", "mean"): 0.0016, ("E2EL", "p90"): 0.0083,
        ("E2EL", "p95"): 0.022, ("E2EL", "p99"): 0.019,
        (THROUGHPUT, ""): 0.0017, (ENGINE_START, ""): 0.32,
    }),
    CPU: _priors(CPU, {
        ("TTFT", "p50"): 0.080, ("TTFT", "p90"): 0.065, ("TPOT", "p50"): 0.090,
        ("E2EL", "p50"): 0.085, ("E2EL", "p90"): 0.11, ("TPOT", "p90"): 0.15,
        ("TTFT", "p99"): 0.50, ("TPOT", "p99"): 0.50, ("ITL", "p99"): 0.50,
        ("E2EL", "p99"): 0.50,
        (THROUGHPUT, ""): 0.065, (ENGINE_START, ""): 0.099,
    }),
}


def kind_of(hardware_class: str | None) -> str:
    """GPU or CPU: which priors apply to a machine of this hardware class."""
    return GPU if is_gpu_class(hardware_class) else CPU


def family_of(name: str) -> tuple[str, str] | None:
    """(family, statistic) of a metric name, ("TTFT", "p50") for "ttft_s.p50" and
    "turn2:ttft_s.p50"; None for a metric of no family with a prior."""
    turn = turn_of(name)
    name = turn[1] if turn else name
    base, _, stat = name.partition(".")
    metric = registry.BY_NAME.get(base.removeprefix(OFFLINE_PREFIX))
    if metric is None or not metric.noise:
        return None
    if metric.distribution:
        return (metric.noise, stat) if stat in _STATISTICS else None
    return (metric.noise, "") if not stat else None


def prior_for(name: str, kind: str) -> Prior | None:
    family = family_of(name)
    return PRIORS[kind].get(family) if family else None


@dataclass(frozen=True)
class Spread:
    """A metric's run-to-run spread for a baseline: `relative` to its value, and whence."""

    relative: float
    source: str  # baselines.SPREAD_SOURCES
    what: str = ""  # a prior's family, e.g. "GPU TTFT p50"

    def describe(self) -> str:
        return f"prior for {self.what}" if self.source == "prior" else self.source


def _relative(spread: float, value: float) -> float:
    if value == 0:
        return 0.0 if spread == 0 else math.inf
    return spread / abs(value)


def spread_for(name: str, estimate: Estimate, kind: str) -> Spread | None:
    """Where a baseline written from `estimate` takes its run-to-run spread (module docstring);
    None: nowhere, so the entry keeps the old band."""
    if not (math.isfinite(estimate.value) and math.isfinite(estimate.spread)):
        return None
    relative = _relative(estimate.spread, estimate.value)
    if estimate.source == "history" and estimate.n >= HISTORY_MIN_RUNS:
        return Spread(relative, "history")
    prior = prior_for(name, kind)
    if prior is None:  # nothing measured between sessions: the old band, repeats and all
        return None
    # Repeats in one session share its machine state and understate the spread between
    # sessions (stats.py): they may widen the band past the prior, never narrow it.
    if estimate.source is None and estimate.n > 1 and relative > prior.spread:
        return Spread(relative, "repeats")
    return Spread(prior.spread, "prior", prior.what)


def with_spreads(entries: Mapping[str, BaselineEntry], estimates: Mapping[str, Estimate],
                 kind: str, *, keep_tolerance: Collection[str] = ()
                 ) -> dict[str, BaselineEntry]:
    """Entries (gate.make_entries) with each one's run-to-run spread and its source, and the
    floor as tolerance unless the tolerance is the user's (`keep_tolerance`: a test's
    tolerance=, a hand edit). An entry with no spread to store is left as it is."""
    out = {}
    for name, entry in entries.items():
        found = spread_for(name, estimates[name], kind) if name in estimates else None
        if found is None:
            out[name] = entry
            continue
        tolerance = entry.tolerance if name in keep_tolerance else FLOOR
        out[name] = replace(entry, spread=found.relative * abs(entry.value),
                            spread_source=found.source, tolerance=tolerance)
    return out


def relative_spread_of(entry: BaselineEntry) -> float:
    return _relative(entry.spread, entry.value)


def band_of(entry: BaselineEntry) -> float:
    """K x the entry's relative run-to-run spread: its noise band, before the floor."""
    return K * relative_spread_of(entry)


def _too_noisy(entry: BaselineEntry) -> bool:
    # Only an entry that says its spread is run-to-run: an old one's is its repeats' only.
    return entry.spread_source is not None and band_of(entry) > NOISY_BAND


def split_noisy(baseline: Baseline, named: Iterable[str] = ()
                ) -> tuple[Baseline, dict[str, BaselineEntry]]:
    """The baseline without its too-noisy entries, and those, except the ones a test named."""
    named = set(named)
    noisy = {name: entry for name, entry in baseline.metrics.items()
             if _too_noisy(entry) and name not in named}
    kept = {name: entry for name, entry in baseline.metrics.items() if name not in noisy}
    return replace(baseline, metrics=kept), noisy


def noisy_line(noisy: Mapping[str, BaselineEntry], kind: str) -> str:
    """The summary's one line for a test's metrics too noisy to gate."""
    names = sorted(noisy)
    parts = []
    for name in names:
        entry = noisy[name]
        prior = prior_for(name, kind)
        source = entry.spread_source or ""
        whence = f"prior for {prior.what}" if source == "prior" and prior else source
        parts.append(f"{relative_spread_of(entry):.1%} ({whence})")
    bands = ", ".join(f"{band_of(noisy[name]):.0%}" for name in names)
    one = len(names) == 1
    return (f"{', '.join(names)} not gated: run-to-run spread{'' if one else 's'} "
            f"{', '.join(parts)} make{'s' if one else ''} {'its band' if one else 'their bands'} "
            f"{K:g} x spread = {bands}, over the {NOISY_BAND:.0%} a gate may have; name "
            f"{'it' if one else 'them'} in gate= to gate {'it' if one else 'them'}")


def is_unmeasured(entry: BaselineEntry, hardware_class: str | None) -> bool:
    """Was the entry's noise never measured on this kind of machine: one run, its spread a prior
    measured elsewhere (repeats, n > 1, or history measured it)?"""
    return entry.spread_source == "prior" and entry.n == 1 \
        and hardware_class not in PRIORS_MEASURED_ON[kind_of(hardware_class)]


def unmeasured_here(baseline: Baseline, hardware_class: str | None) -> Baseline:
    """The baseline with each entry of unmeasured noise given the wide band UNMEASURED (gate.py
    says so in its line)."""
    wide = UNMEASURED[kind_of(hardware_class)]
    return replace(baseline, metrics={
        name: replace(entry, unmeasured=wide) if is_unmeasured(entry, hardware_class) else entry
        for name, entry in baseline.metrics.items()})
