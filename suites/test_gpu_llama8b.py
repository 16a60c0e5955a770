"""Llama 3.1 8B on H100 and H200: the Azure study's profiles, FP8 and data-parallel A/Bs, the
H200 guide's FP8 KV cache, MLPerf's interactive limits, chats and a Mooncake-style trace.

`pytest -m h100 suites/` (or h200) nightly; baselines in baselines/<h100|h200>/. What each test
asks, its source and why its threshold is what it is: docs/gpu-suites.md. Every threshold and
engine setting is a number of docs/published-numbers.md (the section is named where it is
used); request counts and warm-ups are ours, sized to a few minutes a test.
"""

from pathlib import Path

import pytest

from pytest_llmperf import SLO, Normal, ServerScenario, Workload, judge_server, server_workload
from pytest_llmperf.engines.lora_adapters import write_random_adapter
from pytest_llmperf.engines.speculative import pinned_acceptance
from pytest_llmperf.workloads.structured import distinct_schemas
from pytest_llmperf.workloads.traces import MOONCAKE_BLOCK_TOKENS, read_trace
from suites.gpu import (
    LLAMA_8B,
    LLAMA_8B_DP8,
    LLAMA_8B_FP8_KV,
    LLAMA_8B_FP8_WEIGHTS,
    LLAMA_8B_STRUCTURED,
    LLAMA_8B_TP8,
    MODELS,
)

DATA = Path(__file__).resolve().parent / "data"

pytestmark = [pytest.mark.h100, pytest.mark.h200]

# Workload profiles: inference-benchmarker's heaviest load is 128 virtual users (max_vus), each
# sending its next request when its last one ends: a closed loop of 128.
VIRTUAL_USERS = 128

# MLPerf Inference llama3_1-8b-interactive (MLPerf), p99.
INTERACTIVE = SLO(max={"ttft_s.p99": 0.5, "tpot_s.p99": 0.03, "error_rate": 0.0})

# Azure study, one GPU: prefix-cache hit rate of classification ~98% (H100) and ~99% (H200);
# the profile's eight shared documents make ~96% of prompt tokens cacheable at 256 requests.
# Asserted with a fifth off. Chat's ~75% came from the dataset's turns: the synthetic chat
# history is not built to match it, so it is not asserted here (test_chat_conversations is).
HIT_RATE_FLOOR = {"classification": 0.8}

# Azure study, FP8: FP8 weights gave ~38% more code-generation throughput on one H100. A third
# of that gain, 1.12x, is asserted: the effect must be there, on other GPUs and vLLM versions too.
FP8_WEIGHTS_GAIN = 1.12

# H200 guide, KV-cache quantization: an FP8 KV cache takes ~50% of the memory of a 16-bit one.
# The same requests then fill about half as much of the cache; 0.6 leaves room for the block
# rounding and the sampling of vLLM's usage gauge.
FP8_KV_USAGE_RATIO = 0.6

# Azure study, eight H100s: eight TP=1 copies over one TP=8 copy gave 4.2x (chat), 5.2x
# (classification) and 1.9x (code generation) total throughput. A third of each gain asserted.
EIGHT_COPIES_OVER_TP8 = {"chat": 2.0, "classification": 2.4, "code-generation": 1.3}

# Workload profiles, chat: a user turn of the synthetic chat (pytest_llmperf/workloads/profiles.py,
# ~160 tokens) and inference-benchmarker's chat answers (mean 800, 50-800, variance 100), four
# turns. Azure study: chat's prefix-cache hit rate ~75% (H100) and ~77% (H200). A conversation
# that carries the server's own answers can hit ~90% of its prompt tokens; asserted: 75% with a
# fifth off.
CHAT_TURN = Normal(mean=160, min=16, max=640, variance=100)
CHAT_ANSWER = Normal(mean=800, min=50, max=800, variance=100)
CHAT_HIT_RATE_FLOOR = 0.6

# Mooncake: a two-minute conversation trace in Mooncake's format at this engine's scale
# (scripts/make_mooncake_trace.py writes it from the published trace's statistics).
MOONCAKE_TRACE = DATA / "mooncake-conversation-16k.jsonl"


@pytest.mark.engine(LLAMA_8B)
@pytest.mark.parametrize("profile", ["chat", "classification", "code-generation"])
def test_profiles(llmperf, profile):
    """The Azure study's three profiles at inference-benchmarker's 128 virtual users."""
    result = llmperf.run(Workload.profile(profile, num_requests=256, concurrency=VIRTUAL_USERS,
                                          warmup_requests=16))
    assert result.completed == 256
    if profile in HIT_RATE_FLOOR:
        assert result.server_metrics["prefix_cache_hit_rate"] > HIT_RATE_FLOOR[profile]


@pytest.mark.engine(LLAMA_8B)
@pytest.mark.llmperf(slo=INTERACTIVE)
def test_interactive_limits_at_concurrency_16(llmperf):
    llmperf.run(Workload.fixed(input_tokens=1024, output_tokens=128, num_requests=320,
                               concurrency=16, warmup_requests=16))


@pytest.mark.engine(LLAMA_8B)
def test_mlperf_server_scenario(llmperf):
    scenario = ServerScenario.for_model("llama3_1-8b-interactive", 8.0, min_duration_s=60.0)
    base = Workload.fixed(input_tokens=1024, output_tokens=128, num_requests=1, rate=1.0,
                          warmup_requests=16)
    result = llmperf.run(server_workload(scenario, base))
    verdict = judge_server(scenario, result.metrics, records=result.records)
    assert verdict.valid, str(verdict)


def test_fp8_weights_raise_code_generation_throughput(llmperf):
    """FP8 weights (B) against BF16 (A), KV cache BF16 on both sides, on the code-generation
    profile at 128 virtual users: the Azure study's ~38% more throughput, a third of it kept."""
    run = llmperf.ab(Workload.profile("code-generation", num_requests=256,
                                      concurrency=VIRTUAL_USERS, warmup_requests=16),
                     a=LLAMA_8B, b=LLAMA_8B_FP8_WEIGHTS, pairs=2)
    assert run.median("total_throughput_tok_s") > FP8_WEIGHTS_GAIN


def test_fp8_kv_cache_halves_kv_memory(llmperf):
    """An FP8 KV cache (B) against BF16 (A), BF16 weights on both sides: 32 requests of 4,096
    prompt tokens in flight (about a third of A's cache on an H100, less on an H200) fill about
    half as much of B's."""
    run = llmperf.ab(Workload.fixed(input_tokens=4096, output_tokens=256, num_requests=128,
                                    concurrency=32, warmup_requests=4),
                     a=LLAMA_8B, b=LLAMA_8B_FP8_KV, pairs=2)
    used_a = run.a.server_metrics["kv_cache_usage_max"]
    used_b = run.b.server_metrics["kv_cache_usage_max"]
    assert used_a > 0
    assert used_b / used_a < FP8_KV_USAGE_RATIO


@pytest.mark.gpus(8)
@pytest.mark.parametrize("profile", ["chat", "classification", "code-generation"])
def test_eight_copies_beat_tensor_parallel_8(llmperf, profile):
    """The same 8 GPUs two ways: Llama 3.1 8B at TP=1 x DP=8 (B) against TP=8 (A), at 128
    virtual users: the Azure study's 4.2x / 5.2x / 1.9x, a third of each gain kept."""
    run = llmperf.ab(Workload.profile(profile, num_requests=256, concurrency=VIRTUAL_USERS,
                                      warmup_requests=16),
                     a=LLAMA_8B_TP8, b=LLAMA_8B_DP8, pairs=2)
    assert run.median("total_throughput_tok_s") > EIGHT_COPIES_OVER_TP8[profile]


@pytest.mark.engine(LLAMA_8B)
def test_chat_conversations(llmperf):
    """128 four-turn chats of the chat profile's sizes, 64 at a time, no think time (as
    inference-benchmarker's users): each turn carries the server's own earlier answers, so the
    prefix cache serves all but the new message."""
    result = llmperf.run(Workload.conversations(sessions=VIRTUAL_USERS, turns=4,
                                                input_tokens=CHAT_TURN, output_tokens=CHAT_ANSWER,
                                                concurrency=VIRTUAL_USERS // 2))
    assert result.completed == VIRTUAL_USERS * 4
    assert list(result.by_turn) == ["1", "2", "3", "4"]
    assert result.server_metrics["prefix_cache_hit_rate"] > CHAT_HIT_RATE_FLOOR


def _first_block_share(path: Path) -> float:
    """Prompt tokens in the first block, which every request of a Mooncake conversation trace
    shares, of all requests but the first: what any working prefix cache serves, however little
    else of the trace it can hold (most of its other reuse is 45 s old or more)."""
    rows = read_trace(path, "mooncake")
    shared = sum(min(MOONCAKE_BLOCK_TOKENS, row.input_tokens) for row in rows[1:])
    return shared / sum(row.input_tokens for row in rows)


@pytest.mark.engine(LLAMA_8B)
def test_mooncake_trace_replay(llmperf):
    """Two minutes of a Mooncake-style conversation trace at its own pace (3.4 requests/s,
    prompts up to 16k tokens): every request is sent on time (the client's own limit, 10 ms at
    p99) and the shared first block comes from the prefix cache (four fifths of its share)."""
    rows = len(read_trace(MOONCAKE_TRACE, "mooncake"))
    result = llmperf.run(Workload.trace(MOONCAKE_TRACE, format="mooncake", warmup_requests=8))
    assert result.completed == rows
    assert result.queue_s.p99 < 0.010
    floor = 0.8 * _first_block_share(MOONCAKE_TRACE)
    assert result.server_metrics["prefix_cache_hit_rate"] > floor


@pytest.mark.engine(LLAMA_8B)
def test_offline_throughput(llmperf):
    """320 prompts at once, as Lambda ran (Lambda); 1,024 tokens in and out are ours. Gated
    against the baseline only: Lambda's 3,400 output tok/s is an FP8 model served online."""
    result = llmperf.offline(Workload.fixed(input_tokens=1024, output_tokens=1024,
                                            num_requests=320, rate=float("inf")))
    assert result.length_mismatches == 0


# Speculative decoding at a pinned acceptance (docs/gpu-suites.md: no public source gives a
# speedup at a pinned acceptance, so only the self-check is asserted; vLLM pull request 40662
# read a 2.6 pin back as 2.61). The CPU build cannot serve the pin: suites/test_cpu_speculative.py.
LLAMA_8B_PINNED = LLAMA_8B.replace(speculative_config=pinned_acceptance(acceptance_length=2.5))


def test_speculation_at_a_pinned_acceptance(llmperf):
    run = llmperf.ab(Workload.fixed(input_tokens=1024, output_tokens=512, num_requests=64,
                                    concurrency=16, warmup_requests=4),
                     a=LLAMA_8B, b=LLAMA_8B_PINNED, pairs=2)
    run.b.expect_acceptance()  # within 0.1 tokens of 2.5, over every B run
    # B/A TPOT p50 is in the run file's A/B entry, not asserted: no published target.


# LoRA (docs/gpu-suites.md: no publication gives a number these engines could be held to): four
# random rank-16 adapters on q, k, v and o, two slots, so batches swap; each adapter's TTFT and
# TPOT rows beside the base model's, gated against the machine's own baseline. Written inside the
# project (.llmperf/ is not committed), so the engine's identity is the same on every runner.
LORA_DIR = MODELS.parent.parent / ".llmperf" / "lora-8b"
LORA_NAMES = ("a", "b", "c", "d")
LLAMA_8B_LORA = LLAMA_8B.replace(
    lora_modules={name: str(LORA_DIR / name) for name in LORA_NAMES}, max_loras=2,
    max_lora_rank=16)


@pytest.fixture(scope="module")
def lora_adapters():
    """The adapters, written before their engine starts (about 27 MB each in float16)."""
    for seed, name in enumerate(LORA_NAMES):
        if not (LORA_DIR / name / "adapter_model.safetensors").is_file():
            write_random_adapter(MODELS / "llama-3.1-8b", LORA_DIR / name, rank=16, seed=seed,
                                 target_modules=("q_proj", "k_proj", "v_proj", "o_proj"))


@pytest.mark.engine(LLAMA_8B_LORA)
def test_lora_adapters_beside_the_base_model(llmperf, lora_adapters):
    result = llmperf.run(Workload.lora(dict.fromkeys(LORA_NAMES, 1), base=1, input_tokens=1024,
                                       output_tokens=256, num_requests=500, concurrency=64))
    assert result.completed == 500, result.first_errors()
    assert sorted(result.by_adapter) == ["a", "b", "base", "c", "d"]


# Structured outputs (docs/gpu-suites.md: no publication gives a number for grammar-constrained
# serving on these engines, so none is asserted): 32 distinct schemas compiled while 32 requests
# are in flight, and two grammars; every output checked, each spec's first request (compiled
# cold) timed apart from the rest, all gated against the runner's own baseline.
GRAMMARS = ['root ::= ("approve" | "reject" | "escalate") ": " [a-z ]{1,40} "."',
            'root ::= "{" [0-9]{1,3} ("," [0-9]{1,3}){0,7} "}"']


@pytest.mark.engine(LLAMA_8B_STRUCTURED)
def test_structured_outputs_under_load(llmperf):
    schemas = llmperf.run(Workload.structured("json", distinct_schemas(32), num_requests=512,
                                              input_tokens=512, max_tokens=64, concurrency=32,
                                              warmup_requests=0))
    assert schemas.completed == 512, schemas.first_errors()
    assert schemas.structured_outputs["invalid"] == 0
    assert schemas.structured_outputs["cold"]["requests"] == 32
    grammars = llmperf.run(Workload.structured("grammar", GRAMMARS, num_requests=256,
                                               input_tokens=512, max_tokens=64, concurrency=32,
                                               warmup_requests=0))
    assert grammars.completed == 256, grammars.first_errors()
    assert grammars.structured_outputs["invalid"] == 0
