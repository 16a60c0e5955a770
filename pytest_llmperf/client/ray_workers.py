"""Client workers on a Ray cluster: one measurement's load sent from actors on the cluster's
nodes, for a server more than one client host can keep busy (`--llmperf-client-workers ray:N`).

The split is workers.py's, unchanged: the same seeded schedule dealt to N workers, one common
start, the records merged into one result. What differs is where each worker's event loop runs.
Each worker process here is a proxy: it connects to the cluster (`ray.init`), starts one actor
(`ClientActor`) on the node it is given, and relays between the parent and the actor what the
parent would have said to a local worker: ready, the start instant, progress, the stop request,
the records. So the parent's watchdog, progress line, death handling and merge are the ones a
local run uses, and the test process itself never imports Ray (as engines/ray.py keeps it).

Placement: worker k goes to the k-th alive node (sorted by node id, round-robin), a hard
affinity, one CPU each: N workers on N nodes put one on each.

Clocks: each host has its own perf_counter. The start instant crosses as wall-clock time
(time.time()), and each actor's records come back moved onto this process's perf_counter by the
difference of the two hosts' wall-minus-perf offsets. On one host the offsets agree to
microseconds; across hosts the error is the hosts' wall-clock disagreement (their NTP or PTP
synchronisation: docs/client.md, "Client workers on Ray"), and it enters only the start instant
and arrival times, never a TTFT or a chunk gap, which are differences taken on one host.

Closed loops: the one-process counter (workers.py) is not shared across hosts; worker k takes
requests k, k+N, k+2N, ... instead. The concurrency and the request set are the same; only a
worker that finishes its share early does not take another's.
"""

from __future__ import annotations

import itertools
import signal
import threading
import time
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any

from pytest_llmperf.client import progress
from pytest_llmperf.client.measurement import Endpoint, LoadPlan, Measurement, run_async
from pytest_llmperf.client.watchdog import DEFAULT_STALL_TIMEOUT_S, Interrupt
from pytest_llmperf.client.workers import (
    PUBLISH_S,
    WorkerJob,
    failure_line,
    measure_in_workers,
    run_worker,
)
from pytest_llmperf.records import ClientStats, RequestRecord, moved_in_time

__all__ = ["ClientActor", "OnRay", "measure_on_ray", "wall_minus_perf"]

READY_POLL_S = 0.25  # how often a proxy asks its actor whether its warm-up is done
PLACE_TIMEOUT_S = 60.0  # for an actor to get its CPU on its node and answer
ACTOR_CALLS = 4  # run, and beside it: ready?, start, snapshot/stop


@dataclass(frozen=True)
class OnRay:
    """`--llmperf-client-workers ray[:N]`: N client workers on the Ray cluster at `address`
    (None until the session names it: RAY_ADDRESS's, or a local head); `workers` None until
    then too, for `ray` alone (one per alive node)."""

    workers: int | None = None
    address: str | None = None

    def label(self) -> str:
        return f"ray:{self.workers}" if self.workers else "ray"


def wall_minus_perf() -> float:
    """This host's wall clock minus its perf_counter, read back to back: the offset that puts a
    wall-clock instant on this host's perf_counter and back."""
    return time.time() - time.perf_counter()


class ClientActor:
    """One client worker's event loop, in a Ray actor (a process on a node of the cluster).

    `run` measures in one thread; the proxy's other calls (`ready`, `start`, `snapshot`, `stop`)
    come in on others (a threaded actor: ACTOR_CALLS), and touch only flags and the snapshot
    `run`'s loop publishes."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._started = threading.Event()
        self._start_wall_s = 0.0
        self._stop = 0  # progress.Board's code: 1 stall, 2 interrupted
        self._snapshot = progress.IDLE

    def run(self, job: WorkerJob) -> tuple[list[RequestRecord], ClientStats, float]:
        """The worker's measurement; its records on this host's perf_counter, with the offset
        that moves them (`wall_minus_perf`)."""
        take_next = itertools.count(job.worker, job.workers).__next__
        records, stats = run_async(run_worker(job, take_next, self, self._wait_for_start))
        return records, stats, wall_minus_perf()

    def ready(self, timeout_s: float) -> bool:
        return self._ready.wait(timeout_s)

    def start(self, start_wall_s: float) -> None:
        self._start_wall_s = start_wall_s
        self._started.set()

    def snapshot(self) -> tuple[progress.Snapshot, float]:
        return self._snapshot, wall_minus_perf()

    def stop(self, interrupted: bool) -> None:
        self._stop = 2 if interrupted else 1
        self._started.set()  # a stop before the start ends the wait for it

    # What run_worker reads as its board.
    def publish(self, worker: int, snapshot: progress.Snapshot) -> None:
        self._snapshot = snapshot

    def stop_requested(self) -> bool:
        return bool(self._stop)

    def interrupted(self) -> bool:
        return self._stop == 2

    def _wait_for_start(self) -> float:
        self._ready.set()
        self._started.wait()  # blocking on purpose: nothing is in flight before the start
        return self._start_wall_s - wall_minus_perf()


def proxy_main(job: WorkerJob, counter: Any, board: progress.Board, conn: Connection) -> None:
    """A worker process of workers.py whose worker runs on the cluster: see the module's
    docstring. `counter` is unused (closed loops stride instead)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    where = "the Ray cluster"
    try:
        import ray

        ray.init(address=job.ray_address, logging_level="ERROR", log_to_driver=False,
                 configure_logging=False)
        actor, node = _start_actor(ray, job.worker)
        try:
            ray.get(actor.ready.remote(0.0), timeout=PLACE_TIMEOUT_S)  # placed and answering
        except ray.exceptions.GetTimeoutError:
            raise RuntimeError(f"no CPU for it on {node} within {PLACE_TIMEOUT_S:.0f} s (each "
                               "client worker takes one: `ray status` shows what is free)"
                               ) from None
        where = node
        done = actor.run.remote(job)
        while not ray.get(actor.ready.remote(READY_POLL_S)):
            if board.stop_requested():
                actor.stop.remote(board.interrupted())
            if ray.wait([done], timeout=0)[0]:
                break  # it failed in its warm-up: its error comes from `done` below
        else:
            conn.send(("ready",))
            start_s = conn.recv()
            actor.start.remote(start_s + wall_minus_perf())
        while not ray.wait([done], timeout=PUBLISH_S)[0]:
            snapshot, offset = ray.get(actor.snapshot.remote())
            board.publish(job.worker, _moved(snapshot, offset - wall_minus_perf()))
            if board.stop_requested():
                actor.stop.remote(board.interrupted())
        records, stats, offset = ray.get(done)
        by_s = offset - wall_minus_perf()
        conn.send(("done", [moved_in_time(r, by_s) for r in records],
                   replace(stats, name=f"client worker {job.worker} on {where}")))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as this worker's failure
        conn.send(("error", f"on {where}: {failure_line(exc)}"))
    finally:
        conn.close()


def _start_actor(ray: Any, worker: int) -> tuple[Any, str]:
    """The actor of worker `worker`, pinned to the cluster's alive nodes round-robin, and its
    node in words: the address the cluster knows it by and the start of its id."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = sorted((node["NodeID"], node["NodeManagerAddress"]) for node in ray.nodes()
                   if node.get("Alive"))
    node_id, address = nodes[worker % len(nodes)]
    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    actor = (ray.remote(ClientActor)
             .options(num_cpus=1, max_concurrency=ACTOR_CALLS, scheduling_strategy=strategy)
             .remote())
    return actor, f"node {address} ({node_id[:8]})"


def _moved(snapshot: progress.Snapshot, by_s: float) -> progress.Snapshot:
    return replace(snapshot, last_progress_s=snapshot.last_progress_s + by_s)


def measure_on_ray(endpoint: Endpoint, plan: LoadPlan, *, on_ray: OnRay,
                   stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
                   interrupt: Interrupt | None = None) -> Measurement:
    """`measure.measure` with its workers on the cluster `on_ray` names (resolved: both set)."""
    if on_ray.address is None or not on_ray.workers:
        raise ValueError(f"{on_ray.label()}: the cluster and its worker count are named when the "
                         "session starts (session/client_cluster.py); none was")
    return measure_in_workers(endpoint, plan, workers=on_ray.workers,
                              stall_timeout_s=stall_timeout_s, interrupt=interrupt,
                              main=proxy_main, ray_address=on_ray.address)
