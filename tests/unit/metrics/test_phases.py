"""Where the time went: the engine's request-timing histograms over a measured window
(metrics/histograms.py), the split of a latency's mean (metrics/phases.py), and the phase a
regression names in a gate failure, an A/B line and a change point.

The /metrics pages are real: vLLM 0.32.0 on the CPU (suites/tiny.py's TINY_CPU, its model path
label shortened to suites/models/tiny-llama), read before and after 12 requests of 256 prompt and
16 output tokens at concurrency 8, the engine having served 6 requests before. The sampler that
ran alongside reported the numbers the tests hold the parse to.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import httpx
import pytest

from pytest_llmperf.client.server_metrics import ServerMetricsSampler
from pytest_llmperf.history.record import MetricValue
from pytest_llmperf.history.store import Point
from pytest_llmperf.history.trend import TrendCheck
from pytest_llmperf.metrics import phases
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.histograms import Histogram, parse_histograms, window_values
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.reports import html, terminal
from pytest_llmperf.verdict import gate, references
from pytest_llmperf.verdict.baselines import Baseline, BaselineEntry
from pytest_llmperf.verdict.paired_ratios import judge_pairs, paired_ratios

DATA = Path(__file__).parents[1] / "data"
START = (DATA / "vllm_metrics_warm_start.txt").read_text()
END = (DATA / "vllm_metrics_warm_end.txt").read_text()
INF = math.inf

# What the sampler reported during the captured run (means and counts: exact arithmetic of the
# pages; percentiles interpolated in vLLM's buckets).
LIVE = {
    "ttft_s.n": 12.0, "ttft_s.mean": 0.028616726398468018, "ttft_s.p50": 0.03,
    "ttft_s.p90": 0.0552, "itl_s.n": 180.0, "itl_s.mean": 0.0022090197611153903,
    "e2el_s.n": 12.0, "e2el_s.mean": 0.0620684822400411, "queue_s.n": 12.0,
    "queue_s.mean": 1.5299999972739897e-05, "prefill_s.mean": 0.02113519899997603,
    "decode_s.mean": 0.03313529641673085, "inference_s.mean": 0.054270495416706886,
}


# ---- histograms -----------------------------------------------------------------------------


def test_quantile_is_prometheus_histogram_quantile():
    # The worked example of ClickHouse's quantilePrometheusHistogram, which follows PromQL's
    # histogram_quantile: bounds 0, 0.5, 1, +Inf with cumulative counts 6, 11, 14, 19.
    found = Histogram((0.0, 0.5, 1.0, INF), (6.0, 11.0, 14.0, 19.0), 10.0, 19.0)
    assert found.quantile(0.5) == pytest.approx(0.35)
    # A rank in the +Inf bucket gives the highest finite bound; one in the lowest bucket with
    # a bound of 0 or less gives that bound; the lowest positive bucket starts at 0.
    assert found.quantile(0.99) == 1.0
    assert found.quantile(0.2) == 0.0
    assert Histogram((0.3, INF), (4.0, 4.0), 0.001, 4.0).quantile(0.5) == pytest.approx(0.15)
    assert math.isnan(Histogram((0.3, INF), (0.0, 0.0), 0.0, 0.0).quantile(0.5))
    assert math.isnan(Histogram((0.3, 1.0), (1.0, 2.0), 0.5, 2.0).quantile(0.5))  # no +Inf


def test_a_window_is_the_difference_of_two_readings():
    before = Histogram((0.1, INF), (3.0, 4.0), 0.5, 4.0)
    after = Histogram((0.1, INF), (5.0, 9.0), 2.5, 9.0)
    window = after.since(before)
    assert window == Histogram((0.1, INF), (2.0, 5.0), 2.0, 5.0)
    assert window.mean == pytest.approx(0.4)
    assert after.since(None) is after  # a series that appeared during the window
    assert before.since(after) is None  # fewer observations than before: a restart
    assert Histogram((0.2, INF), (5.0, 9.0), 2.5, 9.0).since(before) is None  # other buckets


def test_the_captured_window_parses_to_what_the_sampler_reported():
    found = window_values(parse_histograms(START, phases.VLLM_PHASES.values()),
                          parse_histograms(END, phases.VLLM_PHASES.values()), phases.VLLM_PHASES)
    assert {key: found[key] for key in LIVE} == pytest.approx(LIVE)
    # One observation per request, one ITL per gap between its 16 tokens.
    assert {key: found[f"{key}.n"] for key in phases.VLLM_PHASES} == {
        "ttft_s": 12, "itl_s": 180, "e2el_s": 12, "queue_s": 12, "prefill_s": 12,
        "decode_s": 12, "inference_s": 12}
    # The engine's phases fit inside its own latencies.
    assert found["queue_s.mean"] + found["prefill_s.mean"] <= found["ttft_s.mean"]
    assert found["inference_s.mean"] == pytest.approx(
        found["prefill_s.mean"] + found["decode_s.mean"], rel=1e-6)
    # Every queue time was under vLLM's lowest request-latency bucket (0.3 s): the rule puts the
    # median half-way into it, 0.15 s, for a mean of 15 us. Means, not percentiles, split.
    assert found["queue_s.p50"] == pytest.approx(0.15)


def test_data_parallel_engines_are_summed():
    twice = END + "\n".join(line.replace('engine="0"', 'engine="1"') for line in
                            END.splitlines() if line.startswith("vllm:request_queue_time"))
    one = parse_histograms(END, ["vllm:request_queue_time_seconds"])
    two = parse_histograms(twice + "\n", ["vllm:request_queue_time_seconds"])
    queue, both = one["vllm:request_queue_time_seconds"], two["vllm:request_queue_time_seconds"]
    assert both.count == 2 * queue.count == 36
    assert both.mean == pytest.approx(queue.mean)
    assert parse_histograms("<html>no metrics</html>\n", ["vllm:request_queue_time_seconds"]) == {}


def test_the_sampler_reads_the_histograms_at_the_window_edges_only():
    pages = iter([START, START, END])  # entry, one poll, exit
    gets = []

    def handle(request: httpx.Request) -> httpx.Response:
        gets.append(request.url.path)
        return httpx.Response(200, text=next(pages))

    async def sampled() -> ServerMetricsSampler:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as http:
            async with ServerMetricsSampler("http://vllm", http, interval_s=0.01) as sampler:
                while len(gets) < 2:
                    await asyncio.sleep(0.01)
        return sampler

    summary = asyncio.run(sampled()).summary()
    assert {key: summary[key] for key in LIVE} == pytest.approx(LIVE)
    assert summary["samples"] == 3


# ---- the split --------------------------------------------------------------------------------

# One NVIDIA H200, vLLM 0.24.0 (docs/phases.md): interactive, 1,024-token prompts, c=16; then
# the same with 180 ms more queueing, 3 ms more prefill and 1 ms more frontend.
H200 = {"ttft_s.mean": 0.2620, "server:ttft_s.mean": 0.2508, "server:queue_s.mean": 0.0063,
        "server:prefill_s.mean": 0.2251, "ttft_s.p50": 0.2620}
QUEUED = {"ttft_s.mean": 0.4460, "server:ttft_s.mean": 0.4338, "server:queue_s.mean": 0.1863,
          "server:prefill_s.mean": 0.2281, "ttft_s.p50": 0.3700}
SPLIT_TEXT = ("queue grew most (means: queue +180.0 ms, prefill +3.0 ms, hand-off +0.0 ms, "
              "frontend and wire +1.0 ms)")


def test_ttft_splits_into_queue_prefill_hand_off_and_frontend():
    split = phases.split(H200)
    assert split.line() == ("ttft 262.0 ms = queue 6.3 + prefill 225.1 + hand-off 19.4 + "
                            "frontend and wire 11.2")
    assert sum(seconds for _, seconds in split.parts) == pytest.approx(0.2620)
    assert phases.frontend(H200) == pytest.approx(0.0112)
    # A server that times TTFT only (SGLang's docs name no queue or prefill histogram).
    assert phases.split({"ttft_s.mean": 0.05, "server:ttft_s.mean": 0.04}).line() == (
        "ttft 50.0 ms = server 40.0 + frontend and wire 10.0")
    assert phases.split({"ttft_s.mean": 0.05}) is None
    assert phases.frontend({"ttft_s.mean": 0.05}) is None


def test_e2el_splits_with_decode():
    values = {"e2el_s.mean": 1.0, "server:e2el_s.mean": 0.95, "server:queue_s.mean": 0.1,
              "server:prefill_s.mean": 0.2, "server:decode_s.mean": 0.6}
    assert phases.split(values, "e2el_s").line() == (
        "e2el 1000.0 ms = queue 100.0 + prefill 200.0 + decode 600.0 + hand-off 50.0 + "
        "frontend and wire 50.0")


def test_compute_metrics_adds_frontend_where_the_server_timed_ttft():
    record = RequestRecord(index=0, expected_prompt_tokens=8, expected_output_tokens=2,
                           scheduled_s=10.0, sent_s=10.0, chunk_times_s=[10.030, 10.032],
                           chunk_tokens=[1, 1])
    metrics = compute_metrics([record], server_metrics={"ttft_s.mean": 0.025, "samples": 3})
    assert metrics.get("server:ttft_s.mean") == 0.025
    assert metrics.get("frontend_s.mean") == pytest.approx(0.005)
    bare = compute_metrics([record], server_metrics={})
    with pytest.raises(KeyError, match="frontend_s.mean"):
        bare.get("frontend_s.mean")


def test_growth_names_the_phase_and_needs_both_sides():
    assert phases.growth("ttft_s.p50", QUEUED, H200) == SPLIT_TEXT
    assert phases.growth("tpot_s.p50", QUEUED, H200) is None  # not a latency with phases
    assert phases.growth("ttft_s.p50", QUEUED, {"ttft_s.mean": 0.262}) is None


def test_a_frontend_that_grew_most_makes_the_client_or_the_transport_suspect():
    slow_front = {**H200, "ttft_s.mean": 0.5620, "ttft_s.p50": 0.5620}
    assert phases.growth("ttft_s.p50", slow_front, H200) == (
        "frontend and wire grew most (means: queue +0.0 ms, prefill +0.0 ms, hand-off +0.0 ms, "
        "frontend and wire +300.0 ms); frontend and wire went from 11.2 to 311.2 ms: the client "
        "or the transport is suspect, not the engine")
    # Grown by less than the floor: no suspicion, only the split.
    small = {**H200, "ttft_s.mean": 0.2650}
    assert "suspect" not in phases.growth("ttft_s.p50", small, H200)


def test_itl_disagreement_beyond_the_bound_is_one_line():
    agree = {"itl_s.mean": 0.00632, "server:itl_s.mean": 0.00629}  # the H200's interactive test
    assert phases.itl_check(agree) is None
    late = {"itl_s.mean": 0.0080, "server:itl_s.mean": 0.00629}
    assert phases.itl_check(late) == (
        "client ITL mean 8.0 ms vs the engine's 6.3 ms (+27.2%, bound 0.6 ms): the client or the "
        "transport is suspect, not the engine")
    assert phases.itl_check({**late, "server:spec_decode_drafts": 40.0}) is None
    assert phases.itl_check({"itl_s.mean": 0.0080}) is None


def test_a_count_mismatch_is_one_note():
    assert phases.count_note(12.0, 12, 0) is None
    assert phases.count_note(None, 12, 0) is None
    assert phases.count_note(28.0, 12, 1) == (
        "the engine finished 28 requests in the measured window, the client completed 12 "
        "(1 failed): the server's timings (server:*_s) cover other requests too; another client "
        "of the same server?")


# ---- a regression names its phase ------------------------------------------------------------


def entry(value: float) -> BaselineEntry:
    return BaselineEntry(value=value, spread=0.0, direction="lower", tolerance=0.1, n=1)


def test_a_gate_failure_names_the_phase_that_grew():
    names = ("ttft_s.p50", "ttft_s.mean", "server:ttft_s.mean", "server:queue_s.mean",
             "server:prefill_s.mean")
    baseline = Baseline({name: entry(H200[name]) for name in names}, path="b.toml",
                        test_id="test_x")
    current = {name: Estimate(value, 0.0, 1) for name, value in QUEUED.items()}
    report = gate.check_baseline(current, baseline, "s.py::test_x")
    [ttft] = [v for v in report.failures if v.name == "ttft_s.p50"]
    assert ttft.message == (
        "ttft_s.p50 regressed: 370.0 ms vs baseline 262.0 ms (+41.2%, allowed +10.0%, lower is "
        f"better); {SPLIT_TEXT} [b.toml :: \"test_x\"]; if this change is intended, update with: "
        'pytest --llmperf-update-baselines "s.py::test_x"')
    queue = next(v for v in report.failures if v.name == "server:queue_s.mean")
    assert "grew most" not in queue.message  # a phase itself has no split


def test_without_the_references_phases_the_gate_line_is_as_before():
    baseline = Baseline({"ttft_s.p50": entry(0.262)}, path="b.toml", test_id="test_x")
    current = {name: Estimate(value, 0.0, 1) for name, value in QUEUED.items()}
    [ttft] = gate.check_baseline(current, baseline).failures
    assert ttft.message == ("ttft_s.p50 regressed: 370.0 ms vs baseline 262.0 ms (+41.2%, "
                            'allowed +10.0%, lower is better) [b.toml :: "test_x"]')
    # A saved run's whole set of values can stand in as the reference.
    [named] = gate.check_baseline(current, baseline, reference=H200).failures
    assert named.message.endswith(f"lower is better); {SPLIT_TEXT} [b.toml :: \"test_x\"]")


def test_an_ab_regression_names_the_phase_that_grew():
    ratios = paired_ratios([H200] * 3, [QUEUED] * 3, ["ttft_s.p50"])
    [verdict] = judge_pairs(ratios, 0.1).verdicts
    assert verdict.message == (
        "ttft_s.p50 regressed in A/B: B/A median 1.412 (75% interval 1.412-1.412 over 3 ABBA "
        f"pairs), allowed <= 1.100 (lower is better; A/B tolerance 0.1); {SPLIT_TEXT}")
    bare = paired_ratios([{"ttft_s.p50": 0.262}] * 3, [QUEUED] * 3, ["ttft_s.p50"])
    assert judge_pairs(bare, 0.1).verdicts[0].message.endswith("A/B tolerance 0.1)")


def point(run_id: int | None, values: dict[str, float]) -> Point:
    return Point(run_id=run_id, run_uid=str(run_id), started_at=None, commit="c1",
                 verdict="pass", series="s", family="cpu-x", engine_label="m",
                 workload_label="w", fingerprint={}, engine={"model": "m"}, gate={},
                 values={k: MetricValue(v, 0.0, 1, "lower") for k, v in values.items()})


def test_a_change_point_carries_the_split():
    noise = [1.0, 1.02, 0.99, 1.01, 0.98, 1.0, 1.02, 0.99]
    points = [point(i + 1, {**H200, "ttft_s.p50": 0.262 * f}) for i, f in enumerate(noise)]
    points.append(point(9, QUEUED))
    trend = TrendCheck(points, point(None, {}), "h.sqlite", "s.py::test_x", window=3)
    current = references.Current({name: Estimate(value, 0.0, 1) for name, value in QUEUED.items()})
    [failure] = trend.compare(current, ("ttft_s.p50",), 0.1).report.failures
    assert f"; {SPLIT_TEXT}; see: llmperf history" in failure.message


# ---- the reports ------------------------------------------------------------------------------


def row(test_id: str, **values: float | None) -> dict:
    return {"test_id": test_id, "values": values}


def test_the_summary_splits_ttft_under_v_and_says_when_the_client_is_suspect():
    rows = [row("s.py::test_interactive", **H200, **{"itl_s.mean": 0.00632,
                                                     "server:itl_s.mean": 0.00629}),
            row("s.py::test_late", **{"itl_s.mean": 0.0080, "server:itl_s.mean": 0.00629}),
            row("s.py::test_plain", **{"ttft_s.mean": 0.1, "server:ttft_s.mean": None})]
    assert terminal.phase_lines(rows, full=True) == [
        "s.py::test_interactive: ttft 262.0 ms = queue 6.3 + prefill 225.1 + hand-off 19.4 + "
        "frontend and wire 11.2",
        "s.py::test_late: client ITL mean 8.0 ms vs the engine's 6.3 ms (+27.2%, bound 0.6 ms): "
        "the client or the transport is suspect, not the engine"]
    assert terminal.phase_lines(rows, full=False) == terminal.phase_lines(rows, True)[1:]


def test_the_html_report_draws_a_stacked_bar_per_test_with_a_split():
    pytest.importorskip("matplotlib")

    def result(test_id: str, values: dict[str, float]) -> dict:
        return {"key": test_id.split("::")[1], "test_id": test_id,
                "metrics": {k: {"value": v, "spread": 0.0, "n": 1, "direction": "lower"}
                            for k, v in values.items()}}

    document = {"llmperf": {"format": 2, "results": [
        result("s.py::test_a", H200), result("s.py::test_b", {"ttft_s.mean": 0.1})]}}
    assert [(test, split.line()) for test, split in html.phase_splits(document)] == [
        ("s.py::test_a", phases.split(H200).line())]
    pictures, missing = html.pictures_of(document)
    [picture] = [p for p in pictures if p.name == "phases-ttft.png"]
    assert missing is None and picture.png.startswith(b"\x89PNG")
    bare = {"llmperf": {"format": 2, "results": [result("s.py::test_b", {"ttft_s.mean": 0.1})]}}
    assert "phases-ttft.png" not in [p.name for p in html.pictures_of(bare)[0]]
