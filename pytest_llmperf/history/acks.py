"""Acknowledged regressions: a change for the worse the team has seen and accepts, for a while.

The trend gate (trend.py) keeps failing a test whose metric changed for the worse and stays at
the worse level, every night, until someone acts: fixes it, or acknowledges it with

    llmperf ack TEST --metric NAME --reason TEXT [--until DATE] [--shape FAMILY]

kept in the results store (schema.acks), so every runner that shares the store sees it. It is
keyed by the series it silences: the test, the metric and the runner shape (the store's hardware
family, identity.family: an H100 change acknowledged leaves the H200 series of the same test
red); a row from before shapes were kept (shape None) covers every shape. An
acknowledgement records who (git's user.name, else $USER), when and why, and expires (--until,
else DEFAULT_DAYS after it was made): expired, the test is red again. It covers the changes whose
first run came before it; a later change for the worse of the same metric is a new regression.
The baseline gate reads them too (acked_baseline.py): a night slower than the committed table
passes while an acknowledgement holds and the metric stays at the level acknowledged.

`llmperf accept` records the other answer, "this is the new normal": an Ack of kind ACCEPT that
never expires. The trend gate passes the change it covers for good, and the baseline gate judges
that metric against the level accepted (the median and spread of the series' runs since its
last change, up to the accept) instead of the table, until the table is updated through its pull
request (`--llmperf-update-baselines --llmperf-from-history N` writes the same level).
Pure but for who_am_i (one git call).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone

__all__ = ["ACCEPT", "ACK", "DEFAULT_DAYS", "FOREVER", "Ack", "covering", "expired_for",
           "parse_until", "who_am_i"]

# Two weeks: long enough to ship a fix or update the baseline, short enough that an accepted
# regression comes back to someone's attention if nothing was done.
DEFAULT_DAYS = 14
GIT_TIMEOUT_S = 5
ACK, ACCEPT = "ack", "accept"
# An accepted change's `until`: it does not expire (the level it accepted is the normal one).
FOREVER = datetime(9999, 12, 31, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Ack:
    test_id: str
    metric: str
    reason: str
    who: str
    recorded_at: datetime
    until: datetime
    shape: str | None = None  # the series' family (identity.family); None: every shape
    kind: str = ACK  # ACK, or ACCEPT: the new level is the normal one, for good

    @property
    def accepted(self) -> bool:
        return self.kind == ACCEPT

    def active(self, now: datetime) -> bool:
        return now < self.until

    def silences(self, metric: str, shape: str | None) -> bool:
        """Is it of `metric` on runner shape `shape` (None: any)?"""
        return self.metric == metric and (None in (self.shape, shape) or self.shape == shape)

    def covers(self, change_at: datetime | None) -> bool:
        """Was it made after the change's first run (None: this run, newer than any ack)?"""
        return change_at is not None and change_at <= self.recorded_at

    def line(self) -> str:
        if self.accepted:
            return (f"accepted as the new level by {self.who} on "
                    f"{self.recorded_at.date().isoformat()}: {self.reason}")
        # An --until day is kept as the end of that day: show the day itself.
        last = (self.until - timedelta(microseconds=1)).date().isoformat()
        return (f"acknowledged by {self.who} on {self.recorded_at.date().isoformat()} until "
                f"{last}: {self.reason}")


def covering(acks: Iterable[Ack], metric: str, change_at: datetime | None,
             now: datetime, shape: str | None = None) -> Ack | None:
    """The newest active acknowledgement of `metric` on `shape` made after the change; None if
    none."""
    found = [ack for ack in acks if ack.silences(metric, shape) and ack.active(now)
             and ack.covers(change_at)]
    return max(found, key=lambda ack: ack.recorded_at, default=None)


def expired_for(acks: Iterable[Ack], metric: str, change_at: datetime | None,
                now: datetime, shape: str | None = None) -> Ack | None:
    """The newest acknowledgement of the change that has expired, for the failure to name."""
    found = [ack for ack in acks if ack.silences(metric, shape) and not ack.active(now)
             and ack.covers(change_at)]
    return max(found, key=lambda ack: ack.recorded_at, default=None)


def parse_until(text: str | None, now: datetime) -> datetime:
    """The end (UTC) of the day `text` (YYYY-MM-DD) names, or DEFAULT_DAYS from `now`;
    ValueError (one line) for a malformed or past date."""
    if text is None:
        return now + timedelta(days=DEFAULT_DAYS)
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--until {text!r}: give a date as YYYY-MM-DD, e.g. "
                         f"{(now + timedelta(days=DEFAULT_DAYS)).date().isoformat()}") from None
    end = datetime.combine(day + timedelta(days=1), time(), tzinfo=timezone.utc)
    if end <= now:
        raise ValueError(f"--until {text} is already past (today is "
                         f"{now.date().isoformat()}, UTC); give a later date")
    return end


def who_am_i(environ: Mapping[str, str] = os.environ) -> str:
    """git's user.name, else $USER, else "unknown"."""
    try:
        done = subprocess.run(["git", "config", "user.name"], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False)
        name = done.stdout.strip() if done.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        name = ""
    return name or environ.get("USER") or "unknown"
