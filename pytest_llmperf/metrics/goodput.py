"""Request goodput: the completed requests per second whose own TTFT, TPOT and end-to-end latency
each meet their limit, as `vllm bench serve --goodput` and DistServe define it (docs/goodput.md).

The limits come from the test's SLO: every `max` bound it puts on a statistic of `ttft_s`,
`tpot_s`, `e2el_s` or a reasoning model's `ttfo_s` (metrics/reasoning.py) is a limit on each
request's own value (SLO(max={"ttft_s.p90": 0.5}) makes "TTFT <= 500 ms" the TTFT limit).
Where the SLO bounds several statistics of one metric the tightest bound is the limit, since a
good request meets every limit. Like vLLM, a request with one output token has a TPOT of 0, and
goodput is over the same duration as the request throughput, so goodput <= request throughput.
`goodput_share` is the good requests' share of all the requests sent, failed ones included.

Both are higher-is-better metrics of every run with such an SLO (NaN without one): an SLO or a
baseline can gate them like any other (SLO(min={"goodput_share": 0.9}) is DistServe's "90%
attainment"). The fixture hands the SLO's limits (`limits_from`) down the measuring path
(session/runner.py, session/ab_run.py) to compute_metrics as its `goodput_limits` argument.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pytest_llmperf.metrics.metric import HIGHER, Column, Metric, RunInputs
from pytest_llmperf.metrics.reasoning import request_ttfo
from pytest_llmperf.metrics.request_metrics import request_tpot
from pytest_llmperf.records import RequestRecord

# Per-request latencies a limit can apply to: vLLM's --goodput keys ttft, tpot, e2el; and a
# reasoning model's time to first output token (metrics/reasoning.py).
LIMITED = ("ttft_s", "tpot_s", "e2el_s", "ttfo_s")
NAMES = ("goodput_req_s", "goodput_share")

Limits = Mapping[str, float]  # base metric ("ttft_s") -> seconds


def limits_from(slo) -> dict[str, float]:
    """The per-request limits an SLO sets ({} without an SLO or without latency bounds)."""
    limits: dict[str, float] = {}
    for name, bound in (getattr(slo, "max", None) or {}).items():
        base = name.partition(".")[0]
        if base in LIMITED:
            limits[base] = min(bound, limits.get(base, math.inf))
    return limits


def is_good(latencies: Mapping[str, float] | None, limits: Limits) -> bool:
    """A request is good when it completed and its every limited latency is within its limit
    (`latencies` is None for a failed request)."""
    return latencies is not None and all(latencies[name] <= limit
                                         for name, limit in limits.items())


def goodput(latencies: Sequence[Mapping[str, float] | None], duration_s: float,
            limits: Limits | None) -> dict[str, float]:
    """goodput_req_s and goodput_share of one run, from each sent request's latencies (None:
    failed); NaN for both without limits."""
    if not limits:
        return {name: math.nan for name in NAMES}
    good = sum(is_good(request, limits) for request in latencies)
    return {"goodput_req_s": good / duration_s if duration_s > 0 else 0.0,
            "goodput_share": good / len(latencies) if latencies else math.nan}


def request_latencies(record: RequestRecord) -> dict[str, float] | None:
    """A request's own TTFT, TPOT and E2EL, for goodput; None if it failed. TPOT is 0 for a
    one-token output, as vllm's goodput counts it."""
    if not record.ok:
        return None
    return {"ttft_s": record.ttft_s, "e2el_s": record.e2el_s,
            "tpot_s": request_tpot(record) if record.output_tokens > 1 else 0.0,
            "ttfo_s": _ttfo(record, record.ttft_s)}


def _ttfo(record: RequestRecord, ttft: float) -> float:
    """Its time to first output token: a reasoning request's first answer chunk (inf: the
    answer never started, which no limit is met by), another request's TTFT (all its output
    is answer)."""
    if record.reasoning_tokens is None:
        return ttft
    ttfo = request_ttfo(record)
    return math.inf if ttfo is None else ttfo


def _of_run(name: str):
    def compute(run: RunInputs) -> float:
        latencies = [request_latencies(record) for record in run.records]
        return goodput(latencies, run.value("duration_s"), run.goodput_limits)[name]
    return compute


_LEGEND = ("good/s, good% = goodput: requests/s meeting every per-request SLO limit, and their "
           "share")
METRICS = (
    Metric("goodput_req_s", "req/s", HIGHER, "good/s", meaning=_LEGEND,
           columns=(Column("{:.2f}", 60, 14, optional=True),), needs=("duration_s",),
           compute=_of_run("goodput_req_s")),
    Metric("goodput_share", "fraction", HIGHER, "good%", 100,
           columns=(Column("{:.0f}", 70, 6, optional=True),), needs=("duration_s",),
           compute=_of_run("goodput_share")),
)
