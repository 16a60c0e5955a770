"""An engine that will not start: one clear line, the log kept, nothing left running."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from pytest_llmperf.engines.server import EngineStartError, VllmServer
from suites.tiny import TINY_CPU
from tests.conftest import leftover_vllm_processes, requires_vllm

# What runs, not how fast: beside other tests in CI (tests/integration/conftest.py).
pytestmark = [requires_vllm, pytest.mark.shares_machine]

START_FAILURE_BUDGET_S = 120


def test_missing_model_path_fails_before_starting_vllm(tmp_path):
    engine = TINY_CPU.replace(model=str(tmp_path / "no-such-model"))
    with pytest.raises(EngineStartError) as info:
        VllmServer(engine, tmp_path).start()
    assert str(info.value) == (
        "vLLM engine 'no-such-model load=dummy len=2048 kv=512MiB eager=True': model path "
        f"{tmp_path}/no-such-model does not exist; point Engine(model=...) at a local model "
        "directory or a Hugging Face model id"
    )
    assert list(tmp_path.glob("vllm-*.log")) == []


# Nightly (docs/testing.md): the same refusal through the plugin, one vLLM start, is CI's
# (test_every_test_of_a_broken_engine_fails_fast_with_the_same_line checks this line too).
@pytest.mark.nightly
def test_model_vllm_rejects_fails_with_one_line_and_leaves_nothing(tmp_path):
    """A directory without config.json: vLLM itself starts, fails, and exits."""
    (tmp_path / "empty-model").mkdir()
    engine = TINY_CPU.replace(model=str(tmp_path / "empty-model"))
    began = time.monotonic()
    with pytest.raises(EngineStartError) as info:
        VllmServer(engine, tmp_path).start()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("vLLM engine 'empty-model load=dummy len=2048 kv=512MiB "
                              "eager=True' exited with code 1: ")
    log = re.search(r"\(full log: (\S+/vllm-\d+\.log)\)$", message)
    assert log and Path(log.group(1)).is_file(), message
    assert "ValidationError" in message, "the reason is vLLM's own error line"
    assert time.monotonic() - began < START_FAILURE_BUDGET_S
    assert leftover_vllm_processes() == []


def two_tests_of(engine: str) -> str:
    """A suite of two tests on one engine (a Python expression over TINY_CPU)."""
    return f"""
        import pytest
        from pytest_llmperf import Workload
        from suites.tiny import TINY_CPU

        pytestmark = pytest.mark.engine({engine})
        W = Workload.fixed(input_tokens=8, output_tokens=4, num_requests=2, concurrency=1)

        def test_one(llmperf):
            llmperf.run(W)

        def test_two(llmperf):
            llmperf.run(W)
    """


def test_every_test_of_a_broken_engine_fails_fast_with_the_same_line(pytester: pytest.Pytester):
    (pytester.path / "empty-model").mkdir()
    # The tokenizer is the tiny model's, so the prompts build and it is vLLM that refuses.
    pytester.makepyfile(two_tests_of(f'TINY_CPU.replace(model="{pytester.path}/empty-model", '
                                     'tokenizer=TINY_CPU.model)'))
    began = time.monotonic()
    result = pytester.runpytest("--llmperf-log-dir", str(pytester.path / "logs"))
    result.assert_outcomes(failed=2)
    errors = [line for line in result.stdout.lines if line.startswith("vLLM engine 'empty-model")]
    assert len(errors) == 2 and errors[0] == errors[1], result.stdout.str()
    assert errors[0].startswith("vLLM engine 'empty-model load=dummy len=2048 kv=512MiB "
                                "eager=True' exited with code 1: ")
    assert "ValidationError" in errors[0], "the reason is vLLM's own error line"
    assert re.search(r"\(full log: \S+/vllm-\d+\.log\)$", errors[0]), errors[0]
    assert "During handling" not in result.stdout.str()
    assert len(list((pytester.path / "logs").glob("vllm-*.log"))) == 1, "started once, not twice"
    assert time.monotonic() - began < START_FAILURE_BUDGET_S
    assert leftover_vllm_processes() == []


def test_a_start_that_never_gets_healthy_fails_every_test_of_its_engine_at_once(
        pytester: pytest.Pytester):
    pytester.makepyfile(two_tests_of("TINY_CPU"))
    began = time.monotonic()
    result = pytester.runpytest("--llmperf-log-dir", str(pytester.path / "logs"),
                                "--llmperf-startup-timeout", "3")
    result.assert_outcomes(failed=2)
    prefix = ("vLLM engine 'tiny-llama load=dummy len=2048 kv=512MiB eager=True' not healthy "
              "after 3 s (raise --llmperf-startup-timeout if the model is large): ")
    errors = [line for line in result.stdout.lines if line.startswith(prefix)]
    assert len(errors) == 2 and errors[0] == errors[1], result.stdout.str()
    assert re.search(r"\(full log: \S+/vllm-\d+\.log\)$", errors[0])
    assert len(list((pytester.path / "logs").glob("vllm-*.log"))) == 1, "started once"
    assert time.monotonic() - began < START_FAILURE_BUDGET_S
    assert leftover_vllm_processes() == []
