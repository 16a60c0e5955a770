"""Which cores a CPU engine's API server and engine core get: those its compute threads are not
bound to."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_llmperf.engines.cpu_cores import bound_cores, control_cores, pin_control


@pytest.mark.parametrize(("spec", "cores"), [
    ("0", {0}),
    ("0-3", {0, 1, 2, 3}),
    ("0,2,4", {0, 2, 4}),
    ("0-1|4-5", {0, 1, 4, 5}),  # one list per tensor-parallel rank
    (" 1 ", {1}),
    ("auto", None),
    ("nobind", None),
    ("", None),
    ("0-", None),
])
def test_bound_cores_reads_vllms_bind_lists(spec, cores):
    assert bound_cores(spec) == cores


def test_control_cores_are_the_usable_cores_left_over():
    env = {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}
    assert control_cores(env, usable={0, 1, 2, 3}) == {2, 3}


def test_nothing_bound_or_nothing_left_leaves_the_affinity_alone():
    assert control_cores({}, usable={0, 1}) is None
    assert control_cores({"VLLM_CPU_OMP_THREADS_BIND": "auto"}, usable={0, 1}) is None
    assert control_cores({"VLLM_CPU_OMP_THREADS_BIND": "0-1"}, usable={0, 1}) is None


# A process with a thread that binds itself to the first core, as vLLM's OpenMP threads do.
BOUND_THREAD = """
import os, sys, threading, time
def compute():
    os.sched_setaffinity(0, {int(sys.argv[1])})
    time.sleep(60)
threading.Thread(target=compute, name="compute").start()
print("ready", flush=True)
time.sleep(60)
"""


def _affinities(pid: int) -> tuple[set[int], list[set[int]]]:
    """The main thread's cores, and each other thread's."""
    others = [set(os.sched_getaffinity(int(task.name)))
              for task in Path(f"/proc/{pid}/task").iterdir() if int(task.name) != pid]
    return set(os.sched_getaffinity(pid)), others


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two usable cores")
def test_pin_control_moves_the_free_threads_and_leaves_self_bound_ones_alone():
    usable = sorted(os.sched_getaffinity(0))
    compute, control = usable[0], set(usable[1:])
    proc = subprocess.Popen([sys.executable, "-c", BOUND_THREAD, str(compute)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 10
        while _affinities(proc.pid)[1] != [{compute}] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pin_control([proc.pid, 999_999_999], control) == 1  # an ended pid: passed over
        assert _affinities(proc.pid) == (control, [{compute}])
    finally:
        proc.kill()
        proc.wait()
