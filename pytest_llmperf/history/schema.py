"""The store's tables, and the steps that bring an older store forward.

    schema_version  version                          one row: the schema this store is at
    runs            id, run_uid, started_at,         one pytest session (its controller)
                    recorded_at, commit,
                    hardware_class, family,
                    fingerprint, clocks, host, ci_url
    results         id, run_id -> runs, test_id,     one measured result of that session
                    key, verdict, series,
                    engine_hash, engine, engine_label,
                    workload_hash, workload,
                    workload_label, gate, extra
    metric_values   result_id -> results, name,      every metric of that result (value and
                    value, spread, n, direction      spread over its repeats, stats.py)
    bisect_steps    id, step_key, recorded_at,       one paired A/B step of `llmperf bisect`
                    test_id, a, b, outcome, detail   (bisect/): found again by its key, so an
                                                     interrupted bisect resumes (schema 2)
    acks            id, test_id, metric, reason,     one acknowledged regression (`llmperf ack`,
                    who, recorded_at, until, shape,  acks.py; schema 3; shape: schema 4, the
                    kind                             runner shape (family) of the series it
                                                     silences; NULL in older rows: every shape;
                                                     kind: schema 7, "accept" for a change
                                                     accepted as the new normal, `llmperf
                                                     accept`, which never expires)
    episodes        id, kind, key, test_id, metric,  one episode (episodes.py, schema 5): a
                    series, shape, line, opened_at,  regression or a stale runner shape, open
                    last_seen_at, nights,            from the night it was first seen until it
                    resolved_at, resolution          resolves (passed, acknowledged, ran again)
    outbox          id, episode_id -> episodes,      one message to deliver (episode_book.py):
                    event, channel, text,            kept until a sender took it, so a failed
                    created_at, delivered_at,        delivery is retried on the next run and
                    attempts, last_error             never sent twice (schema 5)
    saved_runs      id, name, host, recorded_at,     one run saved by name (--llmperf-save NAME
                    document                         with a store; schema 6): the "before" of a
                                                     before/after on one node, kept where a
                                                     runner that starts empty finds it again
                                                     (--llmperf-compare NAME; saved_runs.py)

`family`, `engine_hash`, `workload_hash` and `series` are identity.py's keys; `series` is indexed
with the run, so one series reads in one index range. JSON columns keep what a row was measured
with (SQLAlchemy's JSON type: PostgreSQL's json, SQLite's text), `extra` whatever else the run
file says of a result (failures, client, server versions, disturbance), so nothing it recorded
is lost.

Migrations: MIGRATIONS[i] takes a store from version i to i + 1 (version 0: empty), each in the
one transaction that also writes the new version, so a store is at one version or the next,
never between. A store at a version above SCHEMA_VERSION was written by a newer pytest-llmperf
and is refused (NewerSchema), never rewritten: an older checkout must not damage it.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Connection

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "acks", "bisect_steps", "episodes", "metric_values",
           "metadata", "outbox", "results", "runs", "saved_runs", "schema_version",
           "stored_version", "upgrade"]

metadata = MetaData()

schema_version = Table("schema_version", metadata, Column("version", Integer, nullable=False))

runs = Table(
    "runs", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_uid", String(64), nullable=False, unique=True),
    Column("started_at", DateTime(timezone=True)),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    Column("commit", String(80)),
    Column("hardware_class", String(40)),
    Column("family", String(80), index=True),
    Column("fingerprint", JSON, nullable=False),
    Column("clocks", JSON),
    Column("host", String(255)),
    Column("ci_url", String(1000)),
)

results = Table(
    "results", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("test_id", String(2000), nullable=False),
    Column("key", String(2000), nullable=False),
    Column("verdict", String(80), nullable=False),
    Column("series", String(32), nullable=False),
    Column("engine_hash", String(32), nullable=False),
    Column("engine", JSON, nullable=False),
    Column("engine_label", String(2000)),
    Column("workload_hash", String(32), nullable=False),
    Column("workload", JSON, nullable=False),
    Column("workload_label", String(2000)),
    Column("gate", JSON),
    Column("extra", JSON),
    Index("ix_results_test_run", "test_id", "run_id"),
    Index("ix_results_series_run", "series", "run_id"),
)

metric_values = Table(
    "metric_values", metadata,
    Column("result_id", Integer, ForeignKey("results.id", ondelete="CASCADE"),
           primary_key=True),
    Column("name", String(200), primary_key=True),
    Column("value", Float),
    Column("spread", Float),
    Column("n", Integer),
    Column("direction", String(8)),
)


# `step_key` is a digest of everything that decides a step's outcome (bisect/search.py's
# StepKey): the test, both environments, the metric, pairs and tolerance. A key measured twice
# (a step rerun by hand) keeps both rows; the newest is read.
bisect_steps = Table(
    "bisect_steps", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("step_key", String(64), nullable=False, index=True),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    Column("test_id", String(2000), nullable=False),
    Column("a", String(2000), nullable=False),
    Column("b", String(2000), nullable=False),
    Column("outcome", String(20), nullable=False),
    Column("detail", JSON, nullable=False),
)


# An acknowledged regression (acks.py, `llmperf ack`): one row per acknowledgement, never
# changed; the newest active one of a test's metric covers the changes before it (schema 3).
acks = Table(
    "acks", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("test_id", String(2000), nullable=False, index=True),
    Column("metric", String(200), nullable=False),
    Column("reason", String(4000), nullable=False),
    Column("who", String(200), nullable=False),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    Column("until", DateTime(timezone=True), nullable=False),
    Column("shape", String(200), nullable=True),
    Column("kind", String(10), nullable=True),
)


# An episode (episodes.py): `key` names what it is of (kind, test, metric, series, or the runner
# shape of a stale one); at most one open episode a key, the ones before it resolved.
episodes = Table(
    "episodes", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(20), nullable=False),
    Column("key", String(64), nullable=False, index=True),
    Column("test_id", String(2000)),
    Column("metric", String(200)),
    Column("series", String(32)),
    Column("shape", String(200)),
    Column("line", String(4000), nullable=False),
    Column("opened_at", DateTime(timezone=True), nullable=False),
    Column("last_seen_at", DateTime(timezone=True), nullable=False),
    Column("nights", Integer, nullable=False),
    Column("resolved_at", DateTime(timezone=True)),
    Column("resolution", String(40)),
)

# A message about an episode for one channel (a sender: webhook, ...), kept until delivered.
outbox = Table(
    "outbox", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("episode_id", Integer, ForeignKey("episodes.id", ondelete="CASCADE")),
    Column("event", String(20), nullable=False),
    Column("channel", String(40), nullable=False),
    Column("text", String(8000), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("delivered_at", DateTime(timezone=True), index=True),
    Column("attempts", Integer, nullable=False),
    Column("last_error", String(1000)),
)

# A run file saved by name (saved_runs.py): the file's text, exactly as --llmperf-save writes it
# under .llmperf/runs/ (text, not JSON: a run file keeps NaN, which PostgreSQL's json refuses); a
# name saved twice keeps both rows, and the newest (of this host first) is read.
saved_runs = Table(
    "saved_runs", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False, index=True),
    Column("host", String(255)),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    Column("document", Text, nullable=False),
)


def _create_v1(connection: Connection) -> None:
    metadata.create_all(connection, tables=[schema_version, runs, results, metric_values])


def _add_bisect_steps(connection: Connection) -> None:
    metadata.create_all(connection, tables=[bisect_steps])


def _add_acks(connection: Connection) -> None:
    metadata.create_all(connection, tables=[acks])


def _add_ack_shape(connection: Connection) -> None:
    """Schema 4: acks.shape. A store made at 3 lacks it; one made now has it from _add_acks."""
    if "shape" not in {column["name"] for column in inspect(connection).get_columns("acks")}:
        connection.execute(text("ALTER TABLE acks ADD COLUMN shape VARCHAR(200)"))


def _add_episodes(connection: Connection) -> None:
    metadata.create_all(connection, tables=[episodes, outbox])


def _add_saved_runs(connection: Connection) -> None:
    metadata.create_all(connection, tables=[saved_runs])


def _add_ack_kind(connection: Connection) -> None:
    """Schema 7: acks.kind ("accept" for `llmperf accept`; NULL: an acknowledgement). A store
    made before lacks it; one made now has it from _add_acks."""
    if "kind" not in {column["name"] for column in inspect(connection).get_columns("acks")}:
        connection.execute(text("ALTER TABLE acks ADD COLUMN kind VARCHAR(10)"))


MIGRATIONS: list[Callable[[Connection], None]] = [_create_v1, _add_bisect_steps, _add_acks,
                                                  _add_ack_shape, _add_episodes,
                                                  _add_saved_runs, _add_ack_kind]
SCHEMA_VERSION = len(MIGRATIONS)


def stored_version(connection: Connection) -> int:
    """The store's schema version; 0 for an empty database."""
    if not inspect(connection).has_table(schema_version.name):
        return 0
    return connection.execute(select(func.max(schema_version.c.version))).scalar() or 0


def upgrade(connection: Connection, current: int) -> None:
    """Run every step from `current` to SCHEMA_VERSION in the caller's transaction."""
    for step in MIGRATIONS[current:]:
        step(connection)
    connection.execute(schema_version.delete())
    connection.execute(schema_version.insert().values(version=len(MIGRATIONS)))
