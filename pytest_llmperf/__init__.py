"""pytest-llmperf: performance regression tests for LLM inference engines.

The public API. It imports nothing heavy (no vLLM, no torch): engines run in a subprocess.
"""

from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.loadgen import Concurrency, Ramp, Rate
from pytest_llmperf.prompts import Fixed, Normal, Uniform
from pytest_llmperf.result import Result
from pytest_llmperf.workloads import Workload

__all__ = [
    "Concurrency",
    "Engine",
    "Fixed",
    "Normal",
    "Ramp",
    "Rate",
    "Result",
    "Uniform",
    "Workload",
]
