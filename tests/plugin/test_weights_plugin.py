"""Weights before the clock starts, as a user meets it: a test whose engine names a real-weight
Hub model says on the terminal, past pytest's capture, what became of its weights before the
engine's start (engines/weights.py); the CPU suite's engines (dummy weights) say nothing. The
engine's start itself is replaced here (no vLLM is started): the line comes before it."""

from __future__ import annotations

import pytest

from tests.hub_cache import tiny_llama_hub

CONFTEST = """
from pytest_llmperf.engines import pool
from pytest_llmperf.engines.errors import EngineStartError


class NoServer:
    def __init__(self, engine, log_dir, **kwargs):
        self.base_url, self.start_time_s, self.log_path = "http://127.0.0.1:9", None, None

    def start(self):
        raise EngineStartError("no engine is started in this test")


pool.EngineServer = NoServer
"""

SUITE = """
import pytest
from pytest_llmperf import Engine, Workload

@pytest.mark.engine(Engine(model="acme/tiny-llama", max_model_len=2048))
def test_real_weights(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=4, num_requests=2, concurrency=1))

@pytest.mark.engine(Engine(model="acme/tiny-llama", load_format="dummy"))
def test_dummy_weights(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=4, num_requests=2, concurrency=1))
"""


def test_offline_the_weights_line_is_on_the_terminal_before_the_start(pytester: pytest.Pytester,
                                                                      monkeypatch):
    cache = tiny_llama_hub(pytester.path / "hf-home", monkeypatch)  # HF_HUB_OFFLINE=1
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", "--llmperf-log-dir",
                                str(pytester.path / "logs"))
    result.assert_outcomes(failed=2)
    line = ("pytest-llmperf: HF_HUB_OFFLINE is set: the weights of acme/tiny-llama are not "
            f"fetched before its engine starts; it reads them from the Hugging Face cache {cache}")
    assert result.stdout.lines.count(line) == 1  # once, for the real-weight engine alone
    out = result.stdout.str()
    assert out.index(line) < out.index("no engine is started in this test")
