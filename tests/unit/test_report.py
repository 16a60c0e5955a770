"""The end-of-session summary table, from Results built out of hand-made request records.

Times are binary fractions (0.25, 0.0625, ...) so every cell is exact and no rounding edge can
make a test pass or fail by accident.
"""

from __future__ import annotations

import math

from pytest_llmperf import checks
from pytest_llmperf.metrics import compute_metrics
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.report import (
    UNITS_LINE,
    engine_keys,
    engine_lines,
    extra_lines,
    summary_lines,
    summary_rows,
)
from pytest_llmperf.result import Result
from pytest_llmperf.stats import Estimate

OK_ID = "suites/test_cpu.py::test_ok"
FAIL_ID = "suites/test_cpu.py::test_fail"
ENGINE = "tiny-llama eager=True"
WORKLOAD = "fixed-16in-4out x1 @ concurrency 1"


def streamed(ttft: float = 0.25, gap: float = 0.25, tokens: int = 4) -> RequestRecord:
    """Scheduled at 0.9375, sent at 1.0 (62.5 ms client lag), then one token every `gap`."""
    times = [1.0 + ttft + k * gap for k in range(tokens)]
    return RequestRecord(
        index=0, expected_prompt_tokens=16, expected_output_tokens=tokens, scheduled_s=0.9375,
        sent_s=1.0, chunk_times_s=times, chunk_tokens=[1] * tokens, usage_prompt_tokens=16,
        usage_output_tokens=tokens,
    )


def failed() -> RequestRecord:
    # Sent 31.25 ms late and then failed: it counts in queue_s, in no other distribution.
    return RequestRecord(index=0, expected_prompt_tokens=16, expected_output_tokens=4,
                         scheduled_s=0.0, sent_s=0.03125, error="HTTP 500: boom")


def result(test_id: str, *runs: list[RequestRecord], server=None) -> Result:
    metrics = [compute_metrics(records) for records in runs]
    return Result(
        test_id=test_id, key=test_id.split("::", 1)[1], engine={"model": "tiny"},
        engine_label=ENGINE, workload={}, workload_label=WORKLOAD, metrics=metrics[0],
        runs=tuple(metrics), records=tuple(runs[0]), server_metrics=server or {},
    )


def ok_result(**server) -> Result:
    return result(OK_ID, [streamed()], server=server)


def test_the_whole_table():
    results = [ok_result(kv_cache_usage_max=0.4375, prefix_cache_hit_rate=0.75),
               result(FAIL_ID, [failed()])]
    assert summary_lines(results, {OK_ID: "pass"}) == [
        "test                           engine      workload                          "
        "  ok  fail  out tok/s  req/s  TTFT p50  TTFT p99  TPOT p50  ITL p50  E2EL p50  queue p99"
        "  KV max%  hit%  verdict",
        "-----------------------------  ----------  ----------------------------------"
        "  --  ----  ---------  -----  --------  --------  --------  -------  --------  ---------"
        "  -------  ----  -------",
        "suites/test_cpu.py::test_ok    tiny-llama  fixed-16in-4out x1 @ concurrency 1"
        "   1     0        4.0   1.00     250.0     250.0    250.00   250.00      1000      62.50"
        "       44    75  pass",
        # Trailing blanks are stripped: the empty verdict leaves no padding behind.
        "suites/test_cpu.py::test_fail  tiny-llama  fixed-16in-4out x1 @ concurrency 1"
        "   0     1        0.0   0.00         -         -         -        -         -      31.25"
        "        -     -",
        UNITS_LINE,
        # The engine column holds the model's name; its legend spells out the spec.
        "engine tiny-llama = tiny-llama eager=True",
    ]


def test_engine_keys_number_the_specs_of_one_model_in_order_of_appearance():
    labels = ["tiny seqs=16", "llama-8b tp=1", "tiny seqs=1", "tiny seqs=16", "tiny seqs=8"]
    assert engine_keys(labels) == {"tiny seqs=16": "tiny#1", "llama-8b tp=1": "llama-8b",
                                   "tiny seqs=1": "tiny#2", "tiny seqs=8": "tiny#3"}


def test_engine_legend_carries_start_times_from_every_worker():
    rows = [["t::a", "tiny seqs=16"], ["t::b", "tiny seqs=1"], ["t::c", "tiny seqs=16"]]
    starts = [("tiny seqs=1", 24.56), ("tiny seqs=16", 31.04), ("tiny seqs=16", 25.0),
              ("ghost", 20.0)]  # started by a test that then failed before measuring
    assert engine_lines(rows, starts) == [
        "engine tiny#1 = tiny seqs=16; healthy after 31.0 s, 25.0 s",
        "engine tiny#2 = tiny seqs=1; healthy after 24.6 s",
        "engine ghost: healthy after 20.0 s",
    ]
    assert engine_lines([], starts) == ["engine tiny seqs=1: healthy after 24.6 s",
                                        "engine tiny seqs=16: healthy after 31.0 s, 25.0 s",
                                        "engine ghost: healthy after 20.0 s"]


def test_row_cells_in_units_of_the_header():
    # 4 tokens in 1 s (first send to last token); TTFT 250 ms; 3 gaps of 250 ms after the first.
    [row] = summary_rows([ok_result(kv_cache_usage_max=0.4375, prefix_cache_hit_rate=0.75)],
                         {OK_ID: "REGRESSION"})
    assert row == [OK_ID, ENGINE, WORKLOAD, "1", "0", "4.0", "1.00", "250.0", "250.0", "250.00",
                   "250.00", "1000", "62.50", "44", "75", "REGRESSION"]


def test_nan_distributions_show_a_dash():
    # Every request failed: TTFT/TPOT/ITL/E2EL have no values (NaN), which must not read "nan".
    [row] = summary_rows([result(FAIL_ID, [failed()])], {})
    assert row[3:] == ["0", "1", "0.0", "0.00", "-", "-", "-", "-", "-", "31.25", "-", "-", ""]
    assert "nan" not in " ".join(row).lower()


def test_a_single_token_output_has_no_tpot():
    # TPOT needs at least two tokens; a 1-token output leaves its distribution empty.
    [row] = summary_rows([result(OK_ID, [streamed(tokens=1)])], {})
    assert row[9:11] == ["-", "-"]  # TPOT p50, ITL p50
    assert row[7] == "250.0"  # TTFT still measured


def test_server_metric_columns_blank_without_a_metrics_endpoint():
    # An external endpoint without /metrics gives no server metrics: a dash, not 0%.
    [row] = summary_rows([ok_result()], {})
    assert row[-3:] == ["-", "-", ""]


def test_server_metric_zero_is_shown_as_zero():
    [row] = summary_rows([ok_result(kv_cache_usage_max=0.0, prefix_cache_hit_rate=0.0)], {})
    assert row[-3:-1] == ["0", "0"]


def test_repeats_show_the_median_of_each_metric():
    # Three repeats with TTFT 250, 500 and 125 ms: the table shows the median (250), not the
    # first run's value and not the mean (291.7).
    res = result(OK_ID, [streamed(ttft=0.5)], [streamed(ttft=0.25)], [streamed(ttft=0.125)])
    assert res.metrics.ttft_s.p50 == 0.5  # the Result's own metrics are the first run here
    [row] = summary_rows([res], {})
    assert row[7:9] == ["250.0", "250.0"]


def test_verdicts_are_optional():
    lines = summary_lines([ok_result()])
    assert lines[0].endswith("verdict")
    assert lines[2].endswith("-     -")  # no verdict cell text at all


def test_no_results_no_table():
    assert summary_lines([], {OK_ID: "pass"}) == []


def test_units_line_names_every_abbreviation():
    for word in ("TTFT", "TPOT", "ITL", "E2EL", "queue", "KV max%", "hit%", "ms"):
        assert word in UNITS_LINE


def test_extra_lines_one_per_measurement():
    extras = [
        ("suites/test_cpu.py::test_capacity", {"slo_capacity_req_s": Estimate(1234.5678, 1.0, 3)},
         "largest rate meeting the SLO"),
        ("suites/test_cpu.py::test_offline",
         {"output_throughput_tok_s": Estimate(2048.0, 0.0, 1),
          "total_throughput_tok_s": Estimate(4096.25, 0.0, 1)}, "offline LLM.generate"),
    ]
    assert extra_lines(extras, {"suites/test_cpu.py::test_capacity": "pass"}) == [
        "suites/test_cpu.py::test_capacity: slo_capacity_req_s = 1,234.57 "
        "(largest rate meeting the SLO)  pass",
        "suites/test_cpu.py::test_offline: output_throughput_tok_s = 2,048.00, "
        "total_throughput_tok_s = 4,096.25 (offline LLM.generate)",
    ]


def test_extra_lines_with_nothing():
    assert extra_lines([], {}) == []


def test_extra_lines_nan_value():
    # A capacity search where no rate met the SLO yields NaN; the line still says so.
    line = extra_lines([("t::x", {"slo_capacity_req_s": Estimate(math.nan, math.nan, 1)}, "d")],
                       {"t::x": "MISSED TARGET"})
    assert line == ["t::x: slo_capacity_req_s = nan (d)  MISSED TARGET"]


def test_a_repeat_with_no_ttft_shows_a_dash_as_the_gate_sees_nan():
    # Repeat 3 failed every request. The gate (stats.combine_repeats) makes the whole estimate
    # NaN so a partly missing run cannot pass; the table must not show a TTFT for it either.
    res = result(OK_ID, [streamed(ttft=0.25)], [streamed(ttft=0.5)], [failed()])
    assert math.isnan(checks.estimates_of(res.runs)["ttft_s.p50"].value)
    [row] = summary_rows([res], {})
    assert row[7] == "-"
