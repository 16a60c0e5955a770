"""The session's state: settings, the engine pool, tokenizers, and every result measured so far.

Owned by the plugin (one per pytest session, kept in `config.stash`), never a module global.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.client import ClientOptions
from pytest_llmperf.engines.pool import EnginePool
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.metrics import RunMetrics, compute_metrics
from pytest_llmperf.result import Result
from pytest_llmperf.runner import Endpoint, measure
from pytest_llmperf.settings import Settings
from pytest_llmperf.workloads import Workload


@dataclass
class LlmperfSession:
    settings: Settings
    pool: EnginePool
    fingerprint: dict[str, Any] = field(default_factory=dict)
    results: list[Result] = field(default_factory=list)
    _tokenizers: dict[str, Any] = field(default_factory=dict)

    def tokenizer_for(self, engine: Engine):
        path = engine.tokenizer or engine.model
        if path not in self._tokenizers:
            from pytest_llmperf.prompts import load_tokenizer

            self._tokenizers[path] = load_tokenizer(path)
        return self._tokenizers[path]

    def target_for(self, engine: Engine, workload: Workload) -> tuple[Endpoint, float | None]:
        """Start (or reuse) the engine; with --llmperf-endpoint, use that server instead."""
        options = ClientOptions(api=workload.api)
        if self.settings.endpoint:
            return Endpoint(self.settings.endpoint, engine.model_name, options), None
        server = self.pool.get(engine)
        return Endpoint(server.base_url, engine.model_name, options), server.start_time_s

    def run(self, test_id: str, engine: Engine, workload: Workload, repeat: int) -> Result:
        target, start_s = self.target_for(engine, workload)
        tokenizer = self.tokenizer_for(engine)
        # The same requests and arrival schedule every repeat: only the engine's timing varies.
        requests, warmup = workload.build(tokenizer)
        runs: list[tuple[RunMetrics, list]] = []
        for attempt in range(repeat):
            records = measure(target, requests, workload.pattern, seed=workload.seed,
                              warmup=warmup if attempt == 0 else (),
                              duration_s=workload.duration_s)
            runs.append((compute_metrics(records), records))
        # The representative run (its records and summaries) is the median by output throughput.
        runs_sorted = sorted(runs, key=lambda run: run[0].output_throughput_tok_s)
        metrics, records = runs_sorted[len(runs_sorted) // 2]
        result = Result(
            test_id=test_id, engine=engine.to_dict(), engine_label=engine.label(),
            workload=workload.to_dict(), workload_label=workload.label(),
            metrics=metrics, runs=tuple(run[0] for run in runs), records=tuple(records),
            fingerprint=dict(self.fingerprint), engine_start_s=start_s,
        )
        self.results.append(result)
        return result

    def log_dir(self) -> Path:
        return self.settings.path(self.settings.log_dir)
