"""The rows every report reads, from Results built out of hand-made request records.

Times are binary fractions (0.25, 0.0625, ...) so every cell is exact and no rounding edge can
make a test pass or fail by accident.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.metrics.cost import Price
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.reports import terminal
from pytest_llmperf.reports.model import (
    COLUMNS,
    by_severity,
    counted,
    engine_keys,
    engine_lines,
    extra_lines,
    legend,
    shown_columns,
    summary_rows,
    verdict_counts,
)
from pytest_llmperf.verdict import references
from pytest_llmperf.verdict.measurement_record import Extras, MeasurementRecord
from pytest_llmperf.verdict.status import Status
from tests.unit.fingerprints import fingerprint_of
from tests.unit.reports.builders import ENGINE, WORKLOAD, result, streamed

OK_ID = "suites/test_cpu.py::test_ok"
FAIL_ID = "suites/test_cpu.py::test_fail"


def failed() -> RequestRecord:
    # Sent 31.25 ms late and then failed: it counts in queue_s, in no other distribution.
    return RequestRecord(index=0, expected_prompt_tokens=16, expected_output_tokens=4,
                         scheduled_s=0.0, sent_s=0.03125, error="HTTP 500: boom")


def ok_result(**server) -> Result:
    return result(OK_ID, [streamed()], server=server)


H100_X8 = {"hardware_class": "h100", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 8}


def on_h100s(res: Result, **engine) -> Result:
    """The result as measured on 8 H100s by an engine with these fields (a fake: only GPU
    machines measure such results for real)."""
    return dataclasses.replace(res, engine={"model": "tiny", **engine},
                               fingerprint=fingerprint_of(H100_X8),
                               engine_label=" ".join(["tiny", *map(str, engine.values())]))


def cells(row) -> list[str]:
    """The row's cell under every column that is not optional (goodput and cost are)."""
    return [column.cell(row["values"]) for column in COLUMNS if not column.optional]


def records(*results: Result) -> list[MeasurementRecord]:
    """The results' measurement records, never judged."""
    return [MeasurementRecord.of(result) for result in results]


def cell(row, header: str) -> str:
    return next(c.cell(row["values"]) for c in COLUMNS if c.header == header)


def test_a_row_holds_each_column_in_its_metric_unit():
    # 4 tokens in 1 s (first send to last token); TTFT 250 ms; 3 gaps of 250 ms after the first.
    [row] = summary_rows([MeasurementRecord.of(
        ok_result(kv_cache_usage_max=0.4375, prefix_cache_hit_rate=0.75), Status.REGRESSION)])
    assert row == {
        "test_id": OK_ID, "engine": ENGINE, "workload": WORKLOAD, "status": "regression",
        "values": {"completed": 1.0, "failed": 0.0, "output_throughput_tok_s": 4.0,
                   "output_throughput_tok_s_per_gpu": None,
                   "request_throughput_req_s": 1.0, "goodput_req_s": None,
                   "goodput_share": None, "ttft_s.p50": 0.25, "ttft_s.p99": 0.25,
                   "tpot_s.p50": 0.25, "itl_s.p50": 0.25, "e2el_s.p50": 1.0,
                   "queue_s.p99": 0.0625, "server:kv_cache_usage_max": 0.4375,
                   "server:prefix_cache_hit_rate": 0.75,
                   "server:spec_decode_acceptance_rate": None,
                   "server:spec_decode_mean_accepted_length": None, "usd_per_1m_output_tok": None,
                   "usd_per_1m_total_tok": None, "roofline_fraction": None,
                   "energy_per_output_token_j": None, "total_throughput_tok_s": 20.0,
                   # the means the -v line of where the time went splits (metrics/phases.py)
                   "ttft_s.mean": 0.25, "e2el_s.mean": 1.0, "server:ttft_s.mean": None,
                   "server:queue_s.mean": None, "server:prefill_s.mean": None,
                   "server:e2el_s.mean": None, "server:decode_s.mean": None,
                   "itl_s.mean": 0.25, "server:itl_s.mean": None,
                   "server:spec_decode_drafts": None},
        "server": {}, "cost": "",
    }
    assert cells(row) == ["1", "0", "4.0", "1.00", "250.0", "250.0", "250.00", "250.00", "1000",
                          "62.50", "44", "75"]
    assert [cell(row, h) for h in ("good/s", "good%", "$/1M out", "$/1M tot", "out/GPU")] == \
        ["-"] * 5


def test_a_price_adds_the_cost_per_million_tokens():
    # 4 output tok/s and 20 total tok/s at $0.36/h: $0.0001/s buys 4 and 20 tokens.
    [row] = summary_rows(records(ok_result()), usd_per_hour=0.36)
    assert row["values"]["usd_per_1m_output_tok"] == pytest.approx(25.0, rel=1e-12)
    assert row["values"]["usd_per_1m_total_tok"] == pytest.approx(5.0, rel=1e-12)
    assert [cell(row, "$/1M out"), cell(row, "$/1M tot")] == ["25", "5"]
    # A CPU machine is priced whole, and said so under the table.
    assert row["cost"] == "cost 0.36 USD/h: the whole machine"
    assert engine_lines([row]) == [
        f"engine tiny-llama = {ENGINE}; cost 0.36 USD/h: the whole machine"]


def test_on_gpus_a_row_has_output_per_gpu_and_pays_the_engines_share():
    # 4 output tok/s over TP 2 x DP 2 = 4 GPUs; 4 of the 8 GPUs of a $0.72/h machine: $0.36/h,
    # so the dollars are those of the whole-machine test above.
    [row] = summary_rows(records(on_h100s(ok_result(), tensor_parallel_size=2,
                                          data_parallel_size=2)), usd_per_hour=Price(0.72))
    assert row["values"]["output_throughput_tok_s_per_gpu"] == 1.0
    assert cell(row, "out/GPU") == "1.0"
    assert row["values"]["usd_per_1m_output_tok"] == pytest.approx(25.0, rel=1e-12)
    assert row["cost"] == "cost 0.36 USD/h: 4 of 8 GPUs of a 0.72 USD/h machine"
    assert engine_lines([row]) == [
        "engine tiny = tiny 2 2; cost 0.36 USD/h: 4 of 8 GPUs of a 0.72 USD/h machine"]
    assert "out/GPU" in [c.header for c in shown_columns([row])]
    # A price per GPU: $0.09 x 4 GPUs.
    [per_gpu] = summary_rows(records(on_h100s(ok_result(), tensor_parallel_size=4)),
                             usd_per_hour=Price(0.09, "gpu"))
    assert per_gpu["values"]["usd_per_1m_output_tok"] == pytest.approx(25.0, rel=1e-12)
    assert per_gpu["values"]["output_throughput_tok_s_per_gpu"] == 1.0
    assert per_gpu["cost"] == "cost 0.36 USD/h: 4 GPUs at 0.09 USD/h each"


def test_nan_distributions_show_a_dash():
    # Every request failed: TTFT/TPOT/ITL/E2EL have no values (NaN), which must not read "nan".
    [row] = summary_rows(records(result(FAIL_ID, [failed()])), usd_per_hour=1.0)
    assert cells(row) == ["0", "1", "0.0", "0.00", "-", "-", "-", "-", "-", "31.25", "-", "-"]
    assert cell(row, "$/1M out") == "-"  # and no cost for no throughput


def test_a_single_token_output_has_no_tpot():
    # TPOT needs at least two tokens; a 1-token output leaves its distribution empty.
    [row] = summary_rows(records(result(OK_ID, [streamed(tokens=1)])))
    assert cells(row)[4:8] == ["250.0", "250.0", "-", "-"]  # TTFT still measured


def test_server_metric_columns_blank_without_a_metrics_endpoint():
    # An external endpoint without /metrics gives no server metrics: a dash, not 0%.
    [row] = summary_rows(records(ok_result()))
    assert cells(row)[10:12] == ["-", "-"]


def test_server_metric_zero_is_shown_as_zero():
    [row] = summary_rows(records(ok_result(kv_cache_usage_max=0.0, prefix_cache_hit_rate=0.0)))
    assert cells(row)[10:12] == ["0", "0"]


def test_repeats_show_the_median_of_each_metric():
    # Three repeats with TTFT 250, 500 and 125 ms: the table shows the median (250), not the
    # first run's value and not the mean (291.7).
    res = result(OK_ID, [streamed(ttft=0.5)], [streamed(ttft=0.25)], [streamed(ttft=0.125)])
    assert res.metrics.ttft_s.p50 == 0.5  # the Result's own metrics are the first run here
    [row] = summary_rows(records(res))
    assert cells(row)[4:6] == ["250.0", "250.0"]


def test_a_repeat_with_no_ttft_shows_a_dash_as_the_gate_sees_nan():
    # Repeat 3 failed every request. The gate (stats.combine_repeats) makes the whole estimate
    # NaN so a partly missing run cannot pass; the table must not show a TTFT for it either.
    res = result(OK_ID, [streamed(ttft=0.25)], [streamed(ttft=0.5)], [failed()])
    assert math.isnan(references.Current.of(res.runs).estimates["ttft_s.p50"].value)
    [row] = summary_rows(records(res))
    assert row["values"]["ttft_s.p50"] is None and cells(row)[4] == "-"


def test_rows_without_a_verdict_have_an_empty_one():
    assert [row["status"] for row in summary_rows(records(ok_result()))] == [""]


def row(test_id: str, verdict: str) -> dict:
    return {"test_id": test_id, "engine": ENGINE, "workload": WORKLOAD,
            "status": Status.from_summary(verdict).value if verdict else "", "values": {}}


def test_problems_come_first_the_rest_in_the_order_measured():
    rows = [row("t::a", "pass"), row("t::b", "MISSED TARGET"), row("t::c", "no baseline"),
            row("t::d", "REGRESSION"), row("t::e", "CLIENT LIMITED"), row("t::f", "ERROR"),
            row("t::g", "REGRESSION")]
    assert [r["test_id"] for r in by_severity(rows)] == [
        "t::f", "t::d", "t::g", "t::b", "t::e", "t::a", "t::c"]


def test_verdict_counts_worst_first_then_by_count():
    rows = [row("t::a", "pass"), row("t::b", "no baseline"), row("t::c", "pass"),
            row("t::d", "REGRESSION"), row("t::e", "")]
    assert [(counted(status), n) for status, n in verdict_counts(rows)] == [("REGRESSION", 1), ("pass", 2), ("no baseline", 1),
                                    ("not judged", 1)]


def test_cost_columns_only_where_a_row_has_a_cost():
    unpriced = summary_rows(records(ok_result()))
    priced = summary_rows(records(ok_result()), usd_per_hour=1.0)
    assert [c.header for c in shown_columns(unpriced)][-2:] == ["KV max%", "hit%"]
    assert [c.header for c in shown_columns(priced)][-2:] == ["$/1M out", "$/1M tot"]
    assert "out/GPU" not in [c.header for c in shown_columns(priced)]  # a CPU run: no GPUs


def test_the_legend_names_what_the_shown_columns_mean_once_each():
    assert legend(COLUMNS) == (
        "latencies in ms (TTFT time to first token, TPOT time per output token after the first, "
        "ITL token-normalized inter-token latency, E2EL end to end, queue = client lag); "
        "out/GPU = output tok/s per GPU the engine uses (TP x PP x DP); "
        "good/s, good% = goodput: requests/s meeting every per-request SLO limit, and their "
        "share; KV max% = peak KV-cache use; hit% = prefix-cache hit rate; acc% = draft tokens "
        "accepted (speculative decoding); acc len = tokens per drafting step (1 + accepted per "
        "draft); $/1M out, $/1M tot = "
        "dollars per million output and total tokens, at the engine's share of the price (on its "
        "engine line); roof% = the GPU memory-bandwidth lower bound "
        "of a decode step as a share of the measured TPOT p50 (docs/roofline.md); J/tok = "
        "joules per output token, over all the engine's GPUs (NVML's energy counter)")
    assert legend([c for c in COLUMNS if c.header in ("ok", "out tok/s")]) == "latencies in ms"


def test_engine_keys_number_the_specs_of_one_model_in_order_of_appearance():
    labels = ["tiny seqs=16", "llama-8b tp=1", "tiny seqs=1", "tiny seqs=16", "tiny seqs=8"]
    assert engine_keys(labels) == {"tiny seqs=16": "tiny#1", "llama-8b tp=1": "llama-8b",
                                   "tiny seqs=1": "tiny#2", "tiny seqs=8": "tiny#3"}


def test_engine_legend_carries_start_times_from_every_worker():
    rows = [{"test_id": "t::a", "engine": "tiny seqs=16"},
            {"test_id": "t::b", "engine": "tiny seqs=1"},
            {"test_id": "t::c", "engine": "tiny seqs=16"}]
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


def test_engine_legend_says_how_often_an_engine_was_restarted_and_when_given_up():
    rows = [{"test_id": "t::a", "engine": "tiny seqs=16"}, {"test_id": "t::b", "engine": "big"}]
    starts = [("tiny seqs=16", 20.0), ("tiny seqs=16", 21.0), ("big", 30.0), ("big", 31.0),
              ("big", 32.0)]
    # From two workers: tiny died once in each; big three times (the last not restarted).
    deaths = [("tiny seqs=16", 1, False), ("tiny seqs=16", 1, False), ("big", 2, True)]
    assert engine_lines(rows, starts, deaths) == [
        "engine tiny = tiny seqs=16; healthy after 20.0 s, 21.0 s; restarted 2 time(s) after "
        "dying or stalling",
        "engine big = big; healthy after 30.0 s, 31.0 s, 32.0 s; restarted 2 time(s) after "
        "dying or stalling; then not started again",
    ]


def extra(test_id: str, estimates, detail: str, status=None) -> MeasurementRecord:
    return MeasurementRecord(MeasurementId.parse(test_id), status=status,
                             extras=Extras(estimates, detail))


def test_extra_lines_one_per_measurement():
    extras = [
        extra("suites/test_cpu.py::test_capacity",
              {"slo_capacity_req_s": Estimate(1234.5678, 1.0, 3)}, "largest rate meeting the SLO",
              Status.PASS),
        extra("suites/test_cpu.py::test_offline",
              {"output_throughput_tok_s": Estimate(2048.0, 0.0, 1),
               "total_throughput_tok_s": Estimate(4096.25, 0.0, 1)}, "offline LLM.generate"),
        MeasurementRecord.of(ok_result()),  # a run: a row of the table, not a line here
    ]
    assert extra_lines(extras) == [
        "suites/test_cpu.py::test_capacity: slo_capacity_req_s = 1,234.57 "
        "(largest rate meeting the SLO)  pass",
        "suites/test_cpu.py::test_offline: output_throughput_tok_s = 2,048.00, "
        "total_throughput_tok_s = 4,096.25 (offline LLM.generate)",
    ]


def test_extra_lines_with_nothing():
    assert extra_lines([]) == []


def test_extra_lines_nan_value():
    # A capacity search where no rate met the SLO yields NaN; the line still says so.
    line = extra_lines([extra("t::x", {"slo_capacity_req_s": Estimate(math.nan, math.nan, 1)},
                              "d", Status.MISSED)])
    assert line == ["t::x: slo_capacity_req_s = nan (d)  MISSED TARGET"]


def test_a_table_sorted_worst_first_numbers_engines_as_the_legend_does():
    # Measured: tiny seqs=16 (#1 in the legend), then tiny seqs=1 (#2), which regressed and so
    # leads the table. Its engine cell must still read #2: the number points into the legend.
    rows = [dict(row("t::a", "pass"), engine="tiny seqs=16"),
            dict(row("t::b", "REGRESSION"), engine="tiny seqs=1")]
    assert engine_lines(rows)[:2] == ["engine tiny#1 = tiny seqs=16", "engine tiny#2 = tiny seqs=1"]
    for table in (terminal.full_table(rows), terminal.short_table(rows)):
        [line_b] = [line for line in table if "REGRESSION" in line]
        [line_a] = [line for line in table if "pass" in line]
        assert "tiny#2" in line_b and "tiny#1" in line_a
