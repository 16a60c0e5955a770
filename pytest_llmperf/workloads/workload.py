"""Workloads: which requests to send and how they arrive, as frozen, seeded data.

A Workload is declared at import time in a suite file and built into concrete requests only when
the test runs, because exact prompt lengths need the engine's tokenizer. Where the prompts come
from is a *source* (source.Source: synthetic lengths, a published profile, shared prefixes, a
dataset file, ...); how they arrive is a load pattern (client/patterns.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from pytest_llmperf.client.agents import AgentSessions
from pytest_llmperf.client.patterns import Concurrency, LoadPattern, Ramp, Rate, Trace
from pytest_llmperf.client.sessions import Sessions
from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request, request_api
from pytest_llmperf.workloads import (
    agents,
    conversation_files,
    datasets,
    embeddings,
    images,
    lengths,
    lora,
    probes,
    profiles,
    prompts,
    reasoning,
    structured,
    tool_calls,
    traces,
)
from pytest_llmperf.workloads.conversations import ConversationSource, as_distribution
from pytest_llmperf.workloads.source import NameFile, PromptFormat, Source


@dataclass(frozen=True, kw_only=True)
class Synthetic(Source):
    """Random prompts whose lengths follow `input_tokens` (lengths.Fixed, Uniform, Normal)."""

    input_tokens: Any
    output_tokens: Any
    prompt_format: PromptFormat = "token_ids"

    def requests(self, n, tokenizer, rng):
        inputs = self.input_tokens.sample(rng, n)
        outputs = self.output_tokens.sample(rng, n)
        if self.prompt_format == "text":
            texts = prompts.text_prompts(inputs, tokenizer, rng)
        else:
            texts = prompts.token_id_prompts(inputs, tokenizer, rng)
        return prompts.make_requests(texts, outputs)


@dataclass(frozen=True, kw_only=True)
class ProfileSource(Source):
    """An inference-benchmarker profile; its dataset file when found locally, else synthetic
    prompts with the same length distributions. `scale` shrinks every length (see profiles)."""

    file_fields: ClassVar[tuple[str, ...]] = ("dataset_path",)

    profile: str
    scale: float = 1.0
    dataset_path: str | None = None

    def requests(self, n, tokenizer, rng):
        return profiles.profile_requests(self.profile, n, tokenizer, rng, self.dataset_path,
                                         scale=self.scale)


@dataclass(frozen=True, kw_only=True)
class SharedPrefix(Source):
    """`num_prefixes` prefixes of `prefix_tokens`, each reused, then a unique suffix: what
    prefix caching is for (system prompts, documents asked several questions)."""

    num_prefixes: int
    prefix_tokens: int
    suffix_tokens: Any
    output_tokens: Any

    def requests(self, n, tokenizer, rng):
        suffixes = self.suffix_tokens.sample(rng, n)
        texts = prompts.shared_prefix_prompts(self.num_prefixes, self.prefix_tokens, suffixes,
                                              tokenizer, rng)
        return prompts.make_requests(texts, self.output_tokens.sample(rng, n))


@dataclass(frozen=True, kw_only=True)
class DatasetSource(Source):
    """Prompts from a local file (ShareGPT JSON, inference-benchmarker JSON, or JSONL), in file
    order, cycled when the file has fewer prompts than requested."""

    prompt_format: ClassVar[PromptFormat] = "text"
    file_fields: ClassVar[tuple[str, ...]] = ("path",)

    path: str
    output_tokens: int | None = None  # for records that do not give their output length

    def requests(self, n, tokenizer, rng):
        samples = datasets.load_samples(self.path, tokenizer)  # never empty: it says why
        if self.output_tokens is None and any(s.output_tokens is None for s in samples):
            raise datasets.DatasetError(
                f"{self.path}: its records give no output length (inference-benchmarker "
                "conversations do not); pass one: "
                f"Workload.dataset({self.path!r}, output_tokens=N, ...)")
        base = datasets.requests_from_samples(samples, tokenizer, self.output_tokens)
        return [base[i % len(base)] for i in range(n)]


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What to send (`source`), how it arrives (`pattern`), and how many.

    `warmup_requests` go first and are not measured; `duration_s` stops scheduling new requests
    after that many seconds (the result then holds only the requests sent).
    """

    name: str
    num_requests: int
    source: Source
    pattern: LoadPattern
    seed: int = 0
    warmup_requests: int = 0
    duration_s: float | None = None
    api: str = "completions"  # a records.RequestApi's name
    # "cold": the engine's prefix cache is emptied after the warm-up, before each measured run
    # (client/cache_reset.py); "warm", the default: whatever earlier requests left in it.
    prefix_cache: Literal["warm", "cold"] = "warm"

    def __post_init__(self) -> None:
        if self.num_requests < 1:
            raise ValueError(f"Workload {self.name!r}: num_requests must be >= 1, "
                             f"got {self.num_requests}")
        if self.prefix_cache not in ("warm", "cold"):
            raise ValueError(f"Workload {self.name!r}: prefix_cache must be 'warm' (the "
                             f"default) or 'cold', got {self.prefix_cache!r}")
        try:
            api = request_api(self.api)
        except ValueError as exc:
            raise ValueError(f"Workload {self.name!r}: {exc}") from None
        if api.chat and self.source.prompt_format != "text":
            raise ValueError(f"Workload {self.name!r}: api={self.api!r} needs text prompts "
                             "(prompt_format='text' or a dataset)")

    # ------------------------------------------------------------------ constructors

    @classmethod
    def fixed(cls, *, input_tokens: int, output_tokens: int, num_requests: int,
              name: str | None = None, **options: Any) -> "Workload":
        """Every request `input_tokens` in, `output_tokens` out (the fixed-length profile)."""
        return cls.synthetic(input_tokens=lengths.Fixed(tokens=input_tokens),
                             output_tokens=lengths.Fixed(tokens=output_tokens),
                             num_requests=num_requests,
                             name=name or f"fixed-{input_tokens}in-{output_tokens}out", **options)

    @classmethod
    def random(cls, *, input_tokens: int, output_tokens: int, range_ratio: float,
               num_requests: int, name: str | None = None, **options: Any) -> "Workload":
        """Uniform lengths in [mean*(1-r), mean*(1+r)], like vLLM bench's random dataset."""
        return cls.synthetic(
            input_tokens=lengths.Uniform(mean=input_tokens, range_ratio=range_ratio),
            output_tokens=lengths.Uniform(mean=output_tokens, range_ratio=range_ratio),
            num_requests=num_requests,
            name=name or f"random-{input_tokens}in-{output_tokens}out-r{range_ratio:g}", **options)

    @classmethod
    def synthetic(cls, *, input_tokens: Any, output_tokens: Any, num_requests: int,
                  name: str = "synthetic", prompt_format: PromptFormat = "token_ids",
                  **options: Any) -> "Workload":
        source = Synthetic(input_tokens=input_tokens, output_tokens=output_tokens,
                           prompt_format=prompt_format)
        return cls.of(source, name=name, num_requests=num_requests, **options)

    @classmethod
    def profile(cls, profile: str, *, num_requests: int, scale: float = 1.0,
                dataset_path: str | None = None, **options: Any) -> "Workload":
        """chat, classification, code-generation or fixed-length (inference-benchmarker)."""
        profiles.get_profile(profile)  # an unknown name fails where the workload is written
        source = ProfileSource(profile=profile, scale=scale, dataset_path=dataset_path)
        suffix = f"-x{scale:g}" if scale != 1.0 else ""
        return cls.of(source, name=f"{profile}{suffix}", num_requests=num_requests, **options)

    @classmethod
    def shared_prefix(cls, *, num_prefixes: int, prefix_tokens: int, suffix_tokens: int,
                      output_tokens: int, num_requests: int, **options: Any) -> "Workload":
        source = SharedPrefix(num_prefixes=num_prefixes, prefix_tokens=prefix_tokens,
                              suffix_tokens=lengths.Fixed(tokens=suffix_tokens),
                              output_tokens=lengths.Fixed(tokens=output_tokens))
        name = f"prefix-{num_prefixes}x{prefix_tokens}+{suffix_tokens}in-{output_tokens}out"
        return cls.of(source, name=options.pop("name", name), num_requests=num_requests,
                      **options)

    @classmethod
    def dataset(cls, path: str | Path, *, num_requests: int, output_tokens: int | None = None,
                **options: Any) -> "Workload":
        source = DatasetSource(path=str(path), output_tokens=output_tokens)
        return cls.of(source, name=options.pop("name", Path(path).stem),
                      num_requests=num_requests, **options)

    @classmethod
    def trace(cls, path: str | Path, *, format: traces.TraceFormat, speedup: float = 1.0,
              start_s: float = 0.0, duration_s: float | None = None,
              num_requests: int | None = None, max_concurrency: int | None = None,
              block_tokens: int = traces.MOONCAKE_BLOCK_TOKENS, **options: Any) -> "Workload":
        """Replay a trace file ("mooncake", "azure", "burstgpt"; workloads/traces.py): its rows
        in [start_s, start_s + duration_s) of trace time, each sent at its offset / speedup."""
        speedup = traces.check_speedup(speedup)
        rows = traces.select(traces.read_trace(path, format), start_s=start_s,
                             duration_s=duration_s, num_requests=num_requests)
        pattern = Trace(offsets_s=traces.replay_offsets(rows, speedup),
                        max_concurrency=max_concurrency)
        source = traces.TraceSource(path=str(path), format=format, rows=tuple(rows),
                                    block_tokens=block_tokens, speedup=speedup)
        suffix = f"-x{speedup:g}" if speedup != 1.0 else ""
        return cls(name=options.pop("name", f"{Path(path).stem}{suffix}"),
                   num_requests=len(rows), source=source, pattern=pattern, **options)

    @classmethod
    def conversations(cls, *, sessions: int, turns: int, input_tokens: Any, output_tokens: Any,
                      think_time_s: float = 0.0, concurrency: int | None = None,
                      rate: float | None = None, burstiness: float = 1.0,
                      ramp: tuple[float, float, str] | None = None,
                      prompt_format: PromptFormat | None = None,
                      **options: Any) -> "Workload":
        """`sessions` chats of `turns` turns (client/sessions.py): each turn's prompt is the
        conversation so far plus a new message of `input_tokens`; sessions start as
        concurrency/rate/ramp say (all at once by default). Messages are token ids, or text
        with api="chat" (or prompt_format="text")."""
        start = _session_start(sessions, concurrency, rate, burstiness, ramp)
        source = ConversationSource(sessions=sessions, turns=turns,
                                    input_tokens=as_distribution(input_tokens),
                                    output_tokens=as_distribution(output_tokens),
                                    prompt_format=_message_format(prompt_format, options))
        name = options.pop("name", f"chat-{sessions}x{turns}turns")
        return cls(name=name, num_requests=sessions * turns, source=source,
                   pattern=Sessions(turns=turns, think_time_s=think_time_s, start=start),
                   **options)

    @classmethod
    def conversation_file(cls, path: str | Path, *,
                          format: conversation_files.ConversationFormat,
                          sessions: int | None = None, max_turns: int | None = None,
                          think_time_s: float = 0.0, concurrency: int | None = None,
                          rate: float | None = None, burstiness: float = 1.0,
                          ramp: tuple[float, float, str] | None = None,
                          prompt_format: PromptFormat | None = None,
                          skip_bad_records: bool = False, **options: Any) -> "Workload":
        """The first `sessions` conversations of 2 or more turns in a ShareGPT or
        inference-benchmarker JSON file (workloads/conversation_files.py; all of them with
        None), each cut to `max_turns`: each turn's prompt is the conversation so far plus the
        record's next user message, its output length the recorded answer's. The file is read
        and checked here: a bad record fails where the workload is written."""
        conversations, skipped = conversation_files.read_conversations(
            path, format, sessions=sessions, max_turns=max_turns,
            skip_bad_records=skip_bad_records)
        source = conversation_files.ConversationFileSource(
            path=str(path), format=format, conversations=tuple(conversations),
            prompt_format=_message_format(prompt_format, options), max_turns=max_turns,
            skipped_records=skipped)
        lengths = source.session_turns
        pattern = Sessions(turns=max(lengths), think_time_s=think_time_s,
                           start=_session_start(len(lengths), concurrency, rate, burstiness,
                                                ramp),
                           session_turns=lengths)
        name = options.pop("name", f"{Path(path).stem}-{len(lengths)}sessions")
        return cls(name=name, num_requests=sum(lengths), source=source, pattern=pattern,
                   **options)

    @classmethod
    def structured(cls, kind: structured.Kind, specs: Any, *, num_requests: int,
                   input_tokens: int = 32, max_tokens: int = 64,
                   prompt_format: PromptFormat = "token_ids", **options: Any) -> "Workload":
        """Structured outputs (workloads/structured.py): request i asks for `specs[i % N]`, a
        JSON schema, a regex, a list of choices or an EBNF grammar (`kind` "json", "regex",
        "choice", "grammar"), and its output is checked against it. Each spec is checked here:
        one that cannot compile fails where the workload is written. Each token-id prompt ends
        in a plain token (the module says why)."""
        source = structured.StructuredSource.of(kind, specs, input_tokens=input_tokens,
                                                max_tokens=max_tokens,
                                                prompt_format=prompt_format)
        name = options.pop("name", f"structured-{kind}-{len(source.specs)}")
        return cls.of(source, name=name, num_requests=num_requests, **options)

    @classmethod
    def lora(cls, adapters: dict[str, float], *, base: float = 0.0, input_tokens: int,
             output_tokens: int, num_requests: int, prompt_format: PromptFormat = "token_ids",
             **options: Any) -> "Workload":
        """LoRA traffic (workloads/lora.py): exact lengths, each request's `model` naming one
        of `adapters` (name -> weight) or, for the `base` weight's share, the engine's own
        model; exact counts by weight, in a seeded order. Any source splits so:
        `Workload.of(lora.AdapterSplit.of(source, adapters, base), ...)`."""
        inner = Synthetic(input_tokens=lengths.Fixed(tokens=input_tokens),
                          output_tokens=lengths.Fixed(tokens=output_tokens),
                          prompt_format=prompt_format)
        source = lora.AdapterSplit.of(inner, adapters, base)
        name = options.pop("name", f"lora-{len(source.names)}adapters-{input_tokens}in-"
                                   f"{output_tokens}out")
        return cls.of(source, name=name, num_requests=num_requests, **options)

    @classmethod
    def tool_calls(cls, tools: Any, *, num_requests: int, input_tokens: int = 32,
                   max_tokens: int = 128, parallel_tool_calls: bool = False,
                   **options: Any) -> "Workload":
        """Tool calls (workloads/tool_calls.py): chat requests that each send every tool in
        `tools` (OpenAI's form) with tool_choice="required"; each call the engine streams back
        is checked against its tool. The tools are checked here: one the server could not
        take fails where the workload is written."""
        api = _chat_only(options, f"{tool_calls.WHERE}: tools")
        source = tool_calls.ToolCallSource.of(tools, input_tokens=input_tokens,
                                              max_tokens=max_tokens,
                                              parallel_tool_calls=parallel_tool_calls)
        name = options.pop("name", f"tool-calls-{len(source.tools)}")
        return cls.of(source, name=name, num_requests=num_requests, api=api, **options)

    @classmethod
    def agent_sessions(cls, tools: Any, *, sessions: int, steps: int, input_tokens: int = 32,
                       result_tokens: int = 16, max_tokens: int = 64, tool_time_s: float = 0.0,
                       tool_time_distribution: str = "exponential",
                       concurrency: int | None = None, rate: float | None = None,
                       burstiness: float = 1.0, **options: Any) -> "Workload":
        """Agent sessions (client/agents.py): `sessions` sessions of `steps` steps, each step the
        conversation so far with every tool and tool_choice="required", its call checked (a
        call that fails ends its session, named), then the tool's time (`tool_time_s`, "fixed"
        or seeded "exponential") and its result of `result_tokens` as the next step's message;
        sessions start as concurrency/rate say (all at once by default)."""
        api = _chat_only(options, "Workload.agent_sessions: tool calls")
        agents.check_budget(steps, max_tokens, input_tokens, result_tokens)
        calls = tool_calls.ToolCallSource.of(tools, input_tokens=input_tokens,
                                             max_tokens=max_tokens, parallel_tool_calls=False)
        source = agents.AgentSource(calls=calls, steps=steps, result_tokens=result_tokens)
        pattern = AgentSessions(turns=steps, tool_time_s=tool_time_s,
                                tool_time_distribution=tool_time_distribution,
                                start=_session_start(sessions, concurrency, rate, burstiness,
                                                     None))
        name = options.pop("name", f"agents-{sessions}x{steps}steps")
        return cls(name=name, num_requests=sessions * steps, source=source, pattern=pattern,
                   api=api, **options)

    @classmethod
    def reasoning(cls, *, input_tokens: int, output_tokens: int, num_requests: int,
                  **options: Any) -> "Workload":
        """Reasoning (workloads/reasoning.py): chat requests of `input_tokens` text tokens that
        generate exactly `output_tokens`, thinking and answer together; each request's thinking
        (the stream's `reasoning`) and answer are timed and counted apart: time to first output
        token, reasoning tokens and time, answer tokens (metrics/reasoning.py). The engine must
        run a reasoning parser (Engine(reasoning_parser=...)): one line before it starts."""
        api = _chat_only(options, f"{reasoning.WHERE}: reasoning requests")
        inner = Synthetic(input_tokens=lengths.Fixed(tokens=input_tokens),
                          output_tokens=lengths.Fixed(tokens=output_tokens),
                          prompt_format="text")
        name = options.pop("name", f"reasoning-{input_tokens}in-{output_tokens}out")
        return cls.of(reasoning.ReasoningOf(source=inner), name=name,
                      num_requests=num_requests, api=api, **options)

    @classmethod
    def embeddings(cls, *, input_tokens: int, batch_size: int = 1, num_requests: int,
                   prompt_format: PromptFormat = "token_ids", **options: Any) -> "Workload":
        """Embeddings (workloads/embeddings.py): each request to /v1/embeddings carries
        `batch_size` inputs of `input_tokens` random tokens; its latency, requests/s and input
        tokens/s are what is measured (metrics/embeddings.py)."""
        source = embeddings.EmbeddingsSource(input_tokens=input_tokens, batch_size=batch_size,
                                             prompt_format=prompt_format)
        name = options.pop("name", f"embed-{batch_size}x{input_tokens}in")
        return cls.of(source, name=name, num_requests=num_requests, api="embeddings",
                      **options)

    @classmethod
    def rerank(cls, *, query_tokens: int, documents: int, document_tokens: int,
               num_requests: int, **options: Any) -> "Workload":
        """Rerank (workloads/embeddings.py): each request to /v1/rerank ranks `documents` texts
        of `document_tokens` tokens against a query of `query_tokens`; measured as embeddings
        are, a document counted as an input (metrics/embeddings.py)."""
        source = embeddings.RerankSource(query_tokens=query_tokens, documents=documents,
                                         document_tokens=document_tokens)
        name = options.pop("name", f"rerank-{documents}x{document_tokens}in")
        return cls.of(source, name=name, num_requests=num_requests, api="rerank", **options)

    @classmethod
    def images(cls, *, images_per_request: int = 1, width: int, height: int,
               input_tokens: int, output_tokens: int, num_requests: int,
               **options: Any) -> "Workload":
        """Images (workloads/images.py): chat requests that each carry `images_per_request`
        seeded noise PNGs of `width` x `height` and a text of exactly `input_tokens` tokens, and
        generate `output_tokens`; a multimodal model's engine is asked (a text-only one is one
        line before it starts: engines/image_input.py)."""
        api = _chat_only(options, f"{images.WHERE}: images")
        source = images.ImagesSource(images_per_request=images_per_request, width=width,
                                     height=height, input_tokens=input_tokens,
                                     output_tokens=output_tokens)
        name = options.pop("name", f"images-{images_per_request}x{width}x{height}-"
                                   f"{input_tokens}in-{output_tokens}out")
        return cls.of(source, name=name, num_requests=num_requests, api=api, **options)

    @classmethod
    def of(cls, source: Source, *, name: str, num_requests: int, concurrency: int | None = None,
           rate: float | None = None, burstiness: float = 1.0,
           ramp: tuple[float, float, str] | None = None, **options: Any) -> "Workload":
        """`source`'s requests at the load `concurrency`/`rate`/`ramp` say (load_pattern): how
        any source is measured, a new one included."""
        pattern = load_pattern(concurrency=concurrency, rate=rate, burstiness=burstiness,
                               ramp=ramp)
        return cls(name=name, num_requests=num_requests, source=source, pattern=pattern,
                   **options)

    # ------------------------------------------------------------------ use

    def with_pattern(self, pattern: LoadPattern, name: str | None = None) -> "Workload":
        return replace(self, pattern=pattern, name=name or self.name)

    def with_probes(self, rate: float, input_tokens: int = 8, output_tokens: int = 8
                    ) -> "Workload":
        """This load with interference probes beside it (workloads/probes.py): `rate` small
        requests a second of `input_tokens` in, `output_tokens` out, over the load's span; their
        latencies are a measurement of their own ("<test>@probes", `result.probes`), left out
        of the load's. The load must be open-loop without a cap (rate=, ramp= or a trace)."""
        return probes.with_probes(self, rate, input_tokens, output_tokens)

    def build(self, tokenizer: prompts.Tokenizer) -> tuple[list[Request], list[Request]]:
        """(measured requests, warm-up requests), reproducible from `seed`."""
        rng = np.random.default_rng(self.seed)
        requests = self.source.requests(self.num_requests + self.warmup_requests, tokenizer, rng)
        return requests[self.warmup_requests:], requests[: self.warmup_requests]

    def to_dict(self, name_file: NameFile | None = None) -> dict[str, Any]:
        """What run files and baselines record; `name_file` names each file the source reads
        (identity.workload_identity), else it is as written."""
        source = self.source.to_dict() if name_file is None else self.source.to_dict(name_file)
        out = {"name": self.name, "num_requests": self.num_requests,
               "source": source, "pattern": self.pattern.to_dict(),
               "seed": self.seed, "warmup_requests": self.warmup_requests, "api": self.api}
        if self.duration_s is not None:
            out["duration_s"] = self.duration_s
        if self.prefix_cache != "warm":  # absent is warm: tables recorded before it still match
            out["prefix_cache"] = self.prefix_cache
        return out

    def label(self) -> str:
        cold = ", cold prefix cache" if self.prefix_cache == "cold" else ""
        return f"{self.name} x{self.num_requests} @ {self.pattern.label()}{cold}"


def _session_start(sessions: int, concurrency: int | None, rate: float | None,
                   burstiness: float, ramp: tuple[float, float, str] | None) -> LoadPattern:
    """When conversations start: as concurrency/rate/ramp say; all at once by default."""
    if rate is None and ramp is None and concurrency is None:
        concurrency = sessions
    return load_pattern(concurrency=concurrency, rate=rate, burstiness=burstiness, ramp=ramp)


def _chat_only(options: dict[str, Any], what: str) -> str:
    """The `api` of a workload whose requests only /v1/chat/completions takes (tools, images),
    popped from `options`; any other is one line naming `what` ("Workload.images: images")."""
    api = options.pop("api", "chat")
    if api != "chat":
        raise InputError(f"{what} need /v1/chat/completions, got api={api!r}; leave api at "
                         "'chat', its default here")
    return api


def _message_format(prompt_format: PromptFormat | None, options: dict[str, Any]) -> PromptFormat:
    """A conversation's messages: text for a chat (its messages are text), else token ids
    (exact lengths), unless `prompt_format` says."""
    if prompt_format is not None:
        return prompt_format
    try:
        chat = request_api(options.get("api", "completions")).chat
    except ValueError:  # refused in one line when the Workload is made
        chat = False
    return "text" if chat else "token_ids"


def load_pattern(*, concurrency: int | None = None, rate: float | None = None,
                 burstiness: float = 1.0,
                 ramp: tuple[float, float, str] | None = None) -> LoadPattern:
    """concurrency=N (closed loop), rate=R (Poisson, gamma with burstiness; with concurrency a
    capped open loop), or ramp=(start_rps, end_rps, "linear"|"exponential")."""
    if ramp is not None and rate is not None:
        raise ValueError("give rate=R or ramp=(start, end, strategy), not both")
    if burstiness != 1.0 and rate is None:
        raise ValueError("burstiness applies to rate=R arrivals; give a rate too")
    if ramp is not None:
        start, end, strategy = ramp
        return Ramp(start_rps=start, end_rps=end, strategy=strategy, max_concurrency=concurrency)
    if rate is None and concurrency is None:
        raise ValueError("give concurrency=N (closed loop), rate=R requests/s (open loop) or "
                         "ramp=(start, end, 'linear'|'exponential')")
    if rate is None:
        return Concurrency(max_concurrency=concurrency)
    return Rate(requests_per_s=rate, burstiness=burstiness, max_concurrency=concurrency)

