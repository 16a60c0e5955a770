"""The CPU suite, LoRA adapters: one engine serving three adapters of the tiny Llama
(suites/models/tiny-llama-lora, made by scripts/make_tiny_lora.py) with room for two at a time
(`max_loras=2`), so traffic split across all three makes vLLM swap adapters while it runs.

- a traffic split with a weight per adapter and a share for the base model: every request
  served, each adapter's TTFT and TPOT a row of its own (-v lines, the run file's
  "by_adapter", gate names "lora:<adapter>:ttft_s.p50");
- adapters against the base model on the same engine, paired in ABBA order (the pattern of
  suites/test_cpu_ab.py, two workloads instead of two engines);
- a split naming an adapter the engine does not serve: one line before anything is sent.

The engine is one of its own (about 50 s to start here), so the file is `nightly`
(docs/testing.md).
"""

import pytest

from pytest_llmperf import Workload
from pytest_llmperf.verdict.paired_ratios import abba_order, paired_ratios
from suites.tiny import CPU_GATED, CPU_TOLERANCE, MODELS, TINY_CPU

pytestmark = [pytest.mark.cpu, pytest.mark.nightly,
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE, gate=CPU_GATED,
                                  client_check="warn")]

ADAPTERS = ("tiny-lora-a", "tiny-lora-b", "tiny-lora-c")
# Two adapter slots for three adapters: a batch holds at most two, the third waits for a swap.
# vLLM keeps as many in CPU memory as slots unless told (max_cpu_loras defaults to max_loras,
# vllm/config/lora.py), so a swapped-out adapter is read from disk again.
LORA_CPU = TINY_CPU.replace(
    lora_modules={name: str(MODELS / "tiny-llama-lora" / name) for name in ADAPTERS},
    max_loras=2, max_lora_rank=16)

# 24 requests: 8 to the base model, 8 to tiny-lora-a, 4 each to b and c, in a seeded order.
# No warm-up: the counts are exact over every request built, warm-up included.
SPLIT = Workload.lora({"tiny-lora-a": 2, "tiny-lora-b": 1, "tiny-lora-c": 1}, base=2,
                      input_tokens=64, output_tokens=32, num_requests=24, concurrency=4)

# The A/B: the same requests, all to the base model (A) or spread over the three adapters (B).
AB_LOAD = {"input_tokens": 64, "output_tokens": 32, "num_requests": 18, "concurrency": 4}
BASE_ONLY = Workload.fixed(name="lora-engine-base-only", **AB_LOAD)
ADAPTERS_ONLY = Workload.lora(dict.fromkeys(ADAPTERS, 1), name="lora-engine-adapters-only",
                              **AB_LOAD)


def test_traffic_split_across_adapters_reports_each_apart(llmperf):
    result = llmperf.run(SPLIT, engine=LORA_CPU)
    rows = result.by_adapter
    assert {name: row["requests"] for name, row in rows.items()} == {
        "base": 8, "tiny-lora-a": 8, "tiny-lora-b": 4, "tiny-lora-c": 4}
    assert all(row["failed"] == 0 for row in rows.values()), rows
    assert result.failed == 0
    assert result.length_mismatches == 0  # every adapter generated what was forced
    for name in ("base", *ADAPTERS):  # each row's numbers are gate names too
        assert result.value(f"lora:{name}:ttft_s.p50") == rows[name]["ttft_s.p50"] > 0
        assert result.value(f"lora:{name}:tpot_s.p50") == rows[name]["tpot_s.p50"] > 0


def test_adapters_against_the_base_model_on_one_engine(llmperf):
    """ABBA, two pairs: the base model's requests (A) against the same requests spread over
    three adapters (B), on one engine with two adapter slots. B pays the adapters' extra
    matrix products and their swaps."""
    runs = {"A": [], "B": []}
    for side in abba_order(2):
        workload = BASE_ONLY if side == "A" else ADAPTERS_ONLY
        runs[side].append(llmperf.run(workload, engine=LORA_CPU).metrics.flat())
    ratios = paired_ratios(runs["A"], runs["B"], ["tpot_s.p50", "output_throughput_tok_s"])
    assert all(run["failed"] == 0 for run in runs["A"] + runs["B"])
    print(f"LoRA A/B, B/A per pair: TPOT p50 {ratios['tpot_s.p50'].ratios}, output "
          f"throughput {ratios['output_throughput_tok_s'].ratios}")
    # Measured under other agents' load (docs/workloads.md, "LoRA adapters"): TPOT 1.79 and
    # 1.71, then 1.62 and 1.00 (a disturbed pair); throughput 0.48 and 0.37, then 0.52 and
    # 0.18. The bounds sit inside both, and fail if the adapters cost nothing (LoRA off, or
    # every request served by the base model).
    assert ratios["tpot_s.p50"].median > 1.1
    assert ratios["output_throughput_tok_s"].median < 0.8


def test_a_split_naming_an_adapter_the_engine_does_not_serve_is_one_line(llmperf):
    stray = Workload.lora({"tiny-lora-a": 1, "tiny-lora-d": 1}, input_tokens=8,
                          output_tokens=4, num_requests=2, concurrency=1)
    with pytest.raises(pytest.fail.Exception) as raised:  # the plugin's one-line failure
        llmperf.run(stray, engine=LORA_CPU)
    assert str(raised.value) == (
        "Workload.lora: adapter 'tiny-lora-d' is not served by engine "
        f"{LORA_CPU.label()!r}: it serves tiny-lora-a, tiny-lora-b, tiny-lora-c; add it to "
        "the Engine's lora_modules or drop it from the split")
