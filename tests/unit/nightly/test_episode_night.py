"""Episodes after each night (nightly/episode_night.py) on a real store and the real webhook
receiver: eight nights of one test (unchanged 1-3, slowed 4-6, back 7-8) post exactly one
"opened" and one "resolved", a summary line per night where asked; a runner shape that stops
for longer than its interval posts a stale episode (the clock moved by the test)."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

import pytest

from pytest_llmperf.errors import InputError
from pytest_llmperf.history import location, record
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.nightly import episode_night
from tests.unit.history.builders import DOCUMENT
from tests.webhook_receiver import Receiver

TPOTS = [0.0100, 0.0101, 0.0099, 0.0125, 0.0126, 0.0124, 0.0100, 0.0101]


def document(night: int, tpot: float) -> dict:
    out = copy.deepcopy(DOCUMENT)
    out["datetime"] = f"2026-11-{night:02d}T03:00:00+00:00"
    result = out["llmperf"]["results"][0]
    result["gate"] = {"tolerance": 0.1, "metrics": ["tpot_s.p50"]}
    result["metrics"] = {"tpot_s.p50": {"value": tpot, "spread": 0.0001, "n": 3,
                                        "direction": "lower"}}
    return out


def when(night: int) -> datetime:
    return datetime(2026, 11, night, 4, tzinfo=timezone.utc)


@pytest.fixture
def store(tmp_path):
    opened = HistoryStore.open(location.resolve(str(tmp_path / "history.sqlite"), tmp_path))
    yield opened
    opened.close()


def test_eight_nights_post_one_opened_one_resolved_and_a_summary_each(store):
    with Receiver() as receiver:
        environ = {"LLMPERF_WEBHOOK_URL": receiver.url, "LLMPERF_EPISODES": "1",
                   "LLMPERF_NIGHT_SUMMARY": "1"}
        for night, tpot in enumerate(TPOTS, start=1):
            store.record(record.from_document(document(night, tpot), environ={}))
            assert episode_night.step_night(store, environ, when(night), f"night {night}") == []
    texts = [body["text"] for _, body in receiver.bodies]
    assert [t for t in texts if t.startswith("night ")] == [f"night {n}" for n in range(1, 9)]
    episodes = [t.split(":")[0] for t in texts if not t.startswith("night ")]
    assert episodes == ["opened", "resolved (passed)"]
    # A night's events come before its summary. The trend sees a change once two nights
    # hold it (history/changepoints.py): opened on night 5 (since run 4), resolved on night 8.
    opened = next(t for t in texts if t.startswith("opened"))
    assert texts.index(opened) == texts.index("night 5") - 1
    assert opened == ("opened: suites/test_cpu.py::test_a tpot_s.p50 +25.5% since run 4 "
                      "(2026-11-04, commit 1a2b3c4d5e), 2 nights")
    resolved = next(t for t in texts if t.startswith("resolved"))
    assert texts.index(resolved) == texts.index("night 8") - 1


def test_a_shape_that_stops_posts_one_stale_episode(store):
    store.record(record.from_document(document(1, 0.01), environ={}))
    with Receiver() as receiver:
        environ = {"LLMPERF_WEBHOOK_URL": receiver.url, "LLMPERF_STALE_HOURS": "30"}
        for hours in (24, 48, 72):  # the clock moves; no run after night 1
            assert episode_night.step_night(store, environ, when(1) + timedelta(hours=hours)) \
                == []
    (text,) = [body["text"] for _, body in receiver.bodies]
    assert text.startswith("stale: runner shape cpu-") and text.endswith(
        ": no run for 49 h (since 2026-11-01 03:00 UTC; interval 30 h)")


def test_a_malformed_interval_is_one_line(store):
    with pytest.raises(InputError) as bad:
        episode_night.step_night(store, {"LLMPERF_STALE_HOURS": "a day"}, when(1))
    assert str(bad.value) == ("LLMPERF_STALE_HOURS='a day': give the hours after which a runner "
                              "shape with no run is stale, e.g. 36")


def test_a_failed_test_opens_once_and_resolves_when_it_passes(store, tmp_path):
    failed = [("suites/test_cpu.py::test_b", "ENGINE DIED: exit status -9\nthe log says more")]
    with Receiver() as receiver:
        environ = {"LLMPERF_WEBHOOK_URL": receiver.url}
        for night, (red, passed) in enumerate([(failed, set()), (failed, set()),
                                               ([], {"suites/test_cpu.py::test_b"})], start=1):
            tests = episode_night.failure_signals(red, passed)
            assert episode_night.step_night(store, environ, when(night), tests=tests) == []
    assert [body["text"] for _, body in receiver.bodies] == [
        "opened: suites/test_cpu.py::test_b: ENGINE DIED: exit status -9",
        "resolved (passed): suites/test_cpu.py::test_b: passed"]


def test_passed_tests_are_read_from_junit(tmp_path):
    (tmp_path / "test_x.py").write_text("")
    junit = tmp_path / "junit.xml"
    junit.write_text('<testsuites><testsuite><testcase classname="test_x" name="test_ok"/>'
                     '<testcase classname="test_x" name="test_bad"><failure message="m"/>'
                     '</testcase><testcase classname="test_x" name="test_skip"><skipped/>'
                     '</testcase></testsuite></testsuites>')
    assert episode_night.passed_tests(junit, tmp_path) == {"test_x.py::test_ok"}
    assert episode_night.passed_tests(tmp_path / "none.xml", tmp_path) == set()
