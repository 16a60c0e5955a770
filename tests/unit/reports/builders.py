"""Results built out of hand-made request records, for the reports' tests. Times are binary
fractions (0.25, 0.0625, ...) so every cell is exact."""

from __future__ import annotations

from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.records import RequestRecord

ENGINE = "tiny-llama eager=True"
WORKLOAD = "fixed-16in-4out x1 @ concurrency 1"


def streamed(ttft: float = 0.25, gap: float = 0.25, tokens: int = 4) -> RequestRecord:
    """Scheduled at 0.9375, sent at 1.0 (62.5 ms client lag), then one token every `gap`."""
    times = [1.0 + ttft + k * gap for k in range(tokens)]
    return RequestRecord(
        index=0, expected_prompt_tokens=16, expected_output_tokens=tokens, scheduled_s=0.9375,
        sent_s=1.0, chunk_times_s=times, chunk_tokens=[1] * tokens, usage_prompt_tokens=16,
        usage_output_tokens=tokens,
    )


def result(test_id: str, *runs: list[RequestRecord], server=None) -> Result:
    metrics = [compute_metrics(records) for records in runs]
    return Result(
        test_id=test_id, key=test_id.split("::", 1)[1], engine={"model": "tiny"},
        engine_label=ENGINE, workload={}, workload_label=WORKLOAD, metrics=metrics[0],
        runs=tuple(metrics), records=tuple(runs[0]), server_metrics=server or {},
    )
