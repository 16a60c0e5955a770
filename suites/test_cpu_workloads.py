"""The CPU suite, workload shapes: published profiles, shared prefixes, datasets, text and chat.

Profiles are inference-benchmarker's (docs/published-numbers.md, Workload profiles), scaled
down to fit the tiny model's 2048-token context: `scale=0.1` keeps each length distribution's
shape at a tenth of its size.
"""

from pathlib import Path

import pytest

from pytest_llmperf import Fixed, Workload
from suites.tiny import CPU_GATED, CPU_TOLERANCE, TINY_CPU, TINY_CPU_NO_TOKENIZER

DATA = Path(__file__).resolve().parent / "data"

pytestmark = [pytest.mark.cpu, pytest.mark.engine(TINY_CPU),
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE, gate=CPU_GATED)]


@pytest.mark.parametrize("profile, scale", [
    ("chat", 0.25), ("classification", 0.1), ("code-generation", 0.1), ("fixed-length", 0.1),
])
def test_profile(llmperf, profile, scale):
    result = llmperf.run(Workload.profile(profile, num_requests=24, scale=scale, concurrency=8))
    assert result.completed == 24
    assert result.length_mismatches == 0


def test_random_lengths(llmperf):
    """Uniform lengths around 256 in / 32 out, +-50% (vllm bench's random dataset)."""
    result = llmperf.run(Workload.random(input_tokens=256, output_tokens=32, range_ratio=0.5,
                                         num_requests=32, concurrency=8))
    assert result.completed == 32


def test_shared_prefix_hits_the_prefix_cache(llmperf):
    """4 prefixes of 512 tokens, each reused: most prompt tokens should come from the cache."""
    result = llmperf.run(Workload.shared_prefix(num_prefixes=4, prefix_tokens=512,
                                                suffix_tokens=32, output_tokens=16,
                                                num_requests=32, concurrency=4))
    assert result.completed == 32
    # vLLM's /metrics always has the prefix-cache counters; a missing one is a failure (KeyError).
    assert result.server_metrics["prefix_cache_hit_rate"] > 0.5


def test_jsonl_dataset_as_text_prompts(llmperf):
    result = llmperf.run(Workload.dataset(DATA / "prompts.jsonl", num_requests=12, concurrency=4))
    assert result.completed == 12
    assert result.length_mismatches == 0


def test_chat_completions_with_text_prompts(llmperf):
    """The chat endpoint (the tiny model ships a chat template); text prompts of exact length."""
    result = llmperf.run(Workload.synthetic(
        input_tokens=Fixed(tokens=64),
        output_tokens=Fixed(tokens=32),
        num_requests=16, concurrency=4, prompt_format="text", api="chat", name="chat-text"))
    assert result.completed == 16
    assert result.output_tokens == 16 * 32


# Nightly: the config-only engine's own start is about 56 s of the main job; CI runs the same
# path on the real engine (tests/integration/test_xdist_endpoint.py).
@pytest.mark.nightly
@pytest.mark.engine(TINY_CPU_NO_TOKENIZER)
def test_architecture_config_without_tokenizer(llmperf):
    """A model shipped as config.json only, served with skip_tokenizer_init: token-id prompts
    from the config's vocabulary, token ids back (the GPU suites' Llama path, on the CPU)."""
    result = llmperf.run(Workload.fixed(input_tokens=128, output_tokens=32, num_requests=32,
                                        concurrency=8))
    assert result.output_tokens == 32 * 32
    assert result.tokens_estimated == 0


def test_multi_turn_conversations(llmperf):
    """4 chats of 6 turns, 0.2 s of user think time between turns: each turn's prompt is the
    whole conversation so far (the server's own answers included), so the prefix cache serves
    it but the new message. vLLM's CPU backend caches whole blocks of 128 tokens, so the turns
    are long enough for most of a conversation to fill whole blocks (about 78% can hit)."""
    result = llmperf.run(Workload.conversations(sessions=4, turns=6, input_tokens=48,
                                                output_tokens=96, think_time_s=0.2))
    assert result.completed == 24
    assert result.length_mismatches == 0
    turns = result.by_turn
    assert list(turns) == ["1", "2", "3", "4", "5", "6"]
    assert turns["6"]["prompt_tokens.mean"] == 6 * 48 + 5 * 96
    assert result.server_metrics["prefix_cache_hit_rate"] > 0.5


def test_mooncake_trace_replay(llmperf):
    """48 requests over 12 s at the trace's own pace (suites/data/mooncake-tiny.jsonl: four
    shared 512-token blocks, as Mooncake's hash ids give them); the client keeps the pace."""
    result = llmperf.run(Workload.trace(DATA / "mooncake-tiny.jsonl", format="mooncake"))
    assert result.completed == 48
    assert result.length_mismatches == 0
    # Sent on the trace's offsets, by the client self-check's rule (a bound that scales with
    # what it measures: docs/client.md), not a constant chosen on one CPU.
    assert result.client.kept_schedule, f"{result.client.schedule_line()} on {result.machine}"
    assert result.server_metrics["prefix_cache_hit_rate"] > 0.3


def test_chat_conversations_carry_the_servers_text_answers(llmperf):
    """The same chats on the chat API: each turn sends the messages so far, the assistant's
    being the text the server streamed (the tiny model ships a chat template)."""
    result = llmperf.run(Workload.conversations(sessions=4, turns=4, input_tokens=32,
                                                output_tokens=48, think_time_s=0.1,
                                                api="chat"))
    assert result.completed == 16
    assert list(result.by_turn) == ["1", "2", "3", "4"]
    # Turn 4 carries three earlier questions and answers: its prompt is the longest.
    assert result.by_turn["4"]["prompt_tokens.mean"] > 3 * result.by_turn["1"][
        "prompt_tokens.mean"]


def test_sharegpt_conversation_file(llmperf):
    """suites/data/sharegpt-tiny.json: six ShareGPT-format chats of four turns (one with a
    system prompt), each turn's output as long as its recorded answer, on the chat API."""
    result = llmperf.run(Workload.conversation_file(DATA / "sharegpt-tiny.json",
                                                    format="sharegpt", concurrency=3,
                                                    api="chat"))
    assert result.completed == 24
    assert result.length_mismatches == 0
    assert result.server_metrics["prefix_cache_hit_rate"] > 0.3


@pytest.mark.nightly  # the config-only engine, as above
@pytest.mark.engine(TINY_CPU_NO_TOKENIZER)
def test_conversations_without_a_tokenizer(llmperf):
    """The GPU suites' conversation path: a config-only model served with skip_tokenizer_init,
    token-id prompts, and each answer carried forward as the token ids the server streamed."""
    result = llmperf.run(Workload.conversations(sessions=4, turns=3, input_tokens=48,
                                                output_tokens=64))
    assert result.completed == 12
    assert result.by_turn["3"]["prompt_tokens.mean"] == 3 * 48 + 2 * 64
