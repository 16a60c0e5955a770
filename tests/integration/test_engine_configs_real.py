"""The source studies' engine configurations on real vLLM: suites/test_cpu_engine_configs.py,
run as a user runs it, so CI proves each one starts, serves and is measured.

Tensor, pipeline and data parallel (two ranks, one per core), ngram speculative decoding, chunked
prefill on against off and 512 against 2048 batched tokens (paired A/B), compiled mode, several
tokens per chunk; and from the other CPU suites MLPerf's Offline scenario and a concurrency sweep.
The run file's numbers are what the closing notes and docs/cpu-engine.md report.

All of it is nightly (docs/testing.md): what CI ran here until 2026-11-28, the in-test A/B
with two engines and the concurrency sweep, is held in CI by
tests/plugin/test_in_test_ab_and_sweep_plugin.py with injected measurements, and on the real
engine by the main job's CPU suites (suites/test_cpu_ab.py, suites/test_cpu_capacity.py). It
was CI's longest test: 305 s of a 22-minute second step on the family-23 EPYC VM.

Two ranks and the client share the machine's two cores, and a CI runner has neighbours: the
disturbance check only warns here. What this test is about is that every configuration runs and
reports what it should, not how fast.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO, leftover_vllm_processes, requires_vllm

# Alone on the machine, though it judges no speed: beside other tests, a client that reads
# late gets chunks in bursts, and the suite's chunk-timing checks see gaps of 0.
pytestmark = [requires_vllm, pytest.mark.nightly]

SUITE = REPO / "suites" / "test_cpu_engine_configs.py"
# Two tests of other CPU suites that the studies' questions need on the real engine too: MLPerf's
# Offline scenario judged by judge_offline, and a concurrency sweep.
ALSO = {"test_offline.py": "test_mlperf_offline_scenario",
        "test_cpu_capacity.py": "test_concurrency_sweep"}


# The suite's tests CI runs; the others are nightly_run's.
IN_CI = ("test_512_batched_tokens_against_2048",)


def run_suite(where, tests: list[str]) -> tuple[list[dict], str]:
    """One run of these tests in a fresh directory (no baselines, nothing of the repo's)."""
    shutil.copy(SUITE, where / SUITE.name)
    for name in ALSO:
        shutil.copy(SUITE.parent / name, where / name)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *tests, "-p",
         "no:cacheprovider", "-p", "no:randomly", "--llmperf-disturbance", "warn",
         "--llmperf-nightly",
         "--llmperf-summary", "full", "--llmperf-json", "run.json"],
        cwd=where, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=900)
    assert leftover_vllm_processes() == []
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    return json.loads((where / "run.json").read_text())["llmperf"]["results"], run.stdout


@pytest.fixture(scope="module")
def run_file(tmp_path_factory):
    return run_suite(tmp_path_factory.mktemp("engine-configs"),
                     [*(f"{SUITE.name}::{test}" for test in IN_CI),
                      *(f"{name}::{test}" for name, test in ALSO.items())])


@pytest.fixture(scope="module")
def nightly_run(tmp_path_factory):
    return run_suite(tmp_path_factory.mktemp("engine-configs-nightly"),
                     [SUITE.name, *(f"--deselect={SUITE.name}::{test}" for test in IN_CI)])


def _result(results: list[dict], key: str) -> dict:
    return next(r for r in results if r["key"] == key)


@pytest.mark.nightly
@pytest.mark.parametrize(("case", "field", "value"), [
    ("tp2", "tensor_parallel_size", 2), ("pp2-compiled", "pipeline_parallel_size", 2),
    ("dp2", "data_parallel_size", 2)])
def test_each_parallel_layout_started_and_served(nightly_run, case, field, value):
    results, _ = nightly_run
    found = _result(results, f"test_parallel_engine_serves_every_request[{case}]")
    assert found["engine"][field] == value
    assert found["engine"]["env"] == {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}
    assert found["metrics"]["completed"]["value"] == 16
    # Both ranks' tokens: the data-parallel server reports one label set per engine, summed.
    assert found["server_metrics"]["generation_tokens"] >= 16 * 32


@pytest.mark.nightly
def test_compiled_mode_is_in_the_engine_line(nightly_run):
    results, stdout = nightly_run
    found = _result(results, "test_parallel_engine_serves_every_request[pp2-compiled]")
    assert found["engine"]["enforce_eager"] is False
    assert "pp=2" in stdout and "eager=False" in stdout


@pytest.mark.nightly
def test_speculative_decoding_reports_vllms_acceptance(nightly_run):
    results, _ = nightly_run
    server = _result(results, "test_ngram_speculative_decoding_accepts_drafts")["server_metrics"]
    assert server["spec_decode_drafts"] > 0
    assert server["spec_decode_accepted_tokens"] <= server["spec_decode_draft_tokens"]
    assert server["spec_decode_acceptance_rate"] == pytest.approx(
        server["spec_decode_accepted_tokens"] / server["spec_decode_draft_tokens"])
    assert server["spec_decode_mean_accepted_length"] == pytest.approx(
        1 + server["spec_decode_accepted_tokens"] / server["spec_decode_drafts"])
    assert {f"spec_decode_acceptance_pos_{i}" for i in range(3)} <= set(server)


@pytest.mark.parametrize(("test", "run"), [
    pytest.param("test_chunked_prefill_on_against_off", "nightly_run", marks=pytest.mark.nightly),
    ("test_512_batched_tokens_against_2048", "run_file")])
def test_batching_ab_tests_record_their_paired_ratios(request, test, run):
    results, _ = request.getfixturevalue(run)
    side_b = _result(results, f"{test} (B)")
    ttft = side_b["ab"]["metrics"]["ttft_s.p50"]
    assert len(ttft["ratios"]) == 4
    assert _result(results, f"{test} (A)")["engine"] != side_b["engine"]


@pytest.mark.nightly
def test_multi_token_chunks_count_per_token(nightly_run):
    """--stream-interval 4: ITL per token, ICL per chunk, mean ITL = mean TPOT."""
    results, _ = nightly_run
    metrics = _result(results, "test_stream_interval_chunks_are_counted_per_token")["metrics"]
    assert metrics["itl_s.mean"]["value"] < 0.5 * metrics["icl_s.mean"]["value"]
    assert metrics["itl_s.mean"]["value"] == pytest.approx(metrics["tpot_s.mean"]["value"],
                                                            rel=0.1)


def test_offline_scenario_and_concurrency_sweep_ran(run_file):
    results, _ = run_file
    offline = _result(results, "test_mlperf_offline_scenario")
    assert offline["metrics"]["completed"]["value"] == 459
    sweep = [r for r in results if r["key"].startswith("test_concurrency_sweep@")]
    assert len(sweep) == 3
