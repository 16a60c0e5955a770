"""Which kind of OpenAI-compatible server is measured, and what that decides: the request fields
sent beyond OpenAI's, whether prompts may be token ids, how a stream's chunks count tokens, and
which Prometheus samples its /metrics has (metric_names.MetricNames).

The plugin's own engines are vLLM. A server behind --llmperf-endpoint is told by `detect`, or
named with --llmperf-server-kind (a gateway may hide what runs behind it). What a kind cannot do
is never measured wrong in silence: `limits` gives one line for each thing the server could not
do in a run, as the run's records show it (docs/deployments.md, "Server kinds").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from pytest_llmperf.client import access as access_mod
from pytest_llmperf.client.access import Access
from pytest_llmperf.client.metric_names import (
    LLAMACPP_METRICS,
    SGLANG_METRICS,
    VLLM_METRICS,
    MetricNames,
)
from pytest_llmperf.failures import CUT_OFF
from pytest_llmperf.records import RequestRecord

__all__ = ["AUTO", "KINDS", "LLAMACPP", "OPENAI", "SGLANG", "VLLM", "ServerKind", "detect",
           "kind_of_answers", "limits"]

AUTO = "auto"
DETECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ServerKind:
    """What one kind of server takes and gives.

    `extensions`: it takes vLLM's min_tokens, ignore_eos and return_token_ids, so output
    lengths are forced and chunks carry their token ids. `token_id_prompts`: a completions prompt
    may be a list of token ids. `usage_required`: a stream without a usage chunk is a failed
    request (a server that honours stream_options.include_usage and sent none was cut short).
    `chunk_per_token`: with no token ids, every chunk before the finishing one is one token,
    empty text included (a token whose bytes end mid-character streams as "").
    """

    name: str
    label: str  # how lines name it
    extensions: bool
    token_id_prompts: bool
    usage_required: bool
    chunk_per_token: bool
    metrics: MetricNames | None


VLLM = ServerKind("vllm", "vLLM", extensions=True, token_id_prompts=True, usage_required=True,
                  chunk_per_token=False, metrics=VLLM_METRICS)
# SGLang's CompletionRequest takes min_tokens, ignore_eos, return_token_ids, token-id prompts and
# stream_options (python/sglang/srt/entrypoints/openai/protocol.py in
# https://github.com/sgl-project/sglang), as vLLM's does; only its metric names differ.
SGLANG = ServerKind("sglang", "SGLang", extensions=True, token_id_prompts=True,
                    usage_required=True, chunk_per_token=False, metrics=SGLANG_METRICS)
# llama-cpp-python's server (llama_cpp/server/app.py, types.py): prompts are strings only,
# min_tokens is dropped and unknown fields ignored, stream_options is not read, no /metrics; it
# streams one chunk per token (the chunks of 40 of 40 requests matched its non-streamed usage:
# docs/deployments.md). llama.cpp's own llama-server has /metrics (LLAMACPP_METRICS).
LLAMACPP = ServerKind("llamacpp", "llama.cpp's server", extensions=False, token_id_prompts=False,
                      usage_required=False, chunk_per_token=True, metrics=LLAMACPP_METRICS)
# Anything else: OpenAI's own fields only (token-id prompts are OpenAI's too), no metric names.
OPENAI = ServerKind("openai", "an OpenAI-compatible server", extensions=False,
                    token_id_prompts=True, usage_required=False, chunk_per_token=False,
                    metrics=None)
KINDS = {kind.name: kind for kind in (VLLM, SGLANG, LLAMACPP, OPENAI)}

# GET /v1/models' `owned_by`, as each server writes it: vLLM's ModelCard
# (vllm/entrypoints/serve/engine/protocol.py), SGLang's ModelCard (protocol.py above), llama.cpp's
# llama-server (tools/server/server-context.cpp in https://github.com/ggml-org/llama.cpp, whose
# GET /props has default_generation_settings). llama-cpp-python writes "me", which says nothing:
# its OpenAPI title does (`kind_of_answers`).
OWNERS = {"vllm": VLLM, "sglang": SGLANG, "llamacpp": LLAMACPP}
LLAMA_CPP_PYTHON_TITLE = "llama.cpp Python API"  # FastAPI(title=...) in llama_cpp/server/app.py


def detect(base_url: str, access: Access, owners: Sequence[str]) -> tuple[ServerKind, str]:
    """(the kind, how it was told) of the server at `base_url`, whose /v1/models said
    `owners`. Asks GET /props (llama.cpp's llama-server) and GET /openapi.json (FastAPI
    servers: llama-cpp-python) only when `owned_by` does not tell."""
    kind, how = kind_of_answers(owners)
    if kind is not None:
        return kind, how
    props = _get_json(base_url, "/props", access)
    openapi = _get_json(base_url, "/openapi.json", access)
    kind, how = kind_of_answers(owners, props, openapi)
    return kind or OPENAI, how


def kind_of_answers(owners: Sequence[str], props: object = None, openapi: object = None
                    ) -> tuple[ServerKind | None, str]:
    """The kind the answers show, with how; None (and what was seen) when they show none."""
    for owner in owners:
        if owner in OWNERS:
            return OWNERS[owner], f"GET /v1/models: owned_by {owner!r}"
    if isinstance(props, dict) and "default_generation_settings" in props:
        return LLAMACPP, "GET /props answered as llama.cpp's llama-server does"
    info = openapi.get("info") if isinstance(openapi, dict) else None
    title = info.get("title") if isinstance(info, dict) else None
    if isinstance(title, str) and LLAMA_CPP_PYTHON_TITLE in title:
        return LLAMACPP, f"GET /openapi.json: title {title!r}"
    seen = ", ".join(sorted(set(map(repr, owners)))) or "none"
    return None, f"not recognised (owned_by {seen})"


def _get_json(base_url: str, path: str, access: Access) -> object:
    """A GET's JSON answer; None for any failure (detection goes on without it)."""
    try:
        response = access_mod.get(base_url, path, access, DETECT_TIMEOUT_S)
        return json.loads(response.content) if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def limits(kind: ServerKind, records: Sequence[RequestRecord], text_prompts: bool) -> list[str]:
    """One line for each thing this server could not do in the run of `records`, as they show
    it; `text_prompts`: the workload's token-id prompts went as text."""
    done = [record for record in records if record.ok]
    lines = [_prompts_line(kind)] if text_prompts else []
    if not kind.extensions:
        lines.append(_lengths_line(kind, done))
    lines += _usage_lines(kind, done)
    if kind.metrics is None:
        lines.append(f"no server metrics read: the /metrics names of {kind.label} are not known "
                     "(KV max% and hit% stay blank); --llmperf-server-kind names a kind that has "
                     "them")
    lines += _cut_off_lines(kind, records)
    return lines


def _prompts_line(kind: ServerKind) -> str:
    return (f"{kind.label} takes no token-id prompts: they went as text of the same length "
            "(counted with the test's tokenizer; the server adds its BOS token)")


def _lengths_line(kind: ServerKind, done: Sequence[RequestRecord]) -> str:
    short = sum(record.output_tokens < record.expected_output_tokens for record in done)
    seen = (f"{short} of {len(done)} requests ended before max_tokens" if short
            else f"{len(done)} of {len(done)} requests reached max_tokens")
    return (f"output lengths not forced ({kind.label} takes no min_tokens/ignore_eos): "
            f"{seen}")


def _usage_lines(kind: ServerKind, done: Sequence[RequestRecord]) -> list[str]:
    without = [record for record in done if record.usage_output_tokens is None]
    if not without:
        return []
    counted = ("one per streamed chunk before the finishing one" if kind.chunk_per_token
               else "one per streamed chunk with text")
    how = (f"counted as {counted}" if any(record.tokens_estimated for record in without)
           else "the streamed token ids")
    return [f"no usage chunk in {len(without)} of {len(done)} streams ({kind.label} ignores "
            f"stream_options.include_usage): output tokens are {how}"]


def _cut_off_lines(kind: ServerKind, records: Sequence[RequestRecord]) -> list[str]:
    """llama-cpp-python's server ends the stream it serves when another request comes in (its
    --interrupt_requests, on by default: llama_cpp/server/settings.py): with requests in flight
    together the streams are cut off, which the failure counts alone would not explain."""
    cut = sum(record.error_kind == CUT_OFF for record in records)
    peak = _peak_in_flight(records)
    if kind is not LLAMACPP or not cut or peak < 2:
        return []
    return [f"{cut} of {len(records)} streams were cut off with up to {peak} requests in "
            "flight: llama-cpp-python's server ends a stream when another request arrives "
            "unless started with --interrupt_requests False (requests then wait their turn); "
            "or measure it at concurrency 1"]


def _peak_in_flight(records: Sequence[RequestRecord]) -> int:
    """The most requests that were sent and not yet ended at one time."""
    events = sorted((time, step) for record in records
                    if record.sent_s is not None and record.done_s is not None
                    for time, step in ((record.sent_s, 1), (record.done_s, -1)))
    peak = now = 0
    for _, step in events:  # at a tie the end (-1) sorts first: back to back is not together
        now += step
        peak = max(peak, now)
    return peak
