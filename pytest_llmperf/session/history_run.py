"""The session's side of the results store (pytest_llmperf/history/): opened when pytest starts,
so a store this session cannot use is refused before anything is measured; read for the trend
gate and for baselines from history while tests are judged; appended to at the end of the
session by the controller alone (pytest-xdist workers hand it their results first, hooks.py).

A SQLite file that does not exist yet is not created at the start (a `pytest --help` or a
session without any llmperf test must leave nothing behind): its folder is checked for writing
instead, and the file is made when the first run is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pytest_llmperf.history import location, record, saved_runs
from pytest_llmperf.history.acked_baseline import AcknowledgedBaseline
from pytest_llmperf.history.from_history import baseline_estimates
from pytest_llmperf.history.identity import engine_hash, family, series_key, workload_hash
from pytest_llmperf.history.store import RECORD_WAIT_S, HistoryError, HistoryStore, Point
from pytest_llmperf.history.trend import TrendCheck
from pytest_llmperf.machine.clocks import read_clocks
from pytest_llmperf.machine.hardware import Fingerprint, host_name
from pytest_llmperf.reports.files import check_writable, merge_documents
from pytest_llmperf.reports.runfile import run_text
from pytest_llmperf.session.provenance import git_commit
from pytest_llmperf.verdict import gate, references
from pytest_llmperf.verdict.atomic_file import atomic_write
from pytest_llmperf.verdict.stored_run import StoredRun

__all__ = ["HistoryConfig", "SessionHistory", "fetch_saved", "open_history", "record_run"]

# How many stored runs of a series the trend gate and baselines from history read: the last
# change point before them is all that matters, and a level is well known after this many.
READ_LAST = 200


@dataclass
class SessionHistory:
    where: location.Location
    store: HistoryStore | None  # None: nothing stored yet, or not needed in this process
    fingerprint: Fingerprint
    trend: bool = False
    window: int = 3
    from_history: int | None = None
    rootdir: Path = Path(".")
    save_as: str | None = None  # --llmperf-save NAME: kept in the store too (saved_runs.py)
    notes: list[str] = field(default_factory=list)  # lines for the summary's end
    _now: dict[str, Any] = field(default_factory=dict)

    def points(self, subject: references.Subject, gated) -> tuple[list[Point], Point]:
        """The stored points of the subject's series, and the run being measured."""
        recorded = self.fingerprint.to_dict()  # as the store's rows keep it
        key = series_key(subject.test_id, family(recorded),
                         engine_hash(subject.engine), workload_hash(subject.workload))
        stored = self.store.points(subject.test_id, gated, series=key, last=READ_LAST) \
            if self.store else []
        if not self._now:
            self._now = {"commit": git_commit(self.rootdir),
                         "clocks": read_clocks(self.fingerprint.hardware.is_gpu)}
        now = Point(run_id=None, run_uid="", started_at=None, commit=self._now["commit"],
                    verdict="", series=key, family=family(recorded), engine_label="",
                    workload_label="", fingerprint=recorded,
                    engine=dict(subject.engine), gate={}, clocks=self._now["clocks"],
                    host=host_name() or "")
        return stored, now

    def trend_checks(self, subject: references.Subject, gated,
                     baseline_at: datetime | None = None) -> tuple[TrendCheck, ...]:
        """The trend gate's check of this measurement (the judge asks only with --llmperf-trend,
        and only of a measurement of its engine), with the test's acknowledgements and when its
        committed table was written (`baseline_at`)."""
        stored, now = self.points(subject, gated)
        acks = self.store.acks(subject.test_id) if self.store else ()
        return (TrendCheck(stored, now, self.where.shown, subject.test_id, self.window, acks,
                           baseline_at=baseline_at),)

    def acknowledging(self, subject: references.Subject, gated,
                      baseline: references.Reference) -> references.Reference:
        """The baseline, with this test's acknowledgements applied to its regressions
        (history/acked_baseline.py); as it is where this process reads no store or the test
        has none."""
        acks = self.store.acks(subject.test_id) if self.store else []
        if not acks:
            return baseline
        stored, now = self.points(subject, gated)
        return AcknowledgedBaseline(baseline, tuple(acks), now.family or None, tuple(stored))

    def baseline_current(self, subject: references.Subject, current: references.Current, gated,
                         tolerance: float | None) -> tuple[references.Current, str | None]:
        """With --llmperf-from-history N, the estimates a baseline update writes
        (from_history.py), and the note that says over which runs."""
        stored, now = self.points(subject, gated)
        band = gate.DEFAULT_TOLERANCE if tolerance is None else tolerance
        estimates, note = baseline_estimates(stored, now, current.estimates, gated,
                                             self.from_history, band)
        return references.Current(estimates, current.runs), note


@dataclass(frozen=True)
class HistoryConfig:
    """What the options say of the results store (session/settings.py; the plugin makes it:
    plugin/configs.py)."""

    history: str = location.DEFAULT  # a path, a URL, or location.OFF
    rootdir: Path = Path(".")
    trend: bool = False
    trend_window: int = 3
    from_history: int | None = None
    update_baselines: bool = False
    save_as: str | None = None  # --llmperf-save NAME (--llmperf-output save=NAME)


def open_history(config: HistoryConfig, fingerprint: Fingerprint, *, worker: bool
                 ) -> SessionHistory | None:
    """The session's store, checked now (ValueError: one line naming the store and the fix)."""
    if config.from_history and not config.update_baselines:
        raise ValueError("--llmperf-from-history N says where updated baselines come from; use "
                         "it with --llmperf-update-baselines")
    if config.history == location.OFF:
        if config.trend or config.from_history:
            flag = "--llmperf-trend" if config.trend else "--llmperf-from-history"
            raise ValueError(f"{flag} reads the results store, which is off "
                             "(--llmperf-history off); give it a store with --llmperf-history "
                             "PATH|URL")
        return None
    where = location.resolve(config.history, config.rootdir)
    reads = bool(config.trend or config.from_history)
    store = None
    if where.is_sqlite and not where.path.exists():
        if not worker:
            check_writable("--llmperf-history", Path(where.shown), where.path)
    elif reads or not worker:
        store = HistoryStore.open(where, check_write=not worker)
    return SessionHistory(where, store, fingerprint, trend=config.trend,
                          window=config.trend_window, from_history=config.from_history,
                          rootdir=config.rootdir, save_as=config.save_as)


def fetch_saved(history: SessionHistory | None, name: str | None, runs_dir: Path) -> None:
    """--llmperf-compare NAME whose file is not in `runs_dir` (a runner that starts empty): the
    run saved as NAME in the store, written there, so the comparison reads it as it reads any
    saved run; the summary says where it came from. Nothing when the file is there, the value
    is a path, or the store holds no such run (the comparison's own line then says so)."""
    if history is None or history.store is None or not name or name.endswith(".json"):
        return
    path = runs_dir / f"{name}.json"
    if path.exists():
        return
    found = saved_runs.find(history.store, name, history.fingerprint.host)
    if found is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, found.text)
    except OSError as exc:
        raise HistoryError(f"--llmperf-compare {name}: the run saved in {history.where.shown} "
                           f"could not be written to {path} ({exc.strerror or exc}); make "
                           f"{runs_dir} writable") from None
    history.notes.append(
        f"--llmperf-compare {name}: read from the results store {history.where.shown} (saved on "
        f"{found.host or 'an unnamed host'} at {found.recorded_at:%Y-%m-%d %H:%M} UTC)")


def record_run(history: SessionHistory | None, payloads: list[dict[str, Any]]) -> list[str]:
    """Append the session's run (every worker's results) to the store and, with --llmperf-save
    NAME, keep its run file there under NAME (history/saved_runs.py); the summary's lines."""
    document = merge_documents([p.get("document") for p in payloads])
    if history is None:
        return []
    if not document or not document["llmperf"]["results"]:
        return list(history.notes)
    clocks = read_clocks(history.fingerprint.hardware.is_gpu)
    run = record.from_document(document, clocks=clocks)
    try:
        store = HistoryStore.open(history.where, wait_s=RECORD_WAIT_S)
        try:
            number = store.record(run)
            if history.save_as:
                # The text --llmperf-save wrote: the document through the run file's model.
                text = run_text(StoredRun.from_plain(document).to_plain())
                saved_runs.save(store, history.save_as, run.host, text)
        finally:
            store.close()
    except HistoryError as exc:
        return [*history.notes, f"results not recorded in the history: {exc}"]
    count = len(run.results)
    saved = (f"; saved there as {history.save_as!r} too, for --llmperf-compare "
             f"{history.save_as} on a runner without this one's files"
             if history.save_as else "")
    return [*history.notes, f"history: run {number} recorded in {history.where.shown} "
            f"({count} result{'s' if count > 1 else ''}){saved}"]
