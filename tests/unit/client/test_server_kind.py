"""Server kinds (client/server_kind.py): how a kind is told from a server's answers, the request
body each kind gets, how a llama.cpp stream's chunks count tokens (a stream recorded from
llama-cpp-python 0.3.36's server), SGLang's and llama.cpp's /metrics read by their own names, and
the one line said for each thing a server could not do."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from pytest_llmperf.client.access import Access
from pytest_llmperf.client.metric_names import LLAMACPP_METRICS, SGLANG_METRICS
from pytest_llmperf.client.openai import ClientOptions, OpenAIStreamClient, _check_complete
from pytest_llmperf.client.server_kind import (
    KINDS,
    LLAMACPP,
    OPENAI,
    SGLANG,
    VLLM,
    detect,
    kind_of_answers,
    limits,
)
from pytest_llmperf.client.server_metrics import ServerMetricsSampler, parse_metrics
from pytest_llmperf.client.sse import StreamDecoder
from pytest_llmperf.failures import CUT_OFF, NO_USAGE
from pytest_llmperf.records import Request, RequestRecord

DATA = Path(__file__).parents[1] / "data"
TEXT = Request(prompt="Hello world", prompt_tokens=5, output_tokens=8)
IDS = Request(prompt=(11, 12, 13), prompt_tokens=3, output_tokens=4)


# ------------------------------------------------------------------ telling the kind


@pytest.mark.parametrize(("owner", "kind"), [("vllm", VLLM), ("sglang", SGLANG),
                                             ("llamacpp", LLAMACPP)])
def test_owned_by_tells_vllm_sglang_and_llama_server(owner, kind):
    assert kind_of_answers([owner]) == (kind, f"GET /v1/models: owned_by {owner!r}")


def test_llama_server_props_and_llama_cpp_python_title_tell_llamacpp():
    props = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}
    assert kind_of_answers(["me"], props) == (
        LLAMACPP, "GET /props answered as llama.cpp's llama-server does")
    openapi = {"info": {"title": "🦙 llama.cpp Python API", "version": "0.3.36"}}
    assert kind_of_answers(["me"], None, openapi) == (
        LLAMACPP, "GET /openapi.json: title '🦙 llama.cpp Python API'")


def test_an_unknown_server_is_not_recognised():
    assert kind_of_answers(["me", "me"], {"detail": "Not Found"}, {"info": {"title": "x"}}) == (
        None, "not recognised (owned_by 'me')")
    assert kind_of_answers([]) == (None, "not recognised (owned_by none)")


class _Answers(BaseHTTPRequestHandler):
    answers: dict[str, object] = {}
    asked: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.asked.append(self.path)
        found = self.path in self.answers
        body = json.dumps(self.answers.get(self.path, {"detail": "Not Found"})).encode()
        self.send_response(200 if found else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def answering():
    """A server answering GETs from `answers` (path -> JSON), 404 elsewhere; `asked` lists the
    paths it was asked."""
    servers = []

    def start(answers):
        handler = type("Handler", (_Answers,), {"answers": answers, "asked": []})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", handler.asked

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_detect_asks_llama_cpp_python_its_openapi_title(answering):
    url, asked = answering({"/openapi.json": {"info": {"title": "🦙 llama.cpp Python API"}}})
    assert detect(url, Access(), ("me",)) == (LLAMACPP,
                                              "GET /openapi.json: title '🦙 llama.cpp Python API'")
    assert asked == ["/props", "/openapi.json"]


def test_detect_asks_nothing_more_when_owned_by_tells(answering):
    url, asked = answering({})
    assert detect(url, Access(), ("vllm",))[0] is VLLM
    assert asked == []


def test_detect_falls_back_to_openai_fields_only(answering):
    url, _ = answering({})
    assert detect(url, Access(), ("me",)) == (OPENAI, "not recognised (owned_by 'me')")
    assert detect("http://127.0.0.1:9", Access(), ())[0] is OPENAI  # nothing listens there


# ------------------------------------------------------------------ what each kind is sent


def _body(kind, request):
    options = ClientOptions(server=kind)
    return OpenAIStreamClient("http://127.0.0.1:1/", "m", options).body(request)


@pytest.mark.parametrize("kind", [VLLM, SGLANG])
def test_vllm_and_sglang_get_vllm_fields_and_token_ids(kind):
    body = _body(kind, IDS)
    assert body["prompt"] == [11, 12, 13]
    assert (body["min_tokens"], body["ignore_eos"], body["return_token_ids"]) == (4, True, True)
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("kind", [LLAMACPP, OPENAI])
def test_other_kinds_get_openai_fields_only(kind):
    assert _body(kind, TEXT) == {"model": "m", "max_tokens": 8, "temperature": 0.0,
                                 "stream": True, "stream_options": {"include_usage": True},
                                 "prompt": "Hello world"}


def test_a_token_id_prompt_is_refused_for_llamacpp_before_it_is_sent():
    with pytest.raises(ValueError) as refused:
        _body(LLAMACPP, IDS)
    assert str(refused.value) == "llama.cpp's server takes text prompts only, not token ids"
    assert _body(OPENAI, IDS)["prompt"] == [11, 12, 13]  # OpenAI's API takes token ids


def _record(**fields) -> RequestRecord:
    values = dict(index=0, expected_prompt_tokens=4, expected_output_tokens=3, scheduled_s=0.0,
                  sent_s=1.0, done_s=2.0, chunk_times_s=[1.5, 1.6, 1.7], chunk_tokens=[1, 1, 1])
    return RequestRecord(**{**values, **fields})


def test_a_stream_without_usage_fails_only_where_the_kind_sends_usage():
    strict, lenient = _record(), _record()
    _check_complete(strict, True, usage_required=True)
    _check_complete(lenient, True, usage_required=False)
    assert strict.error_kind == NO_USAGE
    assert lenient.error is None and lenient.output_tokens == 3


# ------------------------------------------------------------------ llama.cpp's stream


def _decode_recorded(chunk_per_token: bool) -> RequestRecord:
    """The stream llama-cpp-python 0.3.36's server sent for a 32-token prompt and max_tokens 16
    (its non-streamed answer to the same request: usage.completion_tokens 16), fed in one read."""
    record = RequestRecord(index=0, expected_prompt_tokens=32, expected_output_tokens=16,
                           scheduled_s=0.0)
    body = (DATA / "llamacpp_stream.txt").read_bytes()
    decoder = StreamDecoder(record, chunk_per_token)
    decoder.feed_reads(body, [len(body)], [1.0])
    assert decoder.finished
    return record


def test_llamacpp_chunks_count_every_token_even_the_ones_streamed_as_empty_text():
    record = _decode_recorded(chunk_per_token=True)
    assert (record.output_tokens, record.usage_output_tokens, record.tokens_estimated) == (
        16, None, True)


def test_counting_text_chunks_alone_misses_the_empty_ones():
    assert _decode_recorded(chunk_per_token=False).output_tokens == 14


# ------------------------------------------------------------------ /metrics by each kind's names

# SGLang's page as its collector writes it (https://docs.sglang.io/docs/references/production_metrics
# and python/sglang/srt/metrics/collector.py in https://github.com/sgl-project/sglang): one label
# set per scheduler (tp_rank) for the gauges; cached_tokens_total declared but without a sample
# until the first prefix hit.
SGLANG_PAGE = """\
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{model_name="meta-llama/Llama-3.1-8B-Instruct"}} {prompt}
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{model_name="meta-llama/Llama-3.1-8B-Instruct"}} {generation}
# HELP sglang:cached_tokens_total Number of cached prompt tokens.
# TYPE sglang:cached_tokens_total counter
{cached}# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0"}} {usage0}
sglang:token_usage{{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="1"}} {usage1}
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{{model_name="meta-llama/Llama-3.1-8B-Instruct"}} 0.9
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{model_name="meta-llama/Llama-3.1-8B-Instruct"}} {queue}
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{model_name="meta-llama/Llama-3.1-8B-Instruct"}} {running}
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{{model_name="meta-llama/Llama-3.1-8B-Instruct"}} 2.35
sglang:time_to_first_token_seconds_bucket{{le="0.1",model_name="meta-llama/Llama-3.1-8B-Instruct"}} 6.0
sglang:time_to_first_token_seconds_count{{model_name="meta-llama/Llama-3.1-8B-Instruct"}} 6.0
"""


def sglang_page(prompt=0.0, generation=0.0, cached=None, usage0=0.0, usage1=0.0, queue=0.0,
                running=0.0) -> str:
    line = ("" if cached is None else
            f'sglang:cached_tokens_total{{model_name="meta-llama/Llama-3.1-8B-Instruct"}} '
            f"{cached}\n")
    return SGLANG_PAGE.format(prompt=prompt, generation=generation, cached=line, usage0=usage0,
                              usage1=usage1, queue=queue, running=running)


def test_sglang_page_is_read_by_its_own_names():
    assert parse_metrics(sglang_page(1000.0, 64.0, None, 0.25, 0.5, 3.0, 8.0),
                         SGLANG_METRICS) == {
        "sglang:prompt_tokens_total": 1000.0, "sglang:generation_tokens_total": 64.0,
        "sglang:cached_tokens_total": 0.0,  # declared, no sample yet: no hit so far
        "sglang:token_usage": 0.5,  # the fullest scheduler's KV pool
        "sglang:num_queue_reqs": 3.0, "sglang:num_running_reqs": 8.0,
    }


def _sampled(pages: list[str], names) -> ServerMetricsSampler:
    """A sampler on a server whose /metrics answers `pages` in turn (entry, then exit)."""
    answers = iter(pages)

    async def run():
        transport = httpx.MockTransport(lambda request: httpx.Response(200, text=next(answers)))
        async with httpx.AsyncClient(transport=transport) as http:
            async with ServerMetricsSampler("http://server", http, interval_s=60,
                                            names=names) as sampler:
                pass
        return sampler

    return asyncio.run(run())


def test_sglang_summary_has_the_run_s_kv_peak_queue_and_prefix_hits():
    before = sglang_page()  # a fresh server: no cached-token sample until the first hit
    after = sglang_page(prompt=1200.0, generation=96.0, cached=900.0, usage0=0.4, usage1=0.7,
                        queue=2.0, running=6.0)
    sampler = _sampled([before, after], SGLANG_METRICS)
    assert sampler.warning is None
    summary = sampler.summary()
    assert summary == {
        "kv_cache_usage_max": 0.7, "requests_waiting_max": 2.0, "requests_running_max": 6.0,
        "prefix_cache_queries": 1200.0, "prefix_cache_hits": 900.0,
        "prefix_cache_hit_rate": 0.75, "preemptions": summary["preemptions"],
        "prompt_tokens": 1200.0, "generation_tokens": 96.0, "samples": 2,
    }
    assert math.isnan(summary["preemptions"])  # this page has no retraction counter


def test_a_vllm_page_is_no_sglang_page():
    vllm = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1.0\n"
    sampler = _sampled([vllm], SGLANG_METRICS)
    assert sampler.summary() == {}
    assert sampler.warning == ("no server metrics: GET http://server/metrics failed: no SGLang "
                               "metrics in the response (not a SGLang server?)")


# llama.cpp's llama-server --metrics, in the form tools/server/server-task.cpp writes it
# (https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md, /metrics).
LLAMA_SERVER_PAGE = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {prompt}
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {predicted}
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing {processing}
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred {deferred}
"""


def test_llama_server_page_gives_queue_and_tokens_but_no_kv_use():
    pages = [LLAMA_SERVER_PAGE.format(prompt=10, predicted=5, processing=0, deferred=0),
             LLAMA_SERVER_PAGE.format(prompt=330, predicted=133, processing=1, deferred=3)]
    summary = _sampled(pages, LLAMACPP_METRICS).summary()
    assert (summary["requests_running_max"], summary["requests_waiting_max"],
            summary["prompt_tokens"], summary["generation_tokens"]) == (1.0, 3.0, 320.0, 128.0)
    assert all(math.isnan(summary[key]) for key in
               ("kv_cache_usage_max", "prefix_cache_hits", "prefix_cache_hit_rate"))


def test_a_kind_without_metric_names_is_not_asked():
    sampler = _sampled([], None)  # no page: any GET would fail the test
    assert (sampler.summary(), sampler.warning, sampler.samples) == ({}, None, 0)


# ------------------------------------------------------------------ what a server could not do


def test_vllm_runs_say_nothing():
    assert limits(VLLM, [_record(usage_output_tokens=3)], text_prompts=False) == []


def test_llamacpp_says_each_thing_it_could_not_do_in_one_line():
    records = [_record(tokens_estimated=True),
               _record(chunk_times_s=[1.5, 1.6], chunk_tokens=[1, 1], tokens_estimated=True)]
    assert limits(LLAMACPP, records, text_prompts=True) == [
        "llama.cpp's server takes no token-id prompts: they went as text of the same length "
        "(counted with the test's tokenizer; the server adds its BOS token)",
        "output lengths not forced (llama.cpp's server takes no min_tokens/ignore_eos): 1 of 2 "
        "requests ended before max_tokens",
        "no usage chunk in 2 of 2 streams (llama.cpp's server ignores "
        "stream_options.include_usage): output tokens are counted as one per streamed chunk "
        "before the finishing one",
    ]


def test_an_unknown_server_says_its_metrics_and_lengths():
    assert limits(OPENAI, [_record(usage_output_tokens=3)], text_prompts=False) == [
        "output lengths not forced (an OpenAI-compatible server takes no min_tokens/ignore_eos): "
        "1 of 1 requests reached max_tokens",
        "no server metrics read: the /metrics names of an OpenAI-compatible server are not known "
        "(KV max% and hit% stay blank); --llmperf-server-kind names a kind that has them",
    ]


def test_streams_cut_off_beside_another_request_name_llama_cpp_python_s_interrupts():
    cut = dict(error="StreamClosed: the server closed the connection", error_kind=CUT_OFF)
    together = [_record(sent_s=1.0, done_s=1.2, **cut), _record(sent_s=1.1, done_s=2.0)]
    assert limits(LLAMACPP, together, text_prompts=False)[-1] == (
        "1 of 2 streams were cut off with up to 2 requests in flight: llama-cpp-python's server "
        "ends a stream when another request arrives unless started with --interrupt_requests "
        "False (requests then wait their turn); or measure it at concurrency 1")
    one_by_one = [_record(sent_s=1.0, done_s=1.2, **cut), _record(sent_s=1.2, done_s=2.0)]
    assert not any("cut off" in line for line in limits(LLAMACPP, one_by_one, False))


def test_every_kind_has_a_name_the_option_takes():
    assert list(KINDS) == ["vllm", "sglang", "llamacpp", "openai"]


# ------------------------------------------------------------------ the deployment's kind


def _deployment(url: str, kind: str = "auto"):
    from pytest_llmperf.session.deployment import Deployment

    return Deployment(url, Access(), server_kind=kind)


def test_a_deployment_names_a_server_that_is_not_vllm_once_told(answering):
    url, asked = answering({"/v1/models": {"data": [{"id": "/m.gguf", "owned_by": "me"}]},
                            "/openapi.json": {"info": {"title": "🦙 llama.cpp Python API"}}})
    deployment = _deployment(url)
    assert deployment.kind_note() is None  # nothing told yet
    assert deployment.kind() is LLAMACPP
    assert deployment.kind() is LLAMACPP and asked == ["/v1/models", "/props", "/openapi.json"]
    assert deployment.kind_note() == (f"--llmperf-endpoint {url} is llama.cpp's server "
                                      "(GET /openapi.json: title '🦙 llama.cpp Python API')")


def test_a_deployment_of_unknown_kind_says_what_it_sent(answering):
    url, _ = answering({"/v1/models": {"data": [{"id": "m", "owned_by": "system"}]}})
    deployment = _deployment(url)
    assert deployment.kind() is OPENAI
    assert deployment.kind_note() == (
        f"--llmperf-endpoint {url}: server kind not recognised (owned_by 'system'): only "
        "OpenAI's request fields were sent; --llmperf-server-kind vllm, sglang or llamacpp "
        "names it")


def test_the_option_wins_and_nothing_is_asked(answering):
    url, asked = answering({})
    deployment = _deployment(url, "sglang")
    assert deployment.kind() is SGLANG and asked == []
    assert deployment.kind_note() == f"--llmperf-endpoint {url} is SGLang (--llmperf-server-kind)"
    vllm = _deployment(url, "vllm")
    assert vllm.kind() is VLLM and vllm.kind_note() is None
