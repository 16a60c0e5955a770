"""What the SQLite backend needs beyond SQLAlchemy Core: a transaction that really begins, and
a write lock taken up front.

Python's sqlite3 module begins transactions only before data changes, not before DDL or reads,
and SQLAlchemy's documentation gives the fix: let the driver autocommit and emit BEGIN from
SQLAlchemy's own "begin" event
(https://docs.sqlalchemy.org/en/20/dialects/sqlite.html#serializable-isolation-savepoints-transactional-ddl).
A writing transaction begins IMMEDIATE (https://www.sqlite.org/lang_transaction.html): it takes
the write lock at once, waiting up to `wait_s` for another writer, instead of failing half way
when a read turns into a write. WAL journaling lets readers (pytest-xdist workers asking for a
series) read while a writer writes (https://www.sqlite.org/wal.html).
"""

from __future__ import annotations

from sqlalchemy import create_engine as sa_create_engine
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

__all__ = ["WRITE", "create_engine", "explain"]

WRITE = "llmperf_write"  # the execution option a writing connection carries


def create_engine(url, wait_s: float, path) -> Engine:
    """An engine on the SQLite file `path` (its folder made), waiting `wait_s` for a lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # NullPool: a connection per use, closed after it; nothing holds the file between uses.
    engine = sa_create_engine(url, connect_args={"timeout": wait_s}, poolclass=NullPool)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # the "begin" event below begins instead
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection) -> None:
        writing = connection.get_execution_options().get(WRITE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writing else "BEGIN")

    return engine


def explain(problem: str, shown: str) -> str:
    """One line for a SQLite error `problem` on the store `shown`, with the fix."""
    if "locked" in problem or "busy" in problem:
        return (f"--llmperf-history {shown}: the file is locked by another process "
                f"({problem}); wait for it to finish, or give this session another file with "
                "--llmperf-history PATH")
    if "not a database" in problem or "malformed" in problem:
        return (f"--llmperf-history {shown}: not a usable SQLite database ({problem}); move it "
                "away or point --llmperf-history at another file")
    return (f"--llmperf-history {shown}: cannot use the file ({problem}); choose a writable path "
            "with --llmperf-history PATH, or turn the store off with --llmperf-history off")
