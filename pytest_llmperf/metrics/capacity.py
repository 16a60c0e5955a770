"""Metrics a measurement finds by more than one run, so no run's requests compute them: the
highest load that meets the test's SLO, found by the capacity search (workloads/sweeps.py) and
gated as the measurement's extras (verdict/measurement_record.py).
"""

from __future__ import annotations

from pytest_llmperf.metrics.metric import HIGHER, Metric

__all__ = ["METRICS"]

METRICS = (
    Metric("slo_capacity_req_s", "req/s", HIGHER),  # the highest rate that meets the SLO
    # A trace replay's capacity: the highest speedup (x its recorded pace) that meets the SLO.
    Metric("slo_capacity_speedup", "x", HIGHER),
)
