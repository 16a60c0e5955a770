"""A reasoning request's stream (client/sse.py): the chunks of thinking (`reasoning`, or
`reasoning_content` from servers before vLLM 0.11) and of the answer (`content`) counted apart,
the answer's first chunk timed, the server's own count read from its usage. Chunk shapes are
those vLLM 0.32.0 streams with --reasoning-parser deepseek_r1 and return_token_ids."""

from __future__ import annotations

from pytest_llmperf.client.sse import StreamDecoder
from pytest_llmperf.records import RequestRecord
from tests.unit.reasoning_chunks import ANSWER, DONE, MARKER, ROLE, STREAM, THOUGHT, USAGE


def decoded(lines: list[str], reasoning: bool, whole: bool = False) -> RequestRecord:
    """Each line its own read at 1.0, 2.0, ... (or, `whole`, the body in one read at 1.0)."""
    record = RequestRecord(index=0, expected_prompt_tokens=9, expected_output_tokens=7,
                           scheduled_s=0.0)
    if reasoning:
        record.reasoning_tokens = record.answer_tokens = 0
    decoder = StreamDecoder(record)
    body = [f"{line}\n\n".encode() for line in lines]
    if whole:
        joined = b"".join(body)
        decoder.feed_reads(joined, [len(joined)], [1.0])
    else:
        for now, part in enumerate(body, start=1):
            decoder.feed_reads(part, [len(part)], [float(now)])
    assert decoder.finished
    return record


def test_thinking_and_answer_are_counted_apart_and_the_answer_timed():
    record = decoded(STREAM, reasoning=True)
    assert record.chunk_times_s == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]  # every token, markers too
    assert (record.reasoning_tokens, record.answer_tokens) == (3, 2)  # 1 + 2 ids of thinking
    assert record.first_output_s == 6.0  # the first `content` chunk, not the role chunk's ""
    assert (record.usage_reasoning_tokens, record.output_tokens) == (3, 7)


def test_a_body_read_at_once_is_split_the_same_way():
    record = decoded(STREAM, reasoning=True, whole=True)
    assert (record.reasoning_tokens, record.answer_tokens, record.first_output_s) == (3, 2, 1.0)
    assert sum(record.chunk_tokens) == 7


def test_a_request_that_asked_for_no_split_keeps_none():
    record = decoded(STREAM, reasoning=False, whole=True)
    assert (record.reasoning_tokens, record.answer_tokens, record.first_output_s) == (
        None, None, None)
    assert sum(record.chunk_tokens) == 7  # counted as always


def test_an_answer_that_never_starts_has_no_first_output():
    record = decoded([ROLE, MARKER, THOUGHT, THOUGHT, USAGE, DONE], reasoning=True)
    assert (record.reasoning_tokens, record.answer_tokens, record.first_output_s) == (2, 0, None)


def test_a_chunk_that_ends_the_thinking_and_starts_the_answer_does_both():
    both = 'data: {"choices":[{"delta":{"reasoning":"a","content":"b"},"token_ids":[5,6]}]}'
    record = decoded([ROLE, THOUGHT, both, ANSWER, USAGE, DONE], reasoning=True)
    assert (record.reasoning_tokens, record.answer_tokens, record.first_output_s) == (3, 1, 3.0)
