"""Which cores a CPU engine's API server and engine core get: those its compute threads are not
bound to."""

import pytest

from pytest_llmperf.engines.cpu_cores import bound_cores, control_cores


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
