"""Agent sessions' requests: per session, a task then a tool result per later step, each sent
with every tool and `tool_choice="required"`, each step's call checked against its tool
(workloads/tool_calls.py). client/agents.py runs them as sessions (the conversation so far, the
call, the tool's time, its result); metrics/agents.py measures them.

The requests are laid out session-major, as a conversation's turns are (client/sessions.py): the
step's new message only (the task of `input_tokens` text tokens, or a tool result of
`result_tokens`); the session carries the rest at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request
from pytest_llmperf.workloads import prompts
from pytest_llmperf.workloads.source import PromptFormat, Source
from pytest_llmperf.workloads.tool_calls import ToolCallSource

__all__ = ["AgentSource", "check_budget", "check_sessions"]

WHERE = "Workload.agent_sessions"


@dataclass(frozen=True, kw_only=True)
class AgentSource(Source):
    """`steps` requests a session: the task, then `steps - 1` tool results, each with the tools
    of `calls` (a ToolCallSource: the tools, their check, `max_tokens` a step)."""

    prompt_format: ClassVar[PromptFormat] = "text"

    calls: ToolCallSource
    steps: int
    result_tokens: int

    def requests(self, n: int, tokenizer: Any, rng: np.random.Generator) -> list[Request]:
        steps = self.calls.requests(n, tokenizer, rng)  # tasks of input_tokens, with the tools
        results = prompts.text_prompts([self.result_tokens] * n, tokenizer, rng)
        return [step if i % self.steps == 0 else
                replace(step, prompt=str(results[i]), prompt_tokens=self.result_tokens)
                for i, step in enumerate(steps)]


def check_budget(steps: int, max_tokens: int, input_tokens: int, result_tokens: int,
                 max_model_len: int | None = None) -> None:
    """InputError, one line, when a session of `steps` steps cannot finish: its last step's
    prompt (the task, each call of up to `max_tokens` and each result) and answer would not fit
    the engine's context `max_model_len` (None: not known here, nothing refused)."""
    if min(steps, max_tokens, input_tokens, result_tokens) < 1:
        raise InputError(f"{WHERE}: steps, max_tokens, input_tokens and result_tokens must be "
                         f">= 1, got {steps}, {max_tokens}, {input_tokens}, {result_tokens}")
    needed = input_tokens + (steps - 1) * (max_tokens + result_tokens) + max_tokens
    if max_model_len is not None and needed > max_model_len:
        raise InputError(
            f"{WHERE}: a session of {steps} steps needs up to {needed} tokens of context "
            f"({input_tokens} task + {steps - 1} x ({max_tokens} call + {result_tokens} result) "
            f"+ {max_tokens} last call), more than the engine's max_model_len {max_model_len}: "
            "give fewer steps, shorter calls or results, or a longer max_model_len")


def check_sessions(engine: Any, source: Source) -> None:
    """check_budget of an agent workload's sessions against `engine`'s max_model_len (where
    the spec sets one); nothing for another workload."""
    if isinstance(source, AgentSource):
        check_budget(source.steps, source.calls.max_tokens, source.calls.input_tokens,
                     source.result_tokens, getattr(engine, "max_model_len", None))
