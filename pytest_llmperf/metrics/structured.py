"""Structured outputs' numbers (workloads/structured.py sends them): the TTFT of each spec's
first request in a run, whose grammar the engine compiled cold, apart from the later requests'
(the compiled grammar cached), and the outputs that failed their check."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pytest_llmperf.failures import INVALID_OUTPUT
from pytest_llmperf.metrics.breakdown import Breakdown, MeasuredRun
from pytest_llmperf.records import RequestRecord

__all__ = ["StructuredOutputs", "note", "summary"]


def summary(records: Sequence[RequestRecord]) -> dict[str, Any] | None:
    """{"kind", "specs", "requests", "invalid", "cold": {...}, "warm": {...}}, each group with
    its ok requests and their TTFT p50 and mean (None without any); None for a run without
    checked outputs. A spec's first request is the first sent."""
    checked = sorted((r for r in records if r.output_check is not None
                      and r.tool_calls is None), key=_sent)  # tool calls: metrics/tool_calls.py
    if not checked:
        return None
    firsts: dict[str, RequestRecord] = {}
    for record in checked:
        firsts.setdefault(record.output_check, record)
    cold = [r for r in checked if firsts[r.output_check] is r]
    warm = [r for r in checked if firsts[r.output_check] is not r]
    kinds = sorted({name.split()[0] for name in firsts})
    return {"kind": "/".join(kinds), "specs": len(firsts), "requests": len(checked),
            "invalid": sum(r.error_kind == INVALID_OUTPUT for r in checked),
            "cold": _ttft(cold), "warm": _ttft(warm)}


def note(found: dict[str, Any]) -> str:
    """The -v line: cold and warm TTFT apart, and the outputs that failed their check."""
    def part(name: str) -> str:
        p50 = found[name]["ttft_s.p50"]
        shown = "-" if p50 is None else f"{p50 * 1e3:.1f} ms"
        return f"{name} {shown} ({found[name]['requests']} ok)"

    return (f"structured outputs ({found['kind']}, {found['specs']} specs): TTFT p50 "
            f"{part('cold')} first request of each spec, {part('warm')} later; "
            f"{found['invalid']} of {found['requests']} outputs failed their check")


def _sent(record: RequestRecord) -> float:
    return record.sent_s if record.sent_s is not None else math.inf


def _ttft(records: Sequence[RequestRecord]) -> dict[str, Any]:
    values = [r.ttft_s for r in records if r.ok]
    return {"requests": len(values),
            "ttft_s.p50": float(np.median(values)) if values else None,
            "ttft_s.mean": float(np.mean(values)) if values else None}


class StructuredOutputs(Breakdown):
    """The run file's "structured_outputs": `summary`'s numbers, and `note`'s line."""

    name = "structured_outputs"

    @classmethod
    def of(cls, result: MeasuredRun) -> StructuredOutputs | None:
        found = summary(result.records)
        return None if found is None else cls(found)

    def notes(self) -> list[str]:
        return [note(self.to_plain())]
