"""OpenAI-compatible streaming client -> one RequestRecord per request.

It times each streamed chunk on arrival (the reader stamps every read with the kernel's receive
time) and counts the tokens the chunk carried (vLLM's `return_token_ids` gives them exactly;
other servers fall back to one token per text chunk, and the record says so; see sse.py). Output
length is forced with `ignore_eos` plus `min_tokens = max_tokens` and the server's `usage` is
kept so metrics never count tokens by counting chunks, on servers that take those fields (the
others, and what that costs, are in server_kind.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import msgspec

from pytest_llmperf import failures
from pytest_llmperf.client import embeddings  # noqa: F401  (registers the pooling APIs)
from pytest_llmperf.client.access import Access
from pytest_llmperf.client.http1 import Aborted, ConnectionPool, StreamClosed
from pytest_llmperf.client.request_apis import client_of, serves
from pytest_llmperf.client.server_kind import VLLM, ServerKind
from pytest_llmperf.client.sse import ERROR_BODY_CHARS, StreamDecoder
from pytest_llmperf.client.watchdog import INTERRUPTED
from pytest_llmperf.records import CHAT, COMPLETIONS, Request, RequestRecord, request_api

__all__ = ["ERROR_BODY_CHARS", "ClientOptions", "OpenAIStreamClient", "stream_ended",
           "stream_reader"]

REQUEST_TIMEOUT_S = 600.0  # one request, first byte to last; a long generation on CPU is slow
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True, kw_only=True)
class ClientOptions:
    """How requests are shaped. `server`: the kind of server (server_kind.py), which decides
    whether vLLM's fields (min_tokens, ignore_eos, return_token_ids) go and how a stream without
    usage is counted; `vllm_extensions=False` leaves those fields out for any kind."""

    api: str = "completions"  # a records.RequestApi's name
    vllm_extensions: bool = True
    server: ServerKind = VLLM
    temperature: float = 0.0
    extra_body: tuple[tuple[str, Any], ...] = ()


class OpenAIStreamClient:
    """Use as `async with OpenAIStreamClient(url, model) as client: await client.send(...)`.
    `access`: the headers every request carries and the TLS trust (access.py)."""

    def __init__(self, base_url: str, model: str, options: ClientOptions | None = None,
                 *, clock=time.perf_counter, access: Access | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.options = options or ClientOptions()
        self.clock = clock
        self.access = access or Access()
        https = self.base_url.startswith("https:")
        self._pool = ConnectionPool(
            self.base_url, clock=clock, connect_timeout_s=CONNECT_TIMEOUT_S,
            headers=self.access.header_lines(),
            ssl_context=self.access.ssl_context() if https else None)
        self.coalesced_chunks = 0  # token chunks that shared a read with their predecessor
        # What the stall watchdog and the progress line read (progress.py): kept per request,
        # never per chunk, so the hot path pays nothing for them.
        self.in_flight: dict[int, RequestRecord] = {}
        self.finished = 0  # requests ended, failed or not
        self.finished_tokens = 0  # output tokens of the finished requests
        self.last_end_s: float | None = None  # when a request last ended

    async def __aenter__(self) -> "OpenAIStreamClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._pool.close()

    @property
    def path(self) -> str:
        return request_api(self.options.api).path

    def body(self, request: Request) -> dict[str, Any]:
        """The request's JSON body, as its API writes it (client/request_apis.py)."""
        return client_of(self.options.api).body(self, request)

    def generation_body(self, request: Request) -> dict[str, Any]:
        """A streamed generation's body: /v1/completions, or /v1/chat/completions's messages."""
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.output_tokens,
            "temperature": self.options.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request_api(self.options.api).chat:
            if not isinstance(request.prompt, str):
                raise ValueError("chat requests need text prompts, not token ids")
            # A conversation's earlier turns go first, the answers as the server wrote them.
            body["messages"] = [*({"role": role, "content": content}
                                  for role, content in request.history),
                                {"role": "user", "content": request.prompt}]
            if request.messages:  # an agent's step: tool calls and results (client/agents.py)
                body["messages"] = list(request.messages)
        else:
            prompt = request.prompt
            if not (isinstance(prompt, str) or self.options.server.token_id_prompts):
                raise ValueError(f"{self.options.server.label} takes text prompts only, not "
                                 "token ids")
            body["prompt"] = prompt if isinstance(prompt, str) else list(prompt)
        if self.options.vllm_extensions and self.options.server.extensions:
            # ignore_eos alone does not stop every EOS id; min_tokens does (vLLM issue reports).
            body.update(min_tokens=request.output_tokens, ignore_eos=True, return_token_ids=True)
            if not request.forced_length:  # a grammar's end is the output's end
                del body["min_tokens"], body["ignore_eos"]
        body.update(request.body)
        body.update(dict(self.options.extra_body))
        return body

    async def send(self, index: int, request: Request, scheduled_s: float) -> RequestRecord:
        record = RequestRecord(
            index=index, expected_prompt_tokens=request.prompt_tokens,
            expected_output_tokens=request.output_tokens, scheduled_s=scheduled_s,
            output_token_ids=[] if request.keep_output else None,
            output_text=[] if request.keep_output else None,
            output_check=request.check.name if request.check is not None else None,
            tool_calls=[] if any(name == "tools" for name, _ in request.body) else None,
            model=next((value for name, value in request.body if name == "model"), None),
        )
        if request.reasoning:  # thinking and answer counted apart (sse.py, metrics/reasoning.py)
            record.reasoning_tokens = record.answer_tokens = 0
        api = client_of(self.options.api)
        decoder = api.reader(self, record, request)
        self.in_flight[id(record)] = record
        try:
            raw = self._pool.request_bytes(self.path, _encode(self.body(request)))
            record.sent_s = self.clock()  # the attempt; the time it was written replaces it
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                status, error_body, record.sent_s = await self._pool.post(raw, decoder.feed_reads)
            if status != 200:
                # A gateway's error page may echo the request's headers: never the key.
                text = self.access.redact(error_body.decode(errors="replace"))
                _fail(record, failures.kind_of_status(status),
                      f"HTTP {status}: {text[:ERROR_BODY_CHARS]}")
        except TimeoutError:
            _fail(record, failures.TIMEOUT, f"no complete response within {REQUEST_TIMEOUT_S:g} s")
        except Exception as exc:  # every failure becomes data; the run goes on
            _fail(record, _kind_of_exception(exc), self.access.redact(
                f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__))
        finally:
            record.done_s = self.clock()
            self.coalesced_chunks += decoder.coalesced
            del self.in_flight[id(record)]
        if record.error is None:
            api.ended(self, record, decoder)
        if record.error is None and request.check is not None:
            _check_output(record, request.check)
        self.finished += 1
        self.finished_tokens += record.output_tokens
        self.last_end_s = record.done_s
        return record

    def stop(self, reason: str) -> None:
        """Give up on the server: every request in flight ends now as a `stalled` failure with
        `reason` (an `ended_early` one where the measurement was ended for a neighbour,
        watchdog.INTERRUPTED), and every later one at once. What was received before is kept."""
        self._pool.abort_all(reason, failures.ENDED_EARLY if reason == INTERRUPTED
                             else failures.STALLED)


def _fail(record: RequestRecord, kind: str, error: str) -> None:
    record.error, record.error_kind = error, kind


def _kind_of_exception(exc: Exception) -> str:
    if isinstance(exc, Aborted):
        return exc.kind
    if isinstance(exc, StreamClosed):
        return failures.MALFORMED if str(exc).startswith("malformed") else failures.CUT_OFF
    if isinstance(exc, OSError):  # ConnectionError included: refused, reset, unreachable
        return failures.CONNECTION
    return failures.CLIENT


def _check_complete(record: RequestRecord, saw_done: bool, usage_required: bool = True) -> None:
    """A 200 whose stream ended without `[DONE]` was cut short (a proxy, a dying server); one
    without tokens generated nothing; one without usage leaves the token counts to guesswork
    (the request asked for it with stream_options.include_usage), unless the server is of a kind
    that sends none (then the chunks count and the summary says so: server_kind.limits)."""
    if not saw_done:
        _fail(record, failures.NO_DONE, "stream ended without data: [DONE]")
    elif not record.chunk_times_s:
        _fail(record, failures.NO_TOKENS, "stream ended without any generated token")
    elif record.usage_output_tokens is None and usage_required:
        _fail(record, failures.NO_USAGE, "stream ended without a usage chunk (the server's "
              "token counts, asked for with stream_options.include_usage)")


def _check_output(record: RequestRecord, check: Any) -> None:
    """A complete output its request's check refuses (not the JSON its schema asks for) is a
    failed request: the engine was asked for that shape and did not deliver it."""
    # A tool-call request's check reads its calls (workloads/tool_calls.py), others the text.
    calls = record.tool_calls
    problem = check.problem("".join(record.output_text or ()) if calls is None else calls)
    if problem:
        _fail(record, failures.INVALID_OUTPUT, problem)


_encode = msgspec.json.Encoder().encode


def stream_reader(client: OpenAIStreamClient, record: RequestRecord, request: Request
                  ) -> StreamDecoder:
    """A streamed generation's answer reader (client/request_apis.py)."""
    return StreamDecoder(record, client.options.server.chunk_per_token)


def stream_ended(client: OpenAIStreamClient, record: RequestRecord,
                 decoder: StreamDecoder) -> None:
    """A streamed generation's end: complete, with tokens and usage (_check_complete)."""
    _check_complete(record, decoder.finished, client.options.server.usage_required)


for _api in (COMPLETIONS, CHAT):
    serves(_api, OpenAIStreamClient.generation_body, stream_reader, stream_ended)
