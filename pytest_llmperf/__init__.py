"""pytest-llmperf: performance regression tests for LLM inference engines.

The public API. It imports nothing heavy (no vLLM, no torch): engines run in a subprocess.
"""

from pytest_llmperf.client.patterns import Concurrency, Ramp, Rate
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.verdict.gate import SLO
from pytest_llmperf.warning_types import (
    ClientLimitedWarning,
    DisturbedWarning,
    InconclusiveWarning,
    LlmperfWarning,
    NotComparableWarning,
    StaleBaselineWarning,
)
from pytest_llmperf.workloads.lengths import Fixed, Normal, Uniform
from pytest_llmperf.workloads.peak_qps import find_peak_qps
from pytest_llmperf.workloads.scenarios import (
    OfflineScenario,
    ServerScenario,
    judge_offline,
    judge_server,
    offline_workload,
    server_workload,
)
from pytest_llmperf.workloads.workload import Workload

__all__ = [
    "ClientLimitedWarning",
    "Concurrency",
    "DisturbedWarning",
    "Engine",
    "InconclusiveWarning",
    "LlmperfWarning",
    "NotComparableWarning",
    "OfflineScenario",
    "SLO",
    "ServerScenario",
    "StaleBaselineWarning",
    "Fixed",
    "Normal",
    "Ramp",
    "Rate",
    "Result",
    "Uniform",
    "Workload",
    "find_peak_qps",
    "judge_offline",
    "judge_server",
    "offline_workload",
    "server_workload",
]
