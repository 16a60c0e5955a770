"""The terminal summary's layout: exact lines for small cases, short (fits a width) and full."""

from __future__ import annotations

from pytest_llmperf.reports.notes import Note
from pytest_llmperf.reports.terminal import full_table, section, short_table, wrap
from pytest_llmperf.verdict.status import Status

ENGINE = "tiny eager=True"


def status_value(verdict: str) -> str:
    """A row's status from the verdict column's words ("" for none)."""
    return Status.from_summary(verdict).value if verdict else ""


def row(test_id, verdict="pass", engine=ENGINE, workload="w x4 @ concurrency 1", **values):
    base = {"completed": 4.0, "failed": 0.0, "output_throughput_tok_s": 40.0,
            "request_throughput_req_s": 2.0, "ttft_s.p50": 0.125, "ttft_s.p99": 0.25,
            "tpot_s.p50": 0.0625, "itl_s.p50": 0.0625, "e2el_s.p50": 0.5, "queue_s.p99": 0.0,
            "server:kv_cache_usage_max": None, "server:prefix_cache_hit_rate": None,
            "usd_per_1m_output_tok": None, "usd_per_1m_total_tok": None}
    return {"test_id": test_id, "engine": engine, "workload": workload, "status": status_value(verdict),
            "values": {**base, **values}}


ROWS = [row("suites/a.py::test_one"), row("suites/b.py::test_two[x]", "REGRESSION"),
        row("suites/a.py::test_three", "no baseline")]


def test_short_table_groups_by_file_and_puts_the_regression_first():
    assert short_table(ROWS) == [
        "test           workload              ok  fail  out tok/s  req/s  TTFT p50  TTFT p99  "
        "TPOT p50  E2EL p50  verdict",
        "-------------  --------------------  --  ----  ---------  -----  --------  --------  "
        "--------  --------  -----------",
        "suites/b.py",
        "  test_two[x]  w x4 @ concurrency 1   4     0       40.0   2.00     125.0     250.0  "
        "   62.50       500  REGRESSION",
        "suites/a.py",
        "  test_one     w x4 @ concurrency 1   4     0       40.0   2.00     125.0     250.0  "
        "   62.50       500  pass",
        "  test_three   w x4 @ concurrency 1   4     0       40.0   2.00     125.0     250.0  "
        "   62.50       500  no baseline",
        # ITL and queue did not fit in 120 columns; the server columns had no value in any row.
        # The legend names only what is shown.
        "latencies in ms (TTFT time to first token, TPOT time per output token after the first, "
        "E2EL end to end)",
    ]


def test_a_narrow_width_keeps_the_most_telling_columns_and_elides_long_ids():
    long_id = "t.py::test_" + "long_" * 12 + "name"
    assert short_table([row(long_id), row("t.py::test_b", "REGRESSION")], width=80) == [
        "test                         ok  fail  out tok/s  TTFT p50  TPOT p50  verdict",
        "---------------------------  --  ----  ---------  --------  --------  ----------",
        "t.py",
        "  test_b                      4     0       40.0     125.0     62.50  REGRESSION",
        "  test_long_l...g_long_name   4     0       40.0     125.0     62.50  pass",
        "latencies in ms (TTFT time to first token, TPOT time per output token after the",
        "    first)",
    ]


def test_every_short_line_fits_the_width():
    rows = [row(f"suites/test_file_{i}.py::test_{'x' * (10 * i)}", engine=f"model-{i % 2} a=b",
                workload="fixed-128in-64out x64 @ concurrency 8") for i in range(8)]
    for width in (80, 100, 120):
        lines = section(rows, [f"engine model-0 = model-0 {'a=b ' * 40}"], [], [Note(None, "n " * 100)],
                        full=False, width=width)
        assert max(len(line) for line in lines) <= width


def test_the_engine_column_appears_when_there_are_two_engines():
    rows = [row("t.py::a"), row("t.py::b", engine="llama tp=2")]
    assert short_table(rows)[0].startswith("test  engine  workload  ")
    assert short_table(rows)[3].startswith("  a   tiny    w x4")
    assert "engine" not in short_table(ROWS)[0]


def test_full_table_shows_whole_ids_and_every_column_with_a_value():
    assert full_table(ROWS[:2]) == [
        "test                      engine  workload              ok  fail  out tok/s  req/s  "
        "TTFT p50  TTFT p99  TPOT p50  ITL p50  E2EL p50  queue p99  KV max%  hit%  verdict",
        "------------------------  ------  --------------------  --  ----  ---------  -----  "
        "--------  --------  --------  -------  --------  ---------  -------  ----  ----------",
        "suites/b.py::test_two[x]  tiny    w x4 @ concurrency 1   4     0       40.0   2.00  "
        "   125.0     250.0     62.50    62.50       500       0.00        -     -  REGRESSION",
        "suites/a.py::test_one     tiny    w x4 @ concurrency 1   4     0       40.0   2.00  "
        "   125.0     250.0     62.50    62.50       500       0.00        -     -  pass",
        "latencies in ms (TTFT time to first token, TPOT time per output token after the first, "
        "ITL token-normalized inter-token latency, E2EL end to end, queue = client lag); KV max% "
        "= peak KV-cache use; hit% = prefix-cache hit rate",
    ]


def test_section_folds_notes_unless_full():
    notes = [Note("t.py::a", "baseline is stale"), Note("t.py::b", "baseline is stale"),
             Note(None, "results written to x")]
    short = section([], ["engine e = e"], ["t.py::c: slo_capacity_req_s = 4.00 (d)"], notes,
                    full=False)
    assert short == ["engine e = e", "t.py::c: slo_capacity_req_s = 4.00 (d)",
                     "2 tests: baseline is stale (-v lists each)", "results written to x"]
    full = section([], ["engine e = e"], [], notes + notes, full=True)
    assert full == ["engine e = e", "t.py::a: baseline is stale", "t.py::b: baseline is stale",
                    "results written to x"]


def test_wrap_leaves_short_lines_alone_and_indents_continuations():
    assert wrap(["a b c", "one two three four"], width=9) == [
        "a b c", "one two", "    three", "    four"]
