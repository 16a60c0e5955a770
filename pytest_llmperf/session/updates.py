"""Baseline updates a session owes: made when a test is judged, written only once the test as a
whole has passed (a test that fails after measuring must not move its baseline)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.verdict import baselines, references
from pytest_llmperf.verdict.status import Status


@dataclass(frozen=True)
class PendingUpdate:
    ref: references.BaselineRef
    entries: dict[str, baselines.BaselineEntry]
    provenance: dict[str, Any]
    id: MeasurementId  # the measurement it is made of, whose verdict says what became of it
    local: bool = False  # this machine's first-run baseline (not a committed file)


class BaselineUpdates:
    """The pending updates of each test (by node id), and their writing."""

    def __init__(self) -> None:
        self.pending: dict[str, list[PendingUpdate]] = defaultdict(list)

    def add(self, nodeid: str, update: PendingUpdate) -> None:
        self.pending[nodeid].append(update)

    def apply(self, nodeid: str, passed: bool, ledger: Ledger) -> list[str]:
        """Write a test's pending updates if it passed. Returns the updates that could not be
        written (one line each: file, key, fix); the measurements stay in the summary and the
        run file either way."""
        errors = []
        for update in self.pending.pop(nodeid, []):
            nodeid = update.ref.nodeid  # as the user types it
            if not passed:
                ledger.note(nodeid, "baseline not updated (the test failed)")
                continue
            try:
                update.ref.path.parent.mkdir(parents=True, exist_ok=True)
                baselines.update_baseline(update.ref.path, update.ref.key, update.entries,
                                          update.provenance)
            except baselines.BaselineError as exc:
                errors.append(f"baseline not updated: {exc}")
                ledger.judged(update.id, Status.ERROR)
                continue
            except OSError as exc:  # a read-only checkout, a full disk: this test's failure
                errors.append(f"baseline not updated: {update.ref.shown}: "
                              f"{exc.strerror or exc}; make it writable and run again")
                ledger.judged(update.id, Status.ERROR)
                continue
            where = f'{update.ref.shown} :: "{update.ref.key}"'
            if update.local:  # the verdict stays: nothing was gated yet
                ledger.note(nodeid, f"this machine's first-run baseline recorded: {where}; "
                                    "the next run here gates against it")
                continue
            ledger.note(nodeid, f"baseline updated: {where}")
            ledger.judged(update.id, Status.UPDATED)
        return errors
