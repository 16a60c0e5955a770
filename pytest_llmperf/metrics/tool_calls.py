"""Tool calls' numbers (workloads/tool_calls.py sends them): the calls the engine streamed, those
that failed their check, and the time to complete calls: from a request's send to the arrival of
its last tool-call piece (client/sse.py), when every call it made was whole."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pytest_llmperf.failures import INVALID_OUTPUT
from pytest_llmperf.metrics.breakdown import Breakdown, MeasuredRun
from pytest_llmperf.records import RequestRecord

__all__ = ["ToolCalls", "note", "summary"]


def summary(records: Sequence[RequestRecord]) -> dict[str, Any] | None:
    """{"requests", "calls", "invalid", "complete_call_s.p50", "complete_call_s.p90"}, the
    times over the ok requests (None without any); None for a run that sent no tools."""
    sent = [r for r in records if r.tool_calls is not None]
    if not sent:
        return None
    times = [r.tool_calls_done_s - r.sent_s for r in sent
             if r.ok and r.tool_calls_done_s is not None]
    p50, p90 = np.percentile(times, [50, 90]).tolist() if times else (None, None)
    return {"requests": len(sent), "calls": sum(len(r.tool_calls) for r in sent),
            "invalid": sum(r.error_kind == INVALID_OUTPUT for r in sent),
            "complete_call_s.p50": p50, "complete_call_s.p90": p90}


def note(found: dict[str, Any]) -> str:
    """The -v line: the calls, those that failed their check, the time to complete calls."""
    def shown(name: str) -> str:
        value = found[name]
        return "-" if value is None else f"{value * 1e3:.1f} ms"

    return (f"tool calls: {found['calls']} calls in {found['requests']} requests, "
            f"{found['invalid']} of {found['requests']} requests failed their check; time to "
            f"complete calls p50 "
            f"{shown('complete_call_s.p50')}, p90 {shown('complete_call_s.p90')}")


class ToolCalls(Breakdown):
    """The run file's "tool_calls": `summary`'s numbers, and `note`'s line."""

    name = "tool_calls"

    @classmethod
    def of(cls, result: MeasuredRun) -> ToolCalls | None:
        found = summary(result.records)
        return None if found is None else cls(found)

    def notes(self) -> list[str]:
        return [note(self.to_plain())]
