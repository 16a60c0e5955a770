"""Run metrics built by hand for the sweep and capacity tests: latency distributions of a given
p50 and p99, and a run of 128-token prompts and 64-token outputs around them."""

from __future__ import annotations

from pytest_llmperf.metrics.compute import RunMetrics, Summary


def dist(p50: float, p99: float | None = None, n: int = 200) -> Summary:
    p99 = p50 if p99 is None else p99
    return Summary(n=n, mean=p50, std=0.0, p50=p50, p90=p99, p95=p99, p99=p99, min=p50, max=p99)


def run_metrics(*, ttft: Summary, tpot: Summary, e2el: Summary, duration_s: float,
                completed: int, failed: int = 0, output_tokens: int | None = None) -> RunMetrics:
    output_tokens = completed * 64 if output_tokens is None else output_tokens
    return RunMetrics(
        ttft_s=ttft, tpot_s=tpot, itl_s=tpot, icl_s=tpot, e2el_s=e2el, queue_s=dist(0.0),
        duration_s=duration_s, completed=completed, failed=failed,
        error_rate=failed / (completed + failed), prompt_tokens=completed * 128,
        output_tokens=output_tokens, prompt_throughput_tok_s=completed * 128 / duration_s,
        output_throughput_tok_s=output_tokens / duration_s,
        total_throughput_tok_s=(output_tokens + completed * 128) / duration_s,
        request_throughput_req_s=completed / duration_s, length_mismatches=0, tokens_estimated=0,
    )
