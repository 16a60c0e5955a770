"""Workload.agent_sessions (workloads/agents.py): session-major steps, each with the tools and a
check; a step budget that cannot finish, in the constructor or against the engine's context,
is one line before anything is measured."""

from __future__ import annotations

import pytest

from pytest_llmperf import Engine, Workload
from pytest_llmperf.client.agents import AgentSessions
from pytest_llmperf.errors import InputError
from pytest_llmperf.workloads.agents import check_sessions
from pytest_llmperf.workloads.prompts import load_tokenizer
from pytest_llmperf.workloads.tool_calls import bounded_tools
from tests.conftest import TINY_LLAMA


def agents(**options) -> Workload:
    return Workload.agent_sessions(bounded_tools(2), sessions=3, steps=4, input_tokens=16,
                                   result_tokens=8, max_tokens=24, tool_time_s=0.5, **options)


def test_its_requests_are_a_task_then_results_each_with_the_tools():
    workload = agents(rate=1.0)
    requests, _ = workload.build(load_tokenizer(TINY_LLAMA))
    assert (workload.name, workload.api, workload.num_requests) == ("agents-3x4steps", "chat", 12)
    assert [r.prompt_tokens for r in requests[:4]] == [16, 8, 8, 8]
    assert all(dict(r.body)["tool_choice"] == "required" and r.check is not None
               and not r.forced_length for r in requests)
    assert isinstance(workload.pattern, AgentSessions)
    assert workload.pattern.start.requests_per_s == 1.0  # sessions arrive open-loop


def test_a_budget_that_cannot_finish_is_one_line():
    with pytest.raises(InputError) as caught:
        check_sessions(Engine(model="m", max_model_len=128), agents().source)
    assert str(caught.value) == (
        "Workload.agent_sessions: a session of 4 steps needs up to 136 tokens of context (16 "
        "task + 3 x (24 call + 8 result) + 24 last call), more than the engine's max_model_len "
        "128: give fewer steps, shorter calls or results, or a longer max_model_len")
    check_sessions(Engine(model="m", max_model_len=136), agents().source)
    check_sessions(Engine(model="m"), agents().source)  # the server's own length: not known
    with pytest.raises(InputError, match=r"^Workload.agent_sessions: steps, max_tokens, "
                       r"input_tokens and result_tokens must be >= 1, got 0, 64, 32, 16$"):
        Workload.agent_sessions(bounded_tools(1), sessions=1, steps=0)
