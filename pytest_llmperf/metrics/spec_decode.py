"""Speculative decoding's acceptance over a run, from the server's counters (vLLM's
`vllm:spec_decode_*`, sampled by client/server_metrics.py).

Computed as `vllm bench serve` computes them from the same counters, so the two tools agree on
one run (`fetch_spec_decode_metrics` and the `spec_decode_stats` it feeds,
https://github.com/vllm-project/vllm/blob/main/vllm/benchmarks/serve.py):

- acceptance rate = accepted tokens / draft tokens (the tool prints it in percent);
- mean accepted length = 1 + accepted tokens / drafts: tokens per decode step of a request
  that drafted, the bonus token included (the tool's "Acceptance length");
- acceptance at position i = tokens accepted at draft position i / drafts (the tool's
  "Per-position acceptance", 0-based as the `position` label).

A run that drafted nothing (an n-gram drafter that found no match) has its counts, 0, and NaN
rates: the engine drafts, this workload gave it nothing to draft.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pytest_llmperf.metrics.metric import HIGHER, Column, Family, Metric, RunInputs
from pytest_llmperf.metrics.server import ABSENT, PREFIX, server_metric

__all__ = ["FAMILY", "METRICS", "POSITION_PREFIX", "acceptance"]

# The key of position i's acceptance: spec_decode_acceptance_pos_0, _1, ... (0-based, as
# vLLM labels and prints them).
POSITION_PREFIX = "spec_decode_acceptance_pos_"


def acceptance(drafts: float, draft_tokens: float, accepted_tokens: float,
               accepted_by_position: Mapping[str, float]) -> dict[str, float]:
    """The summary's speculative-decoding keys from the run's counter changes;
    `accepted_by_position` maps a `position` label ("0", "1", ...) to its accepted tokens."""
    out = {
        "spec_decode_drafts": drafts,
        "spec_decode_draft_tokens": draft_tokens,
        "spec_decode_accepted_tokens": accepted_tokens,
        "spec_decode_acceptance_rate":
            accepted_tokens / draft_tokens if draft_tokens > 0 else math.nan,
        "spec_decode_mean_accepted_length":
            1 + accepted_tokens / drafts if drafts > 0 else math.nan,
    }
    for position, accepted in accepted_by_position.items():
        out[POSITION_PREFIX + position] = accepted / drafts if drafts > 0 else math.nan
    return out



# Where the engine drafts: the counts are context, the rate and the length are what to gate.
METRICS: tuple[Metric, ...] = (
    server_metric("spec_decode_drafts", "drafts", HIGHER),
    server_metric("spec_decode_draft_tokens", "tokens", HIGHER),
    server_metric("spec_decode_accepted_tokens", "tokens", HIGHER),
    server_metric("spec_decode_acceptance_rate", "fraction", HIGHER, "acc%", 100,
                  "acc% = draft tokens accepted (speculative decoding)",
                  columns=(Column("{:.0f}", 160, 16, optional=True),)),
    server_metric("spec_decode_mean_accepted_length", "tokens", HIGHER, "acc len",
                  meaning="acc len = tokens per drafting step (1 + accepted per draft)",
                  columns=(Column("{:.2f}", 170, 17, optional=True),)),
)


def _position(name: str) -> Metric | None:
    """The acceptance at one draft position ("server:spec_decode_acceptance_pos_0"): as many as
    the engine drafts, so matched by form rather than listed."""
    position = name.removeprefix(PREFIX + POSITION_PREFIX)
    if position == name or not (position.isascii() and position.isdigit()):
        return None
    return Metric(name, "fraction", HIGHER, absent=ABSENT)


def _positions(run: RunInputs) -> dict[str, float]:
    return {PREFIX + key: float(value) for key, value in sorted(run.server.items())
            if _position(PREFIX + key)}


FAMILY = Family(_position, _positions, absent=ABSENT)
