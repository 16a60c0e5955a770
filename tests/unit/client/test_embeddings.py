"""The client's /v1/embeddings and /v1/rerank paths (client/embeddings.py): the body, and real
round trips against the canned server, a complete response and the ones that fail."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from pytest_llmperf.client.embeddings import EmbeddingsResponse, embeddings_body, input_count
from pytest_llmperf.client.measurement import finished
from pytest_llmperf.failures import INVALID_OUTPUT, MALFORMED
from pytest_llmperf.records import ClientStats, Request, RequestRecord
from tests.unit.canned_server import MODEL, CannedServer, client, send, serve

BATCH = Request(prompt=(5, 6), prompt_tokens=4, output_tokens=0, forced_length=False,
                body=(("input", [[5, 6], [7, 8]]), ("encoding_format", "base64")))


def response(*embeddings, prompt_tokens: int = 4) -> bytes:
    return json.dumps({
        "object": "list", "model": MODEL,
        "data": [{"index": i, "object": "embedding", "embedding": e}
                 for i, e in enumerate(embeddings)],
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens,
                  "completion_tokens": 0}}).encode()


@pytest.fixture
def server():
    canned = CannedServer()
    canned.content_type = "application/json"
    yield from serve(canned)


def test_the_body_is_the_requests_inputs_and_no_generation_fields():
    c = client("embeddings", extra_body=(("dimensions", 64),))
    assert c.path == "/v1/embeddings"
    assert c.body(BATCH) == {"model": MODEL, "input": [[5, 6], [7, 8]],
                             "encoding_format": "base64", "dimensions": 64}


def test_a_request_without_inputs_embeds_its_prompt():
    plain = Request(prompt="Hello world", prompt_tokens=2, output_tokens=1)
    assert embeddings_body(MODEL, plain) == {"model": MODEL, "input": ["Hello world"]}
    assert (input_count(plain), input_count(BATCH)) == (1, 2)


def test_a_complete_response_is_one_chunk_of_no_tokens_at_its_last_read(server):
    server.body = response("AAAAPw==", "AACAPw==")
    record = send(server.url, BATCH, api="embeddings")
    assert record.error is None and record.ok
    assert record.chunk_tokens == [0]
    assert record.sent_s < record.chunk_times_s[0] < record.done_s
    assert (record.usage_prompt_tokens, record.output_tokens) == (4, 0)
    assert record.engine_requests == 2  # vLLM runs each input as a request of its own
    assert not record.length_mismatch
    path, body = server.requests[0]
    assert (path, body["input"], body["encoding_format"]) == (
        "/v1/embeddings", [[5, 6], [7, 8]], "base64")


def test_float_embeddings_count_as_well(server):
    server.body = response([0.5, 0.25], [0.1, 0.2])
    assert send(server.url, BATCH, api="embeddings").ok


@pytest.mark.parametrize("embeddings, error", [
    (("AAAAPw==",), "the response holds 1 embeddings (0 empty) for 2 inputs"),
    (("AAAAPw==", ""), "the response holds 2 embeddings (1 empty) for 2 inputs"),
])
def test_a_response_without_an_embedding_per_input_fails(server, embeddings, error):
    server.body = response(*embeddings)
    record = send(server.url, BATCH, api="embeddings")
    assert (record.error, record.error_kind, record.ok) == (error, INVALID_OUTPUT, False)


def test_a_body_that_is_not_an_embeddings_response_is_malformed():
    record = RequestRecord(index=0, expected_prompt_tokens=4, expected_output_tokens=0,
                           scheduled_s=0.0)
    sink = EmbeddingsResponse(record, 2)
    sink.feed_reads(b'{"choices": []}', [15], [3.0])
    sink.judge()
    assert record.error_kind == MALFORMED
    assert record.error == ("not an embeddings response (Object missing required field `data`): "
                            "b'{\"choices\": []}'")


def test_a_generating_servers_404_fails_the_request_with_its_words(server):
    server.status, server.body = 404, b'{"detail":"Not Found"}'
    record = send(server.url, BATCH, api="embeddings")
    assert (record.error, record.error_kind) == ('HTTP 404: {"detail":"Not Found"}', "bad_request")


def test_the_engines_count_of_a_batch_is_its_inputs_not_a_second_client():
    """vLLM's request counters count each input of a batch: 4 requests of 8 inputs are 32 to
    it, which is no sign of another client (client/measurement.py's count check)."""
    def batch_of_8(index: int, ok: bool, failure: str = "server_error") -> RequestRecord:
        record = RequestRecord(index=index, expected_prompt_tokens=8, expected_output_tokens=0,
                               scheduled_s=0.0, sent_s=1.0, done_s=2.0, engine_requests=8)
        if ok:
            record.chunk_times_s, record.chunk_tokens = [2.0], [0]
        else:
            record.error, record.error_kind = "x", failure
        return record

    def measured(engine_count: float, failure: str = "server_error"):
        sampler = SimpleNamespace(summary=lambda: {"e2el_s.n": engine_count}, warning=None)
        records = [batch_of_8(i, ok=i < 4, failure=failure) for i in range(5)]
        return finished(records, sampler, ClientStats(), SimpleNamespace(stall=None, interrupted=None)).warning

    assert measured(32.0) is None
    assert measured(40.0) == (
        "the engine finished 40 requests in the measured window, the client completed 32 "
        "(1 failed): the server's timings (server:*_s) cover other requests too; another client "
        "of the same server?")
    # An output the client's check refused was served whole: the engine counted it.
    assert measured(40.0, failure=INVALID_OUTPUT) is None


RERANK = Request(prompt="which", prompt_tokens=7, output_tokens=0, forced_length=False,
                 body=(("query", "which"), ("documents", ["a b", "c d", "e f"])))


def ranking(*indexes: int) -> bytes:
    return json.dumps({
        "id": "rerank-1", "model": MODEL, "usage": {"prompt_tokens": 9, "total_tokens": 9},
        "results": [{"index": i, "document": {"text": "x"}, "relevance_score": 0.5 - i / 10}
                    for i in indexes]}).encode()


def test_a_rerank_body_is_the_query_and_documents():
    c = client("rerank")
    assert c.path == "/v1/rerank"
    assert c.body(RERANK) == {"model": MODEL, "query": "which",
                              "documents": ["a b", "c d", "e f"]}
    assert input_count(RERANK) == 3


def test_a_complete_ranking_is_one_chunk_and_the_query_counts_as_an_engine_request(server):
    server.body = ranking(2, 0, 1)
    record = send(server.url, RERANK, api="rerank")
    assert record.error is None and record.ok
    assert (record.chunk_tokens, record.usage_prompt_tokens) == ([0], 9)
    # an embedding model embeds the query and each document apart: 4 requests to vLLM
    assert record.engine_requests == 4
    path, body = server.requests[0]
    assert (path, body["documents"]) == ("/v1/rerank", ["a b", "c d", "e f"])


@pytest.mark.parametrize("indexes, error", [
    ((0, 1), "the response ranks 2 documents (2 distinct indexes) of the 3 sent"),
    ((0, 1, 1), "the response ranks 3 documents (2 distinct indexes) of the 3 sent"),
])
def test_a_ranking_without_every_document_once_fails(server, indexes, error):
    server.body = ranking(*indexes)
    record = send(server.url, RERANK, api="rerank")
    assert (record.error, record.error_kind) == (error, INVALID_OUTPUT)


def test_a_body_that_is_not_a_ranking_is_malformed():
    record = RequestRecord(index=0, expected_prompt_tokens=7, expected_output_tokens=0,
                           scheduled_s=0.0)
    sink = EmbeddingsResponse(record, 3, rerank=True)
    sink.feed_reads(b'{"data": []}', [12], [3.0])
    sink.judge()
    assert (record.error_kind, record.error) == (
        MALFORMED, "not a rerank response (Object missing required field `results`): "
                   "b'{\"data\": []}'")
