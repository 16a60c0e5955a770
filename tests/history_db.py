"""A real PostgreSQL server for the results store's tests: Debian's `postgresql` package (which
scripts/install-cpu installs), a fresh cluster in a temporary folder on a free port, started
once per test session and stopped at its end. No mock: the store's PostgreSQL path is tested
against the server it will meet.

PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` system user
the package creates, and initdb and pg_ctl run as that user (runuser). The cluster trusts local
connections (initdb -A trust): it listens on 127.0.0.1 only and lives as long as the tests.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

__all__ = ["postgres_db", "postgres_server"]

USER = "llmperf"
_counter = itertools.count()


def _binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_owner(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _start(binaries: Path, folder: Path, port: int) -> None:
    data = folder / "data"
    subprocess.run(_as_owner([str(binaries / "initdb"), "-D", str(data), "-U", USER,
                              "-A", "trust", "--no-sync", "-E", "UTF8"]),
                   check=True, capture_output=True, timeout=120)
    options = (f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off "
               "-c max_connections=60")
    subprocess.run(_as_owner([str(binaries / "pg_ctl"), "-D", str(data), "-o", options,
                              "-l", str(folder / "server.log"), "-w", "-t", "60", "start"]),
                   check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="session")
def postgres_server():
    """The URL of a running PostgreSQL server's `postgres` database (its superuser USER)."""
    binaries = _binaries()
    if binaries is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed; scripts/install-cpu installs it")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql, or run "
                    "scripts/install-cpu)")
    folder = Path(tempfile.mkdtemp(prefix="llmperf-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    port = _free_port()
    _start(binaries, folder, port)
    try:
        yield f"postgresql://{USER}@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_owner([str(binaries / "pg_ctl"), "-D", str(folder / "data"),
                                  "-m", "fast", "-w", "stop"]), capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def postgres_db(postgres_server):
    """The URL of a new, empty database on the session's server, for one test."""
    import psycopg

    name = f"llmperf_test_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(postgres_server.replace("postgresql://", "postgresql://", 1),
                         autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return postgres_server.rsplit("/", 1)[0] + f"/{name}"
