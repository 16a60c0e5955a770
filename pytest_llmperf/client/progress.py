"""How far a measurement has got, read from the client without touching its hot path: the state
both the stall watchdog (watchdog.py) and the live progress line (progressline.py) read.

The client keeps its requests in flight and counts the ones that ended (openai.py); a Snapshot is
taken from those every half second, never per chunk. With several client processes each worker
publishes its snapshot to a small shared board, and the parent reads the sum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Board", "Snapshot", "combine", "of_client"]


@dataclass(frozen=True)
class Snapshot:
    in_flight: int  # requests sent and not yet ended
    done: int  # requests ended (failed or not) since the measured part began
    tokens: int  # output tokens received since then (in flight: one per chunk)
    # The last sign of life: a chunk on any request in flight, a request that ended, or the
    # sending of the oldest request still in flight (a request gets the full stall timeout from
    # when it was sent, but newer arrivals do not hide an engine that stopped answering).
    # perf_counter seconds; -inf before anything was sent.
    last_progress_s: float


IDLE = Snapshot(0, 0, 0, -math.inf)


def of_client(client: Any) -> Snapshot:
    """The snapshot of one OpenAIStreamClient (its `in_flight`, `finished`, `finished_tokens`
    and `last_end_s`)."""
    last = client.last_end_s if client.last_end_s is not None else -math.inf
    oldest_sent = math.inf
    tokens = client.finished_tokens
    in_flight = list(client.in_flight.values())  # a copy: the loop may add to it meanwhile
    for record in in_flight:
        times = record.chunk_times_s
        if times:
            last = max(last, times[-1])
            tokens += len(times)
        if record.sent_s is not None:
            oldest_sent = min(oldest_sent, record.sent_s)
    if math.isfinite(oldest_sent):
        last = max(last, oldest_sent)
    return Snapshot(len(in_flight), client.finished, tokens, last)


def combine(parts: Sequence[Snapshot]) -> Snapshot:
    """Several clients as one: any one of them making progress is progress."""
    if not parts:
        return IDLE
    return Snapshot(sum(p.in_flight for p in parts), sum(p.done for p in parts),
                    sum(p.tokens for p in parts), max(p.last_progress_s for p in parts))


FIELDS = 4  # the numbers of one Snapshot on the board


class Board:
    """Snapshots of client worker processes in shared memory, and the parent's stop request.

    Built by the parent from a multiprocessing context; handed to each worker at its start.
    A worker writes only its own row; a torn read (one field newer than another) lasts half a
    second and only ever shows in the progress line."""

    def __init__(self, context: Any, workers: int) -> None:
        self._cells = context.RawArray("d", [0.0, 0.0, 0.0, -math.inf] * workers)
        self._stop = context.RawValue("b", 0)
        self.workers = workers

    def publish(self, worker: int, snapshot: Snapshot) -> None:
        base = worker * FIELDS
        self._cells[base:base + FIELDS] = [snapshot.in_flight, snapshot.done, snapshot.tokens,
                                           snapshot.last_progress_s]

    def read(self) -> Snapshot:
        cells = self._cells[:]
        return combine([Snapshot(int(cells[i]), int(cells[i + 1]), int(cells[i + 2]),
                                 cells[i + 3]) for i in range(0, len(cells), FIELDS)])

    def request_stop(self, interrupted: bool = False) -> None:
        """`interrupted`: by the parent's Interrupt (watchdog.py), not a stall."""
        self._stop.value = 2 if interrupted else 1

    def stop_requested(self) -> bool:
        return bool(self._stop.value)

    def interrupted(self) -> bool:
        return self._stop.value == 2
