"""A vLLM logits processor that makes a model think for an exact number of tokens: the test
model's stand-in for a reasoning model (suites/models/tiny-llama-think, made by
scripts/make_tiny_thinking_model.py; docs/workloads.md, "Reasoning").

Its model's config.json names the thinking: `llmperf_think_tokens` (N), and the ids of the
`<think>` and `</think>` tokens its tokenizer has. Every request's output is then forced to be
`<think>`, N tokens the model chooses (neither marker), `</think>`, and an answer the model
chooses (neither marker), so a reasoning parser ("deepseek_r1") streams exactly N tokens of
thinking and the rest as the answer. Only the engine process imports it, through vLLM's
`--logits-processors pytest_llmperf.engines.thinking_model:ThinkFirst` (vLLM 0.32.0's
AdapterLogitsProcessor, vllm/v1/sample/logits_processor/__init__.py: a function of a request's
output ids so far and its row of logits, applied before sampling). The class is built on first
use (PEP 562's module `__getattr__`), so this module imports where vLLM and torch are absent, as
every module of the package must.
"""

from __future__ import annotations

from functools import cache
from typing import Any

__all__ = ["ThinkFirst", "forced_token"]  # noqa: F822 - ThinkFirst comes from __getattr__

THINK_TOKENS, START_ID, END_ID = ("llmperf_think_tokens", "llmperf_think_start_token_id",
                                  "llmperf_think_end_token_id")


def forced_token(position: int, think_tokens: int, start_id: int, end_id: int) -> int | None:
    """The token output position `position` must be: `<think>` first, `</think>` after N
    thoughts; None where the model chooses (never a marker)."""
    if position == 0:
        return start_id
    if position == think_tokens + 1:
        return end_id
    return None


def __getattr__(name: str) -> Any:
    if name == "ThinkFirst":  # what vLLM's --logits-processors resolves, in the engine process
        return _think_first()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@cache
def _think_first() -> type:
    import torch
    from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

    class ThinkFirst(AdapterLogitsProcessor):
        """`<think>`, N tokens, `</think>`, then the answer, for every request of the engine
        whose model's config names N (an engine of another model is left as it is)."""

        def __init__(self, vllm_config: Any, device: torch.device,
                     is_pin_memory: bool) -> None:
            super().__init__(vllm_config, device, is_pin_memory)
            config = vllm_config.model_config.hf_config
            self.think = tuple(getattr(config, name, None) for name in (THINK_TOKENS, START_ID,
                                                                        END_ID))

        def is_argmax_invariant(self) -> bool:
            return False

        def new_req_logits_processor(self, params: Any):
            if None in self.think:
                return None
            think_tokens, start_id, end_id = self.think

            def think_first(output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
                token = forced_token(len(output_ids), think_tokens, start_id, end_id)
                if token is None:
                    logits[[start_id, end_id]] = float("-inf")
                    return logits
                forced = torch.full_like(logits, float("-inf"))
                forced[token] = 0.0
                return forced
            return think_first

    # Named as the module's own, so that pickle finds it again through __getattr__.
    ThinkFirst.__module__, ThinkFirst.__qualname__ = __name__, "ThinkFirst"
    return ThinkFirst
