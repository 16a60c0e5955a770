"""The upgrade gate's A/B on the real CPU engine, as test_upgrade_gate_real.py and
test_inconclusive_real.py run it: a suite of one test whose model is named by its Hub id,
`acme/tiny-llama`, in an offline Hugging Face cache (tests/hub_cache.py), run with
`--llmperf-ab` and one side B."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO
from tests.hub_cache import tiny_llama_hub

SUITE = """
import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

pytestmark = pytest.mark.engine(TINY_CPU.replace(model="acme/tiny-llama", max_num_seqs=8))

def test_concurrent(llmperf):
    llmperf.run(Workload.fixed(input_tokens=32, output_tokens=16, num_requests=%d,
                               concurrency=4, warmup_requests=1))
"""


def prepared(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """`pytester` ready for run_ab: the project importable, HF_HOME the offline cache and
    HF_HUB_OFFLINE=1 in os.environ, which both engines' processes inherit."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    tiny_llama_hub(pytester.path / "hf-home", monkeypatch)
    return pytester


def run_ab(suite, side_b: dict, *args: str, requests: int = 16, timeout: int = 400):
    suite.makepyfile(test_ab_suite=SUITE % requests)
    return suite.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rfE", "--llmperf-summary", "full",
        "--llmperf-ab", json.dumps(side_b), "--llmperf-ab-pairs", "1",
        "--llmperf-ab-confirm-pairs", "0", "--llmperf-client-check", "warn",
        "--llmperf-json", "run.json", *args, timeout=timeout)


def flat(result) -> str:
    return " ".join(result.stdout.str().split())
