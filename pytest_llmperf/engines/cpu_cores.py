"""Where a CPU engine's processes run: its compute threads on their cores, everything else off them.

A vLLM server on the CPU is three kinds of process: the API server (HTTP, detokenizing), the
engine core (scheduling; it busy-polls the worker for a second after each step) and the worker,
whose OpenMP threads do the model's arithmetic. `VLLM_CPU_OMP_THREADS_BIND` binds only those
threads. Left alone, Linux also moves the API server and the engine core onto the compute cores
whenever the others are busy, and the compute threads then lose part of a core to a poll loop.
How often that happens changes from second to second, so two identical engines measured back to
back differed by more than a 10% regression (docs/ab.md, "Calibration").

So once the server serves, every thread of its processes that may still run on any core is moved
to the cores not bound for compute (`pin_control`); the worker's OpenMP threads, which vLLM bound
to their own cores, keep theirs, and threads started later inherit their creator's. Not before:
nothing is measured while an engine starts, and its three processes import torch and vLLM one
after the other, which on the 2-core VM took 21 s free and 22 s on one core for one engine, but
30 s free and 44 s on one core for two started side by side (the two sides of an A/B test:
docs/cpu-engine.md, "Start-up and stopping").
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

__all__ = ["bound_cores", "control_cores", "pin_control"]

OMP_BIND = "VLLM_CPU_OMP_THREADS_BIND"


def bound_cores(spec: str) -> set[int] | None:
    """The cores a `VLLM_CPU_OMP_THREADS_BIND` value binds ("0", "0-3", "0,2,4", "0-3|4-7" for
    one list per tensor-parallel rank); None for "auto", "nobind" or anything else not a list."""
    cores: set[int] = set()
    for rank in spec.split("|"):
        for part in rank.split(","):
            low, dash, high = part.strip().partition("-")
            if not low.isdigit() or (dash and not high.isdigit()):
                return None
            cores.update(range(int(low), int(high if dash else low) + 1))
    return cores or None


def control_cores(env: Mapping[str, str], usable: set[int] | None = None) -> set[int] | None:
    """The cores for an engine's API server and engine core: the usable ones its compute threads
    are not bound to. None (leave the affinity alone) when nothing is bound or nothing is left."""
    bound = bound_cores(env.get(OMP_BIND, ""))
    if bound is None:
        return None
    if usable is None:
        usable = set(os.sched_getaffinity(0))
    rest = usable - bound
    return rest or None


def pin_control(pids: Iterable[int], cores: set[int], usable: set[int] | None = None) -> int:
    """Move every thread of `pids` whose affinity is still all the `usable` cores (by default
    this process's) to `cores`; threads bound more narrowly (vLLM's OpenMP threads) keep theirs.
    Returns how many threads moved. A process or thread that ended meanwhile is passed over."""
    if usable is None:
        usable = set(os.sched_getaffinity(0))
    moved = 0
    for pid in pids:
        try:
            threads = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for tid in threads:
            try:
                if set(os.sched_getaffinity(tid)) == usable:
                    os.sched_setaffinity(tid, cores)
                    moved += 1
            except OSError:
                continue
    return moved
