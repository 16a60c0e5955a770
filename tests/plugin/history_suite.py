"""A one-test suite for the results store's plugin tests, its measurements injected as
gate_suite.py injects them (FAKE_LIMITED makes a run one the client limited), and `run`, one
session of it as on an ephemeral runner."""

from __future__ import annotations

import shutil

from tests.plugin.gate_suite import CONFTEST as GATE_CONFTEST

# gate_suite.py's injected measurements; FAKE_LIMITED makes a run one the client limited.
INJECTED = """        return ledger.add(id, result)
"""
assert INJECTED in GATE_CONFTEST
CONFTEST = GATE_CONFTEST.replace(INJECTED, """        record = ledger.add(id, result)
        if os.environ.get("FAKE_LIMITED"):
            from pytest_llmperf.verdict.status import Status
            record.status = Status.CLIENT_LIMITED
        return record
""")
SUITE = '''
import pytest
from pytest_llmperf import Engine, Workload

pytestmark = pytest.mark.engine(Engine(model="m", max_num_seqs=32))

def test_a(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=10, num_requests=20,
                               concurrency=1, name="a"))
'''
# Run-to-run noise of about 2%, the same every time the tests run: a series with no change.
NOISE = [1.0, 1.02, 0.99, 1.01, 0.98, 1.0, 1.02, 0.99, 1.01, 0.98, 1.0, 1.01]


def run(suite, monkeypatch, tpot: float, *args: str):
    """One session, as on an ephemeral runner: this machine's first-run baselines are gone
    (every run is a first run for the baseline gate), only the store remembers."""
    shutil.rmtree(suite.path / ".llmperf" / "baselines", ignore_errors=True)
    monkeypatch.setenv("FAKE_a", f"0.1,{tpot}")
    return suite.runpytest("-rfE", *args)
