"""The session's runner: it starts (or reaches) the engines, sends each measurement's requests,
and adds what it measured to the ledger (session/ledger.py), a record per measurement. Judging
the records is the judge's (session/judging.py); A/B pairs are session/ab_run.py's, on top of
this runner.

Under --llmperf-endpoint the server is another's (session/deployment.py): it is reached, never
started, watched or restarted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_llmperf.client import server_info
from pytest_llmperf.client.cache_reset import reset_prefix_cache
from pytest_llmperf.client.measure import Endpoint, Measurement, measure
from pytest_llmperf.client.measurement import WARMUP_CONCURRENCY
from pytest_llmperf.client.openai import ClientOptions
from pytest_llmperf.client.patterns import Concurrency
from pytest_llmperf.client.selfcheck import check_client
from pytest_llmperf.client.server_kind import KINDS, VLLM, ServerKind
from pytest_llmperf.client.server_kind import limits as server_limits
from pytest_llmperf.engines.errors import EngineDied, EngineStalled
from pytest_llmperf.engines.interpreter import engine_versions, kind_identity
from pytest_llmperf.engines.pool import MAX_DEATHS, EnginePool
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import InputError
from pytest_llmperf.failures import describe_counts
from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.machine.disturbance import Disturbance
from pytest_llmperf.machine.hardware import is_gpu_class
from pytest_llmperf.machine.watch import watched
from pytest_llmperf.metrics import energy, goodput, structured
from pytest_llmperf.metrics.compute import RunMetrics, compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.session.deployment import Deployment
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.session.provenance import engine_identity
from pytest_llmperf.session.settings import Settings, usable_cores
from pytest_llmperf.verdict.measurement import MeasurementRecord
from pytest_llmperf.verdict.status import Status
from pytest_llmperf.workloads.identity import workload_identity
from pytest_llmperf.workloads.text_only import as_text
from pytest_llmperf.workloads.workload import Workload

__all__ = ["MAX_AUTO_WORKERS", "Runner"]

# More client processes than this only add start-up and merge time: 8 of them measured
# (estimated from ~100,000 chunks/s per process on a free core) far above any one server.
MAX_AUTO_WORKERS = 8


@dataclass
class Runner:
    settings: Settings
    pool: EnginePool
    ledger: Ledger
    gpu_count: int = 0  # GPUs this process may use (0 on CPU hardware)
    # The pid whose descendants are this session's processes (machine/neighbours.session_root);
    # 0: this process.
    process_root: int = 0
    # --llmperf-endpoint's server and how to reach it (deployment.py); None: engines we start
    deployment: Deployment | None = None
    # spec -> its server's identity (server_info.identity), asked once it first was healthy
    servers: dict[Engine, dict[str, str]] = field(default_factory=dict)
    _tokenizers: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pool.on_death = self._note_death
        if self.deployment is None and self.settings.endpoint:
            self.deployment = Deployment.from_settings(self.settings, os.environ)
        if self.deployment is not None:
            for line in self.deployment.notes():
                self.ledger.note(None, line)

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
        """Start (or reuse) the engine; with --llmperf-endpoint, use that server instead."""
        options = ClientOptions(api=workload.api, server=self.server_kind(engine))
        if self.deployment is not None:
            self.deployment.check_model(self.deployment.model_name(engine), "the test's Engine")
            self.identify(engine, self.deployment.url)
            return self.deployment.endpoint(engine, options), None
        server = self.pool.get(engine)
        self.identify(engine, server.base_url)
        return Endpoint(server.base_url, engine.model_name, options), server.start_time_s

    def start_together(self, engines: list[Engine]) -> None:
        """Start the engines a test will use together at the same time (pool.start_together);
        nothing with --llmperf-endpoint, whose server is not ours to start."""
        if self.deployment is None:
            self.pool.start_together(engines)

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

    def run(self, id: MeasurementId, engine: Engine, workload: Workload, repeat: int,
            limits: goodput.Limits | None = None) -> MeasurementRecord:
        """Measure `workload` on `engine` `repeat` times into the ledger's record `id`;
        `limits`: the test's per-request SLO limits, for goodput (goodput.limits_from)."""
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
                                          warmup if attempt == 0 else (), limits)
            runs.append(run)
            if run[1].client_error or died:
                break  # a client worker or the engine died: what was measured is kept
        record = self.record(id, engine, workload, runs, start_s)
        if found := record.result.structured_outputs:
            record.structured_outputs = found  # cold and warm grammars' TTFT, for the run file
            self.ledger.note(record.test_id, structured.note(found))
        # What the server could not do, one line each, never measured wrong in silence.
        for line in server_limits(kind, record.result.records, text_prompts):
            self.ledger.note(record.test_id, line)
        if died:
            self.mark_died([record], died)
            raise died
        return record

    def warm_up_alone(self, endpoint: Endpoint, warmup) -> None:
        """A cold-cache run's warm-up, sent before the cache is emptied; nothing of it is kept."""
        if warmup:
            measure(endpoint, list(warmup), Concurrency(max_concurrency=WARMUP_CONCURRENCY),
                    seed=0, stall_timeout_s=self.settings.stall_timeout)

    def mark_died(self, records: Sequence[MeasurementRecord], died: EngineDied) -> None:
        """The verdict of measurements their engine died (or stalled) in."""
        status = Status.ENGINE_STALLED if isinstance(died, EngineStalled) else Status.ENGINE_DIED
        for record in records:
            record.status = status

    def measure_once(self, engine: Engine, endpoint: Endpoint, requests, workload: Workload,
                     warmup, limits: goodput.Limits | None = None
                     ) -> tuple[tuple[RunMetrics, Measurement], EngineDied | None]:
        def call() -> Measurement:
            with self.one_at_a_time():
                first = warmup
                if workload.prefix_cache == "cold":  # emptied after the warm-up, which fills it
                    self.warm_up_alone(endpoint, warmup)
                    reset_prefix_cache(endpoint.base_url, endpoint.access)
                    first = ()
                return measure(endpoint, requests, workload.pattern, seed=workload.seed,
                               warmup=first, duration_s=workload.duration_s,
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
        metrics = compute_metrics(measured.records, goodput_limits=limits,
                                  server_metrics=measured.server_metrics)
        metrics = replace(metrics, energy=energy.energy_metrics(
            measured.disturbance, metrics.prompt_tokens, metrics.output_tokens))
        return (metrics, measured), self.engine_death(engine, measured.records, measured.stall)

    def record(self, id: MeasurementId, engine: Engine, workload: Workload,
               runs: list[tuple[RunMetrics, Measurement]], start_s: float | None
               ) -> MeasurementRecord:
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
            fingerprint=self.ledger.fingerprint.to_dict(), engine_start_s=start_s,
            client=check_client(metrics, measured.client, workload.pattern),
            client_error=measured.client_error,
            disturbance=_disturbance_of(runs), server=dict(self.servers.get(engine, {})),
            gpu_telemetry=measured.disturbance.telemetry if measured.disturbance else (),
        )
        record = self.ledger.add(id, result)
        if turns := result.by_turn:  # a conversation's latencies by turn, for the run file
            record.by_turn = turns
        if result.disturbed:  # the neighbour, not the engine (nor the client), set the numbers
            record.status = Status.DISTURBED
        elif result.client_error or result.client.limited:
            record.status = Status.CLIENT_LIMITED
        if result.failed:  # what went wrong, by kind, whether or not the error rate is allowed
            self.ledger.note(result.test_id, f"{result.failed} of "
                             f"{result.failed + result.completed} requests failed: "
                             f"{describe_counts(result.failure_kinds())}")
        return record

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
        return self.settings.path(self.settings.log_dir)


def _disturbance_of(runs: list[tuple[RunMetrics, Measurement]]) -> Disturbance | None:
    """A result's disturbance: that of any of its runs that was disturbed (one disturbed repeat
    moves the median), else the last one watched."""
    watched_runs = [measured.disturbance for _, measured in runs if measured.disturbance]
    last = watched_runs[-1] if watched_runs else None
    return next((d for d in watched_runs if d.disturbed), last)
