"""The session's state: settings, the engine pool, tokenizers, every result measured so far, and
the judging of each result against its SLOs and baseline.

Owned by the plugin (one per pytest session, kept in `config.stash`), never a module global.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.client.measure import Endpoint, Measurement, measure
from pytest_llmperf.client.openai import ClientOptions
from pytest_llmperf.client.selfcheck import check_client
from pytest_llmperf.engines.errors import EngineDied, EngineStalled
from pytest_llmperf.engines.pool import MAX_DEATHS, EnginePool
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import InputError
from pytest_llmperf.failures import describe_counts
from pytest_llmperf.ids import result_id, user_nodeid
from pytest_llmperf.metrics.compute import RunMetrics, compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.reports import saved_runs
from pytest_llmperf.reports.notes import Note
from pytest_llmperf.session import ab_run
from pytest_llmperf.session.ab_run import PausedAb
from pytest_llmperf.session.provenance import engine_identity, git_commit
from pytest_llmperf.session.settings import Settings, usable_cores
from pytest_llmperf.session.updates import BaselineUpdates, PendingUpdate
from pytest_llmperf.verdict import baselines, gate, judge
from pytest_llmperf.verdict.ab import ab_line
from pytest_llmperf.verdict.status import Status
from pytest_llmperf.workloads.workload import Workload

# More client processes than this only add start-up and merge time: 8 of them measured
# (estimated from ~100,000 chunks/s per process on a free core) far above any one server.
MAX_AUTO_WORKERS = 8
RUNS_DIR = Path(".llmperf/runs")
# Machine-local first-run baselines (judge.BaselineTable.local): never committed.
LOCAL_BASELINES_DIR = Path(".llmperf/baselines")


@dataclass
class LlmperfSession:
    settings: Settings
    pool: EnginePool
    hardware_class: str = "cpu"
    fingerprint: dict[str, Any] = field(default_factory=dict)
    results: list[Result] = field(default_factory=list)
    verdicts: dict[str, Status] = field(default_factory=dict)
    # test id -> the gate settings its test declared, for the run file (see runfile.run_document)
    gates: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    # test id -> what the run file adds to that result: "ab" (side B's paired judgement,
    # ab.ab_entry) and "capacity" (a capacity probe's SLO and outcome), for `llmperf compare`
    # and the plots
    annotations: dict[str, dict[str, Any]] = field(default_factory=lambda: defaultdict(dict))
    updates: BaselineUpdates = field(default_factory=BaselineUpdates)
    # test id -> an A/B measurement whose confirm pairs were deferred (run_ab, defer=True)
    paused_ab: dict[str, PausedAb] = field(default_factory=dict)
    extras: list[tuple[str, dict[str, Estimate], str]] = field(default_factory=list)
    engine_nice: int = 0
    gpu_count: int = 0  # GPUs this process may use (0 on CPU hardware)
    # Report payloads (outputs.payload) of this process and, on an xdist controller, its workers.
    payloads: list[dict[str, Any]] = field(default_factory=list)
    _tokenizers: dict[str, Any] = field(default_factory=dict)
    _saved_run: Any = None

    def __post_init__(self) -> None:
        self.pool.on_death = self._note_death

    # ------------------------------------------------------------------ measuring

    def tokenizer_for(self, engine: Engine):
        """The engine's tokenizer for prompt generation; for a model shipped as a bare
        architecture config (no tokenizer files), its vocabulary from config.json. A Hub id's
        files are fetched here, before its engine starts (model_files.model_dir); vLLM's
        tokenizer revision defaults to the model's, and so does this one."""
        ref = engine.tokenizer or engine.model
        key = f"{ref}@{engine.revision}" if engine.revision else ref
        if key not in self._tokenizers:
            from pytest_llmperf.model_files import model_dir
            from pytest_llmperf.workloads.prompts import load_tokenizer
            from pytest_llmperf.workloads.vocab import vocab_from_config

            path = model_dir(ref, engine.revision)  # InputError (one line) when there is none
            try:
                self._tokenizers[key] = load_tokenizer(path)
            except FileNotFoundError as exc:
                vocab = vocab_from_config(path)
                if vocab is None:  # neither file: the test fails with the line, no traceback
                    raise InputError(str(exc)) from None
                self._tokenizers[key] = vocab
        return self._tokenizers[key]

    def endpoint_for(self, engine: Engine, workload: Workload) -> tuple[Endpoint, float | None]:
        """Start (or reuse) the engine; with --llmperf-endpoint, use that server instead."""
        options = ClientOptions(api=workload.api)
        if self.settings.endpoint:
            return Endpoint(self.settings.endpoint, engine.model_name, options), None
        server = self.pool.get(engine)
        return Endpoint(server.base_url, engine.model_name, options), server.start_time_s

    def run(self, nodeid: str, key: str, engine: Engine, workload: Workload,
            repeat: int) -> Result:
        # The same requests and arrival schedule every repeat: only the engine's timing varies.
        # Built first: a bad dataset or config fails before an engine start is paid for.
        requests, warmup = workload.build(self.tokenizer_for(engine))
        endpoint, start_s = self.endpoint_for(engine, workload)
        runs: list[tuple[RunMetrics, Measurement]] = []
        died = None
        for attempt in range(repeat):
            run, died = self.measure_once(engine, endpoint, requests, workload,
                                           warmup if attempt == 0 else ())
            runs.append(run)
            if run[1].client_error or died:
                break  # a client worker or the engine died: what was measured is kept
        result = self.record(nodeid, key, engine, workload, runs, start_s)
        if died:
            self.mark_died([result], died)
            raise died
        return result

    def mark_died(self, results: Sequence[Result], died: EngineDied) -> None:
        """The verdict of measurements their engine died (or stalled) in."""
        status = Status.ENGINE_STALLED if isinstance(died, EngineStalled) else Status.ENGINE_DIED
        for result in results:
            self.verdicts[result.test_id] = status

    def run_ab(self, nodeid: str, key: str, a: Engine, b: Engine, workload: Workload,
               pairs: int, confirm_pairs: int = 0, gated: tuple[str, ...] = (),
               defer: bool = False) -> tuple[Result, ...]:
        """A paired A/B measurement of engines `a` and `b` (ab_run.run_ab)."""
        return ab_run.run_ab(self, nodeid, key, a, b, workload, pairs, confirm_pairs, gated,
                             defer)

    def measure_once(self, engine: Engine, endpoint: Endpoint, requests, workload: Workload,
                      warmup) -> tuple[tuple[RunMetrics, Measurement], EngineDied | None]:
        measured = measure(endpoint, requests, workload.pattern, seed=workload.seed,
                           warmup=warmup, duration_s=workload.duration_s,
                           workers=self.client_workers(),
                           stall_timeout_s=self.settings.stall_timeout)
        return (compute_metrics(measured.records), measured), \
            self.engine_death(engine, measured.records, measured.stall)

    def record(self, nodeid: str, key: str, engine: Engine, workload: Workload,
                runs: list[tuple[RunMetrics, Measurement]], start_s: float | None) -> Result:
        """The Result of one engine's runs, added to the session. Its representative run (the
        records and summaries shown) is the median by output throughput."""
        metrics, measured = sorted(runs, key=lambda run: run[0].output_throughput_tok_s)[
            len(runs) // 2]
        warning = Note(None, measured.warning) if measured.warning else None
        if warning and warning not in self.notes:
            self.notes.append(warning)
        result = Result(
            test_id=result_id(nodeid, key), key=key,
            engine=self.engine_identity(engine), engine_label=engine.label(),
            workload=workload.to_dict(), workload_label=workload.label(),
            metrics=metrics, runs=tuple(run[0] for run in runs),
            records=tuple(measured.records), server_metrics=measured.server_metrics,
            fingerprint=dict(self.fingerprint), engine_start_s=start_s,
            client=check_client(metrics, measured.client, workload.pattern),
            client_error=measured.client_error,
        )
        self.results.append(result)
        if result.client_error or result.client.limited:
            self.verdicts[result.test_id] = Status.CLIENT_LIMITED
        if result.failed:  # what went wrong, by kind, whether or not the error rate is allowed
            self.notes.append(Note(result.test_id, f"{result.failed} of "
                                   f"{result.failed + result.completed} requests failed: "
                                   f"{describe_counts(result.failure_kinds())}"))
        return result

    def engine_death(self, engine: Engine, records, stall: str | None = None
                     ) -> EngineDied | None:
        """After requests failed, did the engine die? After a stall, it is killed like a dead
        one. (An endpoint's server is not ours to judge or restart: a stall there fails the test,
        nothing more.)"""
        if self.settings.endpoint:
            return EngineStalled(f"the server at {self.settings.endpoint} stalled during the test "
                                 f"({stall}); it is not ours to restart") if stall else None
        if not (stall or any(record.error for record in records)):
            return None
        return self.pool.check(engine, stall=stall)

    def _note_death(self, engine: Engine, line: str, restarted: bool) -> None:
        then = (f"restarted for the next test ({self.pool.deaths[engine]} of {MAX_DEATHS} "
                "deaths)" if restarted else "not started again")
        self.notes.append(Note(None, f"{line}; {then}"))

    def client_workers(self) -> int:
        """--llmperf-client-workers as a number. auto: every core but the engine's, where the
        engine runs on this machine's CPU; every core but two beside a local GPU engine (vLLM's
        API server and its busy-polling engine core each keep one busy); all of them for an
        endpoint elsewhere."""
        chosen = self.settings.client_workers
        if chosen != "auto":
            return chosen
        reserved = 0 if self.settings.endpoint else 1 if self.hardware_class == "cpu" else 2
        return max(1, min(MAX_AUTO_WORKERS, usable_cores() - reserved))

    def engine_identity(self, engine: Engine) -> dict[str, Any]:
        """The spec as baselines record it (provenance.engine_identity)."""
        return engine_identity(engine, self.settings.rootdir)

    def run_offline(self, engine: Engine, workload: Workload):
        """Offline mode needs the accelerator to itself: running server engines stop first. It
        runs at normal priority: there is no client to protect from it, only its throughput."""
        from pytest_llmperf.engines.offline import run_offline

        self.pool.stop_all()
        requests, _ = workload.build(self.tokenizer_for(engine))
        return run_offline(engine, requests, self.log_dir())

    def annotate(self, test_id: str, **fields: Any) -> None:
        """Data the run file keeps with a result beyond its metrics (see `annotations`)."""
        self.annotations[test_id].update(fields)

    def record_extra(self, test_id: str, estimates: dict[str, Estimate], detail: str) -> None:
        """Metrics that are not a run (an SLO capacity, offline throughput), for the summary."""
        self.extras.append((test_id, estimates, detail))

    def log_dir(self) -> Path:
        return self.settings.path(self.settings.log_dir)

    # ------------------------------------------------------------------ judging

    def baseline_ref(self, suite_path: Path, nodeid: str, key: str) -> judge.BaselineRef:
        directory = self.settings.path(self.settings.baseline_dir) / self.hardware_class
        return judge.BaselineRef(directory / f"{Path(suite_path).stem}.toml", key, nodeid)

    def judge(self, item, result: Result, options, slo) -> judge.Judgement:
        """A measured run: its SLOs over every metric, its reference over the gated ones (the
        test's `gate=` list, else the baseline's own, else gate.DEFAULT_GATED)."""
        known = _known_metric(result.metrics)
        declared = {"tolerance": options.tolerance, "metrics": options.gate and list(options.gate)}
        self.gates[result.test_id] = {k: v for k, v in declared.items() if v is not None}
        if options.gate:
            try:
                gate.check_names(list(options.gate), known)
            except gate.UnknownMetricError as exc:
                judgement = judge.Judgement(error=f"@pytest.mark.llmperf(gate=...): {exc}")
                self.verdicts[result.test_id] = judgement.status
                return judgement
        subject = judge.Subject(item, result.test_id, result.key, result.engine, result.workload)
        return self.judge_estimates(subject, judge.Current.of(result.runs), options, slo=slo,
                                    known=known, gated=tuple(options.gate or gate.DEFAULT_GATED),
                                    exact=bool(options.gate))

    def judge_ab(self, result_a: Result, result_b: Result, options, slo) -> judge.Judgement:
        """--llmperf-ab: side B's SLOs, then side B against side A on the paired B/A ratios of
        the gated metrics (the test's `gate=` list, else gate.DEFAULT_GATED) under
        --llmperf-ab-tolerance."""
        side_a = judge.SideA(tuple(run.flat() for run in result_a.runs),
                              self.settings.ab_tolerance, self.settings.ab_pairs)
        judgement = judge.judge(judge.Current.of(result_b.runs), side_a,
                                 gated=options.gate or gate.DEFAULT_GATED, slo=slo,
                                 known=_known_metric(result_b.metrics))
        self.annotate(result_b.test_id, ab=judgement.ab)
        if self.verdicts.get(result_b.test_id) != Status.CLIENT_LIMITED:
            self.verdicts[result_b.test_id] = judgement.status
        self.notes.append(Note(result_b.test_id, ab_line(judgement.ab)))
        self.notes += [Note(result_b.test_id, verdict.message)
                       for verdict in judgement.report.verdicts if verdict.status != Status.PASS]
        return judgement

    def judge_estimates(self, subject: judge.Subject, current: judge.Current, options, *, slo,
                        known, gated: tuple[str, ...], exact: bool = True) -> judge.Judgement:
        """Any named metrics (a run's, an SLO capacity, an offline throughput) through the SLO
        check and then this session's reference (reference_for), or into a pending baseline
        update. `exact`: gate exactly `gated`, whatever else an existing baseline holds."""
        ref = self.baseline_ref(subject.item.path, user_nodeid(subject.item.nodeid), subject.key)
        reference = None if self.settings.update_baselines else self.reference_for(
            subject, ref, exact)
        judgement = judge.judge(current, reference, gated=gated, tolerance=options.tolerance,
                                 slo=slo, known=known)
        limited = self.verdicts.get(subject.test_id) == Status.CLIENT_LIMITED
        if self.settings.update_baselines and limited:
            self.notes.append(Note(subject.test_id, "baseline not updated (client-limited run)"))
        elif self.settings.update_baselines and not judgement.failed:
            self._owe_update(subject, ref, current, options, gated, exact)
        elif judgement.record_local and not limited and not judgement.failed:
            self._owe_update(subject, self.local_ref(ref), current, options, gated, exact,
                             local=True)
        self.verdicts[subject.test_id] = Status.CLIENT_LIMITED if limited else judgement.status
        self.notes += [Note(subject.test_id, note) for note in judgement.notes]
        return judgement

    def _owe_update(self, subject: judge.Subject, ref: judge.BaselineRef, current: judge.Current,
                    options, gated: tuple[str, ...], exact: bool, local: bool = False) -> None:
        """A baseline update for `ref` from this measurement, written once the test passed."""
        entries = judge.updated_entries(dict(current.estimates), ref, options.tolerance, gated,
                                        exact=exact)
        provenance = baselines.make_provenance(self.fingerprint, subject.engine,
                                               subject.workload,
                                               commit=git_commit(self.settings.rootdir))
        self.updates.add(subject.item.nodeid, PendingUpdate(ref, entries, provenance, local))

    def reference_for(self, subject: judge.Subject, ref: judge.BaselineRef,
                      exact: bool) -> judge.Reference:
        """What this session judges a measurement against: --llmperf-compare's saved run, else
        the suite's baseline table. In an A/B session only llmperf.run is paired; a sweep,
        capacity or offline run measured side A only."""
        if self.settings.ab:
            return judge.NotJudged("measured on side A only; --llmperf-ab judges llmperf.run")
        if self.settings.compare:
            return self._saved_reference(subject.key, subject.workload)
        return judge.BaselineTable(ref, subject.engine, self.fingerprint,
                                   require=self.settings.require_baseline, exact=exact,
                                   local=self.local_ref(ref), workload=subject.workload)

    def local_ref(self, ref: judge.BaselineRef) -> judge.BaselineRef:
        """The machine-local stand-in for a committed baseline table: the same file name and
        key under .llmperf/baselines/<machine>/<hardware class>/."""
        directory = (self.settings.path(LOCAL_BASELINES_DIR)
                     / baselines.machine_id(self.fingerprint) / self.hardware_class)
        return judge.BaselineRef(directory / ref.path.name, ref.key, ref.nodeid)

    def _saved_reference(self, key: str, workload: dict[str, Any]) -> judge.Reference:
        """The --llmperf-compare run's test `key`; read once per session."""
        try:
            if self._saved_run is None:
                path = saved_runs.resolve_saved(self.settings.compare, self.runs_dir())
                self._saved_run = (path, saved_runs.read_run(path))
        except saved_runs.RunFileError as exc:
            return judge.Unusable(str(exc))
        path, saved = self._saved_run
        return judge.SavedRun(Path(os.path.relpath(path)), key, saved.results.get(key), workload)

    def apply_updates(self, nodeid: str, passed: bool) -> list[str]:
        """Write a test's pending baseline updates if it passed (updates.BaselineUpdates)."""
        return self.updates.apply(nodeid, passed, self.notes, self.verdicts)

    # ------------------------------------------------------------------ output

    def runs_dir(self) -> Path:
        return self.settings.path(RUNS_DIR)


def _known_metric(metrics: RunMetrics):
    def known(name: str) -> bool:
        try:
            metrics.get(name)
        except KeyError:
            return False
        return True

    return known
