"""`llmperf history --stale [HOURS]`: the runner shapes of the store with no run for longer than
the interval, one line each and exit 1; none, one line and exit 0; a malformed interval, one
line and exit 2."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

from pytest_llmperf.cli import main
from pytest_llmperf.history import location, record
from pytest_llmperf.history.store import HistoryStore
from tests.unit.history.builders import DOCUMENT


def store_with_a_run(tmp_path, hours_ago: float) -> str:
    path = tmp_path / "history.sqlite"
    document = copy.deepcopy(DOCUMENT)
    started = datetime.now(timezone.utc) - timedelta(hours=hours_ago)
    document["datetime"] = started.isoformat()
    store = HistoryStore.open(location.resolve(str(path), tmp_path))
    store.record(record.from_document(document, environ={}))
    store.close()
    return str(path)


def test_a_shape_quiet_for_longer_is_a_line_and_exit_1(tmp_path, capsys):
    store = store_with_a_run(tmp_path, hours_ago=50)
    assert main(["history", "--history", store, "--stale", "30"]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("stale: runner shape cpu-") and ": no run for 50 h (since " in line
    assert line.endswith("UTC; interval 30 h)")


def test_no_stale_shape_is_one_line_and_exit_0(tmp_path, capsys):
    store = store_with_a_run(tmp_path, hours_ago=2)
    assert main(["history", "--history", store, "--stale"]) == 0  # 36 h by default
    assert capsys.readouterr().out == f"no runner shape is stale in {store} (interval 36 h)\n"


def test_a_malformed_interval_is_one_line(tmp_path, capsys):
    store = store_with_a_run(tmp_path, hours_ago=2)
    assert main(["history", "--history", store, "--stale", "a day"]) == 2
    assert capsys.readouterr().err == ("llmperf: error: --stale='a day': give the hours after "
                                       "which a runner shape with no run is stale, e.g. 36\n")
