"""LoRA traffic: a workload's requests split across LoRA adapters by weight.

Each request names its adapter in its `model` field, as vLLM's OpenAI server takes it: a name
from `--lora-modules` selects that adapter, the base model's own name the base model
(https://docs.vllm.ai/en/latest/features/lora.html, "Serving LoRA Adapters"). The share given
as `base` keeps the engine's own model. inference-perf splits its traffic the same way, a
weight per adapter (`lora_config` in https://github.com/kubernetes-sigs/inference-perf,
docs/config.md).

The counts are exact and the order seeded: of n requests, adapter i gets its weight's share of
n, rounded by largest remainder (the base share too), and the assignment is shuffled with the
workload's generator, so adapters interleave and an engine whose `max_loras` is below the
number of adapters has to swap them. The warm-up requests are split the same way (they come
first in the built list, workload.build).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request
from pytest_llmperf.workloads.source import PromptFormat, Source

if TYPE_CHECKING:
    from pytest_llmperf.engines.spec import Engine

__all__ = ["BASE", "AdapterSplit", "check_served"]

BASE = "base"  # how a row, a run file and a line name the requests sent to the base model
WHERE = "Workload.lora"


@dataclass(frozen=True, kw_only=True)
class AdapterSplit(Source):
    """`source`'s requests, each sent to one of `adapters` (name, weight) or, for the `base`
    weight's share, to the engine's own model."""

    source: Source
    adapters: tuple[tuple[str, float], ...]
    base: float = 0.0

    @classmethod
    def of(cls, source: Source, adapters: Mapping[str, float], base: float) -> AdapterSplit:
        """The split, checked: a bad weight or name is one line where the workload is written."""
        if not isinstance(adapters, Mapping) or not adapters:
            raise InputError(f"{WHERE}: adapters must be a non-empty dict of adapter names to "
                             f"weights, e.g. {{'sql-lora': 3, 'chat-lora': 1}}, got {adapters!r}")
        for name, weight in [*adapters.items(), (BASE, base)]:
            if name == BASE and name in adapters:
                raise InputError(f"{WHERE}: {BASE!r} names the base model's share; give it as "
                                 f"base=, and name the adapter otherwise")
            if not isinstance(name, str) or not name.strip():
                raise InputError(f"{WHERE}: adapter name {name!r} must be a non-empty string")
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not (
                    weight >= 0 and np.isfinite(weight)):
                raise InputError(f"{WHERE}: {name}'s weight {weight!r} must be a number >= 0")
        if not any(adapters.values()):
            raise InputError(f"{WHERE}: every adapter's weight is 0; give one a weight above 0")
        return cls(source=source, adapters=tuple((n, float(w)) for n, w in adapters.items()),
                   base=float(base))

    @property
    def prompt_format(self) -> PromptFormat:  # type: ignore[override]
        return self.source.prompt_format

    def to_dict(self, *args: Any) -> dict[str, Any]:
        """Its identity, the adapters as {name: weight} (a TOML table in a baseline)."""
        return {**super().to_dict(*args), "adapters": dict(self.adapters)}

    @property
    def names(self) -> tuple[str, ...]:
        """The adapters the split sends requests to (weight above 0)."""
        return tuple(name for name, weight in self.adapters if weight > 0)

    def counts(self, n: int) -> dict[str | None, int]:
        """How many of `n` requests each adapter gets (None: the base model), by largest
        remainder: exact, and in the weights' proportion as closely as whole requests allow."""
        shares: list[tuple[str | None, float]] = [*self.adapters, (None, self.base)]
        total = sum(weight for _, weight in shares)
        exact = [n * weight / total for _, weight in shares]
        counts = [int(x) for x in exact]
        by_remainder = sorted(range(len(shares)), key=lambda i: counts[i] - exact[i])
        for i in by_remainder[:n - sum(counts)]:
            counts[i] += 1
        return {name: count for (name, _), count in zip(shares, counts, strict=True) if count}

    def requests(self, n: int, tokenizer: Any, rng: np.random.Generator) -> list[Request]:
        built = self.source.requests(n, tokenizer, rng)
        models = [name for name, count in self.counts(n).items() for _ in range(count)]
        order = rng.permutation(n)
        return [request if models[i] is None
                else replace(request, body=(*request.body, ("model", models[i])))
                for request, i in zip(built, order, strict=True)]


def check_served(source: Source, engine: Engine) -> None:
    """InputError, one line, when a split names an adapter `engine` does not serve (vLLM
    would answer each such request 404); nothing for another source."""
    if not isinstance(source, AdapterSplit):
        return
    served = [name for name, _ in engine.lora_modules]
    missing = [name for name in source.names if name not in served]
    if not missing:
        return
    has = (f"it serves {', '.join(served)}" if served
           else "it serves no LoRA adapters (Engine(lora_modules=...) names them)")
    them = f"adapters {', '.join(map(repr, missing))} are" if len(missing) > 1 else (
        f"adapter {missing[0]!r} is")
    pronoun = "them" if len(missing) > 1 else "it"
    raise InputError(f"{WHERE}: {them} not served by engine {engine.label()!r}: {has}; add "
                     f"{pronoun} to the Engine's lora_modules or drop {pronoun} from the split")
