"""The real vLLM server on the CPU: start, measure end to end, stop, and fail cleanly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_llmperf import SLO, Workload
from pytest_llmperf.client.measure import Endpoint, measure
from pytest_llmperf.client.selfcheck import check_client
from pytest_llmperf.engines.cpu_cores import bound_cores
from pytest_llmperf.engines.health import group_members
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.workloads.prompts import load_tokenizer
from pytest_llmperf.workloads.sweeps import find_capacity, sweep
from suites.tiny import TINY_CPU
from tests.conftest import requires_vllm

pytestmark = requires_vllm


@pytest.fixture(scope="module")
def server(tiny_server):
    return tiny_server


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(TINY_CPU.model)


def test_numbers_hold_together(server, tokenizer):
    workload = Workload.fixed(input_tokens=96, output_tokens=32, num_requests=24, concurrency=6)
    requests, _ = workload.build(tokenizer)
    measured = measure(Endpoint(server.base_url, TINY_CPU.model_name), requests,
                       workload.pattern, seed=workload.seed)
    records, m = measured.records, compute_metrics(measured.records)
    assert (m.completed, m.failed, m.length_mismatches, m.tokens_estimated) == (24, 0, 0, 0)
    assert m.output_tokens == 24 * 32
    assert m.prompt_tokens == 24 * 96  # token-id prompts: exact input length, no BOS added
    # Every chunk carried exactly one token on CPU; the token counts came from the server.
    assert all(sum(r.chunk_tokens) == r.usage_output_tokens == 32 for r in records)
    for r in records:
        ttft, e2el = r.chunk_times_s[0] - r.sent_s, r.chunk_times_s[-1] - r.sent_s
        assert 0 < ttft <= e2el
    assert m.ttft_s.max <= m.e2el_s.max
    assert m.output_throughput_tok_s == pytest.approx(m.output_tokens / m.duration_s, rel=1e-9)
    assert m.total_throughput_tok_s == pytest.approx(24 * (96 + 32) / m.duration_s, rel=1e-9)
    assert m.queue_s.max < 0.05  # closed loop: the client is never the bottleneck
    # The server's own counters agree with the client's, for the measured requests only.
    assert measured.server_metrics["generation_tokens"] == 24 * 32
    assert measured.server_metrics["prompt_tokens"] == 24 * 96
    assert measured.warning is None


def test_rate_schedule_is_kept(server, tokenizer):
    workload = Workload.fixed(input_tokens=64, output_tokens=16, num_requests=30, rate=10.0, seed=3)
    requests, _ = workload.build(tokenizer)
    measured = measure(Endpoint(server.base_url, TINY_CPU.model_name), requests,
                       workload.pattern, seed=workload.seed)
    m = compute_metrics(measured.records)
    assert m.completed == 30
    # The client self-check's own rule (metrics/client_check.py), not a bound set on one CPU.
    check = check_client(m, measured.client, workload.pattern)
    assert check.kept_schedule, f"client lagged behind the Poisson schedule: " \
                                f"{check.schedule_line()}"


def test_wrong_model_name_is_a_recorded_failure(server, tokenizer):
    """A failing request becomes data (HTTP status and body), never an exception."""
    workload = Workload.fixed(input_tokens=8, output_tokens=4, num_requests=2, concurrency=2)
    requests, _ = workload.build(tokenizer)
    records = measure(Endpoint(server.base_url, "no-such-model"), requests, workload.pattern,
                      seed=0).records
    assert [r.ok for r in records] == [False, False]
    assert records[0].error.startswith("HTTP 404: ")
    assert "no-such-model" in records[0].error


def measure_with(server, tokenizer):
    """The `measure` callable sweeps and the capacity search are given: one real run a load."""
    def run(workload: Workload):
        requests, _ = workload.build(tokenizer)
        return compute_metrics(measure(Endpoint(server.base_url, TINY_CPU.model_name), requests,
                                       workload.pattern, seed=workload.seed,
                                       duration_s=workload.duration_s).records)
    return run


def test_rate_sweep_on_the_real_engine_traces_more_output_for_more_load(server, tokenizer):
    base = Workload.fixed(input_tokens=64, output_tokens=16, num_requests=24, rate=1.0, seed=7)
    curve = sweep(measure_with(server, tokenizer), base, rates=[3.0, 12.0])
    assert [point.load for point in curve.points] == [3.0, 12.0]
    assert all(point.metrics.completed == 24 for point in curve.points)
    low, high = (point.metrics.output_throughput_tok_s for point in curve.points)
    assert high > 2 * low, f"4x the offered rate gave {low:.0f} -> {high:.0f} tok/s"


def test_slo_capacity_search_on_the_real_engine(server, tokenizer):
    probe = Workload.fixed(input_tokens=64, output_tokens=16, num_requests=1000, rate=1.0,
                           duration_s=2.0, seed=8)
    run = measure_with(server, tokenizer)
    # A loose SLO: the tiny model meets it at 2 req/s; 2 to 16 req/s in at most 5 probes.
    found = find_capacity(run, probe, SLO(max={"ttft_s.p90": 0.5}), low=2.0, high=8.0,
                          rel_tol=0.5, max_runs=5)
    assert found.rate_req_s >= 2.0 and found.engine_runs == len(found.runs) <= 5
    assert all(r.offered_req_s > 0 for r in found.runs)
    # An SLO no engine meets (TTFT p90 under 0.1 ms): no capacity, said after the first probe.
    impossible = find_capacity(run, probe, SLO(max={"ttft_s.p90": 0.0001}), low=2.0, high=8.0)
    assert (impossible.rate_req_s, impossible.engine_runs) == (0.0, 1)
    assert impossible.note.startswith("no capacity: even the lowest rate 2 req/s missed: "
                                      "ttft_s.p90 missed its target: ")


def _allowed_cores(status_file: Path) -> set[int] | None:
    """Linux writes Cpus_allowed_list in the list syntax vLLM's bind variable uses ("0-3,5")."""
    for line in status_file.read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return bound_cores(line.split(":", 1)[1])
    raise AssertionError(f"no Cpus_allowed_list in {status_file}")


def test_the_compute_threads_have_their_core_and_the_rest_of_the_engine_the_others(server):
    """TINY_CPU binds its OpenMP threads to core 0: the API server and the busy-polling engine
    core must run on the other cores, the worker's compute threads on core 0 alone."""
    others = set(os.sched_getaffinity(0)) - {0}
    if not others:
        pytest.skip("one usable core: nothing to keep the engine's other processes on")
    members = group_members(server.process.pid)
    core = [m.pid for m in members if m.name == "VLLM::EngineCore"]
    worker = [m.pid for m in members if m.name.startswith("VLLM::Worker")]
    assert len(core) == 1 and len(worker) == 1, members
    assert _allowed_cores(Path(f"/proc/{server.process.pid}/status")) == others
    assert _allowed_cores(Path(f"/proc/{core[0]}/status")) == others
    worker_threads = [_allowed_cores(task / "status")
                      for task in Path(f"/proc/{worker[0]}/task").iterdir()]
    assert {0} in worker_threads  # the OpenMP thread, rebound by vLLM to its own core
