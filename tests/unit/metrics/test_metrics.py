"""Metrics from hand-built records; every expected number is worked out in the comments."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from pytest_llmperf.metrics import registry
from pytest_llmperf.metrics.compute import (
    RunMetrics,
    Summary,
    compute_metrics,
    request_itls,
)
from pytest_llmperf.metrics.registry import direction as direction_of
from pytest_llmperf.records import RequestRecord

UNKNOWN_TTFT = (
    "unknown metric 'ttft.p50': use a scalar (duration_s, completed, failed, error_rate, "
    "prompt_tokens, output_tokens, prompt_throughput_tok_s, output_throughput_tok_s, "
    "total_throughput_tok_s, "
    "request_throughput_req_s, length_mismatches, tokens_estimated, goodput_req_s, "
    "goodput_share) or a distribution with a "
    "statistic (ttft_s.p50; distributions: ttft_s, tpot_s, itl_s, icl_s, e2el_s, queue_s; "
    "statistics: n, mean, std, p50, p90, p95, p99, min, max)"
)


def record(
    sent: float | None,
    times: list[float],
    tokens: list[int],
    *,
    usage_out: int | None = None,
    usage_prompt: int | None = None,
    expected_out: int | None = None,
    expected_prompt: int = 8,
    scheduled: float | None = None,
    error: str | None = None,
    estimated: bool = False,
) -> RequestRecord:
    return RequestRecord(
        index=0,
        expected_prompt_tokens=expected_prompt,
        expected_output_tokens=expected_out if expected_out is not None else sum(tokens),
        scheduled_s=scheduled if scheduled is not None else (sent or 0.0),
        sent_s=sent,
        chunk_times_s=times,
        chunk_tokens=tokens,
        usage_prompt_tokens=usage_prompt,
        usage_output_tokens=usage_out,
        error=error,
        tokens_estimated=estimated,
    )


def request_a() -> RequestRecord:
    # Sent 10.0 (scheduled 9.9); chunks 10.2/10.3/10.5 with 1/1/2 tokens; usage 4 out, 8 in.
    return record(10.0, [10.2, 10.3, 10.5], [1, 1, 2], usage_out=4, usage_prompt=8, scheduled=9.9)


def request_b() -> RequestRecord:
    # Sent 10.1 (scheduled 10.0); chunks 10.4/12.0 with 3/3 tokens; usage 6 out, 12 in.
    return record(10.1, [10.4, 12.0], [3, 3], usage_out=6, usage_prompt=12, scheduled=10.0)


def request_failed() -> RequestRecord:
    # Sent 10.05 (scheduled 10.0), then an HTTP error before any token.
    return record(10.05, [], [], scheduled=10.0, expected_out=4, error="HTTP 500")


# Summary


def test_summary_of_known_values():
    s = Summary.of([4.0, 1.0, 3.0, 2.0])
    assert s.n == 4
    assert s.mean == pytest.approx(2.5)
    # Population std (ddof=0): sqrt(((1.5^2 + 0.5^2) * 2) / 4) = sqrt(1.25).
    assert s.std == pytest.approx(math.sqrt(1.25))
    # Linear interpolation over sorted [1, 2, 3, 4]: rank q * 3.
    assert s.p50 == pytest.approx(2.5)
    assert s.p90 == pytest.approx(3.7)
    assert s.p95 == pytest.approx(3.85)
    assert s.p99 == pytest.approx(3.97)
    assert (s.min, s.max) == (1.0, 4.0)


def test_summary_single_value_has_zero_std():
    s = Summary.of([0.25])
    assert (s.n, s.mean, s.std, s.p99, s.min, s.max) == (1, 0.25, 0.0, 0.25, 0.25, 0.25)


def test_summary_empty_is_nan_not_error():
    s = Summary.of([])
    assert s.n == 0
    for stat in ("mean", "std", "p50", "p90", "p95", "p99", "min", "max"):
        assert math.isnan(s.get(stat)), stat


def test_summary_get_by_name():
    s = Summary.of([1.0, 2.0, 3.0])
    assert s.get("p50") == pytest.approx(2.0)
    assert s.get("n") == 3
    assert s.get("max") == 3.0


def test_summary_get_unknown_lists_valid_names():
    with pytest.raises(KeyError) as info:
        Summary.of([1.0]).get("p98")
    assert info.value.args[0] == (
        "unknown statistic 'p98': use one of n, mean, std, p50, p90, p95, p99, min, max"
    )


# Latency definitions


def test_single_request_hand_computed():
    m = compute_metrics([request_a()])
    assert m.ttft_s.mean == pytest.approx(0.2)  # 10.2 - 10.0
    assert m.e2el_s.mean == pytest.approx(0.5)  # 10.5 - 10.0
    assert m.tpot_s.mean == pytest.approx(0.1)  # (0.5 - 0.2) / (4 - 1)
    assert m.queue_s.mean == pytest.approx(0.1)  # 10.0 - 9.9
    # Raw chunk gaps: 0.1, 0.2.
    assert (m.icl_s.n, m.icl_s.min, m.icl_s.max) == (2, pytest.approx(0.1), pytest.approx(0.2))
    # Token-normalized: 0.1 / 1, then 0.2 / 2 for each of the last chunk's 2 tokens.
    assert (m.itl_s.n, m.itl_s.min, m.itl_s.max) == (3, pytest.approx(0.1), pytest.approx(0.1))
    assert (m.ttft_s.n, m.e2el_s.n, m.tpot_s.n) == (1, 1, 1)


def test_multi_token_chunks_itl_differs_from_icl():
    m = compute_metrics([request_b()])
    assert m.icl_s.mean == pytest.approx(1.6)  # 12.0 - 10.4
    assert m.itl_s.mean == pytest.approx(1.6 / 3)  # the later chunk carried 3 tokens
    assert m.ttft_s.mean == pytest.approx(0.3)  # 10.4 - 10.1
    assert m.e2el_s.mean == pytest.approx(1.9)  # 12.0 - 10.1
    assert m.tpot_s.mean == pytest.approx(1.6 / 5)  # (1.9 - 0.3) / (6 - 1)


def test_a_chunk_of_k_tokens_counts_as_k_inter_token_gaps():
    # Speculative decoding: 1 token, then 4 accepted tokens 0.4 s later, then 1 token 0.3 s later.
    r = record(10.0, [10.2, 10.6, 10.9], [1, 4, 1], usage_out=6)
    assert request_itls(r) == pytest.approx([0.1, 0.1, 0.1, 0.1, 0.3])
    m = compute_metrics([r])
    assert (m.itl_s.n, m.itl_s.p50) == (5, pytest.approx(0.1))
    # Per token, the mean is the request's TPOT, (10.9 - 10.2) / (6 - 1); one value per chunk
    # would make it (0.1 + 0.3) / 2.
    assert m.itl_s.mean == pytest.approx(m.tpot_s.mean) == pytest.approx(0.14)
    assert m.icl_s.n == 2  # the raw gaps stay one per chunk


def test_gaps_are_pooled_across_requests():
    m = compute_metrics([request_a(), request_b()])
    # icl pooled: [0.1, 0.2, 1.6]; itl pooled, one value per token: [0.1] * 3 + [1.6/3] * 3.
    assert m.icl_s.n == 3
    assert m.icl_s.mean == pytest.approx(1.9 / 3)
    assert m.icl_s.p50 == pytest.approx(0.2)
    assert m.itl_s.n == 6
    assert m.itl_s.mean == pytest.approx(1.9 / 6)
    assert m.itl_s.p50 == pytest.approx((0.1 + 1.6 / 3) / 2)
    assert m.ttft_s.p50 == pytest.approx(0.25)  # median of 0.2 and 0.3


def test_tpot_uses_server_usage_not_chunk_count():
    # Two chunks of one token each, but the server says 5 tokens: (10.5 - 10.1) / (5 - 1).
    m = compute_metrics([record(10.0, [10.1, 10.5], [1, 1], usage_out=5, expected_out=5)])
    assert m.tpot_s.mean == pytest.approx(0.1)
    assert m.output_tokens == 5


def test_tpot_falls_back_to_chunk_tokens_without_usage():
    m = compute_metrics([record(10.0, [10.1, 10.5], [1, 2])])
    assert m.tpot_s.mean == pytest.approx(0.2)  # 0.4 / (3 - 1)
    assert m.output_tokens == 3


def test_tpot_skips_single_token_outputs():
    m = compute_metrics([record(10.0, [10.3], [1], usage_out=1), request_a()])
    assert m.tpot_s.n == 1
    assert m.tpot_s.mean == pytest.approx(0.1)
    assert m.ttft_s.n == 2
    assert m.icl_s.n == 2  # the one-chunk request has no gap


# Failures and counts


def test_failed_requests_counted_not_measured():
    broken_mid_stream = record(10.0, [10.1], [1], scheduled=10.0, error="connection reset")
    m = compute_metrics([request_a(), request_b(), request_failed(), broken_mid_stream])
    assert (m.completed, m.failed) == (2, 2)
    assert m.error_rate == pytest.approx(0.5)
    assert m.ttft_s.n == 2
    assert m.ttft_s.min == pytest.approx(0.2)  # the broken request's 0.1 is not counted
    assert m.output_tokens == 10
    assert m.prompt_tokens == 20
    # Client lag covers every sent request: 0.1, 0.1, 0.05, 0.0.
    assert m.queue_s.n == 4
    assert m.queue_s.mean == pytest.approx(0.25 / 4)


def test_all_failed_gives_zero_rates():
    m = compute_metrics([request_failed(), record(None, [], [], error="not sent")])
    assert (m.completed, m.failed, m.error_rate) == (0, 2, 1.0)
    assert (m.duration_s, m.output_throughput_tok_s, m.request_throughput_req_s) == (0, 0, 0)
    assert m.ttft_s.n == 0 and math.isnan(m.ttft_s.p50)
    assert m.queue_s.n == 1  # the unsent one has no send time


def test_empty_input():
    m = compute_metrics([])
    assert (m.completed, m.failed, m.error_rate) == (0, 0, 0.0)
    assert (m.prompt_tokens, m.output_tokens) == (0, 0)
    assert (m.length_mismatches, m.tokens_estimated) == (0, 0)
    assert m.duration_s == 0.0
    assert (m.prompt_throughput_tok_s, m.total_throughput_tok_s) == (0.0, 0.0)
    assert all(getattr(m, name).n == 0 for name in ("ttft_s", "tpot_s", "itl_s", "queue_s"))


def test_length_mismatch_counts_completed_only():
    short = record(10.0, [10.1, 10.2], [1, 1], usage_out=2, expected_out=4)
    failed_short = record(10.0, [10.1], [1], expected_out=4, error="timeout")
    m = compute_metrics([request_a(), short, failed_short])
    assert m.length_mismatches == 1


def test_tokens_estimated_counts_completed_only():
    estimated = record(10.0, [10.1], [1], estimated=True)
    failed_estimated = record(10.0, [10.1], [1], estimated=True, error="timeout")
    m = compute_metrics([estimated, failed_estimated, request_a()])
    assert m.tokens_estimated == 1


def test_prompt_tokens_fall_back_to_expected_without_usage():
    m = compute_metrics([record(10.0, [10.1], [1], expected_prompt=7), request_a()])
    assert m.prompt_tokens == 15  # 7 expected + 8 from usage


# Throughput


def test_throughput_is_tokens_over_first_send_to_last_chunk():
    m = compute_metrics([request_a(), request_b(), request_failed()])
    assert m.duration_s == pytest.approx(2.0)  # 12.0 - 10.0
    assert m.output_throughput_tok_s == pytest.approx(10 / 2.0)
    assert m.total_throughput_tok_s == pytest.approx((20 + 10) / 2.0)
    # Prefill: the completed requests' prompt tokens (20, the failed one's not counted).
    assert m.prompt_throughput_tok_s == pytest.approx(20 / 2.0)
    assert m.request_throughput_req_s == pytest.approx(2 / 2.0)


def test_first_send_counts_failed_requests():
    early_failure = record(9.0, [], [], error="HTTP 500")
    m = compute_metrics([request_a(), early_failure])
    assert m.duration_s == pytest.approx(1.5)  # 10.5 - 9.0
    assert m.output_throughput_tok_s == pytest.approx(4 / 1.5)


def test_zero_duration_gives_zero_rates():
    m = compute_metrics([record(10.0, [10.0], [1], usage_out=1)])
    assert m.completed == 1
    assert (m.duration_s, m.output_throughput_tok_s, m.total_throughput_tok_s) == (0, 0, 0)
    assert (m.prompt_throughput_tok_s, m.request_throughput_req_s) == (0, 0)


# Names


def test_flat_has_every_metric_by_name():
    flat = compute_metrics([request_a(), request_b()]).flat()
    assert len(flat) == 6 * 9 + 14
    assert flat["ttft_s.p50"] == pytest.approx(0.25)
    assert flat["ttft_s.n"] == 2.0
    assert flat["itl_s.max"] == pytest.approx(1.6 / 3)
    assert flat["completed"] == 2.0
    assert flat["output_throughput_tok_s"] == pytest.approx(5.0)
    assert flat["prompt_throughput_tok_s"] == pytest.approx(10.0)
    assert "ttft_s" not in flat


def test_get_resolves_distribution_and_scalar_names():
    m = compute_metrics([request_a(), request_b()])
    assert m.get("e2el_s.max") == pytest.approx(1.9)
    assert m.get("tpot_s.mean") == pytest.approx((0.1 + 0.32) / 2)
    assert m.get("output_throughput_tok_s") == pytest.approx(5.0)
    assert m.get("failed") == 0.0
    # NaN (goodput without an SLO) is compared as the same NaN.
    assert all(m.get(name) == value or math.isnan(value) and math.isnan(m.get(name))
               for name, value in m.flat().items())


def test_get_unknown_metric_message():
    m = compute_metrics([request_a()])
    with pytest.raises(KeyError) as info:
        m.get("ttft.p50")
    assert info.value.args[0] == UNKNOWN_TTFT


@pytest.mark.parametrize("name", ["ttft_s", "ttft_s.p98", "completed.p50", "ttft_s.p50.x", ""])
def test_get_rejects_malformed_names(name):
    m = compute_metrics([request_a()])
    with pytest.raises(KeyError) as info:
        m.get(name)
    assert info.value.args[0] == UNKNOWN_TTFT.replace("'ttft.p50'", repr(name))


# Directions


@pytest.mark.parametrize(
    ("name", "direction"),
    [
        ("ttft_s.p50", "lower"),
        ("itl_s.p99", "lower"),
        ("queue_s.max", "lower"),
        ("error_rate", "lower"),
        ("failed", "lower"),
        ("length_mismatches", "lower"),
        ("completed", "higher"),
        ("prompt_throughput_tok_s", "higher"),
        ("output_throughput_tok_s", "higher"),
        ("total_throughput_tok_s", "higher"),
        ("request_throughput_req_s", "higher"),
    ],
)
def test_direction_of(name, direction):
    assert direction_of(name) == direction


def test_every_metric_has_a_direction():
    names = compute_metrics([request_a()]).flat()
    assert {name.partition(".")[0] for name in names} <= set(registry.BY_NAME)
    assert {metric.better for metric in registry.METRICS} == {"lower", "higher"}
    assert all(direction_of(name) in ("lower", "higher") for name in names)


def test_the_registry_knows_the_statistics_a_summary_has():
    assert registry.STATISTICS == tuple(field.name for field in fields(Summary))


def test_direction_of_unknown_metric():
    with pytest.raises(registry.UnknownMetricError) as info:
        direction_of("ttft.p50")
    assert str(info.value) == (
        "unknown metric 'ttft.p50': use a scalar (output_throughput_tok_s, ...) or a "
        "distribution with a statistic (ttft_s.p50; statistics: n, mean, std, p50, p90, p95, "
        "p99, min, max)")


def test_run_metrics_is_frozen():
    m = compute_metrics([request_a()])
    assert isinstance(m, RunMetrics)
    with pytest.raises(AttributeError):
        m.completed = 3  # type: ignore[misc]


def test_server_metrics_are_judged_under_their_gate_names():
    # What client/server_metrics.py summarised for the run, its own sample count included.
    metrics = compute_metrics([request_a(), request_b()], server_metrics={
        "samples": 12, "prefix_cache_hit_rate": 0.5, "spec_decode_acceptance_rate": 0.75,
        "spec_decode_acceptance_pos_0": 0.9})
    flat = metrics.flat()
    assert {k: v for k, v in flat.items() if k.startswith("server:")} == {
        "server:prefix_cache_hit_rate": 0.5, "server:spec_decode_acceptance_rate": 0.75,
        "server:spec_decode_acceptance_pos_0": 0.9}
    assert metrics.get("server:spec_decode_acceptance_rate") == 0.75
    assert registry.direction("server:spec_decode_acceptance_rate") == "higher"
    with pytest.raises(KeyError) as excinfo:
        compute_metrics([request_a()]).get("server:spec_decode_acceptance_rate")
    assert excinfo.value.args[0] == (
        "server metric 'server:spec_decode_acceptance_rate': this run's server did not report "
        "it (it is read from vLLM's /metrics, and only some engines have it: spec_decode_* "
        "needs speculative decoding)")
