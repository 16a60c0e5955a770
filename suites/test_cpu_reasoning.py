"""The CPU suite, reasoning: a tiny model made to think (suites/models/tiny-llama-think, made by
scripts/make_tiny_thinking_model.py) served by real vLLM with the "deepseek_r1" reasoning parser,
and its thinking and answer measured apart from the real stream.

Every request's output is `<think>`, exactly THINK_TOKENS tokens, `</think>`, then the answer:
the engine's logits processor forces it (pytest_llmperf/engines/thinking_model.py), so the
counts are known in advance and the test holds them exactly. A model of its own is an engine of
its own (about 50 s to start here), hence `nightly` (`pytest -m cpu suites/ --llmperf-nightly`;
docs/testing.md). The bad-input line starts no engine, so the main job runs it.
"""

import json

import pytest

from pytest_llmperf import Workload
from suites.tiny import CPU_GATED, CPU_TOLERANCE, MODELS, TINY_CPU

THINKING_MODEL = MODELS / "tiny-llama-think"
THINK_TOKENS = json.loads((THINKING_MODEL / "config.json").read_text())["llmperf_think_tokens"]
TINY_THINK = TINY_CPU.replace(
    model=str(THINKING_MODEL), reasoning_parser="deepseek_r1",
    extra_args={"logits-processors": "pytest_llmperf.engines.thinking_model:ThinkFirst"})
OUTPUT_TOKENS, REQUESTS = 24, 16
# The markers are generated tokens the parser streams as neither thinking nor answer.
ANSWER_TOKENS = OUTPUT_TOKENS - THINK_TOKENS - 2

pytestmark = [pytest.mark.cpu, pytest.mark.engine(TINY_THINK),
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE, gate=(*CPU_GATED, "ttfo_s.p50"))]


@pytest.mark.nightly
def test_thinking_tokens_and_time_to_first_output_are_exact(llmperf):
    """16 requests of 24 tokens, one at a time: each streams exactly THINK_TOKENS tokens of
    thinking (the server's usage says the same) and the rest as its answer, whose first chunk is
    the one after `</think>`; TTFO - TTFT is the thinking's THINK_TOKENS + 2 decode steps (the
    markers included), which the run's TPOT p50 prices within a factor of 2."""
    result = llmperf.run(Workload.reasoning(input_tokens=32, output_tokens=OUTPUT_TOKENS,
                                            num_requests=REQUESTS, concurrency=1,
                                            warmup_requests=2))
    assert result.completed == REQUESTS, result.failures_text()
    assert {(r.usage_reasoning_tokens, r.thinking_tokens, r.output_tokens)
            for r in result.records} == {(THINK_TOKENS, THINK_TOKENS, OUTPUT_TOKENS)}
    assert result.reasoning_tokens.p50 == THINK_TOKENS  # the metric takes the server's count
    # The chunks' own count: a chunk that merged the last thought with `</think>` (the server
    # fell behind) counts the marker as thinking, one that merged `</think>` with the answer's
    # first token as answer (seen: 9 thinking tokens of 8, one request in 16).
    assert all(THINK_TOKENS <= r.reasoning_tokens <= THINK_TOKENS + 1
               and ANSWER_TOKENS <= r.answer_tokens <= ANSWER_TOKENS + 1
               for r in result.records), [(r.reasoning_tokens, r.answer_tokens)
                                          for r in result.records]
    # The answer's first chunk is the one that starts at token THINK_TOKENS + 2 (a slow client
    # or server may merge a few tokens into one chunk: count tokens, not chunks).
    assert all(r.first_output_s == r.chunk_times_s[answer_chunk(r)] for r in result.records)
    steps = (THINK_TOKENS + 2) * result.tpot_s.p50
    assert steps / 2 < result.reasoning_s.p50 < steps * 2, (result.reasoning_s.p50, steps)
    assert result.ttfo_s.p50 == pytest.approx(result.ttft_s.p50 + result.reasoning_s.p50,
                                              rel=0.5)


def test_reasoning_on_an_engine_without_a_parser_is_one_line(llmperf):
    """Refused before anything is sent or started (workloads/reasoning.py)."""
    with pytest.raises(pytest.fail.Exception) as caught:
        llmperf.run(Workload.reasoning(input_tokens=8, output_tokens=4, num_requests=1,
                                       concurrency=1), engine=TINY_CPU)
    assert str(caught.value) == (
        "Workload 'reasoning-8in-4out' is a reasoning workload, but the engine of model "
        f"{TINY_CPU.model} runs no reasoning parser, so its thinking would stream as the "
        "answer: give the Engine reasoning_parser='deepseek_r1' (or the parser of its model "
        "family; vLLM's --reasoning-parser)")


def answer_chunk(record) -> int:
    """The index of the chunk that carries output token THINK_TOKENS + 2 (from 0)."""
    tokens = 0
    for index, count in enumerate(record.chunk_tokens):
        if tokens + count > THINK_TOKENS + 2:
            return index
        tokens += count
    raise AssertionError(f"{tokens} tokens: no answer")
