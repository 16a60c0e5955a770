"""The CPU suite, embeddings: /v1/embeddings on a tiny pooling model of the project's own
(suites/models/tiny-llama-embed, made by scripts/make_tiny_embedding_model.py: tiny-llama's
architecture with sentence-transformers' last-token pooling, random weights).

A pooling model is an engine of its own (vLLM serves a model either as a generating or as a
pooling model, never both), so the measurements are `nightly`: `pytest -m cpu suites/
--llmperf-nightly` runs them, the quick main job leaves them out. Requests, inputs and input
tokens per second and the latency's percentiles are in the -v line and the run file's
"embeddings" (docs/workloads.md, "Embeddings"). The two bad-input lines start no engine, so the
main job runs them."""

import pytest

from pytest_llmperf import Workload
from suites.tiny import CPU_TOLERANCE, MODELS, TINY_CPU

EMBED_CPU = TINY_CPU.replace(model=str(MODELS / "tiny-llama-embed"))
INPUT_TOKENS, REQUESTS = 64, 32

pytestmark = [pytest.mark.cpu, pytest.mark.engine(EMBED_CPU),
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE,
                                  gate=("e2el_s.p50", "request_throughput_req_s",
                                        "prompt_throughput_tok_s"))]


@pytest.mark.nightly
@pytest.mark.parametrize("batch_size", [1, 8])
def test_embeddings_at_a_batch_size(llmperf, batch_size):
    """32 requests, 4 at a time, each embedding `batch_size` inputs of 64 tokens: every input
    embedded (the server's own count of input tokens is all of them), and the numbers the -v
    line shows are the run file's."""
    result = llmperf.run(Workload.embeddings(input_tokens=INPUT_TOKENS, batch_size=batch_size,
                                             num_requests=REQUESTS, concurrency=4,
                                             warmup_requests=2))
    assert result.completed == REQUESTS, result.first_errors()
    assert result.prompt_tokens == REQUESTS * batch_size * INPUT_TOKENS
    found = result.embeddings
    assert (found["batch_size"], found["requests"], found["failed"]) == (batch_size, REQUESTS, 0)
    assert found["input_throughput_tok_s"] == result.prompt_throughput_tok_s
    assert found["latency_s"]["p50"] == result.e2el_s.p50


@pytest.mark.nightly
def test_rerank_of_documents_against_a_query(llmperf):
    """32 requests, 4 at a time, each ranking 8 texts of 64 tokens against a query of 16 on the
    same engine (its scores are cosine similarities of embeddings): every document ranked once,
    and the server's prompt tokens are the query's and the documents' with the tokenizer's
    beginning-of-sequence token on each of the 9 texts."""
    result = llmperf.run(Workload.rerank(query_tokens=16, documents=8, document_tokens=64,
                                         num_requests=REQUESTS, concurrency=4,
                                         warmup_requests=2))
    assert result.completed == REQUESTS, result.first_errors()
    assert {r.usage_prompt_tokens for r in result.records} == {16 + 8 * 64 + 9}
    found = result.embeddings
    assert (found["api"], found["batch_size"], found["failed"]) == ("rerank", 8, 0)
    assert found["input_throughput_inputs_s"] == 8 * found["request_throughput_req_s"]


def test_an_embeddings_workload_for_a_generating_model_is_one_line(llmperf):
    """Refused before anything is sent or started (engines/runner_type.py); the plugin fails
    the test with the line alone."""
    with pytest.raises(pytest.fail.Exception) as caught:
        llmperf.run(Workload.embeddings(input_tokens=8, num_requests=1, concurrency=1),
                    engine=TINY_CPU)
    assert str(caught.value) == (
        f"Workload 'embed-1x8in' sends /v1/embeddings, but engine model {TINY_CPU.model} is "
        "served as a generating model (architecture LlamaForCausalLM): measure an embedding "
        "model (one with sentence-transformers' modules.json, as suites/models/tiny-llama-embed "
        "has), or start this one as one with Engine(extra_args={'runner': 'pooling'})")


def test_a_generating_workload_for_the_pooling_model_is_one_line(llmperf):
    with pytest.raises(pytest.fail.Exception) as caught:
        llmperf.run(Workload.fixed(input_tokens=8, output_tokens=4, num_requests=1,
                                   concurrency=1))
    assert str(caught.value) == (
        f"Workload 'fixed-8in-4out' sends /v1/completions, but engine model {EMBED_CPU.model} "
        "is served as a pooling model (its sentence-transformers modules.json), which generates "
        "no text: measure it with Workload.embeddings(input_tokens=, batch_size=, ...) or "
        "Workload.rerank(...), or give the test a generating model")
