"""One measurement: a workload's requests through the load generator into a streaming client,
with the server's own /metrics sampled alongside.

This is the only place the load generator meets HTTP. Warm-up requests go first, on their own,
and are not measured: they take the first-request costs (connection setup, lazy kernels) out of
the numbers. The server metrics cover the measured requests only.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from pytest_llmperf.client import ClientOptions, OpenAIStreamClient
from pytest_llmperf.loadgen import Concurrency, run_load
from pytest_llmperf.records import Request, RequestRecord
from pytest_llmperf.server_metrics import ServerMetricsSampler

WARMUP_CONCURRENCY = 4


@dataclass(frozen=True)
class Endpoint:
    """Where requests go: the server's base URL and the model name it serves."""

    base_url: str
    model: str
    options: ClientOptions = ClientOptions()


@dataclass
class Measurement:
    records: list[RequestRecord]
    server_metrics: dict[str, float] = field(default_factory=dict)
    warning: str | None = None  # why server metrics are missing or partial


def measure(endpoint: Endpoint, requests: list[Request], pattern, *, seed: int,
            warmup: list[Request] = (), duration_s: float | None = None) -> Measurement:
    """Run the requests against the endpoint; one record per request that was sent."""
    return asyncio.run(_measure(endpoint, requests, pattern, seed, list(warmup), duration_s))


async def _measure(endpoint: Endpoint, requests, pattern, seed, warmup, duration_s):
    async with OpenAIStreamClient(endpoint.base_url, endpoint.model, endpoint.options) as client:
        if warmup:
            await run_load(warmup, client.send, Concurrency(max_concurrency=WARMUP_CONCURRENCY))
        async with ServerMetricsSampler(endpoint.base_url) as sampler:
            records = await run_load(requests, client.send, pattern, seed=seed,
                                     duration_s=duration_s)
    return Measurement(records, sampler.summary(), sampler.warning)
