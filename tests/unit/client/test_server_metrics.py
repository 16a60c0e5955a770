"""Server-side metrics: parsing vLLM's /metrics text and sampling it around a run."""

from __future__ import annotations

import asyncio
import http.server
import math
import threading
from string import Template

import httpx
import pytest

from pytest_llmperf.client.metric_names import SAMPLED_NAMES
from pytest_llmperf.client.server_metrics import ServerMetricsSampler, parse_vllm_metrics
from pytest_llmperf.engines.server import free_port

# An excerpt of what vLLM 0.32.0 (CPU, tiny-llama) served at /metrics after two identical
# 300-token prompts with 8 output tokens each, lines kept verbatim and in order; the values of the
# series the sampler reads are $placeholders (the capture had 0, 0, 0, 600, 256, 0, 600, 16).
VLLM_METRICS = Template("""\
# HELP python_gc_collections_total Number of times this generation was collected
# TYPE python_gc_collections_total counter
python_gc_collections_total{generation="0"} 1544.0
python_gc_collections_total{generation="1"} 140.0
python_gc_collections_total{generation="2"} 10.0
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 6.98253312e+08
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="/work/main/suites/models/tiny-llama"} $running
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="/work/main/suites/models/tiny-llama"} $waiting
# HELP vllm:num_requests_waiting_by_reason Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="/work/main/suites/models/tiny-llama",reason="capacity"} 7.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="/work/main/suites/models/tiny-llama",reason="deferred"} 5.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="/work/main/suites/models/tiny-llama"} $kv
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="/work/main/suites/models/tiny-llama"} $queries
# HELP vllm:prefix_cache_queries_created Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_created gauge
vllm:prefix_cache_queries_created{engine="0",model_name="/work/main/suites/models/tiny-llama"} 1.7953551187393057e+09
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="/work/main/suites/models/tiny-llama"} $hits
# HELP vllm:prefix_cache_hits_created Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_created gauge
vllm:prefix_cache_hits_created{engine="0",model_name="/work/main/suites/models/tiny-llama"} 1.7953551187393315e+09
# HELP vllm:external_prefix_cache_queries_total External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.
# TYPE vllm:external_prefix_cache_queries_total counter
vllm:external_prefix_cache_queries_total{engine="0",model_name="/work/main/suites/models/tiny-llama"} 0.0
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="/work/main/suites/models/tiny-llama"} $preemptions
# HELP vllm:num_preemptions_created Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{engine="0",model_name="/work/main/suites/models/tiny-llama"} 1.79535511873943e+09
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="/work/main/suites/models/tiny-llama"} $prompt
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="/work/main/suites/models/tiny-llama"} 1.7953551187394483e+09
# HELP vllm:prompt_tokens_cached_total Number of cached prompt tokens (local + external).
# TYPE vllm:prompt_tokens_cached_total counter
vllm:prompt_tokens_cached_total{engine="0",model_name="/work/main/suites/models/tiny-llama"} 256.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="/work/main/suites/models/tiny-llama"} $generation
# HELP vllm:generation_tokens_created Number of generation tokens processed.
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{engine="0",model_name="/work/main/suites/models/tiny-llama"} 1.7953551187396762e+09
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="/work/main/suites/models/tiny-llama"} 0.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="/work/main/suites/models/tiny-llama"} 2.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="/work/main/suites/models/tiny-llama"} 0.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="/work/main/suites/models/tiny-llama"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="/work/main/suites/models/tiny-llama"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="/work/main/suites/models/tiny-llama"} 2.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="/work/main/suites/models/tiny-llama"} 2.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="/work/main/suites/models/tiny-llama"} 0.05506134033203125
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",engine="0",kv_cache_memory_bytes="536870912",num_gpu_blocks="4096"} 1.0
""")

CAPTURED = dict(running=0.0, waiting=0.0, kv=0.0, queries=600.0, hits=256.0, preemptions=0.0,
                prompt=600.0, generation=16.0)

# Two engines under data parallelism: one label set each, same names.
DATA_PARALLEL = """\
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="1",model_name="m"} 4.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.75
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.25
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 100.0
vllm:prompt_tokens_total{engine="1",model_name="m"} 50.0
"""


def metrics_text(**values: float) -> str:
    return VLLM_METRICS.substitute({**CAPTURED, **values})


# ---- parse_vllm_metrics --------------------------------------------------------------------


def test_parses_the_captured_page_by_exact_name():
    values = parse_vllm_metrics(metrics_text(waiting=2.0, kv=0.5))
    assert values["vllm:prefix_cache_queries_total"] == 600.0
    assert values["vllm:prefix_cache_hits_total"] == 256.0
    assert values["vllm:generation_tokens_total"] == 16.0
    assert values["vllm:kv_cache_usage_perc"] == 0.5
    # The by-reason gauge is its own series, never folded into num_requests_waiting.
    assert values["vllm:num_requests_waiting"] == 2.0
    assert values["vllm:num_requests_waiting_by_reason"] == 12.0
    assert values["vllm:request_success_total"] == 2.0  # summed over finished_reason
    assert values["vllm:prefix_cache_hits_created"] == pytest.approx(1.7953551187393315e9)
    assert values["process_resident_memory_bytes"] == 6.98253312e8


def test_histogram_buckets_are_left_out_but_sum_and_count_kept():
    values = parse_vllm_metrics(metrics_text())
    assert not any(name.endswith("_bucket") for name in values)
    assert values["vllm:time_to_first_token_seconds_count"] == 2.0
    assert values["vllm:time_to_first_token_seconds_sum"] == pytest.approx(0.05506134)


def test_data_parallel_engines_are_summed_but_kv_usage_is_the_fullest():
    values = parse_vllm_metrics(DATA_PARALLEL)
    assert values["vllm:num_requests_waiting"] == 7.0
    assert values["vllm:prompt_tokens_total"] == 150.0
    assert values["vllm:kv_cache_usage_perc"] == 0.75  # fractions of two caches do not add


def test_names_filter_gives_the_same_values_as_a_full_parse():
    text = metrics_text(running=3.0, waiting=1.0, kv=0.25, preemptions=2.0)
    full = parse_vllm_metrics(text)
    assert parse_vllm_metrics(text, SAMPLED_NAMES) == {name: full[name] for name in SAMPLED_NAMES}
    assert parse_vllm_metrics(text, {"vllm:num_requests_waiting"}) == {
        "vllm:num_requests_waiting": 1.0}


def test_text_without_metrics_parses_to_nothing():
    assert parse_vllm_metrics("") == {}
    assert parse_vllm_metrics("<html><body>hello</body></html>\n", SAMPLED_NAMES) == {}


# ---- ServerMetricsSampler against a fake vLLM ----------------------------------------------


class FakeVllm:
    """Serves VLLM_METRICS with whatever values the test sets; counts the GETs."""

    def __init__(self, **values: float) -> None:
        self.values = {**CAPTURED, **values}
        self.gets = 0
        self.fail_next: int | None = None  # status code for the next GET only

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/metrics"
        self.gets += 1
        if self.fail_next is not None:
            status, self.fail_next = self.fail_next, None
            return httpx.Response(status, text="boom")
        return httpx.Response(200, text=VLLM_METRICS.substitute(self.values))

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handle))


async def _sampled(fake: FakeVllm, body, interval_s: float = 60.0) -> ServerMetricsSampler:
    """Run `body()` inside a sampler on `fake`; a long interval means entry and exit samples only."""
    async with fake.client() as http:
        async with ServerMetricsSampler("http://vllm", http, interval_s=interval_s) as sampler:
            await body()
    return sampler


def test_counters_are_deltas_over_the_run_and_hit_rate_is_their_ratio():
    fake = FakeVllm(queries=600.0, hits=256.0, prompt=600.0, generation=16.0, preemptions=1.0)

    async def run():
        fake.values.update(queries=1500.0, hits=896.0, prompt=1500.0, generation=52.0,
                           preemptions=4.0)

    sampler = asyncio.run(_sampled(fake, run))
    summary = sampler.summary()
    assert summary == {
        "kv_cache_usage_max": 0.0, "requests_waiting_max": 0.0, "requests_running_max": 0.0,
        "prefix_cache_queries": 900.0, "prefix_cache_hits": 640.0,
        "prefix_cache_hit_rate": pytest.approx(640 / 900), "preemptions": 3.0,
        "prompt_tokens": 900.0, "generation_tokens": 36.0, "samples": 2,
    }
    assert sampler.warning is None
    assert fake.gets == 2  # one on entry, one on exit


def test_a_run_on_two_data_parallel_engines_sums_their_counters_and_keeps_the_fullest_cache():
    # What the sampler reads from vLLM with --data-parallel-size 2: one label set per engine.
    page = Template("""\
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} $kv0
vllm:kv_cache_usage_perc{engine="1",model_name="m"} $kv1
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} $running0
vllm:num_requests_running{engine="1",model_name="m"} $running1
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} $gen0
vllm:generation_tokens_total{engine="1",model_name="m"} $gen1
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} $prompt0
vllm:prompt_tokens_total{engine="1",model_name="m"} $prompt1
""")
    values = dict(kv0=0.0, kv1=0.0, running0=0.0, running1=0.0, gen0=100.0, gen1=40.0,
                  prompt0=800.0, prompt1=300.0)

    async def sampled() -> ServerMetricsSampler:
        transport = httpx.MockTransport(
            lambda request: httpx.Response(200, text=page.substitute(values)))
        async with httpx.AsyncClient(transport=transport) as http:
            async with ServerMetricsSampler("http://vllm", http, interval_s=60.0) as sampler:
                values.update(kv0=0.25, kv1=0.5, running0=3.0, running1=2.0, gen0=160.0,
                              gen1=120.0, prompt0=1200.0, prompt1=900.0)
        return sampler

    summary = asyncio.run(sampled()).summary()
    # Counters: each engine's change, added (60 + 80 generated, 400 + 600 prompt tokens).
    assert (summary["generation_tokens"], summary["prompt_tokens"]) == (140.0, 1000.0)
    # Gauges: requests add up over the engines; KV use is the fullest engine's.
    assert summary["requests_running_max"] == 5.0
    assert summary["kv_cache_usage_max"] == 0.5


def test_no_prefix_cache_queries_means_no_hit_rate():
    async def idle():
        pass

    sampler = asyncio.run(_sampled(FakeVllm(), idle))
    summary = sampler.summary()
    assert summary["prefix_cache_queries"] == 0.0
    assert math.isnan(summary["prefix_cache_hit_rate"])


def test_gauge_peaks_between_entry_and_exit_are_caught_by_polling():
    fake = FakeVllm()

    async def run():
        fake.values.update(kv=0.9, waiting=6.0, running=4.0)
        await asyncio.sleep(0.15)  # several polls at 10 ms
        fake.values.update(kv=0.1, waiting=0.0, running=0.0)

    sampler = asyncio.run(_sampled(fake, run, interval_s=0.01))
    summary = sampler.summary()
    assert (summary["kv_cache_usage_max"], summary["requests_waiting_max"],
            summary["requests_running_max"]) == (0.9, 6.0, 4.0)
    assert 4 <= summary["samples"] == fake.gets <= 17  # one GET per interval, no more


def test_a_metric_this_vllm_does_not_export_is_nan():
    text = "\n".join(line for line in metrics_text().splitlines() if "preemptions" not in line)

    async def run():
        transport = httpx.MockTransport(lambda request: httpx.Response(200, text=text))
        async with httpx.AsyncClient(transport=transport) as http:
            async with ServerMetricsSampler("http://vllm", http, interval_s=60) as sampler:
                pass
        return sampler

    summary = asyncio.run(run()).summary()
    assert math.isnan(summary["preemptions"])
    assert summary["generation_tokens"] == 0.0


def test_a_failed_sample_mid_run_is_skipped_and_told():
    fake = FakeVllm(generation=10.0)

    async def run():
        fake.fail_next = 500
        fake.values.update(generation=30.0)
        await asyncio.sleep(0.05)

    sampler = asyncio.run(_sampled(fake, run, interval_s=0.01))
    assert sampler.summary()["generation_tokens"] == 20.0
    assert sampler.warning.startswith(f"1 of {fake.gets} samples of http://vllm/metrics failed "
                                      "(last: HTTP 500); server metrics use the other")


# ---- no metrics to be had: empty summary, one-line warning, never an exception ---------------


class _NotVllm(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the stdlib's name
        self.send_error(404)

    def log_message(self, *args):  # keep test output clean
        pass


@pytest.fixture
def not_vllm():
    """A real HTTP server that is not vLLM: every path is 404."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotVllm)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def _sample_alone(base_url: str) -> ServerMetricsSampler:
    async with ServerMetricsSampler(base_url, interval_s=0.01) as sampler:
        await asyncio.sleep(0.05)
    return sampler


def test_a_server_without_metrics_gives_an_empty_summary_and_a_warning(not_vllm):
    sampler = asyncio.run(_sample_alone(not_vllm))
    assert sampler.summary() == {}
    assert sampler.warning == f"no server metrics: GET {not_vllm}/metrics failed: HTTP 404"
    assert sampler.samples == 0


def test_no_server_at_all_gives_an_empty_summary_and_a_warning():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    sampler = asyncio.run(_sample_alone(url))
    assert sampler.summary() == {}
    assert sampler.warning.startswith(f"no server metrics: GET {url}/metrics failed: ConnectError")
    assert "\n" not in sampler.warning


def test_a_page_without_vllm_metrics_is_told_apart_and_not_polled():
    gets = []

    def handle(request):
        gets.append(request)
        return httpx.Response(200, text="<html>\n<body>a web page</body>\n</html>")

    async def run():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as http:
            async with ServerMetricsSampler("http://web/", http, interval_s=0.01) as sampler:
                await asyncio.sleep(0.05)
        return sampler

    sampler = asyncio.run(run())
    assert sampler.summary() == {}
    assert sampler.warning == ("no server metrics: GET http://web/metrics failed: no vLLM metrics "
                               "in the response (not a vLLM server?)")
    assert len(gets) == 1  # the first failure ends polling: one wasted GET, not one per interval


def test_the_runs_own_exception_passes_through_untouched():
    fake = FakeVllm()

    async def run():
        async with fake.client() as http:
            async with ServerMetricsSampler("http://vllm", http, interval_s=0.01):
                raise KeyError("the run's own error")

    with pytest.raises(KeyError, match="the run's own error"):
        asyncio.run(run())


def test_a_shared_client_is_left_open_and_its_own_client_is_closed():
    fake = FakeVllm()

    async def run():
        async with fake.client() as http:
            async with ServerMetricsSampler("http://vllm", http, interval_s=60):
                pass
            assert not http.is_closed
        own = ServerMetricsSampler("http://127.0.0.1:9", interval_s=60)
        async with own:
            client = own._http
        assert client.is_closed

    asyncio.run(run())


@pytest.mark.parametrize("interval_s", [0, -1.0, float("nan"), "1"])
def test_interval_must_be_positive(interval_s):
    with pytest.raises(ValueError, match="interval_s must be > 0"):
        ServerMetricsSampler("http://vllm", interval_s=interval_s)
