"""Interference probes, measured apart (workloads/probes.py): a probed run's records split into
the load's and the probes', by the probes' places in the measured order. The load's metrics
leave the probes out; the probes' become a measurement of their own ("<test>@probes"), gated
like any other, so a change that keeps the load's throughput and slows what a light
interactive user sees fails on the probes' row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.records import RequestRecord

__all__ = ["measurement_id", "split"]


def split(records: Sequence[RequestRecord], places: frozenset[int]
          ) -> tuple[list[RequestRecord], list[RequestRecord]]:
    """(the load's records, the probes')."""
    load = [r for r in records if r.index not in places]
    probes = [r for r in records if r.index in places]
    return load, probes


def measurement_id(load: MeasurementId) -> MeasurementId:
    """The probes' measurement beside the load's `load`: "<test>@probes", "<test>@probes#2"
    for a test's second probed run, "<test>@<point>+probes" for a sweep's point."""
    if load.point is not None:
        return replace(load, point=f"{load.point}+probes")
    return replace(load, point="probes" if load.run == 1 else f"probes#{load.run}")

