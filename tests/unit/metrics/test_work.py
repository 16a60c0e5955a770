"""What a measurement executed (metrics/work.py) and how B's work is told from A's: the lines a
NOT COMPARABLE verdict and an A/B's outputs note are made of."""

from __future__ import annotations

from pytest_llmperf.metrics.work import ExecutedWork, differences, outputs_line
from pytest_llmperf.records import RequestRecord
from tests.work_records import FULL, record, work


def test_the_same_work_has_no_difference_and_identical_outputs():
    assert differences(work(FULL), work(FULL)) == []
    assert outputs_line(work(FULL), work(FULL)) == "outputs identical on 32 of 32 requests"


def test_b_that_stops_generations_early_names_tokens_and_finish_reasons():
    early = [record(i, 4, reason="stop") if i < 12 else record(i, 16) for i in range(32)]
    assert differences(work(FULL), work(early)) == [
        "B produced 0.72x the output tokens: 12 of 32 requests stopped early, finish_reason "
        "stop",
        "finish_reason length on 62% of B's requests against 100% of A's",
        "finish_reason stop on 38% of B's requests against 0% of A's",
    ]


def test_outputs_that_differ_are_counted():
    other = [record(i, 16, digest=7) if i % 4 == 0 else record(i, 16) for i in range(32)]
    assert outputs_line(work(FULL), work(other)) == "outputs differ on 8 of 32 requests"


def test_more_prompt_tokens_from_the_cache_is_other_work():
    cold = [record(i, 16, cached=0) for i in range(10)]
    warm = [record(i, 16, cached=16) for i in range(10)]
    assert differences(work(cold), work(warm)) == [
        "B served 50% of its prompt tokens from the prefix cache against 0% on A"]


def test_engine_counted_shares_compare_where_both_sides_report_them():
    assert differences(work(FULL), work(FULL),
                       {"server:spec_decode_acceptance_rate": 0.5},
                       {"server:spec_decode_acceptance_rate": 0.8}) == [
        "speculative acceptance 80% on B against 50% on A"]
    assert differences(work(FULL), work(FULL), {"server:prefix_cache_hit_rate": 0.30},
                       {"server:prefix_cache_hit_rate": 0.33}) == []  # within 5 points
    assert differences(work(FULL), work(FULL), {}, {"server:prefix_cache_hit_rate": 0.9}) == []


def test_natural_lengths_may_move_two_percent():
    a = [record(i, 100, forced=0) for i in range(10)]  # nothing forced: all "long" on both
    b = [record(i, 101, forced=0) for i in range(10)]
    assert differences(work(a), work(b)) == []
    c = [record(i, 110, forced=0) for i in range(10)]
    assert differences(work(a), work(c)) == ["B produced 1.10x the output tokens"]


def test_failed_requests_and_estimated_tokens_are_left_out():
    failed = RequestRecord(index=99, expected_prompt_tokens=8, expected_output_tokens=16,
                           scheduled_s=0.0, error="HTTP 500")
    estimated = record(98, 16)
    estimated.tokens_estimated = True
    summary = work([*FULL[:2], failed, estimated])
    assert (summary.requests, summary.output_tokens, sorted(summary.digests)) == (3, 48, [0, 1])


def test_the_run_file_form_round_trips():
    summary = work([*FULL[:3], record(3, 5, reason="stop", cached=8)])
    data = summary.to_dict()
    assert data["finish_reasons"] == {"length": 3, "stop": 1}
    assert data["digests"]["3"] == f"{1003:08x}"
    assert ExecutedWork.from_dict(data) == summary
