"""The disturbance check's pure parts: who is ours on a snapshot, what others used, the rule, and
the engine's cards read through an NVML stand-in (this machine has no GPU; the calls are NVML's,
as nvidia-ml-py names them). The H200's readings (tests/unit/data/h200_gpu_watch.json) are
replayed through it: SW power cap under load is no disturbance, DCGM's slowdowns, a second process
and a lowered power limit are."""

from __future__ import annotations

import pytest

from pytest_llmperf.machine import neighbours
from pytest_llmperf.machine.disturbance import CpuDisturbance, Disturbance, GpuState
from pytest_llmperf.machine.gpu_state import GpuWatch
from pytest_llmperf.machine.neighbours import Proc, Snapshot, cpu_disturbance
from tests.busy_neighbour import busy_neighbour
from tests.nvml_stand_in import H200, Card, NvmlStandIn, h200_card

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
    gpu = GpuState("0", ("python (pid 77)",), (("hw thermal slowdown", 0.25),), 91.0)
    found = Disturbance(cpu, (gpu,))
    assert found.disturbed
    assert found.failure() == (
        "disturbed measurement: not the engine's numbers (other processes used 1.00 cores while "
        "the machine was 100% busy; the busiest, stress (pid 900), 100% of a core; GPU 0 was "
        "shared with python (pid 77); GPU 0 throttled: hw thermal slowdown in 25% of samples "
        "(up to 91 C)); rerun on a quiet machine (stop the other load, or give the suite a "
        "machine of its own); nothing from this run was written as a baseline")
    assert not Disturbance(CpuDisturbance(0.0, 0.3, 0.0, 2)).disturbed
    assert not Disturbance(CpuDisturbance(1.0, 1.0, 0.0, 2), (gpu,), judged=False).disturbed


# ---------------------------------------------------------------- the NVML stand-in

NO_SUCH_PID = 4_999_999  # above Linux's largest pid_max (2**22): /proc never has it
OURS = {100, 101}


def watch_over(nvml: NvmlStandIn, samples: int = 4, between=None) -> list[GpuState]:
    """The watch's states after `samples` readings (start, the loop's, finish); `between(n)`
    changes the cards before the n-th loop reading."""
    watch = GpuWatch([str(index) for index in nvml.cards], nvml=nvml)
    watch.start()
    for n in range(samples - 2):
        if between:
            between(n)
        watch.sample()
    watch.finish()
    return list(watch.states(OURS))


H200_MEASUREMENTS = [pytest.param(m, id=m["key"]) for m in H200["measurements"]]


def test_the_h200_data_is_what_the_old_rule_called_disturbed():
    # Every recorded measurement was DISTURBED by SW power cap alone (one also by its SM clock).
    assert [m["disturbance"]["reasons"][0] for m in H200["measurements"]] == [
        f"GPU 0 throttled (sw power cap, {m['temperature_c']} C)" for m in H200["measurements"]]
    assert H200["fingerprint"]["device_name"] == "NVIDIA H200"


@pytest.mark.parametrize("measurement", H200_MEASUREMENTS)
def test_the_h200_under_sw_power_cap_is_not_disturbed(measurement):
    [state] = watch_over(NvmlStandIn({0: h200_card(measurement)}))
    assert state.reasons == []
    assert not Disturbance(None, (state,)).disturbed
    # SW power cap and the lower SM clock stay on record as telemetry.
    assert dict(state.telemetry.reason_shares) == {"sw power cap": 1.0}
    share = measurement["disturbance"]["gpus"][0]["sm_clock_share"]
    assert state.telemetry.sm_clock_share == pytest.approx(share, abs=1e-3)


@pytest.mark.parametrize("measurement", H200_MEASUREMENTS)
def test_the_h200_with_hw_slowdown_is_disturbed_naming_it(measurement):
    card = h200_card(measurement)

    def slow_down(n):  # HW slowdown in 1 of the 4 samples
        card.reasons = 0x4 | 0x8 if n == 0 else 0x4

    [state] = watch_over(NvmlStandIn({0: card}), between=slow_down)
    assert state.reasons == [
        f"GPU 0 throttled: hw slowdown in 25% of samples (up to {measurement['temperature_c']} C)"]


def test_the_h200_shared_with_a_second_process_is_disturbed_naming_it():
    card = h200_card(H200["measurements"][0])
    card.pids = (101, NO_SUCH_PID)
    [state] = watch_over(NvmlStandIn({0: card}))
    assert state.reasons == [f"GPU 0 was shared with a process (pid {NO_SUCH_PID})"]


def test_the_h200_under_a_lowered_power_limit_is_disturbed_naming_both_wattages():
    card = h200_card(H200["measurements"][0])
    card.power_limit_w = 450.0
    [state] = watch_over(NvmlStandIn({0: card}))
    assert state.reasons == [
        "GPU 0 ran under a power limit of 450 W, below its default 700 W (nvidia-smi -pl 700 "
        "restores it)"]
    assert Disturbance(None, (state,)).failure() == (
        "disturbed measurement: not the engine's numbers (GPU 0 ran under a power limit of 450 "
        "W, below its default 700 W (nvidia-smi -pl 700 restores it)); rerun on a quiet machine "
        "(stop the other load, or give the suite a machine of its own); nothing from this run "
        "was written as a baseline")


def test_dcgms_four_slowdowns_disturb_and_the_other_reasons_do_not():
    quiet = {0x1: "gpu idle", 0x2: "applications clocks setting", 0x4: "sw power cap",
             0x10: "sync boost", 0x100: "display clock setting"}
    for bit in quiet:
        [state] = watch_over(NvmlStandIn({0: Card(reasons=bit)}))
        assert state.reasons == [], quiet[bit]
    card = Card(reasons=0x8 | 0x20 | 0x40 | 0x80, temperature_c=91.0)
    [state] = watch_over(NvmlStandIn({0: card}))
    assert state.reasons == [
        "GPU 0 throttled: hw slowdown in 100%, sw thermal slowdown in 100%, hw thermal slowdown "
        "in 100%, hw power brake slowdown in 100% of samples (up to 91 C)"]


def test_application_clocks_below_their_defaults_disturb_naming_both():
    card = Card(application_clocks={1: (1410.0, 1980.0), 2: (2619.0, 2619.0)})
    [state] = watch_over(NvmlStandIn({0: card}))
    assert state.reasons == [
        "GPU 0's application clocks were set below their defaults (SM 1410 MHz, default 1980 "
        "MHz; nvidia-smi -rac restores them)"]


def test_a_clock_setting_holding_the_busy_card_under_its_default_disturbs():
    # Locked clocks (nvidia-smi -lgc): reason 0x2 with the SM clock under the default
    # application clock, no power or thermal limiter at work.
    [state] = watch_over(NvmlStandIn({0: Card(sm_mhz=1200.0, reasons=0x2)}))
    assert state.reasons == [
        "GPU 0's clocks were held at 1200 MHz by a clock setting in 100% of busy samples, below "
        "its default 1980 MHz (nvidia-smi -rgc resets locked clocks)"]
    # The same clock under SW power cap is the card's own power management.
    [capped] = watch_over(NvmlStandIn({0: Card(sm_mhz=1200.0, reasons=0x2 | 0x4)}))
    assert capped.reasons == []


def test_an_xid_and_new_ecc_errors_during_the_window_disturb():
    card = Card()

    def fail(n):
        if n == 1:
            card.xids.append(79)
            card.uncorrected_ecc += 2

    [state] = watch_over(NvmlStandIn({0: card}), between=fail)
    assert state.reasons == [
        "GPU 0 reported XID 79 during the measurement",
        "GPU 0 counted 2 new uncorrected ECC error(s) during the measurement"]


def test_a_card_without_events_ecc_or_power_limits_leaves_those_parts_out():
    nvml = NvmlStandIn({0: Card(power_limit_w=450.0)}, unsupported=(
        "nvmlEventSetCreate", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetEnforcedPowerLimit",
        "nvmlDeviceGetApplicationsClock", "nvmlDeviceGetTotalEnergyConsumption"))
    [state] = watch_over(nvml)
    assert state.reasons == []  # the lowered limit could not be read: not judged
    assert (state.xids, state.new_uncorrected_ecc, state.power_limit_w) == (None, None, None)
    assert state.application_clocks == () and state.telemetry.energy_j is None


def test_a_quiet_card_between_requests_is_not_disturbed():
    [state] = watch_over(NvmlStandIn({0: Card(sm_mhz=300.0, utilization=10, reasons=0x1)}))
    assert state.reasons == [] and state.telemetry.sm_clock_share is None  # idle: not counted


def test_without_nvml_there_is_nothing_to_watch():
    watch = GpuWatch([])
    with watch.running():
        pass
    assert watch.states(set()) == ()


def test_a_neighbour_on_the_cpu_engines_cores_disturbs_however_idle_the_machine_reads():
    """The engine's compute threads wait for each other at every step: a neighbour on one of its
    cores stalls it while the machine reads barely busy (55% here), so the busy share is not
    asked. Measured on a 2-core Xeon: TPOT 2.8 -> 662 ms beside one busy loop at nice 0."""
    on = CpuDisturbance(0.98, 0.55, 0.0, 2, "bash", 900, 0.98, engine_cores=(0, 1),
                        on_engine_cores=0.98)
    assert on.reasons == [
        "other processes used 0.98 cores on the CPU engine's cores (cores 0-1), where it runs "
        "at nice 19; the busiest, bash (pid 900), 98% of a core"]
    off = CpuDisturbance(0.98, 0.55, 0.0, 4, "bash", 900, 0.98, engine_cores=(0,),
                         on_engine_cores=0.0)
    assert off.reasons == []  # pinned to the other cores: it takes nothing from the engine
    quiet = CpuDisturbance(0.05, 0.99, 0.0, 2, "sshd", 7, 0.05, engine_cores=(0, 1),
                           on_engine_cores=0.05)
    assert quiet.reasons == []
    assert CpuDisturbance.from_dict(on.to_dict()) == on
    old_file = {key: value for key, value in on.to_dict().items()
                if key not in ("engine_cores", "on_engine_cores")}
    assert CpuDisturbance.from_dict(old_file).engine_cores == ()  # judged as it was then


def test_a_real_busy_neighbour_allowed_on_a_real_engines_core_is_counted_there():
    """Real processes: an "engine" (a sleeping child of this session, on core 0 only) and a busy
    loop started outside the session (its own session, like a shell's job), first allowed on
    every core, then kept off core 0 where the machine has another."""
    import os
    import subprocess
    import sys
    import time

    usable = sorted(os.sched_getaffinity(0))
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        os.sched_setaffinity(engine.pid, {usable[0]})
        with busy_neighbour(10.0):
            before = neighbours.take_snapshot()
            time.sleep(0.8)
            after = neighbours.take_snapshot()
        root = neighbours.session_root(False)
        found = cpu_disturbance(before, after, root, engine.pid)
        assert found.engine_cores == (usable[0],)
        assert found.on_engine_cores >= 0.5, found
        assert any("on the CPU engine's cores" in reason for reason in found.reasons)
    finally:
        engine.kill()
        engine.wait()


def test_a_process_of_several_busy_threads_is_counted_whole():
    """/proc/[pid]/schedstat counts a process's main thread alone: a neighbour whose threads do
    the work (BLAS, a compiler, another engine) would read nearly idle. Two threads hashing for
    a second each (hashlib lets go of the interpreter's lock), then idle, read as their sum."""
    import subprocess
    import sys

    code = ("import hashlib, sys, threading, time\n"
            "data = b'x' * 10_000_000\n"
            "def spin():\n"
            "    end = time.process_time() + 2.0\n"  # the process's CPU: 1 s a thread
            "    while time.process_time() < end: hashlib.sha256(data).digest()\n"
            "threads = [threading.Thread(target=spin) for _ in range(2)]\n"
            "[t.start() for t in threads]; [t.join() for t in threads]\n"
            "print('done', flush=True); time.sleep(30)\n")
    worker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline() == "done\n"
        proc = neighbours.take_snapshot().procs[worker.pid]
        assert proc.cpu_s >= 1.9, proc  # both threads' time, not the idle main thread's
        assert proc.start_ticks > 0
    finally:
        worker.kill()
        worker.wait()


def test_a_pid_reused_between_snapshots_is_another_process_whatever_its_name():
    before = snapshot(10.0, 0.5, stress=50.0)
    after = snapshot(20.0, 0.5, stress=51.0)
    same = cpu_disturbance(before, after, ROOT)
    assert same.other_cores == pytest.approx(0.1)  # 1 s of CPU over 10 s
    # The same pid, started anew (another start time): all of its CPU time is in the window.
    reused = Snapshot(after.wall_s, {**after.procs, 900: Proc(900, 1, "stress", 51.0, 7)},
                      after.busy_ticks, after.total_ticks, after.steal_ticks, 2)
    before_started = Snapshot(before.wall_s, {**before.procs, 900: Proc(900, 1, "stress", 50.0, 3)},
                              before.busy_ticks, before.total_ticks, before.steal_ticks, 2)
    assert cpu_disturbance(before_started, reused, ROOT).other_cores == pytest.approx(5.1)
    # Retitled (pytest-xdist's workers, vLLM's processes), started once: the same process.
    retitled = Snapshot(after.wall_s, {**after.procs, 900: Proc(900, 1, "[stress busy]", 51.0, 3)},
                        after.busy_ticks, after.total_ticks, after.steal_ticks, 2)
    assert cpu_disturbance(before_started, retitled, ROOT).other_cores == pytest.approx(0.1)
