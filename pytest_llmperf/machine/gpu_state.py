"""The engine's cards over a measurement, through NVML: sampled every SAMPLE_S while it runs
(machine/gpu_telemetry.py reads one sample), their settings and error counters read before and
after it, their XID errors caught as NVML events, and from all of it each card's state
(machine/disturbance.py says which of its facts make a measurement DISTURBED) and telemetry.
NVML's calls: https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html and
https://docs.nvidia.com/deploy/nvml-api/group__nvmlEvents.html

`nvml` is the `pynvml` module (nvidia-ml-py), or a stand-in with the same calls in tests; with no
NVML (a CPU machine) there is nothing to read and the result is empty.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from pytest_llmperf.machine.disturbance import DCGM_SLOWDOWNS, GpuState
from pytest_llmperf.machine.gpu_telemetry import (
    UNAVAILABLE,
    CardSettings,
    Sample,
    nvml_call,
    optional,
    read_sample,
    read_settings,
    summarize,
    uncorrected_ecc,
)

__all__ = ["GpuWatch"]

SAMPLE_S = 0.5
APPLICATIONS_CLOCKS_SETTING = 0x2  # nvmlClocksEventReasonApplicationsClocksSetting
# Reasons under which a power or thermal limiter, not the clock setting, holds the clock down.
LIMITERS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
NVML_ERROR_TIMEOUT = 10  # nvmlEventSetWait_v2: no event waiting


def _load_nvml() -> Any | None:
    try:
        import pynvml  # nvidia-ml-py; absent on CPU-only installs

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver, no library, no card: nothing to watch
        return None
    return pynvml


class XidEvents:
    """XID errors of the cards, as NVML events registered at the window's start and read while
    it runs. A card or driver that offers no events (NVMLError_NotSupported) is not watched: its
    `found` is None (docs/gpu-telemetry.md)."""

    def __init__(self, nvml: Any, handles: dict[str, Any]) -> None:
        self.nvml = nvml
        self.found: dict[str, list[int] | None] = dict.fromkeys(handles)
        self._set = nvml_call(nvml, "nvmlEventSetCreate")
        for index, handle in handles.items() if self._set is not None else ():
            if _registered(nvml, handle, self._set):
                self.found[index] = []

    def poll(self) -> None:
        """Every event waiting now; returns at once when there is none."""
        while self._set is not None:
            try:
                event = self.nvml.nvmlEventSetWait_v2(self._set, 0)
            except self.nvml.NVMLError as exc:
                if getattr(exc, "value", None) == NVML_ERROR_TIMEOUT:
                    return
                raise
            found = self.found.get(str(self.nvml.nvmlDeviceGetIndex(event.device)))
            if found is not None and event.eventType & XID_EVENT:
                found.append(int(event.eventData))

    def close(self) -> None:
        if self._set is not None:
            optional(self.nvml, self.nvml.nvmlEventSetFree, self._set)
            self._set = None


def _registered(nvml: Any, handle: Any, event_set: Any) -> bool:
    """Whether the card's XID events now reach `event_set`."""
    try:
        nvml.nvmlDeviceRegisterEvents(handle, XID_EVENT, event_set)
    except nvml.NVMLError as exc:
        if getattr(exc, "value", None) in UNAVAILABLE:
            return False
        raise
    return True


class GpuWatch:
    """Watches the cards `indices` (NVML's indices) over a measurement (`running`); `states`
    then says what it saw, given `ours`, the pids of this session's processes."""

    def __init__(self, indices: Iterable[str], nvml: Any = None) -> None:
        self.indices = [str(i) for i in indices]
        self.nvml = nvml if nvml is not None or not self.indices else _load_nvml()
        self._handles: dict[str, Any] = {}
        self._settings: dict[str, CardSettings] = {}
        self._samples: dict[str, list[Sample]] = {i: [] for i in self.indices}
        self._xids: XidEvents | None = None
        self._ecc_after: dict[str, int | None] = {}

    def start(self) -> None:
        """Settings and counters before the window, and the XID events from now on."""
        nvml = self.nvml
        self._handles = {i: nvml.nvmlDeviceGetHandleByIndex(int(i)) for i in self.indices}
        self._settings = {i: read_settings(nvml, h) for i, h in self._handles.items()}
        self._xids = XidEvents(nvml, self._handles)
        self.sample()

    def finish(self) -> None:
        """The last sample and the counters after the window."""
        try:
            self.sample()
            self._ecc_after = {i: uncorrected_ecc(self.nvml, h) for i, h in self._handles.items()}
            if self._xids is not None:
                self._xids.close()
        except self.nvml.NVMLError:  # a card lost at the end: the measurement still stands
            pass

    @contextmanager
    def running(self) -> Iterator[GpuWatch]:
        """Samples every SAMPLE_S in a thread while the block runs (a measurement)."""
        if self.nvml is None:
            yield self
            return
        self.start()
        stop = threading.Event()
        thread = threading.Thread(target=self._loop, args=(stop,), daemon=True,
                                  name="llmperf-gpu-watch")
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join(SAMPLE_S * 4)
            self.finish()

    def _loop(self, stop: threading.Event) -> None:
        while not stop.wait(SAMPLE_S):
            try:
                self.sample()
            except self.nvml.NVMLError:  # a card lost mid-run: keep what was read until then
                return

    def sample(self) -> None:
        """One reading of each card, and the XID events waiting."""
        for index, handle in self._handles.items():
            self._samples[index].append(read_sample(self.nvml, handle, time.perf_counter))
        if self._xids is not None:
            self._xids.poll()

    def states(self, ours: set[int],
               window: tuple[float, float] | None = None) -> tuple[GpuState, ...]:
        """Each card's state over the samples taken; its telemetry over `window` (perf_counter
        start and end of the measured requests), or over every sample."""
        if self.nvml is None:
            return ()
        return tuple(self._state(index, ours, window) for index in self.indices)

    def _state(self, index: str, ours: set[int],
               window: tuple[float, float] | None) -> GpuState:
        nvml = self.nvml
        handle = self._handles.get(index) or nvml.nvmlDeviceGetHandleByIndex(int(index))
        others = [f"{_name(proc.pid)} (pid {proc.pid})"
                  for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle)
                  if proc.pid not in ours]
        samples = self._samples[index]
        settings = self._settings.get(index, CardSettings())
        temperatures = [s.temperature_c for s in samples if s.temperature_c is not None]
        before, after = settings.uncorrected_ecc, self._ecc_after.get(index)
        return GpuState(
            index, tuple(others), slowdowns=_slowdowns(samples),
            temperature_c=max(temperatures, default=None),
            power_limit_w=settings.power_limit_w,
            default_power_limit_w=settings.default_power_limit_w,
            application_clocks=settings.application_clocks,
            **_held(samples, settings),
            xids=_xids(self._xids, index),
            new_uncorrected_ecc=None if before is None or after is None else after - before,
            telemetry=summarize(index, samples, settings, window) if samples else None,
        )


def _xids(events: XidEvents | None, index: str) -> tuple[int, ...] | None:
    found = events.found.get(index) if events else None
    return None if found is None else tuple(found)


def _slowdowns(samples: list[Sample]) -> tuple[tuple[str, float], ...]:
    """DCGM's slowdown reasons seen in any sample, with the share of samples each was in."""
    masks = [sample.reasons for sample in samples if sample.reasons is not None]
    return tuple((name, sum(bool(mask & bit) for mask in masks) / len(masks))
                 for bit, name in DCGM_SLOWDOWNS.items() if any(mask & bit for mask in masks))


def _held(samples: list[Sample], settings: CardSettings) -> dict[str, float | None]:
    """The busy samples in which the clock setting (reason 0x2), and no power or thermal
    limiter, held the SM clock under the card's default application clock (its maximum where
    that default cannot be read): locked clocks, which NVML has no call to read back."""
    defaults = {domain: default for domain, _, default in settings.application_clocks}
    below = defaults.get("SM", settings.max_sm_mhz)
    busy = [s for s in samples if s.busy and s.reasons is not None and s.sm_mhz is not None]
    if below is None or not busy:
        return {}
    held = [s.sm_mhz for s in busy if s.reasons & APPLICATIONS_CLOCKS_SETTING
            and not s.reasons & LIMITERS and s.sm_mhz < below]
    return {"held_share": len(held) / len(busy),
            "held_sm_mhz": sum(held) / len(held) if held else None, "held_below_mhz": below}


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return "a process"
