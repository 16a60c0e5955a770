"""A reasoning run's metrics from its records (metrics/reasoning.py): TTFO, the thinking's time
(TTFO - TTFT), thinking and answer tokens per request, in every run's metrics only when the run
sent reasoning requests, registered for the gate, and TTFO as a goodput limit. Times are binary
fractions so every value is exact."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from pytest_llmperf.metrics import goodput, reasoning, registry
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.metric import HIGHER, LOWER
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.verdict.gate import SLO


def thinker(index: int, thinking: int, answer: int, gap: float = 0.125,
            ttft: float = 0.25) -> RequestRecord:
    """<think>, `thinking` tokens, </think>, then `answer` tokens, one per chunk `gap` apart."""
    tokens = thinking + 2 + answer
    times = [ttft + k * gap for k in range(tokens)]
    return RequestRecord(index=index, expected_prompt_tokens=8, expected_output_tokens=tokens,
                         scheduled_s=0.0, sent_s=0.0, chunk_times_s=times,
                         chunk_tokens=[1] * tokens, usage_prompt_tokens=8,
                         usage_output_tokens=tokens, reasoning_tokens=thinking,
                         answer_tokens=answer, usage_reasoning_tokens=thinking,
                         first_output_s=times[thinking + 2] if answer else None)


def test_ttfo_is_ttft_plus_the_thinking_and_its_markers():
    metrics = compute_metrics([thinker(0, 4, 2), thinker(1, 8, 2)]).flat()
    # 4 thoughts and the two markers: the answer starts 6 gaps of 125 ms after the first token.
    assert (metrics["ttfo_s.min"], metrics["ttfo_s.max"]) == (0.25 + 6 * 0.125, 0.25 + 10 * 0.125)
    assert (metrics["reasoning_s.min"], metrics["reasoning_s.max"]) == (0.75, 1.25)
    assert (metrics["reasoning_tokens.p50"], metrics["answer_tokens.p50"]) == (6.0, 2.0)
    assert metrics["ttft_s.p50"] == 0.25  # the first token of any kind, a thought included


def test_a_request_whose_answer_never_started_counts_tokens_but_has_no_ttfo():
    metrics = compute_metrics([thinker(0, 4, 2), thinker(1, 6, 0)]).flat()
    assert (metrics["ttfo_s.n"], metrics["reasoning_tokens.n"]) == (1, 2)
    assert reasoning.summary([thinker(0, 4, 2), thinker(1, 6, 0)]) == {
        "requests": 2, "answered": 1, "reasoning_tokens": 10, "answer_tokens": 2,
        "server_reasoning_tokens": 10}


def test_the_thinking_count_is_the_servers_where_it_gives_one():
    # The last thought and `</think>` merged into one chunk: the chunks count 9 thoughts of 8
    # (seen on the CPU suite's thinking model when the server fell behind); the usage says 8.
    merged = thinker(0, 8, 14)
    merged.reasoning_tokens = 9
    metrics = compute_metrics([merged, thinker(1, 8, 14)]).flat()
    assert metrics["reasoning_tokens.max"] == 8.0
    assert merged.thinking_tokens == 8
    # Without a usage count, the chunks' count is all there is.
    merged.usage_reasoning_tokens = None
    assert merged.thinking_tokens == 9
    assert thinker(2, 0, 3).thinking_tokens == 0
    assert RequestRecord(index=3, expected_prompt_tokens=1, expected_output_tokens=1,
                         scheduled_s=0.0).thinking_tokens is None


def test_a_run_without_reasoning_requests_has_none_and_says_why():
    plain = thinker(0, 4, 2)
    plain.reasoning_tokens = plain.answer_tokens = plain.first_output_s = None
    metrics = compute_metrics([plain])
    assert "ttfo_s.p50" not in metrics.flat() and reasoning.summary([plain]) is None
    with pytest.raises(KeyError, match="the run sent no reasoning requests"):
        metrics.get("ttfo_s.p50")


def test_the_gate_knows_each_metric_its_direction_and_unit():
    assert [(registry.direction(f"{name}.p50"), registry.known(name + ".p50").unit)
            for name in ("ttfo_s", "reasoning_s", "reasoning_tokens", "answer_tokens")] == [
        (LOWER, "s"), (LOWER, "s"), (LOWER, "tokens"), (HIGHER, "tokens")]


def test_goodput_limits_the_answers_start():
    limits = goodput.limits_from(SLO(max={"ttfo_s.p90": 1.0}))
    assert limits == {"ttfo_s": 1.0}
    # TTFO 1.0 s (good) and 1.5 s (not); a plain request's TTFO is its TTFT; no answer: not good.
    never = thinker(2, 6, 0)
    plain = thinker(3, 1, 1)
    plain.reasoning_tokens = plain.answer_tokens = plain.first_output_s = None
    latencies = [goodput.request_latencies(r)
                 for r in (thinker(0, 4, 2), thinker(1, 8, 2), never, plain)]
    assert [request["ttfo_s"] for request in latencies] == [1.0, 1.5, math.inf, 0.25]
    assert goodput.goodput(latencies, 2.0, limits) == {"goodput_req_s": 1.0,
                                                       "goodput_share": 0.5}


def test_the_verbose_line_names_the_counts_and_the_three_times():
    records = [thinker(0, 4, 2), thinker(1, 8, 2)]
    run = SimpleNamespace(records=tuple(records), metrics=compute_metrics(records))
    [line] = reasoning.Reasoning.of(run).notes()
    assert line == (
        "reasoning: 2 requests, 2 answered; 12 tokens of thinking (the server's usage: 12), "
        "4 of answer; p50 TTFT 250.0 ms, TTFO 1250.0 ms, thinking 1000.0 ms")
