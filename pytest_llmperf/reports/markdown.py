"""The session's report as GitHub-flavoured Markdown (`--llmperf-markdown PATH`, and appended to
`$GITHUB_STEP_SUMMARY` in a GitHub Actions job), for reading a nightly run on its CI page.

In reading order: the verdict counts, the run's false-alarm budget (verdict/budget.py: the
terminal summary's first line), the failures with their messages, the table (every column
with a value, worst rows first), the engines, the GPUs (one line per GPU test and card), other
measurements, notes, then the machine and the provenance of the numbers. GitHub renders a job's
step summary as GitHub-flavoured Markdown and limits it to 1 MiB (docs/reports.md); tables use
its pipe syntax.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.reports.model import (
    Row,
    by_severity,
    counted,
    engine_keys,
    gpu_lines,
    legend,
    problem,
    shown_columns,
    status_of,
    verdict_counts,
    verdict_text,
)

TITLE = "pytest-llmperf"
# A failure's message is pytest's text for it; a plain assert's traceback can run long.
MAX_MESSAGE_LINES = 40


@dataclass
class Report:
    """Everything the Markdown report shows, gathered from every pytest-xdist worker."""

    rows: list[Row]
    engines: list[str] = field(default_factory=list)  # report.engine_lines
    others: list[str] = field(default_factory=list)  # capacities, offline throughputs
    notes: list[str] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # node id, pytest's message
    fingerprint: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)  # commit, started, command...
    budget: list[str] = field(default_factory=list)  # reports/headline.budget_headline


def escape(text: str) -> str:
    """A table cell's text: a pipe would end the cell, a newline the row."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def plain(line: str) -> str:
    """Free text (a note, an engine's settings) as itself: Markdown's own characters escaped."""
    for char in "\\`*_[]<":
        line = line.replace(char, "\\" + char)
    return line


def code(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    """A pipe table; columns in `right` (numbers) are right-aligned."""
    rule = ["---:" if i in right else "---" for i in range(len(header))]
    return ["| " + " | ".join(escape(cell) for cell in cells) + " |"
            for cells in [header, rule, *rows]]


def headline(rows: Sequence[Row], failed: int = 0) -> str:
    """The verdict counts of the rows, after the number of failed tests: a test can fail on a
    measurement that is not a row (an SLO capacity) or for a reason of its own (an assert)."""
    counts = [f"**{n} {counted(status)}**" if problem(status) else f"{n} {counted(status)}"
              for status, n in verdict_counts(rows)]
    text = ", ".join(counts) if counts else "nothing measured"
    return f"## {TITLE}: " + (f"**{failed} failed**; " if failed else "") + text


def _fence(message: str) -> str:
    """A code fence longer than any run of backticks in `message`, which so cannot close it."""
    longest = max((len(run) for run in re.findall(r"`+", message)), default=0)
    return "`" * max(3, longest + 1)


def failure_lines(failures: Sequence[tuple[str, str]]) -> list[str]:
    lines = [f"### Failed tests ({len(failures)})", ""]
    for nodeid, message in failures:
        message_lines = message.strip().splitlines()
        if len(message_lines) > MAX_MESSAGE_LINES:
            more = len(message_lines) - MAX_MESSAGE_LINES
            message_lines = message_lines[:MAX_MESSAGE_LINES] + [
                f"... ({more} more lines in the job's log)"]
        fence = _fence(message)
        lines += [f"**{code(nodeid)}**", "", f"{fence}text", *message_lines, fence, ""]
    return lines


def results_table(rows: Sequence[Row]) -> list[str]:
    columns = shown_columns(rows)
    keys = engine_keys(row["engine"] for row in rows)
    header = ["test", "engine", "workload", *(c.header for c in columns), "verdict"]
    body = []
    for row in by_severity(rows):
        verdict = (f"**{verdict_text(row)}**" if problem(status_of(row))
                   else verdict_text(row))
        body.append([code(row["test_id"]), keys[row["engine"]], row["workload"],
                     *(column.cell(row["values"]) for column in columns), verdict])
    numbers = set(range(3, 3 + len(columns)))
    return table(header, body, numbers) + ["", legend(columns)]


def _bullets(title: str, lines: Sequence[str]) -> list[str]:
    if not lines:
        return []
    return [f"### {title}", "", *(f"- {plain(line)}" for line in lines), ""]


def _value(value: Any) -> str:
    return " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def machine_lines(fingerprint: Mapping[str, Any], provenance: Mapping[str, Any]) -> list[str]:
    pairs = [(key, _value(value)) for key, value in provenance.items() if value not in (None, "")]
    pairs += [(key, _value(value)) for key, value in fingerprint.items()
              if value not in (None, "", [])]
    if not pairs:
        return []
    rows = [[key, code(value)] for key, value in pairs]
    return ["### Machine and provenance", "", *table(["what", "value"], rows, set()), ""]


def document(report: Report, limit: int | None = None) -> str:
    """The whole report; if it is over `limit` bytes (GitHub's step summary takes 1 MiB), the
    results table gives way to a line saying where to find it."""
    tables = [["### Results", "", *results_table(report.rows), ""]] if report.rows else []
    page = _document(report, tables)
    if limit is not None and len(page.encode()) > limit:
        page = _document(report, [["### Results", "", f"{len(report.rows)} rows: too many for "
                                   "this page; the job's log and --llmperf-json have them.", ""]])
    return page


def _document(report: Report, tables: list[list[str]]) -> str:
    lines = [headline(report.rows, len(report.failures)), ""]
    lines += [*map(plain, report.budget), ""] if report.budget else []
    if report.failures:
        lines += failure_lines(report.failures)
    for part in tables:
        lines += part
    lines += _bullets("Engines", report.engines)
    lines += _bullets("GPUs", gpu_lines(report.rows))
    lines += _bullets("Other measurements", report.others)
    lines += _bullets("Notes", report.notes)
    lines += machine_lines(report.fingerprint, report.provenance)
    return "\n".join(lines).rstrip("\n") + "\n"
