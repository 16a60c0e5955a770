"""The session's ledger: one record per measurement (verdict/measurement_record.py), in the
order they were made, and the notes under the summary in the order they happened. The runner adds
what it measured, the judge what it made of it; the outputs and the results store read it.

One ledger per process: under pytest-xdist each worker keeps its own, and the controller merges
the reports they build from it (session/outputs.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.machine.hardware import Fingerprint
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.reports.notes import Note
from pytest_llmperf.verdict.measurement_record import ANNOTATIONS, Extras, MeasurementRecord
from pytest_llmperf.verdict.status import Status

__all__ = ["Ledger"]


@dataclass
class Ledger:
    # The machine every record was measured on: typed until a file is written (to_dict).
    fingerprint: Fingerprint
    records: list[MeasurementRecord] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    _by_id: dict[MeasurementId, MeasurementRecord] = field(default_factory=dict, repr=False)

    @property
    def hardware_class(self) -> str:
        """The class the machine's baselines are filed under."""
        return self.fingerprint.hardware.hardware_class

    def entry(self, id: MeasurementId) -> MeasurementRecord:
        """The record of `id`, begun now if this is the first word of it."""
        if id not in self._by_id:
            self._by_id[id] = MeasurementRecord(id)
            self.records.append(self._by_id[id])
        return self._by_id[id]

    def add(self, id: MeasurementId, result: Result) -> MeasurementRecord:
        """What the measurement `id` measured. An id measured again (a search probing one load
        twice) gets a record of its own: each is a row of the summary."""
        record = self._by_id.get(id)
        if record is None or record.result is not None:
            record = self._by_id[id] = MeasurementRecord(id)
            self.records.append(record)
        record.result = result
        return record

    def status(self, id: MeasurementId) -> Status | None:
        record = self._by_id.get(id)
        return record.status if record else None

    def judged(self, id: MeasurementId, status: Status) -> None:
        self.entry(id).status = status

    def annotate(self, id: MeasurementId, **annotations: Any) -> None:
        """What the run file keeps with a result beyond its metrics and breakdowns: "ab",
        "capacity", "detectable" (MeasurementRecord)."""
        record = self.entry(id)
        for name, value in annotations.items():
            if name not in ANNOTATIONS:
                raise TypeError(f"annotate() got an unknown annotation {name!r}")
            setattr(record, name, value)

    def add_extras(self, id: MeasurementId, estimates: dict[str, Estimate], detail: str) -> None:
        """Metrics that are not a run (an SLO capacity, an offline throughput), for the
        summary."""
        self.entry(id).extras = Extras(estimates, detail)

    def note(self, about: str | None, text: str) -> None:
        """A line under the summary about the measurement or test `about` (None: the
        session)."""
        self.notes.append(Note(about, text))

    def note_once(self, about: str | None, text: str) -> None:
        """A line that one cause may give several times (a warning per run), said once."""
        if Note(about, text) not in self.notes:
            self.note(about, text)

    @property
    def measured(self) -> list[MeasurementRecord]:
        """The records of runs (not of metrics that are no run's), in measuring order."""
        return [record for record in self.records if record.result is not None]

    @property
    def results(self) -> list[Result]:
        return [record.result for record in self.measured]
