"""The metrics only the server knows, from its /metrics page sampled over the run
(client/server_metrics.py summarises it per engine kind): KV-cache use, prefix-cache hits,
queued and running requests, preemptions, and where the time went by the engine's own
request-timing histograms (metrics/phases.py, docs/phases.md). Named "server:<summary key>", so an
SLO, a baseline or an A/B judges them like the client's; absent where the server did not report
them. Speculative decoding's are in spec_decode.py.
"""

from __future__ import annotations

from pytest_llmperf.metrics import phases
from pytest_llmperf.metrics.metric import (
    HIGHER,
    LOWER,
    STATISTICS,
    Column,
    Metric,
    RunInputs,
    Value,
    latency,
)

__all__ = ["ABSENT", "METRICS", "PREFIX", "from_summary"]

PREFIX = "server:"
ABSENT = ("server metric {name}: this run's server did not report it (it is read from vLLM's "
          "/metrics, and only some engines have it: spec_decode_* needs speculative decoding)")


def from_summary(key: str, distribution: bool = False):
    """The computation of "server:<key>": the run's summary's value, or for a distribution the
    statistics the summary has of it (a histogram has n, the mean and p50-p99)."""
    def compute(run: RunInputs) -> Value:
        if not distribution:
            value = run.server.get(key)
            return None if value is None else float(value)
        found = {stat: float(run.server[f"{key}.{stat}"]) for stat in STATISTICS
                 if f"{key}.{stat}" in run.server}
        return found or None
    return compute


def server_metric(key: str, unit: str, better: str, *args, **more) -> Metric:
    return Metric(PREFIX + key, unit, better, *args, compute=from_summary(key), absent=ABSENT,
                  **more)


def _frontend(run: RunInputs) -> Value:
    """The client's TTFT mean less the engine's: the API server, the network and the client."""
    named = {PREFIX + key: value for key, value in run.server.items()}
    found = phases.frontend({**named, "ttft_s.mean": run.value("ttft_s").mean})
    return None if found is None else {"mean": found}


METRICS: tuple[Metric, ...] = (
    server_metric("kv_cache_usage_max", "fraction", LOWER, "KV max%", 100,
                  "KV max% = peak KV-cache use", columns=(Column("{:.0f}", 140, 20),)),
    server_metric("prefix_cache_hit_rate", "fraction", HIGHER, "hit%", 100,
                  "hit% = prefix-cache hit rate", columns=(Column("{:.0f}", 150, 19),)),
    server_metric("requests_waiting_max", "requests", LOWER),
    server_metric("requests_running_max", "requests", HIGHER),
    server_metric("preemptions", "requests", LOWER),
    server_metric("prefix_cache_queries", "tokens", HIGHER),
    server_metric("prefix_cache_hits", "tokens", HIGHER),
    server_metric("prompt_tokens", "tokens", HIGHER),
    server_metric("generation_tokens", "tokens", HIGHER),
    # Where the time went: the engine's own timings of the measured requests, from its
    # request-timing histograms (metrics/phases.py, docs/phases.md): n, the mean and p50-p99
    # (a histogram has no std, min or max).
    *(latency(PREFIX + key, compute=from_summary(key, distribution=True), absent=ABSENT)
      for key in ("ttft_s", "itl_s", "e2el_s", "queue_s", "prefill_s", "decode_s",
                  "inference_s")),
    # The client's TTFT mean less the engine's: the API server, the network and the client
    # (mean only; present where the server times TTFT).
    latency(phases.FRONTEND.partition(".")[0], needs=("ttft_s",), compute=_frontend,
            absent=ABSENT),
)
