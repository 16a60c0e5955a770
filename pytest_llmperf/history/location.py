"""What `--llmperf-history PATH|URL|off` names: a SQLite file (the default,
`.llmperf/history.sqlite` under pytest's rootdir), a `sqlite:///` URL, a `postgresql://` URL, or
nothing at all.

The URL is given to SQLAlchemy (https://docs.sqlalchemy.org/en/20/core/engines.html#database-urls)
with the psycopg 3 driver for PostgreSQL (`postgresql+psycopg://`): SQLAlchemy's default driver
for a bare `postgresql://` is psycopg2, which this project does not install. Every message shows
the URL with its password hidden: a CI job passes the URL from a secret.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

__all__ = ["DEFAULT", "OFF", "OFF_WORDS", "Location", "parse_history", "resolve"]

DEFAULT = ".llmperf/history.sqlite"
OFF = "off"
OFF_WORDS = ("off", "none", "no", "false", "0")
ACCEPTS = "expected a file path, a sqlite:/// or postgresql:// URL, or off"
_POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")


def parse_history(text: str) -> str:
    """The option's value: OFF, else the path or URL as written (checked here, so a typo is
    refused where it was written, before any measuring). Not None for off: the plugin reads a
    None from the command line as "not given" (settings.py)."""
    value = text.strip()
    if value.lower() in OFF_WORDS:
        return OFF
    if not value:
        raise ValueError(ACCEPTS)
    if "://" in value:
        _url(value)
    return value


def _url(text: str) -> URL:
    try:
        url = make_url(text)
    except ArgumentError:
        raise ValueError(ACCEPTS) from None
    if url.drivername in _POSTGRES_SCHEMES:
        return url.set(drivername="postgresql+psycopg")
    if url.drivername in ("sqlite", "sqlite+pysqlite") and url.database:
        return url
    raise ValueError(ACCEPTS)


@dataclass(frozen=True)
class Location:
    """A store's SQLAlchemy URL, and what messages call it (its password hidden)."""

    url: URL
    path: Path | None = None  # the SQLite file, for a file store

    @property
    def shown(self) -> str:
        if self.path is not None:  # as the baselines' paths are shown: from where pytest ran
            shown = os.path.relpath(self.path)
            return str(self.path) if shown.startswith("..") else shown
        return self.url.render_as_string(hide_password=True)

    @property
    def is_sqlite(self) -> bool:
        return self.url.get_backend_name() == "sqlite"


def resolve(value: str, rootdir: Path) -> Location:
    """The Location of an option value that is not off; a relative path is under `rootdir`."""
    if "://" in value:
        url = _url(value)
        if url.get_backend_name() == "sqlite":
            path = Path(url.database)
            path = path if path.is_absolute() else rootdir / path
            return Location(url.set(database=str(path)), path)
        return Location(url)
    path = Path(value)
    path = path if path.is_absolute() else rootdir / path
    return Location(URL.create("sqlite", database=str(path)), path)
