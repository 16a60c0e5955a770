"""Verdicts: a metric against its baseline (relative gate) or against a hard target (SLO).

Relative gate. A metric regresses when it is worse than the baseline by more than

    allowed = max(floor, NOISE_K x noise),  noise = sqrt(s_baseline^2 + s_now^2)

in the metric's own direction, and is reported as an improvement (a stale baseline: a warning,
never a failure) when it is better by more than the same band. The floor makes the tolerance a
factor, as asv's --factor is: a change by more than (1 + tolerance) times, either way. Upwards
that is tolerance x |baseline|; downwards tolerance / (1 + tolerance) x |baseline|. So a
latency may grow 50% and a throughput fall 33% under a 0.5 tolerance: both are 1.5 times
worse. (A plain -50% would let a throughput halve, and wide bands of 1.0 or more could never fail
a throughput at all.) For a 10% tolerance the two readings differ by under a point: +10% / -9.1%.
`s` is each side's robust spread (stats.py). The two spreads add in quadrature because the gate
judges a difference of two independent noisy estimates, and the variance of a difference is the
sum of the variances. The tolerance is a floor in the spirit of asv's 10% factor and Bencher's
percentage thresholds; the noise term keeps the gate from sitting inside the noise (CodSpeed's
lesson: a 2% gate on 2.66% noise alarmed ~45% of the time). NOISE_K = 3 is the usual "3 sigma"
(0.13% one-sided for normal noise), close in strictness to asv's p < 0.002. A value exactly on
the band edge passes.

That is the rule for a baseline entry without `spread_source`, whose spread is its repeats' only
(every entry written before the field existed). An entry with one stores its metric's
run-to-run spread (noise.py: from repeats, the history store or a measured prior), and its band
is max(tolerance, noise.K x that spread), both as factors:

    ttft_s.p50 regressed: 900.0 ms vs baseline 362.1 ms (+148.6%, allowed +99.0% by 3 x
    run-to-run spread 33.0% (prior), lower is better) [...]

On an H200 the floor (noise.FLOOR, 2%) fails a 3% throughput loss, while TTFT p50, whose runs
moved 36% apart, gets a band so wide that it is gated only where a test names it
(docs/noise.md).

Messages are one line each and carry every fact needed to act: value, baseline, change, the
band and where it came from, the direction, the file and table, and the command to update:

    ttft_s.p50 regressed: 312.0 ms vs baseline 210.0 ms (+48.6%, allowed +10.0%, lower is
    better) [baselines/cpu/test_cpu.toml :: "test_fixed[64]"]; if this change is intended,
    update with: pytest --llmperf-update-baselines "suites/test_cpu.py::test_fixed[64]"

Units follow the metric name: `*_s` in ms below one second (else s), `*_tok_s` in tok/s,
`*_req_s` in req/s; both numbers of a message use the same unit. No pytest imports here.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace

from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics import phases
from pytest_llmperf.metrics.registry import (
    SERVER_PREFIX,
    UnknownMetricError,
    formatter,
    lookup,
    turn_of,
    turn_problem,
)
from pytest_llmperf.metrics.registry import direction as metric_direction
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.numbers import is_real
from pytest_llmperf.verdict import detectable
from pytest_llmperf.verdict import noise as noise_mod
from pytest_llmperf.verdict.baselines import Baseline, BaselineEntry
from pytest_llmperf.verdict.status import Status

__all__ = [
    "DEFAULT_GATED",
    "DEFAULT_TOLERANCE",
    "NOISE_K",
    "SLO",
    "GateReport",
    "Origin",
    "Target",
    "UnknownMetricError",
    "Verdict",
    "band_side",
    "check_baseline",
    "check_metric",
    "check_names",
    "check_target",
    "check_targets",
    "make_entries",
]

NOISE_K = 3.0
DEFAULT_TOLERANCE = 0.10
# What a new baseline gates unless told otherwise. Each gated metric is one more chance of a
# false alarm, so: medians and p90s, which carry the signal; not p99/max (on a shared CPU they
# swing 2-5x between runs, docs/cpu-engine.md, Cores); not error_rate, whose baseline is 0 and so
# whose band is 0 (a hard target is the right tool for it).
DEFAULT_GATED = (
    "ttft_s.p50",
    "ttft_s.p90",
    "tpot_s.p50",
    "tpot_s.p90",
    "e2el_s.p50",
    "output_throughput_tok_s",
)
# A metric's outcomes (status.py has every outcome and its words).
PASS, REGRESSION, IMPROVEMENT, MISSED, INCONCLUSIVE = (
    Status.PASS, Status.REGRESSION, Status.IMPROVEMENT, Status.MISSED, Status.INCONCLUSIVE)
UPDATE_OPTION = "--llmperf-update-baselines"


def _percent(amount: float, base: float) -> float:
    if base == 0:
        return math.copysign(math.inf, amount) if amount else 0.0
    return amount / abs(base) * 100


@dataclass(frozen=True, slots=True)
class Verdict:
    """One metric's outcome. `reference` is the baseline value or the target's bound.

    `delta_pct` is the signed change from the reference (+ means the number went up, whatever
    the direction); `band` is the allowed change in the metric's unit (0 for targets); `noisy`
    says the measured noise, not the tolerance, set the band. `detectable`: the smallest change
    for the worse the noise lets the gate see, relative to the reference, and `tolerance` the
    change the baseline's tolerance allows (verdict/detectable.py); `noise_sd` the standard
    deviation of the change on the log scale and `direction` the entry's, for the run's
    false-alarm budget (verdict/budget.py); None for a target or where the noise is unmeasured.
    """

    name: str
    status: Status
    value: float
    reference: float
    delta_pct: float
    band: float
    band_pct: float
    message: str
    noisy: bool = False
    detectable: float | None = None
    tolerance: float | None = None
    noise_sd: float | None = None
    direction: str | None = None

    @property
    def failed(self) -> bool:
        return self.status.failing


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a baseline came from, for messages: `where` is shown in brackets.

    With a `nodeid` the messages add the command that updates the baseline, and an improvement
    is called a stale baseline. Without one (a saved run for an A/B comparison) they do not.
    """

    where: str
    nodeid: str | None = None

    def hint(self, status: str) -> str:
        tag = f" [{self.where}]"
        if self.nodeid is None:
            return tag
        command = f'pytest {UPDATE_OPTION} "{self.nodeid}"'
        if status == IMPROVEMENT:
            return f"{tag}: baseline is stale; refresh with: {command}"
        if status == REGRESSION:
            return f"{tag}; if this change is intended, update with: {command}"
        return tag


def _as_estimate(current: Estimate | float) -> Estimate:
    return current if isinstance(current, Estimate) else Estimate(float(current), 0.0, 1)


def _tolerance_floor(tolerance: float, base: float, delta: float) -> float:
    """The tolerance's share of the band on the side the value moved to (module docstring)."""
    return abs(base) * (tolerance if band_side(delta, base) == "+" else tolerance / (1 + tolerance))


def band_side(delta: float, base: float) -> str:
    """"+" or "-": the side of the band a change is shown against. A change that reads +0.0%
    (a rounding-sized step down included) is shown against the upper side."""
    shown = round(_percent(delta, base), 1) if base else delta
    return "-" if shown < 0 else "+"


def _band_text(status: str, entry: BaselineEntry, allowed: float, delta: float, why: str,
               fmt: Callable[[float], str]) -> str:
    size = f"{_percent(allowed, entry.value):.1f}%" if entry.value else fmt(allowed)
    band = band_side(delta, entry.value) + size + why
    if status == REGRESSION:
        return f"allowed {band}, {entry.direction} is better"
    return f"band {band}"


def check_metric(
    name: str,
    current: Estimate | float,
    baseline: BaselineEntry,
    *,
    origin: Origin | None = None,
) -> Verdict:
    """Judge one metric against its baseline entry (see the module docstring for the band)."""
    current = _as_estimate(current)
    base = baseline.value
    fmt = formatter(name, current.value, base)
    hint = origin.hint(REGRESSION) if origin else ""
    if math.isnan(current.value):
        message = f"{name} has no value (NaN) vs baseline {fmt(base)}{hint}"
        return Verdict(name, REGRESSION, current.value, base, math.nan, math.nan, math.nan, message)
    delta = current.value - base
    band = _run_to_run_band if baseline.spread_source else _repeats_band
    allowed, why = band(baseline, current, delta)
    worse = delta if baseline.direction == "lower" else -delta
    # isclose: a value exactly on the band edge must not fail on a rounding error.
    if abs(worse) <= allowed or math.isclose(abs(worse), allowed, rel_tol=1e-9):
        status, verb = PASS, "within the band"
    elif worse > 0:
        status, verb = REGRESSION, "regressed"
    else:
        status, verb = IMPROVEMENT, "improved beyond the band"
    # A zero baseline (an idle counter) has no percentages: show the change itself.
    change = f"{_percent(delta, base):+.1f}%" if base else "+-"[delta < 0] + fmt(abs(delta))
    band_text = _band_text(status, baseline, allowed, delta, why, fmt)
    hint = origin.hint(status) if origin else ""
    shown = f"{fmt(current.value)} vs baseline {fmt(base)}"
    message = f"{name} {verb}: {shown} ({change}, {band_text}){hint}"
    delta_pct, band_pct = _percent(delta, base), _percent(allowed, base)
    return Verdict(name, status, current.value, base, delta_pct, allowed, band_pct, message,
                   bool(why), detectable.of_entry(baseline, current),
                   detectable.tolerance_change(baseline), detectable.noise_sd(baseline, current),
                   baseline.direction)


def _repeats_band(baseline: BaselineEntry, current: Estimate, delta: float
                  ) -> tuple[float, str]:
    """An entry without a spread_source (written before it existed): max(tolerance floor,
    NOISE_K x the two sides' repeats' spreads in quadrature). Returns the band and, where the
    noise set it, how."""
    floor = _tolerance_floor(baseline.tolerance, baseline.value, delta)
    noise = NOISE_K * math.hypot(baseline.spread, current.spread)
    return max(floor, noise), f" = {NOISE_K:g} x noise" if noise > floor else ""


def _run_to_run_band(baseline: BaselineEntry, current: Estimate, delta: float
                     ) -> tuple[float, str]:
    """An entry whose spread is run-to-run (noise.py): max(tolerance, noise.K x spread) as a
    factor, the spread being this run's repeats' where they spread wider (a noisier session)."""
    spread, source = baseline.spread, baseline.spread_source
    if current.n > 1 and current.spread > spread:
        spread, source = current.spread, "this run's repeats"
    base = baseline.value
    if base == 0:  # no factor of zero: the band is the spread itself
        noise = noise_mod.K * spread
        return noise, f" by {noise_mod.K:g} x spread ({source})" if noise else ""
    relative = spread / abs(base)
    factor = max(baseline.tolerance, noise_mod.K * relative)
    why = (f" by {noise_mod.K:g} x run-to-run spread {relative:.1%} ({source})"
           if noise_mod.K * relative > baseline.tolerance else "")
    if baseline.unmeasured > factor:  # one run and a prior from elsewhere: large changes only
        factor, why = baseline.unmeasured, f" while {noise_mod.UNMEASURED_WHY}"
    return _tolerance_floor(factor, base, delta), why


def check_baseline(
    current: Mapping[str, Estimate | float], baseline: Baseline, nodeid: str | None = None,
    reference: Mapping[str, float] | None = None,
) -> GateReport:
    """Every metric the baseline gates, in name order. One the run lacks is a regression.

    Metrics the run has but the baseline does not gate are ignored: the baseline decides.
    A regressed latency names the phase that grew (metrics/phases.py) where both this run and
    the reference have the server's timings: `reference` holds the reference's values by name
    (by default, the baseline's own entries: a table that gates the phases' means).
    """
    origin = Origin(baseline.where, nodeid)
    verdicts = []
    for name, entry in sorted(baseline.metrics.items()):
        if name in current:
            verdict = check_metric(name, current[name], entry, origin=origin)
            verdicts.append(_with_phases(verdict, current, baseline, reference, origin))
            continue
        shown = formatter(name, entry.value)(entry.value)
        message = f"{name} not measured in this run (baseline {shown}){origin.hint(REGRESSION)}"
        nan = math.nan
        verdicts.append(Verdict(name, REGRESSION, nan, entry.value, nan, nan, nan, message))
    return GateReport(tuple(verdicts))


def _with_phases(verdict: Verdict, current: Mapping[str, Estimate | float], baseline: Baseline,
                 reference: Mapping[str, float] | None, origin: Origin) -> Verdict:
    """A regressed latency's message with its phases' growth before the hint, where both sides
    have them: "...; queue grew most (means: queue +180.0 ms, ...) [file :: key]; ..."."""
    if verdict.status != REGRESSION:
        return verdict
    before = reference if reference is not None else {
        name: entry.value for name, entry in baseline.metrics.items()}
    now = {name: _as_estimate(value).value for name, value in current.items()}
    grew = phases.growth(verdict.name, now, before)
    if grew is None:
        return verdict
    hint = origin.hint(REGRESSION)
    head = verdict.message.removesuffix(hint)
    return replace(verdict, message=f"{head}; {grew}{hint}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """A hard bound on one metric: value <= max and/or value >= min (bounds included)."""

    metric: str
    max: float | None = None
    min: float | None = None

    def __post_init__(self) -> None:
        if self.max is None and self.min is None:
            raise InputError(f"Target(metric={self.metric!r}) needs max=, min= or both")
        for bound in ("max", "min"):
            value = getattr(self, bound)
            if value is not None and not is_real(value):
                raise TypeError(
                    f"Target(metric={self.metric!r}): {bound} must be a number in the metric's "
                    f"unit, got {value!r}"
                )
        if self.max is not None and self.min is not None and self.min > self.max:
            raise InputError(
                f"Target(metric={self.metric!r}): min {self.min!r} is above max {self.max!r}"
            )

    def describe(self, fmt: Callable[[float], str]) -> str:
        bounds = [f">= {fmt(self.min)}"] if self.min is not None else []
        bounds += [f"<= {fmt(self.max)}"] if self.max is not None else []
        return "target " + " and ".join(bounds)


def check_target(target: Target, value: Estimate | float | None) -> Verdict:
    """Judge a value (the median, for repeats) against a hard target; None: not measured."""
    name = target.metric
    number = math.nan if value is None else _as_estimate(value).value
    bounds = [b for b in (target.max, target.min) if b is not None]
    fmt = formatter(name, number, *bounds)
    if value is None or math.isnan(number):
        what = "not measured in this run" if value is None else "no value (NaN)"
        message = f"{name} missed its target: {what}, {target.describe(fmt)}"
        return Verdict(name, MISSED, number, bounds[0], math.nan, 0.0, 0.0, message)
    over = target.max is not None and number > target.max
    under = target.min is not None and number < target.min
    bound = target.min if under or target.max is None else target.max
    verb = "missed its target" if over or under else "met its target"
    message = f"{name} {verb}: {fmt(number)}, {target.describe(fmt)}"
    status = MISSED if over or under else PASS
    return Verdict(name, status, number, bound, _percent(number - bound, bound), 0.0, 0.0, message)


def _why_absent(name: str) -> str | None:
    """Why a well-formed name of ours is not in this run (a turn's metric, a server metric), or
    None for a name that is simply unknown."""
    if turn_of(name) or turn_problem(name):  # a turn's metric: say what a turn has
        return turn_problem(name) or f"this run has no turn {turn_of(name)[0]}"
    if name.startswith(SERVER_PREFIX) and lookup(name):  # ours, not on this server's page
        return ("this run's server did not report it: server metrics are read from vLLM's "
                "/metrics; spec_decode_* needs speculative decoding")
    metric = lookup(name)
    if metric is not None and metric.absent.startswith("{name}: "):  # its definition says why
        return metric.absent.removeprefix("{name}: ")  # (the engine's start: not ours to time)
    return None


def check_names(
    names: Iterable[str], known: Collection[str] | Callable[[str], bool], what: str = "SLO"
) -> None:
    """Raise UnknownMetricError naming every unknown name (with "did you mean" when possible)."""
    is_known = known if callable(known) else known.__contains__
    unknown = [name for name in names if not is_known(name)]
    if not unknown:
        return
    parts = []
    for name in unknown:
        why = _why_absent(name)
        if why is None:
            close = [] if callable(known) else difflib.get_close_matches(name, known, n=1)
            why = f"did you mean {close[0]!r}?" if close else None
        parts.append(f"{name!r}" + (f" ({why})" if why else ""))
    plural = "s" if len(unknown) > 1 else ""
    hint = "" if all(_why_absent(name) for name in unknown) else (
        "; use the metric names of the report, e.g. 'ttft_s.p50' or 'output_throughput_tok_s'")
    raise UnknownMetricError(f"{what} names unknown metric{plural} {', '.join(parts)}{hint}")


@dataclass(frozen=True, kw_only=True)
class SLO:
    """Hard targets keyed by metric name, in the metric's unit:

        SLO(max={"ttft_s.p50": 0.1, "tpot_s.p50": 0.02}, min={"output_throughput_tok_s": 15000})

    Dicts rather than keyword arguments because metric names carry dots; rather than strings
    like "<0.1" because a number cannot be misparsed. Bounds are inclusive, so
    max={"error_rate": 0} means "no errors". A bad bound raises at construction.
    """

    max: Mapping[str, float] = field(default_factory=dict)
    min: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.targets()  # validates every bound now, where the SLO is written

    def targets(self) -> tuple[Target, ...]:
        names = sorted(set(self.max) | set(self.min))
        return tuple(Target(metric=n, max=self.max.get(n), min=self.min.get(n)) for n in names)


def check_targets(
    values: Mapping[str, Estimate | float],
    targets: SLO | Iterable[Target],
    known: Collection[str] | Callable[[str], bool] | None = None,
) -> GateReport:
    """Judge every target; with `known`, unknown metric names raise UnknownMetricError first."""
    targets = targets.targets() if isinstance(targets, SLO) else tuple(targets)
    if known is not None:
        check_names([target.metric for target in targets], known)
    return GateReport(tuple(check_target(t, values.get(t.metric)) for t in targets))


@dataclass(frozen=True, slots=True)
class GateReport:
    """The verdicts for one test; reports add (`targets_report + baseline_report`)."""

    verdicts: tuple[Verdict, ...] = ()

    def __add__(self, other: GateReport) -> GateReport:
        return GateReport(self.verdicts + other.verdicts)

    @property
    def failed(self) -> bool:
        return any(verdict.failed for verdict in self.verdicts)

    @property
    def failures(self) -> tuple[Verdict, ...]:
        return tuple(verdict for verdict in self.verdicts if verdict.failed)

    @property
    def warnings(self) -> list[str]:
        """Improvements beyond the band: the baseline is stale; warn, do not fail."""
        return [v.message for v in self.verdicts if v.status == IMPROVEMENT]

    @property
    def inconclusive(self) -> list[str]:
        """A/B metrics whose pairs were too noisy to decide (verdict/paired_ratios.py): said, not
        failed."""
        return [v.message for v in self.verdicts if v.status == INCONCLUSIVE]

    def failure_text(self) -> str:
        return "\n".join(verdict.message for verdict in self.failures)


def make_entries(
    estimates: Mapping[str, Estimate],
    *,
    names: Iterable[str] = DEFAULT_GATED,
    tolerance: float = DEFAULT_TOLERANCE,
    overrides: Mapping[str, float] | None = None,
    directions: Mapping[str, str] | None = None,
    previous: Baseline | None = None,
) -> dict[str, BaselineEntry]:
    """Baseline entries from this run's estimates, for update_baseline.

    Gates `names` plus every metric the previous baseline gated (a metric added by hand stays).
    Tolerance and direction: explicit `overrides`/`directions` first, then the previous entry
    (so a tolerance edited in the file survives a refresh), then the defaults. A metric this run
    did not measure, or measured as NaN, is left out: there is nothing to store.
    """
    overrides, directions = overrides or {}, directions or {}
    old = previous.metrics if previous else {}
    entries = {}
    for name in sorted(set(names) | set(old)):
        estimate = estimates.get(name)
        if estimate is None or not math.isfinite(estimate.value):
            continue
        prior = old.get(name)
        direction = prior.direction if prior else metric_direction(name)
        entries[name] = BaselineEntry(
            value=estimate.value,
            spread=estimate.spread if math.isfinite(estimate.spread) else 0.0,
            direction=directions.get(name, direction),
            tolerance=overrides.get(name, prior.tolerance if prior else tolerance),
            n=estimate.n,
        )
    return entries
