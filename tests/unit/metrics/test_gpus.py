"""An engine's GPUs and output tok/s per GPU, from recorded specs and fingerprints. Only GPU
machines produce a per-GPU throughput for real; this is its logic, on the CPU."""

from __future__ import annotations

import pytest

from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.metrics.gpus import (
    Parallelism,
    machine_gpus,
    output_per_gpu,
    parallelism,
)

H100_X8 = {"hardware_class": "h100", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 8}
CPU = {"hardware_class": "cpu", "device_count": 0, "cpu_cores": 2}


@pytest.mark.parametrize("tp, pp, dp", [(None, None, None), (8, None, None), (1, 1, 8),
                                        (2, 2, 2), (4, 2, None)])
def test_the_recorded_spec_counts_the_gpus_as_the_engine_does(tp, pp, dp):
    engine = Engine(model="m", tensor_parallel_size=tp, pipeline_parallel_size=pp,
                    data_parallel_size=dp)
    assert parallelism(engine.to_dict()).gpus == engine.gpus_needed


def test_defaults_left_out_of_the_spec_are_one():
    assert parallelism({"model": "m"}) == Parallelism(1, 1, 1)
    assert parallelism({"model": "m", "pipeline_parallel_size": 2, "data_parallel_size": 4}) \
        == Parallelism(1, 2, 4)


def test_the_machine_has_the_gpus_of_its_fingerprint_and_a_cpu_none():
    assert machine_gpus(H100_X8) == 8
    assert machine_gpus(CPU) == 0
    assert machine_gpus({}) == 0  # a result that recorded no machine


def test_eight_engines_of_tp1_and_one_of_tp8_compare_per_gpu():
    # The same 8 GPUs: DP=8 of TP=1 gives 8000 output tok/s in all, TP=8 gives 2000.
    assert output_per_gpu(8000.0, {"model": "m", "data_parallel_size": 8}, H100_X8) == 1000.0
    assert output_per_gpu(2000.0, {"model": "m", "tensor_parallel_size": 8}, H100_X8) == 250.0
    assert output_per_gpu(1200.0, {"model": "m"}, H100_X8) == 1200.0  # one GPU: unchanged
    assert output_per_gpu(900.0, {"model": "m", "tensor_parallel_size": 2,
                                  "pipeline_parallel_size": 3}, H100_X8) == 150.0


def test_no_per_gpu_throughput_on_a_cpu_or_without_a_throughput():
    assert output_per_gpu(40.0, {"model": "m"}, CPU) is None
    assert output_per_gpu(40.0, {"model": "m"}, {}) is None
    assert output_per_gpu(None, {"model": "m"}, H100_X8) is None
