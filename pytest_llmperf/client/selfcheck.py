"""The client's self-check from a run's records and the client's own effort: the numbers
metrics/client_check.py holds to its limits (that module says how they were chosen)."""

from __future__ import annotations

import numpy as np

from pytest_llmperf.client.patterns import LoadPattern, counts_slot_waits
from pytest_llmperf.metrics.client_check import (
    CPU_LIMIT,
    LOOP_LAG_FLOOR_S,
    LOOP_LAG_SHARE_OF_TTFT,
    SCHEDULE_LAG_FLOOR_S,
    SCHEDULE_LAG_SHARE_OF_TTFT,
    ClientCheck,
)
from pytest_llmperf.metrics.compute import RunMetrics
from pytest_llmperf.records import ClientStats

__all__ = ["check_client"]


def check_client(metrics: RunMetrics, stats: ClientStats, pattern: LoadPattern) -> ClientCheck:
    lag = _lag_p90(stats)
    ttft = metrics.ttft_s.p50 if metrics.completed else 0.0
    open_loop = pattern.open_loop and not counts_slot_waits(pattern)
    schedule = metrics.queue_s.p90 if open_loop and metrics.queue_s.n else None
    return ClientCheck(
        cpu_share=stats.busiest_cpu_share, loop_lag_p90_s=lag,
        loop_lag_limit_s=max(LOOP_LAG_FLOOR_S, LOOP_LAG_SHARE_OF_TTFT * ttft),
        schedule_lag_p90_s=schedule,
        schedule_lag_limit_s=max(SCHEDULE_LAG_FLOOR_S, SCHEDULE_LAG_SHARE_OF_TTFT * ttft),
        workers=stats.workers, coalesced_share=stats.coalesced_share,
        busiest_worker=_busiest(stats.parts),
        processes=tuple(part.name for part in stats.parts or (stats,) if part.name))


def _lag_p90(stats: ClientStats) -> float:
    return float(np.percentile(stats.loop_lag_s, 90)) if stats.loop_lag_s else 0.0


def _busiest(parts: tuple[ClientStats, ...]) -> str | None:
    """The named worker nearest a limit: each worker's loop-lag p90 and CPU share taken as
    shares of their limits (the lag's floor, CPU_LIMIT), so neither unit outweighs the other,
    and the worker whose larger share is largest."""
    named = [part for part in parts if part.name]
    if len(named) < 2:
        return None
    worst = max(named, key=lambda part: max(_lag_p90(part) / LOOP_LAG_FLOOR_S,
                                            part.busiest_cpu_share / CPU_LIMIT))
    return (f"{worst.name}: lag p90 {_lag_p90(worst) * 1e3:.1f} ms, "
            f"cpu {worst.busiest_cpu_share:.0%}")
