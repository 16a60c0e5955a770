"""What the PostgreSQL backend needs beyond SQLAlchemy Core: the psycopg 3 driver, a bounded
connect, and the line a refused connection gets.

Concurrent writers (pytest-xdist controllers of many runners) need nothing more: each run is
appended in one transaction and its ids come from the tables' own sequences, so two runs never
collide, and a failed run leaves nothing behind. psycopg's connect_timeout:
https://www.psycopg.org/psycopg3/docs/api/connections.html (libpq's parameter keywords).
"""

from __future__ import annotations

from sqlalchemy import create_engine as sa_create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

__all__ = ["MISSING_DRIVER", "create_engine", "explain"]

MISSING_DRIVER = ("postgresql:// needs the psycopg 3 driver: pip install "
                  "'pytest-llmperf[postgres]' (or psycopg[binary])")


def create_engine(url, wait_s: float) -> Engine:
    try:
        import psycopg  # noqa: F401  (imported by SQLAlchemy on connect; checked here for the line)
    except ImportError:
        raise ImportError(MISSING_DRIVER) from None
    # One connection per use: a session connects a few times (start, each series, the end).
    return sa_create_engine(url, poolclass=NullPool,
                            connect_args={"connect_timeout": max(1, round(wait_s))})


def explain(problem: str, shown: str) -> str:
    """One line for a PostgreSQL error `problem` on the store `shown`, with the fix."""
    return (f"--llmperf-history {shown}: cannot use the database ({problem}); start the "
            "server or fix the URL (host, port, database, user), or turn the store off with "
            "--llmperf-history off")
