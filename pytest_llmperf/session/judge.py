"""The session's judge: each measurement in the ledger (session/ledger.py) against its SLOs and
its reference (the suite's baseline table, this machine's first-run baseline, or
--llmperf-compare's saved run), side B of an A/B run against side A, the trend gate over the
results store, and the baseline updates a passing test owes (session/updates.py). It writes
each verdict, and the notes that explain it, into the ledger.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf.client import server_info
from pytest_llmperf.ids import MeasurementId, user_nodeid
from pytest_llmperf.metrics.compute import RunMetrics
from pytest_llmperf.reports import saved_runs
from pytest_llmperf.session.history_run import SessionHistory
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.session.provenance import git_commit
from pytest_llmperf.session.settings import RUNS_DIR
from pytest_llmperf.session.updates import BaselineUpdates, PendingUpdate
from pytest_llmperf.verdict import (
    baselines,
    budget,
    detectable,
    gate,
    noise,
    same_node,
    same_work,
    shapes,
)
from pytest_llmperf.verdict.measurement_record import GateSettings, MeasurementRecord
from pytest_llmperf.verdict.paired_ratios import ab_line
from pytest_llmperf.verdict.references import (
    NOT_REFERENCES,
    BaselineRef,
    BaselineTable,
    Current,
    Judgement,
    NotJudged,
    Reference,
    SavedRun,
    SideA,
    Subject,
    TestNode,
    Unusable,
    judge,
    updated_entries,
)
from pytest_llmperf.verdict.status import Status, decide, named_beside

if TYPE_CHECKING:  # the A/B runner's plan; ab_run imports this module's neighbours at run time
    from pytest_llmperf.session.ab_run import AbPlan

__all__ = ["Judge", "JudgeConfig", "known_metric"]

# Machine-local first-run baselines (BaselineTable.local): never committed.
LOCAL_BASELINES_DIR = Path(".llmperf/baselines")

# A run one of these judged says nothing of its engine: it keeps its verdict, and no baseline.
UNJUDGED = frozenset({Status.CLIENT_LIMITED, Status.DISTURBED})


# What a session judges its measurements against (JudgeConfig.reference), one per session.
BASELINES = "baselines"  # the suite's committed tables (or this machine's first-run ones)
SAVED_RUN = "saved run"  # --llmperf-compare's
SIDE_A = "side A"  # --llmperf-ab: llmperf.run is paired; its other calls are not judged
UPDATE = "update"  # --llmperf-update-baselines: nothing; a passing test writes its table


@dataclass(frozen=True)
class JudgeConfig:
    """What the judge reads of the session's settings (session/settings.py): made once by the
    plugin (plugin/configs.py), so the judge never holds the whole Settings."""

    baseline_dir: Path = Path("baselines")  # absolute, or under the working directory
    rootdir: Path = Path(".")
    reference: str = BASELINES
    saved_run: str | None = None  # --llmperf-compare NAME (or a JSON path)
    require_baseline: bool = False
    outputs_must_match: bool = False  # --llmperf-outputs must-match

    def path(self, value: Path) -> Path:
        """Relative paths are relative to pytest's rootdir (Settings.path)."""
        return value if value.is_absolute() else self.rootdir / value

    @property
    def updating(self) -> bool:
        return self.reference == UPDATE


@dataclass
class Judge:
    config: JudgeConfig
    ledger: Ledger
    # The server identity of an engine's recorded identity, for a baseline's provenance
    # (runner.Runner.server_of).
    server_of: Callable[[dict[str, Any]], dict[str, str]] = lambda identity: {}
    history: SessionHistory | None = None  # the results store (session/history_run.py)
    updates: BaselineUpdates = field(default_factory=BaselineUpdates)
    # The comparisons this run plans (its llmperf tests x the metrics gated by default; 0 until
    # collection counts them): the run's false-alarm budget is shared among them (budget.py).
    comparisons: int = 0
    _saved_run: tuple[Path, saved_runs.ReadRun] | None = None

    @property
    def hardware_class(self) -> str:
        return self.ledger.hardware_class

    def baseline_ref(self, suite_path: Path, nodeid: str, key: str,
                     engine: dict[str, Any] | None = None) -> BaselineRef:
        """The table of a test whose engine is `engine`: in its runner shape's folder
        (verdict/shapes.py: baselines/h200/ for an engine on one H200, h200-8gpu/ on eight)."""
        directory = self.config.baseline_dir / shapes.folder(
            self.hardware_class, shapes.engine_gpus(engine))
        return BaselineRef(directory / f"{Path(suite_path).stem}.toml", key, nodeid)

    def judge_record(self, test: TestNode, record: MeasurementRecord, options,
              slo) -> Judgement:
        """A measured run: its SLOs over every metric, its reference over the gated ones (the
        test's `gate=` list, else the baseline's own, else gate.DEFAULT_GATED)."""
        result = record.result
        known = known_metric(result.metrics)
        record.gate = GateSettings(options.tolerance, tuple(options.gate) if options.gate else None)
        if options.gate:
            try:
                gate.check_names(list(options.gate), known, what="gate")
            except gate.UnknownMetricError as exc:
                judgement = Judgement(error=f"@pytest.mark.llmperf(gate=...): {exc}")
                record.status = judgement.status
                return judgement
        subject = Subject(test, record.test_id, record.key, result.engine, result.workload)
        current = Current.of(result.runs, work=result.work)
        return self.judge_estimates(record.id, subject, current, options, slo=slo, known=known,
                                    gated=tuple(options.gate or gate.DEFAULT_GATED),
                                    exact=bool(options.gate))

    def judge_ab(self, record_a: MeasurementRecord, record_b: MeasurementRecord, options,
                 slo, plan: AbPlan) -> Judgement:
        """--llmperf-ab: side B's SLOs, then side B against side A on the paired B/A ratios of
        the gated metrics (the test's `gate=` list, else gate.DEFAULT_GATED) under the plan's
        tolerance (--llmperf-ab-tolerance: the plan that measured them holds it)."""
        result_a, result_b = record_a.result, record_b.result
        side_a = SideA(tuple(run.flat() for run in result_a.runs), plan.tolerance, plan.pairs,
                       work=result_a.work, work_rule=self.work_rule)
        judgement = judge(Current.of(result_b.runs, work=result_b.work), side_a,
                                 gated=options.gate or gate.DEFAULT_GATED, slo=slo,
                                 known=known_metric(result_b.metrics))
        record_b.ab = judgement.ab
        noise = record_a.status if record_a.status in UNJUDGED else None
        record_b.status = self._decide(record_b.test_id, record_b.status, noise,
                                       judgement.status)
        sides = server_info.sides_text(result_a.server, result_b.server)
        self.ledger.note(record_b.test_id,
                         ab_line(judgement.ab) + (f"; {sides}" if sides else ""))
        for note in [*judgement.notes, *filter(None, [judgement.incomparable])]:
            self.ledger.note(record_b.test_id, note)
        for verdict in judgement.report.verdicts:
            if verdict.status != Status.PASS:
                self.ledger.note(record_b.test_id, verdict.message)
        return judgement

    def judge_estimates(self, id: MeasurementId, subject: Subject, current: Current,
                        options, *, slo, known, gated: tuple[str, ...],
                        exact: bool = True) -> Judgement:
        """Any named metrics of the measurement `id` (a run's, an SLO capacity, an offline
        throughput) through the SLO check and then this session's reference (reference_for),
        or into a pending baseline update. `exact`: gate exactly `gated`, whatever else an
        existing baseline holds."""
        ref = self.baseline_ref(subject.test.path, user_nodeid(subject.test.nodeid), subject.key,
                                subject.engine)
        reference = None if self.config.updating else self.reference_for(subject, ref, exact,
                                                                          gated)
        judgement = judge(current, reference, gated=gated, tolerance=options.tolerance,
                                 slo=slo, known=known,
                                 also=self._trend_checks(id, subject, gated, ref))
        judgement = self._budgeted(id, subject.test_id, judgement)
        limited = self.ledger.status(id)
        limited = limited if limited in UNJUDGED else None
        if self.config.updating and limited:
            why = "client-limited" if limited == Status.CLIENT_LIMITED else "disturbed"
            self.ledger.note(subject.test_id, f"baseline not updated ({why} run)")
        elif self.config.updating and not judgement.failed:
            written = self._from_history(id, subject, current, gated, options.tolerance)
            self._owe_update(id, subject, ref, written, options, gated, exact)
        elif judgement.record_local and not limited and not judgement.failed:
            self._owe_update(id, subject, self.local_ref(ref), current, options, gated, exact,
                             local=True)
        self.ledger.judged(id, self._decide(subject.test_id, limited, judgement.status))
        for note in judgement.notes:
            self.ledger.note(subject.test_id, note)
        return judgement

    def _budgeted(self, id: MeasurementId, test_id: str, judgement: Judgement) -> Judgement:
        """The judgement with each regression its measured noise does not confirm within the
        run's false-alarm budget named, not failed (verdict/budget.py); what each gated metric
        can detect and its band's false-alarm chance kept for the run file and the summary, and
        a note naming a test that cannot see its tolerance (verdict/detectable.py)."""
        alpha = budget.per_comparison(self.comparisons or len(judgement.report.verdicts))
        verdicts = []
        for verdict in judgement.report.verdicts:
            kept, note = budget.confirm(verdict, alpha)
            verdicts.append(kept)
            if note:
                self.ledger.note(test_id, note)
        judgement = replace(judgement, report=gate.GateReport(tuple(verdicts)))
        seen = detectable.of_report(verdicts, alpha)
        for name, chance in budget.chances(verdicts).items():
            if name in seen:
                seen[name] |= {"false_alarm": chance, "alpha": round(alpha, 8)}
        if seen:
            self.ledger.annotate(id, detectable=seen)
        if line := detectable.blind_line(seen, alpha):
            self.ledger.note(test_id, line)
        return judgement

    def _decide(self, test_id: str, *statuses: Status | None) -> Status:
        """The one status of a measurement (verdict/status.PRECEDENCE); the facts about the noise
        it outranked are named in a note beside it."""
        decided = decide(*statuses)
        for beside in named_beside(decided, *statuses):
            self.ledger.note(test_id, f"{decided.summary}, whatever the noise: the run was also "
                                      f"{beside.summary.lower()} (a fact about the work outranks "
                                      "one about the noise)")
        return decided

    def _of_the_engine(self, id: MeasurementId) -> bool:
        """Is the measurement one of its engine (not CLIENT LIMITED, DISTURBED, ...)? Only such
        a one is a point of its series in the results store."""
        return self.ledger.status(id) not in NOT_REFERENCES

    def _trend_checks(self, id: MeasurementId, subject: Subject, gated,
                      ref: BaselineRef):
        """The trend gate's check of this measurement, when --llmperf-trend is on; a change
        before the committed table's date was accepted by updating it (history/trend.py)."""
        history = self.history
        if history is None or not history.trend or self.config.updating \
                or not self._of_the_engine(id):
            return ()
        return history.trend_checks(subject, gated, baseline_date(ref))

    def _from_history(self, id: MeasurementId, subject: Subject, current: Current,
                      gated, tolerance: float | None) -> Current:
        """With --llmperf-from-history N, the estimates a baseline update writes; the note says
        over which runs."""
        history = self.history
        if history is None or not history.from_history or not self._of_the_engine(id):
            return current
        written, note = history.baseline_current(subject, current, gated, tolerance)
        if note:
            self.ledger.note(subject.test_id, note)
        return written

    def _owe_update(self, id: MeasurementId, subject: Subject, ref: BaselineRef,
                    current: Current, options, gated: tuple[str, ...], exact: bool,
                    local: bool = False) -> None:
        """A baseline update for `ref` from this measurement, written once the test passed."""
        entries = updated_entries(dict(current.estimates), ref, options.tolerance, gated,
                                        exact=exact, kind=noise.kind_of(self.hardware_class))
        # The baseline file's provenance: the fingerprint as the file keeps it.
        provenance = baselines.make_provenance(self.ledger.fingerprint.to_dict(), subject.engine,
                                               subject.workload,
                                               commit=git_commit(self.config.rootdir),
                                               server=self.server_of(subject.engine))
        # What a later run must also execute (verdict/references.py, _work_differs).
        if current.work is not None:
            provenance["work"] = current.work.to_dict(digests=False)
        self.updates.add(subject.test.nodeid, PendingUpdate(ref, entries, provenance, id, local))

    def reference_for(self, subject: Subject, ref: BaselineRef,
                      exact: bool, gated: tuple[str, ...] = ()) -> Reference:
        """What this session judges a measurement against: --llmperf-compare's saved run, else
        the suite's baseline table, whose regressions an acknowledgement in the results store
        may cover (history/acked_baseline.py). In an A/B session only llmperf.run is paired; a
        sweep, capacity or offline run measured side A only."""
        if self.config.reference == SIDE_A:
            return NotJudged("measured on side A only; --llmperf-ab judges llmperf.run")
        if self.config.reference == SAVED_RUN:
            return self._saved_reference(subject.key, subject.workload)
        table = BaselineTable(ref, subject.engine, self.ledger.fingerprint.to_dict(),
                              require=self.config.require_baseline, exact=exact,
                              local=self.local_ref(ref), workload=subject.workload)
        if self.history is None:
            return table
        return self.history.acknowledging(subject, gated, table)

    def local_ref(self, ref: BaselineRef) -> BaselineRef:
        """The machine-local stand-in for a committed baseline table: the same file name and
        key under .llmperf/baselines/<machine>/<hardware class>/."""
        directory = (self.config.path(LOCAL_BASELINES_DIR)
                     / baselines.machine_id(self.ledger.fingerprint.to_dict())
                     / ref.path.parent.name)
        return BaselineRef(directory / ref.path.name, ref.key, ref.nodeid)

    @property
    def work_rule(self) -> same_work.Rule:
        """How a comparison checks that both sides did the same work (--llmperf-outputs)."""
        return same_work.Rule(outputs_must_match=self.config.outputs_must_match)

    def _saved_reference(self, key: str, workload: dict[str, Any]) -> Reference:
        """The --llmperf-compare run's test `key`; read once per session. The note names what
        changed since it was saved (driver, CUDA, vLLM: same_node.py)."""
        try:
            if self._saved_run is None:
                path = saved_runs.resolve_saved(self.config.saved_run,
                                                self.config.path(RUNS_DIR))
                self._saved_run = (path, saved_runs.read_run(path))
        except saved_runs.RunFileError as exc:
            return Unusable(str(exc))
        path, saved = self._saved_run
        # Another node was refused before anything was measured (plugin/hooks.py).
        changes = same_node.stack_changes(saved.fingerprint, self.ledger.fingerprint.to_dict())
        return SavedRun(Path(os.path.relpath(path)), key, saved.results.get(key), workload,
                              work_rule=self.work_rule,
                              changed=f"changed since the saved run: {', '.join(changes)}"
                              if changes else None)

    def apply_updates(self, nodeid: str, passed: bool) -> list[str]:
        """Write a test's pending baseline updates if it passed (updates.BaselineUpdates)."""
        return self.updates.apply(nodeid, passed, self.ledger)


def baseline_date(ref: BaselineRef) -> datetime | None:
    """When the committed table `ref` was written (its provenance's date); None without one."""
    try:
        table = baselines.load_baseline(ref.shown, ref.key)
        written = datetime.fromisoformat(str(table.provenance["date"])) if table else None
    except (baselines.BaselineError, KeyError, ValueError):
        return None
    return written if written is None or written.tzinfo else written.replace(tzinfo=timezone.utc)


def known_metric(metrics: RunMetrics):
    """Can a test name `name` for this run? (A metric the run lacks is not: its engine's start
    time where this session did not start that engine.)"""
    def known(name: str) -> bool:
        try:
            metrics.get(name)
        except KeyError:
            return False
        return True

    return known
