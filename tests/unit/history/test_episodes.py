"""Episodes (history/episodes.py) with a fake clock: a regression opens once, red nights add to
it silently, it resolves once on a pass or an acknowledgement; a runner shape with no run for
longer than its interval is a stale episode of its own."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pytest_llmperf.history.episodes import (
    ACKNOWLEDGED,
    PASSED,
    RAN_AGAIN,
    REGRESSION,
    STALE,
    Signal,
    advance,
    episode_key,
    stale_signals,
    with_green,
)

T0 = datetime(2026, 11, 1, 3, tzinfo=timezone.utc)
KEY = episode_key(REGRESSION, "suites/test_cpu.py::test_a", "tpot_s.p50", "abc")


def red(line: str = "tpot_s.p50 +25%", acknowledged: bool = False) -> Signal:
    return Signal(REGRESSION, KEY, line, red=True, acknowledged=acknowledged,
                  test_id="suites/test_cpu.py::test_a", metric="tpot_s.p50", series="abc")


def nights(reds: list[bool]) -> list[tuple[str, int]]:
    """Run the nights; the events each night made: (event, night number)."""
    open_, events = [], []
    for night, is_red in enumerate(reds, start=1):
        signals = [red()] if is_red else []
        step = advance(open_, with_green(open_, signals, REGRESSION), T0 + timedelta(days=night))
        events += [("opened", night)] * len(step.opened) + \
            [("resolved", night)] * len(step.resolved)
        open_ = step.opened + step.continued
    return events


def test_eight_nights_open_once_and_resolve_once():
    assert nights([False, False, False, True, True, True, False, False]) == [
        ("opened", 4), ("resolved", 7)]


def test_red_nights_add_to_the_episode_without_an_event():
    first = advance([], [red()], T0).opened[0]
    step = advance([first], [red("tpot_s.p50 +26%")], T0 + timedelta(days=1))
    assert (step.opened, step.resolved) == ([], [])
    (again,) = step.continued
    assert (again.nights, again.opened_at, again.last_seen_at, again.line) == (
        2, T0, T0 + timedelta(days=1), "tpot_s.p50 +26%")


def test_an_acknowledgement_resolves_and_an_acknowledged_regression_opens_nothing():
    first = advance([], [red()], T0).opened[0]
    (resolved,) = advance([first], [red(acknowledged=True)], T0 + timedelta(days=1)).resolved
    assert (resolved.resolution, resolved.resolved_at) == (ACKNOWLEDGED, T0 + timedelta(days=1))
    assert advance([], [red(acknowledged=True)], T0).opened == []


def test_a_test_that_did_not_run_leaves_its_episode_open():
    first = advance([], [red()], T0).opened[0]
    step = advance([first], [], T0 + timedelta(days=1))
    assert (step.opened, step.continued, step.resolved) == ([], [], [])


def test_a_green_signal_resolves_as_passed():
    first = advance([], [red()], T0).opened[0]
    (resolved,) = advance([first], with_green([first], [], REGRESSION), T0).resolved
    assert resolved.resolution == PASSED


def test_a_shape_quiet_longer_than_its_interval_is_stale_until_it_runs_again():
    day = timedelta(hours=24)
    last = {"h100-aa": T0, "h200-bb": T0 + timedelta(hours=40)}
    now = T0 + timedelta(hours=48)
    signals = stale_signals(last, day + timedelta(hours=6), now)
    assert [(s.shape, s.red) for s in signals] == [("h100-aa", True), ("h200-bb", False)]
    assert signals[0].line == ("runner shape h100-aa: no run for 48 h (since 2026-11-01 03:00 "
                               "UTC; interval 30 h)")
    (stale,) = advance([], signals, now).opened
    assert (stale.kind, stale.shape) == (STALE, "h100-aa")
    later = now + day
    again = stale_signals({"h100-aa": later}, day, later)
    (resolved,) = advance([stale], again, later).resolved
    assert (resolved.resolution, resolved.line) == (
        RAN_AGAIN, "runner shape h100-aa: ran again at 2026-11-04 03:00 UTC")
