"""The history chart's time axis (reports/history_chart.py): ticks at whole hours within a day
or two, at midnights over longer spans, at most TICKS of them, each day's date on its first."""

from __future__ import annotations

from datetime import datetime, timezone

from pytest_llmperf.reports.history_chart import TICKS, date_ticks


def _at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


def _labels(first: str, last: str) -> list[str]:
    return [label for _, label in date_ticks(_at(first), _at(last))]


def test_nights_within_one_morning_tick_every_hour_with_the_date_first():
    assert _labels("2026-11-29T03:10", "2026-11-29T08:40") == [
        "2026-11-29 04:00", "05:00", "06:00", "07:00", "08:00"]


def test_a_span_across_midnight_names_the_new_day():
    assert _labels("2026-11-28T22:30", "2026-11-29T02:00") == [
        "2026-11-28 23:00", "2026-11-29", "01:00", "02:00"]


def test_a_day_and_a_half_ticks_every_few_hours_within_the_bound():
    labels = _labels("2026-11-28T00:00", "2026-11-29T12:00")
    assert labels == ["2026-11-28", "06:00", "12:00", "18:00", "2026-11-29", "06:00", "12:00"]
    assert len(labels) <= TICKS


def test_weeks_tick_at_midnights_every_few_days():
    assert _labels("2026-11-01T03:00", "2026-11-11T03:00") == [
        "2026-11-02", "2026-11-04", "2026-11-06", "2026-11-08", "2026-11-10"]
    assert len(_labels("2026-09-01T03:00", "2026-11-29T03:00")) <= TICKS


def test_one_run_is_one_label_and_a_short_span_its_two_ends():
    assert _labels("2026-11-29T03:10", "2026-11-29T03:10") == ["2026-11-29 03:10"]
    assert _labels("2026-11-29T03:10", "2026-11-29T03:40") == ["2026-11-29 03:10", "03:40"]
