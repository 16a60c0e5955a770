"""Request records of known executed work, for the tests of metrics/work.py and
verdict/same_work.py: 32 requests forced to 16 tokens, and the builder to vary them."""

from __future__ import annotations

from pytest_llmperf.metrics.work import ExecutedWork
from pytest_llmperf.records import RequestRecord


def record(index: int, produced: int, *, forced: int = 16, reason: str = "length",
           cached: int | None = None, digest: int = 0, prompt: int = 32) -> RequestRecord:
    return RequestRecord(index=index, expected_prompt_tokens=prompt, expected_output_tokens=forced,
                         scheduled_s=0.0, sent_s=0.0, chunk_times_s=[0.1], chunk_tokens=[produced],
                         done_s=0.2, usage_prompt_tokens=prompt, usage_output_tokens=produced,
                         finish_reason=reason, cached_prompt_tokens=cached,
                         output_digest=digest or 1000 + index)


def work(records) -> ExecutedWork:
    return ExecutedWork.of(records)


FULL = [record(i, 16) for i in range(32)]
