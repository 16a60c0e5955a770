"""The watch that ends a CPU engine's measurement once a neighbour has decided it: the rule on
snapshots of a chosen machine, then the watch itself beside a real busy loop."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from pytest_llmperf.machine import neighbours
from pytest_llmperf.machine.neighbour_watch import NeighbourWatch, stop_reason
from pytest_llmperf.machine.neighbours import Proc, Snapshot
from tests.busy_neighbour import busy_neighbour

ROOT = 100  # pytest, in these snapshots
ENGINE = os.getpid()  # the "engine": a real process, so that its cores are real
CORES = sorted(os.sched_getaffinity(0))
STRESS = 4_194_400  # above Linux's largest pid: no real process to read cores from


def snapshot(wall_s: float, stress_s: float = 0.0) -> Snapshot:
    """pytest, its engine (this process) and a neighbour "stress" that has used `stress_s`."""
    procs = {ROOT: Proc(ROOT, 1, "pytest", 0.0), ENGINE: Proc(ENGINE, ROOT, "python", wall_s),
             STRESS: Proc(STRESS, 1, "stress", stress_s)}
    return Snapshot(wall_s, procs, 0, max(1, int(wall_s * 200)), 0, 2)


def test_a_neighbour_still_there_after_the_first_seconds_ends_the_measurement():
    first, last, now = snapshot(0.0), snapshot(3.0, 2.7), snapshot(6.0, 5.6)
    cores = f"core {CORES[0]}" if len(CORES) == 1 else f"cores {CORES[0]}-{CORES[-1]}"
    assert stop_reason(first, last, now, ROOT, ENGINE) == (
        f"other processes used 0.93 cores on the CPU engine's cores ({cores}), where it runs at "
        f"nice 19; the busiest, stress (pid {STRESS}), 93% of a core, over the first 6 s of the "
        "measurement")


def test_too_early_a_neighbour_gone_or_too_small_ends_nothing():
    first = snapshot(0.0)
    assert stop_reason(first, first, snapshot(4.0, 4.0), ROOT, ENGINE) is None  # under MIN_S
    # It made the measurement so far DISTURBED, and left: the whole is judged at its end.
    assert stop_reason(first, snapshot(3.0, 3.0), snapshot(6.0, 3.0), ROOT, ENGINE) is None
    # 0.05 cores so far: under OTHER_CORES_LIMIT.
    assert stop_reason(first, snapshot(3.0, 0.15), snapshot(6.0, 0.3), ROOT, ENGINE) is None
    # The engine computes elsewhere (a GPU's, an endpoint's): this rule does not apply.
    assert stop_reason(first, snapshot(3.0, 3.0), snapshot(6.0, 6.0), ROOT, None) is None


def test_a_real_busy_loop_beside_a_real_engine_is_seen_within_seconds():
    """An "engine" (a sleeping child of this session, on one core) and a busy loop started
    outside the session, as a shell's job is: the watch calls back once, naming the loop."""
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    called: list[str] = []
    done = threading.Event()
    try:
        os.sched_setaffinity(engine.pid, {CORES[0]})
        first = neighbours.take_snapshot()
        root = neighbours.session_root("PYTEST_XDIST_WORKER" in os.environ)
        watch = NeighbourWatch(first, root, engine.pid,
                               lambda reason: (called.append(reason), done.set()),
                               sample_s=0.2, min_s=1.0)
        with busy_neighbour() as neighbour, watch.running():
            began = time.monotonic()
            done.wait(8.0)
            took_s = time.monotonic() - began
    finally:
        engine.kill()
        engine.wait()
    assert len(called) == 1, called
    assert "on the CPU engine's cores" in called[0] and f"(pid {neighbour})" in called[0]
    assert took_s < 8.0  # the rule itself waits for min_s: the tests above
    assert watch.reason == called[0]
