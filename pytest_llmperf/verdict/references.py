"""The one judging path: a measurement against its hard targets (SLOs) and one reference.

A reference is what a measurement is compared with, and each kind knows how:

- `BaselineTable`: a table of the suite's committed baseline file (the plugin's default);
- `SavedRun`: one test of a saved run file (`--llmperf-compare NAME`, `llmperf compare A B`);
- `SideA`: side A of a paired A/B run (`--llmperf-ab`), judged on the paired B/A ratios;
- `NotJudged`: nothing to compare with, and the one line that says why.

`judge(current, reference, ...)` is the only place a verdict is made: the fixture, the saved-run
comparison and `llmperf compare` all call it. Pure of pytest: the fixture turns a `Judgement`
into a test failure, a warning or a note. Every input problem (a malformed baseline, an unknown
metric, a baseline for another engine) becomes one line in `Judgement.error`; the Result itself
is already recorded by then, so nothing measured is lost.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from pytest_llmperf.metrics import registry
from pytest_llmperf.metrics.stats import Estimate, combine_runs
from pytest_llmperf.metrics.work import ExecutedWork
from pytest_llmperf.verdict import baselines, gate, noise, same_work, shapes
from pytest_llmperf.verdict.ab_judgement import AbJudgement
from pytest_llmperf.verdict.paired_ratios import ab_entry, judge_pairs, paired_ratios
from pytest_llmperf.verdict.status import Status
from pytest_llmperf.verdict.stored_run import StoredResult


@dataclass
class Judgement:
    report: gate.GateReport = field(default_factory=gate.GateReport)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    baseline: baselines.Baseline | None = None
    # Why a measurement was not gated: NO_BASELINE, OTHER_HARDWARE or NOT_COMPARED.
    ungated: Status | None = None
    # Judged against another measurement (a saved run, side A), not a baseline: an improvement
    # is then just that, not a stale baseline.
    saved_run: bool = False
    ab: AbJudgement | None = None  # a paired judgement's ratios (paired_ratios.ab_entry)
    # No usable baseline here: this run becomes the machine-local one (BaselineTable.local).
    record_local: bool = False
    # The two sides executed different work (metrics/work.py): the line naming how; no
    # verdict on their numbers.
    incomparable: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None or self.incomparable is not None or self.report.failed

    @property
    def warnings(self) -> list[str]:
        return self.report.warnings

    def failure_text(self) -> str:
        return self.error or self.incomparable or self.report.failure_text()

    @property
    def status(self) -> Status:
        """The test's status: an error, then a missed target, a regression, an A/B too noisy
        to decide, why it was not gated, an improvement, else a pass."""
        if self.error:
            return Status.ERROR
        if self.incomparable:
            return Status.NOT_COMPARABLE
        statuses = {verdict.status for verdict in self.report.verdicts}
        for worst in (Status.MISSED, Status.REGRESSION, Status.INCONCLUSIVE):
            if worst in statuses:
                return worst
        if self.ungated:
            return self.ungated
        if Status.IMPROVEMENT in statuses:
            return Status.IMPROVEMENT if self.saved_run else Status.STALE
        return Status.PASS

    def label(self) -> str:
        """The verdict column's words."""
        return self.status.summary


def combine(*judgements: Judgement) -> Judgement:
    out = Judgement()
    for judgement in judgements:
        out.report = out.report + judgement.report
        out.error = out.error or judgement.error
        out.notes += judgement.notes
        out.baseline = out.baseline or judgement.baseline
        out.ungated = out.ungated or judgement.ungated
        out.saved_run = out.saved_run or judgement.saved_run
        out.ab = out.ab or judgement.ab
        out.record_local = out.record_local or judgement.record_local
        out.incomparable = out.incomparable or judgement.incomparable
    return out


# ---------------------------------------------------------------- what is judged


@dataclass(frozen=True)
class Current:
    """The measurement being judged: each metric's estimate over the repeats, and the repeats
    themselves (a paired comparison needs them one by one)."""

    estimates: Mapping[str, Estimate]
    runs: tuple[Mapping[str, float], ...] = ()
    work: ExecutedWork | None = None  # what it executed (metrics/work.py); None: not known

    @classmethod
    def of(cls, runs, work: ExecutedWork | None = None) -> Current:
        """From a Result's runs (RunMetrics), combined (registry.combine: a one-sample metric,
        the engine's start, has no spread of its own; noise.py gives it one)."""
        flat = tuple(run.flat() for run in runs)
        return cls(registry.combine(list(flat)), flat, work)


@dataclass(frozen=True)
class TestNode:
    """The test a verdict is about, as the plugin names it: its pytest node id (a baseline
    update waits for its outcome) and its file (its suite's baseline file is named after it)."""

    __test__ = False  # not a test class, despite the name

    nodeid: str
    path: Path


@dataclass(frozen=True)
class Subject:
    """What a verdict is about: the test, its result id, its baseline key, and the engine and
    workload it measured, as a baseline's provenance records them."""

    test: TestNode
    test_id: str
    key: str
    engine: dict[str, Any]
    workload: dict[str, Any]


# ---------------------------------------------------------------- references


class Reference(Protocol):
    """What a measurement is compared with. `gated`: the metrics to judge; `tolerance`: the
    band the test declared (None: the reference's own, else the default)."""

    def compare(self, current: Current, gated: Sequence[str],
                tolerance: float | None) -> Judgement: ...


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


def only_metrics(baseline: baselines.Baseline, names: Sequence[str]) -> baselines.Baseline:
    return replace(baseline, metrics={n: e for n, e in baseline.metrics.items() if n in names})


@dataclass(frozen=True)
class BaselineTable:
    """A table of a baseline file. The table decides what is gated and with which tolerance,
    unless the test names its metrics (`exact`).

    Where the committed file has no table for this hardware (none, or one from another machine),
    the machine-local baseline `local` (under .llmperf/, one folder per machine) stands in: the
    first run here records it, the next runs gate against it, saying so. So a new user's first
    run gates from the second run on, and the committed files change only by
    --llmperf-update-baselines.
    """

    ref: BaselineRef
    engine: Mapping[str, Any]
    fingerprint: Mapping[str, Any]
    require: bool = False  # --llmperf-require-baseline: a missing baseline is an error
    exact: bool = False
    local: BaselineRef | None = None
    workload: Mapping[str, Any] | None = None  # this test's (Workload.to_dict)

    def compare(self, current: Current, gated: Sequence[str],
                tolerance: float | None = None) -> Judgement:
        ref = self.ref
        try:
            baseline = baselines.load_baseline(ref.shown, ref.key)
        except baselines.BaselineError as exc:
            return Judgement(error=str(exc))
        if baseline is None:
            shape = shapes.describe(self.fingerprint, self.engine)
            note = f"no baseline for {shape}: {ref.shown} has no [\"{ref.key}\"]"
            if self.require:
                command = shapes.bootstrap_command(str(self.fingerprint.get("hardware_class")),
                                                   ref.nodeid.split("::")[0])
                return Judgement(error=f"{note} (--llmperf-require-baseline); make this runner "
                                       f"shape's first baselines with: {command}")
            return self._machine_local(current, gated, note, Status.NO_BASELINE)
        other = baselines.hardware_mismatch(baseline, self.fingerprint, self.engine)
        if other:  # numbers from another machine say nothing about this one
            if self.require:
                return Judgement(error=f"{other} (--llmperf-require-baseline); make one here "
                                       f'with: pytest --llmperf-update-baselines "{ref.nodeid}"')
            return self._machine_local(current, gated, other, Status.OTHER_HARDWARE)
        mismatch = baselines.engine_mismatch(baseline, dict(self.engine))
        if mismatch:
            return Judgement(error=mismatch, baseline=baseline)
        edited = baselines.workload_mismatch(baseline, self.workload)
        if edited:  # the test measures something else now: its old numbers are no reference
            if self.require:
                return Judgement(error=f"{edited} (--llmperf-require-baseline)")
            return Judgement(notes=[edited], ungated=Status.NOT_COMPARED)
        return self._against(current, gated, baseline)

    def _against(self, current: Current, gated: Sequence[str],
                 baseline: baselines.Baseline, first_run: bool = False) -> Judgement:
        """Every metric of the table, or exactly the ones the test named (`exact`); a metric
        too noisy to gate (noise.py) only where it was named, with one line saying why not.
        `first_run`: this machine's own table, written without anyone asking: where its noise
        was never measured here, only large changes fail (noise.unmeasured_here)."""
        differs = _work_differs(baseline, current)
        if differs:
            return Judgement(incomparable=differs, baseline=baseline)
        if self.exact:
            baseline = only_metrics(baseline, gated)
        if first_run:
            baseline = noise.unmeasured_here(baseline, self.fingerprint.get("hardware_class"))
        judged, noisy = noise.split_noisy(baseline, gated if self.exact else ())
        kind = noise.kind_of(self.fingerprint.get("hardware_class"))
        return Judgement(report=gate.check_baseline(current.estimates, judged, self.ref.nodeid),
                         baseline=baseline,
                         notes=[noise.noisy_line(noisy, kind)] if noisy else [])

    def _machine_local(self, current: Current, gated: Sequence[str], why: str,
                       ungated: Status) -> Judgement:
        """No committed baseline for this hardware (`why`): gate against this machine's own,
        or make this run it (the session writes it once the test passes)."""
        if self.local is None:
            return Judgement(notes=[why], ungated=ungated)
        try:
            local = baselines.load_baseline(self.local.shown, self.local.key)
        except baselines.BaselineError:
            local = None  # a broken local file is recorded anew
        usable = local is not None \
            and not baselines.hardware_mismatch(local, self.fingerprint, self.engine) \
            and not baselines.engine_mismatch(local, dict(self.engine)) \
            and not baselines.workload_mismatch(local, self.workload)
        if not usable:
            return Judgement(notes=[why], ungated=ungated, record_local=True)
        judgement = self._against(current, gated, local, first_run=True)
        judgement.notes.append(
            f"gated against this machine's first-run baseline {self.local.shown} :: "
            f'"{self.local.key}" (no committed baseline for this hardware); commit one with: '
            f'pytest --llmperf-update-baselines "{self.ref.nodeid}"')
        return judgement


def _work_differs(baseline: baselines.Baseline, current: Current) -> str | None:
    """A table that recorded the work it measured (provenance.work, written since that was
    recorded) against a measurement of other work: the NOT COMPARABLE line. A table written
    before is compared as it always was."""
    recorded = baseline.provenance.get("work")
    if not isinstance(recorded, Mapping) or current.work is None:
        return None
    try:
        work = ExecutedWork.from_dict(recorded)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # a hand-edited record: the numbers are still compared
    return same_work.Rule().check(work, {}, current.work, {},
                                  reference_name=f"the baseline {baseline.path}").incomparable


# A measurement with one of these verdicts says nothing of its engine, so it judges nothing.
NOT_REFERENCES = frozenset({Status.CLIENT_LIMITED, Status.DISTURBED, Status.ENGINE_DIED,
                            Status.ENGINE_STALLED})


@dataclass(frozen=True)
class SavedRun:
    """One test of a saved run (None: the run lacks it). No engine check: the engine may differ
    on purpose, e.g. a vLLM upgrade or a new config. The run keeps values and spreads, not
    bands: the tolerance is the test's, else the one it declared when saved, else the
    default."""

    path: Path
    key: str
    saved: StoredResult | None  # None: the saved run has no such test
    workload: Mapping[str, Any] | None = None  # this test's (Workload.to_dict)
    work_rule: same_work.Rule = same_work.Rule()
    changed: str | None = None  # what changed since the saved run (same_node.stack_changes)

    def compare(self, current: Current, gated: Sequence[str],
                tolerance: float | None = None) -> Judgement:
        unusable = self._unusable()
        if unusable:
            return Judgement(notes=[unusable], ungated=Status.NOT_COMPARED)
        work = self.work_rule.check(self.saved.work, self.saved.estimates, current.work,
                                    current.estimates, reference_name="the saved run")
        if self.changed:
            work.notes.insert(0, self.changed)
        if work.incomparable:
            return Judgement(incomparable=work.incomparable, notes=work.notes, saved_run=True)
        band = next(t for t in (tolerance, self.saved.tolerance, gate.DEFAULT_TOLERANCE)
                    if t is not None)
        entries = self.saved.entries(names=gated, tolerance=band)
        baseline = baselines.Baseline(metrics=entries, path=str(self.path), test_id=self.key)
        return Judgement(report=gate.check_baseline(current.estimates, baseline),
                         baseline=baseline, saved_run=True, notes=work.notes)

    def _unusable(self) -> str | None:
        """Why the saved result is no reference: absent, measured on another workload, or a
        measurement that says nothing of the engine (the client limited it, the engine died)."""
        where = f'{self.path} :: "{self.key}"'
        if self.saved is None:
            return f"not in the saved run {where}: nothing to compare"
        status = Status.from_summary(self.saved.verdict)
        if status in NOT_REFERENCES:
            return f"{where}: the saved result was {status.summary}, no reference; not compared"
        changed = baselines.workload_changes(self.saved.workload, self.workload)
        if changed:
            return (f"{where}: saved with another workload ({', '.join(changed)}); not "
                    "compared; save the run again with --llmperf-save NAME")
        return None


@dataclass(frozen=True)
class SideA:
    """Side A of a paired run: its repeats, paired by position with the current (side B)
    ones, judged on the B/A ratios under the A/B tolerance (ab.py)."""

    runs: tuple[Mapping[str, float], ...]
    tolerance: float
    first_round: int | None = None  # pairs before the confirm pairs (ab.PairedRatios)
    work: ExecutedWork | None = None  # what side A's representative run executed
    work_rule: same_work.Rule = same_work.Rule()

    def compare(self, current: Current, gated: Sequence[str],
                tolerance: float | None = None) -> Judgement:
        pairs = min(len(self.runs), len(current.runs))
        ratios = paired_ratios(self.runs[:pairs], current.runs[:pairs], list(gated),
                               self.first_round)
        work = self.work_rule.check(self.work, combine_runs(list(self.runs)), current.work,
                                    current.estimates, reference_name="A")
        if work.incomparable:  # the ratios are kept, unjudged
            return Judgement(incomparable=work.incomparable, notes=work.notes, saved_run=True,
                             ab=ab_entry(ratios, self.tolerance, gate.GateReport()))
        report = judge_pairs(ratios, self.tolerance)
        return Judgement(report=report, saved_run=True, notes=work.notes,
                         ab=ab_entry(ratios, self.tolerance, report))


@dataclass(frozen=True)
class NotJudged:
    """Nothing to compare with; `why` is the note, `status` what the verdict column says."""

    why: str
    status: Status = Status.NOT_COMPARED

    def compare(self, current: Current, gated: Sequence[str],
                tolerance: float | None = None) -> Judgement:
        return Judgement(notes=[self.why], ungated=self.status)


@dataclass(frozen=True)
class Unusable:
    """A reference that could not be read (a malformed saved run): one line says why."""

    error: str

    def compare(self, current: Current, gated: Sequence[str],
                tolerance: float | None = None) -> Judgement:
        return Judgement(error=self.error)


# ---------------------------------------------------------------- the verdict


def check_slo(estimates: Mapping[str, Estimate], slo: gate.SLO | None,
              known: Callable[[str], bool]) -> Judgement:
    if slo is None:
        return Judgement()
    try:
        return Judgement(report=gate.check_targets(estimates, slo, known=known))
    except gate.UnknownMetricError as exc:
        return Judgement(error=f"SLO: {exc}")


def judge(current: Current, reference: Reference | None, *,
          gated: Sequence[str] = gate.DEFAULT_GATED, tolerance: float | None = None,
          slo: gate.SLO | None = None,
          known: Callable[[str], bool] | None = None,
          also: Sequence[Reference] = ()) -> Judgement:
    """The verdict on a measurement: its hard targets first (an SLO names any metric it
    knows), then its gated metrics against the reference (None: targets only), then against
    each further check in `also` (the trend gate, history/trend.py), judged alike."""
    targets = check_slo(current.estimates, slo, known or current.estimates.__contains__)
    checks = [check for check in (reference, *also) if check is not None]
    return combine(targets, *(check.compare(current, tuple(gated), tolerance)
                              for check in checks))


def updated_entries(estimates: dict[str, Estimate], ref: BaselineRef, tolerance: float | None,
                    gated: tuple[str, ...] = gate.DEFAULT_GATED, *, exact: bool = False,
                    kind: str | None = None) -> dict[str, baselines.BaselineEntry]:
    """Entries to write for --llmperf-update-baselines, keeping hand-edited tolerances. With
    `exact` (the test names its gated metrics) exactly those are written; otherwise a metric
    added to the file by hand is kept too. With the hardware `kind` (noise.kind_of) each entry
    stores its run-to-run spread and where it came from, with noise.FLOOR as its tolerance
    unless the tolerance is the test's or was edited by hand (noise.with_spreads); without it,
    entries as before that field existed."""
    try:
        previous = baselines.load_baseline(ref.shown, ref.key)
    except baselines.BaselineError:
        previous = None  # a broken table is replaced whole
    if exact and previous is not None:
        previous = only_metrics(previous, gated)
    kwargs = {"tolerance": tolerance} if tolerance is not None else {}
    if tolerance is not None and previous is not None:
        kwargs["overrides"] = {name: tolerance for name in previous.metrics}
    entries = gate.make_entries(estimates, names=gated, previous=previous, **kwargs)
    if kind is None:
        return entries
    users = set(entries) if tolerance is not None else {
        name for name, entry in (previous.metrics if previous else {}).items()
        if entry.tolerance != _written_tolerance(entry)}
    return noise.with_spreads(entries, estimates, kind, keep_tolerance=users)


def _written_tolerance(entry: baselines.BaselineEntry) -> float:
    """The tolerance the plugin itself wrote into an entry like this one: any other was set by
    hand. Before spread_source existed every entry got gate.DEFAULT_TOLERANCE."""
    return noise.FLOOR if entry.spread_source else gate.DEFAULT_TOLERANCE
