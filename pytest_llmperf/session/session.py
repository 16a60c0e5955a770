"""The session's state: settings, the engine pool, tokenizers, every result measured so far, and
the judging of each result against its SLOs and baseline.

Owned by the plugin (one per pytest session, kept in `config.stash`), never a module global.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_llmperf.client import server_info
from pytest_llmperf.client.measure import Endpoint, Measurement, measure
from pytest_llmperf.client.openai import ClientOptions
from pytest_llmperf.client.selfcheck import check_client
from pytest_llmperf.client.server_kind import KINDS, VLLM, ServerKind, limits
from pytest_llmperf.engines.errors import EngineDied, EngineStalled
from pytest_llmperf.engines.interpreter import engine_versions, kind_identity
from pytest_llmperf.engines.pool import MAX_DEATHS, EnginePool
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import InputError
from pytest_llmperf.failures import describe_counts
from pytest_llmperf.ids import MeasurementId, result_id, user_nodeid
from pytest_llmperf.machine.disturbance import Disturbance
from pytest_llmperf.machine.hardware import is_gpu_class
from pytest_llmperf.machine.watch import watched
from pytest_llmperf.metrics import energy
from pytest_llmperf.metrics.compute import RunMetrics, compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.reports import saved_runs
from pytest_llmperf.session import ab_run, history_run
from pytest_llmperf.session.ab_run import PausedAb
from pytest_llmperf.session.deployment import Deployment
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.session.provenance import engine_identity, git_commit
from pytest_llmperf.session.settings import Settings, usable_cores
from pytest_llmperf.session.updates import BaselineUpdates, PendingUpdate
from pytest_llmperf.verdict import baselines, gate, judge, noise
from pytest_llmperf.verdict.ab import ab_line
from pytest_llmperf.verdict.measurement import GateSettings
from pytest_llmperf.verdict.status import Status
from pytest_llmperf.workloads.identity import workload_identity
from pytest_llmperf.workloads.text_only import as_text
from pytest_llmperf.workloads.workload import Workload

# More client processes than this only add start-up and merge time: 8 of them measured
# (estimated from ~100,000 chunks/s per process on a free core) far above any one server.
MAX_AUTO_WORKERS = 8
RUNS_DIR = Path(".llmperf/runs")
# Machine-local first-run baselines (judge.BaselineTable.local): never committed.
LOCAL_BASELINES_DIR = Path(".llmperf/baselines")

# A run one of these judged says nothing of its engine: it keeps its verdict, and no baseline.
UNJUDGED = frozenset({Status.CLIENT_LIMITED, Status.DISTURBED})


@dataclass
class LlmperfSession:
    settings: Settings
    pool: EnginePool
    hardware_class: str = "cpu"
    fingerprint: dict[str, Any] = field(default_factory=dict)
    # A record per measurement (verdict, gate settings, annotations) and the notes.
    ledger: Ledger = field(default_factory=Ledger)
    updates: BaselineUpdates = field(default_factory=BaselineUpdates)
    # test id -> an A/B measurement whose confirm pairs were deferred (run_ab, defer=True)
    paused_ab: dict[str, PausedAb] = field(default_factory=dict)
    engine_nice: int = 0
    # The pid whose descendants are this session's processes (client/neighbours.session_root);
    # 0: this process.
    process_root: int = 0
    gpu_count: int = 0  # GPUs this process may use (0 on CPU hardware)
    # Report payloads (outputs.payload) of this process and, on an xdist controller, its workers.
    payloads: list[dict[str, Any]] = field(default_factory=list)
    history: Any = None  # the results store's side of the session (history_run.SessionHistory)
    # spec -> its server's identity (server_info.identity), asked once it first was healthy
    servers: dict[Engine, dict[str, str]] = field(default_factory=dict)
    # --llmperf-endpoint's server and how to reach it (deployment.py); None: engines we start
    deployment: Deployment | None = None
    _tokenizers: dict[str, Any] = field(default_factory=dict)
    _saved_run: Any = None

    def __post_init__(self) -> None:
        self.pool.on_death = self._note_death
        if self.deployment is None and self.settings.endpoint:
            self.deployment = Deployment.from_settings(self.settings, os.environ)
        if self.deployment is not None:
            for line in self.deployment.notes():
                self.ledger.note(None, line)

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
        options = ClientOptions(api=workload.api, server=self.server_kind(engine))
        if self.deployment is not None:
            self.deployment.check_model(self.deployment.model_name(engine), "the test's Engine")
            self.identify(engine, self.deployment.url)
            return self.deployment.endpoint(engine, options), None
        server = self.pool.get(engine)
        self.identify(engine, server.base_url)
        return Endpoint(server.base_url, engine.model_name, options), server.start_time_s

    def server_kind(self, engine: Engine | None = None) -> ServerKind:
        """The engine's kind's (engines/kinds/) for the engines the plugin starts (vLLM's by
        default); --llmperf-endpoint's server as named or detected
        (deployment.Deployment.kind), said once under the summary when not vLLM."""
        if self.deployment is None:
            return KINDS.get(engine.engine_kind.client_kind, VLLM) if engine else VLLM
        kind = self.deployment.kind()
        line = self.deployment.kind_note()
        if line:
            self.ledger.note_once(None, line)
        return kind

    def identify(self, engine: Engine, base_url: str) -> None:
        """Which vLLM the spec's server runs, asked once per spec: its GET /version and, for an
        engine we start, what its interpreter has installed (another vLLM for Engine(python=)).
        An endpoint's interpreter is not ours to ask, and all its specs share one answer."""
        if engine in self.servers:
            return
        if self.settings.endpoint:
            known = next(iter(self.servers.values()), None)
            access = self.deployment.access
            self.servers[engine] = known or server_info.identity(server_info.fetch_version(
                base_url, headers=dict(access.headers), verify=access.ssl_context()))
            return
        self.servers[engine] = kind_identity(engine) or server_info.identity(
            server_info.fetch_version(base_url), engine_versions(engine))

    def run(self, nodeid: str, key: str, engine: Engine, workload: Workload,
            repeat: int) -> Result:
        # The same requests and arrival schedule every repeat: only the engine's timing varies.
        # Built first: a bad dataset or config fails before an engine start is paid for.
        # A server that takes no token-id prompts gets them as text (workloads/text_only.py).
        kind = self.server_kind(engine)
        as_sent = workload if kind.token_id_prompts else as_text(workload)
        text_prompts = as_sent is not workload
        workload = as_sent
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
        # What the server could not do, one line each, never measured wrong in silence.
        for line in limits(kind, result.records, text_prompts):
            self.ledger.note(result.test_id, line)
        if died:
            self.mark_died([result], died)
            raise died
        return result

    def mark_died(self, results: Sequence[Result], died: EngineDied) -> None:
        """The verdict of measurements their engine died (or stalled) in."""
        status = Status.ENGINE_STALLED if isinstance(died, EngineStalled) else Status.ENGINE_DIED
        for result in results:
            self.ledger.judged(_id(result.test_id), status)

    def run_ab(self, nodeid: str, key: str, a: Engine, b: Engine, workload: Workload,
               pairs: int, confirm_pairs: int = 0, gated: tuple[str, ...] = (),
               defer: bool = False) -> tuple[Result, ...]:
        """A paired A/B measurement of engines `a` and `b` (ab_run.run_ab)."""
        return ab_run.run_ab(self, nodeid, key, a, b, workload, pairs, confirm_pairs, gated,
                             defer)

    def measure_once(self, engine: Engine, endpoint: Endpoint, requests, workload: Workload,
                      warmup) -> tuple[tuple[RunMetrics, Measurement], EngineDied | None]:
        def call() -> Measurement:
            with self.one_at_a_time():
                return measure(endpoint, requests, workload.pattern, seed=workload.seed,
                               warmup=warmup, duration_s=workload.duration_s,
                               workers=self.client_workers(),
                               stall_timeout_s=self.settings.stall_timeout)

        # An endpoint's machine is not ours to watch; this one's neighbours only slow the client
        # there, which its self-check sees. Under --llmperf-disturbance off the engine's cards
        # are still read, for their telemetry and energy per token; nothing is judged.
        if self.settings.endpoint:
            measured = call()
        else:
            measured, disturbance = watched(
                call, root=self.process_root or os.getpid(),
                gpus=self.pool.gpus_of(engine) if self.gpu_count else (),
                window=lambda found: energy.measured_window(found.records),
                judge=self.settings.disturbance != "off")
            measured = replace(measured, disturbance=disturbance)
        metrics = compute_metrics(measured.records, server_metrics=measured.server_metrics)
        metrics = replace(metrics, energy=energy.energy_metrics(
            measured.disturbance, metrics.prompt_tokens, metrics.output_tokens))
        return (metrics, measured), self.engine_death(engine, measured.records, measured.stall)

    def record(self, nodeid: str, key: str, engine: Engine, workload: Workload,
                runs: list[tuple[RunMetrics, Measurement]], start_s: float | None) -> Result:
        """The Result of one engine's runs, added to the session. Its representative run (the
        records and summaries shown) is the median by output throughput."""
        metrics, measured = sorted(runs, key=lambda run: run[0].output_throughput_tok_s)[
            len(runs) // 2]
        if measured.warning:
            self.ledger.note_once(None, measured.warning)
        result = Result(
            test_id=result_id(nodeid, key), key=key,
            engine=self.engine_identity(engine), engine_label=engine.label(),
            workload=self.workload_identity(workload), workload_label=workload.label(),
            metrics=metrics, runs=tuple(run[0] for run in runs),
            records=tuple(measured.records), server_metrics=measured.server_metrics,
            fingerprint=dict(self.fingerprint), engine_start_s=start_s,
            client=check_client(metrics, measured.client, workload.pattern),
            client_error=measured.client_error,
            disturbance=_disturbance_of(runs), server=dict(self.servers.get(engine, {})),
            gpu_telemetry=measured.disturbance.telemetry if measured.disturbance else (),
        )
        id = _id(result.test_id)
        self.ledger.add(id, result)
        if turns := result.by_turn:  # a conversation's latencies by turn, for the run file
            self.ledger.annotate(id, by_turn=turns)
        if result.disturbed:  # the neighbour, not the engine (nor the client), set the numbers
            self.ledger.judged(id, Status.DISTURBED)
        elif result.client_error or result.client.limited:
            self.ledger.judged(id, Status.CLIENT_LIMITED)
        if result.failed:  # what went wrong, by kind, whether or not the error rate is allowed
            self.ledger.note(result.test_id, f"{result.failed} of "
                             f"{result.failed + result.completed} requests failed: "
                             f"{describe_counts(result.failure_kinds())}")
        return result

    def engine_death(self, engine: Engine, records, stall: str | None = None
                     ) -> EngineDied | None:
        """After requests failed, did the engine die? After a stall, it is killed like a dead
        one. (An endpoint's server is not ours to judge or restart: a stall there fails the test,
        nothing more.)"""
        if self.settings.endpoint:
            return EngineStalled(f"the server at {self.deployment.url} stalled during the test "
                                 f"({stall}); it is not ours to restart") if stall else None
        if not (stall or any(record.error for record in records)):
            return None
        return self.pool.check(engine, stall=stall)

    def _note_death(self, engine: Engine, line: str, restarted: bool) -> None:
        then = (f"restarted for the next test ({self.pool.deaths[engine]} of {MAX_DEATHS} "
                "deaths)" if restarted else "not started again")
        self.ledger.note(None, f"{line}; {then}")

    def one_at_a_time(self) -> AbstractContextManager:
        """Held for each measurement of an endpoint: the server is shared by every pytest-xdist
        worker (and any other session in this rootdir), and two loads at once would measure
        each other (deployment.Deployment.lock)."""
        if self.deployment is None:
            return nullcontext()
        return self.deployment.lock(self.settings.rootdir)

    def client_workers(self) -> int:
        """--llmperf-client-workers as a number. auto: every core but the engine's, where the
        engine runs on this machine's CPU; every core but two beside a local GPU engine (vLLM's
        API server and its busy-polling engine core each keep one busy); all of them for an
        endpoint elsewhere."""
        chosen = self.settings.client_workers
        if chosen != "auto":
            return chosen
        reserved = 0 if self.settings.endpoint else 2 if is_gpu_class(self.hardware_class) else 1
        return max(1, min(MAX_AUTO_WORKERS, usable_cores() - reserved))

    def engine_identity(self, engine: Engine) -> dict[str, Any]:
        """The spec as baselines record it (provenance.engine_identity)."""
        return engine_identity(engine, self.settings.rootdir)

    def workload_identity(self, workload: Workload) -> dict[str, Any]:
        """The workload as baselines record it: its files named alike in every checkout
        (workloads/identity.py)."""
        return workload_identity(workload, self.settings.rootdir)

    def run_offline(self, engine: Engine, workload: Workload):
        """Offline mode needs the accelerator to itself: running server engines stop first. It
        runs at normal priority: there is no client to protect from it, only its throughput."""
        from pytest_llmperf.engines.offline import run_offline

        self.pool.stop_all()
        requests, _ = workload.build(self.tokenizer_for(engine))
        return run_offline(engine, requests, self.log_dir())

    def annotate(self, test_id: str, **fields: Any) -> None:
        """Data the run file keeps with a result beyond its metrics (Ledger.annotate)."""
        self.ledger.annotate(_id(test_id), **fields)

    def record_extra(self, test_id: str, estimates: dict[str, Estimate], detail: str) -> None:
        """Metrics that are not a run (an SLO capacity, offline throughput), for the summary."""
        self.ledger.add_extras(_id(test_id), estimates, detail)

    def log_dir(self) -> Path:
        return self.settings.path(self.settings.log_dir)

    # ------------------------------------------------------------------ judging

    def baseline_ref(self, suite_path: Path, nodeid: str, key: str) -> judge.BaselineRef:
        directory = self.settings.path(self.settings.baseline_dir) / self.hardware_class
        return judge.BaselineRef(directory / f"{Path(suite_path).stem}.toml", key, nodeid)

    def judge(self, item, result: Result, options, slo) -> judge.Judgement:
        """A measured run: its SLOs over every metric, its reference over the gated ones (the
        test's `gate=` list, else the baseline's own, else gate.DEFAULT_GATED)."""
        known = _known_metric(result.metrics, result.engine_start_s)
        self.ledger.entry(_id(result.test_id)).gate = GateSettings(
            options.tolerance, tuple(options.gate) if options.gate else None)
        if options.gate:
            try:
                gate.check_names(list(options.gate), known, what="gate")
            except gate.UnknownMetricError as exc:
                judgement = judge.Judgement(error=f"@pytest.mark.llmperf(gate=...): {exc}")
                self.ledger.judged(_id(result.test_id), judgement.status)
                return judgement
        subject = judge.Subject(item, result.test_id, result.key, result.engine, result.workload)
        current = judge.Current.of(result.runs, result.engine_start_s)
        return self.judge_estimates(subject, current, options, slo=slo,
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
        id_b = _id(result_b.test_id)
        self.ledger.annotate(id_b, ab=judgement.ab)
        if self.ledger.status(id_b) not in UNJUDGED:
            self.ledger.judged(id_b, judgement.status)
        sides = server_info.sides_text(result_a.server, result_b.server)
        self.ledger.note(result_b.test_id, ab_line(judgement.ab) + (f"; {sides}" if sides else ""))
        for verdict in judgement.report.verdicts:
            if verdict.status != Status.PASS:
                self.ledger.note(result_b.test_id, verdict.message)
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
                                 slo=slo, known=known,
                                 also=history_run.trend_checks(self, subject, gated))
        limited = self.ledger.status(_id(subject.test_id))
        limited = limited if limited in UNJUDGED else None
        if self.settings.update_baselines and limited:
            why = "client-limited" if limited == Status.CLIENT_LIMITED else "disturbed"
            self.ledger.note(subject.test_id, f"baseline not updated ({why} run)")
        elif self.settings.update_baselines and not judgement.failed:
            written = history_run.baseline_current(self, subject, current, gated,
                                                   options.tolerance)
            self._owe_update(subject, ref, written, options, gated, exact)
        elif judgement.record_local and not limited and not judgement.failed:
            self._owe_update(subject, self.local_ref(ref), current, options, gated, exact,
                             local=True)
        self.ledger.judged(_id(subject.test_id), limited or judgement.status)
        for note in judgement.notes:
            self.ledger.note(subject.test_id, note)
        return judgement

    def _owe_update(self, subject: judge.Subject, ref: judge.BaselineRef, current: judge.Current,
                    options, gated: tuple[str, ...], exact: bool, local: bool = False) -> None:
        """A baseline update for `ref` from this measurement, written once the test passed."""
        entries = judge.updated_entries(dict(current.estimates), ref, options.tolerance, gated,
                                        exact=exact, kind=noise.kind_of(self.hardware_class))
        provenance = baselines.make_provenance(self.fingerprint, subject.engine,
                                               subject.workload,
                                               commit=git_commit(self.settings.rootdir),
                                               server=self.server_of(subject.engine))
        self.updates.add(subject.item.nodeid, PendingUpdate(ref, entries, provenance, local))

    def server_of(self, identity: dict[str, Any]) -> dict[str, str]:
        """The server identity of the spec whose recorded identity is `identity` ({} for one
        never served: an offline run)."""
        return next((dict(server) for engine, server in self.servers.items()
                     if self.engine_identity(engine) == identity), {})

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
        return self.updates.apply(nodeid, passed, self.ledger)

    # ------------------------------------------------------------------ output

    def runs_dir(self) -> Path:
        return self.settings.path(RUNS_DIR)


def _id(test_id: str) -> MeasurementId:
    return MeasurementId.parse(test_id)


def _disturbance_of(runs: list[tuple[RunMetrics, Measurement]]) -> Disturbance | None:
    """A result's disturbance: that of any of its runs that was disturbed (one disturbed repeat
    moves the median), else the last one watched."""
    watched_runs = [measured.disturbance for _, measured in runs if measured.disturbance]
    last = watched_runs[-1] if watched_runs else None
    return next((d for d in watched_runs if d.disturbed), last)


def _known_metric(metrics: RunMetrics, engine_start_s: float | None = None):
    """Can a test name `name` for this run? Its engine's start time only where this session
    started that engine."""
    def known(name: str) -> bool:
        if name == judge.ENGINE_START:
            return engine_start_s is not None
        try:
            metrics.get(name)
        except KeyError:
            return False
        return True

    return known
