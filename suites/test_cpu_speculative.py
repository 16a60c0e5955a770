"""The CPU suite, speculative decoding at a pinned acceptance.

A speculative-decoding test means something only at a known acceptance: vLLM's synthetic
rejection sampling pins one on any model (`speculative_config=pinned_acceptance(...)`,
pytest_llmperf/engines/speculative.py), and `result.expect_acceptance()` holds the engine's own
counters to it. vLLM 0.32.0's CPU build cannot serve that pin (its C++ rejection kernels refuse
synthetic mode: docs/workloads.md, "Speculative decoding at a pinned acceptance"), so on the CPU:

- the pin is refused before its engine starts, in one line; when a CPU build gains synthetic
  sampling this test fails, and the pinned engine can serve here instead;
- the n-gram drafter holds a golden acceptance length, as InferenceX pins one for a real
  drafter: the tiny model's greedy output repeats one token, so prompt lookup drafts the right
  tokens and the length is set by where drafting starts and ends in each request, not by chance
  (metrics/spec_pin.py's check, with `length=`); in an A/B against the same engine without
  speculation, B/A TPOT says what the accepted tokens buy.

Each test starts engines of its own (two, about 50 s on 2 cores), so the file is `nightly`.
"""

import pytest

from pytest_llmperf import Workload
from pytest_llmperf.engines.speculative import pinned_acceptance
from suites.tiny import CPU_GATED, CPU_TOLERANCE, TINY_CPU

pytestmark = [pytest.mark.cpu, pytest.mark.nightly,
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE, gate=CPU_GATED, client_check="warn")]

# suites/test_cpu_engine_configs.py's drafter: 3 tokens from the last 2-4 seen.
NGRAM = TINY_CPU.replace(speculative_config={"method": "ngram", "num_speculative_tokens": 3,
                                             "prompt_lookup_min": 2, "prompt_lookup_max": 4})
PINNED = TINY_CPU.replace(speculative_config=pinned_acceptance(acceptance_length=2.5))
# 8 requests of 128 tokens: about 250 drafts a run, 500 over side B's two runs.
DRAFTING = Workload.fixed(input_tokens=64, output_tokens=128, num_requests=8, concurrency=2,
                          warmup_requests=1)
# Measured, the same in every run on the 2-core machine: per request 32 drafts, 30 of 3 tokens
# and 2 of 2, every token accepted (1 + 94/32). The tolerance allows a changed output here and
# there (batching can move a float); a drafter or sampler that accepts less fails it.
GOLDEN_LENGTH = 3.9375
GOLDEN_TOLERANCE = 0.05


def test_a_synthetic_pin_is_refused_on_the_cpu_build_before_its_engine_starts(llmperf):
    with pytest.raises(pytest.fail.Exception) as refused:
        llmperf.run(DRAFTING, engine=PINNED)
    assert str(refused.value).endswith(
        "'s CPU build cannot sample synthetically (its engine starts, then dies at the first "
        "draft: 'Synthetic acceptance not supported with CPU sampling', "
        "vllm/utils/cpu_triton_utils.py): pin the acceptance on a GPU engine "
        "(docs/gpu-suites.md), or on the CPU drop rejection_sample_method and hold the "
        "drafter's own length with result.expect_acceptance(length=...)")


def test_ngram_holds_its_golden_acceptance_against_no_speculation(llmperf):
    """NGRAM (B) against TINY_CPU (A): B's counters hold the golden length over both its runs,
    and B/A TPOT p50 is what the drafts buy."""
    run = llmperf.ab(DRAFTING, a=TINY_CPU, b=NGRAM, pairs=2)
    assert run.b.expect_acceptance(length=GOLDEN_LENGTH, tolerance=GOLDEN_TOLERANCE) > 3.5
    assert run.median("tpot_s.p50") < 0.8
