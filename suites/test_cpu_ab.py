"""The CPU suite, paired A/B: relative results that hold on any machine of a class, measured
by alternating two engines (ABBA) so the machine's drift cancels in each pair's ratio.

The seeds' GPU results of this kind (FP8 against BF16 on code generation, TP=1 copies against
TP=8, docs/published-numbers.md) need a GPU; these are their CPU counterparts: the scheduler's
batch limit, and prefix caching on a workload built for it. Ratios are B/A; thresholds sit well
inside what was measured on the 2-core CI machine (docs/ab.md), so they hold under its noise
and still fail if batching or the prefix cache stop working.
"""

import pytest

from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

pytestmark = pytest.mark.cpu


@pytest.mark.nightly  # two engines of their own: ~50 s
def test_batching_16_sequences_beats_one_at_a_time(llmperf):
    """max_num_seqs 16 (B) against 1 (A) under 16 concurrent requests: B batches the decode
    steps, A serves the requests one by one."""
    run = llmperf.ab(Workload.fixed(input_tokens=32, output_tokens=32, num_requests=32,
                                    concurrency=16, warmup_requests=2),
                     a=TINY_CPU.replace(max_num_seqs=1), b=TINY_CPU.replace(max_num_seqs=16),
                     pairs=2)
    assert run.median("output_throughput_tok_s") > 2.0
    assert run.median("ttft_s.p50") < 0.5


@pytest.mark.nightly  # two engines of their own: ~50 s
def test_prefix_caching_cuts_time_to_first_token(llmperf):
    """Prefix caching on (B) against off (A) on 4 prompts' worth of 1,024-token prefixes, each
    asked several times: B computes each prefix once."""
    run = llmperf.ab(Workload.shared_prefix(num_prefixes=4, prefix_tokens=1024, suffix_tokens=16,
                                            output_tokens=4, num_requests=24, concurrency=2,
                                            warmup_requests=0),
                     a=TINY_CPU.replace(enable_prefix_caching=False),
                     b=TINY_CPU.replace(enable_prefix_caching=True), pairs=2)
    assert run.median("ttft_s.p50") < 0.8


# Nightly since 2026-11-29 like the other two: side A's start and four runs, 80 s of a main job
# that was over its 10 minutes (docs/testing.md); the paired A/B on the real engine runs in CI
# (tests/integration/test_ab_real.py).
@pytest.mark.nightly
@pytest.mark.engine(TINY_CPU)  # runs while the suite's engine is up: only side A starts
def test_prefix_caching_serves_later_turns_of_a_conversation(llmperf):
    """Prefix caching on (B) against off (A) on 4 chats of 5 turns: with it, each turn's prompt
    but the new message comes from the cache, so the later turns start sooner. B is the suite's
    own TINY_CPU (vLLM caches prefixes unless told not to), so it starts no engine of its own."""
    run = llmperf.ab(Workload.conversations(sessions=4, turns=5, input_tokens=64,
                                            output_tokens=128, think_time_s=0.1),
                     a=TINY_CPU.replace(enable_prefix_caching=False), b=TINY_CPU, pairs=2)
    assert run.median("turn5:ttft_s.p50") < 0.9
