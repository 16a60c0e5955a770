"""Every metric pytest-llmperf reports, once: its unit, which way is better, and how a table shows
it. The gate, the A/B judge, the run file, the tables and the plots all ask here, so a metric
cannot be better-when-lower in one place and higher in another (AIPerf declares its metrics the
same way: one class each with its tag, unit, header and flags).

A name is a base metric ("output_throughput_tok_s"), a distribution with a statistic
("ttft_s.p99"), an offline run's metric ("offline_output_throughput_tok_s": the same metric
measured by `LLM.generate`), a server metric ("server:kv_cache_usage_max", from /metrics) or a
conversation's metric over one turn index ("turn3:ttft_s.p50", metrics/turns.py).
Units are in the names (docs/metrics.md); `scale` turns the unit into the one a table shows
(seconds into ms, a fraction into %).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.spec_decode import POSITION_PREFIX

__all__ = ["METRICS", "Metric", "UnknownMetricError", "direction", "formatter", "lookup",
           "turn_of", "turn_problem"]

LOWER, HIGHER = "lower", "higher"
OFFLINE_PREFIX = "offline_"
SERVER_PREFIX = "server:"
# "turn<N>:<name>": <name> over the requests of a conversation's turn N (metrics/turns.py). Only
# what turns.by_turn computes per turn can be named.
TURN_PREFIX = "turn"
TURN_METRICS = ("ttft_s.p50", "ttft_s.p90", "ttft_s.mean", "e2el_s.p50", "e2el_s.p90",
                "e2el_s.mean", "failed")


class UnknownMetricError(InputError):
    """A metric name that no table, gate or target knows; the message lists the known ones."""


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str  # "s", "tok/s", "req/s", "requests", "tokens", "fraction", "USD/1M tok"
    better: str  # LOWER or HIGHER
    header: str = ""  # a table's column header for it ("TTFT"); "" where no table shows it
    scale: float = 1.0  # from `unit` to the unit a table shows (s -> ms: 1e3)
    meaning: str = ""  # for the legend under a table
    distribution: bool = False  # summarised by statistics: "ttft_s.p50"


def _latency(name: str, header: str, meaning: str) -> Metric:
    return Metric(name, "s", LOWER, header, 1e3, meaning, distribution=True)


METRICS: tuple[Metric, ...] = (
    _latency("ttft_s", "TTFT", "TTFT time to first token"),
    _latency("tpot_s", "TPOT", "TPOT time per output token after the first"),
    _latency("itl_s", "ITL", "ITL token-normalized inter-token latency"),
    _latency("icl_s", "ICL", "ICL inter-chunk latency (raw gaps between chunks)"),
    _latency("e2el_s", "E2EL", "E2EL end to end"),
    _latency("queue_s", "queue", "queue = client lag"),
    Metric("duration_s", "s", LOWER),
    # Cold start: the engine's time from launch to a healthy /health (engines/server.py), one
    # sample per start. A reused engine's tests carry the start that served them: the same
    # sample again, not a new one (docs/noise.md). Absent for --llmperf-endpoint's server.
    Metric("engine_start_s", "s", LOWER),
    Metric("completed", "requests", HIGHER, "ok"),
    Metric("failed", "requests", LOWER, "fail"),
    Metric("error_rate", "fraction", LOWER),
    # Token counts of a fixed workload only drop when requests fail or stop short.
    Metric("prompt_tokens", "tokens", HIGHER),
    Metric("output_tokens", "tokens", HIGHER),
    Metric("prompt_throughput_tok_s", "tok/s", HIGHER),  # prefill: prompt tokens / duration
    Metric("output_throughput_tok_s", "tok/s", HIGHER, "out tok/s"),
    # Output tok/s over the engine's GPUs (TP x PP x DP), GPU runs only (metrics/gpus.py).
    Metric("output_throughput_tok_s_per_gpu", "tok/s", HIGHER, "out/GPU",
           meaning="out/GPU = output tok/s per GPU the engine uses (TP x PP x DP)"),
    Metric("total_throughput_tok_s", "tok/s", HIGHER),
    Metric("request_throughput_req_s", "req/s", HIGHER, "req/s"),
    Metric("length_mismatches", "requests", LOWER),
    # Estimated chunk token counts make ITL less exact; fewer is better.
    Metric("tokens_estimated", "tokens", LOWER),
    Metric("goodput_req_s", "req/s", HIGHER, "good/s", meaning=(
        "good/s, good% = goodput: requests/s meeting every per-request SLO limit, and their "
        "share")),
    Metric("goodput_share", "fraction", HIGHER, "good%", 100),
    Metric("slo_capacity_req_s", "req/s", HIGHER),  # the highest rate that meets the SLO
    # A trace replay's capacity: the highest speedup (x its recorded pace) that meets the SLO.
    Metric("slo_capacity_speedup", "x", HIGHER),
    Metric("usd_per_1m_output_tok", "USD/1M tok", LOWER, "$/1M out",
           meaning=("$/1M out, $/1M tot = dollars per million output and total tokens, at the "
                    "engine's share of the price (on its engine line)")),
    Metric("usd_per_1m_total_tok", "USD/1M tok", LOWER, "$/1M tot"),
    Metric("roofline_fraction", "fraction", HIGHER, "roof%", 100, (
        "roof% = the GPU memory-bandwidth lower bound of a decode step as a share of the "
        "measured TPOT p50 (docs/roofline.md)")),
    # Energy per token from the engine's GPUs' energy counters over the measured requests
    # (metrics/energy.py, docs/gpu-telemetry.md); GPU runs only.
    Metric("energy_per_output_token_j", "J/tok", LOWER, "J/tok", meaning=(
        "J/tok = joules per output token, over all the engine's GPUs (NVML's energy counter)")),
    Metric("energy_per_token_j", "J/tok", LOWER),  # per prompt + output token
    Metric("output_tokens_per_joule", "tok/J", HIGHER),
    # Server side, from vLLM's /metrics (client/server_metrics.py).
    Metric("server:kv_cache_usage_max", "fraction", LOWER, "KV max%", 100,
           "KV max% = peak KV-cache use"),
    Metric("server:prefix_cache_hit_rate", "fraction", HIGHER, "hit%", 100,
           "hit% = prefix-cache hit rate"),
    Metric("server:requests_waiting_max", "requests", LOWER),
    Metric("server:requests_running_max", "requests", HIGHER),
    Metric("server:preemptions", "requests", LOWER),
    Metric("server:prefix_cache_queries", "tokens", HIGHER),
    Metric("server:prefix_cache_hits", "tokens", HIGHER),
    Metric("server:prompt_tokens", "tokens", HIGHER),
    Metric("server:generation_tokens", "tokens", HIGHER),
    # Speculative decoding, where the engine drafts (metrics/spec_decode.py): the counts are
    # context, the rate and the length are what to gate; per position: `_per_position`.
    Metric("server:spec_decode_drafts", "drafts", HIGHER),
    Metric("server:spec_decode_draft_tokens", "tokens", HIGHER),
    Metric("server:spec_decode_accepted_tokens", "tokens", HIGHER),
    Metric("server:spec_decode_acceptance_rate", "fraction", HIGHER, "acc%", 100,
           "acc% = draft tokens accepted (speculative decoding)"),
    Metric("server:spec_decode_mean_accepted_length", "tokens", HIGHER, "acc len",
           meaning="acc len = tokens per drafting step (1 + accepted per draft)"),
    # Where the time went: the engine's own timings of the measured requests, from its
    # request-timing histograms (metrics/phases.py, docs/phases.md): n, the mean and p50-p99
    # (a histogram has no std, min or max).
    *(_latency(SERVER_PREFIX + name, "", "") for name in (
        "ttft_s", "itl_s", "e2el_s", "queue_s", "prefill_s", "decode_s", "inference_s")),
    # The client's TTFT mean less the engine's: the API server, the network and the client
    # (mean only; present where the server times TTFT).
    _latency("frontend_s", "", ""),
)
BY_NAME: dict[str, Metric] = {metric.name: metric for metric in METRICS}
# As metrics.compute.Summary has them (a unit test holds the two together).
STATISTICS = ("n", "mean", "std", "p50", "p90", "p95", "p99", "min", "max")


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


def lookup(name: str) -> Metric | None:
    """The metric a name refers to ("ttft_s.p99" -> ttft_s, "turn2:ttft_s.p50" -> ttft_s), or
    None if it is none of ours."""
    turn = turn_of(name)
    if turn is not None:
        return lookup(turn[1]) if turn[1] in TURN_METRICS else None
    base, dot, stat = name.partition(".")
    if base.startswith(OFFLINE_PREFIX) and base[len(OFFLINE_PREFIX):] in BY_NAME:
        base = base[len(OFFLINE_PREFIX):]
    metric = BY_NAME.get(base) or _per_position(base)
    if metric is None or bool(dot) != metric.distribution or (dot and stat not in STATISTICS):
        return None
    return metric


def _per_position(base: str) -> Metric | None:
    """Speculative decoding's acceptance at one draft position ("server:spec_decode_acceptance_
    pos_0"): as many as the engine drafts, so matched by form rather than listed."""
    position = base.removeprefix(SERVER_PREFIX + POSITION_PREFIX)
    return Metric(base, "fraction", HIGHER) if position != base and position.isdigit() else None


def known(name: str) -> Metric:
    """`lookup`, or UnknownMetricError naming the name and the forms a name takes."""
    metric = lookup(name)
    if metric is None and (problem := turn_problem(name)):
        raise UnknownMetricError(f"unknown metric {name!r}: {problem}")
    if metric is None:
        raise UnknownMetricError(
            f"unknown metric {name!r}: use a scalar (output_throughput_tok_s, ...) or a "
            f"distribution with a statistic (ttft_s.p50; statistics: {', '.join(STATISTICS)})")
    return metric


def direction(name: str) -> str:
    """LOWER or HIGHER: which way `name` is better."""
    return known(name).better


def formatter(name: str, *shown: float) -> Callable[[float], str]:
    """How a message shows numbers of `name`: one unit for all of `shown`, chosen from the
    largest, so they line up ("212.0 ms vs 180.5 ms", "1.250 s vs 0.980 s")."""
    metric = lookup(name)
    unit = metric.unit if metric else ""
    if unit in ("tok/s", "req/s"):
        return lambda v: f"{v:.0f} {unit}" if abs(v) >= 100 else f"{v:.2f} {unit}"
    if unit == "x":  # a speedup: 2.83x
        return lambda v: f"{v:.3g}x"
    if unit == "s":
        if max((abs(v) for v in shown if math.isfinite(v)), default=0.0) >= 1:
            return lambda v: f"{v:.3f} s"
        return lambda v: f"{v * 1e3:.1f} ms" if abs(v) >= 1e-3 else f"{v * 1e3:.3f} ms"
    return lambda v: f"{v:.4g}"
