"""Load generation from several processes: one seeded schedule, one start instant, N event loops.

One Python process runs out of CPU far below what a GPU server streams, so the requests of one
measurement can go out from N worker processes (`--llmperf-client-workers`), as AIPerf and GuideLLM
do. The split keeps the workload's meaning:
- open loop: every worker computes the same seeded arrival offsets and sends every N-th arrival at
  its offset from the common start instant; a concurrency cap is split between the workers;
- closed loop: the concurrency is split, and a shared counter hands out request indices, so a slot
  freed in any worker takes the next request, exactly as in one process;
- conversations (sessions.Sessions): the same split over the session starts, so a session goes
  to one worker whole (its turns carry its own answers) and its records keep their request index,
  session and turn: the merged records number as one process's would.
perf_counter is the system-wide monotonic clock on Linux, so every worker's timestamps are on one
time line and the records merge as if one client had taken them.

A worker that dies costs its own records only: the others' are kept, and the measurement says
which worker died and how.

Each worker publishes its progress (progress.Board) every PUBLISH_S; the parent's stall watchdog
and progress line read the sum. On a stall the parent raises the board's stop flag, and every
worker ends its requests in flight and returns what it measured.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from typing import Any

from pytest_llmperf.client import progress
from pytest_llmperf.client.measurement import (
    WARMUP_CONCURRENCY,
    Endpoint,
    LoadPlan,
    Measurement,
    finished,
    prepare_checks,
    progress_line,
    run_async,
    run_measured,
    warm_up,
)
from pytest_llmperf.client.openai import OpenAIStreamClient
from pytest_llmperf.client.patterns import LoadPattern, share
from pytest_llmperf.client.server_metrics import ServerMetricsSampler
from pytest_llmperf.client.watchdog import (
    DEFAULT_STALL_TIMEOUT_S,
    Interrupt,
    Watchdog,
    abort_reason,
)
from pytest_llmperf.records import ClientStats, Request, RequestRecord

__all__ = ["WorkerJob", "WorkerPlan", "failure_line", "measure_in_workers", "plan_workers",
           "run_worker", "share"]

# Worker processes start from a fork server that has already imported the client (a fresh
# interpreter per worker would take ~1 s each; a fork of a clean one takes milliseconds, and
# unlike a fork of pytest it holds no threads or engine state).
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["pytest_llmperf.client.workers"])
READY_TIMEOUT_S = 120.0  # imports plus the warm-up requests of one worker
START_MARGIN_S = 0.05  # from sending the start instant to it: every worker must be waiting by then
PUBLISH_S = 0.25  # a worker's progress on the board is at most this old when the parent reads it


@dataclass(frozen=True)
class WorkerPlan:
    """One worker's part: its share of the load, and of the warm-up."""

    pattern: LoadPattern
    # open loop: the arrivals it sends (for conversations, the sessions it starts);
    # closed loop: None (the shared counter)
    only: tuple[int, ...] | None
    warmup: tuple[int, ...]  # indices into the warm-up requests


def plan_workers(pattern: LoadPattern, n_requests: int, n_warmup: int,
                 workers: int) -> list[WorkerPlan]:
    """Split one measurement between at most `workers` processes, as the pattern splits its
    load (LoadPattern.split), and the warm-up requests round-robin between them."""
    parts = pattern.split(n_requests, workers)
    return [WorkerPlan(part, only, tuple(range(k, n_warmup, len(parts))))
            for k, (part, only) in enumerate(parts)]


@dataclass(frozen=True)
class WorkerJob:
    """What one worker is handed: its part of the measurement and where to send it."""

    worker: int
    endpoint: Endpoint
    requests: list[Request]
    warmup: list[Request]
    plan: WorkerPlan
    workers: int  # how many share the measurement
    seed: int
    duration_s: float | None
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S
    ray_address: str | None = None  # the cluster its actor runs on (client/ray_workers.py)


def _worker_main(job: WorkerJob, counter: Any, board: progress.Board, conn: Connection) -> None:
    # Ctrl-C goes to the whole process group; the parent decides what happens, not each worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        def take_next() -> int:
            with counter.get_lock():
                index = counter.value
                counter.value = index + 1
            return index

        def ready() -> float:
            conn.send(("ready",))
            return conn.recv()  # blocking on purpose: nothing is in flight before the start

        records, stats = run_async(run_worker(job, take_next, board, ready))
        conn.send(("done", records, replace(stats, name=f"client worker {job.worker} "
                                                        f"(pid {os.getpid()})")))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as this worker's failure
        conn.send(("error", failure_line(exc)))
    finally:
        conn.close()


def failure_line(exc: BaseException) -> str:
    """A worker's exception in one line, with where it was raised."""
    last = traceback.extract_tb(exc.__traceback__)[-1:] or None
    where = f" at {last[0].filename}:{last[0].lineno}" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"


async def run_worker(job: WorkerJob, take_next: Callable[[], int], board: Any,
                     ready: Callable[[], float]) -> tuple[list[RequestRecord], ClientStats]:
    """One worker's part of the measurement, in this process's event loop: its warm-up, then
    `ready()` (which returns the common start instant on this process's perf_counter), then
    its share of the load. `board` takes its progress and holds the parent's stop request
    (progress.Board's publish, stop_requested and interrupted); `take_next` hands out a closed
    loop's request indices."""
    endpoint = job.endpoint
    async with OpenAIStreamClient(endpoint.base_url, endpoint.model, endpoint.options,
                                  access=endpoint.access) as client:
        publisher = asyncio.ensure_future(_publish(job, client, board))
        try:
            warmup = [job.warmup[i] for i in job.plan.warmup]
            await warm_up(client, warmup,
                          max(1, share(WARMUP_CONCURRENCY, job.worker, job.workers)),
                          stopped=board.stop_requested)
            prepare_checks(job.requests)
            start_s = ready()
            return await run_measured(
                client, job.requests, job.plan.pattern, seed=job.seed, duration_s=job.duration_s,
                start_s=start_s, only=job.plan.only,
                take_next=take_next if job.plan.only is None else None,
                stopped=board.stop_requested)
        finally:
            publisher.cancel()


async def _publish(job: WorkerJob, client: OpenAIStreamClient, board: Any) -> None:
    """This worker's progress onto the board; on the parent's stop request, end the requests
    in flight (the stall watchdog runs in the parent, over every worker's progress)."""
    while not board.stop_requested():
        board.publish(job.worker, progress.of_client(client))
        await asyncio.sleep(PUBLISH_S)
    client.stop(abort_reason(job.stall_timeout_s, interrupted=board.interrupted()))


def _death(worker: int, process) -> str:
    code = process.exitcode
    how = f"killed by {signal.Signals(-code).name}" if code and code < 0 else f"exit code {code}"
    return f"client worker {worker} (pid {process.pid}) died: {how}"


def _collect(pending: dict[int, tuple[Any, Connection]], timeout_s: float | None,
             want: str) -> tuple[dict[int, tuple], dict[int, str]]:
    """Wait for one `want` message from each pending worker; returns messages and failures."""
    got: dict[int, tuple] = {}
    failed: dict[int, str] = {}
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    waiting = dict(pending)
    while waiting:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready = wait([c for _, c in waiting.values()] + [p.sentinel for p, _ in waiting.values()],
                     timeout=left)
        if not ready:
            for k in waiting:
                failed[k] = f"client worker {k} sent nothing within {timeout_s:g} s"
            break
        for k, (process, conn) in list(waiting.items()):
            if conn in ready or conn.poll():
                try:
                    message = conn.recv()
                except EOFError:
                    process.join(1)
                    failed[k] = _death(k, process)
                else:
                    if message[0] == want:
                        got[k] = message
                    else:
                        failed[k] = f"client worker {k} failed: {message[1]}"
                del waiting[k]
            elif process.sentinel in ready:
                process.join(1)
                failed[k] = _death(k, process)
                del waiting[k]
    return got, failed


def measure_in_workers(endpoint: Endpoint, plan: LoadPlan, *, workers: int, on_started=None,
                       stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
                       interrupt: Interrupt | None = None, main: Callable[..., None] | None = None,
                       ray_address: str | None = None) -> Measurement:
    """`measure.measure` over `workers` processes; `on_started(pids)` lets a benchmark watch
    them. `main(job, counter, board, conn)` is what each process runs: by default the worker
    itself; client/ray_workers.py passes one that runs it in a Ray actor on `ray_address`."""
    requests, warmup = list(plan.requests), list(plan.warmup)
    plans = plan_workers(plan.pattern, len(requests), len(warmup), workers)
    counter = _CONTEXT.Value("q", 0)
    board = progress.Board(_CONTEXT, len(plans))
    pending: dict[int, tuple[Any, Connection]] = {}
    try:
        for k, share in enumerate(plans):
            parent, child = _CONTEXT.Pipe()
            job = WorkerJob(k, endpoint, requests, warmup, share, len(plans), plan.seed,
                            plan.duration_s, stall_timeout_s, ray_address)
            process = _CONTEXT.Process(target=main or _worker_main,
                                       args=(job, counter, board, child),
                                       name=f"llmperf-client-{k}", daemon=True)
            process.start()
            child.close()
            pending[k] = (process, parent)
        if on_started is not None:
            on_started([p.pid for p, _ in pending.values()])
        watchdog = Watchdog(board.read, stall_timeout_s,
                            lambda stall: board.request_stop(interrupted=stall is None),
                            interrupt=interrupt)
        return run_async(_measure(endpoint, pending, watchdog, len(requests)))
    finally:
        for process, conn in pending.values():
            conn.close()
            if process.is_alive():
                process.kill()
            process.join(5)


async def _measure(endpoint: Endpoint, pending, watchdog: Watchdog, total: int) -> Measurement:
    async with watchdog.running():
        _, failed = await asyncio.to_thread(_collect, pending, READY_TIMEOUT_S, "ready")
        for k in failed:
            pending.pop(k)
        with progress_line(watchdog, total):
            async with ServerMetricsSampler(endpoint.base_url,
                                            access=endpoint.access,
                                            names=endpoint.options.server.metrics) as sampler:
                start_s = time.perf_counter() + START_MARGIN_S
                for _, conn in pending.values():
                    conn.send(start_s)
                done, more_failed = await asyncio.to_thread(_collect, pending, None, "done")
    failed = {**failed, **more_failed}
    records = sorted((r for _, rs, _ in done.values() for r in rs), key=lambda r: r.index)
    stats = ClientStats.merge([done[k][2] for k in sorted(done)])  # in worker order
    error = "; ".join(failed[k] for k in sorted(failed)) or None
    if error:
        error += (f"; the records of the other {len(done)} worker(s) are kept" if done
                  else "; no records")
    return finished(records, sampler, stats, watchdog, error)
