"""The parts of one measurement that the in-process client (local.py) and the client workers
(workers.py) share: where requests go (`Endpoint`), what comes back (`Measurement`), the
warm-up, the measured run in one event loop with the client's own effort beside it, and the
test's live progress line.

Warm-up requests go first, on their own, and are not measured: they take the first-request costs
(connection setup, lazy kernels) out of the numbers. The server metrics cover the measured
requests only. The stall watchdog (watchdog.py) watches warm-up and measurement alike; after a
stall the Measurement holds what was measured until then and says why it stopped (`stall`).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from pytest_llmperf.client import progressline
from pytest_llmperf.client.access import Access
from pytest_llmperf.client.openai import ClientOptions, OpenAIStreamClient
from pytest_llmperf.client.patterns import Concurrency, LoadPattern
from pytest_llmperf.client.server_metrics import ServerMetricsSampler
from pytest_llmperf.client.watchdog import Watchdog
from pytest_llmperf.failures import INVALID_OUTPUT
from pytest_llmperf.machine.disturbance import Disturbance
from pytest_llmperf.metrics import phases
from pytest_llmperf.records import ClientStats, Request, RequestRecord, request_api

WARMUP_CONCURRENCY = 4
# The event-loop probe sleeps this long and records how late it woke: a loop busy with reads wakes
# it late. uvloop's timers have 1 ms resolution, so only lags well above 1 ms mean anything.
LAG_PROBE_S = 0.005


@dataclass(frozen=True)
class Endpoint:
    """Where requests go: the server's base URL and the model name it serves; `access`: the
    headers and TLS trust every request to it needs (a deployment's API key, access.py)."""

    base_url: str
    model: str
    options: ClientOptions = ClientOptions()
    access: Access = Access()


@dataclass(frozen=True)
class LoadPlan:
    """One measurement's load, one value down the measuring chain (measure.py, workers.py,
    ray_workers.py, local.py): the requests, how they arrive (`pattern`, its draws seeded by
    `seed`), the warm-up requests before them, and at most how long they are sent for."""

    requests: Sequence[Request]
    pattern: LoadPattern
    seed: int = 0
    warmup: Sequence[Request] = ()
    duration_s: float | None = None


@dataclass
class Measurement:
    records: list[RequestRecord]
    server_metrics: dict[str, float] = field(default_factory=dict)
    warning: str | None = None  # why server metrics are missing, partial or not of these requests
    client: ClientStats = field(default_factory=ClientStats)
    client_error: str | None = None  # a client worker died; `records` holds the others'
    stall: str | None = None  # the watchdog stopped it (watchdog.Stall); `records` holds the rest
    # A neighbour had already made it DISTURBED, and it was ended (watchdog.Interrupt): why.
    interrupted: str | None = None
    disturbance: Disturbance | None = None  # what else used the machine (machine/watch.py)


def finished(records: list[RequestRecord], sampler: ServerMetricsSampler, stats: ClientStats,
             watchdog: Watchdog, client_error: str | None = None) -> Measurement:
    """The Measurement of a run that got past its warm-up, in one process or several. Where the
    engine's request timings cover another number of requests than the client completed, the
    warning says so (metrics/phases.py)."""
    summary = sampler.summary()
    completed = sum(record.ok for record in records)
    # vLLM's count: what it finished, an output the client's check refused included (the
    # engine served it whole; workloads/structured.py)
    served = sum(record.engine_requests for record in records
                 if record.ok or record.error_kind == INVALID_OUTPUT)
    mismatch = phases.count_note(summary.get("e2el_s.n"), served, len(records) - completed)
    warning = "; ".join(text for text in (sampler.warning, mismatch) if text) or None
    return Measurement(records, summary, warning, stats, client_error,
                       stall=watchdog.stall and str(watchdog.stall),
                       interrupted=watchdog.interrupted)


def run_async(coro):
    """Run a measurement's coroutine on uvloop (libuv's loop: several times less CPU per socket
    read than asyncio's selector loop), or asyncio's own loop where uvloop is not available,
    with the heap frozen (`frozen_heap`)."""
    with frozen_heap():
        try:
            import uvloop
        except ImportError:  # e.g. Windows: correct, only slower
            return asyncio.run(coro)
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(coro)


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Keep the garbage collector's full scans off what existed before the run. The process that
    runs the client also holds every record its session measured so far, and a full collection
    scans all of it with the GIL held: in one run of the CPU suite they took 11 ms at first and
    90 ms by its end, and one that lands mid-run stamps every chunk behind it late by that much
    (tests/integration/test_client_mock.py forces three). `gc.freeze` moves every object into a
    generation collections ignore (https://docs.python.org/3/library/gc.html#gc.freeze); the
    young ones the run makes are still collected as usual. No collection first: it would cost a
    full scan per measurement, and whatever garbage is frozen is collected after `unfreeze`."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def progress_line(watchdog: Watchdog, total: int) -> Iterator[None]:
    """The test's live progress line, fed by the watchdog's snapshots, while the block runs."""
    line = progressline.for_measurement(total)
    if line is None:
        yield
        return
    watchdog.on_tick = line.update
    try:
        yield
    finally:
        watchdog.on_tick = None
        line.close()


async def warm_up(client: OpenAIStreamClient, warmup: Sequence[Request], concurrency: int,
                  stopped: Callable[[], bool] = lambda: False) -> None:
    if warmup:
        await Concurrency(max_concurrency=concurrency).run(warmup, client.send, stopped=stopped)


def prepare_checks(requests: Sequence[Request]) -> None:
    """Ready each distinct output check before the clock starts: a grammar's is compiled here,
    and importing its library costs seconds of CPU the measured requests must not share."""
    for check in {request.check for request in requests if request.check is not None}:
        prepare = getattr(check, "prepare", None)
        if prepare is not None:
            prepare()


async def run_measured(client: OpenAIStreamClient, requests: Sequence[Request],
                       pattern: LoadPattern, *, seed: int, duration_s: float | None,
                       start_s: float | None = None, only: Sequence[int] | None = None,
                       take_next: Callable[[], int] | None = None,
                       stopped: Callable[[], bool] = lambda: False,
                       ) -> tuple[list[RequestRecord], ClientStats]:
    """The measured part of a run in this process, with the client's own effort beside it."""
    client.finished = client.finished_tokens = 0  # progress counts the measured requests only
    start_s = time.perf_counter() if start_s is None else start_s
    lags: list[float] = []
    probe = asyncio.ensure_future(_probe_loop_lag(lags))
    cpu0, coalesced0 = time.process_time(), client.coalesced_chunks
    try:
        records = await pattern.run(requests, client.send,
                                    chat=request_api(client.options.api).chat,
                                    seed=seed, duration_s=duration_s, start_s=start_s,
                                    only=only, take_next=take_next, stopped=stopped)
    finally:
        probe.cancel()
    wall_s = max(time.perf_counter() - start_s, 1e-9)
    cpu_s = time.process_time() - cpu0
    stats = ClientStats(
        workers=1, wall_s=wall_s, cpu_s=cpu_s, busiest_cpu_share=cpu_s / wall_s,
        chunks=sum(len(r.chunk_times_s) for r in records),
        coalesced_chunks=client.coalesced_chunks - coalesced0, loop_lag_s=lags)
    return records, stats


async def _probe_loop_lag(lags: list[float]) -> None:
    clock = time.perf_counter
    while True:
        before = clock()
        await asyncio.sleep(LAG_PROBE_S)
        lags.append(clock() - before - LAG_PROBE_S)
