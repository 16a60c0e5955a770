"""Multi-turn conversations: a per-session driver over the load generator.

A chat user sends a message, reads the answer, thinks, and sends the next message with the whole
conversation so far in front of it. What that does to a server (each turn's prompt is the last
turn's prompt plus the answer plus a new message, so a prefix cache can serve all but the new
part) only shows when the prompt really carries the answer *as the server generated it*: so each
turn keeps its generated token ids (`Request.keep_output`; vLLM streams them with
`return_token_ids`) and the next turn's prompt is built from them at run time.

Sessions start on their own load pattern (`Sessions.start`): `Concurrency(N)` keeps N sessions
going (a new one starts when one ends), `Rate`/`Ramp` start them at seeded arrival times, exactly
as the load generator sends single requests (loadgen.run_load drives the session starts). Inside
a session, turn t+1 is due `think_time_s` after turn t ended; that due time is its
`scheduled_s`, so its queue time is the client's own lag, as in an open loop.

The workload lays its requests out session-major: request s * turns + t is session s's turn t+1,
its prompt the *new* message only (token ids).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from pytest_llmperf.client.loadgen import (
    Concurrency,
    LoadPattern,
    Ramp,
    Rate,
    Send,
    _safe_send,
    _sleep_until,
    run_load,
)
from pytest_llmperf.errors import InputError
from pytest_llmperf.failures import CLIENT
from pytest_llmperf.numbers import is_real, is_whole
from pytest_llmperf.records import Request, RequestRecord

__all__ = ["Sessions", "run_sessions"]

NO_TOKEN_IDS = ("the server streamed no token ids, so the next turn cannot carry this answer "
                "(multi-turn conversations need vLLM's return_token_ids)")


@dataclass(frozen=True, kw_only=True)
class Sessions:
    """Conversations of `turns` turns each, started as `start` says, `think_time_s` between a
    turn's end and the next turn's send."""

    turns: int
    think_time_s: float = 0.0
    start: LoadPattern

    def __post_init__(self) -> None:
        if not is_whole(self.turns, 1):
            raise InputError(f"Sessions.turns must be an int >= 1, got {self.turns!r}")
        if not is_real(self.think_time_s, 0):
            raise InputError(
                f"Sessions.think_time_s must be a number >= 0, got {self.think_time_s!r}")
        if not isinstance(self.start, (Concurrency, Rate, Ramp)):
            raise InputError("Sessions.start must be Concurrency, Rate or Ramp, got "
                             f"{type(self.start).__name__}")

    @property
    def max_concurrency(self) -> None:
        """No slot waits: a turn's queue time is client lag only (loadgen.counts_slot_waits)."""
        return None

    def describe(self) -> dict[str, object]:
        return {"type": "Sessions", "turns": self.turns, "think_time_s": self.think_time_s,
                "start": {"type": type(self.start).__name__,
                          **{k: v for k, v in asdict(self.start).items() if v is not None}}}


def _no_ids(record: RequestRecord) -> RequestRecord:
    record.error, record.error_kind = NO_TOKEN_IDS, CLIENT
    return record


async def _one_session(requests: Sequence[Request], send: Send, pattern: Sessions, s: int,
                       scheduled_s: float, deadline_s: float, clock: Callable[[], float],
                       stopped: Callable[[], bool], records: list) -> None:
    """Session s, turn by turn; it ends early at a failed turn (there is no answer to carry)."""
    history: tuple[int, ...] = ()
    for t in range(pattern.turns):
        i = s * pattern.turns + t
        new = requests[i]
        prompt = history + new.prompt
        request = Request(prompt=prompt, prompt_tokens=len(prompt),
                          output_tokens=new.output_tokens, keep_output=True)
        record = await _safe_send(send, i, request, scheduled_s)
        record.session, record.turn = s, t + 1
        records[i] = record
        if not record.ok:
            return
        if not record.output_token_ids:
            records[i] = _no_ids(record)
            return
        history = prompt + tuple(record.output_token_ids)
        record.output_token_ids = None  # carried on in `history`; the record keeps the counts
        scheduled_s = (record.done_s or clock()) + pattern.think_time_s
        if t + 1 == pattern.turns or scheduled_s > deadline_s or stopped():
            return
        await _sleep_until(scheduled_s, clock)


async def run_sessions(requests: Sequence[Request], send: Send, pattern: Sessions, *,
                       seed: int = 0, duration_s: float | None = None,
                       clock: Callable[[], float] = time.perf_counter,
                       start_s: float | None = None,
                       stopped: Callable[[], bool] = lambda: False) -> list[RequestRecord]:
    """Run len(requests) // turns conversations; the records of the turns sent, in request order.

    `duration_s` bounds both session starts and later turns: nothing is sent after it.
    """
    if len(requests) % pattern.turns:
        raise InputError(f"{len(requests)} requests do not make whole conversations of "
                         f"{pattern.turns} turns")
    if not all(isinstance(r.prompt, tuple) for r in requests):
        raise InputError("conversation turns need token-id prompts (a turn's prompt is the "
                         "token ids of the conversation so far)")
    records: list[RequestRecord | None] = [None] * len(requests)
    start_s = clock() if start_s is None else start_s
    deadline_s = math.inf if duration_s is None else start_s + duration_s
    firsts = list(requests[:: pattern.turns])  # one placeholder per session for run_load

    async def start_session(s: int, first: Request, scheduled_s: float) -> RequestRecord:
        await _one_session(requests, send, pattern, s, scheduled_s, deadline_s, clock, stopped,
                           records)
        return RequestRecord(index=s, expected_prompt_tokens=0, expected_output_tokens=0,
                             scheduled_s=scheduled_s)

    await run_load(firsts, start_session, pattern.start, seed=seed, duration_s=duration_s,
                   clock=clock, start_s=start_s, stopped=stopped)
    return [r for r in records if r is not None]
