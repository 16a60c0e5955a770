"""Each server kind's Prometheus samples behind the server-metrics summary's keys
(server_metrics.py reads them): vLLM's, SGLang's and llama.cpp's server's, each from its public
source. A kind of server the client talks to (server_kind.ServerKind) names one of these.

They live with the client, not with the engine kinds (engines/kinds/): the client reads them for
a deployment it did not start too (--llmperf-endpoint), and engines/ and client/ are independent
layers (pyproject.toml, [tool.importlinter]).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_llmperf.metrics.phases import SGLANG_PHASES, VLLM_PHASES

__all__ = ["COUNTER_DELTAS", "GAUGE_MAXIMA", "LLAMACPP_METRICS", "SAMPLED_NAMES",
           "SGLANG_METRICS", "VLLM_MAX_OVER_LABEL_SETS", "VLLM_METRICS", "MetricNames",
           "SpecDecodeCounters"]

# summary key -> gauge reported as its maximum over the samples.
GAUGE_MAXIMA = {
    "kv_cache_usage_max": "vllm:kv_cache_usage_perc",  # a fraction 0-1, despite the name
    "requests_waiting_max": "vllm:num_requests_waiting",
    "requests_running_max": "vllm:num_requests_running",
}
# summary key -> counter reported as its change over the run (last sample - first sample).
COUNTER_DELTAS = {
    "prefix_cache_queries": "vllm:prefix_cache_queries_total",  # prompt tokens looked up
    "prefix_cache_hits": "vllm:prefix_cache_hits_total",  # tokens found (whole blocks only)
    "preemptions": "vllm:num_preemptions_total",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "generation_tokens": "vllm:generation_tokens_total",
}
SAMPLED_NAMES = frozenset(GAUGE_MAXIMA.values()) | frozenset(COUNTER_DELTAS.values())

# Each engine's KV usage is a fraction of its own cache: fractions of separate caches do not add,
# and the fullest engine is the one that preempts, so across engines we keep the largest.
VLLM_MAX_OVER_LABEL_SETS = frozenset({"vllm:kv_cache_usage_perc"})


@dataclass(frozen=True)
class SpecDecodeCounters:
    """A server's speculative-decoding counters; metrics/spec_decode.py turns their changes over
    the run into acceptance. `accepted_per_position` has one series per `position_label` value."""

    drafts: str
    draft_tokens: str
    accepted_tokens: str
    accepted_per_position: str
    position_label: str = "position"

    @property
    def totals(self) -> tuple[str, str, str]:
        return (self.drafts, self.draft_tokens, self.accepted_tokens)


# vLLM's, exported only by an engine with a speculative_config, from its first sample on (each
# engine's series are labelled at start-up): vllm/v1/spec_decode/metrics.py,
# https://github.com/vllm-project/vllm/blob/main/vllm/v1/spec_decode/metrics.py.
VLLM_SPEC_DECODE = SpecDecodeCounters(
    drafts="vllm:spec_decode_num_drafts_total",
    draft_tokens="vllm:spec_decode_num_draft_tokens_total",
    accepted_tokens="vllm:spec_decode_num_accepted_tokens_total",
    accepted_per_position="vllm:spec_decode_num_accepted_tokens_per_pos_total",
)


@dataclass(frozen=True)
class MetricNames:
    """One server kind's Prometheus samples behind the summary's keys: gauges reported as their
    maximum, counters as their change over the run. `server` names the kind in the warning."""

    server: str
    prefix: str  # every sample of this kind starts with it: how its page is told from others
    gauge_maxima: Mapping[str, str] = field(hash=False)  # hashed by the rest: still a key
    counter_deltas: Mapping[str, str] = field(hash=False)
    max_over_label_sets: frozenset[str] = field(default_factory=frozenset)
    spec_decode: SpecDecodeCounters | None = None
    # summary key ("queue_s") -> the histogram read at the window's edges (metrics/phases.py).
    phases: Mapping[str, str] = field(default_factory=dict, hash=False)

    @property
    def sampled(self) -> frozenset[str]:
        spec = self.spec_decode
        spec_names = (*spec.totals, spec.accepted_per_position) if spec else ()
        return (frozenset(self.gauge_maxima.values()) | frozenset(self.counter_deltas.values())
                | frozenset(spec_names))

    @property
    def kept_apart(self) -> dict[str, str]:
        """Sample name -> the label whose series stay apart (see `labelled`)."""
        spec = self.spec_decode
        return {spec.accepted_per_position: spec.position_label} if spec else {}


VLLM_METRICS = MetricNames("vLLM", "vllm:", GAUGE_MAXIMA, COUNTER_DELTAS, VLLM_MAX_OVER_LABEL_SETS,
                           VLLM_SPEC_DECODE, VLLM_PHASES)

# SGLang's names, from https://docs.sglang.io/docs/references/production_metrics and its
# collector (https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/metrics/collector.py):
# `sglang:token_usage` is the used fraction of the KV pool, one per scheduler (tp/dp rank), so
# the fullest is kept as for vLLM's engines. The hit rate is the run's cached prompt tokens over
# its prompt tokens (both counters, counted per finished request); `sglang:cache_hit_rate` is
# left alone: it is the rate of the scheduler's last logging window, not of the run.
SGLANG_METRICS = MetricNames(
    "SGLang", "sglang:",
    gauge_maxima={
        "kv_cache_usage_max": "sglang:token_usage",
        "requests_waiting_max": "sglang:num_queue_reqs",
        "requests_running_max": "sglang:num_running_reqs",
    },
    counter_deltas={
        "prefix_cache_queries": "sglang:prompt_tokens_total",
        "prefix_cache_hits": "sglang:cached_tokens_total",
        "preemptions": "sglang:num_retracted_requests_total",
        "prompt_tokens": "sglang:prompt_tokens_total",
        "generation_tokens": "sglang:generation_tokens_total",
    },
    max_over_label_sets=frozenset({"sglang:token_usage"}),
    phases=SGLANG_PHASES,
)

# llama.cpp's own server (`llama-server --metrics`), from
# https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md (/metrics): no KV
# usage and no prefix-cache counters there. llama-cpp-python's server has no /metrics at all.
LLAMACPP_METRICS = MetricNames(
    "llama.cpp", "llamacpp:",
    gauge_maxima={
        "requests_waiting_max": "llamacpp:requests_deferred",
        "requests_running_max": "llamacpp:requests_processing",
    },
    counter_deltas={
        "prompt_tokens": "llamacpp:prompt_tokens_total",
        "generation_tokens": "llamacpp:tokens_predicted_total",
    },
)
