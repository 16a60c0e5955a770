"""A night's false-alarm budget: how often the whole run may fail an unchanged engine, held by
confirming each regression against it (docs/noise.md, "A night's false-alarm budget").

Each gated metric's band has its own chance of a false alarm: the chance that noise alone
carries an unchanged metric past the band, 1 - Phi(band on the log scale / sd), sd being the
standard deviation of the change detectable.noise_sd models. A run judges many metrics; the
chance that one of them alarms grows with their number. The run holds its family-wise rate
(the chance of one false red or more in the run) to BUDGET, one false red in NIGHTS nights, by
Bonferroni's rule over the run's planned comparisons: a regression fails only where its p-value,
the chance of a change at least this large from noise alone, is at most BUDGET / comparisons.
Bonferroni rather than Holm: Holm orders all of a run's p-values, which only the run's end
knows, and a test's outcome is reported when it ends; Bonferroni is Holm's first and strictest
step, and needs only how many comparisons the run plans. A regression past its band but not past
the budget is named, not failed ("unconfirmed"). A metric whose noise is unmeasured keeps its
band's verdict: there is no p-value to confirm it by; so does a band wider than a gate may have
(noise.NOISY_BAND), which only a test's own choice makes. Pure: no pytest, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from statistics import NormalDist

from pytest_llmperf.verdict.gate import DEFAULT_GATED, Verdict
from pytest_llmperf.verdict.noise import NOISY_BAND
from pytest_llmperf.verdict.status import Status

__all__ = ["BUDGET", "NIGHTS", "band_chance", "budget_line", "chances", "confirm", "p_value",
           "per_comparison", "planned"]

NIGHTS = 30
BUDGET = 1 / NIGHTS  # the chance of a false red in one run, all its comparisons together
UNCONFIRMED = "unconfirmed"
_NORMAL = NormalDist()


def planned(tests: int) -> int:
    """The comparisons a run of `tests` llmperf tests plans: each gates the metrics gated by
    default (gate.DEFAULT_GATED)."""
    return tests * len(DEFAULT_GATED)


def per_comparison(comparisons: int, budget: float = BUDGET) -> float:
    """The false-alarm rate each of `comparisons` may have for the run to hold `budget`."""
    return budget / max(comparisons, 1)


def _worse_log(change: float, direction: str) -> float:
    """A relative change (+0.3: up 30%) for the worse on the log scale; negative if better."""
    if change <= -1:
        return math.inf if direction == "higher" else -math.inf
    log = math.log1p(change)
    return log if direction == "lower" else -log


def p_value(change: float, sd: float, direction: str) -> float:
    """The chance that noise alone (sd on the log scale) makes a change at least as bad as
    `change` (relative: +0.3 is up 30%) in a metric of `direction`."""
    return 1 - _NORMAL.cdf(_worse_log(change, direction) / sd)


def _band_log(verdict: Verdict) -> float | None:
    """A verdict's band on the log scale. The band is a factor, the same there on either side
    (gate.py), so the side the verdict shows it on does not matter."""
    band = verdict.band_pct / 100
    below = round(verdict.delta_pct, 1) < 0  # the side gate.band_side shows the band on
    if not math.isfinite(band) or below and band >= 1:
        return None
    return -math.log1p(-band) if below else math.log1p(band)


def band_chance(verdict: Verdict) -> float | None:
    """The false-alarm chance of a verdict's band: noise alone (its noise_sd) carries the
    metric past it. None without a measured noise."""
    log = _band_log(verdict)
    if verdict.noise_sd is None or log is None:
        return None
    return 1 - _NORMAL.cdf(log / verdict.noise_sd)


def _chosen(verdict: Verdict) -> bool:
    """Is the band wider than a gate may have (noise.NOISY_BAND as a factor)? Only a test's
    choice makes one: a metric too noisy to gate that it named in gate=, a tolerance that
    wide (the CPU suite's 2.5x). Such a band keeps its verdict."""
    log = _band_log(verdict)
    return log is None or log > math.log1p(NOISY_BAND)


def confirm(verdict: Verdict, alpha: float) -> tuple[Verdict, str | None]:
    """A regression whose p-value exceeds `alpha` (per_comparison) as a pass, and the note that
    names it; any other verdict (one without a measured noise too) as it is."""
    sd, direction = verdict.noise_sd, verdict.direction
    if verdict.status != Status.REGRESSION or sd is None or direction is None \
            or not math.isfinite(verdict.delta_pct) or _chosen(verdict):
        return verdict, None
    p = p_value(verdict.delta_pct / 100, sd, direction)
    if p <= alpha:
        return verdict, None
    note = (f"{UNCONFIRMED}, not failed: {verdict.message} (p = {p:.2%} by its measured noise, "
            f"over the {alpha:.3%} a comparison that the run's false-alarm budget allows)")
    return replace(verdict, status=Status.PASS), note


def chances(verdicts: Iterable[Verdict]) -> dict[str, float]:
    """Each verdict's band's false-alarm chance (band_chance), where its noise is measured."""
    found = {verdict.name: band_chance(verdict) for verdict in verdicts}
    return {name: round(chance, 8) for name, chance in found.items() if chance is not None}


def budget_line(seen: Iterable[Mapping[str, Mapping[str, float]]], unconfirmed: int
                ) -> str | None:
    """The summary's first line: the budget, the comparisons it was shared among, what the
    bands alone would have spent of it, and what holding it cost (the regressions named, not
    failed). `seen`: each measurement's "detectable" of the run file (session/judge.py); None
    where no comparison had a measured noise."""
    metrics = [found for test in seen for found in test.values() if "alpha" in found]
    if not metrics:
        return None
    alpha = max(found["alpha"] for found in metrics)
    alarms = sum(found["false_alarm"] for found in metrics)
    often = f"one in {1 / alarms:,.0f} runs" if alarms > 0 else "never"
    cost = f"{unconfirmed} regression(s) named below as {UNCONFIRMED}, not failed" \
        if unconfirmed else "no regression held back"
    return (f"false-alarm budget: one false red in {NIGHTS} runs, shared by the run's "
            f"{round(BUDGET / alpha)} planned comparisons ({len(metrics)} judged with measured "
            f"noise): a regression fails at p <= {alpha:.3%} "
            f"(Bonferroni); the bands alone would alarm {alarms:.2f} times a run ({often}); "
            f"cost: {cost}")
