"""The HTML report: the exact page of a small case, with a picture and without matplotlib."""

from __future__ import annotations

import base64

from pytest_llmperf.reports import plots
from pytest_llmperf.reports.html import page, pictures_of
from pytest_llmperf.reports.markdown import Report
from pytest_llmperf.reports.plots import Picture
from tests.unit.reports.markdown_report import REPORT

HEAD = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        "<title>pytest-llmperf report</title>"]


def body(text: str) -> list[str]:
    lines = text.splitlines()
    return lines[lines.index("<body>") + 1:lines.index("</body>")]


def test_the_whole_page_without_matplotlib():
    text = page(REPORT, missing=plots.MISSING)
    assert text.splitlines()[:5] == HEAD
    assert body(text) == [
        "<h1>pytest-llmperf</h1>",
        '<p><span class="problem">1 failed</span>; <span class="problem">1 REGRESSION</span>, '
        "1 pass</p>",
        "<h2>Failed tests (1)</h2>",
        "<p><code>s/t.py::test_b[x]</code></p>",
        "<pre>ttft_s.p50 regressed: 250.0 ms vs baseline 125.0 ms</pre>",
        "<h2>Results</h2>",
        '<div class="wide">',
        "<table>",
        "<tr><th>verdict</th><th>test</th><th>engine</th><th>workload</th><th>ok</th>"
        "<th>fail</th><th>out tok/s</th><th>req/s</th><th>TTFT p50</th><th>TTFT p99</th><th>TPOT p50</th>"
        "<th>ITL p50</th><th>E2EL p50</th><th>queue p99</th><th>KV max%</th><th>hit%</th>"
        "</tr>",
        # Worst row first; HTML's own characters escaped.
        '<tr><td class="problem">REGRESSION</td><td>s/t.py::test_b[x]</td><td>tiny</td>'
        '<td>w x4 | c1</td><td class="num">4</td>'
        '<td class="num">0</td><td class="num">40.0</td><td class="num">-</td>'
        '<td class="num">125.0</td><td class="num">-</td><td class="num">-</td>'
        '<td class="num">-</td><td class="num">-</td><td class="num">-</td>'
        '<td class="num">-</td><td class="num">-</td></tr>',
        '<tr><td>pass</td><td>s/t.py::test_a</td><td>tiny</td><td>w x4 | c1</td>'
        '<td class="num">4</td>'
        '<td class="num">0</td><td class="num">40.0</td><td class="num">-</td>'
        '<td class="num">125.0</td><td class="num">-</td><td class="num">-</td>'
        '<td class="num">-</td><td class="num">-</td><td class="num">-</td>'
        '<td class="num">-</td><td class="num">-</td></tr>',
        "</table>",
        "</div>",
        '<p class="legend">latencies in ms (TTFT time to first token, TPOT time per output token '
        "after the first, ITL token-normalized inter-token latency, E2EL end to end, queue = "
        "client lag); KV max% = peak KV-cache use; hit% = prefix-cache hit rate</p>",
        "<h2>Engines</h2>",
        "<ul>",
        "<li>engine tiny = tiny eager=True; healthy after 2.0 s</li>",
        "</ul>",
        "<h2>Other measurements</h2>",
        "<ul>",
        "<li>s/t.py::test_c: slo_capacity_req_s = 4.00 (3 engine runs)  pass</li>",
        "</ul>",
        "<h2>Plots</h2>",
        "<p class=\"note\">plots need matplotlib: pip install &#x27;pytest-llmperf[plots]&#x27;</p>",
        "<h2>Notes</h2>",
        "<details><summary>1 note</summary>",
        "<ul>",
        "<li>2 tests: no baseline for this hardware: b/*.toml has no ... (-v lists each)</li>",
        "</ul>",
        "</details>",
        "<h2>Machine and provenance</h2>",
        '<table class="machine">',
        "<tr><th>started</th><td><code>2026-01-02T03:04:05+00:00</code></td></tr>",
        "<tr><th>command</th><td><code>pytest -m cpu</code></td></tr>",
        "<tr><th>hardware_class</th><td><code>cpu</code></td></tr>",
        "<tr><th>cpu_flags</th><td><code>avx2 avx512f</code></td></tr>",
        "<tr><th>vllm</th><td><code>0.32.0</code></td></tr>",
        "</table>",
    ]


def test_the_verdict_is_the_first_column_of_every_row():
    """A long test id and every metric column pass 1400 pixels: a verdict in the last column
    would start out of sight, so it comes first, in the header and in each row."""
    rows = [{**row, "test_id": row["test_id"] + "_" * 200} for row in REPORT.rows]
    lines = body(page(Report(rows=rows), missing=plots.MISSING))
    header, *cells = [line for line in lines if line.startswith("<tr>")]
    assert header.startswith("<tr><th>verdict</th><th>test</th>")
    assert header.count("<th>verdict</th>") == 1
    assert [line.split("</td>")[0] for line in cells] == [
        '<tr><td class="problem">REGRESSION', "<tr><td>pass"]


def test_pictures_are_inlined_and_nothing_is_fetched():
    png = b"\x89PNG\r\n\x1a\nfake"
    text = page(Report(rows=[]), [Picture("a.png", "A <curve>", png)])
    assert body(text) == [
        "<h1>pytest-llmperf</h1>",
        "<p>nothing measured</p>",
        "<h2>Plots</h2>",
        "<figure>",
        f'<img alt="A &lt;curve&gt;" src="data:image/png;base64,{base64.b64encode(png).decode()}">',
        "<figcaption>A &lt;curve&gt;</figcaption>",
        "</figure>",
    ]
    for outside in ("http:", "https:", "<script", "<link", "@import", "url("):
        assert outside not in text


def test_the_plots_of_a_run_or_why_none(monkeypatch):
    assert pictures_of(None) == ([], None) or not plots.available()
    monkeypatch.setattr(plots, "available", lambda: False)
    assert pictures_of({"llmperf": {"results": []}}) == ([], plots.MISSING)
