"""Under pytest-xdist on a CPU, worker N's engines compute on core N (mod the cores), so two
workers' engines never share a core: the engine environment the plugin hands each worker's
engines, read through the plugin's own hook in a real `-n 2` session. The real engines' ports and
cores are checked nightly (tests/integration/test_xdist_endpoint.py, two workers two engines)."""

from __future__ import annotations

import json
import os

import pytest

CONFTEST = """
import json, os

def pytest_sessionfinish(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        env = session.config.hook.pytest_llmperf_engine_env(config=session.config)  # firstresult
        with open(f"env-{worker}.json", "w") as out:
            json.dump(env, out)
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to tell apart")
def test_two_workers_bind_their_engines_to_two_cores(pytester: pytest.Pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_two="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider",
                                           "--llmperf-hardware", "cpu")
    result.assert_outcomes(passed=2)
    cores = sorted(os.sched_getaffinity(0))
    binds = {worker: json.loads((pytester.path / f"env-{worker}.json").read_text())
             for worker in ("gw0", "gw1")}
    assert binds == {"gw0": {"VLLM_CPU_OMP_THREADS_BIND": str(cores[0])},
                     "gw1": {"VLLM_CPU_OMP_THREADS_BIND": str(cores[1])}}


def test_a_plain_run_binds_nothing(pytester: pytest.Pytester, monkeypatch):
    # In-process: this session's own pytest-xdist worker name (CI's first step) must not leak in.
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    pytester.makeconftest(CONFTEST.replace('os.environ.get("PYTEST_XDIST_WORKER")', '"main"'))
    pytester.makepyfile(test_one="def test_a():\n    pass\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert json.loads((pytester.path / "env-main.json").read_text()) == {}
