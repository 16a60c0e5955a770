"""Run files: pytest-benchmark layout (read by pytest-benchmark itself), our section, round trip,
exact error messages."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_llmperf.metrics.cost import Price
from pytest_llmperf.reports.runfile import run_document, write_run
from pytest_llmperf.reports.saved_runs import RunFileError, read_run, resolve_saved
from pytest_llmperf.verdict.baselines import BaselineEntry
from pytest_llmperf.verdict.gate import DEFAULT_GATED
from pytest_llmperf.verdict.measurement_record import GateSettings
from pytest_llmperf.verdict.status import Status
from tests.unit.fingerprints import fingerprint_of
from tests.unit.reports.run_files import (
    FINGERPRINT,
    STARTED,
    document,
    make_result,
    records,
)

FIX = "write the file again with --llmperf-json PATH or --llmperf-save NAME"
LATENCY_NAMES = ("ttft_s", "tpot_s", "itl_s", "e2el_s")


def strict_json(text: str):
    """Parse as JavaScript's JSON.parse would (github-action-benchmark): no NaN, no Infinity."""
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def benchmark(doc: dict, name: str) -> dict:
    return next(bench for bench in doc["benchmarks"] if bench["name"] == name)


# ---------------------------------------------------------------- the document


def test_document_has_pytest_benchmark_layout_and_our_section():
    doc = document(make_result(), verdicts={"suites/test_cpu.py::test_fixed[64]": Status.PASS})
    assert set(doc) == {"machine_info", "commit_info", "benchmarks", "datetime", "version",
                        "llmperf"}
    assert doc["commit_info"] == {"id": "3f2c1e0"}
    assert doc["datetime"] == "2026-11-22T10:04:31+00:00"
    assert doc["machine_info"]["cpu"] == {"brand_raw": "Fake CPU 9000", "count": 4}
    assert doc["machine_info"]["vllm"] == "0.31.0"
    assert [b["name"] for b in doc["benchmarks"]] == [
        "test_fixed[64]::ttft_s", "test_fixed[64]::tpot_s", "test_fixed[64]::itl_s",
        "test_fixed[64]::e2el_s", "test_fixed[64]::s_per_output_tok",
    ]
    ttft = benchmark(doc, "test_fixed[64]::ttft_s")
    assert ttft["group"] == "suites/test_cpu.py::test_fixed[64]"
    assert ttft["fullname"] == "suites/test_cpu.py::test_fixed[64]::ttft_s"
    assert ttft["param"] == "64"
    assert ttft["extra_info"] == {"metric": "ttft_s", "unit": "s", "engine": "tiny",
                                  "workload": "fixed 8/4",
                                  "rounds": "requests of the representative run"}
    section = doc["llmperf"]
    assert section["format"] == 2 and section["fingerprint"] == FINGERPRINT.to_dict()
    (entry,) = section["results"]
    assert entry["key"] == "test_fixed[64]" and entry["status"] == "pass"
    assert entry["engine"] == {"model": "tiny", "max_num_seqs": 8}
    # The engine's start: a metric of one sample, the same start served every repeat.
    assert entry["metrics"]["engine_start_s"] == {"value": 12.5, "spread": 0.0, "n": 1,
                                                  "direction": "lower"}
    assert "engine_start_s" not in entry  # beside the metrics only in files written before
    assert set(entry["metrics"]) == set(make_result().metrics.flat())
    assert entry["metrics"]["ttft_s.p50"] == pytest.approx(
        {"value": 0.2, "spread": 0.0, "n": 1, "direction": "lower"})
    assert entry["metrics"]["output_throughput_tok_s"]["direction"] == "higher"


def test_latency_stats_come_from_the_summary_and_quartiles_from_the_requests():
    result = make_result(ttfts=(0.1, 0.2, 0.3, 0.4, 2.0))
    stats = benchmark(document(result), "test_fixed[64]::ttft_s")["stats"]
    summary = result.metrics.ttft_s
    assert stats["min"] == summary.min and stats["max"] == summary.max
    assert stats["mean"] == summary.mean and stats["median"] == summary.p50
    assert stats["stddev"] == summary.std and stats["rounds"] == 5 and stats["iterations"] == 1
    assert stats["ops"] == pytest.approx(1 / summary.mean)
    assert stats["total"] == pytest.approx(summary.mean * 5)
    # Linear interpolation over 0.1 .. 2.0: q1 = 0.2, q3 = 0.4, iqr 0.2, fences -0.1 and 0.7,
    # so 2.0 is the only IQR outlier; mean 0.6, std 0.7 -> 0.1 .. 1.3 within, 2.0 outside.
    assert (stats["q1"], stats["q3"], stats["iqr"]) == pytest.approx((0.2, 0.4, 0.2))
    assert (stats["ld15iqr"], stats["hd15iqr"]) == pytest.approx((0.1, 0.4))
    assert stats["iqr_outliers"] == 1 and stats["stddev_outliers"] == 1
    assert stats["outliers"] == "1;1"


def test_stats_are_approximated_without_the_requests():
    result = make_result(ttfts=(0.1, 0.2, 0.3, 0.4, 2.0), keep_records=False)
    stats = benchmark(document(result), "test_fixed[64]::ttft_s")["stats"]
    summary = result.metrics.ttft_s
    # median -/+ 0.6745 std, kept within [min, max]: 0.3 - 0.47 is below min.
    assert stats["q1"] == summary.min
    assert stats["q3"] == pytest.approx(summary.p50 + 0.6745 * summary.std)
    assert stats["outliers"] == "0;0"


def test_throughput_is_seconds_per_output_token_over_the_repeats():
    result = make_result(scales=(1.0, 1.5, 2.0))
    bench = benchmark(document(result), "test_fixed[64]::s_per_output_tok")
    inverse = sorted(1 / run.output_throughput_tok_s for run in result.runs)
    stats = bench["stats"]
    assert stats["rounds"] == 3
    assert (stats["min"], stats["median"], stats["max"]) == pytest.approx(inverse)
    assert stats["ops"] == pytest.approx(1 / np.mean(inverse))  # ~ tok/s
    assert bench["extra_info"]["unit"] == "s/token"
    assert bench["extra_info"]["metric"] == "output_throughput_tok_s"


def test_empty_distribution_has_no_benchmark_and_is_null_in_the_file(tmp_path):
    # One token per output: no TPOT, no ITL (their Summaries are NaN with n=0).
    result = make_result(tokens=1)
    path = tmp_path / "run.json"
    write_run(path, document(result))
    doc = strict_json(path.read_text())  # parses: no NaN token anywhere
    assert [b["name"].split("::")[1] for b in doc["benchmarks"]] == [
        "ttft_s", "e2el_s", "s_per_output_tok"]
    assert doc["llmperf"]["results"][0]["metrics"]["tpot_s.p50"]["value"] is None
    saved = read_run(path).results["test_fixed[64]"]
    assert math.isnan(saved.estimates["tpot_s.p50"].value)
    assert "tpot_s.p50" not in saved.entries()  # nothing to compare against


def test_file_is_what_github_action_benchmark_reads(tmp_path):
    # Its `tool: 'pytest'` parser takes fullname, stats.ops (bigger is better), stats.stddev,
    # stats.mean and stats.rounds of every benchmark.
    path = tmp_path / "run.json"
    write_run(path, document(make_result(scales=(1.0, 1.1, 0.9))))
    for bench in strict_json(path.read_text())["benchmarks"]:
        stats = bench["stats"]
        assert isinstance(bench["fullname"], str) and stats["ops"] > 0
        assert stats["stddev"] >= 0 and stats["mean"] > 0 and stats["rounds"] >= 1


def run_pytest_benchmark(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "compare", *args], cwd=cwd,
        capture_output=True, text=True, timeout=120, check=False,
    )


def test_pytest_benchmark_compare_reads_our_file(tmp_path):
    write_run(tmp_path / "0001_a.json", document(make_result(), make_result(
        "suites/test_cpu.py::test_other", (0.3, 0.3))))
    done = run_pytest_benchmark(tmp_path, "0001_a.json", "--columns=min,median,iqr,ops,rounds")
    assert done.returncode == 0, done.stderr
    assert "Failed to load" not in done.stderr + done.stdout
    for name in ("test_fixed[64]::ttft_s", "test_fixed[64]::s_per_output_tok",
                 "test_other::e2el_s"):
        assert name in done.stdout
    assert "benchmark 'suites/test_cpu.py::test_fixed[64]': 5 tests" in done.stdout


def test_pytest_benchmark_compares_two_of_our_runs(tmp_path):
    write_run(tmp_path / "0001_before.json", document(make_result()))
    write_run(tmp_path / "0002_after.json", document(make_result(ttfts=(0.3,) * 4)))
    done = run_pytest_benchmark(tmp_path, "0001_before.json", "0002_after.json")
    assert done.returncode == 0, done.stderr
    assert "test_fixed[64]::ttft_s (0001_before)" in done.stdout
    assert "test_fixed[64]::ttft_s (0002_after)" in done.stdout


def test_pytest_benchmark_compares_runs_saved_under_any_name(tmp_path):
    """As --llmperf-save writes them (.llmperf/runs/NAME.json): pytest-benchmark's own names
    start with a counter, and it reads other names all the same (docs/reports.md)."""
    other = "suites/test_cpu.py::test_other"
    write_run(tmp_path / "before.json", document(make_result(), make_result(other, (0.3, 0.3))))
    write_run(tmp_path / "after.json", document(make_result(ttfts=(0.3,) * 4),
                                                make_result(other, (0.3, 0.3))))
    done = run_pytest_benchmark(tmp_path, "before.json", "after.json", "--group-by=name",
                                "--columns=median,ops,rounds")
    assert done.returncode == 0, done.stderr
    for test in ("test_fixed[64]", "test_other"):
        assert f"benchmark '{test}::ttft_s': 2 tests" in done.stdout
        for run in ("before", "after"):
            assert f"{test}::s_per_output_tok ({run})" in done.stdout


# ---------------------------------------------------------------- reading back


def test_round_trip(tmp_path):
    result = make_result(scales=(1.0, 1.2, 0.9))
    other = make_result("suites/test_cpu.py::TestX::test_y", (0.3, 0.3))
    path = tmp_path / "runs" / "before.json"
    write_run(path, document(result, other, verdicts={result.test_id: Status.REGRESSION}))
    run = read_run(path)
    assert run.path == os.fspath(path) and run.fingerprint == FINGERPRINT.to_dict()
    assert run.commit == "3f2c1e0" and run.started == "2026-11-22T10:04:31+00:00"
    assert list(run.results) == ["test_fixed[64]", "TestX::test_y"]
    saved = run.results["test_fixed[64]"]
    assert saved.test_id == result.test_id and saved.status == Status.REGRESSION
    assert saved.engine == result.engine and saved.workload_label == "fixed 8/4"
    assert saved.metrics["engine_start_s"].value == 12.5 and saved.path == os.fspath(path)
    # The median over the three repeats, with its spread (MAD x 1.4826).
    values = sorted(run.get("ttft_s.p50") for run in result.runs)
    ttft = saved.estimates["ttft_s.p50"]
    assert ttft.value == pytest.approx(values[1]) and ttft.n == 3
    assert ttft.spread == pytest.approx(1.4826 * np.median(np.abs(np.array(values) - values[1])))
    assert saved.directions["output_throughput_tok_s"] == "higher"
    assert run.results["TestX::test_y"].status is None


def test_saved_run_stands_in_for_a_baseline(tmp_path):
    path = tmp_path / "run.json"
    write_run(path, document(make_result(scales=(1.0, 1.2, 0.9))))
    saved = read_run(path).results["test_fixed[64]"]
    entries = saved.entries()
    assert list(entries) == sorted(DEFAULT_GATED)
    estimate = saved.estimates["ttft_s.p50"]
    assert entries["ttft_s.p50"] == BaselineEntry(
        value=estimate.value, spread=estimate.spread, direction="lower", tolerance=0.1, n=3)
    assert list(saved.entries(["ttft_s.p99", "nope"], tolerance=0.2)) == ["ttft_s.p99"]
    assert saved.entries(["ttft_s.p99"], tolerance=0.2)["ttft_s.p99"].tolerance == 0.2
    # Every metric with a value: goodput without an SLO is NaN, written as null, no entry.
    finite = [v for v in make_result().metrics.flat().values() if math.isfinite(v)]
    assert len(saved.entries(None)) == len(finite) == len(make_result().metrics.flat()) - 2


def test_write_replaces_the_file_atomically(tmp_path):
    path = tmp_path / "run.json"
    write_run(path, document(make_result()))
    write_run(path, document(make_result(ttfts=(0.5,) * 4)))
    assert read_run(path).results["test_fixed[64]"].estimates["ttft_s.p50"].value == 0.5
    assert os.listdir(tmp_path) == ["run.json"]  # no temporary file left behind


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def valid_doc() -> dict:
    return json.loads(json.dumps(document(make_result())))


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda d: d["llmperf"].update(results={}),
         "llmperf.results: expected a list, got {}"),
        (lambda d: d["llmperf"]["results"].append("x"),
         "llmperf.results[1]: expected an object, got 'x'"),
        (lambda d: d["llmperf"]["results"][0].pop("key"),
         "llmperf.results[0].key: expected the test's key, got None"),
        (lambda d: d["llmperf"]["results"][0].update(metrics=[]),
         "llmperf.results[0].metrics: expected an object, got []"),
        (lambda d: d["llmperf"]["results"][0]["metrics"].update({"ttft_s.p50": {"value": 1}}),
         "llmperf.results[0].metrics.ttft_s.p50: expected value, spread, n and direction, got "
         "{'value': 1}"),
        (lambda d: d["llmperf"]["results"][0]["metrics"]["ttft_s.p50"].update(value="fast"),
         "llmperf.results[0].metrics.ttft_s.p50.value: expected a number or null, got 'fast'"),
        (lambda d: d["llmperf"]["results"][0]["metrics"]["ttft_s.p50"].update(n=1.5),
         "llmperf.results[0].metrics.ttft_s.p50.n: expected an integer >= 0, got 1.5"),
        (lambda d: d["llmperf"]["results"][0]["metrics"]["ttft_s.p50"].update(direction="up"),
         "llmperf.results[0].metrics.ttft_s.p50.direction: expected \"lower\" or \"higher\", "
         "got 'up'"),
        (lambda d: d["llmperf"]["results"].append(d["llmperf"]["results"][0]),
         "llmperf.results[1].key: 'test_fixed[64]' appears twice"),
        (lambda d: d["llmperf"]["results"][0].update(gate=0.5),
         "llmperf.results[0].gate: expected an object, got 0.5"),
        (lambda d: d["llmperf"]["results"][0].update(gate={"tolerance": "wide"}),
         "llmperf.results[0].gate.tolerance: expected a number or null, got 'wide'"),
        (lambda d: d["llmperf"]["results"][0].update(gate={"metrics": "ttft_s.p50"}),
         "llmperf.results[0].gate.metrics: expected a list of metric names, got 'ttft_s.p50'"),
    ],
)
def test_malformed_run_file(tmp_path, edit, problem):
    data = valid_doc()
    edit(data)
    path = write_json(tmp_path / "bad.json", data)
    with pytest.raises(RunFileError) as info:
        read_run(path)
    assert str(info.value) == f"{path}: {problem}; {FIX}"


def test_a_plain_pytest_benchmark_file_is_not_a_run_file(tmp_path):
    data = valid_doc()
    del data["llmperf"]
    path = write_json(tmp_path / "0001_bench.json", data)
    with pytest.raises(RunFileError) as info:
        read_run(path)
    assert str(info.value) == (
        f'{path}: not a pytest-llmperf run file (no "llmperf" key); write one with '
        "--llmperf-json PATH or --llmperf-save NAME")


def test_another_format_number_is_refused(tmp_path):
    data = valid_doc()
    data["llmperf"]["format"] = 3
    path = write_json(tmp_path / "future.json", data)
    with pytest.raises(RunFileError) as info:
        read_run(path)
    assert str(info.value) == (
        f"{path}: run file format 3 is not supported (this pytest-llmperf reads formats 1, 2); "
        "write one with --llmperf-json PATH or --llmperf-save NAME")


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(RunFileError) as info:
        read_run(tmp_path / "absent.json")
    assert str(info.value) == (
        f"{tmp_path / 'absent.json'}: no saved run here; save one first with --llmperf-save NAME")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(RunFileError, match=r"broken\.json: not valid JSON \("):
        read_run(tmp_path / "broken.json")


# ---------------------------------------------------------------- resolving names


def test_resolve_saved_names_and_paths(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs / "before.json", document(make_result()))
    assert resolve_saved("before", runs) == runs / "before.json"
    elsewhere = tmp_path / "elsewhere.json"
    write_run(elsewhere, document(make_result()))
    assert resolve_saved(str(elsewhere), runs) == elsewhere


def test_resolve_saved_says_what_it_looked_for(tmp_path):
    runs = tmp_path / "runs"
    with pytest.raises(RunFileError) as info:
        resolve_saved("before", runs)
    assert str(info.value) == (
        f"no saved run 'before': {runs / 'before.json'} does not exist; save one with "
        "--llmperf-save before")
    write_run(runs / "v031.json", document(make_result()))
    write_run(runs / "v032.json", document(make_result()))
    with pytest.raises(RunFileError) as info:
        resolve_saved("before", runs)
    assert str(info.value) == (
        f"no saved run 'before': {runs / 'before.json'} does not exist (saved runs: v031, "
        "v032); save one with --llmperf-save before")
    with pytest.raises(RunFileError) as info:
        resolve_saved("out/x.json", runs)
    assert str(info.value) == (
        "out/x.json: no such run file; write one with --llmperf-json out/x.json")


def test_the_gate_a_test_declared_travels_with_its_result(tmp_path):
    declared = GateSettings(tolerance=0.75, metrics=("tpot_s.p50",))
    doc = run_document(records(make_result(), gate=declared), fingerprint=FINGERPRINT,
                       commit=None, started=STARTED)
    assert doc["llmperf"]["results"][0]["gate"] == {"tolerance": 0.75, "metrics": ["tpot_s.p50"]}
    saved = read_run(write_json(tmp_path / "run.json", doc)).results["test_fixed[64]"]
    assert (saved.tolerance, saved.gated) == (0.75, ("tpot_s.p50",))


def test_a_verdict_is_written_as_its_status_value_and_its_words_for_the_eye(tmp_path):
    result = make_result()
    [entry] = document(result, verdicts={result.test_id: Status.CLIENT_LIMITED})[
        "llmperf"]["results"]
    assert (entry["status"], entry["verdict"]) == ("client limited", "CLIENT LIMITED")
    [unjudged] = document(result)["llmperf"]["results"]
    assert (unjudged["status"], unjudged["verdict"]) == ("", "")


@pytest.mark.parametrize("words, status", [("CLIENT LIMITED", Status.CLIENT_LIMITED),
                                           ("pass (stale baseline)", Status.STALE),
                                           ("", None)])
def test_a_run_file_written_before_statuses_were_stored_reads_its_verdict_words(
        tmp_path, words, status):
    data = valid_doc()
    entry = data["llmperf"]["results"][0]
    del entry["status"]  # as files written before it was recorded
    entry["verdict"] = words
    saved = read_run(write_json(tmp_path / "old.json", data)).results["test_fixed[64]"]
    assert saved.status == status and saved.verdict == words


def test_a_run_file_without_gate_settings_reads_as_the_defaults(tmp_path):
    data = valid_doc()
    del data["llmperf"]["results"][0]["gate"]  # as files written before it was recorded
    saved = read_run(write_json(tmp_path / "old.json", data)).results["test_fixed[64]"]
    assert (saved.tolerance, saved.gated) == (None, None)


H100_X8 = {"hardware_class": "h100", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 8}


def test_prompt_throughput_is_a_metric_of_every_result():
    [entry] = document(make_result())["llmperf"]["results"]
    # 4 prompts of 8 tokens from the first send (0 s) to the last token (3 + 0.2 + 3 x 0.01 s).
    assert entry["metrics"]["prompt_throughput_tok_s"] == pytest.approx(
        {"value": 32 / 3.23, "spread": 0.0, "n": 1, "direction": "higher"})


def test_on_gpus_each_result_has_its_output_per_gpu_and_its_share_of_the_price():
    # A fake: only a GPU machine records such a result for real. TP 2 x PP 2: 4 of the 8 GPUs.
    gpu = dataclasses.replace(make_result(), fingerprint=fingerprint_of(H100_X8), engine={
        "model": "tiny", "tensor_parallel_size": 2, "pipeline_parallel_size": 2})
    doc = run_document(records(gpu), fingerprint=fingerprint_of(H100_X8), commit=None,
                       started=STARTED,
                       usd_per_hour=Price(2.4))
    [entry] = doc["llmperf"]["results"]
    output = entry["metrics"]["output_throughput_tok_s"]["value"]
    assert entry["per_gpu"] == {"gpus": 4, "output_throughput_tok_s_per_gpu": output / 4}
    assert entry["cost"] == {
        "usd_per_hour": 1.2, "price_usd_per_hour": 2.4, "price_per": "machine",
        "engine_gpus": 4, "machine_gpus": 8,
        "usd_per_1m_output_tok": pytest.approx(1.2 / (output * 3600) * 1e6, rel=1e-12),
        "usd_per_1m_total_tok": pytest.approx(1.2 / (output * 3 * 3600) * 1e6, rel=1e-12)}


def test_on_a_cpu_no_output_per_gpu_and_the_whole_machine_priced():
    doc = run_document(records(make_result()), fingerprint=FINGERPRINT, commit=None,
                       started=STARTED, usd_per_hour=Price(0.36))
    [entry] = doc["llmperf"]["results"]
    assert entry["per_gpu"] == {}
    assert entry["cost"]["usd_per_hour"] == 0.36
    assert (entry["cost"]["engine_gpus"], entry["cost"]["machine_gpus"]) == (1, 0)
    assert document(make_result())["llmperf"]["results"][0]["cost"] == {}  # no price
