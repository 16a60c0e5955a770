"""The conversation driver (client/sessions.py) and the trace pattern against a fake `send`."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from pytest_llmperf.client.loadgen import run_load
from pytest_llmperf.client.patterns import Concurrency, Rate, Trace
from pytest_llmperf.client.sessions import NO_TEXT, NO_TOKEN_IDS, Sessions, run_sessions
from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.turns import by_turn
from pytest_llmperf.records import Request, RequestRecord


class Echo:
    """Answers request i with token ids 1000+i (output_tokens of them) and the text "<i>" in
    as many pieces, after `sleep_s`."""

    def __init__(self, sleep_s: float = 0.002, ids: bool = True, text: bool = True,
                 fail: frozenset = frozenset()):
        self.sleep_s, self.ids, self.text, self.fail = sleep_s, ids, text, fail
        self.prompts: dict[int, tuple[int, ...] | str] = {}
        self.histories: dict[int, tuple[tuple[str, str], ...]] = {}
        self.expected: dict[int, int] = {}
        self.in_flight = self.max_in_flight = 0

    async def __call__(self, index: int, request: Request, scheduled_s: float) -> RequestRecord:
        sent_s = time.perf_counter()
        self.prompts[index] = request.prompt
        self.histories[index] = request.history
        self.expected[index] = request.prompt_tokens
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(self.sleep_s)
        self.in_flight -= 1
        now = time.perf_counter()
        record = RequestRecord(index=index, expected_prompt_tokens=request.prompt_tokens,
                               expected_output_tokens=request.output_tokens,
                               scheduled_s=scheduled_s, sent_s=sent_s, chunk_times_s=[now],
                               chunk_tokens=[request.output_tokens], done_s=now,
                               usage_output_tokens=request.output_tokens,
                               output_token_ids=[] if request.keep_output else None,
                               output_text=[] if request.keep_output else None)
        if index in self.fail:
            record.error = "HTTP 500: boom"
        elif request.keep_output:
            if self.ids:
                record.output_token_ids += [1000 + index] * request.output_tokens
            if self.text:
                record.output_text += [f"<{index}>"] * request.output_tokens
        return record


def turns(sessions: int, turns: int) -> list[Request]:
    return [Request(prompt=(i, i), prompt_tokens=2, output_tokens=3)
            for i in range(sessions * turns)]


def run(requests, send, pattern, **kwargs) -> list[RequestRecord]:
    return asyncio.run(run_sessions(requests, send, pattern, **kwargs))


def test_each_turn_carries_the_conversation_with_the_servers_answers():
    send = Echo()
    records = run(turns(2, 3), send, Sessions(turns=3, start=Concurrency(max_concurrency=2)))
    assert [(r.session, r.turn) for r in records] == [(0, 1), (0, 2), (0, 3),
                                                      (1, 1), (1, 2), (1, 3)]
    assert send.prompts[0] == (0, 0)
    assert send.prompts[1] == (0, 0, 1000, 1000, 1000, 1, 1)
    assert send.prompts[2] == (0, 0, 1000, 1000, 1000, 1, 1, 1001, 1001, 1001, 2, 2)
    assert send.prompts[4] == (3, 3, 1003, 1003, 1003, 4, 4)
    assert [r.expected_prompt_tokens for r in records[:3]] == [2, 7, 12]
    assert all(r.output_token_ids is None for r in records)  # carried on, not kept twice


def texts(sessions: int, turns: int) -> list[Request]:
    return [Request(prompt=f"m{i}.", prompt_tokens=2, output_tokens=3)
            for i in range(sessions * turns)]


def test_text_turns_on_completions_carry_the_answers_text():
    """A server that takes no token ids (text_only.py) gets the conversation as one text."""
    send = Echo()
    records = run(texts(2, 3), send, Sessions(turns=3, start=Concurrency(max_concurrency=2)))
    assert all(r.ok for r in records)
    assert send.prompts[0] == "m0."
    assert send.prompts[1] == "m0.<0><0><0>m1."
    assert send.prompts[2] == "m0.<0><0><0>m1.<1><1><1>m2."
    assert send.prompts[4] == "m3.<3><3><3>m4."
    assert [send.expected[i] for i in range(3)] == [2, 7, 12]
    assert set(send.histories.values()) == {()}
    assert all(r.output_text is None for r in records)  # carried on, not kept twice


def test_chat_turns_carry_the_answers_as_assistant_messages():
    send = Echo()
    requests = texts(2, 3)
    requests[3] = Request(prompt="m3.", prompt_tokens=5, output_tokens=3,
                          history=(("system", "be brief"),))  # a file's system prompt
    records = run(requests, send, Sessions(turns=3, start=Concurrency(max_concurrency=2)),
                  chat=True)
    assert all(r.ok for r in records)
    assert [send.prompts[i] for i in range(3)] == ["m0.", "m1.", "m2."]
    assert send.histories[0] == ()
    assert send.histories[1] == (("user", "m0."), ("assistant", "<0><0><0>"))
    assert send.histories[2] == (("user", "m0."), ("assistant", "<0><0><0>"),
                                 ("user", "m1."), ("assistant", "<1><1><1>"))
    assert send.histories[3] == (("system", "be brief"),)
    assert send.histories[4] == (("system", "be brief"), ("user", "m3."),
                                 ("assistant", "<3><3><3>"))
    assert [send.expected[i] for i in range(3, 6)] == [5, 10, 15]


def test_a_server_without_answer_text_fails_a_text_turn_with_why():
    records = run(texts(1, 2), Echo(text=False),
                  Sessions(turns=2, start=Concurrency(max_concurrency=1)), chat=True)
    assert [r.error for r in records] == [
        "the server streamed no answer text, so the next turn cannot carry this answer (its "
        "chunks counted tokens but held no text)"]
    assert records[0].error == NO_TEXT


def test_conversations_of_different_lengths_keep_their_own_turns():
    send = Echo()
    pattern = Sessions(turns=3, session_turns=(2, 3, 1), start=Concurrency(max_concurrency=3))
    records = run(turns(1, 6), send, pattern)
    assert [(r.index, r.session, r.turn) for r in records] == [
        (0, 0, 1), (1, 0, 2), (2, 1, 1), (3, 1, 2), (4, 1, 3), (5, 2, 1)]
    assert send.prompts[2] == (2, 2)  # session 1 starts afresh
    assert send.prompts[4] == (2, 2, 1002, 1002, 1002, 3, 3, 1003, 1003, 1003, 4, 4)


def test_a_share_of_the_sessions_keeps_their_global_numbers():
    """What a client worker runs (workers.py): `only` names the sessions it starts (open loop),
    `take_next` hands out session numbers (closed loop)."""
    rate = Sessions(turns=2, start=Rate(requests_per_s=1000, burstiness=np.inf))
    records = run(turns(3, 2), Echo(), rate, only=[1])
    assert [(r.index, r.session, r.turn) for r in records] == [(2, 1, 1), (3, 1, 2)]
    counter = iter([2, 0, 3, 4])
    closed = Sessions(turns=2, start=Concurrency(max_concurrency=1))
    records = run(turns(3, 2), Echo(), closed, take_next=counter.__next__)
    assert [(r.index, r.session, r.turn) for r in records] == [
        (0, 0, 1), (1, 0, 2), (4, 2, 1), (5, 2, 2)]


def test_think_time_separates_a_turn_from_the_previous_ones_end():
    records = run(turns(1, 3), Echo(), Sessions(turns=3, think_time_s=0.05,
                                                start=Concurrency(max_concurrency=1)))
    for before, after in zip(records, records[1:]):
        assert after.scheduled_s == pytest.approx(before.done_s + 0.05)
        assert after.sent_s - before.done_s >= 0.05
        assert after.sent_s - after.scheduled_s < 0.02  # the queue time is client lag only


def test_concurrency_bounds_the_sessions_in_progress():
    send = Echo(sleep_s=0.005)
    records = run(turns(6, 2), send, Sessions(turns=2, start=Concurrency(max_concurrency=2)))
    assert len(records) == 12 and all(r.ok for r in records)
    assert send.max_in_flight == 2


def test_sessions_arrive_on_a_rate():
    pattern = Sessions(turns=2, start=Rate(requests_per_s=50, burstiness=np.inf))
    records = run(turns(3, 2), Echo(), pattern)
    firsts = [r.scheduled_s for r in records if r.turn == 1]
    assert np.diff(firsts) == pytest.approx([0.02, 0.02])


def test_a_failed_turn_ends_its_session_only():
    records = run(turns(2, 3), Echo(fail=frozenset({1})),
                  Sessions(turns=3, start=Concurrency(max_concurrency=2)))
    assert [(r.session, r.turn, r.ok) for r in records] == [
        (0, 1, True), (0, 2, False), (1, 1, True), (1, 2, True), (1, 3, True)]


def test_a_server_without_token_ids_fails_the_turn_with_why():
    records = run(turns(1, 2), Echo(ids=False),
                  Sessions(turns=2, start=Concurrency(max_concurrency=1)))
    assert len(records) == 1
    assert records[0].error == NO_TOKEN_IDS
    assert records[0].error == ("the server streamed no token ids, so the next turn cannot carry "
                                "this answer (multi-turn conversations need vLLM's "
                                "return_token_ids)")


def test_duration_stops_later_turns():
    records = run(turns(1, 5), Echo(), Sessions(turns=5, think_time_s=0.05,
                                                start=Concurrency(max_concurrency=1)),
                  duration_s=0.08)
    assert [r.turn for r in records] == [1, 2]


def test_bad_sessions_say_why():
    with pytest.raises(InputError, match=r"^Sessions.turns must be an int >= 1, got 0$"):
        Sessions(turns=0, start=Concurrency(max_concurrency=1))
    with pytest.raises(InputError, match=r"^Sessions.think_time_s must be a number >= 0, "
                                         r"got -1$"):
        Sessions(turns=1, think_time_s=-1, start=Concurrency(max_concurrency=1))
    with pytest.raises(InputError, match=r"^5 requests do not make whole conversations of 2 "
                                         r"turns$"):
        run(turns(1, 5), Echo(), Sessions(turns=2, start=Concurrency(max_concurrency=1)))
    one = Sessions(turns=1, start=Concurrency(max_concurrency=1))
    ids = [Request(prompt=(1,), prompt_tokens=1, output_tokens=1)]
    with pytest.raises(InputError, match=r"^chat conversations need text prompts \(a chat "
                                         r"turn's messages are text\): use "
                                         r"prompt_format='text'$"):
        run(ids, Echo(), one, chat=True)
    mixed = [*ids, Request(prompt="hi", prompt_tokens=1, output_tokens=1)]
    with pytest.raises(InputError, match=r"^a conversation's turns are all token ids or all "
                                         r"text, not both$"):
        run(mixed, Echo(), Sessions(turns=2, start=Concurrency(max_concurrency=1)))
    with pytest.raises(InputError, match=r"^Sessions.session_turns must be ints from 1 to turns "
                                         r"\(3\), got 4$"):
        Sessions(turns=3, session_turns=(2, 4), start=Concurrency(max_concurrency=1))
    with pytest.raises(InputError, match=r"^6 requests do not make the 2 conversations of 5 "
                                         r"turns in all$"):
        run(turns(3, 2), Echo(), Sessions(turns=3, session_turns=(2, 3),
                                          start=Concurrency(max_concurrency=1)))


def test_by_turn_summarises_each_turn_index():
    records = run(turns(3, 2), Echo(), Sessions(turns=2, start=Concurrency(max_concurrency=3)))
    summary = by_turn(records)
    assert list(summary) == ["1", "2"]
    assert summary["1"]["requests"] == 3 and summary["1"]["failed"] == 0
    assert summary["1"]["prompt_tokens.mean"] == 2
    assert summary["2"]["prompt_tokens.mean"] == 7
    assert summary["2"]["ttft_s.p50"] > 0
    assert by_turn([r for r in records if False]) == {}


# --- the trace pattern ---------------------------------------------------------------------------


def test_trace_offsets_are_the_schedule():
    pattern = Trace(offsets_s=(0.0, 0.01, 0.01, 0.05))
    assert pattern.arrival_offsets(4, seed=1).tolist() == [0.0, 0.01, 0.01, 0.05]
    sent: list[float] = []

    async def send(index, request, scheduled_s):
        sent.append(scheduled_s)
        now = time.perf_counter()
        return RequestRecord(index=index, expected_prompt_tokens=1, expected_output_tokens=1,
                             scheduled_s=scheduled_s, sent_s=now, chunk_times_s=[now],
                             chunk_tokens=[1], done_s=now)

    requests = [Request(prompt=(1,), prompt_tokens=1, output_tokens=1)] * 4
    records = asyncio.run(run_load(requests, send, pattern))
    assert np.array(sent) - sent[0] == pytest.approx([0.0, 0.01, 0.01, 0.05])
    assert max(r.sent_s - r.scheduled_s for r in records) < 0.02


def test_a_bad_trace_schedule_says_why():
    with pytest.raises(InputError, match=r"^Trace.offsets_s must be non-decreasing seconds "
                                         r"starting at 0, got \(0.0, 2.0, 1.0\)\.\.\.$"):
        Trace(offsets_s=(0.0, 2.0, 1.0))


# --- the workload ---------------------------------------------------------------------------------


def test_conversations_workload_lays_turns_out_session_major():
    from pytest_llmperf import Workload

    class Vocab:
        vocab_size, special_ids = 500, frozenset({0})

    workload = Workload.conversations(sessions=3, turns=4, input_tokens=16, output_tokens=8,
                                      think_time_s=0.5, warmup_requests=2)
    assert workload.num_requests == 12
    assert workload.pattern == Sessions(turns=4, think_time_s=0.5,
                                        start=Concurrency(max_concurrency=3))
    assert workload.label() == ("chat-3x4turns x12 @ 4 turns, think 0.5 s, sessions at "
                                "concurrency 3")
    assert workload.to_dict()["pattern"] == {
        "type": "Sessions", "turns": 4, "think_time_s": 0.5,
        "start": {"type": "Concurrency", "max_concurrency": 3}}
    requests, warmup = workload.build(Vocab())
    assert len(requests) == 12 and len(warmup) == 2
    assert {len(r.prompt) for r in requests} == {16} and {r.output_tokens for r in requests} == {8}
    rated = Workload.conversations(sessions=2, turns=2, input_tokens=16, output_tokens=8,
                                   rate=2.0)
    assert rated.pattern.start == Rate(requests_per_s=2.0)
