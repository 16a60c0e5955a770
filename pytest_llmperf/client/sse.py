"""Server-sent events of an OpenAI-compatible stream -> one RequestRecord's chunks, usage and error.

This is the client's hot path: it decodes up to ~100,000 chunks/s on a GPU server. The reader
(readers.py) hands it a stream's body a few dozen reads at a time, with each read's end offset and
arrival time, and every event gets the time of the read that completed its `data:` line.
`coalesced` counts token events that shared a read with the stream's previous token event, which
is what a client reading late looks like from the inside.

Two ways through, one meaning:
- the bulk path, for bodies of plain `data: {json}` events with token ids (what vLLM sends): one
  msgspec decode for all the events of the part, and the per-event work done by C-level `map`s
  (no Python per event);
- the line path, for everything else (comments, other fields, CRLF, text without token ids,
  error events, malformed JSON): the events one by one, as they have always been read.
The bulk path gives up on a part, before it changes anything, wherever its result could differ
from the line path's; tests/unit/client/test_sse.py feeds both the same streams.
"""

from __future__ import annotations

import zlib
from array import array
from bisect import bisect_right
from itertools import accumulate, chain, compress, repeat
from operator import add, attrgetter, eq, itemgetter

import msgspec

from pytest_llmperf.failures import MALFORMED, STREAM_ERROR
from pytest_llmperf.records import RequestRecord

__all__ = ["ERROR_BODY_CHARS", "StreamDecoder"]

ERROR_BODY_CHARS = 300
DONE = b"[DONE]"


class _Function(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class _ToolCall(msgspec.Struct):
    index: int = 0
    function: _Function | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    # A chat stream's tool calls (vLLM: the first piece of a call carries its name, the later
    # ones more of its arguments; vllm/tool_parsers/streaming.py in vLLM 0.32.0).
    tool_calls: list[_ToolCall] | None = None
    # A reasoning model's thinking, when the server runs a reasoning parser: `reasoning` in
    # vLLM 0.32 (vllm/entrypoints/generate/base/protocol.py, DeltaMessage), `reasoning_content`
    # in earlier releases and other servers. Present (even "") on a chunk of thinking.
    reasoning: str | None = None
    reasoning_content: str | None = None


class _Choice(msgspec.Struct):
    text: str | None = None
    delta: _Delta | None = None
    token_ids: list[int] | None = None
    finish_reason: str | None = None


class _PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _CompletionDetails(msgspec.Struct):
    reasoning_tokens: int | None = None  # vLLM, with a reasoning parser


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # vLLM sends it with --enable-prompt-tokens-details: prompt tokens served from the cache.
    prompt_tokens_details: _PromptDetails | None = None
    completion_tokens_details: _CompletionDetails | None = None


class _Event(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    # Raw: the server's own words, whatever their shape; `"error": null` is no error.
    error: msgspec.Raw = msgspec.Raw()


_decode = msgspec.json.Decoder(_Event).decode
_decode_many = msgspec.json.Decoder(list[_Event]).decode
_choices, _usage, _error = attrgetter("choices"), attrgetter("usage"), attrgetter("error")
_token_ids, _first = attrgetter("token_ids"), itemgetter(0)
_finish_reason = attrgetter("finish_reason")
_EVENT_START, _EVENT_GAP = b"data: ", b"\n\ndata: "


def _text(choice: _Choice) -> str | None:
    return choice.delta.content if choice.delta is not None else choice.text


def _take_usage(record: RequestRecord, usage: _Usage) -> None:
    record.usage_prompt_tokens = usage.prompt_tokens
    record.usage_output_tokens = usage.completion_tokens
    if usage.prompt_tokens_details is not None:
        record.cached_prompt_tokens = usage.prompt_tokens_details.cached_tokens
    if usage.completion_tokens_details is not None:
        record.usage_reasoning_tokens = usage.completion_tokens_details.reasoning_tokens


def _take_tool_calls(record: RequestRecord, pieces: list[_ToolCall], now: float) -> None:
    """Append each piece to its call's [name, arguments]; the calls are complete as of `now`."""
    calls = record.tool_calls
    for piece in pieces:
        while len(calls) <= piece.index:
            calls.append(["", ""])
        if piece.function is not None:
            calls[piece.index][0] += piece.function.name or ""
            calls[piece.index][1] += piece.function.arguments or ""
    record.tool_calls_done_s = now


def _take_reasoning(record: RequestRecord, delta: _Delta, tokens: int, now: float) -> None:
    """A reasoning request's chunk of `tokens`: thinking, or answer (the first answer chunk's
    arrival is the time to first output token). A chunk with both (the end of the thinking and
    the answer's start in one chunk) counts as thinking and starts the answer."""
    if delta.reasoning is not None or delta.reasoning_content is not None:
        record.reasoning_tokens += tokens
    elif delta.content is not None:
        record.answer_tokens += tokens
    if delta.content is not None and record.first_output_s is None:
        record.first_output_s = now


def _digest(record: RequestRecord, ids) -> None:
    """Fold token ids into the record's output digest: one C call over the part's ids (CRC-32
    continues across calls, so chunking does not change the digest)."""
    record.output_digest = zlib.crc32(array("i", ids).tobytes(), record.output_digest)


class StreamDecoder:
    """Feed it the response body as it arrives; it fills `record` and says when the stream ended.

    `finished` is set by `data: [DONE]` or an error event. A stream that ends without either is
    judged by the caller (it knows whether the connection closed early).
    """

    __slots__ = ("record", "finished", "coalesced", "chunk_per_token", "_partial", "_last_read_s")

    def __init__(self, record: RequestRecord, chunk_per_token: bool = False) -> None:
        self.record = record
        # A server that streams one chunk per token (server_kind.ServerKind.chunk_per_token):
        # an empty text before the finishing chunk is a token too. The line path counts them.
        self.chunk_per_token = chunk_per_token
        self.finished = False
        self.coalesced = 0
        self._partial = b""
        self._last_read_s = -1.0

    def feed_reads(self, body: bytes, ends: list[int], stamps: list[float]) -> None:
        """A part of the body: the bytes of several reads, `ends[i]` the offset just past read i's
        bytes and `stamps[i]` its time (http1.BodySink)."""
        if self.finished or not body:
            return
        if self._partial:  # the start of a line the last part ended in: it ends in this one
            shift = len(self._partial)
            body = self._partial + body
            ends = list(map(add, ends, repeat(shift)))
            self._partial = b""
        cut = body.rfind(b"\n\n") + 2  # the end of the part's last whole event
        # A request's tool calls and reasoning are read on the line path only (the bulk path
        # keeps no pieces, no deltas).
        bulk = (cut > 1 and not self.chunk_per_token and self.record.tool_calls is None
                and self.record.reasoning_tokens is None)
        start = cut if bulk and self._bulk(body, cut, ends, stamps) else 0
        if start == len(body) or self.finished:
            return
        last = start
        for end, stamp in zip(ends, stamps):  # the rest, read by read, through the line path
            if end > last:
                self.feed(body[last:end], stamp)
                last = end

    def _bulk(self, body: bytes, cut: int, ends: list[int], stamps: list[float]) -> bool:
        """Decode body[:cut] in bulk; False, with nothing changed, where the line path must."""
        if not body.startswith(_EVENT_START):
            return False
        payloads = body[6:cut - 2].split(_EVENT_GAP)
        if body.count(b"\n", 0, cut) != 2 * len(payloads):
            return False  # other lines in between: comments, event:/id: fields, empty data
        done = payloads[-1] == DONE
        if done:
            payloads.pop()
        try:
            events = _decode_many(b"[" + b",".join(payloads) + b"]") if payloads else []
        except msgspec.DecodeError:
            return False  # the line path names the malformed event
        if any(map(_error, events)):
            return False
        choices = list(map(_choices, events))
        chosen = list(filter(None, choices))
        if sum(map(len, chosen)) != len(chosen):
            return False  # several choices in one event (n > 1)
        firsts = list(map(_first, chosen))
        ids = list(map(_token_ids, firsts))
        if None in ids:  # a chat role chunk counts nothing; text without ids is the line path's
            if any(_text(c) for c, i in zip(firsts, ids) if i is None):
                return False
            keep = iter([i is not None for i in ids])
            choices = [bool(c) and next(keep) for c in choices]
            ids = [i for i in ids if i is not None]
        if [] in ids:
            return False  # an event with an empty id list
        # Where each event ends: "data: " + payload + "\n\n", 8 bytes of framing per event.
        event_ends = list(accumulate(map(add, map(len, payloads), repeat(8))))
        if ends[:len(event_ends)] == event_ends:  # one read per event, as a server streams them
            times = list(compress(stamps, choices))
        else:  # each event's time is that of the read its line's "\n" came in
            line_ends = map(add, event_ends, repeat(-2))
            reads = compress(map(bisect_right, repeat(ends), line_ends), choices)
            times = list(map(stamps.__getitem__, reads))
        record = self.record
        for usage in filter(None, map(_usage, events)):
            _take_usage(record, usage)
        for reason in filter(None, map(_finish_reason, firsts)):
            record.finish_reason = reason
        if times:
            record.chunk_times_s += times
            record.chunk_tokens += map(len, ids)
            _digest(record, chain.from_iterable(ids))
            if record.output_token_ids is not None:  # a conversation's turn (sessions.py)
                record.output_token_ids += chain.from_iterable(ids)
            if record.output_text is not None:  # (a chosen choice without ids has no text)
                record.output_text += filter(None, map(_text, firsts))
            self.coalesced += sum(map(eq, times, [self._last_read_s, *times[:-1]]))
            self._last_read_s = times[-1]
        self.finished = done
        return True

    def _fail(self, error: str, kind: str) -> None:
        """The stream ends here, its request failed (rare: out of the per-chunk path)."""
        self.record.error, self.record.error_kind = error, kind
        self.finished = True

    def feed(self, data: bytes, now: float) -> None:
        # Written flat on purpose: this runs once per chunk, and every Python call here costs
        # about as much as msgspec's whole decode of the event.
        if self.finished:
            return
        if self._partial:
            data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()  # b"" when the read ended on a line break
        record = self.record
        text_kept = record.output_text  # a conversation's turn (sessions.py), else None
        calls_kept = record.tool_calls  # a request that sent tools, else None
        thinking = record.reasoning_tokens is not None  # a reasoning request
        for line in lines:
            if line[:5] != b"data:":
                continue  # blank separators, comments, event:/id: fields
            if len(line) < 16 and line[5:].strip() == DONE:
                self.finished = True
                return
            try:
                event = _decode(line[5:])
            except msgspec.DecodeError as exc:
                self._fail(f"malformed stream event ({exc}): {line[:ERROR_BODY_CHARS]!r}",
                           MALFORMED)
                return
            if event.error and bytes(event.error) != b"null":
                detail = bytes(event.error).decode(errors="replace")[:ERROR_BODY_CHARS]
                self._fail(f"server error in stream: {detail}", STREAM_ERROR)
                return
            if event.usage is not None:
                _take_usage(record, event.usage)
            if not event.choices:
                continue
            counted = False
            for choice in event.choices:
                if text_kept is not None and (piece := _text(choice)):
                    text_kept.append(piece)
                if calls_kept is not None and choice.delta is not None and choice.delta.tool_calls:
                    _take_tool_calls(record, choice.delta.tool_calls, now)
                if choice.finish_reason is not None:
                    record.finish_reason = choice.finish_reason
                if choice.token_ids is not None:
                    tokens = len(choice.token_ids)
                    _digest(record, choice.token_ids)
                    if record.output_token_ids is not None:
                        record.output_token_ids += choice.token_ids
                else:
                    text = _text(choice)
                    if not (text or self.chunk_per_token and text == ""
                            and choice.finish_reason is None):
                        continue  # a role chunk, or an empty piece of text
                    record.tokens_estimated = True  # no ids: one token per chunk
                    tokens = 1
                if tokens:
                    record.chunk_times_s.append(now)
                    record.chunk_tokens.append(tokens)
                    counted = True
                    if thinking and choice.delta is not None:
                        _take_reasoning(record, choice.delta, tokens, now)
            if counted:
                if now == self._last_read_s:
                    self.coalesced += 1
                self._last_read_s = now
