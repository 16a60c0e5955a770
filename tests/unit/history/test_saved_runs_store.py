"""Runs saved by name in the results store (history/saved_runs.py), on SQLite and a real
PostgreSQL server: the file's text comes back byte for byte (NaN included, which PostgreSQL's
json type would refuse), the newest save of a name wins, and this host's before another's."""

from __future__ import annotations

import json

import pytest

from pytest_llmperf.history import location, saved_runs
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.reports.runfile import run_text


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        where = location.resolve(str(tmp_path / "h.sqlite"), tmp_path)
    else:
        where = location.resolve(request.getfixturevalue("postgres_db"), tmp_path)
    opened = HistoryStore.open(where)
    yield opened
    opened.close()


def _text(host: str, night: int) -> str:
    return run_text({"llmperf": {"fingerprint": {"host": host}, "night": night,
                                 "results": [{"tpot_s": float("nan")}]}})


def test_a_saved_run_comes_back_as_written(store):
    text = _text("gpu-3", 1)
    saved_runs.save(store, "before-580", "gpu-3", text)
    found = saved_runs.find(store, "before-580", "gpu-3")
    assert found is not None and found.text == text
    assert (found.name, found.host) == ("before-580", "gpu-3")
    assert found.recorded_at.tzinfo is not None
    assert "NaN" in found.text and json.loads(found.text)["llmperf"]["night"] == 1
    assert saved_runs.find(store, "after-580", "gpu-3") is None
    assert saved_runs.names(store) == ["before-580"]


def test_the_newest_save_of_this_host_comes_first_then_any_host(store):
    saved_runs.save(store, "before", "gpu-3", _text("gpu-3", 1))
    saved_runs.save(store, "before", "gpu-3", _text("gpu-3", 2))
    saved_runs.save(store, "before", "gpu-7", _text("gpu-7", 3))
    saved_runs.save(store, "other", "gpu-3", _text("gpu-3", 4))
    night = lambda found: json.loads(found.text)["llmperf"]["night"]  # noqa: E731
    assert night(saved_runs.find(store, "before", "gpu-3")) == 2
    assert night(saved_runs.find(store, "before", "gpu-7")) == 3
    # A host with no save of its own gets the newest of any (the same-node check refuses it).
    assert night(saved_runs.find(store, "before", "gpu-9")) == 3
    assert night(saved_runs.find(store, "before", None)) == 3
    assert saved_runs.names(store) == ["before", "other"]
