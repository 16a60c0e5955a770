"""`llmperf ack`'s bad input: one line each, nothing written (a store with one run of one test)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from pytest_llmperf import cli
from pytest_llmperf.history import acks, location, record
from pytest_llmperf.history.store import HistoryStore
from tests.unit.history.builders import DOCUMENT

TEST = "suites/test_cpu.py::test_a"


@pytest.fixture
def store_path(tmp_path) -> str:
    path = str(tmp_path / "h.sqlite")
    store = HistoryStore.open(location.resolve(path, tmp_path))
    store.record(record.from_document(DOCUMENT, environ={}))
    store.close()
    return path


def ack(store_path: str, capsys, *args: str) -> tuple[int, str, list]:
    code = cli.main(["ack", *args, "--history", store_path])
    store = HistoryStore.open(location.resolve(store_path, "."), check_write=False)
    try:
        kept = store.acks()
    finally:
        store.close()
    return code, capsys.readouterr().err, kept


@pytest.mark.parametrize(("args", "line"), [
    (["test_b", "--metric", "tpot_s.p50", "--reason", "r"],
     "llmperf: error: 'test_b' names no test in the store; run `llmperf history` for the list"),
    ([TEST, "--metric", "ttft_s.p50", "--reason", "r"],
     f"llmperf: error: {TEST} has no metric 'ttft_s.p50' in the store; its metrics: m00, m01, "
     "m02, m03, m04, m05, m06, m07, m08, m09, m10, m11, ..."),
    ([TEST, "--metric", "tpot_s.p50"],
     "llmperf: error: --reason TEXT: say why the change is accepted (every night's line shows "
     "it)"),
    ([TEST, "--metric", "tpot_s.p50", "--reason", "  "],
     "llmperf: error: --reason TEXT: say why the change is accepted (every night's line shows "
     "it)"),
    ([TEST, "--metric", "tpot_s.p50", "--reason", "r", "--until", "2020-01-01"],
     "llmperf: error: --until 2020-01-01 is already past (today is *, UTC); give a later date"),
    ([TEST, "--metric", "tpot_s.p50", "--reason", "r", "--until", "next week"],
     "llmperf: error: --until 'next week': give a date as YYYY-MM-DD, e.g. *"),
])
def test_bad_input_is_one_line_and_writes_nothing(store_path, capsys, args, line):
    code, err, kept = ack(store_path, capsys, *args)
    assert code == 2 and kept == []
    assert err.count("\n") == 1
    head, _, tail = line.partition("*")
    assert err.startswith(head) and err.rstrip("\n").endswith(tail)


def test_an_ack_records_who_when_why_and_until(store_path, capsys, monkeypatch):
    monkeypatch.setattr(acks, "who_am_i", lambda: "ana")
    code, err, [kept] = ack(store_path, capsys, "test_a", "--metric", "tpot_s.p50", "--reason",
                            "accepted", "--until", "2999-01-31")
    assert code == 0 and err == ""
    assert (kept.test_id, kept.metric, kept.reason, kept.who) == (TEST, "tpot_s.p50", "accepted",
                                                                  "ana")
    assert kept.until == datetime(2999, 2, 1, tzinfo=timezone.utc)
    assert kept.line().endswith("until 2999-01-31: accepted")


def test_who_is_git_user_else_user(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # no git user.name here
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.chdir(tmp_path)
    assert acks.who_am_i({"USER": "ci"}) == "ci"
    assert acks.who_am_i({}) == "unknown"


def test_accept_takes_the_same_input_and_never_expires(store_path, capsys):
    """`llmperf accept`: the same test, metric and reason checks as ack, one line each; no
    --until (the level accepted is the normal one: it does not expire)."""
    code = cli.main(["accept", TEST, "--metric", "tpot_s.p50", "--history", store_path])
    assert code == 2 and capsys.readouterr().err == (
        "llmperf: error: --reason TEXT: say why the change is accepted (every night's line "
        "shows it)\n")
    assert cli.main(["accept", TEST, "--metric", "tpot_s.p50", "--reason", "r", "--until",
                     "2030-01-01", "--history", store_path]) == 2
    assert "unrecognized arguments: --until 2030-01-01" in capsys.readouterr().err
    assert cli.main(["accept", TEST, "--metric", "tpot_s.p50", "--reason", "the new kernel",
                     "--history", store_path]) == 0
    assert f"{TEST} tpot_s.p50: accepted as the new level by " in capsys.readouterr().out
    store = HistoryStore.open(location.resolve(store_path, "."), check_write=False)
    try:
        [kept] = store.acks()
    finally:
        store.close()
    assert (kept.kind, kept.until) == (acks.ACCEPT, acks.FOREVER) and kept.accepted
