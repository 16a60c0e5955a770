"""Interference probes, measured apart (workloads/probes.py): a probed run's records split into
the load's and the probes', by the probes' places in the measured order. The load's metrics
leave the probes out; the probes' become a measurement of their own ("<test>@probes"), gated
like any other, so a change that keeps the load's throughput and slows what a light
interactive user sees fails on the probes' row."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_llmperf.records import RequestRecord

__all__ = ["point", "split"]


def split(records: Sequence[RequestRecord], places: frozenset[int]
          ) -> tuple[list[RequestRecord], list[RequestRecord]]:
    """(the load's records, the probes')."""
    load = [r for r in records if r.index not in places]
    probes = [r for r in records if r.index in places]
    return load, probes


def point(current: str | None, run: int) -> str:
    """The probes' measurement's point: "probes" beside the load's own, "probes#2" for a
    test's second probed run, "<point>+probes" for a sweep's point."""
    if current is not None:
        return f"{current}+probes"
    return "probes" if run == 1 else f"probes#{run}"

