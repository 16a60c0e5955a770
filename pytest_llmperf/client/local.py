"""One measurement from this process: one event loop sends every request."""

from __future__ import annotations

from pytest_llmperf.client import progress
from pytest_llmperf.client.measurement import (
    WARMUP_CONCURRENCY,
    Endpoint,
    LoadPlan,
    Measurement,
    finished,
    prepare_checks,
    progress_line,
    run_measured,
    warm_up,
)
from pytest_llmperf.client.openai import OpenAIStreamClient
from pytest_llmperf.client.server_metrics import ServerMetricsSampler
from pytest_llmperf.client.watchdog import Interrupt, Watchdog, abort_reason


async def measure_locally(endpoint: Endpoint, plan: LoadPlan, stall_timeout_s: float,
                          interrupt: Interrupt | None = None) -> Measurement:
    requests = plan.requests
    prepare_checks(requests)
    async with OpenAIStreamClient(endpoint.base_url, endpoint.model, endpoint.options,
                                  access=endpoint.access) as client:
        watchdog = Watchdog(
            lambda: progress.of_client(client), stall_timeout_s,
            lambda stall: client.stop(abort_reason(stall_timeout_s, interrupted=stall is None)),
            interrupt=interrupt)
        async with watchdog.running():
            await warm_up(client, plan.warmup, WARMUP_CONCURRENCY, stopped=watchdog.stopped)
            if watchdog.stopped():  # in the warm-up: nothing was measured
                return Measurement([], stall=watchdog.stall and str(watchdog.stall),
                                   interrupted=watchdog.interrupted)
            with progress_line(watchdog, len(requests)):
                async with ServerMetricsSampler(endpoint.base_url,
                                                access=endpoint.access,
                                                names=endpoint.options.server.metrics) as sampler:
                    records, stats = await run_measured(client, requests, plan.pattern,
                                                        seed=plan.seed,
                                                        duration_s=plan.duration_s,
                                                        stopped=watchdog.stopped)
    return finished(records, sampler, stats, watchdog)
