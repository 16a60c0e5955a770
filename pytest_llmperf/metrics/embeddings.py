"""Embeddings' numbers (workloads/embeddings.py sends them): requests/s, inputs/s, input
tokens/s and the request latency's percentiles, for the -v line and the run file. A rerank is
read the same way, its documents as the inputs (a rerank request's `batch_size`).

They are the run's own metrics read under their embeddings names: `request_throughput_req_s`,
`prompt_throughput_tok_s` (the server's `usage.prompt_tokens` over the run's duration) and
`e2el_s` (sent to the response's last byte: client/embeddings.py), plus the inputs embedded,
which only the requests know. An embedding generates no tokens: TTFT is the same instant as
E2EL, and TPOT and output throughput do not apply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmperf.metrics.breakdown import Breakdown, MeasuredRun
from pytest_llmperf.records import EMBEDDINGS, request_api

__all__ = ["Embeddings", "note", "of_run", "summary"]

LATENCY_STATS = ("p50", "p90", "p99", "mean")


def of_run(workload: Mapping[str, Any], metrics: Mapping[str, float]) -> dict[str, Any] | None:
    """`summary` of a run of `workload` (its recorded identity: Workload.to_dict), with its
    source's `batch_size` (1 for a source without one); None for a run that is not an
    embeddings one."""
    try:
        api = request_api(workload.get("api", "completions"))
    except ValueError:  # an API this process has not registered (a plugin's): not pooling here
        return None
    if not api.pooling:
        return None
    source = workload.get("source")
    batch = source.get(api.inputs, 1) if isinstance(source, Mapping) else 1
    found = summary(metrics, batch)
    # Embeddings, the first, wrote no `api`; every later pooling API names itself.
    return found if api == EMBEDDINGS else {"api": api.name, **found}


def summary(metrics: Mapping[str, float], batch_size: int) -> dict[str, Any]:
    """{"batch_size", "requests", "failed", "request_throughput_req_s",
    "input_throughput_inputs_s", "input_throughput_tok_s", "latency_s": {p50, p90, p99, mean}}
    from one run's flat metrics (RunMetrics.flat); a latency the run has not is None."""
    requests_s = metrics.get("request_throughput_req_s", 0.0)
    return {"batch_size": batch_size, "requests": int(metrics.get("completed", 0)),
            "failed": int(metrics.get("failed", 0)),
            "request_throughput_req_s": requests_s,
            "input_throughput_inputs_s": requests_s * batch_size,
            "input_throughput_tok_s": metrics.get("prompt_throughput_tok_s", 0.0),
            "latency_s": {stat: metrics.get(f"e2el_s.{stat}") for stat in LATENCY_STATS}}


def note(found: Mapping[str, Any]) -> str:
    """The -v line: the batch, the rates and the latency percentiles."""
    latency = ", ".join(f"{stat} {_ms(found['latency_s'][stat])}" for stat in LATENCY_STATS)
    rerank = found.get("api") == "rerank"
    what = (f"rerank ({found['batch_size']} documents a query)" if rerank
            else f"embeddings (batch {found['batch_size']})")
    return (f"{what}: {found['requests']} requests, "
            f"{found['failed']} failed; {found['request_throughput_req_s']:.2f} req/s, "
            f"{found['input_throughput_inputs_s']:.1f} {'documents' if rerank else 'inputs'}/s, "
            f"{found['input_throughput_tok_s']:.0f} input tok/s; latency {latency}")


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f} ms"


class Embeddings(Breakdown):
    """The run file's "embeddings": `of_run`'s numbers, and `note`'s line."""

    name = "embeddings"

    @classmethod
    def of(cls, result: MeasuredRun) -> Embeddings | None:
        found = of_run(result.workload.fields, result.metrics.flat())
        return None if found is None else cls(found)

    def notes(self) -> list[str]:
        return [note(self.to_plain())]
