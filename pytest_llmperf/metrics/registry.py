"""Every metric pytest-llmperf reports, once: its unit, which way is better, and how a table shows
it. The gate, the A/B judge, the run file, the tables and the plots all ask here, so a metric
cannot be better-when-lower in one place and higher in another (AIPerf declares its metrics the
same way: one class each with its tag, unit, header and flags).

A name is a base metric ("output_throughput_tok_s"), a distribution with a statistic
("ttft_s.p99"), an offline run's metric ("offline_output_throughput_tok_s": the same metric
measured by `LLM.generate`) or a server metric ("server:kv_cache_usage_max", from /metrics).
Units are in the names (docs/metrics.md); `scale` turns the unit into the one a table shows
(seconds into ms, a fraction into %).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pytest_llmperf.errors import InputError

__all__ = ["METRICS", "Metric", "UnknownMetricError", "direction", "formatter", "lookup"]

LOWER, HIGHER = "lower", "higher"
OFFLINE_PREFIX = "offline_"
SERVER_PREFIX = "server:"


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
    Metric("completed", "requests", HIGHER, "ok"),
    Metric("failed", "requests", LOWER, "fail"),
    Metric("error_rate", "fraction", LOWER),
    # Token counts of a fixed workload only drop when requests fail or stop short.
    Metric("prompt_tokens", "tokens", HIGHER),
    Metric("output_tokens", "tokens", HIGHER),
    Metric("output_throughput_tok_s", "tok/s", HIGHER, "out tok/s"),
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
    Metric("usd_per_1m_output_tok", "USD/1M tok", LOWER, "$/1M out",
           meaning="$/1M out, $/1M tot = dollars per million output and total tokens"),
    Metric("usd_per_1m_total_tok", "USD/1M tok", LOWER, "$/1M tot"),
    Metric("roofline_fraction", "fraction", HIGHER, "roof%", 100, (
        "roof% = the GPU memory-bandwidth lower bound of a decode step as a share of the "
        "measured TPOT p50 (docs/roofline.md)")),
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
)
BY_NAME: dict[str, Metric] = {metric.name: metric for metric in METRICS}
# As metrics.compute.Summary has them (a unit test holds the two together).
STATISTICS = ("n", "mean", "std", "p50", "p90", "p95", "p99", "min", "max")


def lookup(name: str) -> Metric | None:
    """The metric a name refers to ("ttft_s.p99" -> ttft_s), or None if it is none of ours."""
    base, dot, stat = name.partition(".")
    if base.startswith(OFFLINE_PREFIX) and base[len(OFFLINE_PREFIX):] in BY_NAME:
        base = base[len(OFFLINE_PREFIX):]
    metric = BY_NAME.get(base)
    if metric is None or bool(dot) != metric.distribution or (dot and stat not in STATISTICS):
        return None
    return metric


def known(name: str) -> Metric:
    """`lookup`, or UnknownMetricError naming the name and the forms a name takes."""
    metric = lookup(name)
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
    if unit == "s":
        if max((abs(v) for v in shown if math.isfinite(v)), default=0.0) >= 1:
            return lambda v: f"{v:.3f} s"
        return lambda v: f"{v * 1e3:.1f} ms" if abs(v) >= 1e-3 else f"{v * 1e3:.3f} ms"
    return lambda v: f"{v:.4g}"
