"""The session's report as one self-contained HTML page (`--llmperf-html PATH`): the verdict
counts, the failures, the table, the engines, the GPUs, the plots, the notes and the machine, in
the Markdown report's order (markdown.py), readable offline and attachable to a CI run as one
file.

Self-contained: the CSS is inline and each plot is a PNG inlined as a base64 `data:` URI, so the
page loads nothing from anywhere (docs/reports.md, HTML). Without matplotlib the page still has
everything but the plots, and says which extra draws them.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from pytest_llmperf.metrics import phases
from pytest_llmperf.metrics.phases import Split
from pytest_llmperf.reports import plotdata, plots
from pytest_llmperf.reports.files import write_text
from pytest_llmperf.reports.markdown import Report
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
from pytest_llmperf.reports.plots import Picture
from pytest_llmperf.verdict.stored_run import StoredRun

TITLE = "pytest-llmperf"
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1f2328; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 12.5px; }
.wide { overflow-x: auto; max-height: 80vh; }
.machine td { white-space: normal; overflow-wrap: anywhere; }  /* a long command line wraps */
th, td { border: 1px solid #d0d7de; padding: 3px 7px; white-space: nowrap; }
th { background: #f6f8fa; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #fafbfc; }
.problem { color: #b42318; font-weight: 600; }
.legend, .note { color: #57606a; font-size: 12.5px; }
figure { margin: 16px 0; } figure img { max-width: 100%; border: 1px solid #d0d7de; }
figcaption { color: #57606a; font-size: 12.5px; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; font-size: 12px; }
code { font-size: 12.5px; }
"""


def _cell(text: str, css: str = "") -> str:
    return f'<td class="{css}">{escape(text)}</td>' if css else f"<td>{escape(text)}</td>"


def _verdict(row: Row) -> str:
    return _cell(verdict_text(row), "problem" if problem(status_of(row)) else "")


def headline(report: Report) -> str:
    """The verdict counts, after the number of failed tests (as markdown.headline)."""
    parts = [f'<span class="problem">{n} {escape(counted(v))}</span>' if problem(v)
             else f"{n} {escape(counted(v))}" for v, n in verdict_counts(report.rows)]
    text = ", ".join(parts) if parts else "nothing measured"
    failed = len(report.failures)
    prefix = f'<span class="problem">{failed} failed</span>; ' if failed else ""
    return f"<p>{prefix}{text}</p>"


def results_table(report: Report) -> list[str]:
    rows = report.rows
    columns = shown_columns(rows)
    keys = engine_keys(row["engine"] for row in rows)
    # The verdict first: the table scrolls by itself when wider than the window (the page and
    # its plots do not), and a long test id and a dozen metric columns pass 1400 pixels, so a
    # last column would start out of sight.
    header = ["verdict", "test", "engine", "workload", *(c.header for c in columns)]
    lines = ['<div class="wide">', "<table>",
             "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>"]
    for row in by_severity(rows):
        cells = [_verdict(row), _cell(row["test_id"]), _cell(keys[row["engine"]]),
                 _cell(row["workload"])]
        cells += [_cell(column.cell(row["values"]), "num") for column in columns]
        lines.append("<tr>" + "".join(cells) + "</tr>")
    lines += ["</table>", "</div>", f'<p class="legend">{escape(legend(columns))}</p>']
    return lines


def _bullets(title: str, items: Sequence[str], folded: bool = False) -> list[str]:
    if not items:
        return []
    body = ["<ul>", *(f"<li>{escape(item)}</li>" for item in items), "</ul>"]
    if folded:
        noun = title.lower() if len(items) > 1 else title.lower().removesuffix("s")
        body = [f"<details><summary>{len(items)} {noun}</summary>", *body, "</details>"]
    return [f"<h2>{escape(title)}</h2>", *body]


def failure_lines(failures: Sequence[tuple[str, str]]) -> list[str]:
    if not failures:
        return []
    lines = [f"<h2>Failed tests ({len(failures)})</h2>"]
    for nodeid, message in failures:
        lines += [f"<p><code>{escape(nodeid)}</code></p>", f"<pre>{escape(message.strip())}</pre>"]
    return lines


def picture_lines(pictures: Sequence[Picture], missing: str | None) -> list[str]:
    """Each plot inlined as a data: URI; `missing` says why there are none (no matplotlib)."""
    lines = ["<h2>Plots</h2>"]
    if missing:
        return lines + [f'<p class="note">{escape(missing)}</p>']
    if not pictures:
        return lines + ['<p class="note">nothing to plot in this run</p>']
    for picture in pictures:
        data = base64.b64encode(picture.png).decode("ascii")
        lines += ["<figure>", f'<img alt="{escape(picture.title)}" '
                  f'src="data:image/png;base64,{data}">',
                  f"<figcaption>{escape(picture.title)}</figcaption>", "</figure>"]
    return lines


def _value(value: Any) -> str:
    return " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def machine_lines(fingerprint: Mapping[str, Any], provenance: Mapping[str, Any]) -> list[str]:
    pairs = [(key, _value(value)) for source in (provenance, fingerprint)
             for key, value in source.items() if value not in (None, "", [])]
    if not pairs:
        return []
    rows = [f"<tr><th>{escape(key)}</th><td><code>{escape(value)}</code></td></tr>"
            for key, value in pairs]
    return ["<h2>Machine and provenance</h2>", '<table class="machine">', *rows, "</table>"]


def page(report: Report, pictures: Sequence[Picture] = (), missing: str | None = None) -> str:
    """The whole page; `pictures` from plots.pictures, or `missing` saying why there are none."""
    lines = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             f"<title>{TITLE} report</title>", f"<style>{STYLE}</style>", "</head>", "<body>",
             f"<h1>{TITLE}</h1>", headline(report)]
    lines += failure_lines(report.failures)
    if report.rows:
        lines += ["<h2>Results</h2>", *results_table(report)]
    lines += _bullets("Engines", report.engines)
    lines += _bullets("GPUs", gpu_lines(report.rows))
    lines += _bullets("Other measurements", report.others)
    lines += picture_lines(pictures, missing)
    lines += _bullets("Notes", report.notes, folded=True)
    lines += machine_lines(report.fingerprint, report.provenance)
    lines += ["</body>", "</html>"]
    return "\n".join(lines) + "\n"


RunOrDocument = StoredRun | Mapping[str, Any]  # the model, or the document json.load gives


def _model(run: RunOrDocument) -> StoredRun:
    return run if isinstance(run, StoredRun) else StoredRun.from_plain(run)


def pictures_of(run: RunOrDocument | None) -> tuple[list[Picture], str | None]:
    """The run's plots, or why there are none (matplotlib missing)."""
    if not plots.available():
        return [], plots.MISSING
    if run is None:
        return [], None
    run = _model(run)
    found = plots.pictures(plotdata.gather([run]))
    splits = phase_splits(run)
    return found + ([plots.phases_picture(splits)] if splits else []), None


def phase_splits(run: RunOrDocument) -> list[tuple[str, Split]]:
    """Each result's TTFT split (metrics/phases.py) from the run file's metrics, where the
    server timed its requests."""
    found = []
    for result in _model(run).results:
        values = {name: estimate.value for name, estimate in result.metrics.items()
                  if math.isfinite(estimate.value)}
        split = phases.split(values)
        if split is not None:
            found.append((result.test_id, split))
    return found


def write(report: Report, run: RunOrDocument | None, path: Path) -> str:
    """--llmperf-html: the page, with the plots of the run file `run`; returns the summary's
    line saying where it went (or why not)."""
    pictures, missing = pictures_of(run)
    return write_text("HTML report", "--llmperf-html", path, page(report, pictures, missing))
