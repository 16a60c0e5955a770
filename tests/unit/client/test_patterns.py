"""Load patterns (client/patterns.py): what each one answers about itself, so that callers ask it
instead of testing its class."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from pytest_llmperf.client.patterns import (
    Concurrency,
    Ramp,
    Rate,
    Trace,
    counts_slot_waits,
    pattern_type,
)
from pytest_llmperf.client.sessions import Sessions
from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request, RequestRecord

TRACE = Trace(offsets_s=(0.0, 0.5, 2.25), max_concurrency=4)


@pytest.mark.parametrize(("pattern", "open_loop", "replay"), [
    (Concurrency(max_concurrency=2), False, False),
    (Rate(requests_per_s=2), True, False),
    (Ramp(start_rps=1, end_rps=2), True, False),
    (TRACE, True, True),
    (Sessions(turns=2, start=Concurrency(max_concurrency=2)), True, False),
])
def test_each_pattern_says_whether_it_is_an_open_loop_and_a_replay(pattern, open_loop, replay):
    assert (pattern.open_loop, pattern.replay) == (open_loop, replay)


@pytest.mark.parametrize(("pattern", "waits"), [
    (Rate(requests_per_s=2, max_concurrency=3), True),
    (TRACE, True),
    (Rate(requests_per_s=2), False),
    (Concurrency(max_concurrency=3), False),  # a closed loop's slot wait is its own pace
    (Sessions(turns=2, start=Rate(requests_per_s=1)), False),
])
def test_only_a_capped_open_loop_counts_slot_waits(pattern, waits):
    assert counts_slot_waits(pattern) is waits


def test_describe_writes_an_infinity_as_inf_and_leaves_unset_fields_out():
    assert Rate(requests_per_s=math.inf).to_dict() == {
        "type": "Rate", "requests_per_s": "inf", "burstiness": 1.0}
    assert Concurrency(max_concurrency=3).to_dict() == {"type": "Concurrency",
                                                         "max_concurrency": 3}
    assert Rate(requests_per_s=math.inf).settings() == {"requests_per_s": math.inf,
                                                         "burstiness": 1.0}


def test_a_trace_describes_its_shape_not_its_offsets():
    assert TRACE.to_dict() == {"type": "Trace", "requests": 3, "span_s": 2.25,
                                "max_concurrency": 4}


@pytest.mark.parametrize(("pattern", "at_rate"), [
    (Rate(requests_per_s=2, burstiness=0.5, max_concurrency=3),
     Rate(requests_per_s=8, burstiness=0.5, max_concurrency=3)),
    (Ramp(start_rps=1, end_rps=4, max_concurrency=3), Rate(requests_per_s=8, max_concurrency=3)),
    (Concurrency(max_concurrency=3), Rate(requests_per_s=8)),
    (TRACE, Rate(requests_per_s=8)),
])
def test_with_rate_keeps_what_the_pattern_says_a_rate_keeps(pattern, at_rate):
    assert pattern.with_rate(8) == at_rate


def test_a_closed_loop_has_no_schedule():
    assert np.array_equal(Concurrency(max_concurrency=2).arrival_offsets(5, 0), np.zeros(5))


def test_a_trace_schedules_its_own_offsets_and_no_more():
    assert TRACE.arrival_offsets(2, seed=9).tolist() == [0.0, 0.5]
    with pytest.raises(InputError, match=r"^a Trace of 3 arrivals cannot schedule 4$"):
        TRACE.arrival_offsets(4, seed=0)


def test_a_negative_count_is_refused():
    with pytest.raises(InputError, match=r"^n must be >= 0, got -1$"):
        Rate(requests_per_s=1).arrival_offsets(-1, seed=0)


def test_a_replayed_trace_cannot_start_sessions():
    with pytest.raises(InputError, match=r"^Sessions.start must be Concurrency, Rate or Ramp, "
                                         r"got Trace$"):
        Sessions(turns=2, start=TRACE)


def test_sessions_cannot_start_sessions():
    inner = Sessions(turns=2, start=Concurrency(max_concurrency=1))
    with pytest.raises(InputError, match=r"^Sessions.start must be Concurrency, Rate or Ramp, "
                                         r"got Sessions$"):
        Sessions(turns=2, start=inner)


def test_a_conversation_has_no_schedule_of_its_own():
    sessions = Sessions(turns=2, start=Rate(requests_per_s=1))
    with pytest.raises(InputError, match=r"^a conversation's turns have no schedule \(each goes "
                                         r"when the one before it ended\); its sessions start "
                                         r"as Sessions.start says$"):
        sessions.arrival_offsets(4, seed=0)


def _echo(sent: list):
    """A send that notes each prompt and answers request i at once with the token id 100+i."""
    async def send(index: int, request: Request, scheduled_s: float) -> RequestRecord:
        sent.append(request.prompt)
        return RequestRecord(index=index, expected_prompt_tokens=request.prompt_tokens,
                             expected_output_tokens=1, scheduled_s=scheduled_s,
                             sent_s=scheduled_s, chunk_times_s=[scheduled_s], chunk_tokens=[1],
                             done_s=scheduled_s, usage_output_tokens=1,
                             output_token_ids=[100 + index] if request.keep_output else None)
    return send


@pytest.mark.parametrize(("pattern", "prompts"), [
    # One request at a time, each as it is.
    (Concurrency(max_concurrency=1), [(1,), (2,), (3,), (4,)]),
    # Two conversations of two turns: a second turn carries the first turn and its answer.
    (Sessions(turns=2, start=Concurrency(max_concurrency=1)), [(1,), (1, 100, 2), (3,),
                                                               (3, 102, 4)]),
])
def test_run_drives_each_pattern_its_own_way(pattern, prompts):
    requests = [Request(prompt=(i,), prompt_tokens=1, output_tokens=1) for i in range(1, 5)]
    sent: list = []
    records = asyncio.run(pattern.run(requests, _echo(sent)))
    assert (sent, [r.index for r in records]) == (prompts, [0, 1, 2, 3])


@pytest.mark.parametrize("pattern", [
    Concurrency(max_concurrency=3),
    Rate(requests_per_s=math.inf, burstiness=0.5, max_concurrency=2),
    Ramp(start_rps=1, end_rps=4, strategy="exponential"),
    Sessions(turns=3, think_time_s=0.5, start=Rate(requests_per_s=2)),
])
def test_a_recorded_pattern_reads_back_by_its_type(pattern):
    recorded = pattern.to_dict()
    assert pattern_type(recorded["type"]).from_dict(recorded) == pattern


def test_a_recorded_trace_or_file_conversation_cannot_be_read_back():
    with pytest.raises(InputError, match=r"^a run file records a Trace's shape, not its "
                                         r"arrivals: replay the trace file again"):
        Trace.from_dict(TRACE.to_dict())
    files = Sessions(turns=3, start=Concurrency(max_concurrency=1), session_turns=(2, 3))
    with pytest.raises(InputError, match=r"^a run file records a conversation file's session "
                                         r"count, not each conversation's turns"):
        Sessions.from_dict(files.to_dict())
    assert pattern_type("NoSuchPattern") is None
