"""The Markdown report: exact text for a small case, and that GitHub-flavoured Markdown renders
its tables as tables."""

from __future__ import annotations

import pytest

from pytest_llmperf.reports.markdown import Report, code, document, escape, plain, table
from tests.unit.reports.markdown_report import REPORT


def test_the_whole_document():
    assert document(REPORT).splitlines() == [
        "## pytest-llmperf: **1 failed**; **1 REGRESSION**, 1 pass",
        "",
        "### Failed tests (1)",
        "",
        "**`s/t.py::test_b[x]`**",
        "",
        "```text",
        "ttft_s.p50 regressed: 250.0 ms vs baseline 125.0 ms",
        "```",
        "",
        "### Results",
        "",
        # Every column with a value in some row (the cost column has none); worst row first;
        # the pipe in the workload's name is escaped so it stays in its cell.
        "| test | engine | workload | ok | fail | out tok/s | req/s | TTFT p50 | TTFT p99 | "
        "TPOT p50 | ITL p50 | E2EL p50 | queue p99 | KV max% | hit% | verdict |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | --- |",
        "| `s/t.py::test_b[x]` | tiny | w x4 \\| c1 | 4 | 0 | 40.0 | - | 125.0 | - | - | - | - | "
        "- | - | - | **REGRESSION** |",
        "| `s/t.py::test_a` | tiny | w x4 \\| c1 | 4 | 0 | 40.0 | - | 125.0 | - | - | - | - | - | "
        "- | - | pass |",
        "",
        "latencies in ms (TTFT time to first token, TPOT time per output token after the first, "
        "ITL token-normalized inter-token latency, E2EL end to end, queue = client lag); KV max% = "
        "peak KV-cache use; hit% = prefix-cache hit rate",
        "",
        "### Engines",
        "",
        "- engine tiny = tiny eager=True; healthy after 2.0 s",
        "",
        "### Other measurements",
        "",
        "- s/t.py::test\\_c: slo\\_capacity\\_req\\_s = 4.00 (3 engine runs)  pass",
        "",
        "### Notes",
        "",
        "- 2 tests: no baseline for this hardware: b/\\*.toml has no ... (-v lists each)",
        "",
        "### Machine and provenance",
        "",
        "| what | value |",
        "| --- | --- |",
        "| started | `2026-01-02T03:04:05+00:00` |",
        "| command | `pytest -m cpu` |",
        "| hardware_class | `cpu` |",
        "| cpu_flags | `avx2 avx512f` |",
        "| vllm | `0.32.0` |",
    ]


def test_nothing_measured():
    assert document(Report(rows=[])) == "## pytest-llmperf: nothing measured\n"


def test_over_the_limit_the_table_gives_way():
    text = document(REPORT, limit=600)
    assert "| test |" not in text
    assert "2 rows: too many for this page; the job's log and --llmperf-json have them." in text
    assert document(REPORT, limit=10**6) == document(REPORT)


def test_a_message_with_a_fence_in_it_cannot_close_its_block():
    report = Report(rows=[], failures=[("t.py::x", "assert a == b\n```\n#### not a heading")])
    lines = document(report).splitlines()
    assert lines[lines.index("**`t.py::x`**") + 2:][:5] == [
        "````text", "assert a == b", "```", "#### not a heading", "````"]


def test_long_messages_are_cut():
    report = Report(rows=[], failures=[("t.py::x", "\n".join(f"line {i}" for i in range(50)))])
    lines = document(report).splitlines()
    assert "line 39" in lines and "line 40" not in lines
    assert "... (10 more lines in the job's log)" in lines


def test_escapes():
    assert escape("a|b\nc") == "a\\|b c"
    assert plain("<b> *x* _y_ [z] `q` \\") == "\\<b> \\*x\\* \\_y\\_ \\[z\\] \\`q\\` \\\\"
    assert code("a`b") == "`` a`b ``"
    assert table(["n", "v"], [["1", "x"]], {0}) == ["| n | v |", "| ---: | --- |", "| 1 | x |"]


def test_github_flavoured_markdown_renders_the_tables():
    markdown_it = pytest.importorskip("markdown_it")
    # CommonMark plus GitHub's table extension, as GitHub renders a step summary.
    html = markdown_it.MarkdownIt("commonmark").enable("table").render(document(REPORT))
    assert html.count("<table>") == 2
    assert "<td><code>s/t.py::test_b[x]</code></td>" in html
    assert "<td>w x4 | c1</td>" in html  # the escaped pipe stays in its cell
    assert "<td><strong>REGRESSION</strong></td>" in html
    assert ("<h2>pytest-llmperf: <strong>1 failed</strong>; <strong>1 REGRESSION</strong>, "
            "1 pass</h2>") in html
