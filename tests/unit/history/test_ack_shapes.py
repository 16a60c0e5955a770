"""An acknowledgement silences one series: the test's metric on one runner shape. One store of
one test on two shapes (8x H200 and 8x H100), each 25% slower from night 7: an ack on the H100
leaves the H200 series red, on SQLite and a real PostgreSQL server; an ack written before shapes
were kept (a schema 3 row) still reads and covers both."""

from __future__ import annotations

import copy
from datetime import datetime, timezone

import pytest
from sqlalchemy import create_engine

from pytest_llmperf import cli
from pytest_llmperf.history import location, record, schema
from pytest_llmperf.history.identity import family
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.reports.commands import ack as ack_command
from pytest_llmperf.reports.regressions import regressions
from tests.unit.history.builders import DOCUMENT

CHAT = "suites/test_gpu_llama8b.py::test_chat_conversations"
TPOT_MS = [10.0, 10.2, 9.9, 10.1, 9.8, 10.0, 12.5, 12.6, 12.4, 12.5]  # 25% slower from night 7
H200 = {"hardware_class": "h200", "device_name": "NVIDIA H200", "device_count": 8}
H100 = {"hardware_class": "h100", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 8}

H100_SHAPE, H200_SHAPE = family(H100), family(H200)
NOW = datetime(2026, 11, 12, tzinfo=timezone.utc)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_text(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "h.sqlite")
    return request.getfixturevalue("postgres_db")


def fill(store: HistoryStore) -> None:
    """Ten nights of CHAT on each shape, as run files record them."""
    for shape in (H200, H100):
        for night, tpot in enumerate(TPOT_MS, 1):
            document = copy.deepcopy(DOCUMENT)
            document["datetime"] = f"2026-11-{night:02d}T03:00:00+00:00"
            document["llmperf"]["fingerprint"] = shape
            [result] = document["llmperf"]["results"]
            result.update(test_id=CHAT, gate={"tolerance": 0.1, "metrics": ["tpot_s.p50"]},
                          metrics={"tpot_s.p50": {"value": tpot / 1000, "spread": 0.0001,
                                                  "n": 3, "direction": "lower"}})
            store.record(record.from_document(document, environ={}))


def open_regressions(where) -> dict[str, str]:
    store = HistoryStore.open(where, check_write=False)
    try:
        points = {p.series: p.family for p in store.points(CHAT, None)}
        return {points[found.series]: found.line.split(":")[0]
                for found in regressions(store, NOW)}
    finally:
        store.close()


def test_an_ack_on_one_shape_leaves_the_other_shapes_series_red(store_text, tmp_path, capsys):
    where = location.resolve(store_text, tmp_path)
    store = HistoryStore.open(where)
    fill(store)
    store.close()
    assert open_regressions(where) == {H200_SHAPE: "open", H100_SHAPE: "open"}
    assert cli.main(["ack", CHAT, "--metric", "tpot_s.p50", "--reason", "H100 driver",
                     "--until", "2999-01-01", "--shape", H100_SHAPE,
                     "--history", store_text]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"(shape {H100_SHAPE}; in {where.shown})")
    assert open_regressions(where) == {H200_SHAPE: "open", H100_SHAPE: "acknowledged"}


def test_an_ack_from_before_shapes_still_reads_and_covers_every_shape(tmp_path):
    where = location.resolve(str(tmp_path / "h.sqlite"), tmp_path)
    with create_engine(where.url).begin() as connection:  # a store at schema 3
        for step in schema.MIGRATIONS[:3]:
            step(connection)
        connection.exec_driver_sql("ALTER TABLE acks DROP COLUMN shape")
        connection.execute(schema.schema_version.insert().values(version=3))
        connection.exec_driver_sql(
            "INSERT INTO acks (test_id, metric, reason, who, recorded_at, until) VALUES "
            f"('{CHAT}', 'tpot_s.p50', 'old', 'ana', '2026-11-11 00:00:00', "
            "'2999-01-01 00:00:00')")
    store = HistoryStore.open(where)
    fill(store)
    [old] = store.acks(CHAT)
    store.close()
    assert (old.reason, old.shape) == ("old", None)
    assert open_regressions(where) == {H200_SHAPE: "acknowledged", H100_SHAPE: "acknowledged"}


def test_the_shape_defaults_to_the_tests_one_else_this_machines_else_is_required():
    assert ack_command._shape(None, CHAT, ["cpu-1"], lambda: "cpu-2") == "cpu-1"
    assert ack_command._shape(None, CHAT, ["h100-1", "h200-2"], lambda: "h200-2") == "h200-2"
    with pytest.raises(ValueError) as raised:
        ack_command._shape(None, CHAT, ["h100-1", "h200-2"], lambda: "cpu-3")
    assert str(raised.value) == (f"--shape FAMILY is required: {CHAT} has series on 2 runner "
                                 "shapes, none this machine's (cpu-3): h100-1, h200-2")
    with pytest.raises(ValueError) as raised:
        ack_command._shape("a100-4", CHAT, ["h100-1", "h200-2"])
    assert str(raised.value) == (f"--shape a100-4: {CHAT} has no series on it; its shapes: "
                                 "h100-1, h200-2")


def test_this_machines_shape_follows_the_hardware_override(monkeypatch):
    monkeypatch.setenv("LLMPERF_HARDWARE", "h100")
    assert ack_command._this_machine().startswith("h100-")
