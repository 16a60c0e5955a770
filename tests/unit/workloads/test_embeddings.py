"""Workload.embeddings and Workload.rerank (workloads/embeddings.py): batches of exact-length
inputs, queries and documents, the identity a run file records, and bad sizes refused where the
workload is written."""

from __future__ import annotations

import pytest

from pytest_llmperf import Workload
from pytest_llmperf.errors import InputError
from pytest_llmperf.workloads.vocab import VocabOnly
from tests.conftest import REPO

VOCAB = VocabOnly(4096, frozenset({0, 1, 2}), "config.json")


def test_each_request_carries_batch_size_inputs_of_exact_length():
    workload = Workload.embeddings(input_tokens=6, batch_size=4, num_requests=3,
                                   warmup_requests=1, concurrency=2, seed=5)
    requests, warmup = workload.build(VOCAB)
    assert (len(requests), len(warmup)) == (3, 1)
    for request in [*requests, *warmup]:
        body = dict(request.body)
        assert body["encoding_format"] == "base64"
        assert [len(ids) for ids in body["input"]] == [6, 6, 6, 6]
        assert tuple(body["input"][0]) == request.prompt
        assert (request.prompt_tokens, request.output_tokens, request.forced_length) == (
            24, 0, False)
    assert requests == workload.build(VOCAB)[0]  # seeded


def test_the_workload_is_named_and_recorded_by_its_batch():
    workload = Workload.embeddings(input_tokens=64, batch_size=8, num_requests=32, rate=4.0)
    assert workload.label() == "embed-8x64in x32 @ 4 req/s"
    found = workload.to_dict()
    assert (found["api"], found["source"]) == ("embeddings", {
        "type": "EmbeddingsSource", "input_tokens": 64, "batch_size": 8,
        "prompt_format": "token_ids"})


@pytest.mark.parametrize("field, value", [("batch_size", 0), ("input_tokens", 2.5)])
def test_a_size_below_one_is_one_line(field, value):
    sizes = {"input_tokens": 8, "batch_size": 2, field: value}
    with pytest.raises(InputError) as caught:
        Workload.embeddings(num_requests=4, concurrency=1, **sizes)
    assert str(caught.value) == (f"Workload.embeddings: {field} must be a whole number >= 1, "
                                 f"got {value!r}")


def test_a_rerank_request_is_a_query_and_its_documents_as_texts_of_exact_length():
    from pytest_llmperf.workloads.prompts import load_tokenizer

    tokenizer = load_tokenizer(str(REPO / "suites" / "models" / "tiny-llama-embed"))
    workload = Workload.rerank(query_tokens=12, documents=3, document_tokens=20, num_requests=2,
                               concurrency=1, seed=3)
    requests, _ = workload.build(tokenizer)
    for request in requests:
        body = dict(request.body)
        assert request.prompt == body["query"]
        assert len(tokenizer.encode(body["query"])) == 12
        assert [len(tokenizer.encode(d)) for d in body["documents"]] == [20, 20, 20]
        assert (request.prompt_tokens, request.output_tokens) == (12 + 3 * 20, 0)
    assert workload.label() == "rerank-3x20in x2 @ concurrency 1"
    found = workload.to_dict()
    assert (found["api"], found["source"]) == ("rerank", {
        "type": "RerankSource", "query_tokens": 12, "documents": 3, "document_tokens": 20,
        "prompt_format": "text"})


def test_a_rerank_size_below_one_is_one_line():
    with pytest.raises(InputError) as caught:
        Workload.rerank(query_tokens=8, documents=0, document_tokens=8, num_requests=1,
                        concurrency=1)
    assert str(caught.value) == "Workload.rerank: documents must be a whole number >= 1, got 0"
