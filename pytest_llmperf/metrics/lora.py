"""Latency by LoRA adapter (workloads/lora.py splits the requests): each adapter's TTFT and TPOT
apart, and the base model's where the split sends it a share, from the records' `model` (the
adapter a request named; None: the engine's own model).

`adapter_metrics` gives the same numbers under names a gate, a baseline or an A/B comparison
takes ("lora:sql-lora:ttft_s.p50", ADAPTER_METRICS), as part of each run's metrics: the family
FAMILY, as metrics/turns.py does for a conversation's turns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pytest_llmperf.metrics.breakdown import Breakdown, MeasuredRun
from pytest_llmperf.metrics.metric import Family
from pytest_llmperf.metrics.request_metrics import request_tpot
from pytest_llmperf.records import RequestRecord

__all__ = ["ADAPTER_METRICS", "BASE", "FAMILY", "PREFIX", "ByAdapter", "adapter_metrics",
           "by_adapter", "notes"]

PREFIX = "lora:"  # "lora:<adapter>:<metric>"; the base model's row is "lora:base:<metric>"
BASE = "base"  # the row of the requests sent to the engine's own model (workloads/lora.BASE)
ADAPTER_METRICS = ("ttft_s.p50", "ttft_s.mean", "tpot_s.p50", "tpot_s.mean", "failed")


def by_adapter(records: Sequence[RequestRecord]) -> dict[str, dict[str, float]]:
    """{"base": {"requests": n, "failed": k, "ttft_s.p50": ..., "ttft_s.mean": ...,
    "tpot_s.p50": ..., "tpot_s.mean": ...}, "<adapter>": {...}, ...}: the base model's row
    first (where it had requests), then the adapters by name; {} when no request named an
    adapter."""
    adapters = sorted({r.model for r in records if r.model is not None})
    if not adapters:
        return {}
    rows = {}
    for name in ([BASE] if any(r.model is None for r in records) else []) + adapters:
        mine = [r for r in records if (r.model or BASE) == name]  # no adapter is "base"
        done = [r for r in mine if r.ok]
        rows[name] = {"requests": len(mine), "failed": len(mine) - len(done),
                      **_stats([r.ttft_s for r in done], "ttft_s"),
                      **_stats([request_tpot(r) for r in done if r.output_tokens > 1],
                               "tpot_s")}
    return rows


def _stats(values: list[float], name: str) -> dict[str, float]:
    if not values:
        return {}
    return {f"{name}.p50": float(np.percentile(values, 50)),
            f"{name}.mean": float(np.mean(values))}


def notes(rows: dict[str, dict[str, Any]]) -> list[str]:
    """The -v lines, a row each: "LoRA sql-lora: 8 requests, 0 failed; TTFT p50 31.2 ms
    (1.35x base), TPOT p50 5.10 ms (1.02x base)"."""
    base = rows.get(BASE, {})

    def shown(row: dict[str, Any], metric: str) -> str:
        value = row.get(metric)
        if value is None:
            return "-"
        text = f"{value * 1e3:.{1 if metric.startswith('ttft') else 2}f} ms"
        if row is not base and base.get(metric):
            text += f" ({value / base[metric]:.2f}x base)"
        return text

    return [f"LoRA {name}: {row['requests']} requests, {row['failed']} failed; TTFT p50 "
            f"{shown(row, 'ttft_s.p50')}, TPOT p50 {shown(row, 'tpot_s.p50')}"
            for name, row in rows.items()]


def adapter_metrics(records: Sequence[RequestRecord]) -> dict[str, float]:
    """{"lora:sql-lora:ttft_s.p50": 0.031, ...}: every ADAPTER_METRICS name of every row, NaN
    where a row has no value (all its requests failed), so a gate on it fails visibly."""
    return {f"{PREFIX}{name}:{metric}": float(row.get(metric, math.nan))
            for name, row in by_adapter(records).items() for metric in ADAPTER_METRICS}


def _stands_for(name: str) -> str | None:
    """The metric an adapter's name is of: "ttft_s.p50" for "lora:sql-lora:ttft_s.p50"."""
    if not name.startswith(PREFIX):
        return None
    adapter, colon, metric = name[len(PREFIX):].rpartition(":")
    return metric if colon and adapter and metric in ADAPTER_METRICS else None


FAMILY = Family(_stands_for, lambda run: adapter_metrics(run.records))


class ByAdapter(Breakdown):
    """The run file's "by_adapter": `by_adapter`'s rows, and a -v line each."""

    name = "by_adapter"

    @classmethod
    def of(cls, result: MeasuredRun) -> ByAdapter | None:
        rows = by_adapter(result.records)
        return cls(rows) if rows else None

    def notes(self) -> list[str]:
        return notes(self.to_plain())
