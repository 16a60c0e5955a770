"""MLPerf-style scenarios: limits, workloads, the early-stopping binomial and exact verdicts."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pytest_llmperf.client.patterns import Rate
from pytest_llmperf.metrics.compute import RunMetrics, compute_metrics
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.workloads.scenarios import (
    DEFAULT_MIN_DURATION_S,
    DEFAULT_MIN_QUERIES,
    MLPERF_LIMITS,
    OfflineScenario,
    ServerScenario,
    binomial_cdf,
    early_stopping_min_queries,
    early_stopping_passes,
    judge_offline,
    judge_server,
    offline_workload,
    server_workload,
)
from pytest_llmperf.workloads.workload import Workload

BASE = Workload.fixed(input_tokens=64, output_tokens=11, num_requests=10, rate=1.0,
                      burstiness=0.5, concurrency=4, seed=3, name="chat")
SCENARIO = ServerScenario.for_model("llama3_1-8b", 8.0)  # TTFT 2 s, TPOT 100 ms, 60 s, 459


# --- limits and scenario objects ------------------------------------------------------------

def test_mlperf_limits_are_reference_section_2():
    assert MLPERF_LIMITS == {
        "llama2-70b": (2.0, 0.2),
        "llama2-70b-interactive": (0.45, 0.04),
        "llama3_1-8b": (2.0, 0.1),
        "llama3_1-8b-interactive": (0.5, 0.03),
        "llama3_1-405b": (6.0, 0.175),
        "llama3_1-405b-interactive": (4.5, 0.08),
    }


def test_for_model_takes_the_limits_and_our_scaled_defaults():
    assert SCENARIO == ServerScenario(target_qps=8.0, ttft_p99_s=2.0, tpot_p99_s=0.1,
                                      min_duration_s=60.0, min_queries=459)
    interactive = ServerScenario.for_model("llama2-70b-interactive", 2.0, min_duration_s=600.0,
                                           min_queries=1000)
    assert (interactive.ttft_p99_s, interactive.tpot_p99_s) == (0.45, 0.04)
    assert (interactive.min_duration_s, interactive.min_queries) == (600.0, 1000)


def test_for_model_unknown_name_suggests_the_closest():
    with pytest.raises(KeyError) as excinfo:
        ServerScenario.for_model("llama3-8b", 1.0)
    assert excinfo.value.args[0] == (
        "no MLPerf latency limits for 'llama3-8b' (did you mean 'llama3_1-8b'?); known: "
        "llama2-70b, llama2-70b-interactive, llama3_1-8b, llama3_1-8b-interactive, "
        "llama3_1-405b, llama3_1-405b-interactive"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"target_qps": 0}, "ServerScenario.target_qps must be a finite number > 0, got 0"),
        ({"ttft_p99_s": math.inf},
         "ServerScenario.ttft_p99_s must be a finite number > 0, got inf"),
        ({"tpot_p99_s": "0.1"}, "ServerScenario.tpot_p99_s must be a finite number > 0, got '0.1'"),
        ({"min_duration_s": -1.0},
         "ServerScenario.min_duration_s must be a finite number >= 0, got -1.0"),
        ({"min_queries": 0}, "ServerScenario.min_queries must be an int >= 1, got 0"),
    ],
)
def test_server_scenario_rejects_bad_values(change, message):
    with pytest.raises(ValueError) as excinfo:
        dataclasses.replace(SCENARIO, **change)
    assert str(excinfo.value) == message


def test_scenarios_are_frozen_and_keyword_only():
    with pytest.raises(TypeError):
        ServerScenario(8.0, 2.0, 0.1)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        SCENARIO.target_qps = 9.0  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"^OfflineScenario.min_queries must be an int >= 1, "
                                         r"got True$"):
        OfflineScenario(min_queries=True)


# --- early stopping: hand-computed binomials ------------------------------------------------

def test_binomial_cdf_by_hand():
    # P(X <= 1 | 100, 0.01) = 0.99^100 + 100 x 0.01 x 0.99^99 = 0.36603 + 0.36973
    assert binomial_cdf(1, 100, 0.01) == pytest.approx(0.99**100 + 0.99**99, rel=1e-12)
    assert binomial_cdf(1, 100, 0.01) == pytest.approx(0.735762, abs=1e-6)
    # P(X <= 2 | 10, 0.5) = (1 + 10 + 45) / 2^10
    assert binomial_cdf(2, 10, 0.5) == pytest.approx(56 / 1024, rel=1e-12)
    assert binomial_cdf(0, 459, 0.01) == pytest.approx(0.99**459, rel=1e-12)
    assert binomial_cdf(-1, 10, 0.5) == 0.0 and binomial_cdf(10, 10, 0.5) == 1.0
    # Large n would underflow 0.99^n; the log-space sum still gives the right tail.
    assert binomial_cdf(0, 1_000_000, 0.01) == 0.0
    assert binomial_cdf(10_000, 1_000_000, 0.01) == pytest.approx(0.5, abs=0.01)


def test_no_query_over_the_limit_needs_459():
    # 0.99^458 = 0.010021 (not < 0.01), 0.99^459 = 0.009921. LoadGen agrees: its Server log for
    # a run of 21 queries says "Would need to run at least 438 more queries" (21 + 438 = 459).
    assert not early_stopping_passes(458, 0)
    assert early_stopping_passes(459, 0)
    assert early_stopping_min_queries(0) == 459 == DEFAULT_MIN_QUERIES


def test_one_query_over_the_limit_needs_662():
    # P(X <= 1) = 0.99^n + n x 0.01 x 0.99^(n - 1): n = 661 -> 0.0100010, n = 662 -> 0.0099140.
    assert not early_stopping_passes(661, 1)
    assert early_stopping_passes(662, 1)
    assert early_stopping_min_queries(1) == 662


def test_p90_reproduces_loadgens_64_query_minimum():
    # LoadGen's SingleStream (p90) logs "Processed at least 64 queries": one query allowed over
    # (t = 1): 0.9^63 + 63 x 0.1 x 0.9^62 = 0.010480, 0.9^64 + 64 x 0.1 x 0.9^63 = 0.009563.
    assert not early_stopping_passes(63, 1, percentile=0.9)
    assert early_stopping_passes(64, 1, percentile=0.9)
    assert early_stopping_min_queries(1, percentile=0.9) == 64


def test_early_stopping_edge_cases():
    assert not early_stopping_passes(0, 0)
    assert early_stopping_min_queries(2) == 838
    # A lower confidence asks for less evidence: 0.99^n < 0.1 from n = 230.
    assert early_stopping_min_queries(0, confidence=0.9) == 230


# --- workloads -------------------------------------------------------------------------------

def test_server_workload_is_poisson_at_the_target_without_cap_or_duration():
    workload = server_workload(SCENARIO, dataclasses.replace(BASE, duration_s=5.0))
    assert workload.pattern == Rate(requests_per_s=8.0)
    assert workload.duration_s is None and workload.name == "chat-server8qps"
    assert (workload.seed, workload.source) == (BASE.seed, BASE.source)
    assert workload.num_requests >= max(459, math.ceil(60 * 8))


@pytest.mark.parametrize("seed", range(8))
def test_server_workload_schedule_reaches_the_minimum_duration(seed):
    # ceil(60 s x 8 qps) = 480 queries reach 60 s only on average; the seeded schedule decides.
    scenario = dataclasses.replace(SCENARIO, min_queries=1)
    workload = server_workload(scenario, dataclasses.replace(BASE, seed=seed))
    offsets = workload.pattern.arrival_offsets(workload.num_requests, seed)
    assert offsets[-1] >= 60.0
    if workload.num_requests > 480:  # the schedule, not the formula, set the size: minimal
        assert offsets[-2] < 60.0


def test_the_formula_alone_would_end_short():
    # Seed 2's 480th arrival comes before 60 s; 528 queries are needed to reach it.
    assert Rate(requests_per_s=8.0).arrival_offsets(480, 2)[-1] < 60.0
    scenario = dataclasses.replace(SCENARIO, min_queries=1)
    assert server_workload(scenario, dataclasses.replace(BASE, seed=2)).num_requests == 528


def test_server_workload_min_queries_can_dominate():
    scenario = dataclasses.replace(SCENARIO, target_qps=10.0, min_duration_s=5.0)
    assert server_workload(scenario, BASE).num_requests == 459


def test_offline_workload_sends_everything_at_once():
    workload = offline_workload(OfflineScenario(min_queries=100), BASE)
    assert workload.pattern == Rate(requests_per_s=math.inf)
    assert workload.num_requests == 100 and workload.name == "chat-offline"
    big = dataclasses.replace(BASE, num_requests=500)
    assert offline_workload(OfflineScenario(min_queries=100), big).num_requests == 500


# --- server verdicts ---------------------------------------------------------------------------

def server_records(n: int = 500, *, qps: float = 8.0, ttft: float = 0.2, tpot: float = 0.05,
                   served_qps: float | None = None, slow: dict[int, float] | None = None,
                   failed: int = 0) -> list[RequestRecord]:
    """Evenly scheduled queries, 11 one-token chunks each; `served_qps` below `qps` makes the
    engine start request i at i / served_qps at the earliest (falling behind); `slow` overrides
    single TTFTs."""
    records = []
    for i in range(n):
        sent = i / qps
        start = max(sent, i / served_qps) if served_qps else sent
        first = start + (slow or {}).get(i, ttft)
        records.append(RequestRecord(
            index=i, expected_prompt_tokens=64, expected_output_tokens=11, scheduled_s=sent,
            sent_s=sent, chunk_times_s=[first + k * tpot for k in range(11)],
            chunk_tokens=[1] * 11, usage_prompt_tokens=64, usage_output_tokens=11,
        ))
    for i in range(n, n + failed):
        records.append(RequestRecord(index=i, expected_prompt_tokens=64, expected_output_tokens=11,
                                     scheduled_s=i / qps, sent_s=i / qps, error="HTTP 500"))
    return records


VALID_MESSAGES = [
    "TTFT p99 200.0 ms within the 2000.0 ms limit",
    "TPOT p99 50.0 ms within the 100.0 ms limit",
    "TTFT early stopping: 0 of 500 queries over 2000.0 ms, enough to show p99 within the limit "
    "at 99% confidence",
    "TPOT early stopping: 0 of 500 queries over 100.0 ms, enough to show p99 within the limit at "
    "99% confidence",
    "duration 63.1 s >= minimum 60.0 s",  # 499 / 8 = 62.375 s of schedule + 0.7 s latency
    "completed 500 queries >= minimum 459",
    "no failed requests",
    "completed 8.00 req/s of 8.00 req/s scheduled (100%)",
]


def judge(records: list[RequestRecord], scenario: ServerScenario = SCENARIO, **kwargs):
    return judge_server(scenario, compute_metrics(records), records=records, **kwargs)


def test_a_good_run_is_valid_and_says_why():
    verdict = judge(server_records())
    assert verdict.valid and verdict.status == "VALID" and verdict.reasons == []
    assert [check.message for check in verdict.checks] == VALID_MESSAGES
    assert [check.name for check in verdict.checks] == [
        "ttft_p99", "tpot_p99", "ttft_early_stopping", "tpot_early_stopping", "min_duration",
        "min_queries", "no_failures", "scheduled_load",
    ]
    assert verdict.stats["achieved_qps"] == pytest.approx(8.0)
    assert verdict.stats["scheduled_qps"] == pytest.approx(8.0)
    assert verdict.stats["target_qps"] == 8.0


def test_verdict_text():
    lines = judge(server_records()).lines()
    assert lines[0] == "Server scenario: VALID"
    assert lines[1] == "  ok   TTFT p99 200.0 ms within the 2000.0 ms limit"
    assert "  target_qps = 8" in lines
    invalid = judge(server_records(failed=3))
    assert str(invalid).splitlines()[0] == "Server scenario: INVALID"
    assert "  FAIL 3 of 503 requests failed" in str(invalid).splitlines()


def test_one_slow_query_in_500_passes_p99_but_not_early_stopping():
    # p99 sits between sorted values 494 and 495, both fast; but with 1 over, 662 are needed.
    verdict = judge(server_records(slow={0: 3.0}))
    assert verdict.status == "INVALID"
    assert verdict.reasons == [
        "TTFT early stopping: 1 of 500 queries over 2000.0 ms, needs at least 662 queries with 1 "
        "over to show p99 within the limit at 99% confidence",
    ]


def test_ttft_over_the_limit():
    verdict = judge(server_records(slow={i: 2.5 for i in range(490, 500)}))
    assert verdict.reasons == [
        "TTFT p99 2500.0 ms over the 2000.0 ms limit: lower target_qps",
        "TTFT early stopping: 10 of 500 queries over 2000.0 ms, needs at least 2010 queries with "
        "10 over to show p99 within the limit at 99% confidence",
    ]


def test_tpot_over_the_limit():
    verdict = judge(server_records(tpot=0.12))
    assert verdict.reasons == [
        "TPOT p99 120.0 ms over the 100.0 ms limit: lower target_qps",
        "TPOT early stopping: 500 of 500 queries over 100.0 ms, needs at least 55427 queries with "
        "500 over to show p99 within the limit at 99% confidence",
    ]


def test_too_short():
    verdict = judge(server_records(), dataclasses.replace(SCENARIO, min_duration_s=100.0))
    assert verdict.reasons == ["duration 63.1 s < minimum 100.0 s"]


def test_too_few_queries():
    scenario = dataclasses.replace(SCENARIO, min_duration_s=30.0)
    verdict = judge(server_records(300), scenario)
    assert verdict.reasons == [
        "TTFT early stopping: 0 of 300 queries over 2000.0 ms, needs at least 459 queries with 0 "
        "over to show p99 within the limit at 99% confidence",
        "TPOT early stopping: 0 of 300 queries over 100.0 ms, needs at least 459 queries with 0 "
        "over to show p99 within the limit at 99% confidence",
        "completed 300 queries < minimum 459",
    ]


def test_failures():
    verdict = judge(server_records(failed=3))
    assert verdict.reasons == ["3 of 503 requests failed"]


def test_falling_behind_the_schedule():
    # Served at 6 q/s while scheduled at 8: latencies grow with the queue, and the completed
    # rate shows why.
    verdict = judge(server_records(served_qps=6.0))
    assert "completed 6.00 req/s of 8.00 req/s scheduled (75% < 90%): the engine did not keep " \
           "up with the scheduled load" in verdict.reasons
    assert verdict.reasons[0].startswith("TTFT p99 ")


def test_without_records_counts_are_bounded_from_the_summary():
    records = server_records(slow={0: 3.0})
    verdict = judge_server(SCENARIO, compute_metrics(records))
    # max 3 s is over; p99 is under, so at most n - 1 - floor(0.99 x 499) = 499 - 494 = 5 are.
    assert verdict.reasons == [
        "TTFT early stopping: 5 of 500 queries over 2000.0 ms, needs at least 1307 queries with 5 "
        "over to show p99 within the limit at 99% confidence (count bounded from the summary; "
        "pass records= for the exact count)",
    ]
    good = judge_server(SCENARIO, compute_metrics(server_records()))
    assert good.valid
    assert good.checks[2].message.endswith("at 99% confidence (count bounded from the summary; "
                                           "pass records= for the exact count)")
    # Rates: the target, and completions over first send -> last completion minus the fastest
    # latency: 499 / (63.075 - 0.7) = 8.00.
    assert good.checks[-1].message == "completed 8.00 req/s of 8.00 req/s scheduled (100%)"


def test_no_completed_queries():
    records = server_records(0, failed=2)
    verdict = judge(records)
    assert verdict.reasons == [
        "TTFT p99 not measured (no completed requests)",
        "TPOT p99 not measured (no completed requests)",
        "TTFT early stopping: 0 of 0 queries over 2000.0 ms, needs at least 459 queries with 0 "
        "over to show p99 within the limit at 99% confidence",
        "TPOT early stopping: 0 of 0 queries over 100.0 ms, needs at least 459 queries with 0 "
        "over to show p99 within the limit at 99% confidence",
        "duration 0.0 s < minimum 60.0 s",
        "completed 0 queries < minimum 459",
        "2 of 2 requests failed",
        "completed rate not measurable: fewer than two queries scheduled or completed",
    ]


# --- offline -----------------------------------------------------------------------------------

def offline_metrics(n: int, failed: int = 0) -> RunMetrics:
    return compute_metrics(server_records(n, qps=1e9, failed=failed))


def test_offline_valid_reports_throughput():
    metrics = offline_metrics(500)
    verdict = judge_offline(OfflineScenario(min_queries=459), metrics)
    assert verdict.status == "VALID"
    assert [c.message for c in verdict.checks] == ["completed 500 queries >= minimum 459",
                                                   "no failed requests"]
    assert verdict.stats == {
        "output_throughput_tok_s": metrics.output_throughput_tok_s,
        "total_throughput_tok_s": metrics.total_throughput_tok_s,
        "request_throughput_req_s": metrics.request_throughput_req_s,
    }
    assert str(verdict).splitlines()[0] == "Offline scenario: VALID"


def test_offline_invalid():
    verdict = judge_offline(OfflineScenario(min_queries=1000), offline_metrics(500, failed=1))
    assert verdict.reasons == ["completed 500 queries < minimum 1000", "1 of 501 requests failed"]


def test_default_duration_is_mlperfs_scaled_down():
    assert DEFAULT_MIN_DURATION_S == 60.0
