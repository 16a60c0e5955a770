"""Paired A/B: two engines measured alternately, judged on the ratios of adjacent runs.

On a shared or thermally drifting machine an engine's numbers move by more between two runs
minutes apart than a real regression does (the CPU suite's medians moved up to 2x between
unchanged runs: docs/ab.md). Two runs back to back see nearly the same machine, so the ratio
B/A of one pair cancels most of that drift. The order is ABBA (AB, BA, AB, ...): a drift that is
linear in time then favours neither side over two pairs.

A gated metric regresses when the median of its paired B/A ratios is worse than the tolerance
allows, read as a factor in the metric's own direction (the baseline gate's rule, gate.py):
B may take up to (1 + tolerance) times A's latency, and keep at least 1 / (1 + tolerance) of A's
throughput. The median's distribution-free interval (order statistics of the binomial, the sign
test's interval) is shown with it; a regression (and an improvement) also needs that interval to
lie wholly on its side of 1, so a verdict never rests on one odd pair. A median beyond the band
whose interval still holds 1 is "no change detected", with about how many pairs would settle it.

A test that regresses over its pairs measures a second set (the confirm pairs) and is judged on
all of them: on a shared machine one engine can run ~20% slower than its identical twin for
longer than a pair lasts, so a regression has to hold over a second stretch of the machine
before it fails a test. The second set is measured after the other tests of the engine
(confirm_later.py): measured right after the first, on a 2-core VM, it cleared only half of the
false alarms (docs/ab.md, "Confirm pairs"). Its own median must be worse than the tolerance
too, since the first set was picked for looking worse. Pure: no pytest, no I/O.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.metrics import phases
from pytest_llmperf.verdict.ab_judgement import AbJudgement, PairedMetric
from pytest_llmperf.verdict.gate import (
    IMPROVEMENT,
    INCONCLUSIVE,
    PASS,
    REGRESSION,
    GateReport,
    Verdict,
    metric_direction,
)

__all__ = [
    "DEFAULT_AB_CONFIRM_PAIRS",
    "DEFAULT_AB_PAIRS",
    "DEFAULT_AB_TOLERANCE",
    "PairedRatios",
    "PairedRun",
    "ab_entry",
    "ab_line",
    "format_ratio",
    "abba_order",
    "judge_pairs",
    "median_interval",
    "null_pairs",
]

DEFAULT_AB_PAIRS = 4
DEFAULT_AB_CONFIRM_PAIRS = 4
DEFAULT_AB_TOLERANCE = 0.10
INTERVAL_CONFIDENCE = 0.90


def abba_order(pairs: int) -> list[str]:
    """The sides in measuring order: pair 1 is A then B, pair 2 B then A, and so on."""
    return [side for n in range(pairs) for side in (("A", "B") if n % 2 == 0 else ("B", "A"))]


def median_interval(values: Sequence[float],
                    confidence: float = INTERVAL_CONFIDENCE) -> tuple[float, float, float]:
    """(low, high, achieved confidence) of a distribution-free interval for the median: the
    k-th smallest and k-th largest values, k the largest with P(k-1 < Binomial(n, 1/2) < n-k+1)
    >= confidence. Too few values for that: the whole range, with the confidence it has."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return math.nan, math.nan, 0.0

    def coverage(k: int) -> float:  # P(X_(k) <= median <= X_(n-k+1))
        tail = sum(math.comb(n, i) for i in range(k)) / 2**n
        return 1 - 2 * tail

    k = 1
    while k + 1 <= (n + 1) // 2 and coverage(k + 1) >= confidence:
        k += 1
    return ordered[k - 1], ordered[n - k], coverage(k)


@dataclass(frozen=True)
class PairedRatios:
    """One metric's B/A ratios, one per pair, in measuring order."""

    name: str
    ratios: tuple[float, ...]
    # Pairs measured before the confirm pairs; None: no confirm pairs were asked for.
    first_round: int | None = None
    # For a latency: which of its phases grew from A to B, by their medians over the pairs
    # (metrics/phases.py); None where a side lacks the server's timings.
    phases: str | None = None
    # Later/earlier of each two runs of one side measured back to back (ABBA's "B B" and "A A"
    # at the pairs' seams): what one engine measured twice in a row gives, no change between
    # them. Their spread is the machine's own, seen without a second engine (`null_pairs`).
    nulls: tuple[float, ...] = ()

    @property
    def median(self) -> float:
        return _median(self.ratios)

    @property
    def confirm_median(self) -> float | None:
        """The median of the confirm pairs alone; None when there are none."""
        if not self.first_round or len(self.ratios) <= self.first_round:
            return None
        return _median(self.ratios[self.first_round:])

    @property
    def interval(self) -> tuple[float, float, float]:
        return median_interval([r for r in self.ratios if math.isfinite(r)])

    @property
    def log_spread(self) -> float:
        """The pairs' spread: the normalised MAD of log B/A (a robust standard deviation; one
        wild pair moves it little). NaN with fewer than 2 ratios."""
        logs = _logs(self.ratios)
        if len(logs) < 2:
            return math.nan
        centre = statistics.median(logs)
        return NORMAL_MAD * statistics.median(abs(x - centre) for x in logs)

    @property
    def null_spread(self) -> float:
        """The same spread seen in one engine's back-to-back runs (`nulls`), around no change:
        the normalised median |log ratio|. A pair's ratio and a back-to-back one are both one
        run over another, so with no change between the sides the two spreads agree; where
        the back-to-back runs spread more, the pairs' own spread understated the noise. NaN
        with fewer than MIN_NULLS."""
        logs = _logs(self.nulls)
        if len(logs) < MIN_NULLS:
            return math.nan
        return NORMAL_MAD * statistics.median(abs(x) for x in logs)

    def noise(self) -> tuple[float, str]:
        """The larger of the two spreads, and which one it is."""
        spreads = [(self.log_spread, "the pairs spread"),
                   (self.null_spread, "one engine's own back-to-back runs spread")]
        found = [pair for pair in spreads if math.isfinite(pair[0])]
        return max(found) if found else (math.nan, "")

    def resolution(self) -> float:
        """About the smallest change these pairs can tell from none, as a log factor: the half
        width of a ~90% interval of the median, 1.645 x 1.2533 x spread / sqrt(n) (the median's
        standard error under normal noise), the spread being `noise()`'s."""
        n = len(_logs(self.ratios))
        return RESOLUTION_Z * MEDIAN_SE * self.noise()[0] / math.sqrt(n) if n else math.nan

    def too_noisy(self, tolerance: float) -> str | None:
        """Why these pairs cannot resolve `tolerance` on this machine, or None: their median is
        not known to within the tolerance, by the spread of the pairs or of one engine's own
        back-to-back runs, whichever is wider."""
        resolution = self.resolution()
        if not (math.isfinite(resolution) and resolution > math.log1p(tolerance)):
            return None
        spread, what = self.noise()
        return (f"{what} {math.expm1(spread):.0%} (robust sd), so {len(self.ratios)} pairs "
                f"resolve only about {math.expm1(resolution):.0%}, wider than the tolerance "
                f"{tolerance:.0%}; about {self.pairs_to_resolve(tolerance)} pairs, or a quieter "
                "machine, would settle it")

    def pairs_to_resolve(self, tolerance: float) -> int:
        """Pairs whose resolution would be the tolerance, if they spread as these do."""
        need = (RESOLUTION_Z * MEDIAN_SE * self.noise()[0] / math.log1p(tolerance)) ** 2
        return max(len(self.ratios) + 1, math.ceil(need))

    def judge(self, tolerance: float) -> Verdict:
        """This metric's verdict under `tolerance` (module docstring). The Verdict's reference
        is 1 (side A); its value is the median ratio; its band is the allowed factor - 1."""
        name, direction = self.name, metric_direction(self.name)
        median = self.median
        if math.isnan(median):
            message = (f"{name} has no B/A ratio: one side measured nothing "
                       f"({len(self.ratios)} pairs)")
            return Verdict(name, REGRESSION, median, 1.0, math.nan, tolerance, tolerance * 100,
                           message)
        low, high, confidence = self.interval
        limit = 1 + tolerance if direction == "lower" else 1 / (1 + tolerance)

        def beyond(value: float) -> bool:
            return value > limit if direction == "lower" else value < limit

        worse = beyond(median)
        better = median < 1 / limit if direction == "lower" else median > 1 / limit
        surely_worse = low > 1 if direction == "lower" else high < 1
        surely_better = high < 1 if direction == "lower" else low > 1
        # The first pairs were confirmed because they looked worse: they cannot also carry the
        # verdict. The confirm pairs must show the regression's size by themselves (docs/ab.md,
        # the rule's item 3); a side that measured nothing there clears nothing.
        confirm = self.confirm_median
        confirmed = confirm is None or math.isnan(confirm) or beyond(confirm)
        # Pairs too noisy for the tolerance decide nothing, unless their whole interval lies
        # beyond the band itself: a change that large is resolved whatever the noise.
        noisy = self.too_noisy(tolerance)
        clearly_worse = (low > limit) if direction == "lower" else (high < limit)
        clearly_better = (high < 1 / limit) if direction == "lower" else (low > 1 / limit)
        if worse and surely_worse and confirmed and (not noisy or clearly_worse):
            status, verb = REGRESSION, "regressed in A/B"
        elif better and surely_better and (not noisy or clearly_better):
            status, verb = IMPROVEMENT, "improved in A/B"
        elif noisy:
            status, verb = INCONCLUSIVE, "inconclusive on this machine in A/B"
        elif worse and surely_worse:
            status, verb = PASS, "not confirmed in A/B"
        elif worse or better:  # beyond the band, but the interval does not rule out 1
            status, verb = PASS, "no change detected in A/B"
        else:
            status, verb = PASS, "within the A/B band"
        bound = "<=" if direction == "lower" else ">="
        confirm_pairs = len(self.ratios) - (self.first_round or 0)
        alone = ("" if confirm is None else f"; the {confirm_pairs} confirm "
                 f"pair{'s' if confirm_pairs != 1 else ''} alone {confirm:.3f}")
        settle = ""
        if status == INCONCLUSIVE:
            settle = f": {noisy}"
        elif (worse or better) and not (surely_worse or surely_better):
            needed = pairs_to_settle(self.ratios)
            settle = f"; about {needed} pairs would likely settle it" if needed else ""
        message = (f"{name} {verb}: B/A median {median:.3f} ({confidence:.0%} interval "
                   f"{low:.3f}-{high:.3f} over {len(self.ratios)} ABBA pairs{alone}), allowed "
                   f"{bound} {limit:.3f} ({direction} is better; A/B tolerance {tolerance:g})"
                   f"{settle}")
        if status == REGRESSION and self.phases:
            message += f"; {self.phases}"
        return Verdict(name, status, median, 1.0, (median - 1) * 100, tolerance,
                       tolerance * 100, message)


# How many standard errors the median's log ratio must stand from 0 for the interval to leave 1
# out: 2 is a round "likely" (about 95% for a normal mean), not a promise.
SETTLE_Z = 2.0
# The resolution of a set of pairs (PairedRatios.resolution): a two-sided ~90% interval (z of
# 1.645) around a median whose standard error is 1.2533 x sd / sqrt(n) under normal noise (the
# median's asymptotic efficiency: sqrt(pi / 2)); the MAD scaled to a normal sd (1.4826, as
# metrics/stats.py). At least MIN_NULLS back-to-back runs before their spread is read.
RESOLUTION_Z = 1.645
MEDIAN_SE = math.sqrt(math.pi / 2)
NORMAL_MAD = 1.4826
MIN_NULLS = 3


def pairs_to_settle(ratios: Sequence[float]) -> int | None:
    """About how many pairs would give an interval that leaves 1 out, if the ratios went on
    spreading as these did: (SETTLE_Z x sd of log B/A / |log median|)^2, a normal approximation.
    None when the spread or the median cannot say (fewer than 2 ratios, all equal, median 1)."""
    logs = [math.log(r) for r in ratios if math.isfinite(r) and r > 0]
    if len(logs) < 2:
        return None
    spread, centre = statistics.stdev(logs), abs(statistics.median(logs))
    if spread == 0 or centre == 0:
        return None
    return max(len(logs) + 1, math.ceil((SETTLE_Z * spread / centre) ** 2))


def _logs(ratios: Sequence[float]) -> list[float]:
    return [math.log(r) for r in ratios if math.isfinite(r) and r > 0]


def _median(ratios: Sequence[float]) -> float:
    finite = [r for r in ratios if math.isfinite(r)]
    return statistics.median(finite) if finite else math.nan


def paired_ratios(a_runs: Sequence[Mapping[str, float]], b_runs: Sequence[Mapping[str, float]],
                  names: Sequence[str], first_round: int | None = None
                  ) -> dict[str, PairedRatios]:
    """B/A for each metric of each pair (the n-th A run with the n-th B run). A zero or missing
    value on either side gives NaN for that pair. `first_round`: the pairs before the confirm
    pairs. A latency's phases (metrics/phases.py) are compared by each side's medians."""
    a_phases, b_phases = phases.medians(a_runs), phases.medians(b_runs)
    out = {}
    for name in names:
        ratios = [_ratio(a.get(name, math.nan), b.get(name, math.nan))
                  for a, b in zip(a_runs, b_runs, strict=True)]
        out[name] = PairedRatios(name, tuple(ratios), first_round,
                                 phases.growth(name, b_phases, a_phases),
                                 null_pairs(a_runs, b_runs, name, first_round))
    return out


def _ratio(first: float, second: float) -> float:
    """second / first; NaN where either is missing, zero or not finite."""
    if first and math.isfinite(first) and math.isfinite(second):
        return second / first
    return math.nan


def null_pairs(a_runs: Sequence[Mapping[str, float]], b_runs: Sequence[Mapping[str, float]],
               name: str, first_round: int | None = None) -> tuple[float, ...]:
    """Each side's runs measured back to back in ABBA order, later over earlier: B of pair 1
    then B of pair 2, A of pair 2 then A of pair 3, and so on (`abba_order`). Not across the
    start of the confirm pairs, which may be measured minutes later."""
    pairs = min(len(a_runs), len(b_runs))
    out = []
    for k in range(pairs - 1):
        if first_round is not None and k + 1 == first_round:
            continue
        side = b_runs if k % 2 == 0 else a_runs
        out.append(_ratio(side[k].get(name, math.nan), side[k + 1].get(name, math.nan)))
    return tuple(out)


def judge_pairs(ratios: Mapping[str, PairedRatios], tolerance: float) -> GateReport:
    """Every gated metric's verdict, in name order: one GateReport, as the baseline gate gives."""
    return GateReport(tuple(ratios[name].judge(tolerance) for name in sorted(ratios)))


def ab_entry(ratios: Mapping[str, PairedRatios], tolerance: float | None,
             report: GateReport) -> AbJudgement:
    """What a run file keeps of one test's A/B judgement (verdict/ab_judgement.py): per gated
    metric the ratios in measuring order (None for a NaN), one side's back-to-back ratios
    (null_pairs), their median and interval, and the verdict. Tolerance None: llmperf.ab(),
    whose test judges the ratios itself (status None)."""
    verdicts = {verdict.name: verdict for verdict in report.verdicts}

    def number(value: float) -> float | None:
        return value if math.isfinite(value) else None

    metrics = {}
    for name, paired in sorted(ratios.items()):
        low, high, confidence = paired.interval
        verdict = verdicts.get(name)
        metrics[name] = PairedMetric(
            tuple(number(r) for r in paired.ratios), tuple(number(r) for r in paired.nulls),
            number(paired.median), (number(low), number(high)), confidence,
            verdict.status if verdict else None, verdict.message if verdict else "")
    pairs = max((len(paired.ratios) for paired in ratios.values()), default=0)
    return AbJudgement(tolerance, pairs, metrics)


def ab_line(entry: AbJudgement) -> str:
    """One summary line of a paired judgement: each gated metric's median B/A ratio, e.g.
    "B/A over 4 ABBA pairs (tolerance 0.1): ttft_s.p50 1.021, tpot_s.p50 0.987"."""
    ratios = ", ".join(f"{name} {format_ratio(metric.median)}"
                       for name, metric in sorted(entry.metrics.items()))
    judged = "judged by the test" if entry.tolerance is None else f"tolerance {entry.tolerance:g}"
    return f"B/A over {entry.pairs} ABBA pairs ({judged}): {ratios}"


def format_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


@dataclass(frozen=True)
class PairedRun:
    """Both sides of a paired A/B measurement: `llmperf.ab(...)` returns one. Each side's n-th
    run was measured next to the other side's n-th run."""

    a: Any  # Result (every run in `runs`)
    b: Any

    def ratios(self, name: str) -> PairedRatios:
        """The B/A ratio of metric `name` ("tpot_s.p50", "output_throughput_tok_s") per pair."""
        return paired_ratios([run.flat() for run in self.a.runs],
                             [run.flat() for run in self.b.runs], [name])[name]

    def median(self, name: str) -> float:
        return self.ratios(name).median
