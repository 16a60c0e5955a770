"""Requests due and finished per time bin (metrics/timeline.py): the bin width a run's length
and size get, and the counts."""

from __future__ import annotations

import pytest

from pytest_llmperf.metrics.timeline import bin_width, rate_timeline
from pytest_llmperf.records import RequestRecord


def record(due: float, finished: float | None, index: int = 0) -> RequestRecord:
    """Due at `due`, its last token at `finished` (None: it failed)."""
    if finished is None:
        return RequestRecord(index=index, expected_prompt_tokens=1, expected_output_tokens=1,
                             scheduled_s=due, sent_s=due, error="boom")
    return RequestRecord(index=index, expected_prompt_tokens=1, expected_output_tokens=1,
                         scheduled_s=due, sent_s=due, chunk_times_s=[finished],
                         chunk_tokens=[1], done_s=finished)


@pytest.mark.parametrize(("span_s", "requests", "width"), [
    (12.0, 48, 1.0),  # the CPU suite's trace: 4 a bin at 1 s
    (12.0, 480, 0.1),  # 40 req/s: 0.1 s holds 4
    (12.0, 10, 5.0),  # 4.8 s wanted: the next of 1, 2, 5 is 5
    (1000.0, 100_000, 5.0),  # 0.04 s would hold 4, but 1000 s / 200 bins is 5 s
    (3600.0, 1000, 20.0),  # 14.4 s wanted
    (0.0, 1, 0.001),  # one request: one bin of the smallest width
])
def test_bin_width_holds_four_requests_a_bin_and_at_most_200_bins(span_s, requests, width):
    assert bin_width(span_s, requests) == width


def test_due_and_finished_are_counted_in_the_bins_from_the_first_due_send():
    # Times on the client's clock (perf_counter): only differences count.
    records = [record(100.0 + due, None if done is None else 100.0 + done, i)
               for i, (due, done) in enumerate([(0.0, 0.4), (0.5, 1.2), (1.0, 2.9), (1.5, 3.0),
                                                (2.0, None), (2.5, 6.1)])]
    found = rate_timeline(records)
    # 6 requests over 6.1 s want 4 x 6.1 / 6 = 4.07 s: 5 s bins. The failed one is due, never
    # finished.
    assert found == {"bin_s": 5.0, "scheduled": [6, 0], "completed": [4, 1]}
    many = [record(100.0 + i * 0.2, 100.0 + i * 0.2 + 0.9, i) for i in range(20)]
    # 20 due 0.2 s apart (0 to 3.8 s), each finished 0.9 s later (0.9 to 4.7 s): 4 x 4.7 / 20
    # = 0.94 s wanted, so 1 s bins.
    assert rate_timeline(many) == {"bin_s": 1.0, "scheduled": [5, 5, 5, 5, 0],
                                   "completed": [1, 5, 5, 5, 4]}


def test_the_last_instant_has_a_bin_and_no_records_give_nothing():
    records = [record(0.0, 0.5, 0), *[record(i * 1.0, i * 1.0 + 0.5, i) for i in range(1, 8)],
               record(8.0, 8.0, 8)]
    found = rate_timeline(records)  # 9 over 8 s: 3.6 s wanted, 5 s bins; 8.0 falls in bin 1
    assert found == {"bin_s": 5.0, "scheduled": [5, 4], "completed": [5, 4]}
    assert rate_timeline([]) == {}
