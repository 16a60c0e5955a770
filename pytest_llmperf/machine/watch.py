"""A measurement watched for neighbours: /proc before and after it (machine/neighbours.py), the
engine's cards sampled while it runs (machine/gpu_state.py), and the verdict's data from both
(machine/disturbance.py), with each card's telemetry (machine/gpu_telemetry.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import TypeVar

from pytest_llmperf.machine.disturbance import Disturbance
from pytest_llmperf.machine.gpu_state import GpuWatch
from pytest_llmperf.machine.neighbour_watch import NeighbourWatch
from pytest_llmperf.machine.neighbours import cpu_disturbance, session_pids, take_snapshot

__all__ = ["watched"]

T = TypeVar("T")
Window = Callable[[T], "tuple[float, float] | None"]


def watched(call: Callable[[], T], *, root: int, gpus: Sequence[str] = (),
            window: Window | None = None, judge: bool = True,
            engine_root: int | None = None,
            on_disturbed: Callable[[str], None] | None = None) -> tuple[T, Disturbance | None]:
    """`call()`'s result and what else used the machine while it ran (None where nothing could
    be read: not Linux). `window(result)`: the perf_counter span of what was measured (the
    requests after the warm-up), over which the cards' telemetry and energy are taken; None: the
    whole call. `judge` False (--llmperf-disturbance off): only the cards are read, for their
    telemetry, and nothing is judged. `engine_root`: the pid of a CPU engine's server, whose
    cores a neighbour must keep off (machine/disturbance.py); None for a GPU's or another's.
    `on_disturbed(reason)`: called once, while `call` runs, where a neighbour on that engine's
    cores has already made the measurement DISTURBED (machine/neighbour_watch.py); it is to
    end the measurement."""
    before = take_snapshot() if judge else None
    stopper = (NeighbourWatch(before, root, engine_root, on_disturbed).running()
               if before is not None and engine_root is not None and on_disturbed is not None
               else nullcontext())
    with GpuWatch(gpus).running() as watch, stopper:
        result = call()
    after = take_snapshot() if judge or gpus else None
    span = window(result) if window else None
    gpu_states = watch.states(session_pids(after, root), span) if gpus else ()
    cpu = cpu_disturbance(before, after, root, engine_root) if judge else None
    if cpu is None and not gpu_states:
        return result, None
    return result, Disturbance(cpu, gpu_states, judged=judge)
