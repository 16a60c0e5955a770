"""The clocks a run was measured at, for "what changed at this run": on NVIDIA cards the
application clocks and power limit an administrator sets (nvidia-smi's query fields:
https://docs.nvidia.com/deploy/nvidia-smi/index.html), on a CPU the frequency governor and the
highest frequency allowed (Linux cpufreq's sysfs files:
https://docs.kernel.org/admin-guide/pm/cpufreq.html). A card reset to other clocks, or a host
moved to the powersave governor, changes every number of the night; this says so.

Read once, when a run is recorded; every part that cannot be read is left out.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

__all__ = ["read_clocks"]

NVIDIA_SMI_TIMEOUT_S = 10
_GPU_FIELDS = ("clocks.applications.graphics", "clocks.applications.memory", "clocks.max.sm",
               "power.limit")
_CPUFREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq")


def read_clocks(gpu: bool) -> dict[str, Any]:
    return _gpu_clocks() if gpu else _cpu_clocks()


def _gpu_clocks() -> dict[str, Any]:
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(_GPU_FIELDS)}",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True,
                              timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return {}
    if done.returncode != 0 or not done.stdout.strip():
        return {}
    first = [cell.strip() for cell in done.stdout.splitlines()[0].split(",")]
    names = ("graphics_mhz", "memory_mhz", "max_sm_mhz", "power_limit_w")
    return {name: cell for name, cell in zip(names, first) if cell and "N/A" not in cell}


def _cpu_clocks() -> dict[str, Any]:
    out = {}
    for name, file in (("governor", "scaling_governor"), ("max_khz", "scaling_max_freq")):
        try:
            out[name] = (_CPUFREQ / file).read_text().strip()
        except OSError:
            continue
    return out
