"""The results store, the trend gate and baselines from history as users meet them: pytester
sessions whose measurements are injected (the conftest of history_suite.py), so each run says
exactly which numbers it measured; everything after the measurement is the real plugin. The real
engine's series of nights is scripts/calibrate_nights.py's (docs/noise.md has its runs); PostgreSQL
in tests/unit/history/test_history_store.py."""

from __future__ import annotations

import os
import re
import shutil
import socket
import sqlite3
import subprocess
import tomllib

import pytest

from pytest_llmperf.history import store as store_mod
from pytest_llmperf.history.schema import SCHEMA_VERSION
from pytest_llmperf.session import history_run
from tests.plugin.history_suite import CONFTEST, NOISE, SUITE, run
from tests.plugin.lines import assert_lines


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def assert_error(result, pattern: str) -> None:
    """`pattern` (`*` its only wildcard) matches a whole line of stderr, where pytest prints
    usage errors."""
    result.stderr.re_match_lines(["^" + ".*".join(map(re.escape, pattern.split("*"))) + "$"])


def stored_runs(suite) -> list[tuple]:
    with sqlite3.connect(suite.path / ".llmperf/history.sqlite") as db:
        return db.execute("select runs.id, results.test_id, results.verdict from runs "
                          "join results on results.run_id = runs.id order by runs.id").fetchall()


def test_every_run_is_recorded_with_its_number(suite, monkeypatch):
    for index in range(3):
        result = run(suite, monkeypatch, 0.01)
        result.assert_outcomes(passed=1)
        assert_lines(result, f"history: run {index + 1} recorded in .llmperf/history.sqlite "
                             "(1 result)")
    assert stored_runs(suite) == [(n, "test_suite.py::test_a", "no baseline") for n in (1, 2, 3)]


def test_history_off_records_nothing(suite, monkeypatch):
    run(suite, monkeypatch, 0.01, "--llmperf-history", "off").assert_outcomes(passed=1)
    assert not (suite.path / ".llmperf/history.sqlite").exists()


def git(suite, *args: str) -> str:
    """git in the suite's folder, with fixed names and dates: the same files, the same commit."""
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z", "PATH": os.environ["PATH"]}
    done = subprocess.run(["git", *args], cwd=suite.path, env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def test_the_trend_gate_names_the_commit_that_changed_at_the_step(suite, monkeypatch):
    git(suite, "init", "-q")
    git(suite, "add", "conftest.py", "test_suite.py")
    git(suite, "commit", "-q", "-m", "suite")
    before = git(suite, "rev-parse", "HEAD")
    for factor in NOISE[:6]:
        run(suite, monkeypatch, 0.01 * factor, "--llmperf-trend").assert_outcomes(passed=1)
    (suite.path / "test_suite.py").write_text(SUITE + "# the slower commit\n")
    git(suite, "commit", "-q", "-am", "slower")
    after = git(suite, "rev-parse", "HEAD")
    run(suite, monkeypatch, 0.0125, "--llmperf-trend").assert_outcomes(passed=1)
    failed = run(suite, monkeypatch, 0.0126, "--llmperf-trend")
    failed.assert_outcomes(failed=1)
    assert_lines(failed, f"tpot_s.p50 changed for the worse at run 7 (*, commit {after[:10]}): "
                         "10.0 ms -> 12.5 ms (+25.5%, allowed +10.0%, lower is better), 2 runs "
                         "ago in .llmperf/history.sqlite; what changed at run 7: commit "
                         f"{before[:10]} -> {after[:10]}; see: llmperf history "
                         '"test_suite.py::test_a" --metric tpot_s.p50')
    assert_lines(failed, "*test_a * REGRESSION")
    # Past the window the new level is still a change nobody acted on: red every night until
    # it is acknowledged (test_acks_plugin.py) or the level comes back.
    run(suite, monkeypatch, 0.0125, "--llmperf-trend").assert_outcomes(failed=1)
    run(suite, monkeypatch, 0.0126, "--llmperf-trend").assert_outcomes(failed=1)
    run(suite, monkeypatch, 0.0100, "--llmperf-trend").assert_outcomes(failed=1)  # one run back
    run(suite, monkeypatch, 0.0101, "--llmperf-trend").assert_outcomes(passed=1)  # fixed


def test_a_better_level_is_a_note(suite, monkeypatch):
    for factor in NOISE[:6]:
        run(suite, monkeypatch, 0.01 * factor, "--llmperf-trend")
    run(suite, monkeypatch, 0.008, "--llmperf-trend").assert_outcomes(passed=1)
    result = run(suite, monkeypatch, 0.0081, "--llmperf-trend", "-v")
    result.assert_outcomes(passed=1)
    assert_lines(result, "test_suite.py::test_a: tpot_s.p50 improved at run 7 (*): 10.0 ms -> "
                         "8.0 ms (-19.5%, allowed -9.1%, lower is better), 2 runs ago in *")


def test_a_client_limited_run_is_stored_but_never_a_point(suite, monkeypatch):
    for factor in NOISE[:6]:
        run(suite, monkeypatch, 0.01 * factor, "--llmperf-trend")
    monkeypatch.setenv("FAKE_LIMITED", "1")
    for _ in range(2):  # two wild runs the client limited
        run(suite, monkeypatch, 0.05, "--llmperf-trend")
    monkeypatch.delenv("FAKE_LIMITED")
    run(suite, monkeypatch, 0.0101, "--llmperf-trend").assert_outcomes(passed=1)
    assert [verdict for *_, verdict in stored_runs(suite)][6:] == [
        "CLIENT LIMITED", "CLIENT LIMITED", "no baseline"]


def test_baselines_from_history_take_the_runs_since_the_change(suite, monkeypatch):
    for tpot in [0.01] * 6 + [0.0125, 0.0127]:
        run(suite, monkeypatch, tpot)
    result = run(suite, monkeypatch, 0.0124, "--llmperf-update-baselines",
                 "--llmperf-from-history", "3", "-v")
    result.assert_outcomes(passed=1)
    assert_lines(result, "test_suite.py::test_a: baseline from history: median and spread of "
                         "*tpot_s.p50 over 3 runs (run 7 to this run since its change at run 7)*")
    table = tomllib.loads((suite.path / "baselines/cpu/test_suite.toml").read_text())["test_a"]
    assert table["metrics"]["tpot_s.p50"]["value"] == 0.0125
    assert table["metrics"]["tpot_s.p50"]["n"] == 3
    assert table["metrics"]["ttft_s.p50"]["n"] == 3  # no change: the last 3 of all 9 runs


def test_a_store_the_end_cannot_write_is_a_line_and_the_summary_stays(suite, monkeypatch):
    run(suite, monkeypatch, 0.01).assert_outcomes(passed=1)
    suite.makeconftest(CONFTEST + LOCK_AT_THE_END)
    monkeypatch.setattr(history_run, "RECORD_WAIT_S", 0.2)
    result = run(suite, monkeypatch, 0.01)
    result.assert_outcomes(passed=1)
    summary = "\n".join(result.outlines).replace("\n    ", " ")  # notes wrap at 120 columns
    assert ("\nresults not recorded in the history: --llmperf-history .llmperf/history.sqlite: "
            "the file is locked by another process (database is locked); wait for it to finish, "
            "or give this session another file with --llmperf-history PATH\n") in summary
    assert_lines(result, "*test_a *no baseline")
    assert stored_runs(suite) == [(1, "test_suite.py::test_a", "no baseline")]


LOCK_AT_THE_END = '''
import sqlite3
HELD = []

def pytest_runtest_teardown(item):  # after the measurement, before the session records it
    held = sqlite3.connect(".llmperf/history.sqlite", isolation_level=None)
    held.execute("BEGIN IMMEDIATE")
    HELD.append(held)

def pytest_unconfigure(config):
    for held in HELD:
        held.close()
'''


@pytest.mark.parametrize(("args", "line"), [
    (["--llmperf-trend", "--llmperf-history", "off"],
     "--llmperf-trend reads the results store, which is off (--llmperf-history off); give it a "
     "store with --llmperf-history PATH|URL"),
    (["--llmperf-from-history", "3"],
     "--llmperf-from-history N says where updated baselines come from; use it with "
     "--llmperf-update-baselines"),
    (["--llmperf-history", "mysql://db/h"],
     "argument --llmperf-history: expected a file path, a sqlite:/// or postgresql:// URL, or "
     "off"),
])
def test_bad_store_options_are_one_line(suite, monkeypatch, args, line):
    result = run(suite, monkeypatch, 0.01, *args)
    assert result.ret != 0
    assert_error(result, f"*{line}")


def test_a_store_of_a_newer_schema_stops_the_session_before_measuring(suite, monkeypatch):
    run(suite, monkeypatch, 0.01).assert_outcomes(passed=1)
    with sqlite3.connect(suite.path / ".llmperf/history.sqlite") as db:
        db.execute("update schema_version set version = 9")
    result = run(suite, monkeypatch, 0.01)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert_error(result, "ERROR: pytest-llmperf: --llmperf-history .llmperf/history.sqlite: the "
                         "store is at schema version 9, newer than this pytest-llmperf's "
                         f"{SCHEMA_VERSION}; "
                         "upgrade pytest-llmperf, or point --llmperf-history at another store")


def test_a_locked_store_and_an_unreachable_server_stop_the_session(suite, monkeypatch):
    run(suite, monkeypatch, 0.01).assert_outcomes(passed=1)
    monkeypatch.setattr(store_mod, "OPEN_WAIT_S", 0.2)
    held = sqlite3.connect(suite.path / ".llmperf/history.sqlite", isolation_level=None)
    held.execute("BEGIN IMMEDIATE")
    try:
        locked = run(suite, monkeypatch, 0.01)
    finally:
        held.close()
    assert locked.ret == pytest.ExitCode.USAGE_ERROR
    assert_error(locked, "ERROR: pytest-llmperf: --llmperf-history .llmperf/history.sqlite: the "
                         "file is locked by another process (database is locked); wait for it "
                         "to finish, or give this session another file with --llmperf-history "
                         "PATH")
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    monkeypatch.setenv("LLMPERF_HISTORY", f"postgresql://ci:pw@127.0.0.1:{port}/history")
    unreachable = run(suite, monkeypatch, 0.01)
    assert unreachable.ret == pytest.ExitCode.USAGE_ERROR
    assert_error(unreachable, "ERROR: pytest-llmperf: --llmperf-history postgresql+psycopg://ci:"
                              f"***@127.0.0.1:{port}/history: cannot use the database "
                              "(connection failed: *Connection refused*); start the server or "
                              "fix the URL (host, port, database, user), or turn the store off "
                              "with --llmperf-history off")


TWO_ENGINES = '''
import pytest
from pytest_llmperf import Engine, Workload

def wl(name):
    return Workload.fixed(input_tokens=8, output_tokens=10, num_requests=20, concurrency=1,
                          name=name)

@pytest.mark.engine(Engine(model="m", max_num_seqs=32))
def test_a(llmperf):
    llmperf.run(wl("a"))

@pytest.mark.engine(Engine(model="m", max_num_seqs=8))
def test_b(llmperf):
    llmperf.run(wl("b"))
'''


def test_under_xdist_the_controller_records_every_workers_results_as_one_run(suite, monkeypatch):
    suite.makepyfile(test_suite=TWO_ENGINES)
    monkeypatch.setenv("FAKE_b", "0.1,0.01")
    result = run(suite, monkeypatch, 0.01, "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert_lines(result, "history: run 1 recorded in .llmperf/history.sqlite (2 results)")
    assert sorted(stored_runs(suite)) == [(1, "test_suite.py::test_a", "no baseline"),
                                          (1, "test_suite.py::test_b", "no baseline")]


def test_a_postgresql_store_keeps_the_runs_of_sessions_that_keep_nothing(suite, monkeypatch,
                                                                         postgres_db):
    """An ephemeral runner: every session starts from an empty folder; the server remembers."""
    shown = postgres_db.replace("postgresql://", "postgresql+psycopg://", 1)
    for number in (1, 2):
        shutil.rmtree(suite.path / ".llmperf", ignore_errors=True)
        result = run(suite, monkeypatch, 0.01, "--llmperf-history", postgres_db)
        result.assert_outcomes(passed=1)
        assert_lines(result, f"history: run {number} recorded in {shown} (1 result)")
    assert not (suite.path / ".llmperf/history.sqlite").exists()
