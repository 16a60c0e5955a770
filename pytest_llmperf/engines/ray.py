"""Ray placement: the cluster an engine with `distributed_executor_backend="ray"` joins.

vLLM's Ray executor connects to the cluster RAY_ADDRESS names (`ray.init(address=...)` in
vllm/v1/executor/ray_utils.py, initialize_ray_cluster); without one it would start a private Ray
inside the engine, which nothing here could see or stop. So the session names one for it:
RAY_ADDRESS's own when the environment sets it (a multi-node cluster someone started: joined,
never stopped), else a local head this module starts on the first Ray engine
(`ray start --head --block` in its own process group, like an engine: engines/process.py) and
stops with the session's engines (`RayCluster.close`).

The GPUs a Ray engine may use are the cluster's, so its hardware markers and `gpus(n)` are
judged against `ray.cluster_resources()` (`cluster_hardware`), asked of the cluster in a child
process with the engine's interpreter; a local head has this machine's GPUs and is not asked.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from pytest_llmperf.engines.errors import EngineStartError
from pytest_llmperf.engines.process import log_tail, spawn, stop_group
from pytest_llmperf.engines.server import free_port
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.machine.hardware import Hardware, classify_gpu

__all__ = ["RAY_ADDRESS", "RayCluster", "alive_nodes", "cluster_hardware", "cluster_resources",
           "gpus_in"]

RAY_ADDRESS = "RAY_ADDRESS"
HEAD_CPUS = 2
# A head on a 2-core machine is up in ~6 s (measured: `ray start --head`, ray 2.60.0).
HEAD_START_TIMEOUT_S = 120.0
HEAD_POLL_S = 0.25
HEAD_STARTED = "Ray runtime started"
ASK_TIMEOUT_S = 60.0
# `ray start --block` drains its node for up to 30 s on SIGTERM and then fails to reach its own
# GCS (measured with ray 2.60.0: 35 s, ending in "RpcError: Timed out while waiting for GCS");
# the head holds nothing once the engines are gone, so its group is killed at once.
_KILL_AT_ONCE = 0.0

# Run with `python -c`; argv[1] is the address. The last line printed is the answer.
_ASK = """\
import json, sys
import ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
print(json.dumps(ray.cluster_resources()))
"""

# The same, for the addresses of the cluster's alive nodes (client workers go one per node).
_ASK_NODES = """\
import json, sys
import ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
print(json.dumps([n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive")]))
"""


def gpus_in(resources: Mapping[str, float]) -> int:
    """Whole GPUs in a `ray.cluster_resources()` answer."""
    return int(math.floor(float(resources.get("GPU", 0) or 0)))


def _accelerator_name(resources: Mapping[str, float]) -> str | None:
    """"NVIDIA H100" from Ray's `accelerator_type:H100` resource, where all nodes have one type
    (Ray's names: ray/util/accelerators/accelerators.py, "A100-80G" for the 80 GB A100)."""
    types = sorted(key.partition(":")[2] for key in resources
                   if key.startswith("accelerator_type:"))
    if len(types) != 1:
        return None
    return "NVIDIA " + types[0].replace("-80G", " 80GB").replace("-40G", " 40GB")


def cluster_hardware(local: Hardware, resources: Mapping[str, float], address: str) -> Hardware:
    """What markers judge a Ray engine by: the cluster's GPU count and, where its nodes name one
    accelerator type, that class; else this machine's class."""
    gpus = gpus_in(resources)
    name = _accelerator_name(resources)
    hardware_class = classify_gpu(name, None) if name and gpus else local.hardware_class
    shown = name or local.device_name
    return dataclasses.replace(local, hardware_class=hardware_class, device_count=gpus,
                               device_name=f"{shown} in the Ray cluster at {address}",
                               source="ray")


def _ask_cluster(script: str, address: str, python: str | None) -> object:
    """The last line `script` printed as JSON, run with `python -c` against `address` (the test
    process never imports Ray); None when it could not be asked in ASK_TIMEOUT_S."""
    try:
        done = subprocess.run([python or sys.executable, "-c", script, address],
                              capture_output=True, text=True, timeout=ASK_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
        lines = done.stdout.strip().splitlines()
        return json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def cluster_resources(address: str, python: str | None = None) -> dict[str, float]:
    """`ray.cluster_resources()` of the cluster at `address`, asked by a child process; {} when
    it cannot be asked (the engine's start says why)."""
    answer = _ask_cluster(_ASK, address, python)
    return {str(k): float(v) for k, v in answer.items()} if isinstance(answer, dict) else {}


def alive_nodes(address: str, python: str | None = None) -> list[str]:
    """The addresses of the alive nodes of the cluster at `address`, asked by a child process;
    [] when it cannot be asked."""
    answer = _ask_cluster(_ASK_NODES, address, python)
    return [str(node) for node in answer] if isinstance(answer, list) else []


class RayCluster:
    """The session's Ray cluster: RAY_ADDRESS's, or a local head started on first use."""

    def __init__(self, log_dir: Path, environ: Mapping[str, str] | None = None,
                 ask: Callable[[str, str | None], Mapping[str, float]] = cluster_resources
                 ) -> None:
        self.log_dir = Path(log_dir)
        self.named = (os.environ if environ is None else environ).get(RAY_ADDRESS) or None
        self._ask = ask
        self._asked: dict[str, Mapping[str, float]] = {}
        self.head: subprocess.Popen | None = None
        self.head_address: str | None = None
        self.head_log: Path | None = None
        self._temp_dir: str | None = None

    @staticmethod
    def uses_ray(engine: Engine | None) -> bool:
        return engine is not None and engine.engine_kind.uses_ray(engine)

    @property
    def spans_nodes(self) -> bool:
        """Whether Ray engines may place ranks on other machines (a named cluster)."""
        return self.named is not None

    def env_for(self, engine: Engine) -> dict[str, str]:
        """RAY_ADDRESS for a Ray engine (a local head started if none is named); {} else."""
        if not self.uses_ray(engine):
            return {}
        return {RAY_ADDRESS: self.named or self._local_head(engine.python)}

    def hardware_for(self, engine: Engine | None, local: Hardware) -> Hardware:
        """The hardware a test's markers are judged against: the named cluster's for a Ray
        engine (asked once per interpreter), this machine's for any other."""
        if not self.uses_ray(engine) or self.named is None:
            return local
        python = engine.python or sys.executable
        if python not in self._asked:
            self._asked[python] = self._ask(self.named, python)
        resources = self._asked[python]
        return cluster_hardware(local, resources, self.named) if resources else local

    def address(self, python: str | None = None) -> str:
        """The cluster's address: RAY_ADDRESS's, or a local head's (started on first use)."""
        return self.named or self._local_head(python)

    def _local_head(self, python: str | None) -> str:
        if self.head is not None and self.head.poll() is None:
            return self.head_address
        self.close()
        port = free_port()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.head_log = self.log_dir / f"ray-head-{port}.log"
        self._temp_dir = tempfile.mkdtemp(prefix="llmperf-ray-")
        command = [python or sys.executable, "-m", "ray.scripts.scripts", "start", "--head",
                   f"--num-cpus={HEAD_CPUS}", f"--port={port}", "--node-ip-address=127.0.0.1",
                   "--include-dashboard=false", "--disable-usage-stats",
                   # Ports Ray would otherwise take at fixed numbers, which a second session's
                   # head (a pytest-xdist worker's) would find taken.
                   f"--ray-client-server-port={free_port()}", f"--dashboard-port={free_port()}",
                   f"--dashboard-agent-listen-port={free_port()}",
                   f"--temp-dir={self._temp_dir}", "--block"]
        self.head = spawn(command, {}, self.head_log)
        self.head_address = f"127.0.0.1:{port}"
        self._wait_started()
        return self.head_address

    def _wait_started(self) -> None:
        deadline = time.monotonic() + HEAD_START_TIMEOUT_S
        while True:
            if any(HEAD_STARTED in line for line in log_tail(self.head_log, 200)):
                return
            if self.head.poll() is not None or time.monotonic() > deadline:
                what = (f"exited with code {self.head.returncode}" if self.head.poll() is not None
                        else f"did not start in {HEAD_START_TIMEOUT_S:.0f} s")
                lines = [line for line in log_tail(self.head_log) if line.strip()]
                last = lines[-1].strip() if lines else "(empty log)"
                self.close()
                raise EngineStartError(f"the local Ray head {what}: {last} (full log: "
                                       f"{self.head_log}); install ray (pip install ray) or "
                                       f"name a cluster with {RAY_ADDRESS}")
            time.sleep(HEAD_POLL_S)

    def close(self) -> None:
        """Stop the local head, if one was started (a named cluster is left alone)."""
        head, self.head = self.head, None
        if head is not None:
            stop_group(head, grace_s=_KILL_AT_ONCE)
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
