"""A measurement watched for neighbours: /proc before and after it (machine/neighbours.py), the
engine's cards sampled while it runs (machine/gpu_state.py), and the verdict's data from both
(machine/disturbance.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from pytest_llmperf.machine.neighbours import cpu_disturbance, session_pids, take_snapshot
from pytest_llmperf.machine.gpu_state import GpuWatch
from pytest_llmperf.machine.disturbance import Disturbance

__all__ = ["watched"]

T = TypeVar("T")


def watched(call: Callable[[], T], *, root: int,
            gpus: Sequence[str] = ()) -> tuple[T, Disturbance | None]:
    """`call()`'s result and what else used the machine while it ran (None where nothing could
    be read: not Linux)."""
    before = take_snapshot()
    with GpuWatch(gpus).running() as watch:
        result = call()
    after = take_snapshot()
    cpu = cpu_disturbance(before, after, root)
    gpu_states = watch.states(session_pids(after, root)) if gpus else ()
    if cpu is None and not gpu_states:
        return result, None
    return result, Disturbance(cpu, gpu_states)
