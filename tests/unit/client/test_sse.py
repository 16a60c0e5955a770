"""StreamDecoder: raw response-body bytes of an OpenAI-compatible stream -> one RequestRecord.

Every test feeds bytes with an explicit read time, as http1.py does when bytes come off the
socket, so each recorded time is exact. Chunk shapes are the ones vLLM 0.32 streams.
"""

from __future__ import annotations

from itertools import accumulate

import pytest

from pytest_llmperf.client.sse import ERROR_BODY_CHARS, StreamDecoder
from pytest_llmperf.records import RequestRecord
from tests.unit.vllm_chunks import (
    CHAT_ROLE,
    CHAT_TOKEN,
    COMPLETION_CHUNK,
    DONE,
    EMPTY_TEXT_ONE_ID,
    FINISH,
    TWO_IDS,
    USAGE,
    USAGE_CACHED,
)


def fresh() -> RequestRecord:
    return RequestRecord(index=0, expected_prompt_tokens=16, expected_output_tokens=8,
                         scheduled_s=0.0)


def event(line: str, ending: str = "\n") -> bytes:
    """One SSE event as a server writes it: the line, then the blank line that ends it."""
    return f"{line}{ending}{ending}".encode()


def feed_events(lines: list[str]) -> tuple[RequestRecord, StreamDecoder, list[bool]]:
    """Each line as its own read at times 1.0, 2.0, ...; returns `finished` after each read."""
    record = fresh()
    decoder = StreamDecoder(record)
    finished = []
    for now, line in enumerate(lines, start=1):
        decoder.feed(event(line), float(now))
        finished.append(decoder.finished)
    return record, decoder, finished


# ------------------------------------------------------------------ chunk shapes, one read each


def test_completion_chunk_is_one_token_at_its_read_time():
    record, decoder, finished = feed_events([COMPLETION_CHUNK])
    assert finished == [False]
    assert (record.chunk_times_s, record.chunk_tokens) == ([1.0], [1])
    assert record.tokens_estimated is False
    assert record.usage_output_tokens is None  # "usage": null is no usage
    assert record.error is None
    assert decoder.coalesced == 0


def test_empty_text_with_a_token_id_still_counts():
    # A token that decodes to nothing (a partial UTF-8 byte) is still a generated token.
    record, _, _ = feed_events([EMPTY_TEXT_ONE_ID])
    assert record.chunk_tokens == [1]
    assert record.tokens_estimated is False


def test_two_token_ids_count_two():
    # Speculative decoding or a stream interval puts several tokens in one chunk.
    record, _, _ = feed_events([TWO_IDS])
    assert record.chunk_tokens == [2]


def test_an_empty_token_id_list_counts_nothing_and_is_not_estimated():
    # token_ids present but empty: no token, and no fall back to the text.
    record, _, _ = feed_events(['data: {"choices":[{"index":0,"text":"x","token_ids":[]}]}'])
    assert (record.chunk_times_s, record.chunk_tokens) == ([], [])
    assert record.tokens_estimated is False


def test_usage_chunk_sets_usage_and_is_not_a_token_chunk():
    record, _, finished = feed_events([COMPLETION_CHUNK, USAGE])
    assert finished == [False, False]
    assert (record.usage_prompt_tokens, record.usage_output_tokens) == (16, 8)
    assert record.chunk_times_s == [1.0]
    assert record.output_tokens == 8  # usage wins over the chunk sum


def test_chat_role_chunk_counts_nothing():
    # TTFT must start at the first *token*, not at the empty role chunk.
    record, _, _ = feed_events([CHAT_ROLE, CHAT_TOKEN])
    assert (record.chunk_times_s, record.chunk_tokens) == ([2.0], [1])
    assert record.tokens_estimated is False


def test_without_token_ids_one_token_per_non_empty_text_and_marked_estimated():
    lines = [
        'data: {"choices":[{"index":0,"text":" foo"}]}',
        'data: {"choices":[{"index":0,"text":""}]}',
        'data: {"choices":[{"delta":{"content":" bar"}}]}',
    ]
    record, _, _ = feed_events(lines)
    assert (record.chunk_times_s, record.chunk_tokens) == ([1.0, 3.0], [1, 1])
    assert record.tokens_estimated is True


def test_several_choices_in_one_chunk_each_count():
    line = ('data: {"choices":[{"index":0,"text":"a","token_ids":[1]},'
            '{"index":1,"text":"b","token_ids":[2,3]}]}')
    record, decoder, _ = feed_events([line])
    assert (record.chunk_times_s, record.chunk_tokens) == ([1.0, 1.0], [1, 2])
    assert decoder.coalesced == 0  # one event, not two events in one read


def test_unknown_fields_are_skipped():
    line = ('data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m",'
            '"choices":[{"index":0,"text":"x","logprobs":null,"token_ids":[7],'
            '"prompt_token_ids":null,"stop_reason":null}],"usage":null,"extra":{"a":[1,2]}}')
    record, _, _ = feed_events([line])
    assert record.chunk_tokens == [1] and record.error is None


# ------------------------------------------------------------------ end of stream


def test_done_ends_the_stream():
    record, _, finished = feed_events([COMPLETION_CHUNK, DONE])
    assert finished == [False, True]
    assert record.error is None


def test_done_without_a_space_ends_the_stream():
    record, _, finished = feed_events(
        ['data:{"choices":[{"index":0,"text":"x","token_ids":[1]}]}', "data:[DONE]"])
    assert finished == [False, True]
    assert record.chunk_tokens == [1]


def test_data_without_a_space_is_read():
    record, _, _ = feed_events(['data:{"choices":[{"index":0,"text":"x","token_ids":[1]}]}'])
    assert (record.chunk_times_s, record.chunk_tokens) == ([1.0], [1])


def test_nothing_after_done_in_the_same_read_is_read():
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(event(COMPLETION_CHUNK) + event(DONE) + event(COMPLETION_CHUNK), 1.0)
    assert decoder.finished
    assert record.chunk_tokens == [1]


def test_feeds_after_finished_are_ignored():
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(event(COMPLETION_CHUNK) + event(DONE), 1.0)
    decoder.feed(event(TWO_IDS) + event("data: {not json"), 2.0)
    assert decoder.finished
    assert (record.chunk_times_s, record.chunk_tokens) == ([1.0], [1])
    assert record.error is None


def test_feeds_after_an_error_are_ignored():
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(event("data: {first"), 1.0)
    decoder.feed(event("data: {second") + event(COMPLETION_CHUNK), 2.0)
    assert record.error.endswith("b'data: {first'")
    assert record.chunk_tokens == []


def test_a_stream_without_done_is_not_finished():
    # The caller judges such a stream: it knows whether the connection closed early.
    record, decoder, _ = feed_events([COMPLETION_CHUNK, USAGE])
    assert not decoder.finished
    assert record.error is None


# ------------------------------------------------------------------ lines that are not data


def test_lines_that_are_not_data_are_skipped_and_not_timed():
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(b"\n: ping\nevent: message\nid: 3\nretry: 10\n\n", 1.0)
    assert (record.chunk_times_s, decoder.finished, record.error) == ([], False, None)
    decoder.feed(event(COMPLETION_CHUNK), 2.0)
    assert record.chunk_times_s == [2.0]


def test_a_comment_line_is_ignored():
    # `: ping` is the keep-alive comment some servers send while a request waits.
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(b": ping\n\n", 1.0)
    decoder.feed(b": ping\n\n" + event(COMPLETION_CHUNK) + b": ping\n\n", 2.0)
    assert (record.chunk_times_s, record.chunk_tokens) == ([2.0], [1])
    assert record.error is None and not decoder.finished


# ------------------------------------------------------------------ how bytes arrive


def test_an_event_split_across_two_reads_counts_once_at_the_second_read():
    record = fresh()
    decoder = StreamDecoder(record)
    whole = event(COMPLETION_CHUNK)
    cut = 20  # inside the JSON
    decoder.feed(whole[:cut], 1.0)
    assert record.chunk_times_s == []  # an unfinished line is kept, not decoded
    decoder.feed(whole[cut:], 2.0)
    assert (record.chunk_times_s, record.chunk_tokens) == ([2.0], [1])
    assert record.error is None
    assert decoder.coalesced == 0


def test_an_event_split_byte_by_byte():
    record = fresh()
    decoder = StreamDecoder(record)
    data = event(COMPLETION_CHUNK) + event(TWO_IDS) + event(DONE)
    for now, byte in enumerate(data, start=1):
        decoder.feed(bytes([byte]), float(now))
    assert record.chunk_tokens == [1, 2]
    # Each token event is timed by the read that brought its line break.
    first_end = len(COMPLETION_CHUNK) + 1
    second_end = len(event(COMPLETION_CHUNK)) + len(TWO_IDS) + 1
    assert record.chunk_times_s == [float(first_end), float(second_end)]
    assert decoder.finished and record.error is None


def test_the_data_prefix_split_across_reads():
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(b"da", 1.0)
    decoder.feed(b"ta: " + COMPLETION_CHUNK[6:].encode() + b"\n\nda", 2.0)
    decoder.feed(b"ta: [DONE]\n\n", 3.0)
    assert (record.chunk_times_s, record.chunk_tokens) == ([2.0], [1])
    assert decoder.finished


def test_a_read_ending_between_line_break_and_blank_line():
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(COMPLETION_CHUNK.encode() + b"\n", 1.0)  # the event's line is complete
    decoder.feed(b"\n", 2.0)
    assert record.chunk_times_s == [1.0]


def test_several_events_in_one_read_share_its_time_and_are_coalesced():
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(event(COMPLETION_CHUNK), 1.0)
    decoder.feed(event(COMPLETION_CHUNK) + event(TWO_IDS) + event(EMPTY_TEXT_ONE_ID), 2.0)
    assert record.chunk_times_s == [1.0, 2.0, 2.0, 2.0]
    assert record.chunk_tokens == [1, 1, 2, 1]
    # The first event of the read came after another read's; the other two shared its read.
    assert decoder.coalesced == 2


def test_the_first_read_of_a_stream_coalesces_all_but_its_first_token_event():
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(event(CHAT_ROLE) + event(CHAT_TOKEN) + event(CHAT_TOKEN) + event(USAGE), 5.0)
    assert record.chunk_times_s == [5.0, 5.0]
    # The role and usage events carry no token: they neither count nor break the run.
    assert decoder.coalesced == 1


def test_events_without_tokens_do_not_count_as_coalesced():
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(event(COMPLETION_CHUNK), 1.0)
    decoder.feed(event(USAGE) + event(DONE), 2.0)
    assert decoder.coalesced == 0


def test_crlf_line_endings():
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(event(CHAT_ROLE, "\r\n") + event(CHAT_TOKEN, "\r\n") + b": ping\r\n\r\n", 1.0)
    decoder.feed(event(TWO_IDS, "\r\n") + event(USAGE, "\r\n"), 2.0)
    assert not decoder.finished
    decoder.feed(event(DONE, "\r\n"), 3.0)
    assert (record.chunk_times_s, record.chunk_tokens) == ([1.0, 2.0], [1, 2])
    assert (record.usage_prompt_tokens, record.usage_output_tokens) == (16, 8)
    assert decoder.finished and record.error is None


def test_crlf_split_between_cr_and_lf():
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(COMPLETION_CHUNK.encode() + b"\r", 1.0)
    decoder.feed(b"\n\r\ndata:[DONE]\r", 2.0)
    assert record.chunk_times_s == [2.0]
    assert not decoder.finished  # "[DONE]" still waits for its line break
    decoder.feed(b"\n\r\n", 3.0)
    assert decoder.finished and record.error is None


# ------------------------------------------------------------------ errors

# sse.py declares `error: msgspec.Raw | None`, and msgspec then accepts only `null` there: every
# real error event fails to decode and is reported as "malformed stream event (Expected `null`,
# got `object` - at `$.error`): ..." instead of "server error in stream: ...". These tests hold
# the intended behaviour (the old client's) and pass once sse.py is fixed.

def test_an_error_event_fails_the_record_and_ends_the_stream():
    record, decoder, finished = feed_events([COMPLETION_CHUNK, 'data: {"error": "boom"}'])
    assert finished == [False, True]
    assert record.error is not None and not record.ok
    assert record.chunk_tokens == [1]


def test_error_in_the_stream_sets_the_record_error():
    error = ('data: {"error": {"object": "error", "message": "boom", '
             '"type": "InternalServerError", "code": 500}}')
    record, _, finished = feed_events([COMPLETION_CHUNK, error])
    assert finished == [False, True]
    assert record.error == (
        'server error in stream: {"object": "error", "message": "boom", '
        '"type": "InternalServerError", "code": 500}'
    )
    assert record.chunk_tokens == [1]
    assert not record.ok


def test_error_detail_is_the_json_as_the_server_sent_it():
    record, _, _ = feed_events(['data: {"error":{"message":"engine died","code":500}}'])
    assert record.error == 'server error in stream: {"message":"engine died","code":500}'


def test_long_error_detail_is_cut():
    message = "x" * 1000
    record, _, _ = feed_events([f'data: {{"error": "{message}"}}'])
    detail = ('"' + message)[:ERROR_BODY_CHARS]
    assert record.error == "server error in stream: " + detail


def test_error_null_is_no_error():
    record, decoder, _ = feed_events(
        ['data: {"choices":[{"index":0,"text":"x","token_ids":[1]}],"error":null}'])
    assert record.error is None and not decoder.finished
    assert record.chunk_tokens == [1]


def test_malformed_json_event_is_an_error_with_the_exact_text():
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(event(COMPLETION_CHUNK) + event("data: {not json") + event(TWO_IDS), 1.0)
    assert decoder.finished
    assert record.error == (
        "malformed stream event (JSON is malformed: object keys must be strings (byte 2)): "
        "b'data: {not json'"
    )
    assert record.chunk_tokens == [1]  # nothing after it is read


def test_event_of_the_wrong_shape_is_an_error():
    record, decoder, _ = feed_events(['data: {"choices":{}}'])
    assert decoder.finished
    assert record.error == (
        "malformed stream event (Expected `array | null`, got `object` - at `$.choices`): "
        "b'data: {\"choices\":{}}'"
    )


def test_malformed_event_quote_is_cut():
    line = "data: {" + "y" * 1000
    record, _, _ = feed_events([line])
    assert record.error.startswith("malformed stream event (JSON is malformed: ")
    assert record.error.endswith(repr(line[:ERROR_BODY_CHARS].encode()))


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_done_with_surrounding_spaces(ending):
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed(f"data:  [DONE] {ending}{ending}".encode(), 1.0)
    assert decoder.finished and record.error is None


# ------------------------------------------------------------------ the bulk path (feed_reads)

TEXT_ONLY = 'data: {"choices":[{"index":0,"text":" hi"}]}'
ERROR_EVENT = 'data: {"error": {"message": "engine died", "code": 500}}'
NULL_ERROR = 'data: {"choices":[{"text":"x","token_ids":[9]}],"error":null}'
MALFORMED = "data: {not json"


def split_into_reads(body: bytes, rng) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(body)), k=min(len(body) - 1, rng.randrange(1, 12))))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]


def ends_of(reads: list[bytes]) -> list[int]:
    """Where each read ends in the reads joined: feed_reads' `ends`."""
    return list(accumulate(map(len, reads)))


def read_both_ways(reads: list[bytes], batches: list[int]):
    """The same reads (times 1.0, 2.0, ...) through the line path one read at a time, and
    through feed_reads in parts of `batches` reads each; -> both decoders' outcomes."""
    line_record, bulk_record = fresh(), fresh()
    line, bulk = StreamDecoder(line_record), StreamDecoder(bulk_record)
    for now, data in enumerate(reads, start=1):
        line.feed(data, float(now))
    start = 0
    for size in batches:
        part = reads[start:start + size]
        bulk.feed_reads(b"".join(part), ends_of(part),
                        [float(start + i + 1) for i in range(len(part))])
        start += size
    outcome = lambda d, r: (r, d.finished, d.coalesced)  # noqa: E731
    return outcome(line, line_record), outcome(bulk, bulk_record)


@pytest.mark.parametrize("seed", range(300))
def test_feed_reads_decodes_any_stream_as_the_line_path_does(seed):
    import random

    rng = random.Random(seed)
    pool = [COMPLETION_CHUNK] * 8 + [TWO_IDS, EMPTY_TEXT_ONE_ID, CHAT_ROLE, CHAT_TOKEN, TEXT_ONLY,
                                     ": ping", "event: message", NULL_ERROR, ERROR_EVENT,
                                     MALFORMED, "data:" + COMPLETION_CHUNK[5:].strip(), FINISH]
    usage = rng.choice([USAGE, USAGE_CACHED])
    lines = [rng.choice(pool) for _ in range(rng.randrange(1, 30))] + [usage, DONE]
    ending = "\r\n" if rng.random() < 0.1 else "\n"
    body = b"".join(event(line, ending) for line in lines)
    reads = ([event(line, ending) for line in lines] if rng.random() < 0.5
             else split_into_reads(body, rng))
    batches, left = [], len(reads)
    while left:
        batches.append(min(left, rng.randrange(1, 8)))
        left -= batches[-1]
    line, bulk = read_both_ways(reads, batches)
    assert bulk == line


def test_a_vllm_stream_takes_the_bulk_path(monkeypatch):
    # The line path's per-event decoder is never called for what vLLM sends, chat included.
    def no_line_path(data):
        raise AssertionError("the line path decoded an event")

    monkeypatch.setattr("pytest_llmperf.client.sse._decode", no_line_path)
    for lines in ([COMPLETION_CHUNK, TWO_IDS, EMPTY_TEXT_ONE_ID, USAGE, DONE],
                  [CHAT_ROLE, CHAT_TOKEN, CHAT_TOKEN, USAGE, DONE]):
        reads = [event(line) for line in lines]
        record = fresh()
        decoder = StreamDecoder(record)
        decoder.feed_reads(b"".join(reads), ends_of(reads), [1.0, 2.0, 3.0, 4.0, 5.0])
        assert decoder.finished and record.usage_output_tokens == 8
        assert record.chunk_times_s == ([1.0, 2.0, 3.0] if lines[0] == COMPLETION_CHUNK
                                        else [2.0, 3.0])


def test_the_work_a_stream_did_is_recorded_whatever_its_reads():
    """finish_reason, the usage's cached prompt tokens, and a digest of the token ids in order
    (metrics/work.py): the same from one read per event, the line path, or one bulk part."""
    import zlib
    from array import array

    lines = [COMPLETION_CHUNK, TWO_IDS, FINISH, USAGE_CACHED, DONE]
    reads = [event(line) for line in lines]
    one_part = fresh()
    StreamDecoder(one_part).feed_reads(b"".join(reads), ends_of(reads), [1.0] * 5)
    per_event, _, _ = feed_events(lines)
    for record in (one_part, per_event):
        assert (record.finish_reason, record.cached_prompt_tokens) == ("length", 12)
        assert record.output_digest == zlib.crc32(array("i", [123, 5, 6, 7]).tobytes())
    other, _, _ = feed_events([COMPLETION_CHUNK, EMPTY_TEXT_ONE_ID, FINISH, USAGE, DONE])
    assert other.output_digest != per_event.output_digest  # [123, 5, 7]: other tokens
    assert other.cached_prompt_tokens is None  # the usage did not say


def test_bulk_events_get_the_time_of_the_read_that_ended_their_line():
    one, two, three = event(COMPLETION_CHUNK), event(TWO_IDS), event(COMPLETION_CHUNK)
    # read 1: event one and the first half of two; read 2: the rest of two (its line ends
    # here) and all of three.
    reads = [one + two[:20], two[20:] + three]
    record = fresh()
    decoder = StreamDecoder(record)
    decoder.feed_reads(b"".join(reads), [len(reads[0]), len(one + two + three)], [1.0, 2.0])
    assert (record.chunk_times_s, record.chunk_tokens) == ([1.0, 2.0, 2.0], [1, 2, 1])
    assert decoder.coalesced == 1  # three shared read 2 with two
