"""What a measurement executed, and whether two measurements executed the same work.

A comparison of numbers (a baseline, a saved run, side A of an A/B) holds only if both sides did
the same work. An upgrade that ends generations early, serves more prompt tokens from the prefix
cache or accepts more speculative tokens "improves" throughput without serving faster: such a
verdict is NOT COMPARABLE, with the difference named (docs/upgrades.md, "The same work").

`ExecutedWork.of(records)` summarizes one run's request records (records.py): completed requests,
prompt and output tokens (sums and spread), requests that ended short of or past the length they
were forced to, finish reasons, prompt tokens the server's usage says it served from its cache,
and each request's output digest (a CRC-32 of its token ids; the client sends temperature 0, so
a request's digest is its greedy output). `differences(a, b)` says how B's work differs from A's
(empty: the same work); `outputs_line(a, b)` compares the digests. Pure: no pytest.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.records import RequestRecord

__all__ = ["ExecutedWork", "differences", "outputs_line", "outputs_differ"]

# How far B's tokens per request may stray from A's before the work differs: a forced length is
# met exactly, so any request short of it counts; natural lengths (no forcing) may move by 2%.
TOKENS_TOLERANCE = 0.02
# A request whose server sent no finish_reason (finish_reasons' key for it).
UNREPORTED = "none"
# Shares (a finish reason's, the cached prompt tokens') may differ by 5 percentage points: one
# request in twenty.
SHARE_TOLERANCE = 0.05


@dataclass(frozen=True)
class ExecutedWork:
    requests: int  # completed
    prompt_tokens: int
    output_tokens: int
    output_tokens_min: int
    output_tokens_p50: float
    output_tokens_max: int
    short: int  # completed requests that ended before the length they were forced to
    long: int  # ... and past it
    finish_reasons: dict[str, int] = field(default_factory=dict)
    cached_prompt_tokens: int | None = None  # the usage's; None: the server did not say
    # request index -> digest of its output token ids; only requests whose ids were streamed
    digests: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, records: Sequence[RequestRecord]) -> ExecutedWork:
        done = [r for r in records if r.ok]
        lengths = [r.output_tokens for r in done]
        cached = [r.cached_prompt_tokens for r in done if r.cached_prompt_tokens is not None]
        return cls(
            requests=len(done),
            prompt_tokens=sum(r.usage_prompt_tokens or r.expected_prompt_tokens for r in done),
            output_tokens=sum(lengths),
            output_tokens_min=min(lengths, default=0),
            output_tokens_p50=float(statistics.median(lengths)) if lengths else 0.0,
            output_tokens_max=max(lengths, default=0),
            short=sum(r.output_tokens < r.expected_output_tokens for r in done),
            long=sum(r.output_tokens > r.expected_output_tokens for r in done),
            finish_reasons=dict(Counter(r.finish_reason or UNREPORTED for r in done)),
            cached_prompt_tokens=sum(cached) if cached else None,
            digests={r.index: r.output_digest for r in done
                     if r.output_digest and not r.tokens_estimated},
        )

    def to_dict(self, digests: bool = True) -> dict[str, Any]:
        """For the run file; digests as "index": hex (JSON keys are strings). A baseline's
        provenance keeps the rest (`digests=False`): its table stays a screen long."""
        out = {name: getattr(self, name) for name in _SCALARS}
        out["finish_reasons"] = dict(self.finish_reasons)
        if self.cached_prompt_tokens is not None:
            out["cached_prompt_tokens"] = self.cached_prompt_tokens
        if digests:
            out["digests"] = {str(i): f"{digest:08x}" for i, digest in self.digests.items()}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExecutedWork:
        """Inverse of to_dict; a ValueError (KeyError, TypeError) for a malformed record."""
        return cls(
            **{name: _number(data[name], name) for name in _SCALARS},
            finish_reasons={str(k): int(v) for k, v in dict(data.get("finish_reasons",
                                                                        {})).items()},
            cached_prompt_tokens=(None if data.get("cached_prompt_tokens") is None
                                  else int(data["cached_prompt_tokens"])),
            digests={int(k): int(v, 16) for k, v in dict(data.get("digests", {})).items()},
        )

    @property
    def tokens_per_request(self) -> float:
        return self.output_tokens / self.requests if self.requests else 0.0

    def share(self, reason: str) -> float:
        return self.finish_reasons.get(reason, 0) / self.requests if self.requests else 0.0

    @property
    def cached_share(self) -> float | None:
        if self.cached_prompt_tokens is None or not self.prompt_tokens:
            return None
        return self.cached_prompt_tokens / self.prompt_tokens


_SCALARS = ("requests", "prompt_tokens", "output_tokens", "output_tokens_min",
            "output_tokens_p50", "output_tokens_max", "short", "long")


def _number(value: Any, name: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"work.{name} is not a number: {value!r}")
    return value


# What only the engine counts, compared as shares where both sides report it: a prefix-cache
# hit rate that moved, or a draft acceptance that did, changes the work behind the same requests.
ENGINE_SHARES = {
    "server:prefix_cache_hit_rate": "prefix-cache hit rate",
    "server:spec_decode_acceptance_rate": "speculative acceptance",
}


def differences(a: ExecutedWork, b: ExecutedWork, a_engine: Mapping[str, float] | None = None,
                b_engine: Mapping[str, float] | None = None) -> list[str]:
    """How B's work differs from A's, one phrase each; [] when they did the same work.
    `a_engine`, `b_engine`: each side's engine-counted shares (ENGINE_SHARES), where known."""
    out = []
    if a.requests and b.requests:
        out += _tokens(a, b)
        out += _reasons(a, b)
        out += _cached(a, b)
    for name, what in ENGINE_SHARES.items():
        share_a, share_b = (a_engine or {}).get(name), (b_engine or {}).get(name)
        if _known(share_a) and _known(share_b) and abs(share_b - share_a) > SHARE_TOLERANCE:
            out.append(f"{what} {share_b:.0%} on B against {share_a:.0%} on A")
    return out


def _known(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _tokens(a: ExecutedWork, b: ExecutedWork) -> list[str]:
    ratio = b.tokens_per_request / a.tokens_per_request if a.tokens_per_request else 1.0
    off_length = (b.short + b.long) - (a.short + a.long)
    if off_length <= 0 and abs(ratio - 1) <= TOKENS_TOLERANCE:
        return []
    line = f"B produced {ratio:.2f}x the output tokens"
    if b.short > a.short:
        stopped = ", ".join(_reason(reason) for reason in sorted(b.finish_reasons)
                            if reason != "length")
        line += (f": {b.short} of {b.requests} requests stopped early"
                 + (f", {stopped}" if stopped else ""))
    elif b.long > a.long:
        line += f": {b.long} of {b.requests} requests ran past their forced length"
    prompt_ratio = (b.prompt_tokens / b.requests) / (a.prompt_tokens / a.requests) \
        if a.prompt_tokens else 1.0
    if abs(prompt_ratio - 1) > TOKENS_TOLERANCE:
        line += f"; and {prompt_ratio:.2f}x the prompt tokens per request"
    return [line]


def _reasons(a: ExecutedWork, b: ExecutedWork) -> list[str]:
    out = []
    for reason in sorted(set(a.finish_reasons) | set(b.finish_reasons)):
        share_a, share_b = a.share(reason), b.share(reason)
        if abs(share_b - share_a) > SHARE_TOLERANCE:
            out.append(f"{_reason(reason)} on {share_b:.0%} of B's requests against "
                       f"{share_a:.0%} of A's")
    return out


def _reason(reason: str) -> str:
    return "no finish_reason" if reason == UNREPORTED else f"finish_reason {reason}"


def _cached(a: ExecutedWork, b: ExecutedWork) -> list[str]:
    share_a, share_b = a.cached_share, b.cached_share
    if share_a is None or share_b is None or abs(share_b - share_a) <= SHARE_TOLERANCE:
        return []
    return [f"B served {share_b:.0%} of its prompt tokens from the prefix cache against "
            f"{share_a:.0%} on A"]


def outputs_differ(a: ExecutedWork, b: ExecutedWork) -> tuple[int, int]:
    """(requests whose greedy outputs differ, requests compared): those with a digest on both."""
    common = set(a.digests) & set(b.digests)
    return sum(a.digests[i] != b.digests[i] for i in common), len(common)


def outputs_line(a: ExecutedWork, b: ExecutedWork) -> str | None:
    """"outputs identical on 32 of 32" or "outputs differ on 12 of 32"; None: nothing to compare
    (no token ids streamed)."""
    differ, compared = outputs_differ(a, b)
    if not compared:
        return None
    if differ:
        return f"outputs differ on {differ} of {compared} requests"
    return f"outputs identical on {compared} of {compared} requests"
