"""The disturbance check's pure parts: who is ours on a snapshot, what others used, the rule, and
the engine's cards read through an NVML stand-in (this machine has no GPU; the calls are NVML's)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_llmperf.machine import neighbours
from pytest_llmperf.machine.neighbours import Proc, Snapshot, cpu_disturbance
from pytest_llmperf.machine.gpu_state import GpuWatch
from pytest_llmperf.machine.disturbance import CpuDisturbance, Disturbance, GpuState

TICKS = neighbours._CLOCK_TICKS  # noqa: SLF001 - the unit the snapshots count in
ROOT = 100  # pytest
START_S = 10.0  # the first snapshot's time: the machine's counters start there


def snapshot(wall_s: float, busy_share: float, steal_share: float = 0.0,
             **cpu_s: float) -> Snapshot:
    """A machine of 2 cores at `wall_s`: pytest (100), its engine (101) and worker (102), a
    kernel thread, and a neighbour (900, "stress"), each having used `cpu_s[name]` so far; the
    machine busy `busy_share` of the time since START_S."""
    procs = {
        100: Proc(100, 1, "pytest", cpu_s.get("pytest", 0.0)),
        101: Proc(101, 100, "python", cpu_s.get("engine", 0.0)),
        102: Proc(102, 101, "VLLM::Worker", cpu_s.get("worker", 0.0)),
        3: Proc(3, 2, "ksoftirqd/0", cpu_s.get("kernel", 0.0)),
        900: Proc(900, 1, "stress", cpu_s.get("stress", 0.0)),
    }
    total = int((wall_s - START_S) * 2 * TICKS)  # since the first snapshot
    return Snapshot(wall_s, procs, int(total * busy_share), total, int(total * steal_share), 2)


def test_a_neighbour_on_a_busy_machine_is_named_with_its_share():
    before = snapshot(10.0, 0.5)
    after = snapshot(20.0, 0.95, engine=2.0, worker=1.0, kernel=3.0, stress=9.0, pytest=2.0)
    found = cpu_disturbance(before, after, ROOT)
    # Engine, worker and pytest are ours; the kernel thread does our I/O: only "stress" counts.
    assert found.other_cores == pytest.approx(0.9)
    assert (found.top_name, found.top_pid) == ("stress", 900)
    assert found.reasons == [
        "other processes used 0.90 cores while the machine was 95% busy; the busiest, stress "
        "(pid 900), 90% of a core"]


def test_a_neighbour_on_idle_cores_takes_nothing_and_a_short_window_says_nothing():
    idle = cpu_disturbance(snapshot(10.0, 0.0), snapshot(20.0, 0.6, stress=9.0), ROOT)
    assert idle.other_cores == pytest.approx(0.9) and idle.reasons == []
    assert cpu_disturbance(snapshot(10.0, 0.0), snapshot(10.4, 1.0, stress=1.0), ROOT) is None
    assert cpu_disturbance(None, snapshot(20.0, 1.0), ROOT) is None


def test_steal_alone_disturbs():
    stolen = cpu_disturbance(snapshot(10.0, 0.0, 0.0), snapshot(20.0, 0.5, 0.2), ROOT)
    assert stolen.reasons == ["the hypervisor stole 20% of the CPU time"]


def test_a_real_snapshot_of_this_machine_finds_this_process():
    snap = neighbours.take_snapshot()
    assert snap is not None and snap.cores >= 1
    assert neighbours.session_root(False) in snap.procs


def test_the_verdict_line_names_every_reason_and_the_fix():
    cpu = CpuDisturbance(1.0, 1.0, 0.0, 2, "stress", 900, 1.0)
    gpu = GpuState("0", ("python (pid 77)",), ("hw thermal slowdown",), 0.5, 91.0)
    found = Disturbance(cpu, (gpu,))
    assert found.disturbed
    assert found.failure() == (
        "disturbed measurement: not the engine's numbers (other processes used 1.00 cores while "
        "the machine was 100% busy; the busiest, stress (pid 900), 100% of a core; GPU 0 was "
        "shared with python (pid 77); GPU 0 throttled (hw thermal slowdown, 91 C); GPU 0 ran at "
        "50% of its maximum SM clock); rerun on a quiet machine (stop the other load, or give "
        "the suite a machine of its own); nothing from this run was written as a baseline")
    assert not Disturbance(CpuDisturbance(0.0, 0.3, 0.0, 2)).disturbed


class FakeNvml:
    """NVML's calls GpuWatch makes, answering for one card."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, clock: int, utilization: int, reasons: int, pids: list[int]) -> None:
        self.clock, self.utilization, self.reasons, self.pids = clock, utilization, reasons, pids

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802 - NVML's names
        return index

    def nvmlDeviceGetClockInfo(self, handle, kind):  # noqa: N802
        return self.clock

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):  # noqa: N802
        return 1980

    def nvmlDeviceGetUtilizationRates(self, handle):  # noqa: N802
        return SimpleNamespace(gpu=self.utilization)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):  # noqa: N802
        return self.reasons

    def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802
        return [SimpleNamespace(pid=pid) for pid in self.pids]

    def nvmlDeviceGetTemperature(self, handle, sensor):  # noqa: N802
        return 88


def test_a_card_shared_throttled_and_slow_clocked_is_disturbed():
    watch = GpuWatch(["0"], nvml=FakeNvml(clock=990, utilization=95, reasons=0x40 | 0x1,
                                         pids=[101, 4242]))
    watch.sample()
    [state] = watch.states(ours={100, 101})
    assert state.other_processes == ("a process (pid 4242)",)
    assert state.throttle_reasons == ("hw thermal slowdown",)  # 0x1 (idle) is no disturbance
    assert state.sm_clock_share == pytest.approx(0.5)
    assert len(state.reasons) == 3


def test_a_quiet_card_between_requests_is_not_disturbed():
    watch = GpuWatch(["0"], nvml=FakeNvml(clock=300, utilization=10, reasons=0x1, pids=[101]))
    watch.sample()  # idle clocks while under-used: not counted
    [state] = watch.states(ours={101})
    assert state.reasons == [] and state.sm_clock_share is None


def test_without_nvml_there_is_nothing_to_watch():
    watch = GpuWatch([])
    with watch.running():
        pass
    assert watch.states(set()) == ()
