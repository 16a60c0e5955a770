"""Load patterns: when each request of a run is due, as frozen, seeded data.

Each pattern owns its timing (its arrival offsets, or none for a closed loop), its limit (a
concurrency cap), how it is split between client workers, how it is run, and how it is labelled
and recorded; the load generator (loadgen.py), the client workers, the measurement and the
workloads ask it rather than test its class. A new pattern is one class here (or a module of its
own that subclasses LoadPattern) and its tests: subclassing registers its type tag, which run
files record (`pattern_type`). Arrival processes follow `vllm bench serve` (gamma
inter-arrival times with shape = burstiness, rate ramps by request index) so that numbers can be
compared. Where we differ, on purpose:
- the first request goes at offset 0 (vLLM sleeps one random gap first, which only adds idle time);
- a fixed-rate schedule is not rescaled to last exactly n/rate (vLLM does since 2025): a seeded
  schedule is already repeatable, and rescaling makes the gaps no longer independent.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Literal

import numpy as np

from pytest_llmperf.client.loadgen import Send, run_load
from pytest_llmperf.errors import InputError
from pytest_llmperf.numbers import is_real, is_whole
from pytest_llmperf.records import Request, RequestRecord
from pytest_llmperf.registry import Registry

__all__ = [
    "Concurrency",
    "LoadPattern",
    "Ramp",
    "Rate",
    "Trace",
    "Share",
    "counts_slot_waits",
    "PATTERNS",
    "pattern_type",
    "share",
]

# One client worker's part of a pattern: the pattern it runs (its share of the cap), and for an
# open loop the arrivals it sends (None: a closed loop's shared counter hands them out).
Share = tuple["LoadPattern", tuple[int, ...] | None]

# Every load pattern class by name, as a run file's "type" names it; a subclass joins on definition.
PATTERNS: Registry[type[LoadPattern]] = Registry("load pattern", lambda cls: cls.__name__)


def pattern_type(name: str) -> type[LoadPattern] | None:
    """The pattern class a run file's `"type"` names ("Rate"), None for one this process does
    not know."""
    return PATTERNS.get(name)


def share(total: int, index: int, parts: int) -> int:
    """Part `index` of `total` split as evenly as it goes into `parts`."""
    return total // parts + (1 if index < total % parts else 0)


def _check_rps(owner: str, name: str, value: object, allow_inf: bool) -> None:
    hint = " (math.inf sends everything at once)" if allow_inf else ""
    ok = is_real(value, above=0, finite=not allow_inf)
    if not ok:
        kind = "a number > 0" if allow_inf else "a finite number > 0"
        raise InputError(f"{owner}.{name} must be {kind}{hint}, got {value!r}")


def _check_cap(owner: str, value: object, optional: bool) -> None:
    if optional and value is None:
        return
    if not is_whole(value, 1):
        extra = " or None for no cap" if optional else ""
        raise InputError(f"{owner}.max_concurrency must be an int >= 1{extra}, got {value!r}")


class LoadPattern(ABC):
    """What every load pattern answers, so that its callers ask it instead of testing its class
    (GuideLLM's scheduling strategies own their timing the same way: src/guidellm/scheduler/
    strategies.py in https://github.com/vllm-project/guidellm).

    `open_loop`: requests go at their own arrival times, whether or not earlier ones finished;
    a closed loop (Concurrency) sends the next one when a slot frees and has no schedule.
    `replay`: the arrivals are given, not drawn (a recorded trace): such a pattern holds no more
    arrivals than it recorded, and a capacity search speeds it up rather than giving it a rate.
    """

    open_loop: ClassVar[bool] = True
    replay: ClassVar[bool] = False
    # It can say when conversations start (client/sessions.py): one drawn arrival per session.
    starts_sessions: ClassVar[bool] = True
    max_concurrency: int | None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        PATTERNS.register(cls)

    def arrival_offsets(self, n: int, seed: int) -> np.ndarray:
        """n non-decreasing send offsets in seconds from the start; the first is 0."""
        if n < 0:
            raise InputError(f"n must be >= 0, got {n}")
        return np.zeros(n) if n < 2 else self._offsets(n, seed)

    @abstractmethod
    def _offsets(self, n: int, seed: int) -> np.ndarray:
        """arrival_offsets for n >= 2."""

    @abstractmethod
    def label(self) -> str:
        """A few words for tables and test names ("4 req/s burst 0.5 cap 8")."""

    def split(self, n_requests: int, parts: int) -> list[Share]:
        """This pattern's load split between at most `parts` client workers (fewer when it has
        fewer slots than that: a worker with no slot would only cost a process): the cap is
        shared out, an open loop's arrivals dealt round-robin (client/workers.py)."""
        cap = self.max_concurrency
        active = max(1, min(parts, cap or parts, n_requests))
        return [(self if cap is None else replace(self, max_concurrency=share(cap, k, active)),
                 tuple(range(k, n_requests, active)) if self.open_loop else None)
                for k in range(active)]

    async def run(self, requests: Sequence[Request], send: Send, *, chat: bool = False,
                  seed: int = 0, duration_s: float | None = None,
                  clock: Callable[[], float] = time.perf_counter, start_s: float | None = None,
                  only: Sequence[int] | None = None, take_next: Callable[[], int] | None = None,
                  stopped: Callable[[], bool] = lambda: False) -> list[RequestRecord]:
        """Send `requests` as this pattern says (loadgen.run_load's arguments; `chat` is for a
        pattern whose requests carry earlier answers: client/sessions.py)."""
        return await run_load(requests, send, self, seed=seed, duration_s=duration_s,
                              clock=clock, start_s=start_s, only=only, take_next=take_next,
                              stopped=stopped)

    def settings(self) -> dict[str, object]:
        """The fields that are set (not None), as given."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}

    def to_dict(self) -> dict[str, object]:
        """What run files, baselines and identities record: the type and the fields set, an
        infinite number as "inf" (TOML and JSON readers differ on infinities)."""
        return {"type": type(self).__name__,
                **{name: "inf" if isinstance(value, float) and math.isinf(value) else value
                   for name, value in self.settings().items()}}

    @classmethod
    def from_dict(cls, recorded: Mapping[str, object]) -> LoadPattern:
        """The pattern `to_dict` recorded ("inf" read back as math.inf)."""
        values = {name: math.inf if value == "inf" else value
                  for name, value in recorded.items() if name != "type"}
        return cls(**values)

    def with_rate(self, requests_per_s: float) -> Rate:
        """This pattern at `requests_per_s` (a rate sweep's point): plain Poisson, unless the
        pattern says what of itself a rate keeps."""
        return Rate(requests_per_s=requests_per_s)

    def _cap_label(self) -> str:
        return f" cap {self.max_concurrency}" if self.max_concurrency else ""


def _summed(gaps: np.ndarray) -> np.ndarray:
    """Offsets from the gaps between arrivals: the first at 0."""
    offsets = np.zeros(len(gaps) + 1)
    offsets[1:] = np.cumsum(gaps)
    return offsets


@dataclass(frozen=True, kw_only=True)
class Concurrency(LoadPattern):
    """Closed loop: `max_concurrency` requests in flight, a new one as soon as one finishes."""

    open_loop: ClassVar[bool] = False
    max_concurrency: int

    def __post_init__(self) -> None:
        _check_cap("Concurrency", self.max_concurrency, optional=False)

    def _offsets(self, n: int, seed: int) -> np.ndarray:
        return np.zeros(n)  # no schedule: each request goes when a slot frees

    def label(self) -> str:
        return f"concurrency {self.max_concurrency}"


@dataclass(frozen=True, kw_only=True)
class Rate(LoadPattern):
    """Open loop: gamma inter-arrival times, shape `burstiness`, mean 1/`requests_per_s`.

    burstiness 1.0 is Poisson; < 1 burstier, > 1 more regular, math.inf evenly spaced.
    """

    requests_per_s: float
    burstiness: float = 1.0
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        _check_rps("Rate", "requests_per_s", self.requests_per_s, allow_inf=True)
        b = self.burstiness
        if not is_real(b, above=0):
            hint = "(1.0 is Poisson, lower is burstier)"
            raise InputError(f"Rate.burstiness must be a number > 0 {hint}, got {b!r}")
        _check_cap("Rate", self.max_concurrency, optional=True)

    def _offsets(self, n: int, seed: int) -> np.ndarray:
        if math.isinf(self.requests_per_s):
            return np.zeros(n)
        if math.isinf(self.burstiness):
            return _summed(np.full(n - 1, 1.0 / self.requests_per_s))
        shape = self.burstiness
        rng = np.random.default_rng(seed)
        return _summed(rng.gamma(shape, 1.0 / (self.requests_per_s * shape), size=n - 1))

    def label(self) -> str:
        rate = "inf" if math.isinf(self.requests_per_s) else f"{self.requests_per_s:g}"
        burst = f" burst {self.burstiness:g}" if self.burstiness != 1.0 else ""
        return f"{rate} req/s{burst}{self._cap_label()}"

    def with_rate(self, requests_per_s: float) -> Rate:
        """Only the rate changes: the burstiness and the cap stay."""
        return replace(self, requests_per_s=requests_per_s)


@dataclass(frozen=True, kw_only=True)
class Ramp(LoadPattern):
    """Open loop: Poisson arrivals, the rate going from start_rps to end_rps by request index."""

    start_rps: float
    end_rps: float
    strategy: Literal["linear", "exponential"] = "linear"
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        _check_rps("Ramp", "start_rps", self.start_rps, allow_inf=False)
        _check_rps("Ramp", "end_rps", self.end_rps, allow_inf=False)
        if self.strategy not in ("linear", "exponential"):
            raise InputError(
                f"Ramp.strategy must be 'linear' or 'exponential', got {self.strategy!r}"
            )
        _check_cap("Ramp", self.max_concurrency, optional=True)

    def rates(self, n: int) -> np.ndarray:
        """The rate in force at each of n requests (progress i/(n-1), as vLLM)."""
        progress = np.arange(n) / max(n - 1, 1)
        if self.strategy == "linear":
            return self.start_rps + (self.end_rps - self.start_rps) * progress
        return self.start_rps * (self.end_rps / self.start_rps) ** progress

    def _offsets(self, n: int, seed: int) -> np.ndarray:
        # The gap before request i is drawn at request i's rate.
        return _summed(np.random.default_rng(seed).exponential(1.0 / self.rates(n)[1:]))

    def label(self) -> str:
        return (f"ramp {self.start_rps:g}->{self.end_rps:g} req/s {self.strategy}"
                f"{self._cap_label()}")

    def with_rate(self, requests_per_s: float) -> Rate:
        """A Ramp is Poisson: its cap stays."""
        return Rate(requests_per_s=requests_per_s, max_concurrency=self.max_concurrency)


@dataclass(frozen=True, kw_only=True)
class Trace(LoadPattern):
    """Open loop: each request at its own offset (seconds from the first), as a recorded trace
    gives them (workloads/traces.py): a replay at the trace's own pace, or scaled by its
    speedup before it gets here."""

    replay: ClassVar[bool] = True
    starts_sessions: ClassVar[bool] = False  # one recorded arrival per request, not per session
    offsets_s: tuple[float, ...]
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        offsets = self.offsets_s
        if not offsets or offsets[0] != 0 or any(b < a for a, b in zip(offsets, offsets[1:])):
            raise InputError("Trace.offsets_s must be non-decreasing seconds starting at 0, "
                             f"got {offsets[:5]!r}...")
        _check_cap("Trace", self.max_concurrency, optional=True)

    def _offsets(self, n: int, seed: int) -> np.ndarray:
        if n > len(self.offsets_s):
            raise InputError(f"a Trace of {len(self.offsets_s)} arrivals cannot schedule {n}")
        return np.asarray(self.offsets_s[:n], dtype=float)

    def label(self) -> str:
        return (f"trace {len(self.offsets_s)} req over {self.offsets_s[-1]:g} s"
                f"{self._cap_label()}")

    def to_dict(self) -> dict[str, object]:
        """What a run file records: the schedule's shape, not every offset."""
        return {"type": "Trace", "requests": len(self.offsets_s),
                "span_s": round(self.offsets_s[-1], 6), "max_concurrency": self.max_concurrency}

    @classmethod
    def from_dict(cls, recorded: Mapping[str, object]) -> LoadPattern:
        raise InputError("a run file records a Trace's shape, not its arrivals: replay the "
                         "trace file again (Workload.trace)")


def counts_slot_waits(pattern: LoadPattern) -> bool:
    """True for an open loop under a concurrency cap: there a request waiting for a free slot
    keeps its arrival time, so its queue time holds the engine's backlog, not only client lag."""
    return pattern.open_loop and pattern.max_concurrency is not None
