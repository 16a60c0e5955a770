"""`--llmperf-client-workers ray[:N]` made concrete when the session starts, before anything is
measured: the cluster (RAY_ADDRESS's, or the local head Ray engines also use: engines/ray.py)
and how many workers (`ray` alone: one per alive node). A cluster that does not answer is one
line, here, not a failure of every test later."""

from __future__ import annotations

import socket

from pytest_llmperf.client.ray_workers import OnRay
from pytest_llmperf.engines.errors import EngineStartError
from pytest_llmperf.engines.ray import RAY_ADDRESS, RayCluster, alive_nodes

__all__ = ["on_client_cluster", "resolve_on_ray"]

CONNECT_TIMEOUT_S = 3.0


def on_client_cluster(client_workers: str | int | OnRay, cluster: RayCluster
                      ) -> str | int | OnRay:
    """--llmperf-client-workers' value with `ray[:N]` resolved (unchanged for any other choice);
    ValueError (one line, the local head stopped) where the cluster cannot be reached."""
    if not isinstance(client_workers, OnRay):
        return client_workers
    try:
        return resolve_on_ray(client_workers, cluster)
    except ValueError:
        cluster.close()
        raise


def resolve_on_ray(chosen: OnRay, cluster: RayCluster, ask=alive_nodes) -> OnRay:
    """`chosen` with its address and worker count; ValueError (one line) where the cluster
    cannot be reached."""
    option = f"--llmperf-client-workers {chosen.label()}"
    try:
        address = cluster.address()
    except EngineStartError as exc:
        raise ValueError(f"{option}: {exc}") from None
    fix = (f"start it (ray start --head) or correct {RAY_ADDRESS}, or unset {RAY_ADDRESS} for "
           "a local head" if cluster.named else "see the head's log")
    if not _listening(address):
        raise ValueError(f"{option}: nothing answers at the Ray address {address} "
                         f"({RAY_ADDRESS if cluster.named else 'the local head'}): {fix}")
    nodes = ask(address)
    if not nodes:
        raise ValueError(f"{option}: the Ray cluster at {address} did not name its nodes: {fix}")
    return OnRay(chosen.workers or len(nodes), address)


def _listening(address: str) -> bool:
    """Whether the cluster's GCS port takes a connection (Ray's own attempt waits a minute)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)),
                                      timeout=CONNECT_TIMEOUT_S):
            return True
    except (OSError, ValueError):
        return False
