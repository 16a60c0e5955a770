"""Speculative decoding's acceptance: vLLM's spec-decode counters parsed from /metrics, their
changes over a run, the numbers derived as `vllm bench serve` derives them, and where they show
(the registry, the summary table, the run file)."""

from __future__ import annotations

import asyncio
import json
import math
from datetime import datetime, timezone
from string import Template

import httpx
import pytest

from pytest_llmperf.client.metric_names import VLLM_METRICS
from pytest_llmperf.client.server_metrics import (
    ServerMetricsSampler,
    parse_metrics,
    parse_vllm_metrics,
)
from pytest_llmperf.metrics import registry
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.metrics.spec_decode import acceptance
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.reports.model import summary_rows
from pytest_llmperf.reports.runfile import run_document
from pytest_llmperf.reports.terminal import full_table, short_table
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from tests.unit.fingerprints import CPU

MODEL = 'model_name="/work/main/suites/models/tiny-llama"'
# What vLLM 0.32 on the CPU served after 3 greedy requests of 128 tokens, with
# speculative_config={"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4,
# "prompt_lookup_min": 2}: the spec-decode lines, verbatim.
CAPTURED = f"""\
vllm:spec_decode_num_drafts_total{{engine="0",{MODEL}}} 96.0
vllm:spec_decode_num_drafts_created{{engine="0",{MODEL}}} 1.7955796788728297e+09
vllm:spec_decode_num_draft_tokens_total{{engine="0",{MODEL}}} 282.0
vllm:spec_decode_num_accepted_tokens_total{{engine="0",{MODEL}}} 282.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",{MODEL},position="0"}} 96.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",{MODEL},position="1"}} 96.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",{MODEL},position="2"}} 90.0
"""
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
# The same engine at start-up: every series is there from the first sample, at 0.
AT_START = "\n".join(line.rsplit(" ", 1)[0] + " 0.0" if "_total" in line else line
                     for line in CAPTURED.splitlines()) + "\n"
# One page with any engine's counters; the type lines as vLLM serves them.
ENGINE_PAGE = Template("""\
# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="$engine",model_name="m"} $drafts
# HELP vllm:spec_decode_num_draft_tokens Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{engine="$engine",model_name="m"} $draft_tokens
# HELP vllm:spec_decode_num_accepted_tokens Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{engine="$engine",model_name="m"} $accepted
# HELP vllm:spec_decode_num_accepted_tokens_per_pos Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="$engine",model_name="m",position="0"} $pos0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="$engine",model_name="m",position="1"} $pos1
""")
# An engine without a speculative_config: vLLM's other counters, none of these.
NO_SPEC_DECODE = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0.0
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="m"} $generation
"""


def key(position: str) -> str:
    return f'{PER_POS}{{position="{position}"}}'


def summary_of(*pages: str) -> dict[str, float]:
    """The sampler's summary over `pages`, served in turn: one at entry, one per poll, the last
    at exit and thereafter."""
    served = iter(pages)
    last = [pages[0]]

    def handle(request: httpx.Request) -> httpx.Response:
        last[0] = next(served, last[0])
        return httpx.Response(200, text=last[0])

    async def run() -> ServerMetricsSampler:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as http:
            async with ServerMetricsSampler("http://vllm", http, interval_s=3600) as sampler:
                pass
        return sampler

    return asyncio.run(run()).summary()


def spec_keys(summary: dict[str, float]) -> dict[str, float]:
    return {name: value for name, value in summary.items() if name.startswith("spec_decode")}


# ---- parsing --------------------------------------------------------------------------------


def test_the_captured_page_parses_to_the_totals_and_one_series_per_position():
    assert parse_metrics(CAPTURED, VLLM_METRICS) == {
        "vllm:spec_decode_num_drafts_total": 96.0,
        "vllm:spec_decode_num_draft_tokens_total": 282.0,
        "vllm:spec_decode_num_accepted_tokens_total": 282.0,
        key("0"): 96.0, key("1"): 96.0, key("2"): 90.0,
    }


def test_without_kept_apart_labels_the_positions_are_summed_as_any_other_series():
    assert parse_vllm_metrics(CAPTURED, {PER_POS})[PER_POS] == 96.0 + 96.0 + 90.0


def test_two_engines_are_summed_position_by_position():
    engines = (ENGINE_PAGE.substitute(engine="0", drafts=10, draft_tokens=30, accepted=12,
                                      pos0=8, pos1=4)
               + ENGINE_PAGE.substitute(engine="1", drafts=20, draft_tokens=60, accepted=15,
                                        pos0=12, pos1=3))
    assert parse_metrics(engines, VLLM_METRICS) == {
        "vllm:spec_decode_num_drafts_total": 30.0,
        "vllm:spec_decode_num_draft_tokens_total": 90.0,
        "vllm:spec_decode_num_accepted_tokens_total": 27.0,
        key("0"): 20.0, key("1"): 7.0,
    }


# ---- the numbers, as vllm bench serve computes them ------------------------------------------


def test_acceptance_against_hand_computed_values():
    # 10 drafts of 3 tokens, 12 accepted: 7 at the first position, 4 at the second, 1 at the third.
    assert acceptance(10, 30, 12, {"0": 7, "1": 4, "2": 1}) == {
        "spec_decode_drafts": 10, "spec_decode_draft_tokens": 30,
        "spec_decode_accepted_tokens": 12,
        "spec_decode_acceptance_rate": pytest.approx(0.4),  # 12 / 30
        "spec_decode_mean_accepted_length": pytest.approx(2.2),  # 1 + 12 / 10
        "spec_decode_acceptance_pos_0": pytest.approx(0.7),  # 7 / 10
        "spec_decode_acceptance_pos_1": pytest.approx(0.4),
        "spec_decode_acceptance_pos_2": pytest.approx(0.1),
    }


def test_the_captured_run_gives_what_vllm_bench_serve_would_print():
    # vllm bench serve: acceptance rate 100.00 %, acceptance length 3.94, drafts 96,
    # per position 100.00 / 100.00 / 93.75 %.
    assert spec_keys(summary_of(AT_START, CAPTURED)) == {
        "spec_decode_drafts": 96.0, "spec_decode_draft_tokens": 282.0,
        "spec_decode_accepted_tokens": 282.0,
        "spec_decode_acceptance_rate": 1.0,  # 282 / 282
        "spec_decode_mean_accepted_length": 3.9375,  # 1 + 282 / 96
        "spec_decode_acceptance_pos_0": 1.0,  # 96 / 96
        "spec_decode_acceptance_pos_1": 1.0,
        "spec_decode_acceptance_pos_2": 0.9375,  # 90 / 96
    }


def test_counters_are_taken_as_their_change_over_the_run():
    before = ENGINE_PAGE.substitute(engine="0", drafts=100, draft_tokens=200, accepted=150,
                                    pos0=90, pos1=60)
    after = ENGINE_PAGE.substitute(engine="0", drafts=110, draft_tokens=220, accepted=155,
                                   pos0=94, pos1=61)
    assert spec_keys(summary_of(before, after)) == {
        "spec_decode_drafts": 10.0, "spec_decode_draft_tokens": 20.0,
        "spec_decode_accepted_tokens": 5.0,
        "spec_decode_acceptance_rate": 0.25, "spec_decode_mean_accepted_length": 1.5,
        "spec_decode_acceptance_pos_0": 0.4, "spec_decode_acceptance_pos_1": 0.1,
    }


def test_a_position_missing_from_the_first_sample_counts_from_zero():
    first = "\n".join(line for line in AT_START.splitlines() if 'position="2"' not in line)
    summary = summary_of(first + "\n", CAPTURED)
    assert summary["spec_decode_acceptance_pos_2"] == 0.9375


def test_an_engine_without_speculative_decoding_has_no_keys():
    before, after = (Template(NO_SPEC_DECODE).substitute(generation=g) for g in (0, 40))
    summary = summary_of(before, after)
    assert summary["generation_tokens"] == 40.0  # sampled, just without spec decoding
    assert spec_keys(summary) == {}


def test_a_run_that_drafted_nothing_has_zero_counts_and_no_rates():
    summary = spec_keys(summary_of(CAPTURED, CAPTURED))
    assert [summary[k] for k in ("spec_decode_drafts", "spec_decode_draft_tokens",
                                 "spec_decode_accepted_tokens")] == [0.0, 0.0, 0.0]
    rates = {k: v for k, v in summary.items() if "rate" in k or "length" in k or "_pos_" in k}
    assert len(rates) == 5 and all(math.isnan(v) for v in rates.values())


# ---- registry, summary table, run file --------------------------------------------------------


def test_every_key_is_a_server_metric_and_acceptance_is_better_higher():
    for name in spec_keys(summary_of(AT_START, CAPTURED)):
        assert registry.lookup("server:" + name) is not None, name
    assert registry.direction("server:spec_decode_acceptance_rate") == "higher"
    assert registry.direction("server:spec_decode_mean_accepted_length") == "higher"
    assert registry.direction("server:spec_decode_acceptance_pos_11") == "higher"
    for not_a_metric in ("server:spec_decode_acceptance_pos_", "server:spec_decode_acceptance_pos_x",
                         "server:spec_decode_acceptance_pos_1.p50",
                         "spec_decode_acceptance_pos_1"):
        assert registry.lookup(not_a_metric) is None, not_a_metric


def streamed() -> RequestRecord:
    # 4 tokens, one every 250 ms after a 250 ms TTFT.
    return RequestRecord(
        index=0, expected_prompt_tokens=16, expected_output_tokens=4, scheduled_s=1.0,
        sent_s=1.0, chunk_times_s=[1.25, 1.5, 1.75, 2.0], chunk_tokens=[1, 1, 1, 1],
        usage_prompt_tokens=16, usage_output_tokens=4,
    )


def result(test_id: str, server_metrics: dict[str, float]) -> Result:
    metrics = compute_metrics([streamed()])
    return Result(test_id=test_id, key=test_id.split("::", 1)[1], engine={"model": "tiny"},
                  engine_label="tiny", workload={}, workload_label="w", metrics=metrics,
                  runs=(metrics,), records=(streamed(),), server_metrics=server_metrics)


def test_the_summary_shows_acceptance_only_where_an_engine_drafted():
    spec = result("t.py::test_ngram", summary_of(AT_START, CAPTURED))
    plain = result("t.py::test_plain", {"kv_cache_usage_max": 0.5})
    rows = summary_rows([MeasurementRecord.of(spec), MeasurementRecord.of(plain)])
    lines = short_table(rows)
    header, _, _, ngram, plain_line, *legend = lines
    assert header.endswith("E2EL p50  acc%  acc len  verdict")  # KV max% did not fit in 120
    columns = header.index("acc%"), header.index("acc len")
    assert [ngram[i:i + 7].split() for i in columns] == [["100"], ["3.94"]]
    assert [plain_line[i:i + 7].split() for i in columns] == [["-"], ["-"]]
    assert ("acc% = draft tokens accepted (speculative decoding); acc len = tokens per drafting "
            "step (1 + accepted per draft)") in " ".join(" ".join(legend).split())
    assert max(map(len, lines)) <= 120
    # Without a drafting engine the columns are left out altogether.
    assert "acc" not in full_table(summary_rows([MeasurementRecord.of(plain)]))[0]


def test_the_run_file_carries_every_acceptance_key():
    spec = result("t.py::test_ngram", summary_of(AT_START, CAPTURED))
    doc = run_document([MeasurementRecord.of(spec)], fingerprint=CPU, commit=None,
                       started=datetime(2026, 1, 1, tzinfo=timezone.utc))
    written = json.loads(json.dumps(doc, allow_nan=False))["llmperf"]["results"][0]
    assert spec_keys(written["server_metrics"]) == {
        "spec_decode_accepted_tokens": 282.0, "spec_decode_acceptance_pos_0": 1.0,
        "spec_decode_acceptance_pos_1": 1.0, "spec_decode_acceptance_pos_2": 0.9375,
        "spec_decode_acceptance_rate": 1.0, "spec_decode_draft_tokens": 282.0,
        "spec_decode_drafts": 96.0, "spec_decode_mean_accepted_length": 3.9375,
    }
