"""A metric is one definition (metrics/metric.py): the registry gathers them, compute_metrics
computes a run's from them, and the tables take their columns from them."""

from __future__ import annotations

import dataclasses
import math
import pickle

import pytest

from pytest_llmperf.machine.disturbance import Disturbance, GpuState
from pytest_llmperf.machine.gpu_telemetry import GpuTelemetry
from pytest_llmperf.metrics import compute, registry
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.metric import HIGHER, LOWER, Column, Metric, latency
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.reports import model, terminal


def request(index: int, sent: float, times: list[float]) -> RequestRecord:
    return RequestRecord(index=index, expected_prompt_tokens=16, expected_output_tokens=len(times),
                         scheduled_s=sent, sent_s=sent, chunk_times_s=times,
                         chunk_tokens=[1] * len(times), usage_prompt_tokens=16,
                         usage_output_tokens=len(times))


RECORDS = [request(0, 10.0, [10.5, 11.0, 11.5, 12.0]), request(1, 10.5, [11.0, 12.0])]


def test_the_table_columns_are_the_definitions_columns_in_their_order():
    assert [column.key for column in model.COLUMNS] == [
        "completed", "failed", "output_throughput_tok_s", "output_throughput_tok_s_per_gpu",
        "request_throughput_req_s", "goodput_req_s", "goodput_share", "ttft_s.p50",
        "ttft_s.p99", "tpot_s.p50", "itl_s.p50", "e2el_s.p50", "queue_s.p99",
        "server:kv_cache_usage_max", "server:prefix_cache_hit_rate",
        "server:spec_decode_acceptance_rate", "server:spec_decode_mean_accepted_length",
        "usd_per_1m_output_tok", "usd_per_1m_total_tok", "roofline_fraction",
        "energy_per_output_token_j"]
    assert [column.header for column in model.COLUMNS][7:10] == ["TTFT p50", "TTFT p99",
                                                                 "TPOT p50"]


def test_the_short_tables_order_comes_from_the_definitions_and_the_two_text_columns():
    assert terminal.BY_PRIORITY == (
        "out tok/s", "TTFT p50", "TPOT p50", "ok", "fail", "good%", "E2EL p50", "engine",
        "$/1M out", "roof%", "J/tok", "TTFT p99", "req/s", "good/s", "workload", "acc%",
        "acc len", "$/1M tot", "hit%", "KV max%", "ITL p50", "queue p99")


def test_a_metric_defined_twice_or_needing_a_later_one_is_refused():
    first, second = registry.METRICS[:2]
    with pytest.raises(ValueError) as twice:
        registry.check(registry.COMPUTED, (*registry.METRICS, first))
    assert str(twice.value) == "metric defined twice: ttft_s"
    needy = dataclasses.replace(first, needs=(second.name,))
    with pytest.raises(ValueError) as late:
        registry.check((needy, second), (needy, second))
    assert str(late.value) == "ttft_s needs tpot_s, computed after it or never"


def doubled_output(run) -> float:
    return 2.0 * run.value("output_tokens")


def test_a_new_definition_is_computed_named_and_shown(monkeypatch):
    new = Metric("doubled_output_tokens", "tokens", HIGHER, "2x out",
                 columns=(Column("{:.0f}", 35, 3),), needs=("output_tokens",),
                 compute=doubled_output)
    monkeypatch.setattr(registry, "COMPUTED", (*registry.COMPUTED, new))
    monkeypatch.setattr(registry, "BY_NAME", {**registry.BY_NAME, new.name: new})
    metrics = compute_metrics(RECORDS)
    assert metrics.doubled_output_tokens == 12.0  # 4 + 2 output tokens, doubled
    assert metrics.get("doubled_output_tokens") == 12.0
    assert metrics.flat()["doubled_output_tokens"] == 12.0
    assert registry.direction("doubled_output_tokens") == "higher"


def test_engine_start_is_a_metric_of_the_run_the_session_started_the_engine_for():
    assert compute_metrics(RECORDS, engine_start_s=41.2).get("engine_start_s") == 41.2
    with pytest.raises(KeyError) as info:
        compute_metrics(RECORDS).get("engine_start_s")
    assert info.value.args[0] == ("'engine_start_s': this session did not start the engine "
                                  "(--llmperf-endpoint): no start time")
    assert "engine_start_s" not in compute.SCALARS  # not every run has it


def test_energy_is_computed_from_the_watch_over_the_engines_cards():
    card = GpuTelemetry("0", 4.5, 9, energy_j=24.0)
    watched = Disturbance(None, (GpuState("0", telemetry=card),))
    metrics = compute_metrics(RECORDS, disturbance=watched)
    # 24 J over 6 output tokens and 6 + 32 prompt-and-output tokens.
    assert metrics.get("energy_per_output_token_j") == 4.0
    assert metrics.get("energy_per_token_j") == 24.0 / 38
    assert metrics.get("output_tokens_per_joule") == 0.25


def test_server_histograms_keep_the_statistics_the_server_has():
    metrics = compute_metrics(RECORDS, server_metrics={
        "ttft_s.mean": 0.4, "ttft_s.p50": 0.35, "samples": 4, "kv_cache_usage_max": 0.5})
    server = {name: value for name, value in metrics.flat().items()
              if name.startswith("server:")}
    assert server == {"server:kv_cache_usage_max": 0.5, "server:ttft_s.mean": 0.4,
                      "server:ttft_s.p50": 0.35}
    assert metrics.get("frontend_s.mean") == pytest.approx(0.5 - 0.4)  # client TTFT mean 0.5


def test_run_metrics_copy_pickle_and_compare_by_value():
    metrics = compute_metrics(RECORDS)
    assert math.isnan(metrics.goodput_share)
    assert pickle.loads(pickle.dumps(metrics)) == metrics  # NaN goodput compares equal
    assert hash(pickle.loads(pickle.dumps(metrics))) == hash(metrics)
    faster = dataclasses.replace(metrics, output_throughput_tok_s=9.0)
    assert (faster.output_throughput_tok_s, metrics.output_throughput_tok_s) == (9.0, 3.0)
    assert faster != metrics
    with pytest.raises(AttributeError) as info:
        metrics.no_such_metric  # noqa: B018
    assert str(info.value) == "RunMetrics has no metric 'no_such_metric'"


def test_a_latency_is_a_distribution_shown_in_ms():
    metric = latency("x_s", "X")
    assert (metric.unit, metric.better, metric.scale, metric.distribution) == ("s", LOWER, 1e3,
                                                                               True)


def test_a_distributions_samples_are_what_its_summary_is_computed_from():
    assert compute.request_samples("ttft_s", RECORDS) == [0.5, 0.5]
    assert compute.request_samples("tpot_s", RECORDS) == [0.5, 1.0]  # 1.5 s / 3, 1 s / 1
    assert compute.request_samples("queue_s", RECORDS) == [0.0, 0.0]
    with pytest.raises(KeyError) as info:
        compute.request_samples("completed", RECORDS)
    assert info.value.args[0] == "'completed' is no distribution of the requests' values"
