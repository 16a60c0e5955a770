"""A pinned speculative acceptance as users meet it, against the mock server behind
--llmperf-endpoint (pytest_llmperf/clientbench/mockserver.py), whose /metrics has no spec-decode
counters: the -v line says the pin measured nothing, `result.expect_acceptance()` fails the test
with its one line, and the run file holds the pin in the engine. The real engine's paths are
suites/test_cpu_speculative.py's."""

from __future__ import annotations

import json

import httpcore  # noqa: F401  (imported before any in-process run: test_deployment_plugin.py)

from tests.conftest import REPO
from tests.plugin.mock_endpoint import CALM, mock_fixture

ARCH = REPO / "suites" / "models" / "tiny-llama-arch"
SUITE = """
import pytest
from pytest_llmperf import Engine, Workload
from pytest_llmperf.engines.speculative import pinned_acceptance

pytestmark = pytest.mark.engine(
    Engine(model={model!r}, speculative_config=pinned_acceptance(acceptance_length=2.5)))

def test_pinned(llmperf):
    result = llmperf.run(Workload.fixed(input_tokens=8, output_tokens=4, num_requests=4,
                                        concurrency=2))
    result.expect_acceptance()
"""


mock = mock_fixture(0.005)


def test_a_pin_the_server_did_not_count_fails_with_its_line(pytester, mock):
    pytester.makepyfile(test_suite=SUITE.format(model=str(ARCH)))
    result = pytester.runpytest("-p", "no:cacheprovider", "-v", "--llmperf-endpoint", mock.url,
                                "--llmperf-hardware", "cpu", "--llmperf-model", "mock",
                                "--llmperf-json", "run.json", *CALM)
    result.assert_outcomes(failed=1)
    output = " ".join(result.stdout.str().split())
    assert ("AssertionError: speculative decoding: pinned acceptance length 2.50 "
            "(synthetic_acceptance_length 2.5 of 3), measured none: the engine drafted nothing "
            "in the measured runs (no speculative decoding, no spec_decode counters on its "
            "/metrics, or a drafter that found nothing to propose)") in output
    assert ("speculative decoding pinned (synthetic_acceptance_length 2.5 of 3): acceptance "
            "length 2.50, measured none (no drafts)") in output
    document = json.loads((pytester.path / "run.json").read_text())
    (entry,) = document["llmperf"]["results"]
    assert entry["engine"]["speculative_config"] == {
        "method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2,
        "prompt_lookup_max": 4, "rejection_sample_method": "synthetic",
        "synthetic_acceptance_length": 2.5}
