"""Runner shapes (verdict/shapes.py): the GPU model and the GPUs the engine occupies, not the box;
the folder of each shape; a baseline whose noise was never measured here gates only large
changes (noise.unmeasured_here, gate.py)."""

from __future__ import annotations

import pytest

from pytest_llmperf.machine.hardware import from_override
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.verdict import gate, noise, shapes
from pytest_llmperf.verdict.baselines import Baseline, BaselineEntry

H200_1 = {"hardware_class": "h200", "device_name": "NVIDIA H200", "device_count": 1,
          "source": "nvml"}
H200_8 = {**H200_1, "device_count": 8}
TP8 = {"model": "m", "tensor_parallel_size": 8}
CPU = {"hardware_class": "cpu", "device_name": "AMD EPYC", "device_count": 0, "cpu_cores": 2,
       "cpu_signature": "AuthenticAMD family 26 model 2", "cpu_model": "AMD EPYC"}


def test_a_one_gpu_engine_is_the_same_shape_on_a_1x_and_an_8x_node():
    assert shapes.hardware_mismatch(H200_1, H200_8, {"model": "m"}, {"model": "m"}) == []
    assert shapes.machine_id(H200_1) == shapes.machine_id(H200_8)


def test_an_override_stands_for_its_class_sxm_card():
    override = {**from_override("h200:8").__dict__, "cpu_flags": []}
    assert shapes.gpu_model(override) == "NVIDIA H200"
    assert shapes.hardware_mismatch(H200_1, override) == []
    nvl = {**H200_1, "device_name": "NVIDIA H200 NVL"}
    assert shapes.hardware_mismatch(nvl, override) == [
        'device_name "NVIDIA H200 NVL" -> "NVIDIA H200"']


def test_the_engines_gpu_count_is_the_shape():
    assert shapes.hardware_mismatch(H200_8, H200_8, {"model": "m"}, TP8) == [
        "engine GPUs 1 -> 8"]
    dp2_pp2 = {"model": "m", "data_parallel_size": 2, "pipeline_parallel_size": 2}
    assert shapes.engine_gpus(dp2_pp2) == 4
    assert shapes.describe(H200_8, TP8) == "NVIDIA H200, engine on 8 GPUs"
    assert shapes.describe(H200_8, {"model": "m"}) == "NVIDIA H200, engine on 1 GPU"


def test_a_cpu_shape_is_its_model_cores_and_generation():
    assert shapes.describe(CPU, {}) == "AMD EPYC (AuthenticAMD family 26 model 2), 2 cores"
    assert shapes.hardware_mismatch(CPU, {**CPU, "cpu_cores": 4}) == ["cpu_cores 2 -> 4"]


@pytest.mark.parametrize(("hardware_class", "gpus", "folder"), [
    ("h200", 1, "h200"), ("h200", 8, "h200-8gpu"), ("a100-80gb", 4, "a100-80gb-4gpu"),
    ("cpu", 0, "cpu")])
def test_each_shape_has_its_folder_and_the_folder_its_class(hardware_class, gpus, folder):
    assert shapes.folder(hardware_class, gpus) == folder
    assert shapes.class_of_folder(folder) == hardware_class


def test_the_bootstrap_command_names_the_class_marker():
    assert shapes.bootstrap_command("a100-40gb", "suites/test_gpu_a100.py") == (
        "llmperf bootstrap-baselines --marker a100 suites/test_gpu_a100.py")


def entry(n: int, source: str | None = "prior") -> BaselineEntry:
    # TTFT p50 on a CPU: the prior 8%, a band of 24%.
    return BaselineEntry(value=0.0106, spread=0.0106 * 0.08, direction="lower", tolerance=0.02,
                         n=n, spread_source=source)


def judged(baseline_entry: BaselineEntry, hardware_class: str, now: float) -> gate.Verdict:
    table = noise.unmeasured_here(Baseline({"ttft_s.p50": baseline_entry}, path="b.toml",
                                           test_id="t"), hardware_class)
    return gate.check_metric("ttft_s.p50", Estimate(now, 0.0, 1), table.metrics["ttft_s.p50"])


def test_a_first_run_baseline_on_a_cpu_fails_only_large_changes_and_says_why():
    # The night four: +28.9% against a band of 3 x 8% (prior) failed an unchanged test.
    night_four = judged(entry(1), "cpu", 0.0137)
    assert night_four.status == gate.PASS
    assert night_four.message == (
        "ttft_s.p50 within the band: 13.7 ms vs baseline 10.6 ms (+29.2%, band +150.0% while "
        f"{noise.UNMEASURED_WHY})")
    assert judged(entry(1), "cpu", 0.0106 * 2.6).status == gate.REGRESSION


def test_measured_noise_keeps_the_narrow_band():
    assert judged(entry(3), "cpu", 0.0137).status == gate.REGRESSION  # repeats measured it
    assert judged(entry(1, "history"), "cpu", 0.0137).status == gate.REGRESSION
    # The GPU priors were measured on H200s: there one run with a prior is this kind's own.
    assert not noise.is_unmeasured(entry(1), "h200")
    assert noise.is_unmeasured(entry(1), "h100")
