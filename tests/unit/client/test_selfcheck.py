"""The client's self-check: each of its three reasons at its limit and just past it.

Metrics come from hand-built records through `compute_metrics`, as in a run; ClientStats are
built by hand. Times are chosen so the numbers the check compares are exact in floating point.
"""

from __future__ import annotations

import math

import pytest

from pytest_llmperf.client.patterns import Concurrency, Ramp, Rate
from pytest_llmperf.client.selfcheck import check_client
from pytest_llmperf.metrics.client_check import (
    CPU_LIMIT,
    LOOP_LAG_FLOOR_S,
    LOOP_LAG_SHARE_OF_TTFT,
    SCHEDULE_LAG_FLOOR_S,
    SCHEDULE_LAG_SHARE_OF_TTFT,
    ClientCheck,
)
from pytest_llmperf.metrics.compute import RunMetrics, compute_metrics
from pytest_llmperf.records import ClientStats, RequestRecord

OPEN = Rate(requests_per_s=10.0)  # an uncapped open loop: the only one whose queue time counts
QUIET_LAG = [0.0005] * 20  # a loop with headroom: 0.5 ms late at p90


def record(sent: float | None, times: list[float], *, scheduled: float = 0.0,
           error: str | None = None) -> RequestRecord:
    return RequestRecord(
        index=0, expected_prompt_tokens=8, expected_output_tokens=len(times),
        scheduled_s=scheduled, sent_s=sent, chunk_times_s=times, chunk_tokens=[1] * len(times),
        error=error,
    )


def metrics_with(ttft: float = 0.0625, queue: float = 0.0, n: int = 10) -> RunMetrics:
    """n completed requests, each with this TTFT and sent `queue` after its arrival time."""
    # Sent at 0.0 and scheduled `queue` earlier, so both differences are exact.
    records = [record(0.0, [ttft, ttft + 0.03125], scheduled=-queue) for _ in range(n)]
    metrics = compute_metrics(records)
    assert (metrics.ttft_s.p50, metrics.queue_s.p90) == (ttft, queue)  # exact, as intended
    return metrics


def stats(cpu: float = 0.5, lags: list[float] | None = None, workers: int = 1,
          chunks: int = 100, coalesced: int = 0) -> ClientStats:
    return ClientStats(workers=workers, wall_s=10.0, cpu_s=cpu * 10.0, busiest_cpu_share=cpu,
                       chunks=chunks, coalesced_chunks=coalesced,
                       loop_lag_s=QUIET_LAG if lags is None else lags)


def test_a_quiet_client_is_not_limited():
    check = check_client(metrics_with(), stats(), OPEN)
    assert check.reasons == []
    assert not check.limited
    assert check.summary() == "ok (cpu 50%, lag p90 0.5/6.2 ms)"


# ------------------------------------------------------------------ CPU


def test_cpu_at_the_limit_is_limited():
    check = check_client(metrics_with(), stats(cpu=CPU_LIMIT), OPEN)
    assert CPU_LIMIT == 0.85
    assert check.reasons == ["busiest client process at 85% of a core (limit 85%)"]
    assert check.limited


def test_cpu_just_under_the_limit_is_not():
    check = check_client(metrics_with(), stats(cpu=0.8499), OPEN)
    assert check.reasons == []


def test_cpu_past_the_limit():
    check = check_client(metrics_with(), stats(cpu=1.0), OPEN)
    assert check.reasons == ["busiest client process at 100% of a core (limit 85%)"]
    assert check.summary() == "LIMITED (cpu 100%, lag p90 0.5/6.2 ms)"


# ------------------------------------------------------------------ event-loop lag


def test_loop_lag_limit_is_ten_percent_of_ttft_p50():
    check = check_client(metrics_with(ttft=0.0625), stats(), OPEN)
    assert check.loop_lag_limit_s == LOOP_LAG_SHARE_OF_TTFT * 0.0625


def test_loop_lag_at_the_ttft_limit_is_not_limited():
    limit = LOOP_LAG_SHARE_OF_TTFT * 0.0625
    check = check_client(metrics_with(ttft=0.0625), stats(lags=[limit] * 20), OPEN)
    assert check.loop_lag_p90_s == limit
    assert check.reasons == []


def test_loop_lag_just_past_the_ttft_limit_is_limited():
    limit = LOOP_LAG_SHARE_OF_TTFT * 0.0625
    check = check_client(metrics_with(ttft=0.0625), stats(lags=[limit + 1e-6] * 20), OPEN)
    assert check.reasons == ["event-loop lag p90 6.3 ms (limit 6.2 ms)"]
    assert check.limited


def test_loop_lag_floor_of_2_ms_under_a_short_ttft():
    # TTFT p50 of 15.6 ms: 10% is 1.6 ms, under the 2 ms floor (uvloop's timers are 1 ms coarse).
    metrics = metrics_with(ttft=0.015625)
    assert check_client(metrics, stats(), OPEN).loop_lag_limit_s == LOOP_LAG_FLOOR_S == 0.002
    assert check_client(metrics, stats(lags=[0.002] * 20), OPEN).reasons == []
    check = check_client(metrics, stats(lags=[0.0021] * 20), OPEN)
    assert check.reasons == ["event-loop lag p90 2.1 ms (limit 2.0 ms)"]


def test_loop_lag_is_judged_at_p90_not_on_one_spike():
    # Of 20 probes, one 500 ms late leaves p90 at 0.5 ms; two put it between the two (50 ms).
    one_spike = [0.0005] * 19 + [0.5]
    assert not check_client(metrics_with(), stats(lags=one_spike), OPEN).limited
    two_spikes = [0.0005] * 18 + [0.5] * 2
    assert check_client(metrics_with(), stats(lags=two_spikes), OPEN).limited


def test_no_lag_probes_is_no_lag():
    check = check_client(metrics_with(), stats(lags=[]), OPEN)
    assert check.loop_lag_p90_s == 0.0 and not check.limited


def test_without_completed_requests_the_floor_applies():
    failed = [record(0.0, [], error="HTTP 500") for _ in range(3)]
    check = check_client(compute_metrics(failed), stats(lags=[0.0021] * 20), Concurrency(
        max_concurrency=4))
    assert check.loop_lag_limit_s == LOOP_LAG_FLOOR_S
    assert check.limited


# ------------------------------------------------------------------ schedule lag


def test_schedule_lag_at_the_limit_is_not_limited():
    check = check_client(metrics_with(queue=SCHEDULE_LAG_FLOOR_S), stats(), OPEN)
    assert check.schedule_lag_p90_s == 0.010
    assert check.reasons == []


def test_schedule_lag_just_past_the_limit_is_limited():
    check = check_client(metrics_with(queue=0.0101), stats(), OPEN)
    assert check.schedule_lag_p90_s == 0.0101
    assert check.reasons == ["requests sent 10.1 ms behind schedule at p90 (limit 10 ms)"]
    assert check.limited


def test_schedule_lag_within_a_tenth_of_ttft_is_not_limited():
    # MLPerf's Offline scenario: every request sent at once, the median answered after 0.5 s.
    check = check_client(metrics_with(ttft=0.5, queue=0.046875), stats(), Rate(requests_per_s=math.inf))
    assert check.schedule_lag_limit_s == SCHEDULE_LAG_SHARE_OF_TTFT * 0.5
    assert check.reasons == []


def test_schedule_lag_past_a_tenth_of_ttft_is_limited():
    check = check_client(metrics_with(ttft=0.5, queue=0.0625), stats(), Rate(requests_per_s=math.inf))
    assert check.reasons == ["requests sent 62.5 ms behind schedule at p90 (limit 50 ms)"]


@pytest.mark.parametrize("pattern", [Rate(requests_per_s=math.inf),
                                     Rate(requests_per_s=2.0, burstiness=0.5),
                                     Ramp(start_rps=1.0, end_rps=4.0)])
def test_schedule_lag_counts_for_every_uncapped_open_loop(pattern):
    assert check_client(metrics_with(queue=0.05), stats(), pattern).limited


@pytest.mark.parametrize("pattern", [Concurrency(max_concurrency=8),
                                     Rate(requests_per_s=10.0, max_concurrency=8),
                                     Ramp(start_rps=1.0, end_rps=4.0, max_concurrency=2)])
def test_schedule_lag_never_counts_where_requests_wait_for_a_slot(pattern):
    # A closed loop or a capped open loop waits for a free slot on purpose.
    check = check_client(metrics_with(queue=1.0), stats(), pattern)
    assert check.schedule_lag_p90_s is None
    assert check.reasons == []


def test_schedule_lag_is_none_when_nothing_was_sent():
    check = check_client(compute_metrics([record(None, [], error="refused")]), stats(), OPEN)
    assert check.schedule_lag_p90_s is None


def test_schedule_lag_counts_failed_requests_too():
    # queue_s covers every sent request: the lag was the client's either way.
    records = [record(0.5, [], error="HTTP 500") for _ in range(10)]
    check = check_client(compute_metrics(records), stats(), OPEN)
    assert check.schedule_lag_p90_s == 0.5 and check.limited


# ------------------------------------------------------------------ together


def test_every_reason_in_order():
    check = check_client(metrics_with(queue=0.0125),
                         stats(cpu=0.9, lags=[0.008] * 20, workers=2), OPEN)
    assert check.reasons == [
        "busiest client process at 90% of a core (limit 85%)",
        "event-loop lag p90 8.0 ms (limit 6.2 ms)",
        "requests sent 12.5 ms behind schedule at p90 (limit 10 ms)",
    ]
    assert check.summary() == "LIMITED (cpu 90%, lag p90 8.0/6.2 ms)"


def test_failure_text():
    check = check_client(metrics_with(), stats(cpu=0.9, workers=2), OPEN)
    assert check.failure(cores=16) == (
        "client-limited measurement: the load generator, not the engine, set these numbers "
        "(busiest client process at 90% of a core (limit 85%); 2 client process(es)); "
        "offer less load, or give the client more processes (--llmperf-client-workers N, "
        "up to 16 here) or cores the engine does not use; nothing from this run was written "
        "as a baseline"
    )


def test_workers_and_coalesced_share_are_carried():
    check = check_client(metrics_with(), stats(workers=3, chunks=200, coalesced=50), OPEN)
    assert (check.workers, check.coalesced_share) == (3, 0.25)


def test_limited_is_any_reason():
    base = dict(cpu_share=0.1, loop_lag_p90_s=0.001, loop_lag_limit_s=0.002,
                schedule_lag_p90_s=None, schedule_lag_limit_s=SCHEDULE_LAG_FLOOR_S, workers=1,
                coalesced_share=0.0)
    assert not ClientCheck(**base).limited
    assert ClientCheck(**{**base, "cpu_share": 0.85}).limited
    assert ClientCheck(**{**base, "loop_lag_p90_s": 0.0021}).limited
    assert ClientCheck(**{**base, "schedule_lag_p90_s": 0.0101}).limited
    assert not ClientCheck(**{**base, "schedule_lag_p90_s": 0.010}).limited
