"""One measurement: a workload's requests through the load generator into a streaming client,
with the server's own /metrics sampled alongside.

This is the only place the load generator meets HTTP. With `workers` > 1 the requests go out
from that many client processes (workers.py), or from actors on a Ray cluster (ray_workers.py);
with one, from this process (local.py). What they share is in measurement.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_llmperf.client.local import measure_locally
from pytest_llmperf.client.measurement import Endpoint, LoadPlan, Measurement, run_async
from pytest_llmperf.client.ray_workers import OnRay, measure_on_ray
from pytest_llmperf.client.watchdog import DEFAULT_STALL_TIMEOUT_S, Interrupt
from pytest_llmperf.client.workers import measure_in_workers
from pytest_llmperf.records import Request

__all__ = ["Endpoint", "LoadPlan", "Measurement", "measure"]


def measure(endpoint: Endpoint, requests: list[Request], pattern, *, seed: int,
            warmup: Sequence[Request] = (), duration_s: float | None = None,
            workers: int | OnRay = 1,
            stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
            interrupt: Interrupt | None = None) -> Measurement:
    """Run the requests against the endpoint; one record per request that was sent.
    `interrupt`, once set from another thread, ends it (client/watchdog.py). `workers`: how many
    client processes send them, here or on a Ray cluster (client/ray_workers.py). Below here
    the load travels as one LoadPlan."""
    plan = LoadPlan(requests, pattern, seed, tuple(warmup), duration_s)
    if isinstance(workers, OnRay):
        return measure_on_ray(endpoint, plan, on_ray=workers, stall_timeout_s=stall_timeout_s,
                              interrupt=interrupt)
    # A conversation's turns depend on each other's answers: its sessions go to the workers
    # whole (workers.plan_workers).
    if workers > 1:
        return measure_in_workers(endpoint, plan, workers=workers,
                                  stall_timeout_s=stall_timeout_s, interrupt=interrupt)
    return run_async(measure_locally(endpoint, plan, stall_timeout_s, interrupt))
