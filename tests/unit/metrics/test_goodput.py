"""Goodput as vLLM's `--goodput` counts it: completed requests whose own TTFT, TPOT and E2EL all
meet their limits, per second of the run; times are binary fractions so every value is exact."""

from __future__ import annotations

import math

from pytest_llmperf.metrics import goodput
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.verdict.gate import SLO


def request(index: int, ttft: float, gap: float = 0.125, tokens: int = 3,
            sent: float = 0.0) -> RequestRecord:
    times = [sent + ttft + k * gap for k in range(tokens)]
    return RequestRecord(index=index, expected_prompt_tokens=8, expected_output_tokens=tokens,
                         scheduled_s=sent, sent_s=sent, chunk_times_s=times,
                         chunk_tokens=[1] * tokens, usage_prompt_tokens=8,
                         usage_output_tokens=tokens)


def failed(index: int) -> RequestRecord:
    return RequestRecord(index=index, expected_prompt_tokens=8, expected_output_tokens=3,
                         scheduled_s=0.0, sent_s=0.0, error="HTTP 500")


def test_limits_are_the_tightest_max_bound_on_each_request_latency():
    slo = SLO(max={"ttft_s.p90": 0.5, "ttft_s.p50": 0.25, "tpot_s.mean": 0.0625,
                   "itl_s.p50": 0.01, "error_rate": 0.0},
              min={"output_throughput_tok_s": 100.0, "e2el_s.p50": 0.125})
    # ITL is not a per-request latency in vLLM's goodput; min bounds and other metrics are not
    # limits at all.
    assert goodput.limits_from(slo) == {"ttft_s": 0.25, "tpot_s": 0.0625}
    assert goodput.limits_from(None) == {}
    assert goodput.limits_from(SLO(min={"completed": 1})) == {}


def test_goodput_counts_requests_meeting_every_limit_over_the_run():
    # Four requests over 2 s (first send at 0, last token at 2): TTFT 0.25, 0.75 and 0.25 s,
    # then two tokens 0.125 s apart; one failed. Limits: TTFT <= 0.5 s, E2EL <= 1 s.
    records = [request(0, 0.25), request(1, 0.75), request(2, 0.25, sent=1.5), failed(3)]
    metrics = compute_metrics(records, {"ttft_s": 0.5, "e2el_s": 1.0})
    assert metrics.duration_s == 2.0
    assert metrics.goodput_req_s == 1.0  # requests 0 and 2, in 2 s
    assert metrics.goodput_share == 0.5  # of the four sent, the failed one included
    assert metrics.goodput_req_s <= metrics.request_throughput_req_s


def test_a_limit_exactly_met_is_met_and_one_token_has_no_tpot_to_miss():
    assert goodput.is_good({"ttft_s": 0.5, "tpot_s": 0.0, "e2el_s": 1.0}, {"ttft_s": 0.5})
    # One output token: TPOT is 0 (as vLLM counts it), so any TPOT limit is met.
    metrics = compute_metrics([request(0, 0.25, tokens=1)], {"tpot_s": 0.001})
    assert metrics.goodput_share == 1.0
    assert not goodput.is_good(None, {"ttft_s": 1.0})  # failed


def test_without_limits_goodput_is_nan_and_with_nothing_sent_the_share_is():
    assert math.isnan(compute_metrics([request(0, 0.25)]).goodput_req_s)
    assert math.isnan(compute_metrics([request(0, 0.25)], {}).goodput_share)
    empty = compute_metrics([], {"ttft_s": 1.0})
    assert empty.goodput_req_s == 0.0 and math.isnan(empty.goodput_share)


def test_the_tests_slo_reaches_compute_metrics_as_its_limits():
    records = [request(0, 0.25), request(1, 0.75)]
    limits = goodput.limits_from(SLO(max={"ttft_s.p90": 0.5}))
    assert limits == {"ttft_s": 0.5}
    assert compute_metrics(records, limits).goodput_share == 0.5
    assert math.isnan(compute_metrics(records).goodput_share)
    assert goodput.limits_from(SLO(min={"completed": 1})) == {}  # no per-request limit in it
