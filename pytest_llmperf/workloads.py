"""Workloads: which requests to send and how they arrive, as frozen, seeded data.

A Workload is declared at import time in a suite file and built into concrete requests only when
the test runs, because exact prompt lengths need the engine's tokenizer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from pytest_llmperf import prompts
from pytest_llmperf.loadgen import Concurrency, LoadPattern, Rate
from pytest_llmperf.records import Request

PromptFormat = Literal["token_ids", "text"]


@dataclass(frozen=True, kw_only=True)
class Workload:
    """`input_tokens`/`output_tokens` are length distributions (prompts.Fixed, Uniform, Normal).

    `prompt_format="token_ids"` sends token-id lists, which gives exact input lengths with no
    tokenizer round trip; "text" sends text with exactly the drawn token count.
    """

    name: str
    num_requests: int
    input_tokens: Any
    output_tokens: Any
    pattern: LoadPattern
    seed: int = 0
    warmup_requests: int = 0
    duration_s: float | None = None
    prompt_format: PromptFormat = "token_ids"
    api: Literal["completions", "chat"] = "completions"

    def __post_init__(self) -> None:
        if self.num_requests < 1:
            raise ValueError(f"Workload {self.name!r}: num_requests must be >= 1, "
                             f"got {self.num_requests}")
        if self.api == "chat" and self.prompt_format != "text":
            raise ValueError(f"Workload {self.name!r}: api='chat' needs prompt_format='text'")

    @classmethod
    def fixed(cls, *, input_tokens: int, output_tokens: int, num_requests: int,
              concurrency: int | None = None, rate: float | None = None,
              burstiness: float = 1.0, seed: int = 0, warmup_requests: int = 0,
              name: str | None = None, **options: Any) -> "Workload":
        """Every request `input_tokens` in, `output_tokens` out; closed-loop `concurrency` or
        open-loop `rate` (requests/s, Poisson unless `burstiness` != 1; both: rate with a cap)."""
        return cls(
            name=name or f"fixed-{input_tokens}in-{output_tokens}out",
            num_requests=num_requests,
            input_tokens=prompts.Fixed(tokens=input_tokens),
            output_tokens=prompts.Fixed(tokens=output_tokens),
            pattern=load_pattern(concurrency=concurrency, rate=rate, burstiness=burstiness),
            seed=seed, warmup_requests=warmup_requests, **options,
        )

    def build(self, tokenizer: prompts.Tokenizer) -> tuple[list[Request], list[Request]]:
        """(measured requests, warm-up requests), reproducible from `seed`."""
        rng = np.random.default_rng(self.seed)
        total = self.num_requests + self.warmup_requests
        inputs = self.input_tokens.sample(rng, total)
        outputs = self.output_tokens.sample(rng, total)
        if self.prompt_format == "text":
            texts = prompts.text_prompts(inputs, tokenizer, rng)
        else:
            texts = prompts.token_id_prompts(inputs, tokenizer, rng)
        requests = prompts.make_requests(texts, outputs)
        return requests[self.warmup_requests:], requests[: self.warmup_requests]

    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.name, "num_requests": self.num_requests,
            "input_tokens": _describe(self.input_tokens),
            "output_tokens": _describe(self.output_tokens),
            "pattern": _describe(self.pattern), "seed": self.seed,
            "warmup_requests": self.warmup_requests, "prompt_format": self.prompt_format,
            "api": self.api,
        }
        if self.duration_s is not None:
            out["duration_s"] = self.duration_s
        return out

    def label(self) -> str:
        return f"{self.name} x{self.num_requests} @ {_pattern_label(self.pattern)}"


def load_pattern(*, concurrency: int | None = None, rate: float | None = None,
                 burstiness: float = 1.0) -> LoadPattern:
    if rate is None and concurrency is None:
        raise ValueError("give concurrency=N (closed loop) or rate=R requests/s (open loop)")
    if rate is None:
        return Concurrency(max_concurrency=concurrency)
    return Rate(requests_per_s=rate, burstiness=burstiness, max_concurrency=concurrency)


def _describe(value: Any) -> Any:
    """A dataclass as a TOML/JSON-friendly dict tagged with its type."""
    if hasattr(value, "__dataclass_fields__"):
        fields = {k: _describe(getattr(value, k)) for k in value.__dataclass_fields__}
        return {"type": type(value).__name__, **{k: v for k, v in fields.items() if v is not None}}
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return value


def _pattern_label(pattern: LoadPattern) -> str:
    if isinstance(pattern, Concurrency):
        return f"concurrency {pattern.max_concurrency}"
    if isinstance(pattern, Rate):
        rate = "inf" if math.isinf(pattern.requests_per_s) else f"{pattern.requests_per_s:g}"
        cap = f" cap {pattern.max_concurrency}" if pattern.max_concurrency else ""
        burst = f" burst {pattern.burstiness:g}" if pattern.burstiness != 1.0 else ""
        return f"{rate} req/s{burst}{cap}"
    return type(pattern).__name__
