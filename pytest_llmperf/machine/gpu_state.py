"""The engine's cards over a measurement, through NVML: who else had a process on them, whether
they throttled, and how fast their SM clock ran against its maximum (machine/disturbance.py says
what makes a measurement DISTURBED). NVML's calls:
https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html

`nvml` is the `pynvml` module (nvidia-ml-py), or a stand-in with the same calls in tests; with no
NVML (a CPU machine) there is nothing to read and the result is empty.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from pytest_llmperf.machine.disturbance import GpuState

__all__ = ["GpuWatch"]

SAMPLE_S = 0.5
# A card below this utilization is between requests, and its clock is allowed to drop then.
BUSY_UTILIZATION = 50

# NVML's clocks-event (throttle) reason bits that say the card was held back, by name.
# (GPU idle and the application clocks setting are not disturbances.)
THROTTLE_REASONS = {
    0x4: "sw power cap",
    0x8: "hw slowdown",
    0x10: "sync boost",
    0x20: "sw thermal slowdown",
    0x40: "hw thermal slowdown",
    0x80: "hw power brake slowdown",
    0x100: "display clock setting",
}


def _load_nvml() -> Any | None:
    try:
        import pynvml  # nvidia-ml-py; absent on CPU-only installs

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver, no library, no card: nothing to watch
        return None
    return pynvml


class GpuWatch:
    """Watches the cards `indices` (NVML's indices) over a measurement (`running`); `states`
    then says what it saw, given `ours`, the pids of this session's processes."""

    def __init__(self, indices: Iterable[str], nvml: Any = None) -> None:
        self.indices = [str(i) for i in indices]
        self.nvml = nvml if nvml is not None or not self.indices else _load_nvml()
        self._clocks: dict[str, list[float]] = {i: [] for i in self.indices}
        self._reasons: dict[str, int] = dict.fromkeys(self.indices, 0)

    @contextmanager
    def running(self) -> Iterator[GpuWatch]:
        """Samples every SAMPLE_S in a thread while the block runs (a measurement)."""
        if self.nvml is None:
            yield self
            return
        stop = threading.Event()
        thread = threading.Thread(target=self._loop, args=(stop,), daemon=True,
                                  name="llmperf-gpu-watch")
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join(SAMPLE_S * 4)

    def _loop(self, stop: threading.Event) -> None:
        while not stop.wait(SAMPLE_S):
            self.sample()

    def sample(self) -> None:
        """Each card's throttle reasons, and its SM clock against its maximum while it is busy
        (a card between requests may idle its clock down: no disturbance)."""
        nvml = self.nvml
        for index in self.indices:
            handle = nvml.nvmlDeviceGetHandleByIndex(int(index))
            self._reasons[index] |= nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
            if nvml.nvmlDeviceGetUtilizationRates(handle).gpu < BUSY_UTILIZATION:
                continue
            clock = nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
            top = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)
            if top:
                self._clocks[index].append(clock / top)

    def states(self, ours: set[int]) -> tuple[GpuState, ...]:
        """Each card's state over the samples taken."""
        if self.nvml is None:
            return ()
        return tuple(self._state(index, ours) for index in self.indices)

    def _state(self, index: str, ours: set[int]) -> GpuState:
        nvml = self.nvml
        handle = nvml.nvmlDeviceGetHandleByIndex(int(index))
        others = [f"{_name(proc.pid)} (pid {proc.pid})"
                  for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle)
                  if proc.pid not in ours]
        reasons = tuple(name for bit, name in THROTTLE_REASONS.items()
                        if self._reasons[index] & bit)
        clocks = self._clocks[index]
        temperature = nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
        return GpuState(index, tuple(others), reasons,
                        sum(clocks) / len(clocks) if clocks else None, float(temperature))


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return "a process"
