"""Multi-turn conversations: a per-session driver over the load generator.

A chat user sends a message, reads the answer, thinks, and sends the next message with the whole
conversation so far in front of it. What that does to a server (each turn's prompt is the last
turn's prompt plus the answer plus a new message, so a prefix cache can serve all but the new
part) only shows when the prompt really carries the answer *as the server generated it*: so each
turn keeps what it generated (`Request.keep_output`) and the next turn's prompt is built from it
at run time, in one of three forms:
- token ids on /v1/completions (exact lengths): the conversation is the concatenation of the
  turns' ids and the answers' ids (vLLM streams them with `return_token_ids`);
- text on /v1/completions (a server that takes no token ids, workloads/text_only.py): the
  concatenation of the messages' and the answers' text;
- messages on /v1/chat/completions (`chat=True`, the client's `api="chat"`): [user, assistant,
  user, ...], each assistant message the text the server streamed; a first turn's own `history`
  (a conversation file's system prompt) goes first.

Sessions start on their own load pattern (`Sessions.start`): `Concurrency(N)` keeps N sessions
going (a new one starts when one ends), `Rate`/`Ramp` start them at seeded arrival times, exactly
as the load generator sends single requests (the start pattern's own `run` drives the session
starts). Sessions is itself a load pattern (patterns.LoadPattern): its callers run it, split it
between client workers and record it without testing its class. Inside
a session, turn t+1 is due `think_time_s` after turn t ended; that due time is its
`scheduled_s`, so its queue time is the client's own lag, as in an open loop.

The workload lays its requests out session-major: session s's turns are consecutive requests,
`turns` of them each (or `session_turns[s]` where conversations differ in length, as a file's
do), each prompt the *new* message only. Client workers (workers.py) split whole sessions
between processes: `only` (an open loop's session starts) and `take_next` (a closed loop's shared
counter) count sessions, and records keep their request index, session and turn, so the merged
records number as one process's would.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import ClassVar

import numpy as np

from pytest_llmperf.client.loadgen import Send, _safe_send, _sleep_until
from pytest_llmperf.client.patterns import LoadPattern, Share, pattern_type
from pytest_llmperf.errors import InputError
from pytest_llmperf.failures import CLIENT
from pytest_llmperf.numbers import is_real, is_whole
from pytest_llmperf.records import Request, RequestRecord

__all__ = ["NO_TEXT", "NO_TOKEN_IDS", "Sessions", "drive_sessions", "run_sessions"]

NO_TOKEN_IDS = ("the server streamed no token ids, so the next turn cannot carry this answer "
                "(multi-turn conversations need vLLM's return_token_ids)")
NO_TEXT = ("the server streamed no answer text, so the next turn cannot carry this answer "
           "(its chunks counted tokens but held no text)")


@dataclass(frozen=True, kw_only=True)
class Sessions(LoadPattern):
    """Conversations of `turns` turns each (or `session_turns[s]` for session s: at most
    `turns`), started as `start` says, `think_time_s` between a turn's end and the next turn's
    send. `run` drives them (run_sessions); `split` deals whole sessions to client workers.
    """

    # Each turn is due at a time of its own (its session's start, or think time after the last
    # turn ended), so its queue time is the client's lag, as in an open loop.
    open_loop: ClassVar[bool] = True
    replay: ClassVar[bool] = False
    starts_sessions: ClassVar[bool] = False
    turns: int
    think_time_s: float = 0.0
    start: LoadPattern
    session_turns: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not is_whole(self.turns, 1):
            raise InputError(f"Sessions.turns must be an int >= 1, got {self.turns!r}")
        if not is_real(self.think_time_s, 0):
            raise InputError(
                f"Sessions.think_time_s must be a number >= 0, got {self.think_time_s!r}")
        # A replayed trace holds one arrival per recorded request, not one per session.
        if not getattr(self.start, "starts_sessions", False):
            raise InputError("Sessions.start must be Concurrency, Rate or Ramp, got "
                             f"{type(self.start).__name__}")
        bad = next((n for n in self.session_turns
                    if not (is_whole(n, 1) and n <= self.turns)), None)
        if bad is not None:
            raise InputError(f"Sessions.session_turns must be ints from 1 to turns "
                             f"({self.turns}), got {bad!r}")

    @property
    def max_concurrency(self) -> None:
        """No slot waits: a turn's queue time is client lag only (patterns.counts_slot_waits)."""
        return None

    def firsts(self, n_requests: int) -> list[int]:
        """The request index of each session's first turn, for `n_requests` laid out
        session-major."""
        if self.session_turns:
            if sum(self.session_turns) != n_requests:
                raise InputError(f"{n_requests} requests do not make the "
                                 f"{len(self.session_turns)} conversations of "
                                 f"{sum(self.session_turns)} turns in all")
            return list(accumulate(self.session_turns[:-1], initial=0))
        if n_requests % self.turns:
            raise InputError(f"{n_requests} requests do not make whole conversations of "
                             f"{self.turns} turns")
        return list(range(0, n_requests, self.turns))

    def turns_of(self, session: int) -> int:
        return self.session_turns[session] if self.session_turns else self.turns

    def with_start(self, start: LoadPattern) -> "Sessions":
        return replace(self, start=start)

    def _offsets(self, n: int, seed: int) -> np.ndarray:
        raise InputError("a conversation's turns have no schedule (each goes when the one "
                         "before it ended); its sessions start as Sessions.start says")

    def split(self, n_requests: int, parts: int) -> list[Share]:
        """Whole sessions to each worker: the session starts split as `start` splits them (a
        session's turns carry its own answers, so it never spans two workers)."""
        starts = self.start.split(len(self.firsts(n_requests)), parts)
        return [(self.with_start(start), only) for start, only in starts]

    async def run(self, requests: Sequence[Request], send: Send, *, chat: bool = False,
                  **options) -> list[RequestRecord]:
        return await run_sessions(requests, send, self, chat=chat, **options)

    @classmethod
    def from_dict(cls, recorded: Mapping[str, object]) -> "Sessions":
        """The conversations `to_dict` recorded; not a file's (only their count is recorded)."""
        if "sessions" in recorded:
            raise InputError("a run file records a conversation file's session count, not "
                             "each conversation's turns: read the file again "
                             "(Workload.conversation_file)")
        start = recorded["start"]
        start_type = pattern_type(start["type"])
        if start_type is None:
            raise InputError(f"Sessions.start: no load pattern is called {start['type']!r}")
        return cls(turns=recorded["turns"], think_time_s=recorded["think_time_s"],
                   start=start_type.from_dict(start))

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"type": "Sessions", "turns": self.turns,
                                  "think_time_s": self.think_time_s}
        if self.session_turns:  # their count and sum: a file's every length would swamp it
            out.update(sessions=len(self.session_turns), all_turns=sum(self.session_turns))
        # The start's fields as given (an infinite rate stays a float here, unlike
        # LoadPattern.describe's "inf"), as every recorded conversation has them.
        out["start"] = {"type": type(self.start).__name__, **self.start.settings()}
        return out

    def label(self) -> str:
        think = f", think {self.think_time_s:g} s" if self.think_time_s else ""
        most = "up to " if len(set(self.session_turns)) > 1 else ""
        return f"{most}{self.turns} turns{think}, sessions at {self.start.label()}"


def _failed(record: RequestRecord, why: str) -> RequestRecord:
    record.error, record.error_kind = why, CLIENT
    return record


class _TokenIds:
    """The conversation as token ids: earlier prompts, each followed by its answer's ids."""

    def __init__(self) -> None:
        self.ids: tuple[int, ...] = ()

    def turn(self, new: Request) -> Request:
        prompt = self.ids + new.prompt
        return Request(prompt=prompt, prompt_tokens=len(prompt),
                       output_tokens=new.output_tokens, keep_output=True)

    def carry(self, sent: Request, record: RequestRecord) -> str | None:
        if not record.output_token_ids:
            return NO_TOKEN_IDS
        self.ids = sent.prompt + tuple(record.output_token_ids)
        return None


class _Text:
    """The conversation as one text: earlier prompts, each followed by its answer's text."""

    def __init__(self) -> None:
        self.text, self.tokens = "", 0

    def turn(self, new: Request) -> Request:
        prefix = self.text + "".join(content for _, content in new.history)
        return Request(prompt=prefix + new.prompt, prompt_tokens=self.tokens + new.prompt_tokens,
                       output_tokens=new.output_tokens, keep_output=True)

    def carry(self, sent: Request, record: RequestRecord) -> str | None:
        answer = "".join(record.output_text or ())
        if not answer:
            return NO_TEXT
        self.text = sent.prompt + answer
        self.tokens = sent.prompt_tokens + record.output_tokens
        return None


class _Chat:
    """The conversation as chat messages: [user, assistant, user, ...] (after a first turn's
    own history, e.g. a system prompt)."""

    def __init__(self) -> None:
        self.messages: tuple[tuple[str, str], ...] = ()
        self.tokens = 0

    def turn(self, new: Request) -> Request:
        return Request(prompt=new.prompt, prompt_tokens=self.tokens + new.prompt_tokens,
                       output_tokens=new.output_tokens, keep_output=True,
                       history=self.messages + new.history)

    def carry(self, sent: Request, record: RequestRecord) -> str | None:
        answer = "".join(record.output_text or ())
        if not answer:
            return NO_TEXT
        self.messages = sent.history + (("user", sent.prompt), ("assistant", answer))
        self.tokens = sent.prompt_tokens + record.output_tokens
        return None


def _form(requests: Sequence[Request], chat: bool) -> type[_TokenIds | _Text | _Chat]:
    """How the conversation is carried: by the prompts' kind and the API."""
    ids = [isinstance(r.prompt, tuple) for r in requests]
    if chat:
        if any(ids):
            raise InputError("chat conversations need text prompts (a chat turn's messages are "
                             "text): use prompt_format='text'")
        return _Chat
    if any(ids) and not all(ids):
        raise InputError("a conversation's turns are all token ids or all text, not both")
    return _TokenIds if all(ids) else _Text


async def _one_session(requests: Sequence[Request], send: Send, pattern: Sessions, s: int,
                       first: int, form: type, scheduled_s: float, deadline_s: float,
                       clock: Callable[[], float], stopped: Callable[[], bool],
                       records: list) -> None:
    """Session s, turn by turn; it ends early at a failed turn (there is no answer to carry)."""
    conversation = form()
    turns = pattern.turns_of(s)
    for t in range(turns):
        i = first + t
        request = conversation.turn(requests[i])
        record = await _safe_send(send, i, request, scheduled_s)
        record.session, record.turn = s, t + 1
        records[i] = record
        why = conversation.carry(request, record) if record.ok else None
        # carried on in the conversation (or of no use): the record keeps the counts
        record.output_token_ids = record.output_text = None
        if not record.ok:
            return
        if why is not None:
            _failed(record, why)
            return
        scheduled_s = (record.done_s or clock()) + pattern.think_time_s
        if t + 1 == turns or scheduled_s > deadline_s or stopped():
            return
        await _sleep_until(scheduled_s, clock)


async def run_sessions(requests: Sequence[Request], send: Send, pattern: Sessions, *,
                       chat: bool = False, clock: Callable[[], float] = time.perf_counter,
                       stopped: Callable[[], bool] = lambda: False,
                       **options) -> list[RequestRecord]:
    """Run the conversations `requests` make; the records of the turns sent, in request order.

    `chat`: send messages lists (/v1/chat/completions). The `options` are drive_sessions'.
    """
    form = _form(requests, chat)

    async def one(s: int, first: int, scheduled_s: float, deadline_s: float,
                  records: list) -> None:
        await _one_session(requests, send, pattern, s, first, form, scheduled_s, deadline_s,
                           clock, stopped, records)
    return await drive_sessions(requests, pattern, one, clock=clock, stopped=stopped, **options)


async def drive_sessions(requests: Sequence[Request], pattern: Sessions,
                         one_session: Callable[..., Awaitable[None]], *, seed: int = 0,
                         duration_s: float | None = None,
                         clock: Callable[[], float] = time.perf_counter,
                         start_s: float | None = None, only: Sequence[int] | None = None,
                         take_next: Callable[[], int] | None = None,
                         stopped: Callable[[], bool] = lambda: False) -> list[RequestRecord]:
    """Start each session as `pattern.start` says and run it with `one_session(s, first,
    scheduled_s, deadline_s, records)` (a conversation's, an agent's: client/agents.py), which
    puts each request's record at its index; the records of the requests sent, in order.

    `duration_s` bounds both session starts and later turns: nothing is sent after it. `only`
    and `take_next` are run_load's, counting sessions: a client worker's share of them.
    """
    firsts = pattern.firsts(len(requests))
    records: list[RequestRecord | None] = [None] * len(requests)
    start_s = clock() if start_s is None else start_s
    deadline_s = math.inf if duration_s is None else start_s + duration_s

    async def start_session(s: int, first: Request, scheduled_s: float) -> RequestRecord:
        await one_session(s, firsts[s], scheduled_s, deadline_s, records)
        return RequestRecord(index=s, expected_prompt_tokens=0, expected_output_tokens=0,
                             scheduled_s=scheduled_s)

    # One placeholder per session: run_load schedules the session starts.
    await pattern.start.run([requests[i] for i in firsts], start_session, seed=seed,
                            duration_s=duration_s, clock=clock, start_s=start_s, only=only,
                            take_next=take_next, stopped=stopped)
    return [r for r in records if r is not None]
