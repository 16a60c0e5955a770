"""A regression stays red until someone acts, on SQLite and a real PostgreSQL server: ten nights
of one test into one store (the measurements injected: history_suite.py's conftest), TPOT
25% slower from night 5; the trend gate fails every night from its detection through night 10,
passes after `llmperf ack`, and fails again once the acknowledgement has expired (written
expired here, not waited for). And a night on another host names both hosts."""

from __future__ import annotations

import platform
from datetime import datetime, timezone

import pytest

from pytest_llmperf import cli
from pytest_llmperf.history import location
from pytest_llmperf.history.acks import Ack
from pytest_llmperf.history.store import HistoryStore
from tests.plugin.history_suite import CONFTEST, NOISE, SUITE, run
from tests.plugin.lines import assert_lines

TEST = "test_suite.py::test_a"  # a unique part of the id the store has
REGRESSED = ("tpot_s.p50", "tpot_s.p90", "e2el_s.p50", "output_throughput_tok_s")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, pytester) -> str:
    # Inside the suite's folder: a path argument outside it would move pytest's rootdir.
    if request.param == "sqlite":
        return str(pytester.path / "nights.sqlite")
    return request.getfixturevalue("postgres_db")


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def night(suite, monkeypatch, url: str, tpot_ms: float, *args: str):
    return run(suite, monkeypatch, tpot_ms / 1000, "--llmperf-history", url, "--llmperf-trend",
               *args)


def test_a_slowdown_stays_red_until_acknowledged_and_again_once_expired(
        suite, monkeypatch, store_url, capsys):
    outcomes = []
    for number in range(1, 11):
        tpot = 10.0 * NOISE[number] * (1.25 if number >= 5 else 1.0)
        outcomes.append(night(suite, monkeypatch, store_url, tpot).parseoutcomes())
    red = [number for number, outcome in enumerate(outcomes, 1) if outcome.get("failed")]
    assert red == [6, 7, 8, 9, 10]  # found at night 6 (two runs of a level), never green again

    capsys.readouterr()  # the nights' output
    for metric in REGRESSED:  # each metric the slowdown moved past its band
        assert cli.main(["ack", TEST, "--metric", metric, "--reason", "vLLM 0.33's new "
                         "scheduler; fix tracked upstream", "--history", store_url]) == 0
        said = capsys.readouterr().out
        assert said.startswith("llmperf: ") and f"{TEST} {metric}: acknowledged by " in said
    green = night(suite, monkeypatch, store_url, 12.5, "-v")
    green.assert_outcomes(passed=1)
    assert_lines(green, "test_suite.py::test_a: tpot_s.p50 changed for the worse at run 5 *; "
                        "acknowledged by * until *: vLLM 0.33's new scheduler; fix tracked "
                        "upstream")

    capsys.readouterr()
    assert cli.main(["history", "--history", store_url]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"acknowledged: {TEST} tpot_s.p50 +2") for line in listed)


def test_an_expired_acknowledgement_is_red_again(suite, monkeypatch):
    url = str(suite.path / "nights.sqlite")
    for number in range(1, 8):
        night(suite, monkeypatch, url, 10.0 * NOISE[number] * (1.25 if number >= 5 else 1.0))
    store = HistoryStore.open(location.resolve(url, suite.path))
    try:
        [(test_id, _)] = store.test_ids()
        made = datetime.now(timezone.utc)  # after every night so far; expired by the next
        for metric in REGRESSED:  # expired now
            store.record_ack(Ack(test_id, metric, "known", "ci", made, made))
    finally:
        store.close()
    red = night(suite, monkeypatch, url, 12.5)
    red.assert_outcomes(failed=1)
    assert_lines(red, "tpot_s.p50 changed for the worse at run 5 *; expired: acknowledged by "
                      "ci on * until *: known; see: llmperf history *")
    assert cli.main(["history", "--history", url]) == 0


def test_a_night_on_another_host_names_both_hosts(suite, monkeypatch):
    url = str(suite.path / "nights.sqlite")
    monkeypatch.setattr(platform, "node", lambda: "gpu-3")
    for factor in NOISE[:6]:
        night(suite, monkeypatch, url, 10.0 * factor).assert_outcomes(passed=1)
    monkeypatch.setattr(platform, "node", lambda: "gpu-7")  # a slower node of the same shape
    night(suite, monkeypatch, url, 12.5).assert_outcomes(passed=1)
    slower = night(suite, monkeypatch, url, 12.6)
    slower.assert_outcomes(failed=1)
    assert_lines(slower, "tpot_s.p50 changed for the worse at run 7 *; what changed at run 7: "
                         "host gpu-3 -> gpu-7; see: llmperf history *")


def test_updating_the_committed_baseline_accepts_the_change(suite, monkeypatch):
    url = str(suite.path / "nights.sqlite")
    for number in range(1, 8):
        night(suite, monkeypatch, url, 10.0 * NOISE[number] * (1.25 if number >= 5 else 1.0))
    night(suite, monkeypatch, url, 12.5).assert_outcomes(failed=1)
    run(suite, monkeypatch, 0.0125, "--llmperf-history", url,
        "--llmperf-update-baselines").assert_outcomes(passed=1)
    accepted = night(suite, monkeypatch, url, 12.5, "-v")
    accepted.assert_outcomes(passed=1)
    assert_lines(accepted, "test_suite.py::test_a: tpot_s.p50 changed for the worse at run 5 *; "
                           "accepted: the committed baseline was updated since (*)")


def test_an_acknowledgement_covers_the_committed_baselines_regression_at_its_level(
        suite, monkeypatch, capsys):
    """No trend gate: the committed table alone makes a night twice as slow red; acknowledged,
    the same level passes, naming the acknowledgement, and a night slower again is red."""
    url = str(suite.path / "nights.sqlite")
    run(suite, monkeypatch, 0.010, "--llmperf-history", url,
        "--llmperf-update-baselines").assert_outcomes(passed=1)
    red = run(suite, monkeypatch, 0.020, "--llmperf-history", url)
    red.assert_outcomes(failed=1)
    capsys.readouterr()
    for metric in REGRESSED:
        assert cli.main(["ack", TEST, "--metric", metric, "--reason", "driver 580: known, "
                         "tracked in #412", "--history", url]) == 0
    capsys.readouterr()
    green = run(suite, monkeypatch, 0.020, "--llmperf-history", url, "-v")
    green.assert_outcomes(passed=1)
    assert_lines(green, "test_suite.py::test_a: tpot_s.p50 regressed: 20.0* ms vs baseline "
                        "10.0* ms *; acknowledged by * until *: driver 580: known, tracked in "
                        "#412 (the level acknowledged: 20.0* ms)")
    slower = run(suite, monkeypatch, 0.030, "--llmperf-history", url)
    slower.assert_outcomes(failed=1)
    assert_lines(slower, "*tpot_s.p50 regressed: 30.0* ms vs baseline 10.0* ms *; worse than the "
                         "level * acknowledged on * (20.0* ms, allowed +*%): a new regression*")


def test_an_accepted_level_is_the_new_normal_and_a_further_slowdown_still_fails(
        suite, monkeypatch, capsys):
    """`llmperf accept`: the committed table says 10 ms; three nights, then three at 20 ms, red;
    accepted, the next 20 ms night passes against the level accepted (the median of the three
    runs since the change; it never expires), and 24 ms is red against that level, not only
    against the table."""
    url = str(suite.path / "nights.sqlite")
    run(suite, monkeypatch, 0.010, "--llmperf-history", url,
        "--llmperf-update-baselines").assert_outcomes(passed=1)
    for number in range(1, 7):
        tpot = 0.010 * NOISE[number] * (2 if number >= 4 else 1)
        outcome = run(suite, monkeypatch, tpot, "--llmperf-history", url)
        outcome.assert_outcomes(**({"failed": 1} if number >= 4 else {"passed": 1}))
    capsys.readouterr()
    for metric in REGRESSED:
        assert cli.main(["accept", TEST, "--metric", metric, "--reason", "the new attention "
                         "kernel trades TPOT for memory", "--history", url]) == 0
        said = capsys.readouterr().out
        assert f"{TEST} {metric}: accepted as the new level by " in said, said
    accepted = run(suite, monkeypatch, 0.020, "--llmperf-history", url, "-v")
    accepted.assert_outcomes(passed=1)
    assert_lines(accepted, "test_suite.py::test_a: tpot_s.p50 regressed: 20.0* ms vs baseline "
                           "10.0* ms *; accepted as the new level by * on *: the new attention "
                           "kernel trades TPOT for memory (the level * accepted on *: 20.0* ms "
                           "over 3 runs)")
    slower = run(suite, monkeypatch, 0.024, "--llmperf-history", url)
    slower.assert_outcomes(failed=1)
    assert_lines(slower, "*tpot_s.p50 regressed: 24.0* ms vs baseline 20.0* ms *, the level * "
                         "accepted on *: 20.0* ms over 3 runs; the new attention kernel trades "
                         "TPOT for memory*")
    store = HistoryStore.open(location.resolve(url, suite.path))
    try:
        assert {ack.kind for ack in store.acks()} == {"accept"}
        assert all(ack.until.year == 9999 for ack in store.acks())
    finally:
        store.close()
