"""The CPU suite, agent sessions: sessions of tool-call steps on real vLLM, each step the
conversation so far (the task, each call the engine made, each tool's result) with the tools and
tool_choice="required", and the engine's prefix cache measured step by step.

The engine is the tool-call engine's (suites/test_cpu_tool_calls.py says why each flag) with the
prefix cache on and --enable-prompt-tokens-details, so each step's usage says how many of its
prompt tokens the cache served: an engine of its own (about 50 s to start here), hence `nightly`
(`pytest -m cpu suites/ --llmperf-nightly`; docs/testing.md).
"""

import pytest

from pytest_llmperf import Workload
from pytest_llmperf.metrics.agents import summary
from pytest_llmperf.workloads.tool_calls import bounded_tools
from suites.tiny import CPU_GATED, CPU_TOLERANCE, TINY_CPU

TINY_AGENTS = TINY_CPU.replace(
    extra_args={"enable-auto-tool-choice": True, "tool-call-parser": "pythonic",
                "enable-prompt-tokens-details": True},
    structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True},
    enable_prefix_caching=True)
SESSIONS, STEPS = 4, 4

pytestmark = [pytest.mark.cpu, pytest.mark.nightly, pytest.mark.engine(TINY_AGENTS),
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE,
                                  gate=(*CPU_GATED, "session_s.p50"))]


def test_agent_sessions_steps_reuse_the_prefix_cache(llmperf):
    """4 sessions of 4 steps, arriving at 2 a second, a 50 ms exponential tool time between
    steps: every step calls a tool, every session completes, and from step 2 on the cache serves
    most of each prompt (the last step's prompt), which step 1's unique task cannot. The vLLM
    CPU backend caches whole blocks of 128 tokens (its default block size): a 256-token task and
    128-token results make each step's shared prefix span whole blocks (with a 64-token task
    steps 2 and 3 had none cached, step 4 64%)."""
    result = llmperf.run(Workload.agent_sessions(
        bounded_tools(3), sessions=SESSIONS, steps=STEPS, input_tokens=256, result_tokens=128,
        max_tokens=64, tool_time_s=0.05, rate=2.0))
    assert result.completed == SESSIONS * STEPS, result.failures_text()
    assert {r.finish_reason for r in result.records} == {"tool_calls"}
    assert sorted((r.session, r.turn) for r in result.records) == [
        (s, t) for s in range(SESSIONS) for t in range(1, STEPS + 1)]
    hits = summary(result.records)["cache_hit_by_step"]
    assert all(hits[str(step)] > max(hits["1"], 0.5) for step in range(2, STEPS + 1)), hits
    assert result.session_s.n == SESSIONS

