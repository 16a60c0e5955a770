"""The session's runner: it sends each measurement's requests to its target (session/target.py:
the engines it starts, or --llmperf-endpoint's deployment, chosen once per session), and adds
what it measured to the ledger (session/ledger.py), a record per measurement. Judging the records
is the judge's (session/judge.py); A/B pairs are session/ab_run.py's, on top of this runner.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.client.cache_reset import reset_prefix_cache
from pytest_llmperf.client.measure import Endpoint, Measurement, measure
from pytest_llmperf.client.measurement import WARMUP_CONCURRENCY
from pytest_llmperf.client.openai import ClientOptions
from pytest_llmperf.client.patterns import Concurrency
from pytest_llmperf.client.ray_workers import OnRay
from pytest_llmperf.client.selfcheck import check_client
from pytest_llmperf.client.server_kind import ServerKind
from pytest_llmperf.client.server_kind import limits as server_limits
from pytest_llmperf.client.watchdog import DEFAULT_STALL_TIMEOUT_S, Interrupt
from pytest_llmperf.engines.errors import EngineDied, EngineStalled
from pytest_llmperf.engines.image_input import check_images
from pytest_llmperf.engines.pool import MAX_DEATHS, EnginePool
from pytest_llmperf.engines.runner_type import check_api
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import Disturbed, InputError
from pytest_llmperf.failures import describe_counts
from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.machine.disturbance import Disturbance, ended_early
from pytest_llmperf.machine.hardware import is_gpu_class
from pytest_llmperf.metrics import goodput, spec_pin
from pytest_llmperf.metrics.compute import RunMetrics, compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.session.probe_record import load_metrics_records, record_probes
from pytest_llmperf.session.provenance import engine_identity
from pytest_llmperf.session.settings import usable_cores
from pytest_llmperf.session.target import OurEngines, ServingTarget
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from pytest_llmperf.verdict.status import Status, decide
from pytest_llmperf.workloads.agents import check_sessions
from pytest_llmperf.workloads.identity import workload_identity
from pytest_llmperf.workloads.lora import check_served
from pytest_llmperf.workloads.probes import probe_places
from pytest_llmperf.workloads.reasoning import check_reasoning
from pytest_llmperf.workloads.text_only import as_text
from pytest_llmperf.workloads.workload import Workload

__all__ = ["MAX_AUTO_WORKERS", "Runner", "RunnerConfig"]

# More client processes than this only add start-up and merge time: 8 of them measured
# (estimated from ~100,000 chunks/s per process on a free core) far above any one server.
MAX_AUTO_WORKERS = 8


@dataclass(frozen=True)
class RunnerConfig:
    """What the runner reads of the session's settings (session/settings.py): made once by the
    plugin (plugin/configs.py), so the runner never holds the whole Settings."""

    rootdir: Path = Path(".")  # what the identities' file paths are relative to
    log_dir: Path = Path(".llmperf/logs")  # an offline run's logs; absolute, or under rootdir
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S
    client_workers: str | int | OnRay = "auto"  # --llmperf-client-workers


@dataclass
class Runner:
    config: RunnerConfig
    target: ServingTarget  # the engines we start, or the deployment we reach (session/target.py)
    ledger: Ledger
    # spec -> its server's identity (server_info.identity), asked once it first was healthy
    servers: dict[Engine, dict[str, str]] = field(default_factory=dict)
    _tokenizers: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pool.on_death = self._note_death
        for line in self.target.notes():
            self.ledger.note(None, line)

    @property
    def pool(self) -> EnginePool:
        return self.target.pool

    @property
    def gpu_count(self) -> int:
        return self.target.gpu_count

    @property
    def hardware_class(self) -> str:
        return self.ledger.hardware_class

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
        """Where the engine's requests go (the target starts or reuses it, or reaches the
        deployment), and its start time where this session started it."""
        options = ClientOptions(api=workload.api, server=self.server_kind(engine))
        endpoint, start_s = self.target.endpoint(engine, options)
        if engine not in self.servers:
            self.servers[engine] = self.target.identity(engine, endpoint.base_url)
        return endpoint, start_s

    def start_together(self, engines: list[Engine]) -> None:
        """Start the engines a test will use together at the same time (pool.start_together);
        nothing where the server is not ours to start."""
        self.target.start_together(engines)

    def server_kind(self, engine: Engine) -> ServerKind:
        """The kind of server the engine's requests reach; a line under the summary, once,
        where the target has one to say (an endpoint's server that is not vLLM)."""
        kind, line = self.target.server_kind(engine)
        if line:
            self.ledger.note_once(None, line)
        return kind

    def run(self, id: MeasurementId, engine: Engine, workload: Workload, repeat: int,
            limits: goodput.Limits | None = None) -> MeasurementRecord:
        """Measure `workload` on `engine` `repeat` times into the ledger's record `id`;
        `limits`: the test's per-request SLO limits, for goodput (goodput.limits_from)."""
        # The same requests and arrival schedule every repeat: only the engine's timing varies.
        # Built first: a bad dataset or config fails before an engine start is paid for.
        # A server that takes no token-id prompts gets them as text (workloads/text_only.py).
        check_api(engine, workload.name, workload.api)  # the model serves it: one line
        # Images for a text-only model: one line (an images source says how many it sends).
        check_images(engine, workload.name, getattr(workload.source, "images_per_request", 0))
        if isinstance(self.target, OurEngines):  # an endpoint's adapters are its own to know
            check_served(workload.source, engine)  # an adapter it does not serve: one line
            check_reasoning(engine, workload.name, workload.source)  # no parser: one line
        check_sessions(engine, workload.source)  # agent sessions that cannot fit: one line
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
                                          warmup if attempt == 0 else (), limits, start_s)
            runs.append(run)
            if run[1].client_error or died:
                break  # a client worker or the engine died, or a neighbour ended it: kept
        record = self.record(id, engine, workload, runs)
        if places := probe_places(workload.source):  # the probes: a measurement of their own
            record_probes(self.ledger, id, runs, places, record)
        # What the server could not do, one line each, never measured wrong in silence.
        for line in server_limits(kind, record.result.records, text_prompts):
            self.ledger.note(record.test_id, line)
        if died:
            self.mark_ended([record], died)
            raise died
        return record

    def warm_up_alone(self, endpoint: Endpoint, warmup) -> None:
        """A cold-cache run's warm-up, sent before the cache is emptied; nothing of it is kept."""
        if warmup:
            measure(endpoint, list(warmup), Concurrency(max_concurrency=WARMUP_CONCURRENCY),
                    seed=0, stall_timeout_s=self.config.stall_timeout_s)

    def mark_ended(self, records: Sequence[MeasurementRecord],
                  died: EngineDied | Disturbed) -> None:
        """The verdict of measurements their engine died (or stalled) in, or that were ended
        early for a neighbour."""
        status = (Status.DISTURBED if isinstance(died, Disturbed)
                  else Status.ENGINE_STALLED if isinstance(died, EngineStalled)
                  else Status.ENGINE_DIED)
        for record in records:
            record.status = status

    def measure_once(self, engine: Engine, endpoint: Endpoint, requests, workload: Workload,
                     warmup, limits: goodput.Limits | None = None, start_s: float | None = None
                     ) -> tuple[tuple[RunMetrics, Measurement], EngineDied | Disturbed | None]:
        """One run, and why the runs of its test end here, if they do: its engine died or
        stalled, or a neighbour had already made it DISTURBED and it was ended early.
        `start_s`: the engine's start that served it, where this session started it."""
        interrupt = Interrupt()

        def call() -> Measurement:
            with self.target.one_at_a_time():
                first = warmup
                if workload.prefix_cache == "cold":  # emptied after the warm-up, which fills it
                    self.warm_up_alone(endpoint, warmup)
                    reset_prefix_cache(endpoint.base_url, endpoint.access)
                    first = ()
                return measure(endpoint, requests, workload.pattern, seed=workload.seed,
                               warmup=first, duration_s=workload.duration_s,
                               workers=self.client_workers(),
                               stall_timeout_s=self.config.stall_timeout_s,
                               interrupt=interrupt)

        measured = self.target.watch(call, engine, on_disturbed=interrupt.set)
        # A probed run's own metrics leave its probes out (session/probe_record.py).
        load_records = load_metrics_records(measured.records, probe_places(workload.source))
        metrics = compute_metrics(load_records, goodput_limits=limits,
                                  server_metrics=measured.server_metrics,
                                  disturbance=measured.disturbance, engine_start_s=start_s)
        died = self.target.death(engine, measured.records, measured.stall)
        if died is None and measured.interrupted:
            return (metrics, measured), Disturbed(ended_early(measured.interrupted))
        return (metrics, measured), died

    def record(self, id: MeasurementId, engine: Engine, workload: Workload,
               runs: list[tuple[RunMetrics, Measurement]]) -> MeasurementRecord:
        """The Result of one engine's runs, added to the ledger as the measurement `id`. Its
        representative run (the records and summaries shown) is the median by output
        throughput."""
        metrics, measured = sorted(runs, key=lambda run: run[0].output_throughput_tok_s)[
            len(runs) // 2]
        if measured.warning:
            self.ledger.note_once(None, measured.warning)
        result = Result(
            test_id=id.format(), key=id.key,
            engine=self.engine_identity(engine), engine_label=engine.label(),
            workload=self.workload_identity(workload), workload_label=workload.label(),
            metrics=metrics, runs=tuple(run[0] for run in runs),
            records=tuple(measured.records), server_metrics=measured.server_metrics,
            fingerprint=self.ledger.fingerprint.to_dict(),
            client=check_client(metrics, measured.client, workload.pattern),
            client_error=measured.client_error,
            disturbance=_disturbance_of(runs), server=dict(self.servers.get(engine, {})),
            gpu_telemetry=measured.disturbance.telemetry if measured.disturbance else (),
        )
        record = self.ledger.add(id, result)
        for name, found in result.breakdowns.items():  # by turn, by adapter, tool calls, ...
            record.breakdowns[name] = found
            for line in found.notes():
                self.ledger.note(result.test_id, line)
        if line := spec_pin.note(engine.speculative_config, [run.flat() for run in result.runs]):
            self.ledger.note(result.test_id, line)  # a pinned acceptance against the counters
        # The neighbour, not the engine (nor the client), set the numbers, or the client did; a
        # judgement later decides between these and its own (verdict/status.PRECEDENCE).
        record.status = decide(Status.DISTURBED if result.disturbed else None,
                               Status.CLIENT_LIMITED if result.client_error
                               or result.client.limited else None) or record.status
        if result.failed:  # what went wrong, by kind, whether or not the error rate is allowed
            self.ledger.note(result.test_id, f"{result.failed} of "
                             f"{result.failed + result.completed} requests failed: "
                             f"{describe_counts(result.failure_kinds())}")
        return record

    def _note_death(self, engine: Engine, line: str, restarted: bool) -> None:
        then = (f"restarted for the next test ({self.pool.deaths[engine]} of {MAX_DEATHS} "
                "deaths)" if restarted else "not started again")
        self.ledger.note(None, f"{line}; {then}")

    def client_workers(self) -> int | OnRay:
        """--llmperf-client-workers as a number, or the Ray cluster's workers (resolved when the
        session started: session/client_cluster.py). auto: every core but the engine's, where
        the engine runs on this machine's CPU, or beside a local GPU engine; all of them for an
        endpoint elsewhere (target.reserved_cores)."""
        chosen = self.config.client_workers
        if chosen != "auto":
            return chosen
        reserved = self.target.reserved_cores(self.hardware_class)
        return max(1, min(MAX_AUTO_WORKERS, usable_cores() - reserved))

    def engine_identity(self, engine: Engine) -> dict[str, Any]:
        """The spec as baselines record it (provenance.engine_identity)."""
        return engine_identity(engine, self.config.rootdir)

    def workload_identity(self, workload: Workload) -> dict[str, Any]:
        """The workload as baselines record it: its files named alike in every checkout
        (workloads/identity.py)."""
        return workload_identity(workload, self.config.rootdir)

    def run_offline(self, engine: Engine, workload: Workload):
        """Offline mode needs the accelerator to itself: on GPUs, running server engines stop
        first (their memory). On the CPU they stay: an idle vLLM CPU server computes nothing
        (its worker sleeps a second after its last step, session/ab_run.py), its memory fits
        beside the offline engine's, and stopping it cost the CPU suite a second start of the
        engine its later tests use. It runs at normal priority: there is no client to protect
        from it, only its throughput."""
        from pytest_llmperf.engines.offline import run_offline

        if is_gpu_class(self.hardware_class):
            self.pool.stop_all()
        requests, _ = workload.build(self.tokenizer_for(engine))
        return run_offline(engine, requests, self.log_dir())

    def server_of(self, identity: dict[str, Any]) -> dict[str, str]:
        """The server identity of the spec whose recorded identity is `identity` ({} for one
        never served: an offline run)."""
        return next((dict(server) for engine, server in self.servers.items()
                     if self.engine_identity(engine) == identity), {})

    def log_dir(self) -> Path:
        return self.config.log_dir


def _disturbance_of(runs: list[tuple[RunMetrics, Measurement]]) -> Disturbance | None:
    """A result's disturbance: that of any of its runs that was disturbed (one disturbed repeat
    moves the median), else the last one watched."""
    watched_runs = [measured.disturbance for _, measured in runs if measured.disturbance]
    last = watched_runs[-1] if watched_runs else None
    return next((d for d in watched_runs if d.disturbed), last)
