"""Agent sessions (client/agents.py): each step sends the conversation so far (the task, then
each call and its tool's result) with the tools, the tool's time between steps is seeded, and a
step whose call fails ends its session, named. A fake `send` stands in for the server."""

from __future__ import annotations

import asyncio

import pytest

from pytest_llmperf.client.agents import AgentSessions, run_agents, tool_time
from pytest_llmperf.client.patterns import Concurrency, Rate
from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request, RequestRecord

CALL = ["set_colour_0", '{"blink":true,"colour":"red-0"}']


def steps(sessions: int, k: int) -> list[Request]:
    """Session-major: the task (8 tokens), then results (4 tokens each)."""
    return [Request(prompt=f"task {s}" if t == 0 else f"result {s}.{t}",
                    prompt_tokens=8 if t == 0 else 4, output_tokens=16)
            for s in range(sessions) for t in range(k)]


class FakeServer:
    """Answers each step with one call of 6 tokens; `fail` names (index) steps whose call
    failed its check."""

    def __init__(self, fail: tuple[int, ...] = ()) -> None:
        self.sent: dict[int, Request] = {}
        self.fail = fail

    async def send(self, index: int, request: Request, scheduled_s: float) -> RequestRecord:
        self.sent[index] = request
        record = RequestRecord(index=index, expected_prompt_tokens=request.prompt_tokens,
                               expected_output_tokens=16, scheduled_s=scheduled_s,
                               sent_s=1.0, chunk_times_s=[1.5], chunk_tokens=[6], done_s=1.5,
                               usage_output_tokens=6, tool_calls=[list(CALL)])
        if index in self.fail:
            record.error, record.error_kind = "call 0 (x): arguments 'x' are not JSON", "invalid"
        return record


def run(pattern: AgentSessions, requests: list[Request], server: FakeServer):
    return asyncio.run(run_agents(requests, server.send, pattern, seed=7))


def test_each_step_sends_the_conversation_so_far_with_each_call_and_result():
    server = FakeServer()
    records = run(AgentSessions(turns=3, start=Concurrency(max_concurrency=2)), steps(2, 3),
                  server)
    assert [(r.session, r.turn) for r in records] == [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2),
                                                      (1, 3)]
    call = {"id": "call-1-1", "type": "function",
            "function": {"name": CALL[0], "arguments": CALL[1]}}
    assert server.sent[5].messages[:4] == (
        {"role": "user", "content": "task 1"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call-1-1", "content": "result 1.1"},
        {"role": "assistant", "content": "",
         "tool_calls": [{**call, "id": "call-1-2"}]})
    assert server.sent[5].messages[4] == {"role": "tool", "tool_call_id": "call-1-2",
                                          "content": "result 1.2"}
    # 8 task + 6 call + 4 result + 6 call + 4 result: the prompt grows by each call and result
    assert [server.sent[i].prompt_tokens for i in (3, 4, 5)] == [8, 18, 28]


def test_a_step_whose_call_fails_ends_its_session_and_names_it():
    records = run(AgentSessions(turns=3, start=Concurrency(max_concurrency=2)), steps(2, 3),
                  FakeServer(fail=(4,)))
    assert [(r.session, r.turn, r.ok) for r in records] == [
        (0, 1, True), (0, 2, True), (0, 3, True), (1, 1, True), (1, 2, False)]
    assert records[-1].error == "session 1 step 2 of 3: call 0 (x): arguments 'x' are not JSON"


def test_tool_times_are_seeded_by_session_and_step():
    drawn = [tool_time(0.5, "exponential", 7, s, t) for s in range(2) for t in range(1, 3)]
    assert drawn == [tool_time(0.5, "exponential", 7, s, t) for s in range(2) for t in (1, 2)]
    assert len(set(drawn)) == 4 and all(d > 0 for d in drawn)
    assert tool_time(0.5, "fixed", 7, 1, 2) == 0.5


def test_the_pattern_is_recorded_and_read_back_and_its_bad_values_are_one_line():
    pattern = AgentSessions(turns=4, tool_time_s=0.25, tool_time_distribution="fixed",
                            start=Rate(requests_per_s=2.0))
    recorded = pattern.to_dict()
    assert (recorded["type"], recorded["tool_time_s"], "think_time_s" in recorded) == (
        "AgentSessions", 0.25, False)
    assert AgentSessions.from_dict(recorded) == pattern
    assert pattern.label() == "4 steps, tool fixed 0.25 s, sessions at " + Rate(
        requests_per_s=2.0).label()
    with pytest.raises(InputError, match=r"^AgentSessions.tool_time_distribution must be one "
                       r"of fixed, exponential, got 'normal'$"):
        AgentSessions(turns=2, tool_time_distribution="normal", start=Concurrency(
            max_concurrency=1))
    with pytest.raises(InputError, match=r"^agent sessions need /v1/chat/completions"):
        asyncio.run(pattern.run(steps(1, 4), FakeServer().send))
