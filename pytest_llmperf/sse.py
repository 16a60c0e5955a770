"""Server-sent events of an OpenAI-compatible stream -> one RequestRecord's chunks, usage and error.

This is the client's hot path: it runs once per streamed chunk, at up to ~100,000 chunks/s on a
GPU server. So it works on bytes, splits lines only where a read ended mid-line, and decodes each
event with msgspec into the few fields it needs (unknown fields are skipped, not built into
dicts). Every event in one read gets that read's arrival time, taken by the caller when the bytes
came off the socket; `coalesced` counts token events that shared a read with the stream's
previous token event, which is what a client reading late looks like from the inside.
"""

from __future__ import annotations

import msgspec

from pytest_llmperf.failures import MALFORMED, STREAM_ERROR
from pytest_llmperf.records import RequestRecord

__all__ = ["ERROR_BODY_CHARS", "StreamDecoder"]

ERROR_BODY_CHARS = 300
DONE = b"[DONE]"


class _Delta(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    text: str | None = None
    delta: _Delta | None = None
    token_ids: list[int] | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Event(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    # Raw: the server's own words, whatever their shape; `"error": null` is no error.
    error: msgspec.Raw = msgspec.Raw()


_decode = msgspec.json.Decoder(_Event).decode


class StreamDecoder:
    """Feed it the response body as it arrives; it fills `record` and says when the stream ended.

    `finished` is set by `data: [DONE]` or an error event. A stream that ends without either is
    judged by the caller (it knows whether the connection closed early).
    """

    __slots__ = ("record", "finished", "coalesced", "_partial", "_last_read_s")

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.finished = False
        self.coalesced = 0
        self._partial = b""
        self._last_read_s = -1.0

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
        for line in lines:
            if line[:5] != b"data:":
                continue  # blank separators, comments, event:/id: fields
            if len(line) < 16 and line[5:].strip() == DONE:
                self.finished = True
                return
            try:
                event = _decode(line[5:])
            except msgspec.DecodeError as exc:
                record.error = f"malformed stream event ({exc}): {line[:ERROR_BODY_CHARS]!r}"
                record.error_kind = MALFORMED
                self.finished = True
                return
            if event.error and bytes(event.error) != b"null":
                detail = bytes(event.error).decode(errors="replace")[:ERROR_BODY_CHARS]
                record.error = f"server error in stream: {detail}"
                record.error_kind = STREAM_ERROR
                self.finished = True
                return
            if event.usage is not None:
                record.usage_prompt_tokens = event.usage.prompt_tokens
                record.usage_output_tokens = event.usage.completion_tokens
            if not event.choices:
                continue
            counted = False
            for choice in event.choices:
                if choice.token_ids is not None:
                    tokens = len(choice.token_ids)
                else:
                    text = choice.delta.content if choice.delta is not None else choice.text
                    if not text:
                        continue  # a role chunk, or an empty piece of text
                    record.tokens_estimated = True  # no ids: one token per non-empty text chunk
                    tokens = 1
                if tokens:
                    record.chunk_times_s.append(now)
                    record.chunk_tokens.append(tokens)
                    counted = True
            if counted:
                if now == self._last_read_s:
                    self.coalesced += 1
                self._last_read_s = now
