"""Async httpx client for OpenAI-compatible streaming endpoints -> one RequestRecord per request.

It times each streamed chunk on arrival and counts the tokens the chunk carried (vLLM's
`return_token_ids` gives them exactly; other servers fall back to one token per text chunk, and the
record says so). Output length is forced with `ignore_eos` plus `min_tokens = max_tokens` and the
server's `usage` is kept so metrics never count tokens by counting chunks.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from pytest_llmperf.records import Request, RequestRecord

REQUEST_TIMEOUT_S = 600.0  # one request, first byte to last; a long generation on CPU is slow
CONNECT_TIMEOUT_S = 10.0
ERROR_BODY_CHARS = 300

Api = Literal["completions", "chat"]


@dataclass(frozen=True, kw_only=True)
class ClientOptions:
    """How requests are shaped. `vllm_extensions` adds vLLM-only fields (min_tokens, ignore_eos,
    return_token_ids); turn it off for servers that reject unknown fields."""

    api: Api = "completions"
    vllm_extensions: bool = True
    temperature: float = 0.0
    extra_body: tuple[tuple[str, Any], ...] = ()


class OpenAIStreamClient:
    """Use as `async with OpenAIStreamClient(url, model) as client: await client.send(...)`."""

    def __init__(self, base_url: str, model: str, options: ClientOptions | None = None,
                 *, clock=time.perf_counter) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.options = options or ClientOptions()
        self.clock = clock
        self._http: httpx.AsyncClient | None = None

    async def __aenter__(self) -> "OpenAIStreamClient":
        # No connection cap: the load generator decides concurrency, never the HTTP pool.
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        timeout = httpx.Timeout(REQUEST_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        self._http = httpx.AsyncClient(base_url=self.base_url, limits=limits, timeout=timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.options.api == "chat" else "/v1/completions"

    def body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.output_tokens,
            "temperature": self.options.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.options.api == "chat":
            if not isinstance(request.prompt, str):
                raise ValueError("chat requests need text prompts, not token ids")
            body["messages"] = [{"role": "user", "content": request.prompt}]
        else:
            prompt = request.prompt
            body["prompt"] = prompt if isinstance(prompt, str) else list(prompt)
        if self.options.vllm_extensions:
            # ignore_eos alone does not stop every EOS id; min_tokens does (REFERENCE.md s.4).
            body.update(min_tokens=request.output_tokens, ignore_eos=True, return_token_ids=True)
        body.update(dict(self.options.extra_body))
        return body

    async def send(self, index: int, request: Request, scheduled_s: float) -> RequestRecord:
        record = RequestRecord(
            index=index, expected_prompt_tokens=request.prompt_tokens,
            expected_output_tokens=request.output_tokens, scheduled_s=scheduled_s,
        )
        try:
            body = self.body(request)
            record.sent_s = self.clock()
            async with self._http.stream("POST", self.path, json=body) as response:
                if response.status_code != 200:
                    text = (await response.aread()).decode(errors="replace")
                    record.error = f"HTTP {response.status_code}: {text[:ERROR_BODY_CHARS]}"
                    return record
                async for line in response.aiter_lines():
                    if self._on_line(line, record):
                        break
        except Exception as exc:  # every failure becomes data; the run goes on
            record.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        finally:
            record.done_s = self.clock()
        if record.error is None and not record.chunk_times_s:
            record.error = "stream ended without any generated token"
        return record

    def _on_line(self, line: str, record: RequestRecord) -> bool:
        """Handle one SSE line; True when the stream is finished."""
        if not line.startswith("data:"):
            return False
        now = self.clock()
        data = line[5:].strip()
        if data == "[DONE]":
            return True
        payload = json.loads(data)
        if "error" in payload:
            detail = json.dumps(payload["error"])[:ERROR_BODY_CHARS]
            record.error = f"server error in stream: {detail}"
            return True
        usage = payload.get("usage")
        if usage:
            record.usage_prompt_tokens = usage.get("prompt_tokens")
            record.usage_output_tokens = usage.get("completion_tokens")
        for choice in payload.get("choices") or ():
            tokens = self._tokens_in(choice, record)
            if tokens:
                record.chunk_times_s.append(now)
                record.chunk_tokens.append(tokens)
        return False

    @staticmethod
    def _tokens_in(choice: dict[str, Any], record: RequestRecord) -> int:
        token_ids = choice.get("token_ids")
        if token_ids is not None:
            return len(token_ids)
        delta = choice.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
        if text:
            record.tokens_estimated = True
            return 1
        return 0
