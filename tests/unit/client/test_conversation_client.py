"""Conversations through the real client against the mock server (clientbench/mockserver.py):
what each turn's request carried on the wire, in one process and across client workers.

The mock answers every token with id 1234 and the text " tok" (mockwire._templates), so a
turn's answer as the server generated it is known: turn 2's request must carry it, as token ids
on /v1/completions and as the assistant message on /v1/chat/completions. The server runs in a
thread of this process and keeps every request body it received.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pytest_llmperf import Workload
from pytest_llmperf.client.measure import Endpoint, measure
from pytest_llmperf.client.openai import ClientOptions
from pytest_llmperf.client.sse import StreamDecoder
from pytest_llmperf.clientbench import mockserver, mockstreams
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.workloads.prompts import load_tokenizer
from suites.tiny import TINY_CPU

ANSWER_ID, ANSWER_TEXT = 1234, " tok"  # what the mock streams for every token
OUTPUT = 3  # tokens per answer


class Recording(mockstreams.MockServer):
    """The mock server, keeping the body of every streamed request."""

    def __init__(self) -> None:
        super().__init__(interval_s=0.002)
        self.bodies: list[dict] = []

    def add(self, conn, path, body, arrived_s) -> None:
        self.bodies.append(body)
        super().add(conn, path, body, arrived_s)


@contextmanager
def mock_server() -> Iterator[tuple[Recording, str]]:
    server = Recording()
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port: list[int] = []

    def listening(number: int) -> None:
        port.append(number)
        ready.set()

    def run() -> None:
        serving = loop.create_task(mockserver._serve(server, "127.0.0.1", 0, listening))
        try:
            loop.run_until_complete(serving)
        except asyncio.CancelledError:
            pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10), "the mock server did not start"
    try:
        yield server, f"http://127.0.0.1:{port[0]}"
    finally:
        loop.call_soon_threadsafe(lambda: [t.cancel() for t in asyncio.all_tasks(loop)])
        thread.join(10)
        loop.close()


class Vocab:
    vocab_size, special_ids = 500, frozenset({0})


def numbering(records: list[RequestRecord]) -> list[tuple[int, int, int]]:
    return [(r.index, r.session, r.turn) for r in records]


def whole(sessions: int, turns: int) -> list[tuple[int, int, int]]:
    return [(s * turns + t, s, t + 1) for s in range(sessions) for t in range(turns)]


def expected_token_prompts(requests, sessions: int, turns: int) -> Counter:
    """Each turn's prompt: the earlier prompts, each followed by the answer's ids."""
    prompts: Counter = Counter()
    for s in range(sessions):
        carried: tuple[int, ...] = ()
        for t in range(turns):
            prompt = carried + requests[s * turns + t].prompt
            prompts[prompt] += 1
            carried = prompt + (ANSWER_ID,) * OUTPUT
    return prompts


@pytest.mark.parametrize("workers", [1, 2])
def test_each_completions_turn_carries_the_earlier_answers_token_ids(workers):
    """With 2 client workers each process keeps 2 of the 4 sessions going; the records merge
    into one numbering, and every turn still carries its own session's answers."""
    workload = Workload.conversations(sessions=4, turns=3, input_tokens=5, output_tokens=OUTPUT)
    requests, _ = workload.build(Vocab())
    with mock_server() as (server, url):
        measured = measure(Endpoint(url, "mock"), requests, workload.pattern, seed=0,
                           workers=workers)
    assert measured.client_error is None and measured.client.workers == workers
    assert [r.error for r in measured.records] == [None] * 12
    assert numbering(measured.records) == whole(4, 3)
    sent = Counter(tuple(body["prompt"]) for body in server.bodies)
    assert sent == expected_token_prompts(requests, 4, 3)
    assert [r.expected_prompt_tokens for r in measured.records[:3]] == [5, 13, 21]
    assert all(body["return_token_ids"] for body in server.bodies)


@pytest.mark.parametrize(("vllm_extensions", "workers"), [(True, 1), (False, 1), (True, 2)],
                         ids=["token-ids", "text-only", "two-workers"])
def test_each_chat_turn_carries_the_earlier_answers_as_assistant_messages(vllm_extensions,
                                                                          workers):
    """With token ids in the stream (vLLM) the client reads the bulk path; without them, the
    line path: either way the answer's text is kept for the next turn."""
    workload = Workload.conversations(sessions=2, turns=3, input_tokens=6, output_tokens=OUTPUT,
                                      api="chat")
    requests, _ = workload.build(load_tokenizer(TINY_CPU.model))
    options = ClientOptions(api="chat", vllm_extensions=vllm_extensions)
    with mock_server() as (server, url):
        measured = measure(Endpoint(url, "mock", options), requests, workload.pattern, seed=0,
                           workers=workers)
    assert measured.client.workers == workers
    assert [r.error for r in measured.records] == [None] * 6
    assert numbering(measured.records) == whole(2, 3)
    answer = {"role": "assistant", "content": ANSWER_TEXT * OUTPUT}
    expected = []
    for s in range(2):
        messages: list[dict] = []
        for t in range(3):
            messages = [*messages, {"role": "user", "content": requests[s * 3 + t].prompt}]
            expected.append(messages)
            messages = [*messages, answer]
    sent = [body["messages"] for body in server.bodies]
    assert sorted(map(repr, sent)) == sorted(map(repr, expected))


def test_text_turns_on_completions_carry_the_earlier_answers_text():
    """A server that takes no token ids gets the conversation as one text (text_only.py)."""
    workload = Workload.conversations(sessions=1, turns=3, input_tokens=6, output_tokens=OUTPUT,
                                      prompt_format="text")
    requests, _ = workload.build(load_tokenizer(TINY_CPU.model))
    with mock_server() as (server, url):
        measured = measure(Endpoint(url, "mock"), requests, workload.pattern, seed=0)
    assert [r.error for r in measured.records] == [None] * 3
    m0, m1, m2 = (r.prompt for r in requests)
    answer = ANSWER_TEXT * OUTPUT
    assert [body["prompt"] for body in server.bodies] == [
        m0, m0 + answer + m1, m0 + answer + m1 + answer + m2]


def test_a_conversation_file_over_the_chat_api_sends_its_system_prompt_first(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text('[{"id": "a", "conversations": ['
                    '{"role": "system", "content": "Be brief."},'
                    '{"role": "user", "content": "Hello there"}, {"role": "assistant", '
                    '"content": "Hi"}, {"role": "user", "content": "Bye"}, '
                    '{"role": "assistant", "content": "Goodbye now"}]}]')
    workload = Workload.conversation_file(path, format="inference-benchmarker", api="chat")
    requests, _ = workload.build(load_tokenizer(TINY_CPU.model))
    with mock_server() as (server, url):
        measured = measure(Endpoint(url, "mock", ClientOptions(api="chat")), requests,
                           workload.pattern, seed=0)
    assert [r.error for r in measured.records] == [None, None]
    answer = ANSWER_TEXT * requests[0].output_tokens
    assert [body["messages"] for body in server.bodies] == [
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"},
         {"role": "assistant", "content": answer}, {"role": "user", "content": "Bye"}]]
    assert [body["max_tokens"] for body in server.bodies] == [r.output_tokens for r in requests]


def test_the_stream_decoder_keeps_the_text_only_where_asked():
    events = (b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
              b'data: {"choices":[{"delta":{"content":"Hel"},"token_ids":[7]}]}\n\n'
              b'data: {"choices":[{"delta":{"content":"lo"},"token_ids":[8,9]}]}\n\n'
              b'data: [DONE]\n\n')
    for feed in ("bulk", "line"):
        kept = RequestRecord(0, 1, 3, 0.0, output_token_ids=[], output_text=[])
        counted = RequestRecord(0, 1, 3, 0.0)
        for record in (kept, counted):
            decoder = StreamDecoder(record)
            if feed == "bulk":
                decoder.feed_reads(events, [len(events)], [1.0])
            else:
                decoder.feed(events, 1.0)
            assert decoder.finished and record.chunk_tokens == [1, 2]
        assert (kept.output_text, kept.output_token_ids) == (["Hel", "lo"], [7, 8, 9]), feed
        assert counted.output_text is None, feed
