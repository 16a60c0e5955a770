"""Latency by conversation turn: does turn 5 (a long prompt, most of it in the prefix cache)
start as fast as turn 1? One row per turn index, from the records' `turn` (client/sessions.py).

`turn_metrics` gives the same numbers under the names a gate, a baseline or an A/B comparison
takes ("turn5:ttft_s.p50", TURN_METRICS), as part of each run's metrics: the family FAMILY.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pytest_llmperf.metrics.breakdown import Breakdown, MeasuredRun
from pytest_llmperf.metrics.metric import Family
from pytest_llmperf.records import RequestRecord

__all__ = ["FAMILY", "TURN_METRICS", "TURN_PREFIX", "ByTurn", "by_turn", "turn_metrics",
           "turn_of", "turn_problem"]

# "turn<N>:<name>": <name> over the requests of a conversation's turn N. Only what by_turn
# computes per turn can be named.
TURN_PREFIX = "turn"
TURN_METRICS = ("ttft_s.p50", "ttft_s.p90", "ttft_s.mean", "e2el_s.p50", "e2el_s.p90",
                "e2el_s.mean", "failed")


def turn_of(name: str) -> tuple[int, str] | None:
    """(3, "ttft_s.p50") for "turn3:ttft_s.p50"; None for a name without a turn number >= 1."""
    head, colon, rest = name.partition(":")
    number = head.removeprefix(TURN_PREFIX)
    if not colon or number == head or not (number.isascii() and number.isdigit()):
        return None
    return (int(number), rest) if int(number) >= 1 else None


def turn_problem(name: str) -> str | None:
    """Why a name written as a turn's metric ("turn...:...") is none, in a few words; None
    for a good turn name and for names that are no turn's."""
    if not (name.startswith(TURN_PREFIX) and ":" in name):
        return None
    turn = turn_of(name)
    if turn is None:
        return "a turn's metric is turn<N>:<metric>, N from 1: turn1:ttft_s.p50"
    if turn[1] not in TURN_METRICS:
        return f"a turn has {', '.join(TURN_METRICS)}"
    return None


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
            **_stats([r.ttft_s for r in done], "ttft_s"),
            **_stats([r.e2el_s for r in done], "e2el_s"),
            **({"prompt_tokens.mean": float(np.mean(prompt))} if prompt else {}),
        }
    return out


class ByTurn(Breakdown):
    """The run file's "by_turn": `by_turn`'s rows, turn index (a string) to its numbers."""

    name = "by_turn"

    @classmethod
    def of(cls, result: MeasuredRun) -> ByTurn | None:
        rows = by_turn(result.records)
        return cls(rows) if rows else None


def turn_metrics(records: Sequence[RequestRecord]) -> tuple[tuple[str, float], ...]:
    """(("turn1:ttft_s.p50", 0.021), ...): every TURN_METRICS name of every turn index, NaN
    where a turn has no value (all its requests failed), so a gate on it fails visibly; () when
    no record has a turn. A tuple of pairs: RunMetrics, which holds it, is frozen and hashable."""
    return tuple((f"{TURN_PREFIX}{turn}:{name}", float(row.get(name, math.nan)))
                 for turn, row in by_turn(records).items() for name in TURN_METRICS)


def _stands_for(name: str) -> str | None:
    """The metric a turn's name is of: "ttft_s.p50" for "turn2:ttft_s.p50"."""
    turn = turn_of(name)
    return turn[1] if turn is not None and turn[1] in TURN_METRICS else None


FAMILY = Family(_stands_for, lambda run: dict(turn_metrics(run.records)))
