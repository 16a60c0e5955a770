"""The export formats by name (`llmperf export --format NAME`): each a function from a night
(night.py) to the text the tool reads."""

from __future__ import annotations

from collections.abc import Callable

from pytest_llmperf.reports.exports import bencher, prometheus, pytorch
from pytest_llmperf.reports.exports.night import Night

__all__ = ["FORMATS"]

FORMATS: dict[str, Callable[[Night], str]] = {
    "prometheus": prometheus.text,
    "bencher": bencher.text,
    "pytorch": pytorch.text,
}
