"""The CPU suite, engine configurations: the source studies' knobs, started on real vLLM.

The GPU suites ask whether TP=8 beats eight TP=1 copies, what FP8 buys, whether speculative
decoding pays and what the scheduler's batch limits do (docs/published-numbers.md). These are the
same configurations on the CPU engine, so each one is known to start, serve and be measured
before a GPU night depends on it (docs/cpu-engine.md, "Engine configurations", has the numbers):

- tensor, pipeline and data parallel over the machine's two cores, one rank per core
  (`VLLM_CPU_OMP_THREADS_BIND` takes one core list per rank, separated by `|`). Two ranks and the
  client share two cores, so the client self-check only warns here.
- ngram speculative decoding (prompt lookup: no draft model), with vLLM's acceptance counters;
- chunked prefill on against off, and 512 against 2048 batched tokens, as paired A/B tests on
  long prompts (the classification profile);
- compiled mode (`enforce_eager=False`) once, through the pipeline-parallel engine: vLLM 0.32's
  CPU backend only runs pipeline parallel compiled (docs/cpu-engine.md).

Each test starts its own engines (about 22 s each on 2 cores; 4 minutes for the file), so the
file is `nightly`: `pytest -m cpu suites/ --llmperf-nightly` runs it, the quick main job leaves
it out, and tests/integration/test_engine_configs_real.py runs it (part in CI, the rest in the
project's nightly job).
"""

import pytest

from pytest_llmperf import SLO, Workload
from suites.tiny import CPU_GATED, CPU_TOLERANCE, TINY_CPU

pytestmark = [pytest.mark.cpu, pytest.mark.nightly,
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE, gate=CPU_GATED, client_check="warn")]

ONE_RANK_PER_CORE = {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}
TP2 = TINY_CPU.replace(tensor_parallel_size=2, env=ONE_RANK_PER_CORE)
PP2_COMPILED = TINY_CPU.replace(pipeline_parallel_size=2, enforce_eager=False,
                                env=ONE_RANK_PER_CORE)
DP2 = TINY_CPU.replace(data_parallel_size=2, env=ONE_RANK_PER_CORE)
# Prompt lookup drafts 3 tokens from the last 2-4 tokens seen. The tiny model's random weights
# under greedy decoding repeat one token, so every draft is right: the acceptance path is
# exercised at its limit, not a realistic rate.
NGRAM = TINY_CPU.replace(speculative_config={"method": "ngram", "num_speculative_tokens": 3,
                                             "prompt_lookup_min": 2, "prompt_lookup_max": 4})
# The server sends a chunk every 4 tokens (vLLM's --stream-interval): chunks of several tokens
# without speculative decoding.
STREAM_EVERY_4 = TINY_CPU.replace(extra_args={"stream-interval": 4})
# vLLM needs max_num_batched_tokens >= max_model_len (2048) when chunked prefill is off. Prefix
# caching off on every side: the classification profile's prompts share documents, and an engine
# that served another test first starts with them cached (a CI run saw hit rates of 95% on one
# side and 66% on the other), which is no batching difference.
BATCHED_2048 = TINY_CPU.replace(max_num_batched_tokens=2048, enable_chunked_prefill=True,
                                enable_prefix_caching=False)

SMALL = Workload.fixed(input_tokens=256, output_tokens=32, num_requests=16, concurrency=4,
                       warmup_requests=2)
# Long prompts (800-1,200 tokens), a few output tokens: prefill is most of the work.
LONG_PROMPTS = Workload.profile("classification", scale=0.1, num_requests=24, concurrency=8,
                                warmup_requests=2)


@pytest.mark.parametrize("engine", [TP2, PP2_COMPILED, DP2], ids=["tp2", "pp2-compiled", "dp2"])
def test_parallel_engine_serves_every_request(llmperf, engine):
    result = llmperf.run(SMALL, engine=engine)
    assert result.completed == 16
    assert result.length_mismatches == 0
    # Every rank's tokens are counted (the server metrics sum vLLM's per-engine label sets).
    assert result.server_metrics["generation_tokens"] >= 16 * 32


def test_ngram_speculative_decoding_accepts_drafts(llmperf):
    result = llmperf.run(Workload.fixed(input_tokens=64, output_tokens=128, num_requests=8,
                                        concurrency=2, warmup_requests=1), engine=NGRAM,
                         slo=SLO(min={"server:spec_decode_acceptance_rate": 0.5}))
    assert result.completed == 8
    server = result.server_metrics
    assert server["spec_decode_draft_tokens"] > 0
    assert server["spec_decode_acceptance_rate"] > 0.5
    assert server["spec_decode_mean_accepted_length"] > 2.0
    # A chunk carries several accepted tokens: ITL is per token, the raw chunk gap longer. Means,
    # not medians: a client that reads late gets chunks in bursts, and a burst's gaps are 0 (a
    # median of 0 for both, seen on a busy 2-core runner); the means still divide one sum of
    # gaps by the tokens and by the chunks.
    assert result.itl_s.mean < result.icl_s.mean


def test_stream_interval_chunks_are_counted_per_token(llmperf):
    """Every chunk carries 4 tokens: ITL (per token) is about a quarter of the raw chunk gap
    (ICL) and its mean is TPOT, as for the multi-token chunks of speculative decoding."""
    result = llmperf.run(Workload.fixed(input_tokens=64, output_tokens=129, num_requests=8,
                                        concurrency=2, warmup_requests=1),
                         engine=STREAM_EVERY_4)
    assert result.completed == 8
    assert result.itl_s.mean < 0.5 * result.icl_s.mean  # means: see the test above
    assert result.itl_s.mean == pytest.approx(result.tpot_s.mean, rel=0.1)


def test_chunked_prefill_on_against_off(llmperf):
    """On (B) against off (A) at 2048 batched tokens: with 800-1,200-token prompts a step holds
    one or two whole prompts either way, so chunking changes less here than the noise of two
    shared cores (B/A TTFT p50 pairs from 0.30 to 1.34, median 0.71, on the 2-core machine).
    The band fails only if one side breaks."""
    run = llmperf.ab(LONG_PROMPTS, a=BATCHED_2048.replace(enable_chunked_prefill=False),
                     b=BATCHED_2048, pairs=4)
    assert 0.4 < run.median("ttft_s.p50") < 2.5


def test_512_batched_tokens_against_2048(llmperf):
    """512 (B) against 2048 (A) batched tokens per step: B splits each long prompt over two or
    three steps, so no step carries two whole prefills and the decode tokens that share a step
    wait less; the first token comes later. On the 2-core machine: B/A TPOT p50 0.14-0.51 over
    4 ABBA pairs (median 0.32), TTFT p50 median 1.38."""
    run = llmperf.ab(LONG_PROMPTS, a=BATCHED_2048,
                     b=BATCHED_2048.replace(max_num_batched_tokens=512), pairs=4)
    assert run.median("tpot_s.p50") < 1.0
