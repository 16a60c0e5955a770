"""Splitting one measurement between client processes: the pure parts (no process is started).

`plan_workers` must keep the workload's meaning: a closed loop's concurrency is split and the
requests come from a shared counter (`only` None); an open loop's arrivals go round-robin, each
keeping its offset in the one schedule, and a concurrency cap is split. `ClientStats.merge` folds
the workers' own numbers into one.
"""

from __future__ import annotations

import pytest

from pytest_llmperf.client.patterns import Concurrency, Ramp, Rate
from pytest_llmperf.client.sessions import Sessions
from pytest_llmperf.client.workers import WorkerPlan, plan_workers, share
from pytest_llmperf.errors import InputError
from pytest_llmperf.records import ClientStats

# ------------------------------------------------------------------ share


@pytest.mark.parametrize(
    ("total", "parts", "expected"),
    [
        (8, 2, [4, 4]),
        (8, 3, [3, 3, 2]),  # the remainder goes to the first parts
        (10, 4, [3, 3, 2, 2]),
        (2, 4, [1, 1, 0, 0]),
        (0, 3, [0, 0, 0]),
        (7, 1, [7]),
    ],
)
def test_share(total, parts, expected):
    assert [share(total, k, parts) for k in range(parts)] == expected


def test_shares_add_up_and_differ_by_at_most_one():
    for total in range(20):
        for parts in range(1, 7):
            shares = [share(total, k, parts) for k in range(parts)]
            assert sum(shares) == total, (total, parts)
            assert max(shares) - min(shares) <= 1, (total, parts)
            assert shares == sorted(shares, reverse=True), (total, parts)


# ------------------------------------------------------------------ closed loop


def test_closed_loop_splits_the_concurrency_and_uses_the_counter():
    plans = plan_workers(Concurrency(max_concurrency=8), n_requests=100, n_warmup=0, workers=3)
    assert plans == [
        WorkerPlan(Concurrency(max_concurrency=3), None, ()),
        WorkerPlan(Concurrency(max_concurrency=3), None, ()),
        WorkerPlan(Concurrency(max_concurrency=2), None, ()),
    ]


def test_closed_loop_with_one_worker_is_the_pattern_itself():
    pattern = Concurrency(max_concurrency=16)
    assert plan_workers(pattern, 10, 4, 1) == [WorkerPlan(pattern, None, (0, 1, 2, 3))]


def test_closed_loop_with_fewer_slots_than_workers_uses_fewer_workers():
    # A worker with no slot would only cost a process.
    plans = plan_workers(Concurrency(max_concurrency=2), n_requests=50, n_warmup=0, workers=4)
    assert [p.pattern for p in plans] == [Concurrency(max_concurrency=1)] * 2
    assert [p.only for p in plans] == [None, None]


def test_closed_loop_with_one_slot_uses_one_worker():
    plans = plan_workers(Concurrency(max_concurrency=1), n_requests=5, n_warmup=3, workers=8)
    assert plans == [WorkerPlan(Concurrency(max_concurrency=1), None, (0, 1, 2))]


# ------------------------------------------------------------------ open loop


def test_open_loop_sends_every_nth_arrival():
    pattern = Rate(requests_per_s=10.0)
    plans = plan_workers(pattern, n_requests=10, n_warmup=0, workers=3)
    assert [p.only for p in plans] == [(0, 3, 6, 9), (1, 4, 7), (2, 5, 8)]
    assert all(p.pattern is pattern for p in plans)  # no cap: the pattern is not touched


def test_open_loop_arrivals_cover_every_request_exactly_once():
    plans = plan_workers(Rate(requests_per_s=5.0, burstiness=0.5), 37, 0, 4)
    sent = sorted(i for p in plans for i in p.only)
    assert sent == list(range(37))


def test_open_loop_cap_is_split():
    plans = plan_workers(Rate(requests_per_s=20.0, max_concurrency=5), 6, 0, 2)
    assert [p.pattern for p in plans] == [
        Rate(requests_per_s=20.0, max_concurrency=3),
        Rate(requests_per_s=20.0, max_concurrency=2),
    ]
    assert [p.only for p in plans] == [(0, 2, 4), (1, 3, 5)]


def test_open_loop_cap_smaller_than_the_workers_uses_fewer_workers():
    plans = plan_workers(Rate(requests_per_s=20.0, max_concurrency=2), 5, 0, 4)
    assert [p.pattern.max_concurrency for p in plans] == [1, 1]
    # The arrivals are split between the two workers that run, none are lost.
    assert [p.only for p in plans] == [(0, 2, 4), (1, 3)]


def test_open_loop_cap_of_one_is_one_worker_with_every_arrival():
    plans = plan_workers(Rate(requests_per_s=1.0, max_concurrency=1), 4, 2, 3)
    assert plans == [WorkerPlan(Rate(requests_per_s=1.0, max_concurrency=1), (0, 1, 2, 3), (0, 1))]


def test_ramp_is_an_open_loop_too():
    pattern = Ramp(start_rps=1.0, end_rps=10.0, max_concurrency=4)
    plans = plan_workers(pattern, 5, 0, 2)
    assert [p.pattern for p in plans] == [
        Ramp(start_rps=1.0, end_rps=10.0, max_concurrency=2),
        Ramp(start_rps=1.0, end_rps=10.0, max_concurrency=2),
    ]
    assert [p.only for p in plans] == [(0, 2, 4), (1, 3)]


def test_open_loop_with_one_worker_sends_every_arrival():
    plans = plan_workers(Rate(requests_per_s=3.0), 4, 0, 1)
    assert [p.only for p in plans] == [(0, 1, 2, 3)]


# ------------------------------------------------------------------ conversations


def test_conversations_split_their_sessions_whole_in_a_closed_loop():
    """6 sessions of 3 turns (18 requests), 4 going at once, 2 workers: each worker keeps 2
    going, and the shared counter hands out sessions, not requests."""
    pattern = Sessions(turns=3, think_time_s=0.5, start=Concurrency(max_concurrency=4))
    plans = plan_workers(pattern, n_requests=18, n_warmup=0, workers=2)
    half = Sessions(turns=3, think_time_s=0.5, start=Concurrency(max_concurrency=2))
    assert plans == [WorkerPlan(half, None, ()), WorkerPlan(half, None, ())]


def test_conversations_on_a_rate_go_round_robin_by_session():
    lengths = (2, 4, 3, 1, 2)
    pattern = Sessions(turns=4, session_turns=lengths, start=Rate(requests_per_s=2.0))
    plans = plan_workers(pattern, n_requests=sum(lengths), n_warmup=3, workers=2)
    assert [p.only for p in plans] == [(0, 2, 4), (1, 3)]  # sessions, not requests
    assert all(p.pattern == pattern for p in plans)  # no cap: the pattern is not touched
    assert [p.warmup for p in plans] == [(0, 2), (1,)]


def test_conversations_use_no_more_workers_than_sessions():
    pattern = Sessions(turns=5, start=Concurrency(max_concurrency=8))
    plans = plan_workers(pattern, n_requests=10, n_warmup=0, workers=4)  # 2 sessions
    assert [p.pattern.start for p in plans] == [Concurrency(max_concurrency=4)] * 2


def test_conversations_that_do_not_fit_their_requests_say_why():
    pattern = Sessions(turns=3, start=Concurrency(max_concurrency=2))
    with pytest.raises(InputError, match=r"^10 requests do not make whole conversations of 3 "
                                         r"turns$"):
        plan_workers(pattern, n_requests=10, n_warmup=0, workers=2)


# ------------------------------------------------------------------ warm-up


def test_warmup_indices_are_split_round_robin():
    plans = plan_workers(Concurrency(max_concurrency=6), 20, n_warmup=7, workers=3)
    assert [p.warmup for p in plans] == [(0, 3, 6), (1, 4), (2, 5)]


def test_warmup_is_split_between_the_active_workers_only():
    plans = plan_workers(Rate(requests_per_s=2.0, max_concurrency=2), 10, n_warmup=5, workers=4)
    assert [p.warmup for p in plans] == [(0, 2, 4), (1, 3)]


def test_fewer_warmup_requests_than_workers_leaves_some_without_warmup():
    plans = plan_workers(Concurrency(max_concurrency=4), 10, n_warmup=2, workers=4)
    assert [p.warmup for p in plans] == [(0,), (1,), (), ()]


def test_no_warmup():
    plans = plan_workers(Rate(requests_per_s=2.0), 4, n_warmup=0, workers=2)
    assert [p.warmup for p in plans] == [(), ()]


# ------------------------------------------------------------------ ClientStats.merge


def test_merge_adds_work_and_keeps_the_busiest_and_longest():
    a = ClientStats(workers=1, wall_s=10.0, cpu_s=4.0, busiest_cpu_share=0.4, chunks=1000,
                    coalesced_chunks=10, loop_lag_s=[0.001, 0.002])
    b = ClientStats(workers=1, wall_s=12.0, cpu_s=9.0, busiest_cpu_share=0.75, chunks=3000,
                    coalesced_chunks=290, loop_lag_s=[0.003])
    merged = ClientStats.merge([a, b])
    assert merged == ClientStats(
        workers=2,
        wall_s=12.0,  # the window ends with the last worker's last record
        cpu_s=13.0,  # all processes together
        busiest_cpu_share=0.75,  # the busiest process, not the sum: each has its own core
        chunks=4000,
        coalesced_chunks=300,
        loop_lag_s=[0.001, 0.002, 0.003],  # every probe of every worker
        parts=(a, b),  # each worker's own, for the self-check to name one
    )
    assert merged.coalesced_share == pytest.approx(300 / 4000)
    assert merged.cpu_us_per_chunk == pytest.approx(13.0 / 4000 * 1e6)


def test_merge_of_one_is_that_one():
    one = ClientStats(wall_s=2.0, cpu_s=1.0, busiest_cpu_share=0.5, chunks=10,
                      coalesced_chunks=1, loop_lag_s=[0.0005])
    assert ClientStats.merge([one]) == one


def test_merge_does_not_share_the_lag_lists():
    a = ClientStats(loop_lag_s=[0.001])
    merged = ClientStats.merge([a])
    merged.loop_lag_s.append(1.0)
    assert a.loop_lag_s == [0.001]


def test_merge_of_none_is_empty():
    # Every worker died: no stats, and no division by zero in the derived numbers.
    merged = ClientStats.merge([])
    assert merged == ClientStats(workers=0)
    assert (merged.cpu_us_per_chunk, merged.coalesced_share) == (0.0, 0.0)
