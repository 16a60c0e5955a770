"""Each test's key metrics and verdict as JUnit XML properties, so whatever reads `--junitxml`
(Jenkins, GitLab, GitHub test reporters) shows them beside the test.

pytest writes a test report's `user_properties` as `<property name=... value=...>` under its
`<testcase>` (what `record_property` does; docs/reports.md). Names are the metric names of the
JSON run file, units in the name (`ttft_s.p50` in seconds, `output_throughput_tok_s`), plus
`verdict`, `engine` and `workload`. A test that measured more than once suffixes every name of
its later measurements with the suffix of their id (`ttft_s.p50#2`, `verdict@chat-rate4`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from pytest_llmperf.ids import belongs_to
from pytest_llmperf.metrics.cost import Price
from pytest_llmperf.reports.model import summary_rows, verdict_text
from pytest_llmperf.verdict.measurement_record import MeasurementRecord

SIGNIFICANT = "{:.6g}"  # enough for any gate, short enough to read in a CI page


def _number(value: float) -> str:
    return SIGNIFICANT.format(value)  # "20", not "20.0", for a count


def properties(nodeid: str, records: Sequence[MeasurementRecord],
               usd_per_hour: Price | float | None, *,
               root: Path | None = None) -> list[tuple[str, str]]:
    """The properties of the test `nodeid` (as the user types it): every measurement it made, in
    order."""
    mine = [record for record in records if belongs_to(record.test_id, nodeid)]
    out: list[tuple[str, str]] = []
    for row in summary_rows(mine, usd_per_hour, root=root):
        suffix = row["test_id"][len(nodeid):]
        out.append((f"verdict{suffix}", verdict_text(row)))
        out += [(f"{name}{suffix}", row[name]) for name in ("engine", "workload")]
        out += [(f"{key}{suffix}", _number(value)) for key, value in row["values"].items()
                if value is not None]
    for record in mine:  # SLO capacities, offline throughputs
        if record.extras is not None:
            suffix = record.test_id[len(nodeid):]
            out += [(f"{name}{suffix}", _number(est.value))
                    for name, est in record.extras.estimates.items() if math.isfinite(est.value)]
            out.append((f"verdict{suffix}", record.status.summary if record.status else ""))
    return out
