"""How many GPUs a measured engine used and the machine had, from what a result records: the
engine's spec (Engine.to_dict, which leaves vLLM's defaults out) and the machine's fingerprint
(hardware.py). Output tok/s per GPU starts here, and so does the engine's share of the machine's
price (cost.py).

Per GPU is what lets layouts of the same GPUs be compared: 8 engines of TP=1 against one of TP=8,
or DP=8 against TP=8, are all 8 GPUs, and the one with the most output tok/s per GPU makes the
most of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.machine.hardware import is_gpu_fingerprint

PER_GPU = "output_throughput_tok_s_per_gpu"  # the reports' name for output tok/s per GPU


@dataclass(frozen=True)
class Parallelism:
    """An engine's tensor-, pipeline- and data-parallel sizes (1 where the spec leaves vLLM's
    default)."""

    tensor: int = 1
    pipeline: int = 1
    data: int = 1

    @property
    def gpus(self) -> int:
        """GPUs the engine occupies: TP x PP x DP, as Engine.gpus_needed (engines/spec.py) counts
        them; metrics/ reads the recorded spec, it cannot import engines/ (pyproject.toml)."""
        return self.tensor * self.pipeline * self.data


def parallelism(engine: Mapping[str, Any]) -> Parallelism:
    """From a result's engine (Engine.to_dict)."""
    return Parallelism(int(engine.get("tensor_parallel_size") or 1),
                       int(engine.get("pipeline_parallel_size") or 1),
                       int(engine.get("data_parallel_size") or 1))


def machine_gpus(fingerprint: Mapping[str, Any]) -> int:
    """The GPUs the session may use (0 on a CPU machine): the fingerprint's device_count, which
    counts what CUDA_VISIBLE_DEVICES leaves (hardware.py), as the session's gpu_count does."""
    return int(fingerprint.get("device_count") or 0) if is_gpu_fingerprint(fingerprint) else 0


def output_per_gpu(output_tok_s: float | None, engine: Mapping[str, Any],
                   fingerprint: Mapping[str, Any]) -> float | None:
    """Output tok/s over the engine's GPUs; None on a CPU machine (no GPUs to divide by) or
    without a throughput."""
    if output_tok_s is None or not is_gpu_fingerprint(fingerprint):
        return None
    return output_tok_s / parallelism(engine).gpus
