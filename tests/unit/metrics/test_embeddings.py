"""Embeddings' numbers for the -v line and the run file (metrics/embeddings.py), read from a
run's metrics as compute_metrics makes them from embeddings records."""

from __future__ import annotations

import pytest

from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.embeddings import note, of_run, summary
from pytest_llmperf.records import RequestRecord


def embedded(index: int, sent_s: float, latency_s: float) -> RequestRecord:
    """What the client records of one complete response (client/embeddings.py)."""
    done = sent_s + latency_s
    return RequestRecord(index=index, expected_prompt_tokens=256, expected_output_tokens=0,
                         scheduled_s=sent_s, sent_s=sent_s, chunk_times_s=[done],
                         chunk_tokens=[0], done_s=done, usage_prompt_tokens=256,
                         usage_output_tokens=0)


def test_the_rates_and_latencies_of_a_run():
    records = [embedded(i, 1.0 + 0.5 * i, 0.1 * (i + 1)) for i in range(4)]  # 1.0 to 2.9 s
    failed = RequestRecord(index=4, expected_prompt_tokens=256, expected_output_tokens=0,
                           scheduled_s=1.0, sent_s=1.0, done_s=1.2, error="HTTP 500: x",
                           error_kind="server_error")
    metrics = compute_metrics([*records, failed]).flat()
    found = summary(metrics, batch_size=8)
    assert found == {
        "batch_size": 8, "requests": 4, "failed": 1,
        "request_throughput_req_s": pytest.approx(4 / 1.9),
        "input_throughput_inputs_s": pytest.approx(32 / 1.9),
        "input_throughput_tok_s": pytest.approx(1024 / 1.9),
        "latency_s": {"p50": pytest.approx(0.25), "p90": pytest.approx(0.37),
                      "p99": pytest.approx(0.397), "mean": pytest.approx(0.25)}}
    assert (metrics["tpot_s.n"], metrics["output_throughput_tok_s"]) == (0.0, 0.0)
    assert metrics["ttft_s.p50"] == metrics["e2el_s.p50"]  # one instant: the response's end
    assert note(found) == ("embeddings (batch 8): 4 requests, 1 failed; 2.11 req/s, "
                           "16.8 inputs/s, 539 input tok/s; latency p50 250.0 ms, "
                           "p90 370.0 ms, p99 397.0 ms, mean 250.0 ms")


def test_a_run_without_a_completed_request_shows_no_latency():
    found = summary({"completed": 0.0, "failed": 3.0, "request_throughput_req_s": 0.0,
                     "prompt_throughput_tok_s": 0.0}, batch_size=1)
    assert found["latency_s"] == {"p50": None, "p90": None, "p99": None, "mean": None}
    assert note(found) == ("embeddings (batch 1): 0 requests, 3 failed; 0.00 req/s, "
                           "0.0 inputs/s, 0 input tok/s; latency p50 -, p90 -, p99 -, mean -")


def test_a_run_is_read_by_its_recorded_workload():
    metrics = {"completed": 2.0, "failed": 0.0, "request_throughput_req_s": 4.0,
               "prompt_throughput_tok_s": 1024.0, "e2el_s.p50": 0.2}
    embeddings = {"api": "embeddings", "source": {"type": "EmbeddingsSource", "batch_size": 4}}
    assert of_run(embeddings, metrics)["input_throughput_inputs_s"] == 16.0
    assert of_run({"api": "embeddings", "source": {"type": "Synthetic"}},
                  metrics)["batch_size"] == 1  # another source sent on /v1/embeddings
    assert of_run({"api": "completions", "source": {}}, metrics) is None


def test_a_rerank_is_read_as_embeddings_of_its_documents():
    metrics = {"completed": 2.0, "failed": 0.0, "request_throughput_req_s": 4.0,
               "prompt_throughput_tok_s": 1024.0, "e2el_s.p50": 0.2}
    rerank = {"api": "rerank", "source": {"type": "RerankSource", "documents": 16}}
    found = of_run(rerank, metrics)
    assert (found["api"], found["batch_size"], found["input_throughput_inputs_s"]) == (
        "rerank", 16, 64.0)
    assert note(found).startswith("rerank (16 documents a query): 2 requests, 0 failed; "
                                  "4.00 req/s, 64.0 documents/s, 1024 input tok/s; latency "
                                  "p50 200.0 ms")
