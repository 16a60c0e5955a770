"""Latency by conversation turn: does turn 5 (a long prompt, most of it in the prefix cache)
start as fast as turn 1? One row per turn index, from the records' `turn` (client/sessions.py).

`turn_metrics` gives the same numbers under the names a gate, a baseline or an A/B comparison
takes ("turn5:ttft_s.p50", registry.TURN_METRICS), as part of each run's metrics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pytest_llmperf.metrics.registry import TURN_METRICS, TURN_PREFIX
from pytest_llmperf.records import RequestRecord

__all__ = ["by_turn", "turn_metrics"]


def _stats(values: list[float], name: str) -> dict[str, float]:
    if not values:
        return {}
    return {f"{name}.p50": float(np.percentile(values, 50)),
            f"{name}.p90": float(np.percentile(values, 90)),
            f"{name}.mean": float(np.mean(values))}


def by_turn(records: Sequence[RequestRecord]) -> dict[str, dict[str, float]]:
    """{"1": {"requests": n, "failed": k, "ttft_s.p50": ..., "e2el_s.p50": ...,
    "prompt_tokens.mean": ...}, "2": ...}; empty when no record has a turn. Keys are strings:
    the run file is JSON."""
    turns = sorted({r.turn for r in records if r.turn is not None})
    out: dict[str, dict[str, float]] = {}
    for turn in turns:
        mine = [r for r in records if r.turn == turn]
        done = [r for r in mine if r.ok]
        prompt = [r.usage_prompt_tokens or r.expected_prompt_tokens for r in done]
        out[str(turn)] = {
            "requests": len(mine), "failed": len(mine) - len(done),
            **_stats([r.chunk_times_s[0] - r.sent_s for r in done], "ttft_s"),
            **_stats([r.chunk_times_s[-1] - r.sent_s for r in done], "e2el_s"),
            **({"prompt_tokens.mean": float(np.mean(prompt))} if prompt else {}),
        }
    return out


def turn_metrics(records: Sequence[RequestRecord]) -> tuple[tuple[str, float], ...]:
    """(("turn1:ttft_s.p50", 0.021), ...): every TURN_METRICS name of every turn index, NaN
    where a turn has no value (all its requests failed), so a gate on it fails visibly; () when
    no record has a turn. A tuple of pairs: RunMetrics, which holds it, is frozen and hashable."""
    return tuple((f"{TURN_PREFIX}{turn}:{name}", float(row.get(name, math.nan)))
                 for turn, row in by_turn(records).items() for name in TURN_METRICS)
