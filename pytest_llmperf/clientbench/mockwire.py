"""The bytes the mock server (mockserver.py) writes: SSE frames and their templates, error bodies,
response heads, and the faults it can be asked for."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["FAULTS", "STATUS_FAULTS", "STREAM_FAULTS"]


TICK_S = 0.001
TIMER_S, EARLY_S = 0.001, 0.0005  # the event loop's timer resolution, and half of it
COMPLETIONS, CHAT = b"/v1/completions", b"/v1/chat/completions"
SSE_HEADERS = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
               b"transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n")
END_OF_BODY = b"0\r\n\r\n"
# What a faulty request gets: an HTTP status instead of a stream, or a stream that goes wrong
# after FAULT_TOKENS tokens.
STATUS_FAULTS = {"429": 429, "503": 503, "400": 400, "500": 500}
STREAM_FAULTS = ("error-mid-stream", "no-usage", "no-done", "cut", "stall")
FAULTS = (*STATUS_FAULTS, *STREAM_FAULTS)
FAULT_TOKENS = 2
# The longest answer on a benchmark's control pipe: well under what one write always delivers.
CONTROL_ANSWER_CHARS = 1000
# An OpenAI-style error: the body of an error status, and the event that ends a broken stream.
_STREAM_ERROR = {"error": {"message": "mock fault mid-stream", "type": "InternalServerError",
                           "code": 500}}


def _error_body(status: int) -> bytes:
    return json.dumps({"error": {"message": f"mock fault {status}", "type": "MockError",
                                 "code": status}}).encode()


def _frame(event: dict[str, Any] | str) -> bytes:
    """One SSE event as one HTTP chunk, the way uvicorn sends vLLM's stream."""
    data = event if isinstance(event, str) else json.dumps(event, separators=(",", ":"))
    return _frame_bytes(data.encode())


def _frame_bytes(payload: bytes) -> bytes:
    payload = b"data: %s\n\n" % payload
    return b"%x\r\n%s\r\n" % (len(payload), payload)


DONE_AND_END = _frame("[DONE]") + END_OF_BODY
_ID = "<stream-id>"  # where a stream's id goes in a template (JSON leaves it as it is)


def _templates(path: bytes, model: Any, token_ids: bool, prompt_tokens: int,
               tokens: int) -> tuple[list[bytes], list[bytes]]:
    """A token event's and the usage event's JSON, split where the stream's id goes."""
    base = {"id": _ID, "created": 1700000000, "model": model}
    ids = {"token_ids": [1234]} if token_ids else {}
    if path == CHAT:
        choice = {"index": 0, "delta": {"content": " tok"}, "logprobs": None,
                  "finish_reason": None, **ids}
        obj = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": " tok", "logprobs": None, "finish_reason": None,
                  "stop_reason": None, **ids}
        obj = "text_completion"
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens,
             "total_tokens": prompt_tokens + tokens}
    events = ({**base, "object": obj, "choices": [choice]},
              {**base, "object": obj, "choices": [], "usage": usage})
    return tuple(json.dumps(event, separators=(",", ":")).encode().split(_ID.encode())
                 for event in events)


def _response(status: int, body: bytes, content_type: bytes = b"application/json") -> bytes:
    reason = {200: b"OK", 400: b"Bad Request", 401: b"Unauthorized", 404: b"Not Found",
              429: b"Too Many Requests",
              500: b"Internal Server Error", 503: b"Service Unavailable"}.get(status, b"Error")
    return (b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s"
            % (status, reason, content_type, len(body), body))
