"""Plain data that flows between the load generator, the client and the metrics.

Everything here is pure: no HTTP, no vLLM, no pytest. Times are `time.perf_counter()` values in
seconds, taken on the client; only differences between them are ever reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_APIS: dict[str, RequestApi] = {}


@dataclass(frozen=True)
class RequestApi:
    """One HTTP API a workload's requests go to (`Workload.api` names it): where they are sent
    (the client) and named in a refusal (the engines' checks), whether the answer is one JSON
    document instead of a stream, measured as embeddings are and served by a pooling model
    (client/embeddings.py, metrics/embeddings.py, engines/runner_type.py), and whether the
    prompt goes as messages (a conversation's turns, an agent's steps). Registered by being
    made; how the client writes its body and reads its answer is registered beside it under the
    same name (client/request_apis.py). A new API is one module that makes both."""

    name: str
    path: str
    pooling: bool = False
    chat: bool = False
    # A pooling request's source field that counts the inputs one request carries.
    inputs: str = "batch_size"

    def __post_init__(self) -> None:
        _APIS[self.name] = self


def request_api(name: str) -> RequestApi:
    """The registered API `name`; ValueError (one line) naming the ones there are."""
    try:
        return _APIS[name]
    except (KeyError, TypeError):
        raise ValueError(f"api={name!r} is no request API; one of: {', '.join(_APIS)} (or one "
                         "a module registers: records.RequestApi)") from None


COMPLETIONS = RequestApi("completions", "/v1/completions")
CHAT = RequestApi("chat", "/v1/chat/completions", chat=True)
EMBEDDINGS = RequestApi("embeddings", "/v1/embeddings", pooling=True)
RERANK = RequestApi("rerank", "/v1/rerank", pooling=True, inputs="documents")


@dataclass(frozen=True, slots=True)
class Request:
    """One request to send: a prompt and the exact output length to force.

    `prompt` is text or a tuple of token ids (token ids give exact input lengths for any tokenizer).
    `prompt_tokens` is the length the workload intended; the server's `usage` is what is reported.
    """

    prompt: str | tuple[int, ...]
    prompt_tokens: int
    output_tokens: int
    # Keep the generated token ids and text in the record (`output_token_ids`, `output_text`):
    # a conversation's next turn carries them (client/sessions.py). Off by default: the hot path
    # keeps only counts.
    keep_output: bool = False
    # Chat messages, (role, content), that go before `prompt` on /v1/chat/completions: a chat
    # conversation's earlier turns (client/sessions.py). A completions prompt has none.
    history: tuple[tuple[str, str], ...] = ()
    # Body fields of this request beyond the prompt and length (structured outputs, tools:
    # workloads/structured.py, workloads/tool_calls.py); they replace the client's own.
    body: tuple[tuple[str, Any], ...] = ()
    # False: `output_tokens` is a cap (max_tokens) and the output ends where the model or its
    # grammar stops; no min_tokens/ignore_eos, which would force tokens past a grammar's end.
    forced_length: bool = True
    # What a complete output must be: an object whose `problem(text)` says what is wrong with
    # it, or None (workloads/structured.py). A problem fails the request as `invalid_output`;
    # it needs `keep_output`.
    check: Any = None
    # A reasoning model's request (workloads/reasoning.py): its record splits the streamed
    # `reasoning` from the answer (RequestRecord.reasoning_tokens, first_output_s).
    reasoning: bool = False
    # The whole chat messages list, dicts as the API takes them, in place of `history` and
    # `prompt`: an agent session's step, whose messages carry tool calls and tool results
    # (client/agents.py). Empty for every other request.
    messages: tuple[Any, ...] = ()


@dataclass(slots=True)
class RequestRecord:
    """What happened to one request, as the client saw it.

    `chunk_times_s[i]` is when the i-th streamed chunk that carried generated tokens arrived and
    `chunk_tokens[i]` how many tokens it carried. Chunks without tokens (role chunks, the usage
    chunk) are not recorded. `usage_*` are the server's own counts from the final usage chunk.
    """

    index: int
    expected_prompt_tokens: int
    expected_output_tokens: int
    scheduled_s: float
    sent_s: float | None = None
    chunk_times_s: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    done_s: float | None = None
    usage_prompt_tokens: int | None = None
    usage_output_tokens: int | None = None
    error: str | None = None
    error_kind: str | None = None  # one of failures.KINDS when `error` is set
    # Set when a chunk's token count had to be inferred (the server sent no token ids).
    tokens_estimated: bool = False
    # The generated token ids, and text in the pieces it streamed in, only for a request that
    # asked (`Request.keep_output`).
    output_token_ids: list[int] | None = None
    output_text: list[str] | None = None
    # A conversation's session number and 1-based turn (client/sessions.py); None otherwise.
    session: int | None = None
    turn: int | None = None
    # What the request executed, for "did both sides do the same work" (metrics/work.py): the
    # server's finish_reason ("length", "stop", ...), the prompt tokens its usage says came from
    # the prefix cache (None: it did not say), and a CRC-32 of the generated token ids in order
    # (0 until ids arrive; a greedy request's digest is its output).
    finish_reason: str | None = None
    cached_prompt_tokens: int | None = None
    output_digest: int = 0
    # The requests the engine counts for this one: an embeddings request's inputs, each of
    # which vLLM runs and times as a request of its own (client/embeddings.py); else 1.
    engine_requests: int = 1
    # The spec a structured output was checked against ("json spec 2": Request.check's name);
    # None for a request without a check.
    output_check: str | None = None
    # A request that sent `tools`: its calls as they streamed in `delta.tool_calls`, [name,
    # arguments] per call index, and when the last piece of any call arrived (the calls were
    # then complete); None for other requests (workloads/tool_calls.py).
    tool_calls: list[list[str]] | None = None
    tool_calls_done_s: float | None = None
    # The model the request named in its body: a LoRA adapter (workloads/lora.py); None: the
    # client's own, the engine's model.
    model: str | None = None
    # A reasoning request (Request.reasoning; metrics/reasoning.py): the tokens of the chunks
    # whose delta carried `reasoning` (vLLM 0.32; `reasoning_content` before), those of the
    # chunks that carried `content` (the answer), when the first of those arrived (time to
    # first output token), and the server's own count (usage.completion_tokens_details); None
    # for other requests.
    reasoning_tokens: int | None = None
    answer_tokens: int | None = None
    first_output_s: float | None = None
    usage_reasoning_tokens: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.sent_s is not None and bool(self.chunk_times_s)

    @property
    def ttft_s(self) -> float:
        """Time to first token: from sending to the first chunk that carried tokens (a role
        chunk carries none: metrics/request_metrics.py says how this differs from vLLM's).
        For a record that is `ok`; every report of TTFT reads it here."""
        return self.chunk_times_s[0] - self.sent_s

    @property
    def e2el_s(self) -> float:
        """End-to-end latency: from sending to the last chunk that carried tokens (`ok` only)."""
        return self.chunk_times_s[-1] - self.sent_s

    @property
    def output_tokens(self) -> int:
        """Generated tokens: the server's usage when it sent one, else the sum over chunks."""
        if self.usage_output_tokens is not None:
            return self.usage_output_tokens
        return sum(self.chunk_tokens)

    @property
    def thinking_tokens(self) -> int | None:
        """A reasoning request's thinking tokens: the server's count (its usage) where it gave
        one, else the chunks' that streamed thinking, which count a chunk that merged the last
        thought with the end marker (the server falling behind) as thinking, marker included.
        None for another request."""
        if self.reasoning_tokens is None:
            return None
        if self.usage_reasoning_tokens is not None:
            return self.usage_reasoning_tokens
        return self.reasoning_tokens

    @property
    def length_mismatch(self) -> bool:
        """True when the server generated a different number of tokens than was forced."""
        return self.ok and self.output_tokens != self.expected_output_tokens


# A record's instants, each a perf_counter value (the chunks' are a list of them).
INSTANTS = ("scheduled_s", "sent_s", "done_s", "tool_calls_done_s", "first_output_s")


def moved_in_time(record: RequestRecord, by_s: float) -> RequestRecord:
    """The record with every instant moved by `by_s`: a record taken on another machine's
    perf_counter, put on this process's time line (client/ray_workers.py). In place; returned."""
    for name in INSTANTS:
        value = getattr(record, name)
        if value is not None:
            setattr(record, name, value + by_s)
    record.chunk_times_s = [t + by_s for t in record.chunk_times_s]
    return record


@dataclass(slots=True)
class ClientStats:
    """How hard the load generator itself worked during one measurement: the evidence for its
    self-check (client/selfcheck.py). One per client process; `merge` folds several into one."""

    workers: int = 1
    wall_s: float = 0.0  # the measured window: start instant -> last record
    cpu_s: float = 0.0  # CPU the client processes used in that window, all of them together
    busiest_cpu_share: float = 0.0  # the busiest process's CPU time over the window (1.0 = a core)
    chunks: int = 0  # token chunks received
    coalesced_chunks: int = 0  # token chunks that shared a socket read with their predecessor
    loop_lag_s: list[float] = field(default_factory=list)  # event-loop probe delays, all workers
    # Which client process this is ("client worker 1 (pid 4242)", "client worker 1 on node
    # 10.0.0.2 (3f2a9c1e)"); "" for the one process of an in-process run.
    name: str = ""
    # A merge's parts, each process's own, so the self-check can name the one that limited a run.
    parts: tuple[ClientStats, ...] = ()

    @property
    def cpu_us_per_chunk(self) -> float:
        return self.cpu_s / self.chunks * 1e6 if self.chunks else 0.0

    @property
    def coalesced_share(self) -> float:
        return self.coalesced_chunks / self.chunks if self.chunks else 0.0

    @classmethod
    def merge(cls, parts: list["ClientStats"]) -> "ClientStats":
        return cls(
            workers=len(parts),
            wall_s=max((p.wall_s for p in parts), default=0.0),
            cpu_s=sum(p.cpu_s for p in parts),
            busiest_cpu_share=max((p.busiest_cpu_share for p in parts), default=0.0),
            chunks=sum(p.chunks for p in parts),
            coalesced_chunks=sum(p.coalesced_chunks for p in parts),
            loop_lag_s=[lag for p in parts for lag in p.loop_lag_s],
            # One part is that part, its name kept; several keep each other's for the check.
            name=parts[0].name if len(parts) == 1 else "",
            parts=tuple(parts) if len(parts) > 1 else (),
        )
