"""A probed run's probes as a measurement of their own (workloads/probes.py, metrics/probes.py):
the load's record keeps the load's metrics; the probes' record, "<test>@probes", gets theirs,
run by run, so the gate and the trend gate judge them apart, with their own baseline table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_llmperf.client.measure import Measurement
from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.metrics import probes
from pytest_llmperf.metrics.compute import RunMetrics, compute_metrics
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.verdict.measurement_record import MeasurementRecord

__all__ = ["load_metrics_records", "record_probes"]


def load_metrics_records(records: Sequence, places: frozenset[int]) -> list:
    """The records the load's own metrics are computed from: all but the probes."""
    return probes.split(records, places)[0] if places else list(records)


def record_probes(ledger: Ledger, id: MeasurementId, runs: Sequence[tuple[RunMetrics,
                  Measurement]], places: frozenset[int], load: MeasurementRecord
                  ) -> MeasurementRecord:
    """The probes' record, added to the ledger after the load's, from the same runs; its
    representative run is the load's (the median by the load's output throughput)."""
    by_run = [probes.split(measured.records, places)[1] for _, measured in runs]
    metrics = [compute_metrics(records) for records in by_run]
    shown = sorted(range(len(runs)), key=lambda i: runs[i][0].output_throughput_tok_s)[
        len(runs) // 2]
    probe_id = probes.measurement_id(id)
    result = replace(load.result, test_id=probe_id.format(), key=probe_id.key,
                     metrics=metrics[shown], runs=tuple(metrics), records=tuple(by_run[shown]),
                     workload_label=f"{load.result.workload_label}, its probes",
                     server_metrics={})
    record = ledger.add(probe_id, result)
    record.status = load.status  # a disturbed or client-limited run is so for its probes too
    load.result = replace(load.result, probes=result)
    return record
