"""The results store on both backends: SQLite files and a real PostgreSQL server
(tests/history_db.py). What a run appends comes back whole; concurrent writers lose nothing; the
schema moves forward and a newer one is refused; every unusable store is one line with the fix,
and a failed append leaves the store as it was."""

from __future__ import annotations

import multiprocessing
import re
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, create_engine, text

from pytest_llmperf.history import location, record, schema
from pytest_llmperf.history.store import HistoryError, HistoryStore
from tests.unit.history.builders import DOCUMENT


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request, tmp_path):
    if request.param == "sqlite":
        return location.resolve(str(tmp_path / "h.sqlite"), tmp_path)
    return location.resolve(request.getfixturevalue("postgres_db"), tmp_path)


def test_a_run_comes_back_whole(where):
    store = HistoryStore.open(where)
    number = store.record(record.from_document(DOCUMENT, clocks={"governor": "performance"},
                                               environ={}))
    [point] = store.points("suites/test_cpu.py::test_a", None)
    assert number == point.run_id == 1
    assert point.started_at.isoformat() == "2026-11-20T03:00:00+00:00"
    assert (point.commit, point.verdict, point.key) == ("1a2b3c4d5e6f7a8b9c0d", "pass", "test_a")
    assert point.engine == {"model": "suites/models/tiny-llama", "env": {"HF_TOKEN": "<hidden>"}}
    assert point.fingerprint["vllm"] == "0.32.0" and point.clocks == {"governor": "performance"}
    # The entry as the run file's model writes it (verdict/stored_run.py): what a run file
    # holds beside the columns, those it left out written as the model's "none".
    assert point.extra == {"failures": {"overloaded": 2}, "client": {"workers": 1},
                           "prefix_cache": "warm", "server": {}, "server_metrics": {},
                           "disturbance": None}
    assert list(point.values) == ["tpot_s.p50"]  # None: the metrics the test gated
    assert point.values["tpot_s.p50"].value == 0.0022 and point.values["tpot_s.p50"].n == 1
    [every] = store.points("suites/test_cpu.py::test_a", [f"m{i:02d}" for i in range(50)])
    assert every.values["m49"].value == 50.0 and every.values["m49"].spread == pytest.approx(0.49)
    assert store.test_ids() == [("suites/test_cpu.py::test_a", 1)]


def _append(url: str, count: int) -> None:
    where = location.resolve(url, Path("."))
    store = HistoryStore.open(where, wait_s=30)
    for _ in range(count):
        store.record(record.from_document(DOCUMENT, environ={}))


def test_concurrent_writers_lose_nothing(where):
    """Four processes create the store at once and append 10 runs each."""
    url = where.url.render_as_string(hide_password=False)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append, args=(url, 10)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    store = HistoryStore.open(where)
    points = store.points("suites/test_cpu.py::test_a", ["m00", "m49"])
    assert sorted(p.run_id for p in points) == list(range(1, 41))
    assert all(len(p.values) == 2 for p in points)
    with create_engine(where.url).connect() as connection:
        assert connection.execute(text("select count(*) from metric_values")).scalar() == 40 * 51
        assert connection.execute(text("select version from schema_version")).all() == [
            (schema.SCHEMA_VERSION,)]


def test_an_older_schema_moves_forward_and_keeps_its_runs(where, monkeypatch):
    store = HistoryStore.open(where)
    store.record(record.from_document(DOCUMENT, environ={}))
    notes = Table("notes", MetaData(), Column("id", Integer, primary_key=True))
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, notes.create])
    store = HistoryStore.open(where)
    assert [p.run_id for p in store.points("suites/test_cpu.py::test_a", None)] == [1]
    with create_engine(where.url).connect() as connection:
        assert connection.execute(text("select version from schema_version")).all() == [
            (schema.SCHEMA_VERSION + 1,)]
        assert connection.execute(text("select count(*) from notes")).scalar() == 0


def test_a_version_1_store_gains_the_bisect_steps_and_keeps_its_runs(where):
    """A store written before `llmperf bisect` (schema 1) moves to 2 and keeps its runs."""
    with create_engine(where.url).begin() as connection:
        schema._create_v1(connection)
        connection.execute(schema.schema_version.insert().values(version=1))
    store = HistoryStore.open(where)
    store.record(record.from_document(DOCUMENT, environ={}))
    store.record_bisect_step("k" * 64, "suites/test_cpu.py::test_a", "A", "B", "bad",
                             {"median": 1.4})
    assert store.bisect_step("k" * 64) == ("bad", {"median": 1.4})
    assert store.bisect_step("x" * 64) is None
    assert [p.run_id for p in store.points("suites/test_cpu.py::test_a", None)] == [1]


def test_a_newer_schema_is_refused_in_one_line(where):
    HistoryStore.open(where)
    with create_engine(where.url).begin() as connection:
        connection.execute(text("update schema_version set version = 99"))
    with pytest.raises(HistoryError) as caught:
        HistoryStore.open(where)
    assert str(caught.value) == (
        f"--llmperf-history {where.shown}: the store is at schema version 99, newer than this "
        f"pytest-llmperf's {schema.SCHEMA_VERSION}; upgrade pytest-llmperf, or point --llmperf-history at another "
        "store")


def test_a_locked_file_is_refused_and_a_failed_append_stores_nothing(tmp_path):
    where = location.resolve(str(tmp_path / "h.sqlite"), tmp_path)
    HistoryStore.open(where).record(record.from_document(DOCUMENT, environ={}))
    holder = sqlite3.connect(where.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write, under way
    try:
        with pytest.raises(HistoryError) as at_start:
            HistoryStore.open(where, wait_s=0.2)
        store = HistoryStore.open(where, wait_s=0.2, check_write=False)
        with pytest.raises(HistoryError) as at_end:
            store.record(record.from_document(DOCUMENT, environ={}))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    line = (f"--llmperf-history {where.shown}: the file is locked by another process (database "
            "is locked); wait for it to finish, or give this session another file with "
            "--llmperf-history PATH")
    assert str(at_start.value) == str(at_end.value) == line
    assert [p.run_id for p in store.points("suites/test_cpu.py::test_a", None)] == [1]


def test_an_unreachable_server_is_one_line(tmp_path, postgres_server):
    port = int(re.search(r":(\d+)/", postgres_server).group(1))
    url = f"postgresql://llmperf:s3cret@127.0.0.1:{port + 1}/history"
    with pytest.raises(HistoryError) as caught:
        HistoryStore.open(location.resolve(url, tmp_path), wait_s=2)
    assert re.fullmatch(
        rf"--llmperf-history postgresql\+psycopg://llmperf:\*\*\*@127\.0\.0\.1:{port + 1}/history: "
        r"cannot use the database \(connection failed: .*Connection refused.*\); start the server "
        r"or fix the URL \(host, port, database, user\), or turn the store off with "
        r"--llmperf-history off", str(caught.value)), str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_a_wrong_database_is_one_line(tmp_path, postgres_server):
    url = postgres_server.rsplit("/", 1)[0] + "/no_such_db"
    with pytest.raises(HistoryError) as caught:
        HistoryStore.open(location.resolve(url, tmp_path))
    assert 'database "no_such_db" does not exist' in str(caught.value)
    assert str(caught.value).endswith("start the server or fix the URL (host, port, database, "
                                      "user), or turn the store off with --llmperf-history off")


@pytest.mark.parametrize("value", ["mysql://db/history", "sqlite://", "http://x", "  "])
def test_a_wrong_url_is_refused_where_it_is_written(value):
    with pytest.raises(ValueError) as caught:
        location.parse_history(value)
    assert str(caught.value) == "expected a file path, a sqlite:/// or postgresql:// URL, or off"


def test_off_words_and_relative_paths(tmp_path):
    assert [location.parse_history(w) for w in ("off", "OFF", "none")] == ["off"] * 3
    where = location.resolve("runs/h.sqlite", tmp_path)
    assert where.path == tmp_path / "runs/h.sqlite" and where.is_sqlite
    url = location.resolve("postgresql://u:pw@db:5432/h", tmp_path)
    assert url.shown == "postgresql+psycopg://u:***@db:5432/h" and not url.is_sqlite
