"""Runs saved by name in the results store (schema 6: saved_runs), beside `.llmperf/runs/`.

A driver or firmware before/after (docs/upgrades.md) is two nights on one node: the "before" run
is saved one night (`--llmperf-save NAME`) and compared against the next (`--llmperf-compare
NAME`). On a runner that starts empty, `.llmperf/runs/` of the first night is gone by the
second; a store the team keeps (PostgreSQL, or a SQLite file on a volume) is not. So a session
with a store also keeps its saved run there, and a comparison whose file is not on disk reads it
back from the store, newest first, this host's before any other's (another host's is then
refused by the same-node check, verdict/same_node.py, as a file from there would be).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import case, select

from pytest_llmperf.history import schema
from pytest_llmperf.history.store import HistoryStore

__all__ = ["StoredSave", "find", "names", "save"]


@dataclass(frozen=True)
class StoredSave:
    name: str
    host: str | None
    recorded_at: datetime
    text: str  # the run file, as reports/runfile.write_run wrote it


def save(store: HistoryStore, name: str, host: str | None, text: str) -> None:
    """Keep a run file's `text` under `name`; an older save of the name stays."""
    with store.transaction() as connection:
        connection.execute(schema.saved_runs.insert().values(
            name=name, host=host, recorded_at=datetime.now(timezone.utc), document=text))


def find(store: HistoryStore, name: str, host: str | None) -> StoredSave | None:
    """The newest run saved as `name` on `host`, else the newest on any host; None if none."""
    table = schema.saved_runs
    this_host_first = case((table.c.host == host, 0), else_=1) if host else None
    order = [table.c.id.desc()] if this_host_first is None else [this_host_first,
                                                                 table.c.id.desc()]
    query = select(table).where(table.c.name == name).order_by(*order).limit(1)
    with store.transaction(write=False) as connection:
        row = connection.execute(query).mappings().first()
    if row is None:
        return None
    when = row["recorded_at"]
    if when.tzinfo is None:  # SQLite keeps no zone: stored as UTC
        when = when.replace(tzinfo=timezone.utc)
    return StoredSave(row["name"], row["host"], when, row["document"])


def names(store: HistoryStore) -> list[str]:
    """Every name a run was saved under, sorted."""
    table = schema.saved_runs
    with store.transaction(write=False) as connection:
        return [row[0] for row in connection.execute(
            select(table.c.name).distinct().order_by(table.c.name))]
