"""The metrics of a run's requests as the client timed them (docs/metrics.md, Definitions): the
latency distributions, the counts and the throughputs, each defined with its computation.

Pure: no HTTP, no pytest. Every latency is a difference of client `perf_counter()` times, in
seconds. Each definition follows `vllm bench serve` where it is right; the comment on each says
where we differ, so numbers from the two tools can be compared knowingly
(docs/metrics.md, Other tools).
"""

from __future__ import annotations

from pytest_llmperf.metrics.metric import HIGHER, LOWER, Column, Metric, RunInputs, latency
from pytest_llmperf.records import RequestRecord

__all__ = ["METRICS", "request_itls", "request_tpot"]


def _gaps(record: RequestRecord) -> list[float]:
    times = record.chunk_times_s
    return [later - earlier for earlier, later in zip(times, times[1:])]


def request_itls(record: RequestRecord) -> list[float]:
    # A chunk of k tokens (k accepted draft tokens, a stream interval) is k inter-token gaps of
    # gap / k each: one value per token, so the percentiles weigh tokens, not chunks, and a
    # request's mean ITL is its decode time per token, as SGLang's bench_serving expands chunk
    # gaps (https://github.com/sgl-project/sglang/pull/33193 describes it).
    # A chunk is only recorded when it carries tokens; max(..., 1) keeps a broken zero count
    # from a misbehaving server from dividing by zero (the raw gap is then kept as is).
    return [gap / count
            for gap, tokens in zip(_gaps(record), record.chunk_tokens[1:])
            for count in (max(tokens, 1),) for _ in range(count)]


def request_tpot(record: RequestRecord) -> float:
    decode_s = record.chunk_times_s[-1] - record.chunk_times_s[0]
    return decode_s / (record.output_tokens - 1)


def _prompt_tokens(record: RequestRecord) -> int:
    # The server's usage is the truth; without it, fall back to the length the workload built
    # (which is what vllm bench always uses) rather than silently counting zero.
    if record.usage_prompt_tokens is not None:
        return record.usage_prompt_tokens
    return record.expected_prompt_tokens


def _duration(run: RunInputs) -> float:
    # vllm: wall time of the whole benchmark run; ours is first send -> last token chunk, so
    # setup before the first send and teardown after the last token do not dilute throughput.
    # No completed request (or clocks that make no sense): 0, and no rate can be claimed.
    if not (run.done and run.sent):
        return 0.0
    span = max(r.chunk_times_s[-1] for r in run.done) - min(r.sent_s for r in run.sent)
    return max(span, 0.0)


def _per_second(count: str | tuple[str, ...]):
    """A count (or the sum of counts) over the duration; 0 where the duration is 0."""
    names = (count,) if isinstance(count, str) else count

    def rate(run: RunInputs) -> float:
        duration = run.value("duration_s")
        return sum(run.value(name) for name in names) / duration if duration > 0 else 0.0
    return rate


def _column(fmt: str, order: int, priority: int | None = None, statistic: str = "") -> Column:
    return Column(fmt, order, priority, statistic)


METRICS: tuple[Metric, ...] = (
    # vllm: first chunk with `choices`, which can be an empty role chunk on chat; ours is the
    # first chunk carrying generated tokens.
    latency("ttft_s", "TTFT", "TTFT time to first token", noise="TTFT",
            columns=(_column("{:.1f}", 80, 2, "p50"), _column("{:.1f}", 90, 12, "p99")),
            samples=lambda run: [r.ttft_s for r in run.done]),
    # vllm: same formula; it re-tokenizes the text when usage is missing, we fall back to the
    # chunk token counts (RequestRecord.output_tokens).
    latency("tpot_s", "TPOT", "TPOT time per output token after the first", noise="TPOT",
            columns=(_column("{:.2f}", 100, 3, "p50"),),
            samples=lambda run: [request_tpot(r) for r in run.done if r.output_tokens > 1]),
    # vllm's ITL is the raw per-chunk gap; ours spreads each gap over the later chunk's tokens,
    # so multi-token chunks (speculative decoding, stream intervals) do not inflate it
    # (https://github.com/vllm-project/vllm/issues/27485).
    latency("itl_s", "ITL", "ITL token-normalized inter-token latency", noise="ITL",
            columns=(_column("{:.2f}", 110, 21, "p50"),),
            samples=lambda run: [x for r in run.done for x in request_itls(r)]),
    # Raw gaps between token chunks: this is what vllm calls ITL (AIPerf calls it ICL). Raw gaps
    # move as ITL does: ITL's prior.
    latency("icl_s", "ICL", "ICL inter-chunk latency (raw gaps between chunks)", noise="ITL",
            samples=lambda run: [x for r in run.done for x in _gaps(r)]),
    # vllm: last chunk with `choices`; ours is the last chunk carrying tokens.
    latency("e2el_s", "E2EL", "E2EL end to end", noise="E2EL",
            columns=(_column("{:.0f}", 120, 7, "p50"),),
            samples=lambda run: [r.e2el_s for r in run.done]),
    # Not in vllm, whose latencies hide client queueing
    # (https://github.com/vllm-project/vllm/issues/54101). Over every sent request, failed ones
    # included: the lag was the client's either way.
    latency("queue_s", "queue", "queue = client lag", columns=(_column("{:.2f}", 130, 22, "p99"),),
            samples=lambda run: [r.sent_s - r.scheduled_s for r in run.sent]),
    Metric("duration_s", "s", LOWER, compute=_duration),
    Metric("completed", "requests", HIGHER, "ok", columns=(_column("{:.0f}", 10, 4),),
           compute=lambda run: len(run.done)),
    Metric("failed", "requests", LOWER, "fail", columns=(_column("{:.0f}", 20, 5),),
           compute=lambda run: len(run.records) - len(run.done)),
    Metric("error_rate", "fraction", LOWER, needs=("failed",),
           compute=lambda run: run.value("failed") / len(run.records) if run.records else 0.0),
    # Token counts of a fixed workload only drop when requests fail or stop short.
    Metric("prompt_tokens", "tokens", HIGHER,
           compute=lambda run: sum(_prompt_tokens(r) for r in run.done)),
    Metric("output_tokens", "tokens", HIGHER,
           compute=lambda run: sum(r.output_tokens for r in run.done)),
    # Prefill work: not in vllm bench serve, which prints only output and total tok/s; the
    # prompt tokens are the server's usage, as in the total.
    Metric("prompt_throughput_tok_s", "tok/s", HIGHER, needs=("duration_s", "prompt_tokens"),
           noise="throughput",
           compute=_per_second("prompt_tokens")),
    Metric("output_throughput_tok_s", "tok/s", HIGHER, "out tok/s",
           columns=(_column("{:.1f}", 30, 1),), needs=("duration_s", "output_tokens"),
           noise="throughput",
           compute=_per_second("output_tokens")),
    # vllm counts the intended prompt lengths; we count the server's usage.
    Metric("total_throughput_tok_s", "tok/s", HIGHER,
           needs=("duration_s", "prompt_tokens", "output_tokens"), noise="throughput",
           compute=_per_second(("prompt_tokens", "output_tokens"))),
    Metric("request_throughput_req_s", "req/s", HIGHER, "req/s",
           columns=(_column("{:.2f}", 50, 13),), needs=("duration_s", "completed"),
           noise="throughput",
           compute=_per_second("completed")),
    Metric("length_mismatches", "requests", LOWER,
           compute=lambda run: sum(r.length_mismatch for r in run.records)),
    # Estimated chunk token counts make ITL less exact; fewer is better.
    Metric("tokens_estimated", "tokens", LOWER,
           compute=lambda run: sum(r.tokens_estimated for r in run.done)),
)
