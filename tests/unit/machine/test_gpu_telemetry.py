"""A card's telemetry over a measurement and the energy per token made from it: the summary of
hand-made samples (energy and violation counters read between the samples around the measured
window), the three energy metrics, and how they reach the gate's estimates, the run file, the
reports and the history record; on a CPU run none of it appears."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pytest

from pytest_llmperf.history.record import from_document
from pytest_llmperf.machine.disturbance import Disturbance, GpuState
from pytest_llmperf.machine.gpu_telemetry import CardSettings, GpuTelemetry, Sample, summarize
from pytest_llmperf.metrics import energy, registry
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.reports import html, markdown
from pytest_llmperf.reports.model import gpu_lines, shown_columns, summary_rows
from pytest_llmperf.reports.runfile import run_document
from pytest_llmperf.verdict import references
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from tests.unit.fingerprints import CPU, fingerprint_of

SETTINGS = CardSettings(max_sm_mhz=2000.0, power_limit_w=700.0, default_power_limit_w=700.0)


def second(t: float, watts: float, energy_mj: float, reasons: int = 0x4) -> Sample:
    return Sample(time_s=t, reasons=reasons, busy=True, sm_mhz=1800.0 - 100 * (t % 2),
                  memory_mhz=2600.0, power_w=watts, temperature_c=40.0 + t,
                  energy_mj=energy_mj, violation_ns=(("power", int(t * 0.5e9)),))


# A warm-up at 100 W from 0 to 2 s, then the measured requests at 500 W from 2 to 6 s; the energy
# counter counts millijoules, as NVML's does.
SAMPLES = [second(0, 100, 0), second(1, 100, 100_000), second(2, 100, 200_000, reasons=0x1),
           second(3, 500, 700_000), second(4, 500, 1_200_000), second(5, 500, 1_700_000),
           second(6, 500, 2_200_000)]


def test_the_window_leaves_the_warm_up_out_of_the_energy_and_the_readings():
    found = summarize("0", SAMPLES, SETTINGS, window=(2.0, 6.0))
    assert found.energy_j == pytest.approx(2000.0)  # 4 s at 500 W
    assert (found.samples, found.window_s) == (5, 4.0)
    assert (found.power_w_mean, found.power_w_max) == (420.0, 500.0)  # 100 W at 2 s, then 500
    assert (found.sm_clock_mhz_mean, found.sm_clock_mhz_min) == (1760.0, 1700.0)
    assert found.temperature_c_max == 46.0 and found.power_limit_w == 700.0
    assert found.sm_clock_share == pytest.approx(1760.0 / 2000.0)
    assert dict(found.reason_shares) == {"gpu idle": 0.2, "sw power cap": 0.8}
    assert dict(found.violation_shares) == {"power": pytest.approx(0.5)}


def test_counters_are_read_between_the_samples_around_the_window_ends():
    found = summarize("0", SAMPLES, SETTINGS, window=(2.5, 5.5))
    assert found.energy_j == pytest.approx(1500.0)  # 450 J at 2.5 s, 1950 J at 5.5 s
    assert summarize("0", SAMPLES, SETTINGS).energy_j == pytest.approx(2200.0)  # every sample


def test_a_card_that_reports_nothing_but_its_clock_leaves_the_rest_out():
    bare = [Sample(time_s=t, sm_mhz=1500.0) for t in (0.0, 0.5, 1.0)]
    found = summarize("1", bare, CardSettings())
    assert found.sm_clock_mhz_mean == 1500.0
    assert (found.energy_j, found.power_w_mean, found.temperature_c_max) == (None, None, None)
    assert (found.reason_shares, found.violation_shares, found.sm_clock_share) == ((), (), None)
    assert found.to_dict()["energy_j"] is None


def card(index: str, joules: float | None) -> GpuState:
    return GpuState(index, telemetry=GpuTelemetry(index, 4.0, 8, energy_j=joules))


def test_energy_per_token_sums_every_card_of_the_engine():
    two = Disturbance(None, (card("0", 1500.0), card("1", 500.0)))
    assert dict(energy.energy_metrics(two, prompt_tokens=1000, output_tokens=500)) == {
        "energy_per_output_token_j": 4.0, "energy_per_token_j": pytest.approx(2000 / 1500),
        "output_tokens_per_joule": 0.25}


def test_no_energy_counter_means_no_energy_metric_never_zero():
    assert energy.energy_metrics(None, 1000, 500) == ()  # a CPU run: nothing watched
    one_without = Disturbance(None, (card("0", 1500.0), card("1", None)))
    assert energy.energy_metrics(one_without, 1000, 500) == ()
    assert energy.energy_metrics(Disturbance(None, (card("0", 0.0),)), 1000, 500) == ()


def test_lower_joules_per_token_and_more_tokens_per_joule_are_better():
    assert [registry.direction(name) for name in energy.NAMES] == ["lower", "lower", "higher"]
    assert registry.known("energy_per_output_token_j").header == "J/tok"


def record(index: int, sent: float, times: list[float], error: str | None = None):
    return RequestRecord(index=index, expected_prompt_tokens=16, expected_output_tokens=4,
                         scheduled_s=sent, sent_s=sent, chunk_times_s=times,
                         chunk_tokens=[1] * len(times), usage_prompt_tokens=16,
                         usage_output_tokens=len(times), error=error)


RECORDS = [record(0, 10.0, [10.5, 11.0, 11.5, 12.0]), record(1, 10.5, [11.0, 11.5, 12.0, 14.0]),
           record(2, 9.5, [], error="HTTP 500: boom")]


def test_the_measured_window_is_the_span_the_throughputs_count():
    assert energy.measured_window(RECORDS) == (9.5, 14.0)
    metrics = compute_metrics(RECORDS)
    assert metrics.duration_s == 14.0 - 9.5
    assert energy.measured_window([RECORDS[2]]) is None


def gpu_result(joules_per_run: list[float]) -> Result:
    """A result of one repeat per energy reading, as an H200 run would be, 8 output tokens
    and 32 prompt tokens each."""
    runs = tuple(compute_metrics(RECORDS[:2], disturbance=Disturbance(None, (card("0", joules),)))
                 for joules in joules_per_run)
    telemetry = GpuTelemetry("0", 4.5, 9, sm_clock_mhz_mean=1755.0, sm_clock_mhz_min=1515.0,
                             memory_clock_mhz_mean=2619.0, memory_clock_mhz_min=2619.0,
                             power_w_mean=612.4, power_w_max=699.0, temperature_c_max=53.0,
                             energy_j=joules_per_run[-1], power_limit_w=700.0,
                             sm_clock_share=0.886, reason_shares=(("sw power cap", 0.91),),
                             violation_shares=(("below application clocks", 0.88),))
    return Result(test_id="suites/test_gpu.py::test_chat", key="test_chat",
                  engine={"model": "llama"}, engine_label="llama", workload={},
                  workload_label="chat", metrics=runs[0], runs=runs, records=tuple(RECORDS[:2]),
                  fingerprint=fingerprint_of({"hardware_class": "h200",
                                              "device_name": "NVIDIA H200", "device_count": 1}),
                  gpu_telemetry=(telemetry,))


def test_energy_reaches_the_gates_estimates_like_any_metric():
    current = references.Current.of(gpu_result([16.0, 24.0, 20.0]).runs)
    estimate = current.estimates["energy_per_output_token_j"]
    assert (estimate.value, estimate.n) == (2.5, 3)  # the median of 2.0, 3.0 and 2.5 J/token
    assert current.estimates["output_tokens_per_joule"].value == 0.4


def test_a_cpu_run_has_no_energy_metric_and_says_why():
    metrics = compute_metrics(RECORDS)
    assert not set(energy.NAMES) & set(metrics.flat())
    with pytest.raises(KeyError, match="this run has no GPU energy reading"):
        metrics.get("energy_per_output_token_j")


CPU_ROW_RESULT = dataclasses.replace(gpu_result([20.0]), runs=(compute_metrics(RECORDS[:2]),),
                                     metrics=compute_metrics(RECORDS[:2]), gpu_telemetry=(),
                                     fingerprint=CPU)
GPU_LINE = ("suites/test_gpu.py::test_chat: GPU 0: SM 1,755 MHz (min 1,515), memory 2,619 MHz, "
            "612 W (max 699), up to 53 C, 20 J; clock events: sw power cap 91% of samples; "
            "held below application clocks 88% of the time")


def test_a_gpu_row_shows_joules_per_token_and_a_line_per_card():
    [row] = summary_rows([MeasurementRecord.of(gpu_result([20.0]))])
    assert row["values"]["energy_per_output_token_j"] == 2.5
    assert "J/tok" in [column.header for column in shown_columns([row])]
    assert gpu_lines([row]) == [GPU_LINE]


def test_a_cpu_row_shows_nothing_new():
    [row] = summary_rows([MeasurementRecord.of(CPU_ROW_RESULT)])
    assert row["values"]["energy_per_output_token_j"] is None and "gpus" not in row
    assert "J/tok" not in [column.header for column in shown_columns([row])]
    page = markdown.document(markdown.Report(rows=[row]))
    assert "GPUs" not in page and "J/tok" not in page
    assert "GPUs" not in html.page(markdown.Report(rows=[row]))


def test_markdown_and_html_list_the_gpu_lines():
    [row] = summary_rows([MeasurementRecord.of(gpu_result([20.0]))])
    page = markdown.document(markdown.Report(rows=[row]))
    assert f"### GPUs\n\n- {markdown.plain(GPU_LINE)}\n" in page
    assert "<h2>GPUs</h2>" in html.page(markdown.Report(rows=[row]))


def document(result: Result) -> dict:
    return run_document([MeasurementRecord.of(result)],
                        fingerprint=result.fingerprint,
                        commit=None,
                        started=datetime(2026, 11, 26, tzinfo=timezone.utc))


def test_the_run_file_and_the_history_record_keep_telemetry_and_energy():
    doc = document(gpu_result([16.0, 24.0, 20.0]))
    [entry] = doc["llmperf"]["results"]
    assert entry["metrics"]["energy_per_output_token_j"] == {
        "value": 2.5, "spread": pytest.approx(0.5 * 1.4826), "n": 3, "direction": "lower"}
    [card_entry] = entry["gpu_telemetry"]
    assert card_entry["energy_j"] == 20.0 and card_entry["reason_shares"] == {"sw power cap": 0.91}
    [stored] = from_document(doc).results
    assert stored.metrics["energy_per_output_token_j"].value == 2.5
    assert stored.extra["gpu_telemetry"] == entry["gpu_telemetry"]


def test_a_cpu_run_file_has_no_telemetry_and_no_energy():
    [entry] = document(CPU_ROW_RESULT)["llmperf"]["results"]
    assert "gpu_telemetry" not in entry
    assert not set(energy.NAMES) & set(entry["metrics"])
