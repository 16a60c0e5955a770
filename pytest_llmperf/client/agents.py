"""Agent sessions: a conversation whose every step is a tool call (workloads/agents.py lays the
requests out; metrics/agents.py measures them).

A session of K steps: step 1 sends the task (a user message) with the tools and
`tool_choice="required"`; the engine answers with a tool call; the tool "runs" for a time drawn
from `tool_time_s` (seeded by the workload's seed, the session and the step, so a session's
tool times are the same whichever client worker runs it); step 2 sends the conversation so far,
the assistant's call and the tool's result (a `tool` message answering the call's id), and so on:
each step's prompt is the last step's prompt plus its call plus a result, the prefix a cache can
serve. A step whose call fails its check (it does not parse, names no tool, breaks the tool's
schema: workloads/tool_calls.py) ends its session, its record's error naming the session and
the step. Sessions start open-loop or closed-loop as Sessions.start says (client/sessions.py),
which also splits whole sessions between client workers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pytest_llmperf.client.loadgen import Send, _safe_send, _sleep_until
from pytest_llmperf.client.patterns import pattern_type
from pytest_llmperf.client.sessions import Sessions, drive_sessions
from pytest_llmperf.errors import InputError
from pytest_llmperf.numbers import is_real
from pytest_llmperf.records import Request, RequestRecord

__all__ = ["AgentSessions", "tool_time"]

TOOL_TIMES = ("fixed", "exponential")


def tool_time(mean_s: float, distribution: str, seed: int, session: int, step: int) -> float:
    """The time step `step`'s tool runs in session `session`: `mean_s` ("fixed"), or drawn from
    an exponential of that mean, seeded by (seed, session, step)."""
    if distribution == "fixed" or mean_s == 0:
        return mean_s
    return float(np.random.default_rng((seed, session, step)).exponential(mean_s))


@dataclass(frozen=True, kw_only=True)
class AgentSessions(Sessions):
    """Sessions of `turns` steps, each a tool call (see the module); between a step's end and
    the next step's send, its tool's time (`tool_time_s`, "fixed" or "exponential")."""

    tool_time_s: float = 0.0
    tool_time_distribution: str = "exponential"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not is_real(self.tool_time_s, 0):
            raise InputError(f"AgentSessions.tool_time_s must be a number >= 0, got "
                             f"{self.tool_time_s!r}")
        if self.tool_time_distribution not in TOOL_TIMES:
            raise InputError(f"AgentSessions.tool_time_distribution must be one of "
                             f"{', '.join(TOOL_TIMES)}, got {self.tool_time_distribution!r}")

    async def run(self, requests: Sequence[Request], send: Send, *, chat: bool = False,
                  **options) -> list[RequestRecord]:
        if not chat:
            raise InputError("agent sessions need /v1/chat/completions (api='chat')")
        return await run_agents(requests, send, self, **options)

    @classmethod
    def from_dict(cls, recorded: Mapping[str, Any]) -> "AgentSessions":
        start = recorded["start"]
        start_type = pattern_type(start["type"])
        if start_type is None:
            raise InputError(f"AgentSessions.start: no load pattern is called {start['type']!r}")
        return cls(turns=recorded["turns"], start=start_type.from_dict(start),
                   tool_time_s=recorded["tool_time_s"],
                   tool_time_distribution=recorded["tool_time_distribution"])

    def to_dict(self) -> dict[str, object]:
        out = super().to_dict()
        del out["think_time_s"]
        return {**out, "type": "AgentSessions", "tool_time_s": self.tool_time_s,
                "tool_time_distribution": self.tool_time_distribution}

    def label(self) -> str:
        return (f"{self.turns} steps, tool {self.tool_time_distribution} "
                f"{self.tool_time_s:g} s, sessions at {self.start.label()}")


class _Agent:
    """A session's messages so far: the task, then each call and its tool's result."""

    def __init__(self, session: int) -> None:
        self.session = session
        self.messages: tuple[dict[str, Any], ...] = ()
        self.tokens = 0

    def step(self, new: Request, step: int) -> Request:
        """Step `step` (from 0): the task, or the last call's result (the request's prompt)."""
        if step == 0:
            message = {"role": "user", "content": new.prompt}
        else:
            message = {"role": "tool", "tool_call_id": self._call_id(step - 1),
                       "content": new.prompt}
        return replace(new, messages=(*self.messages, message),
                       prompt_tokens=self.tokens + new.prompt_tokens)

    def carry(self, sent: Request, record: RequestRecord, step: int) -> None:
        """The step's call (its first: one a step) goes into the conversation."""
        name, arguments = record.tool_calls[0]
        call = {"id": self._call_id(step), "type": "function",
                "function": {"name": name, "arguments": arguments}}
        self.messages = (*sent.messages, {"role": "assistant", "content": "",
                                          "tool_calls": [call]})
        self.tokens = sent.prompt_tokens + record.output_tokens

    def _call_id(self, step: int) -> str:
        return f"call-{self.session}-{step + 1}"


async def _one_agent(requests: Sequence[Request], send: Send, pattern: AgentSessions, s: int,
                     first: int, scheduled_s: float, deadline_s: float, seed: int,
                     clock: Callable[[], float], stopped: Callable[[], bool],
                     records: list) -> None:
    """Session s, step by step; it ends at a failed step, named in its record's error."""
    agent = _Agent(s)
    steps = pattern.turns_of(s)
    for t in range(steps):
        request = agent.step(requests[first + t], t)
        record = await _safe_send(send, first + t, request, scheduled_s)
        record.session, record.turn = s, t + 1
        records[first + t] = record
        if not record.ok:
            record.error = f"session {s} step {t + 1} of {steps}: {record.error}"
            return
        agent.carry(request, record, t)
        scheduled_s = (record.done_s or clock()) + tool_time(
            pattern.tool_time_s, pattern.tool_time_distribution, seed, s, t + 1)
        if t + 1 == steps or scheduled_s > deadline_s or stopped():
            return
        await _sleep_until(scheduled_s, clock)


async def run_agents(requests: Sequence[Request], send: Send, pattern: AgentSessions, *,
                     seed: int = 0, clock: Callable[[], float] = time.perf_counter,
                     stopped: Callable[[], bool] = lambda: False,
                     **options) -> list[RequestRecord]:
    """Run the sessions `requests` make (session-major, as run_sessions); the records of the
    steps sent, in request order. The `options` are sessions.drive_sessions'."""
    async def one(s: int, first: int, scheduled_s: float, deadline_s: float,
                  records: list) -> None:
        await _one_agent(requests, send, pattern, s, first, scheduled_s, deadline_s, seed,
                         clock, stopped, records)
    return await drive_sessions(requests, pattern, one, seed=seed, clock=clock,
                                stopped=stopped, **options)
