"""The suite the real-engine A/B tests run (test_ab_real.py, test_ab_weaker_real.py): one test of
16 requests at concurrency 8 on an engine of 8 sequences (tests/integration/conftest.py's
`ab_suite` writes it)."""

SUITE = """
import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

pytestmark = pytest.mark.engine(TINY_CPU.replace(max_num_seqs=8))

def test_concurrent(llmperf):
    llmperf.run(Workload.fixed(input_tokens=32, output_tokens=16, num_requests=16,
                               concurrency=8, warmup_requests=2))
"""

