"""A runner's shape: the hardware a baseline's numbers apply to, and the folder that holds them.

On a GPU that is the GPU model and the number of GPUs the engine occupies (TP x PP x DP, what it
leases: engines/leases.py), not the number in the box: a one-GPU engine measures the same on a
1x and an 8x H200 node, whose seven other cards sit idle, so one table serves both, and an
engine on 8 GPUs has a table of its own. On a CPU it is the CPU model, its usable cores and its
generation (a VM may call Zen 4 and Zen 5 both "AMD EPYC"). docs/baselines.md, "Runner shapes".

Folders: `baselines/<class>/` for an engine on one GPU (and for the CPU), which every file
written before shapes existed already is, and `baselines/<class>-<N>gpu/` for an engine on N > 1
GPUs. Pure: no I/O, no pytest.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from pytest_llmperf.machine.hardware import GPU_CLASS_NAMES, is_gpu_fingerprint
from pytest_llmperf.metrics.gpus import parallelism

__all__ = ["CPU_HARDWARE_KEYS", "GPU_HARDWARE_KEYS", "bootstrap_command", "class_of_folder",
           "describe", "engine_gpus", "folder", "gpu_model", "hardware_mismatch", "machine_id",
           "marker_of"]

# What must match on a GPU besides the engine's GPU count: the class (it tells the A100's two
# memory sizes apart) and the model's name (an H100 PCIe is not an H100 SXM; gpu_model).
GPU_HARDWARE_KEYS = ("hardware_class", "device_name")
# On a CPU: as before shapes existed (device_count is 0 there), so machine_id's folder and the
# results store's series of a CPU machine stay what they were.
CPU_HARDWARE_KEYS = ("device_name", "device_count", "cpu_cores", "cpu_signature")
# The marker that selects a hardware class's tests (plugin/markers.py): the A100 sizes share one.
_MARKERS = {"a100-80gb": "a100", "a100-40gb": "a100", "gpu": "gpus"}
_SHAPED = re.compile(r"^(?P<cls>.+)-(?P<gpus>[0-9]+)gpu$")


def engine_gpus(engine: Mapping[str, Any] | None) -> int:
    """GPUs an engine (its recorded spec, Engine.to_dict) occupies: TP x PP x DP."""
    return parallelism(engine or {}).gpus


def gpu_model(fingerprint: Mapping[str, Any]) -> str | None:
    """The GPU model as baselines compare it: the device's name; an override knows only the
    class, and stands for that class's SXM card (GPU_CLASS_NAMES)."""
    hardware_class = fingerprint.get("hardware_class")
    if fingerprint.get("source") == "override":
        return GPU_CLASS_NAMES.get(hardware_class, fingerprint.get("device_name"))
    return fingerprint.get("device_name")


def _facts(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    if is_gpu_fingerprint(fingerprint):
        return {"hardware_class": fingerprint.get("hardware_class"),
                "device_name": gpu_model(fingerprint)}
    return {key: fingerprint.get(key) for key in CPU_HARDWARE_KEYS}


def folder(hardware_class: str, gpus: int) -> str:
    """The folder under baselines/ of an engine on `gpus` GPUs of this class."""
    return f"{hardware_class}-{gpus}gpu" if hardware_class != "cpu" and gpus > 1 else hardware_class


def class_of_folder(name: str) -> str:
    """The hardware class a baselines/ folder is for ("h200-8gpu" -> "h200")."""
    shaped = _SHAPED.match(name)
    return shaped.group("cls") if shaped else name


def marker_of(hardware_class: str) -> str:
    return _MARKERS.get(hardware_class, hardware_class)


def describe(fingerprint: Mapping[str, Any], engine: Mapping[str, Any] | None) -> str:
    """"NVIDIA H200, engine on 8 GPUs"; "AMD EPYC (family 26 model 2), 2 cores" on a CPU."""
    if is_gpu_fingerprint(fingerprint):
        gpus = engine_gpus(engine)
        return f"{gpu_model(fingerprint)}, engine on {gpus} GPU{'s' if gpus > 1 else ''}"
    cores = fingerprint.get("cpu_cores")
    signature = fingerprint.get("cpu_signature")
    name = fingerprint.get("cpu_model") or fingerprint.get("device_name") or "cpu"
    parts = [name + (f" ({signature})" if signature else ""), cores and f"{cores} cores"]
    return ", ".join(str(part) for part in parts if part)


def bootstrap_command(hardware_class: str, suite: str) -> str:
    """The command that makes a runner shape's first baselines for a suite (bootstrap.py)."""
    return f"llmperf bootstrap-baselines --marker {marker_of(hardware_class)} {suite}"


def machine_id(fingerprint: Mapping[str, Any]) -> str:
    """A short name for this machine's hardware as the gate compares it ("cpu-1a2b3c4d5e"): the
    folder of its machine-local baselines, so two machines sharing a checkout never mix, and the
    results store's hardware family (history/identity.py). On a GPU it leaves out the box's GPU
    count: the engine's own is in its spec, which the series is keyed by too."""
    if is_gpu_fingerprint(fingerprint):
        values = [fingerprint.get("hardware_class"), gpu_model(fingerprint)]
    else:
        values = [fingerprint.get(key) for key in CPU_HARDWARE_KEYS]
    digest = hashlib.sha1(json.dumps(values, default=str).encode()).hexdigest()[:10]
    return f"{fingerprint.get('hardware_class', 'unknown')}-{digest}"


def hardware_mismatch(recorded: Any, fingerprint: Mapping[str, Any],
                      recorded_engine: Any = None,
                      engine: Mapping[str, Any] | None = None) -> list[str]:
    """"name old -> new" for each hardware fact that differs between a baseline's recorded
    fingerprint (and engine) and this machine's (and this test's engine); none when they match
    or nothing was recorded."""
    if not isinstance(recorded, dict):
        return []
    then, now = _facts(recorded), _facts(fingerprint)
    if is_gpu_fingerprint(fingerprint):
        then["engine GPUs"] = engine_gpus(recorded_engine if isinstance(recorded_engine, dict)
                                          else None)
        now["engine GPUs"] = engine_gpus(engine)
    return [f"{key} {json.dumps(then[key], default=str)} -> {json.dumps(now[key], default=str)}"
            for key in now if then.get(key) != now[key]]
