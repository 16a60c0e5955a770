"""Latency by LoRA adapter from hand-built records; every number is worked out in a comment."""

from __future__ import annotations

import math

import pytest

from pytest_llmperf.metrics import lora, registry
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.records import RequestRecord


def record(model: str | None, sent: float, times: list[float], error: str | None = None
           ) -> RequestRecord:
    """One token per chunk: TTFT = times[0] - sent, TPOT = (times[-1] - times[0]) / (n - 1)."""
    return RequestRecord(index=0, expected_prompt_tokens=8, expected_output_tokens=len(times),
                         scheduled_s=sent, sent_s=sent, chunk_times_s=times,
                         chunk_tokens=[1] * len(times), usage_output_tokens=len(times),
                         error=error, model=model)


RECORDS = [
    record(None, 0.0, [0.010, 0.012, 0.014]),  # base: TTFT 10 ms, TPOT 2 ms
    record(None, 0.0, [0.030, 0.034, 0.038]),  # base: TTFT 30 ms, TPOT 4 ms
    record("sql", 1.0, [1.040, 1.046, 1.052]),  # sql: TTFT 40 ms, TPOT 6 ms
    record("sql", 1.0, [], error="HTTP 500"),  # sql: failed
    record("chat", 2.0, [2.020, 2.030]),  # chat: TTFT 20 ms, TPOT 10 ms
]


def test_each_adapter_and_the_base_model_have_a_row():
    rows = lora.by_adapter(RECORDS)
    assert list(rows) == ["base", "chat", "sql"]
    expected = {"base": (2, 0, 0.020, 0.020, 0.003, 0.003),  # p50 of 2 values is their mean
                "chat": (1, 0, 0.020, 0.020, 0.010, 0.010),
                "sql": (2, 1, 0.040, 0.040, 0.006, 0.006)}
    for name, (requests, failed, ttft_p50, ttft_mean, tpot_p50, tpot_mean) in expected.items():
        row = rows[name]
        assert (row["requests"], row["failed"]) == (requests, failed)
        assert row["ttft_s.p50"] == pytest.approx(ttft_p50)
        assert row["ttft_s.mean"] == pytest.approx(ttft_mean)
        assert row["tpot_s.p50"] == pytest.approx(tpot_p50)
        assert row["tpot_s.mean"] == pytest.approx(tpot_mean)


def test_a_run_without_adapters_has_no_rows():
    assert lora.by_adapter(RECORDS[:2]) == {}
    assert lora.adapter_metrics(RECORDS[:2]) == {}


def test_the_lines_set_each_adapter_against_the_base_model():
    assert lora.notes(lora.by_adapter(RECORDS)) == [
        "LoRA base: 2 requests, 0 failed; TTFT p50 20.0 ms, TPOT p50 3.00 ms",
        "LoRA chat: 1 requests, 0 failed; TTFT p50 20.0 ms (1.00x base), TPOT p50 10.00 ms "
        "(3.33x base)",
        "LoRA sql: 2 requests, 1 failed; TTFT p50 40.0 ms (2.00x base), TPOT p50 6.00 ms "
        "(2.00x base)"]


def test_without_a_base_share_the_lines_have_no_ratio_and_an_empty_row_shows_a_dash():
    rows = lora.by_adapter([RECORDS[2], record("down", 3.0, [], error="HTTP 500")])
    assert lora.notes(rows) == [
        "LoRA down: 1 requests, 1 failed; TTFT p50 -, TPOT p50 -",
        "LoRA sql: 1 requests, 0 failed; TTFT p50 40.0 ms, TPOT p50 6.00 ms"]


def test_each_row_is_a_gate_name_of_the_run():
    flat = compute_metrics(RECORDS).flat()
    assert flat["lora:sql:ttft_s.p50"] == pytest.approx(0.040)
    assert flat["lora:base:tpot_s.mean"] == pytest.approx(0.003)
    assert flat["lora:sql:failed"] == 1
    down = compute_metrics([record("down", 3.0, [], error="HTTP 500")]).flat()
    assert math.isnan(down["lora:down:ttft_s.p50"])  # gated, it fails visibly


def test_an_adapters_name_resolves_to_its_metric():
    assert registry.direction("lora:sql-lora:ttft_s.p50") == registry.direction("ttft_s.p50")
    assert registry.lookup("lora:a:b:tpot_s.mean") is not None  # a name may hold a colon
    assert registry.lookup("lora:sql:ttft_s.p99") is None  # a row keeps p50 and mean only
