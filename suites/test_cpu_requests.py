"""The CPU suite, serving paths that work per request, on the suite's one engine (no engine of
their own): the prefix cache in a stated state, structured outputs, and interference probes. Each
sends 8-40 requests (docs/testing.md, "Where the main job's time goes")."""

from dataclasses import replace

import pytest

from pytest_llmperf import Workload
from pytest_llmperf.workloads.structured import distinct_schemas
from suites.tiny import CPU_GATED, CPU_TOLERANCE, TINY_CPU

pytestmark = [pytest.mark.cpu, pytest.mark.engine(TINY_CPU),
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE, gate=CPU_GATED)]


def test_a_cold_prefix_cache_is_emptied_before_measuring(llmperf):
    """The same 8 prompts three times: warm (the default) they fill the cache, cold they find it
    empty (the plugin reset it after the 2 warm-up requests), warm again they find what the cold
    run left. vLLM's CPU backend caches 128-token blocks: 3 of a 512-token prompt's 4 can hit
    (its last token has no KV)."""
    warm = Workload.fixed(input_tokens=512, output_tokens=8, num_requests=8, concurrency=4,
                          seed=52, warmup_requests=2, name="cache-warm")
    llmperf.run(warm)
    cold = llmperf.run(replace(warm, prefix_cache="cold", name="cache-cold"))
    again = llmperf.run(replace(warm, name="cache-warm-again"))
    assert cold.workload["prefix_cache"] == "cold"
    assert cold.server_metrics["prefix_cache_hit_rate"] == 0.0
    assert again.server_metrics["prefix_cache_hit_rate"] >= 0.7


def test_json_schema_outputs_are_checked_and_cold_grammars_timed_apart(llmperf):
    """16 requests over 4 distinct JSON schemas (strings of an enum of their own: a random-weight
    model cannot fill an object without whitespace, workloads/structured.py): each output parsed
    and checked against its schema; the TTFT of each schema's first request (grammar compiled
    cold) apart from the other 12 (compiled grammar cached). One request at a time, so a cold
    request's TTFT is its own compilation's, not its neighbours'."""
    result = llmperf.run(Workload.structured("json", distinct_schemas(4), num_requests=16,
                                             input_tokens=32, max_tokens=64, concurrency=1))
    assert result.completed == 16, result.first_errors()
    found = result.structured_outputs
    assert (found["specs"], found["invalid"]) == (4, 0)
    assert (found["cold"]["requests"], found["warm"]["requests"]) == (4, 12)


@pytest.mark.parametrize("kind, specs", [
    ("regex", [r"[a-z]{3,8}", r"[0-9]{2}-[0-9]{2}"]),
    ("choice", [["alpha", "beta", "gamma"], ["yes", "no"]]),
    # bounded: a random-weight model ends a grammar only where the grammar ends it ([a-c]+ ran
    # to max_tokens without its "." on this engine)
    ("grammar", ['root ::= ("yes" | "no") "-" [0-9] [0-9]?', 'root ::= [a-c]{1,6} "."']),
])
def test_regex_choice_and_grammar_outputs_are_checked(llmperf, kind, specs):
    """8 requests over 2 specs of a kind, one at a time; a grammar is EBNF as xgrammar (vLLM's
    default backend) reads it, each output checked with xgrammar's matcher."""
    result = llmperf.run(Workload.structured(kind, specs, num_requests=8, input_tokens=32,
                                             max_tokens=16, concurrency=1))
    assert result.completed == 8, result.first_errors()
    assert result.structured_outputs["invalid"] == 0


def test_probes_beside_a_load_are_measured_apart(llmperf):
    """A Poisson load of 256-token prompts at 6 requests/s for 5 s, and beside it a probe of 8
    tokens in and 8 out every half second (`vllm bench serve --probe-request-rate`, with a TPOT
    of its own): the probes are the row "@probes", gated apart against their own table; the
    load's numbers leave them out."""
    load = Workload.fixed(input_tokens=256, output_tokens=32, num_requests=30, rate=6.0, seed=7,
                          warmup_requests=2)
    result = llmperf.run(load.with_probes(rate=2.0))
    assert result.completed == 30 and result.output_tokens == 30 * 32, result.first_errors()
    probes = result.probes
    assert probes.completed >= 8, probes.first_errors()
    assert probes.output_tokens == probes.completed * 8
    assert probes.key == "test_probes_beside_a_load_are_measured_apart@probes"
