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

from pytest_llmperf.reports.model import summary_rows

SIGNIFICANT = "{:.6g}"  # enough for any gate, short enough to read in a CI page


def belongs_to(test_id: str, nodeid: str) -> bool:
    """A measurement's id is its test's node id, or that plus "#n" or "@point"."""
    return test_id == nodeid or test_id.startswith((nodeid + "#", nodeid + "@"))


def _number(value: float) -> str:
    return SIGNIFICANT.format(value)  # "20", not "20.0", for a count


def properties(nodeid: str, session, usd_per_hour: float | None) -> list[tuple[str, str]]:
    """The properties of the test `nodeid` (as the user types it): every measurement it made, in
    order."""
    results = [r for r in session.results if belongs_to(r.test_id, nodeid)]
    out: list[tuple[str, str]] = []
    for row in summary_rows(results, session.verdicts, usd_per_hour,
                            root=session.settings.rootdir):
        suffix = row["test_id"][len(nodeid):]
        out += [(f"{name}{suffix}", row[name]) for name in ("verdict", "engine", "workload")]
        out += [(f"{key}{suffix}", _number(value)) for key, value in row["values"].items()
                if value is not None]
    for test_id, estimates, _ in session.extras:  # SLO capacities, offline throughputs
        if belongs_to(test_id, nodeid):
            suffix = test_id[len(nodeid):]
            out += [(f"{name}{suffix}", _number(est.value)) for name, est in estimates.items()
                    if math.isfinite(est.value)]
            out.append((f"verdict{suffix}", session.verdicts.get(test_id, "")))
    return out
