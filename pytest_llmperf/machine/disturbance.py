"""Was the machine ours while a measurement ran? What else used it, and the rule that calls a
measurement DISTURBED: then its numbers say more about the neighbour than about the engine, so it
is no regression, never a baseline and never a reference.

CPU (machine/neighbours.py reads it from /proc): processes outside this test session used at least
OTHER_CORES_LIMIT cores on average over the measurement while the machine was busy at least
BUSY_SHARE_LIMIT of its capacity (neighbours on idle cores take nothing from the engine), or the
hypervisor stole at least STEAL_SHARE_LIMIT of the CPU time. The CPU engine runs at nice 19 on
purpose, so a neighbour at nice 0 on its cores takes what it wants.

GPU (read through NVML, engines' cards only): another process holds one of the engine's cards, or
a card reports a throttle reason other than idle, or its SM clock averaged below
SM_CLOCK_SHARE_LIMIT of its maximum.

How the limits were chosen, with the measured rows: docs/engine-faults.md, "Disturbed
measurements".
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BUSY_SHARE_LIMIT", "CpuDisturbance", "Disturbance", "GpuState",
           "OTHER_CORES_LIMIT", "STEAL_SHARE_LIMIT"]

OTHER_CORES_LIMIT = 0.10
BUSY_SHARE_LIMIT = 0.85
STEAL_SHARE_LIMIT = 0.10
SM_CLOCK_SHARE_LIMIT = 0.80


@dataclass(frozen=True)
class CpuDisturbance:
    other_cores: float  # CPU used by processes outside the session, in cores (1.0: one core)
    machine_busy_share: float  # all CPUs' busy time over their capacity
    steal_share: float  # the hypervisor's steal over all CPU time
    cores: int
    top_name: str | None = None  # the busiest other process
    top_pid: int | None = None
    top_cores: float = 0.0

    @property
    def reasons(self) -> list[str]:
        found = []
        if self.other_cores >= OTHER_CORES_LIMIT and self.machine_busy_share >= BUSY_SHARE_LIMIT:
            top = (f"; the busiest, {self.top_name} (pid {self.top_pid}), "
                   f"{self.top_cores:.0%} of a core" if self.top_name else "")
            found.append(f"other processes used {self.other_cores:.2f} cores while the machine "
                         f"was {self.machine_busy_share:.0%} busy{top}")
        if self.steal_share >= STEAL_SHARE_LIMIT:
            found.append(f"the hypervisor stole {self.steal_share:.0%} of the CPU time")
        return found


@dataclass(frozen=True)
class GpuState:
    """One of the engine's cards over a measurement (NVML)."""

    index: str
    other_processes: tuple[str, ...] = ()  # "name (pid N)" of processes not the engine's
    throttle_reasons: tuple[str, ...] = ()  # NVML's names, idle left out
    sm_clock_share: float | None = None  # mean SM clock over its maximum
    temperature_c: float | None = None

    @property
    def reasons(self) -> list[str]:
        found = []
        if self.other_processes:
            found.append(f"GPU {self.index} was shared with {', '.join(self.other_processes)}")
        if self.throttle_reasons:
            found.append(f"GPU {self.index} throttled ({', '.join(self.throttle_reasons)}"
                         + (f", {self.temperature_c:.0f} C" if self.temperature_c else "") + ")")
        if self.sm_clock_share is not None and self.sm_clock_share < SM_CLOCK_SHARE_LIMIT:
            found.append(f"GPU {self.index} ran at {self.sm_clock_share:.0%} of its maximum "
                         "SM clock")
        return found


@dataclass(frozen=True)
class Disturbance:
    """Everything that was not the engine, over one measurement."""

    cpu: CpuDisturbance | None = None
    gpus: tuple[GpuState, ...] = field(default=())

    @property
    def reasons(self) -> list[str]:
        return [*(self.cpu.reasons if self.cpu else []),
                *(reason for gpu in self.gpus for reason in gpu.reasons)]

    @property
    def disturbed(self) -> bool:
        return bool(self.reasons)

    def failure(self) -> str:
        """One line for the test: what disturbed it, and the fix."""
        return (f"disturbed measurement: not the engine's numbers ({'; '.join(self.reasons)}); "
                "rerun on a quiet machine (stop the other load, or give the suite a machine "
                "of its own); nothing from this run was written as a baseline")
