"""Turn request records into the run's metrics (docs/metrics.md, Definitions).

Pure: no HTTP, no pytest. Every latency is a difference of client `perf_counter()` times, in
seconds. Each definition follows `vllm bench serve` where it is right; the comment on each says
where we differ, so numbers from the two tools can be compared knowingly
(docs/metrics.md, Other tools).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np

from pytest_llmperf.metrics import goodput, phases
from pytest_llmperf.metrics.energy import NAMES as ENERGY_NAMES
from pytest_llmperf.metrics.registry import SERVER_PREFIX, STATISTICS, lookup
from pytest_llmperf.metrics.turns import turn_metrics
from pytest_llmperf.records import RequestRecord

__all__ = [
    "RunMetrics",
    "Summary",
    "compute_metrics",
]


@dataclass(frozen=True, slots=True)
class Summary:
    """Statistics of one distribution; NaN everywhere (n=0) when it has no values."""

    n: int
    mean: float
    std: float
    p50: float
    p90: float
    p95: float
    p99: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Summary:
        data = np.asarray(list(values), dtype=float)
        if data.size == 0:
            # An empty distribution is a legitimate outcome (every request failed, or all
            # outputs were one token so no TPOT); NaN makes any threshold on it fail visibly.
            nan = math.nan
            return cls(0, nan, nan, nan, nan, nan, nan, nan, nan)
        # Linear-interpolated percentiles and the population std (ddof=0) are numpy's defaults
        # and exactly what `vllm bench serve` reports, so the two tools agree on the same data.
        p50, p90, p95, p99 = (float(p) for p in np.percentile(data, [50, 90, 95, 99]))
        return cls(
            n=int(data.size),
            mean=float(data.mean()),
            std=float(data.std(ddof=0)),
            p50=p50,
            p90=p90,
            p95=p95,
            p99=p99,
            min=float(data.min()),
            max=float(data.max()),
        )

    def get(self, stat: str) -> float:
        if stat not in STATISTICS:
            raise KeyError(f"unknown statistic {stat!r}: use one of {', '.join(STATISTICS)}")
        return getattr(self, stat)


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """Client-side metrics of one run. Distributions cover completed requests only."""

    ttft_s: Summary
    tpot_s: Summary
    itl_s: Summary
    icl_s: Summary
    e2el_s: Summary
    queue_s: Summary
    duration_s: float
    completed: int
    failed: int
    error_rate: float
    prompt_tokens: int
    output_tokens: int
    prompt_throughput_tok_s: float
    output_throughput_tok_s: float
    total_throughput_tok_s: float
    request_throughput_req_s: float
    length_mismatches: int
    tokens_estimated: int
    # Requests/s meeting the test's per-request SLO limits, and their share (goodput.py); NaN
    # when the test has no such limits.
    goodput_req_s: float = math.nan
    goodput_share: float = math.nan
    # A conversation's metrics by turn index under their gate names ("turn2:ttft_s.p50",
    # turns.turn_metrics); () for other runs. Per run, so repeats give a median and a spread
    # and A/B pairs a ratio, like every other metric.
    turns: tuple[tuple[str, float], ...] = ()
    # The server's /metrics summary of this run under its gate names ("server:
    # spec_decode_acceptance_rate", metrics/registry.py), so an SLO, a baseline or an A/B can
    # judge what only the server knows (a prefix-cache hit rate, a draft acceptance rate);
    # () where the server reported none. With the server's TTFT, also "frontend_s.mean": the
    # client's TTFT mean less the server's (metrics/phases.py).
    server: tuple[tuple[str, float], ...] = ()
    # Energy per token from the engine's GPUs' energy counters over this run's window
    # (metrics/energy.py); () where there is none (a CPU, a card without the counter).
    energy: tuple[tuple[str, float], ...] = ()

    def flat(self) -> dict[str, float]:
        """Every metric by the name `get` accepts: "ttft_s.p50", ..., "output_throughput_tok_s"."""
        out: dict[str, float] = {}
        for name in DISTRIBUTIONS:
            summary = getattr(self, name)
            for stat in STATISTICS:
                out[f"{name}.{stat}"] = float(getattr(summary, stat))
        for name in SCALARS:
            out[name] = float(getattr(self, name))
        out.update(self.turns)
        out.update(self.server)
        out.update(self.energy)
        return out

    def get(self, name: str) -> float:
        turn = dict(self.turns).get(name)
        if turn is not None:
            return turn
        server = dict(self.server).get(name)
        if server is not None:
            return server
        energy = dict(self.energy).get(name)
        if energy is not None:
            return energy
        if name in ENERGY_NAMES:
            raise KeyError(f"energy metric {name!r}: this run has no GPU energy reading (NVML's "
                           "energy counter, on the engine's GPUs; a CPU run has none)")
        if name.startswith(SERVER_PREFIX) or name == phases.FRONTEND:
            raise KeyError(f"server metric {name!r}: this run's server did not report it (it "
                           "is read from vLLM's /metrics, and only some engines have it: "
                           "spec_decode_* needs speculative decoding)")
        base, dot, stat = name.partition(".")
        if dot and base in DISTRIBUTIONS and stat in STATISTICS:
            return float(getattr(getattr(self, base), stat))
        if not dot and name in SCALARS:
            return float(getattr(self, name))
        raise KeyError(_unknown_metric(name))


DISTRIBUTIONS: tuple[str, ...] = tuple(
    f.name for f in fields(RunMetrics) if f.type in ("Summary", Summary)
)
SCALARS: tuple[str, ...] = tuple(f.name for f in fields(RunMetrics)
                                 if f.name not in DISTRIBUTIONS and f.name not in
                                 ("turns", "server", "energy"))


def _unknown_metric(name: str) -> str:
    return (
        f"unknown metric {name!r}: use a scalar ({', '.join(SCALARS)}) or a distribution with a "
        f"statistic ({DISTRIBUTIONS[0]}.p50; distributions: {', '.join(DISTRIBUTIONS)}; "
        f"statistics: {', '.join(STATISTICS)})"
    )


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


def _distributions(
    done: Sequence[RequestRecord], sent: Sequence[RequestRecord]
) -> dict[str, Summary]:
    return {
        # vllm: first chunk with `choices`, which can be an empty role chunk on chat; ours is the
        # first chunk carrying generated tokens.
        "ttft_s": Summary.of(r.chunk_times_s[0] - r.sent_s for r in done),
        # vllm: same formula; it re-tokenizes the text when usage is missing, we fall back to
        # the chunk token counts (RequestRecord.output_tokens).
        "tpot_s": Summary.of(request_tpot(r) for r in done if r.output_tokens > 1),
        # vllm's ITL is the raw per-chunk gap; ours spreads each gap over the later chunk's
        # tokens, so multi-token chunks (speculative decoding, stream intervals) do not inflate
        # it (https://github.com/vllm-project/vllm/issues/27485).
        "itl_s": Summary.of(x for r in done for x in request_itls(r)),
        # Raw gaps between token chunks: this is what vllm calls ITL (AIPerf calls it ICL).
        "icl_s": Summary.of(x for r in done for x in _gaps(r)),
        # vllm: last chunk with `choices`; ours is the last chunk carrying tokens.
        "e2el_s": Summary.of(r.chunk_times_s[-1] - r.sent_s for r in done),
        # Not in vllm, whose latencies hide client queueing
        # (https://github.com/vllm-project/vllm/issues/54101). Over every sent request, failed
        # ones included: the lag was the client's either way.
        "queue_s": Summary.of(r.sent_s - r.scheduled_s for r in sent),
    }


def _throughputs(
    done: Sequence[RequestRecord], sent: Sequence[RequestRecord], prompt: int, output: int
) -> dict[str, float]:
    # vllm: wall time of the whole benchmark run; ours is first send -> last token chunk, so
    # setup before the first send and teardown after the last token do not dilute throughput.
    duration = 0.0
    if done and sent:
        duration = max(r.chunk_times_s[-1] for r in done) - min(r.sent_s for r in sent)
    if duration <= 0.0:
        # No completed request (or clocks that make no sense): no rate can be claimed.
        return {
            "duration_s": 0.0,
            "prompt_throughput_tok_s": 0.0,
            "output_throughput_tok_s": 0.0,
            "total_throughput_tok_s": 0.0,
            "request_throughput_req_s": 0.0,
        }
    return {
        "duration_s": duration,
        # Prefill work: not in vllm bench serve, which prints only output and total tok/s; the
        # prompt tokens are the server's usage, as in the total.
        "prompt_throughput_tok_s": prompt / duration,
        "output_throughput_tok_s": output / duration,
        # vllm counts the intended prompt lengths; we count the server's usage.
        "total_throughput_tok_s": (prompt + output) / duration,
        "request_throughput_req_s": len(done) / duration,
    }


def _request_latencies(record: RequestRecord) -> dict[str, float] | None:
    """A request's own TTFT, TPOT and E2EL, for goodput; None if it failed. TPOT is 0 for a
    one-token output, as vllm's goodput counts it."""
    if not record.ok:
        return None
    first, last = record.chunk_times_s[0], record.chunk_times_s[-1]
    return {"ttft_s": first - record.sent_s, "e2el_s": last - record.sent_s,
            "tpot_s": request_tpot(record) if record.output_tokens > 1 else 0.0}


def compute_metrics(records: Sequence[RequestRecord],
                    goodput_limits: goodput.Limits | None = None,
                    server_metrics: Mapping[str, float] | None = None) -> RunMetrics:
    """`goodput_limits`: the test's per-request SLO limits (goodput.limits_from; None: no
    goodput). `server_metrics`: the run's /metrics summary
    (client/server_metrics.py), kept under "server:" names."""
    # Same as vllm: a request completes when it streamed tokens without an error; failed ones
    # are counted, never folded into the distributions.
    done = [r for r in records if r.ok]
    sent = [r for r in records if r.sent_s is not None]
    failed = len(records) - len(done)
    prompt = sum(_prompt_tokens(r) for r in done)
    output = sum(r.output_tokens for r in done)
    throughputs = _throughputs(done, sent, prompt, output)
    distributions = _distributions(done, sent)
    return RunMetrics(
        **distributions,
        **throughputs,
        **goodput.goodput([_request_latencies(r) for r in records], throughputs["duration_s"],
                          goodput_limits),
        completed=len(done),
        failed=failed,
        error_rate=failed / len(records) if records else 0.0,
        prompt_tokens=prompt,
        output_tokens=output,
        length_mismatches=sum(r.length_mismatch for r in records),
        tokens_estimated=sum(r.tokens_estimated for r in done),
        turns=turn_metrics(records),
        server=_server(distributions["ttft_s"].mean, server_metrics or {}),
    )


def _server(ttft_mean: float, summary: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    """The /metrics summary under its "server:" names, only what the registry knows (the
    summary also counts its own samples), and where it has the server's TTFT, frontend_s.mean."""
    named = {SERVER_PREFIX + name: float(value) for name, value in sorted(summary.items())
             if lookup(SERVER_PREFIX + name)}
    front = phases.frontend({**named, "ttft_s.mean": ttft_mean})
    if front is not None:
        named[phases.FRONTEND] = front
    return tuple(named.items())
