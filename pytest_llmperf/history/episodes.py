"""Episodes, not posts: what a night tells a team is a change of state. A red signal (an open
regression, a runner shape gone quiet) opens an episode the first night it is seen; the next
red nights add to it without a word; it resolves once, when the signal is green again (the
series is back, the shape ran again) or acknowledged. Only opening and resolving are events.

Pure: the open episodes and tonight's signals in, what changed out (the store's side:
episode_book.py). A signal names what it is of by `key`; a key has at most one open episode.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from pytest_llmperf.errors import InputError

__all__ = ["ACKNOWLEDGED", "FAILED", "PASSED", "RAN_AGAIN", "REGRESSION", "STALE", "Episode",
           "Signal",
           "Step", "advance", "episode_key", "stale_interval", "stale_signals", "with_green"]

DEFAULT_STALE_HOURS = 36.0
REGRESSION, STALE, FAILED = "regression", "stale", "failed"  # FAILED: a test failed (its
# target missed, its engine died): open until the test passes again
PASSED, ACKNOWLEDGED, RAN_AGAIN = "passed", "acknowledged", "ran again"


def episode_key(kind: str, *parts: str) -> str:
    return hashlib.sha256("\0".join([kind, *parts]).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Signal:
    """Tonight's word on one thing: `red` (it is wrong), else green; `acknowledged`: red but
    someone took it (`llmperf ack`), which resolves its episode."""

    kind: str
    key: str
    line: str
    red: bool
    acknowledged: bool = False
    test_id: str | None = None
    metric: str | None = None
    series: str | None = None
    shape: str | None = None


@dataclass(frozen=True)
class Episode:
    kind: str
    key: str
    line: str
    opened_at: datetime
    last_seen_at: datetime
    nights: int = 1
    resolved_at: datetime | None = None
    resolution: str | None = None
    test_id: str | None = None
    metric: str | None = None
    series: str | None = None
    shape: str | None = None
    id: int | None = None  # the store's; None before it is stored


@dataclass
class Step:
    """What one night changed: episodes opened, still open (seen again), resolved."""

    opened: list[Episode] = field(default_factory=list)
    continued: list[Episode] = field(default_factory=list)
    resolved: list[Episode] = field(default_factory=list)


def _opened(signal: Signal, now: datetime) -> Episode:
    return Episode(signal.kind, signal.key, signal.line, now, now, 1,
                   test_id=signal.test_id, metric=signal.metric, series=signal.series,
                   shape=signal.shape)


def advance(open_episodes: Iterable[Episode], signals: Iterable[Signal], now: datetime
            ) -> Step:
    """Tonight's step. An open episode with no signal tonight (its test did not run) stays open
    and unchanged; a red signal of an acknowledged thing opens nothing."""
    by_key: Mapping[str, Episode] = {episode.key: episode for episode in open_episodes}
    step = Step()
    for signal in signals:
        episode = by_key.get(signal.key)
        if episode is None:
            if signal.red and not signal.acknowledged:
                step.opened.append(_opened(signal, now))
        elif signal.red and not signal.acknowledged:
            step.continued.append(replace(episode, last_seen_at=now, nights=episode.nights + 1,
                                          line=signal.line))
        else:
            why = ACKNOWLEDGED if signal.acknowledged else \
                (RAN_AGAIN if signal.kind == STALE else PASSED)
            step.resolved.append(replace(episode, resolved_at=now, resolution=why,
                                         line=signal.line))
    return step


def stale_interval(text: str, name: str) -> timedelta:
    """The interval `text` gives in hours (empty: DEFAULT_STALE_HOURS); InputError naming `name`
    (the option or variable) where it is no positive number."""
    try:
        hours = float(text) if text.strip() else DEFAULT_STALE_HOURS
    except ValueError:
        hours = -1.0
    if not 0 < hours < float("inf"):
        raise InputError(f"{name}={text!r}: give the hours after which a runner shape with no "
                         f"run is stale, e.g. {DEFAULT_STALE_HOURS:g}")
    return timedelta(hours=hours)


def stale_signals(last_runs: Mapping[str, datetime], interval: timedelta, now: datetime
                  ) -> list[Signal]:
    """A signal per runner shape: red where its newest run is older than `interval`."""
    found = []
    for shape, last in sorted(last_runs.items()):
        age = now - last
        hours = age.total_seconds() / 3600
        red = age > interval
        line = (f"runner shape {shape}: no run for {hours:.0f} h (since {last:%Y-%m-%d %H:%M} "
                f"UTC; interval {interval.total_seconds() / 3600:g} h)" if red else
                f"runner shape {shape}: ran again at {last:%Y-%m-%d %H:%M} UTC")
        found.append(Signal(STALE, episode_key(STALE, shape), line, red, shape=shape))
    return found


def with_green(open_episodes: Iterable[Episode], signals: list[Signal], kind: str
               ) -> list[Signal]:
    """`signals`, and a green one for each open episode of `kind` that tonight has no signal
    of: a regression the trend no longer sees (the series came back) resolves."""
    seen = {signal.key for signal in signals}
    return signals + [Signal(kind, e.key, e.line, red=False, test_id=e.test_id,
                             metric=e.metric, series=e.series, shape=e.shape)
                      for e in open_episodes if e.kind == kind and e.key not in seen]
