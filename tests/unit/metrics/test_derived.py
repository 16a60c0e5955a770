"""A result's derived numbers (metrics/derived.py): per-GPU throughput, cost and roofline, worked
out once and read alike by the summary's rows and the run file. Times are binary fractions so
every number is exact."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone

import pytest

from pytest_llmperf.metrics import roofline
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.cost import Price, Share
from pytest_llmperf.metrics.derived import derive, derive_all
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.reports.model import summary_rows
from pytest_llmperf.reports.runfile import run_document
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from tests.unit.fingerprints import fingerprint_of

H100_X8 = {"hardware_class": "h100", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 8}
CPU = {"hardware_class": "cpu", "device_count": 0}
# A small Llama-shaped config: the roofline's arithmetic is test_roofline's; here only that
# it is worked out once and read alike.
LLAMA = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256,
         "torch_dtype": "bfloat16"}


def streamed() -> RequestRecord:
    """4 tokens, one every 0.25 s after a 0.25 s TTFT: 4 output tok/s, 20 total tok/s."""
    times = [1.25 + k * 0.25 for k in range(4)]
    return RequestRecord(index=0, expected_prompt_tokens=16, expected_output_tokens=4,
                         scheduled_s=1.0, sent_s=1.0, chunk_times_s=times, chunk_tokens=[1] * 4,
                         usage_prompt_tokens=16, usage_output_tokens=4)


def result(fingerprint, **engine) -> Result:
    metrics = compute_metrics([streamed()])
    return Result(test_id="suites/test_x.py::test_one", key="test_one",
                  engine={"model": "llama", **engine}, engine_label="llama", workload={},
                  workload_label="w", metrics=metrics, runs=(metrics,), records=(streamed(),),
                  fingerprint=fingerprint_of(fingerprint))


def test_on_a_cpu_no_gpus_no_roofline_and_the_whole_machine_priced():
    found = derive(result(CPU), Price(0.36))
    assert (found.engine_gpus, found.output_per_gpu, found.roofline) == (None, None, None)
    assert found.no_roofline == roofline.NO_CPU
    assert found.share == Share(0.36, Price(0.36), 1, 0)
    assert found.values() == pytest.approx({"output_throughput_tok_s_per_gpu": None,
                                            "usd_per_1m_output_tok": 25.0,
                                            "usd_per_1m_total_tok": 5.0,
                                            "roofline_fraction": None})
    assert found.to_dict()["per_gpu"] == {}
    assert found.to_dict()["roofline"] == {"none": roofline.NO_CPU}


def test_without_a_price_no_cost():
    found = derive(result(CPU))
    assert found.share is None
    assert found.usd_per_1m == {"usd_per_1m_output_tok": None, "usd_per_1m_total_tok": None}
    assert found.to_dict()["cost"] == {}


def test_on_gpus_the_engines_gpus_divide_the_throughput_and_the_price(tmp_path):
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text(json.dumps(LLAMA))
    found = derive(result(H100_X8, tensor_parallel_size=2, data_parallel_size=2), Price(0.72),
                   root=tmp_path)
    assert (found.engine_gpus, found.output_per_gpu) == (4, 1.0)
    assert found.share == Share(0.36, Price(0.72), 4, 8)
    assert found.to_dict()["per_gpu"] == {"gpus": 4, "output_throughput_tok_s_per_gpu": 1.0}
    assert found.roofline is not None and found.no_roofline == ""
    assert found.values()["roofline_fraction"] == found.roofline.fraction
    assert found.to_dict()["roofline"] == found.roofline.to_dict()


def test_a_gpu_model_without_its_config_says_why_it_has_no_roofline(tmp_path):
    found = derive(result(H100_X8), root=tmp_path)
    assert found.roofline is None
    assert found.to_dict()["roofline"] == {
        "none": "no roofline: no config.json for llama on this machine"}


def test_rows_and_the_run_file_read_the_same_derived_numbers():
    # Numbers the results alone could not give: each report must read what it was handed.
    results = [result(H100_X8, tensor_parallel_size=4), result(CPU)]
    handed = [dataclasses.replace(found, output_per_gpu=123.0, usd_per_1m={
        "usd_per_1m_output_tok": 7.0, "usd_per_1m_total_tok": 3.0})
        for found in derive_all(results, 0.72)]
    records = [MeasurementRecord.of(result) for result in results]
    rows = summary_rows(records, derived=handed)
    document = run_document(records, fingerprint=fingerprint_of(H100_X8), commit=None,
                            started=datetime(2026, 1, 1, tzinfo=timezone.utc), derived=handed)
    entries = document["llmperf"]["results"]
    for row, entry in zip(rows, entries, strict=True):
        assert row["values"]["output_throughput_tok_s_per_gpu"] == 123.0
        assert row["values"]["usd_per_1m_output_tok"] == entry["cost"]["usd_per_1m_output_tok"]
    assert entries[0]["per_gpu"] == {"gpus": 4, "output_throughput_tok_s_per_gpu": 123.0}
    assert entries[1]["per_gpu"] == {}
