"""Episodes and the outbox in the results store (history/episode_book.py), on SQLite and on
PostgreSQL: a step and its messages in one transaction, and delivery to the real webhook
receiver (tests/webhook_receiver.py): one that refuses keeps the message for the next run, which
delivers it once and never again."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import create_engine

from pytest_llmperf.history import episode_book as book
from pytest_llmperf.history import location, record, schema
from pytest_llmperf.history.episodes import REGRESSION, Signal, advance, episode_key, with_green
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.nightly import webhook
from tests.unit.history.builders import DOCUMENT
from tests.webhook_receiver import Receiver

T0 = datetime(2026, 11, 1, 3, tzinfo=timezone.utc)
KEY = episode_key(REGRESSION, "suites/test_cpu.py::test_a", "tpot_s.p50", "abc")
RED = Signal(REGRESSION, KEY, "suites/test_cpu.py::test_a tpot_s.p50 +25.0%", red=True,
             test_id="suites/test_cpu.py::test_a", metric="tpot_s.p50", series="abc")


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request, tmp_path):
    text = str(tmp_path / "history.sqlite") if request.param == "sqlite" else \
        request.getfixturevalue("postgres_db")
    return location.resolve(text, tmp_path)


@pytest.fixture
def store(where):
    opened = HistoryStore.open(where)
    yield opened
    opened.close()


def night(store: HistoryStore, signals: list[Signal], when: datetime) -> None:
    open_ = book.open_episodes(store)
    step = advance(open_, with_green(open_, signals, REGRESSION), when)
    book.record_step(store, step, ["webhook"], when, summary=f"night of {when:%m-%d}")


def texts(receiver: Receiver) -> list[str]:
    return [body["text"] for _, body in receiver.bodies]


def test_a_refused_delivery_is_retried_on_the_next_run_and_never_sent_twice(store):
    with Receiver(status=500) as receiver:
        send = {"webhook": webhook.sender({webhook.ENV: receiver.url})}
        night(store, [RED], T0)
        (said,) = book.deliver(store, send, T0)
        assert said == ("the webhook ($LLMPERF_WEBHOOK_URL, host 127.0.0.1) answered HTTP 500; "
                        "the failures are in the reports (kept in the store's outbox for the "
                        "next run)")
        receiver.status = 200
        night(store, [RED], T0 + timedelta(days=1))  # red again: no new message
        assert book.deliver(store, send, T0 + timedelta(days=1)) == []
        assert book.deliver(store, send, T0 + timedelta(days=1)) == []  # nothing left
        night(store, [], T0 + timedelta(days=2))  # the series is back
        book.deliver(store, send, T0 + timedelta(days=2))
    assert texts(receiver) == [
        f"opened: {RED.line}",  # refused (500): the channel is left alone for this run ...
        f"opened: {RED.line}", "night of 11-01", "night of 11-02",  # ... then delivered once
        f"resolved (passed): {RED.line}", "night of 11-03"]
    assert book.open_episodes(store) == []


def test_a_channel_with_no_sender_keeps_its_messages(store):
    night(store, [RED], T0)
    assert book.deliver(store, {}, T0) == []
    with store.transaction() as connection:
        rows = connection.execute(schema.outbox.select()).mappings().all()
    assert [(row["event"], row["delivered_at"], row["attempts"]) for row in rows] == [
        ("opened", None, 0), ("summary", None, 0)]


def test_the_episode_is_kept_with_its_nights(store):
    night(store, [RED], T0)
    night(store, [RED], T0 + timedelta(days=1))
    (episode,) = book.open_episodes(store)
    assert (episode.nights, episode.opened_at, episode.last_seen_at, episode.key) == (
        2, T0, T0 + timedelta(days=1), KEY)


def test_last_runs_per_shape(store):
    store.record(record.from_document(DOCUMENT, environ={}))
    ((shape, when),) = book.last_runs(store).items()
    assert (shape.startswith("cpu-"), when) == (True, datetime(2026, 11, 20, 3,
                                                                tzinfo=timezone.utc))


def test_a_store_from_before_episodes_gains_them_and_keeps_its_runs(where):
    with create_engine(where.url).begin() as connection:  # a store at schema 4
        for step in schema.MIGRATIONS[:4]:
            step(connection)
        connection.execute(schema.schema_version.insert().values(version=4))
    opened = HistoryStore.open(where)
    try:
        opened.record(record.from_document(DOCUMENT, environ={}))
        night(opened, [RED], T0)
        assert [e.key for e in book.open_episodes(opened)] == [KEY]
        assert [t for t, _ in opened.test_ids()] == ["suites/test_cpu.py::test_a"]
    finally:
        opened.close()
