"""`HistoryStore`: the one interface to the results store, over SQLAlchemy Core, for SQLite
(the embedded default) and PostgreSQL (shared by many runners).

Every problem with the store becomes a `HistoryError` whose message is one line naming the store
(password hidden) and the fix: an unreachable or wrong URL, a store of a newer schema, a locked
file. `open` finds them before anything is measured; a failure at the end of a session is a line
in its summary. A run is appended in one transaction: a failed append leaves the store as it was,
and what was stored before is never touched (the store only ever appends).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, ProgrammingError, SQLAlchemyError

from pytest_llmperf.errors import InputError
from pytest_llmperf.history import identity, location, postgres, schema, sqlite
from pytest_llmperf.history.acks import ACK, Ack
from pytest_llmperf.history.record import MetricValue, RunRecord
from pytest_llmperf.verdict.gate import DEFAULT_GATED

__all__ = ["HistoryError", "HistoryStore", "Point"]

# How long the start of a session waits for a lock another writer holds, and the end (whose
# run must not be lost to a neighbour's few milliseconds of writing).
OPEN_WAIT_S = 5.0
RECORD_WAIT_S = 30.0
# Two sessions creating a new store at once: the loser of the race reads the winner's schema.
MIGRATE_TRIES = 5


class HistoryError(InputError):
    """The results store cannot be used; the message is one line naming it and the fix."""


@dataclass(frozen=True)
class Point:
    """One stored result of a test: its run, its verdict, what it ran with, and its metrics."""

    run_id: int | None  # None: the run being measured, not stored yet
    run_uid: str
    started_at: datetime | None
    commit: str | None
    verdict: str
    series: str
    family: str
    engine_label: str
    workload_label: str
    fingerprint: dict[str, Any]
    engine: dict[str, Any]
    gate: dict[str, Any]
    clocks: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    hardware_class: str = ""
    key: str = ""
    values: dict[str, MetricValue] = field(default_factory=dict)
    host: str = ""  # the machine's name (platform.node), which "what changed" names
    ci_url: str = ""  # the CI job that made the run (record.ci_url), for the dashboard's links


def _problem(exc: BaseException) -> str:
    """The driver's own words, first line only (SQLAlchemy appends SQL and a link)."""
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    return (str(cause).strip().splitlines() or [type(cause).__name__])[0]


class HistoryStore:
    """A store at `where` (location.Location). Use `HistoryStore.open`."""

    def __init__(self, where: location.Location, engine: Engine) -> None:
        self.where = where
        self._engine = engine

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, where: location.Location, *, wait_s: float | None = None,
             check_write: bool = True) -> HistoryStore:
        """Connect, bring the schema forward, and (with `check_write`) take and release the
        write lock once, so a store this session could not write to is refused now. `wait_s`:
        how long to wait for another writer's lock (default OPEN_WAIT_S)."""
        wait_s = OPEN_WAIT_S if wait_s is None else wait_s
        try:
            if where.is_sqlite:
                engine = sqlite.create_engine(where.url, wait_s, where.path)
            else:
                engine = postgres.create_engine(where.url, wait_s)
        except (ImportError, OSError) as exc:
            raise HistoryError(f"--llmperf-history {where.shown}: {exc}") from None
        store = cls(where, engine)
        with store._errors():
            store._migrate()
            if check_write:
                with store._write():
                    pass
        return store

    def close(self) -> None:
        self._engine.dispose()

    @contextmanager
    def _errors(self):
        """SQLAlchemy's errors as HistoryError lines (the backend's words and fix)."""
        try:
            yield
        except SQLAlchemyError as exc:
            explain = sqlite.explain if self.where.is_sqlite else postgres.explain
            raise HistoryError(explain(_problem(exc), self.where.shown)) from None

    @contextmanager
    def _write(self):
        with self._engine.connect().execution_options(**{sqlite.WRITE: True}) as connection:
            with connection.begin():
                yield connection

    @contextmanager
    def transaction(self, write: bool = True):
        """A connection in one write transaction (`write`), else one that only reads, for the
        tables with a module of their own (episode_book.py); SQLAlchemy's errors become
        HistoryError lines."""
        with self._errors():
            if write:
                with self._write() as connection:
                    yield connection
            else:
                with self._engine.connect() as connection:
                    yield connection

    def _migrate(self) -> None:
        latest = len(schema.MIGRATIONS)
        for attempt in range(MIGRATE_TRIES):
            with self._engine.connect() as connection:
                current = schema.stored_version(connection)
            self._refuse_newer(current, latest)
            if current == latest:
                return
            try:
                with self._write() as connection:
                    current = schema.stored_version(connection)  # again, under the lock
                    self._refuse_newer(current, latest)
                    if current < latest:
                        schema.upgrade(connection, current)
                return
            except (IntegrityError, ProgrammingError):  # another session created it first
                if attempt == MIGRATE_TRIES - 1:
                    raise
                time.sleep(0.1 * (attempt + 1))

    def _refuse_newer(self, current: int, latest: int) -> None:
        if current > latest:
            raise HistoryError(
                f"--llmperf-history {self.where.shown}: the store is at schema version "
                f"{current}, newer than this pytest-llmperf's {latest}; upgrade pytest-llmperf, "
                "or point --llmperf-history at another store")

    # ------------------------------------------------------------------ writing

    def record(self, run: RunRecord) -> int:
        """Append one run; returns its number (runs.id). HistoryError if it could not be
        stored; then nothing of it is."""
        with self._errors(), self._write() as connection:
            run_id = connection.execute(schema.runs.insert().values(
                run_uid=run.run_uid, started_at=run.started_at,
                recorded_at=datetime.now(timezone.utc), commit=run.commit,
                hardware_class=run.fingerprint.get("hardware_class"), family=run.family,
                fingerprint=run.fingerprint, clocks=run.clocks, host=run.host,
                ci_url=run.ci_url)).inserted_primary_key[0]
            for result in run.results:
                self._record_result(connection, run_id, run.family, result)
        return int(run_id)

    @staticmethod
    def _record_result(connection: Connection, run_id: int, family: str, result) -> None:
        engine, workload = identity.engine_hash(result.engine), \
            identity.workload_hash(result.workload)
        result_id = connection.execute(schema.results.insert().values(
            run_id=run_id, test_id=result.test_id, key=result.key, verdict=result.verdict,
            series=identity.series_key(result.test_id, family, engine, workload),
            engine_hash=engine, engine=result.engine, engine_label=result.engine_label,
            workload_hash=workload, workload=result.workload,
            workload_label=result.workload_label, gate=result.gate,
            extra=result.extra)).inserted_primary_key[0]
        rows = [{"result_id": result_id, "name": name, "value": m.value, "spread": m.spread,
                 "n": m.n, "direction": m.direction} for name, m in result.metrics.items()]
        if rows:
            connection.execute(schema.metric_values.insert(), rows)

    def record_bisect_step(self, step_key: str, test_id: str, a: str, b: str, outcome: str,
                           detail: dict[str, Any]) -> None:
        """Keep one `llmperf bisect` step (bisect/run.py) under its key."""
        with self._errors(), self._write() as connection:
            connection.execute(schema.bisect_steps.insert().values(
                step_key=step_key, recorded_at=datetime.now(timezone.utc), test_id=test_id,
                a=a, b=b, outcome=outcome, detail=detail))

    def record_ack(self, ack: Ack) -> None:
        """Keep one acknowledgement (acks.py, `llmperf ack`)."""
        with self._errors(), self._write() as connection:
            connection.execute(schema.acks.insert().values(
                test_id=ack.test_id, metric=ack.metric, reason=ack.reason, who=ack.who,
                recorded_at=ack.recorded_at, until=ack.until, shape=ack.shape,
                kind=None if ack.kind == ACK else ack.kind))

    # ------------------------------------------------------------------ reading

    def acks(self, test_id: str | None = None) -> list[Ack]:
        """The acknowledgements of `test_id` (None: of every test), oldest first."""
        table = schema.acks
        query = select(table).order_by(table.c.id)
        if test_id is not None:
            query = query.where(table.c.test_id == test_id)
        with self._errors(), self._engine.connect() as connection:
            rows = list(connection.execute(query).mappings())
        return [Ack(row["test_id"], row["metric"], row["reason"], row["who"],
                    _utc(row["recorded_at"]), _utc(row["until"]), row["shape"],
                    row["kind"] or ACK)
                for row in rows]

    def metric_names(self, test_id: str) -> list[str]:
        """Every metric name stored for any result of `test_id`."""
        values, results = schema.metric_values, schema.results
        query = (select(values.c.name).distinct()
                 .join(results, results.c.id == values.c.result_id)
                 .where(results.c.test_id == test_id).order_by(values.c.name))
        with self._errors(), self._engine.connect() as connection:
            return [row[0] for row in connection.execute(query)]

    def bisect_step(self, step_key: str) -> tuple[str, dict[str, Any]] | None:
        """The newest step kept under `step_key`: its outcome and detail; None if none is."""
        steps = schema.bisect_steps
        query = (select(steps.c.outcome, steps.c.detail).where(steps.c.step_key == step_key)
                 .order_by(steps.c.id.desc()).limit(1))
        with self._errors(), self._engine.connect() as connection:
            row = connection.execute(query).first()
        return None if row is None else (row[0], dict(row[1] or {}))

    def test_ids(self) -> list[tuple[str, int]]:
        """Every test the store holds, with its number of stored results."""
        results = schema.results
        query = (select(results.c.test_id, func.count()).group_by(results.c.test_id)
                 .order_by(results.c.test_id))
        with self._errors(), self._engine.connect() as connection:
            return [(row[0], int(row[1])) for row in connection.execute(query)]

    def points(self, test_id: str, names: Iterable[str] | None, *, series: str | None = None,
               last: int | None = None, also: Iterable[str] = ()) -> list[Point]:
        """The stored results of `test_id` (of one series, if given), oldest first, with the
        metrics `names` (None: the metrics each result's test gated, and those of `also` where
        stored); `last`: only the newest so many."""
        runs, results = schema.runs, schema.results
        query = (select(results, runs.c.run_uid, runs.c.started_at, runs.c.commit,
                        runs.c.family, runs.c.fingerprint, runs.c.clocks, runs.c.hardware_class,
                        runs.c.host, runs.c.ci_url)
                 .join(runs, runs.c.id == results.c.run_id)
                 .where(results.c.test_id == test_id))
        if series is not None:
            query = query.where(results.c.series == series)
        query = query.order_by(results.c.run_id.desc(), results.c.id.desc())
        if last is not None:
            query = query.limit(last)
        with self._errors(), self._engine.connect() as connection:
            found = list(connection.execute(query).mappings())
            names = list(names) if names is not None else [*_gated(found), *also]
            metrics = self._values(connection, [row["id"] for row in found], names)
        return [_point(row, metrics.get(row["id"], {})) for row in reversed(found)]

    @staticmethod
    def _values(connection: Connection, result_ids: Sequence[int], names: list[str]
                ) -> dict[int, dict[str, MetricValue]]:
        values = schema.metric_values
        out: dict[int, dict[str, MetricValue]] = {}
        for start in range(0, len(result_ids), 5000):  # within every backend's parameter limit
            query = select(values).where(values.c.result_id.in_(result_ids[start:start + 5000]),
                                         values.c.name.in_(names))
            for row in connection.execute(query).mappings():
                out.setdefault(row["result_id"], {})[row["name"]] = MetricValue(
                    row["value"], row["spread"], row["n"], row["direction"])
        return out


def _gated(rows) -> list[str]:
    """Every metric the results' tests gated (gate.DEFAULT_GATED where a test named none)."""
    names: dict[str, None] = {}
    for row in rows:
        for name in (row["gate"] or {}).get("metrics") or DEFAULT_GATED:
            names[name] = None
    return list(names)


def _utc(when: datetime | None) -> datetime | None:
    if when is not None and when.tzinfo is None:  # SQLite keeps no zone: stored as UTC
        return when.replace(tzinfo=timezone.utc)
    return when


def _point(row, values: dict[str, MetricValue]) -> Point:
    started = _utc(row["started_at"])
    return Point(run_id=row["run_id"], run_uid=row["run_uid"], started_at=started,
                 commit=row["commit"], verdict=row["verdict"], series=row["series"],
                 family=row["family"] or "", engine_label=row["engine_label"] or "",
                 workload_label=row["workload_label"] or "",
                 fingerprint=row["fingerprint"] or {}, engine=row["engine"] or {},
                 gate=row["gate"] or {}, clocks=row["clocks"] or {}, extra=row["extra"] or {},
                 hardware_class=row["hardware_class"] or "", key=row["key"], values=values,
                 host=row["host"] or "", ci_url=row["ci_url"] or "")
