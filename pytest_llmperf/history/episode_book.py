"""Episodes and their messages in the results store (schema 5: episodes, outbox).

A night's step (episodes.py) is written in one transaction with a message per event and
channel; `deliver` then hands each undelivered message to its channel's sender and marks it
delivered the moment the sender took it. A sender that fails leaves the message in the outbox
with its error, for the next run: a message is never lost and never delivered twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timezone

from sqlalchemy import func, select

from pytest_llmperf.history import schema
from pytest_llmperf.history.episodes import STALE, Episode, Step
from pytest_llmperf.history.store import HistoryStore

__all__ = ["Message", "Sender", "deliver", "last_runs", "open_episodes", "record_step"]

# A channel's sender: the event ("opened", "resolved", "summary") and the text in; None when
# delivered, else the one line that says why not.
Sender = Callable[[str, str], "str | None"]
_COLUMNS = [f.name for f in fields(Episode) if f.name != "id"]


@dataclass(frozen=True)
class Message:
    id: int
    event: str
    channel: str
    text: str
    attempts: int


def _utc(when: datetime | None) -> datetime | None:
    """SQLite keeps no zone: its times were stored as UTC."""
    return when.replace(tzinfo=timezone.utc) if when and when.tzinfo is None else when


def _episode(row) -> Episode:
    values = {name: row[name] for name in _COLUMNS}
    for name in ("opened_at", "last_seen_at", "resolved_at"):
        values[name] = _utc(values[name])
    return Episode(**values, id=row["id"])


def open_episodes(store: HistoryStore) -> list[Episode]:
    table = schema.episodes
    query = select(table).where(table.c.resolved_at.is_(None)).order_by(table.c.id)
    with store.transaction(write=False) as connection:
        return [_episode(row) for row in connection.execute(query).mappings()]


def last_runs(store: HistoryStore) -> dict[str, datetime]:
    """Each runner shape's newest run (its start, else when it was stored)."""
    runs = schema.runs
    when = func.max(func.coalesce(runs.c.started_at, runs.c.recorded_at))
    query = select(runs.c.family, when).where(runs.c.family.is_not(None)).group_by(runs.c.family)
    with store.transaction(write=False) as connection:
        return {row[0]: _utc(row[1]) for row in connection.execute(query)}


def _text(event: str, episode: Episode) -> str:
    if event == "resolved":
        return f"resolved ({episode.resolution}): {episode.line}"
    return f"{'stale' if episode.kind == STALE else 'opened'}: {episode.line}"


def record_step(store: HistoryStore, step: Step, channels: Iterable[str], now: datetime,
                summary: str | None = None) -> None:
    """Store the step and a message per opened or resolved episode (and the night's
    `summary`, where given) for each of `channels`, in one transaction."""
    table, channels = schema.episodes, list(channels)
    with store.transaction() as connection:
        events = []
        for episode in step.opened:
            values = {name: getattr(episode, name) for name in _COLUMNS}
            new_id = connection.execute(table.insert().values(**values)).inserted_primary_key[0]
            events.append((new_id, "opened", _text("opened", episode)))
        for episode in step.continued + step.resolved:
            connection.execute(table.update().where(table.c.id == episode.id).values(
                last_seen_at=episode.last_seen_at, nights=episode.nights, line=episode.line,
                resolved_at=episode.resolved_at, resolution=episode.resolution))
        events += [(e.id, "resolved", _text("resolved", e)) for e in step.resolved]
        if summary is not None:
            events.append((None, "summary", summary))
        rows = [{"episode_id": episode_id, "event": event, "channel": channel, "text": text,
                 "created_at": now, "attempts": 0} for episode_id, event, text in events
                for channel in channels]
        if rows:
            connection.execute(schema.outbox.insert(), rows)


def _pending(store: HistoryStore) -> list[Message]:
    table = schema.outbox
    query = select(table).where(table.c.delivered_at.is_(None)).order_by(table.c.id)
    with store.transaction() as connection:
        return [Message(row["id"], row["event"], row["channel"], row["text"], row["attempts"])
                for row in connection.execute(query).mappings()]


def deliver(store: HistoryStore, senders: Mapping[str, Sender], now: datetime) -> list[str]:
    """Send every undelivered message whose channel has a sender, oldest first; a channel that
    fails once is left alone until the next run (its messages stay, in their order). Returns a
    line per channel that failed."""
    table, said, failed = schema.outbox, [], set()
    for message in _pending(store):
        sender = senders.get(message.channel)
        if sender is None or message.channel in failed:
            continue  # not configured on this run, or refusing: kept for the next
        problem = sender(message.event, message.text)
        values = {"attempts": message.attempts + 1, "last_error": problem}
        if problem is None:
            values["delivered_at"] = now
        else:
            failed.add(message.channel)
            said.append(f"{problem} (kept in the store's outbox for the next run)")
        with store.transaction() as connection:
            connection.execute(table.update().where(table.c.id == message.id).values(**values))
    return said
