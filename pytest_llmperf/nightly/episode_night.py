"""Episodes after a night (`llmperf nightly` with LLMPERF_EPISODES=1): the store's open and
acknowledged regressions (reports/regressions.py), the night's failed and passed tests (a missed
target, a dead engine; a test the trend already speaks for is its regression's episode) and the
runner shapes' last runs become signals, the episodes advance (history/episodes.py), and their
messages go through the store's outbox to each configured sender (history/episode_book.py).
The webhook then hears of an episode when it opens and when it resolves, not every red night.

    LLMPERF_EPISODES=1        episodes instead of each night's failures on the webhook
    LLMPERF_STALE_HOURS=36    a runner shape with no run for longer is a stale episode
    LLMPERF_NIGHT_SUMMARY=1   one line per night, green nights too

Channels (nightly/senders.py): `webhook` ($LLMPERF_WEBHOOK_URL, nightly/webhook.py), `email`
($LLMPERF_EMAIL_TO, nightly/email_sender.py), `github` (a commit status where GITHUB_TOKEN,
GITHUB_REPOSITORY and GITHUB_SHA are set, nightly/github_status.py).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from pytest_llmperf.errors import InputError
from pytest_llmperf.history import episode_book as book
from pytest_llmperf.history import location
from pytest_llmperf.history.episodes import (
    FAILED,
    REGRESSION,
    Signal,
    advance,
    episode_key,
    stale_interval,
    stale_signals,
    with_green,
)
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.nightly import outcomes as oc
from pytest_llmperf.nightly import senders
from pytest_llmperf.reports.regressions import Regression, regressions

__all__ = ["ENV_ON", "ENV_STALE", "ENV_SUMMARY", "after_night", "enabled", "failure_signals",
           "passed_tests", "signals_from", "step_night"]

ENV_ON, ENV_STALE, ENV_SUMMARY = "LLMPERF_EPISODES", "LLMPERF_STALE_HOURS", "LLMPERF_NIGHT_SUMMARY"
ON = ("1", "on", "yes", "true")


def enabled(environ: Mapping[str, str]) -> bool:
    return environ.get(ENV_ON, "").strip().lower() in ON


def signals_from(found: list[Regression]) -> list[Signal]:
    """A red signal per open regression, an acknowledged one per acknowledged regression."""
    return [Signal(REGRESSION, episode_key(REGRESSION, r.test_id, r.metric, r.series),
                   r.line.removeprefix("open: "),
                   red=True, acknowledged=r.ack is not None, test_id=r.test_id,
                   metric=r.metric, series=r.series, shape=r.at.family or None)
            for r in found]


def passed_tests(junit: Path, rootdir: Path) -> set[str]:
    """The tests pytest's JUnit XML says passed (none when there is no readable file)."""
    try:
        cases = ET.parse(junit).getroot().iter("testcase")
    except (OSError, ET.ParseError):
        return set()
    return {oc.node_id(case.get("classname", ""), case.get("name", ""), rootdir)
            for case in cases if not any(case.find(tag) is not None
                                         for tag in ("failure", "error", "skipped"))}


def failure_signals(failed: Sequence[tuple[str, str]], passed: set[str]) -> list[Signal]:
    """A red signal per failed test (a missed target, a dead engine), a green one per passed."""
    red = [Signal(FAILED, episode_key(FAILED, test), oc.failure_lines([(test, message)])[0],
                  red=True, test_id=test) for test, message in failed]
    return red + [Signal(FAILED, episode_key(FAILED, test), f"{test}: passed", red=False,
                         test_id=test) for test in sorted(passed)]


def step_night(store: HistoryStore, environ: Mapping[str, str], now: datetime,
               summary: str | None = None, tests: Sequence[Signal] = ()) -> list[str]:
    """Advance the episodes (`tests`: failure_signals of tonight's tests), queue their
    messages, deliver; the lines of what failed."""
    interval = stale_interval(environ.get(ENV_STALE, ""), ENV_STALE)
    open_ = book.open_episodes(store)
    signals = with_green(open_, signals_from(regressions(store, now)), REGRESSION)
    trended = {signal.test_id for signal in signals if signal.red}
    signals += [signal for signal in tests if signal.test_id not in trended]  # one episode
    signals += stale_signals(book.last_runs(store), interval, now)
    sending = senders.configured(environ)
    wanted = summary if environ.get(ENV_SUMMARY, "").strip().lower() in ON else None
    book.record_step(store, advance(open_, signals, now), sending, now, wanted)
    return book.deliver(store, sending, now)


def after_night(store: str, environ: Mapping[str, str], summary: str, found: oc.Outcomes,
                junit: Path, now: datetime | None = None) -> list[str]:
    """step_night on the store `store` (as --store gives it) with the night's outcomes and
    JUnit XML; a store problem is one line."""
    tests = failure_signals(found.failed, passed_tests(junit, Path.cwd()))
    try:
        opened = HistoryStore.open(location.resolve(store, Path.cwd()), check_write=False)
        try:
            return step_night(opened, environ, now or datetime.now(timezone.utc), summary,
                              tests)
        finally:
            opened.close()
    except InputError as exc:  # the store (HistoryError), or LLMPERF_STALE_HOURS
        return [f"episodes not advanced: {exc}"]
