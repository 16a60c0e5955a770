"""Judge one measured Result: its hard targets (SLOs), then its baseline or a saved run.

Pure of pytest: the fixture turns a `Judgement` into a test failure, a warning or a note. Every
input problem (a malformed baseline, an unknown metric, a baseline for another engine) becomes
one line in `Judgement.error`; the Result itself is already recorded by then, so nothing measured
is lost.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from pytest_llmperf import baselines, gate
from pytest_llmperf.stats import Estimate, combine_runs

# What the summary's verdict column says.
PASSED, REGRESSED, MISSED, STALE, IMPROVED, ERROR = (
    "pass", "REGRESSION", "MISSED TARGET", "pass (stale baseline)", "pass (improved)", "ERROR",
)
# Why a measurement was not gated (the verdict column says so instead of "pass").
NO_BASELINE, OTHER_HARDWARE, NOT_COMPARED = "no baseline", "other hardware", "not compared"


@dataclass
class Judgement:
    report: gate.GateReport = field(default_factory=gate.GateReport)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    baseline: baselines.Baseline | None = None
    ungated: str | None = None  # NO_BASELINE, OTHER_HARDWARE or NOT_COMPARED
    saved_run: bool = False  # gated against a saved run (A/B), not a baseline

    @property
    def failed(self) -> bool:
        return self.error is not None or self.report.failed

    @property
    def warnings(self) -> list[str]:
        return self.report.warnings

    def failure_text(self) -> str:
        return self.error if self.error else self.report.failure_text()

    def label(self) -> str:
        if self.error:
            return ERROR
        statuses = {verdict.status for verdict in self.report.verdicts}
        if gate.MISSED in statuses:
            return MISSED
        if gate.REGRESSION in statuses:
            return REGRESSED
        if self.ungated:
            return self.ungated
        if gate.IMPROVEMENT in statuses:
            return IMPROVED if self.saved_run else STALE
        return PASSED


def estimates_of(runs) -> dict[str, Estimate]:
    """Every metric of a result as an Estimate: the median over repeats and its spread."""
    return combine_runs([run.flat() for run in runs])


def check_slo(estimates: dict[str, Estimate], slo: gate.SLO | None,
              known: Callable[[str], bool]) -> Judgement:
    if slo is None:
        return Judgement()
    try:
        return Judgement(report=gate.check_targets(estimates, slo, known=known))
    except gate.UnknownMetricError as exc:
        return Judgement(error=f"SLO: {exc}")


@dataclass(frozen=True)
class BaselineRef:
    """Where a test's baseline lives: the file and the key of its table."""

    path: Path  # absolute
    key: str
    nodeid: str

    @property
    def shown(self) -> Path:
        """The path relative to the working directory: what messages show and a user can open.
        Computed at use time, since a test may change the working directory."""
        return Path(os.path.relpath(self.path))


def only_metrics(baseline: baselines.Baseline, names: tuple[str, ...]) -> baselines.Baseline:
    return replace(baseline, metrics={n: e for n, e in baseline.metrics.items() if n in names})


def check_against_baseline(estimates: dict[str, Estimate], ref: BaselineRef,
                           engine: dict[str, Any], fingerprint: dict[str, Any], *,
                           require: bool, only: tuple[str, ...] | None = None) -> Judgement:
    """The baseline decides what is gated, unless the test names its metrics (`only`)."""
    try:
        baseline = baselines.load_baseline(ref.shown, ref.key)
    except baselines.BaselineError as exc:
        return Judgement(error=str(exc))
    if baseline is None:
        note = f"no baseline for this hardware: {ref.shown} has no [\"{ref.key}\"]"
        if require:
            return Judgement(error=f"{note} (--llmperf-require-baseline); create it with: "
                                   f'pytest --llmperf-update-baselines "{ref.nodeid}"')
        return Judgement(notes=[note], ungated=NO_BASELINE)
    other = baselines.hardware_mismatch(baseline, fingerprint)
    if other:  # numbers from another machine say nothing about this one: a note, not a verdict
        if require:
            return Judgement(error=f"{other} (--llmperf-require-baseline); make one here with: "
                                   f'pytest --llmperf-update-baselines "{ref.nodeid}"')
        return Judgement(notes=[other], ungated=OTHER_HARDWARE)
    mismatch = baselines.engine_mismatch(baseline, engine)
    if mismatch:
        return Judgement(error=mismatch, baseline=baseline)
    if only is not None:
        baseline = only_metrics(baseline, only)
    return Judgement(report=gate.check_baseline(estimates, baseline, ref.nodeid),
                     baseline=baseline)


def check_against_saved(estimates: dict[str, Estimate], saved_entries, path: Path,
                        key: str, gated: tuple[str, ...] = gate.DEFAULT_GATED) -> Judgement:
    """A/B: gate against a saved run's estimates (no engine check: the engine may differ on
    purpose, e.g. a vLLM upgrade or a new config)."""
    if saved_entries is None:
        return Judgement(notes=[f'not in the saved run {path} :: "{key}": nothing to compare'],
                         ungated=NOT_COMPARED)
    entries = {name: e for name, e in saved_entries.items() if name in gated}
    baseline = baselines.Baseline(metrics=entries, path=str(path), test_id=key)
    return Judgement(report=gate.check_baseline(estimates, baseline), baseline=baseline,
                     saved_run=True)


def combine(*judgements: Judgement) -> Judgement:
    out = Judgement()
    for judgement in judgements:
        out.report = out.report + judgement.report
        out.error = out.error or judgement.error
        out.notes += judgement.notes
        out.baseline = out.baseline or judgement.baseline
        out.ungated = out.ungated or judgement.ungated
        out.saved_run = out.saved_run or judgement.saved_run
    return out


def updated_entries(estimates: dict[str, Estimate], ref: BaselineRef, tolerance: float | None,
                    gated: tuple[str, ...] = gate.DEFAULT_GATED, *, exact: bool = False,
                    ) -> dict[str, baselines.BaselineEntry]:
    """Entries to write for --llmperf-update-baselines, keeping hand-edited tolerances. With
    `exact` (the test names its gated metrics) exactly those are written; otherwise a metric
    added to the file by hand is kept too."""
    try:
        previous = baselines.load_baseline(ref.shown, ref.key)
    except baselines.BaselineError:
        previous = None  # a broken table is replaced whole
    if exact and previous is not None:
        previous = only_metrics(previous, gated)
    kwargs = {"tolerance": tolerance} if tolerance is not None else {}
    if tolerance is not None and previous is not None:
        kwargs["overrides"] = {name: tolerance for name in previous.metrics}
    return gate.make_entries(estimates, names=gated, previous=previous, **kwargs)
