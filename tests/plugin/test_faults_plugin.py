"""Bad files and missing GPUs as users meet them: the test that uses them fails with one line, no
traceback, and no engine is started for it (no vLLM needed)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO

ARCH = REPO / "suites" / "models" / "tiny-llama-arch"  # config.json only: token-id prompts

SUITE = """
import pytest
from pytest_llmperf import Engine, Workload

@pytest.mark.engine(Engine(model={model!r}{engine_extra}))
def test_x(llmperf):
    llmperf.run({workload})
"""
FIXED = "Workload.fixed(input_tokens=8, output_tokens=4, num_requests=2, concurrency=1)"


def run_suite(pytester: pytest.Pytester, *args: str, model=str(ARCH), engine_extra="",
              workload=FIXED) -> pytest.RunResult:
    pytester.makepyfile(test_suite=SUITE.format(model=model, engine_extra=engine_extra,
                                                workload=workload))
    result = pytester.runpytest("-p", "no:cacheprovider", "--llmperf-log-dir",
                                str(pytester.path / "logs"), *args)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "Traceback" not in out and "raise " not in out, out
    assert not (pytester.path / "logs").exists(), "no engine was started"
    return result


def failure_line(result: pytest.RunResult) -> str:
    """The test's failure text: the line under its header in the FAILURES section."""
    lines = result.stdout.lines
    at = next(i for i, line in enumerate(lines) if line.startswith("___") and "test_x" in line)
    return lines[at + 1]


def test_a_dataset_without_output_lengths(pytester: pytest.Pytester):
    data = pytester.path / "conversations.json"
    data.write_text(json.dumps([{"conversations": [{"role": "user", "content": "hello"}]}]))
    result = run_suite(pytester, workload=f"Workload.dataset({str(data)!r}, num_requests=2, "
                                          "concurrency=1)")
    assert failure_line(result) == (
        f"{data}: its records give no output length (inference-benchmarker conversations do "
        f"not); pass one: Workload.dataset({str(data)!r}, output_tokens=N, ...)")


def test_a_model_config_without_vocab_size(pytester: pytest.Pytester):
    model = pytester.path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    result = run_suite(pytester, model=str(model))
    assert failure_line(result).startswith(f'{model}/config.json: no "vocab_size" (a whole '
                                           "number >= 1")


def test_a_model_with_neither_tokenizer_nor_config(pytester: pytest.Pytester):
    result = run_suite(pytester, model="meta-llama/Llama-3.1-8B-Instruct")
    assert failure_line(result) == (
        "meta-llama/Llama-3.1-8B-Instruct: no tokenizer.json; point at a local model directory "
        "that has one (e.g. save it there with transformers' AutoTokenizer.save_pretrained)")


def test_an_engine_needing_more_gpus_than_the_machine_has(pytester: pytest.Pytester):
    result = run_suite(pytester, "--llmperf-hardware", "h100:1",
                       engine_extra=", tensor_parallel_size=2")
    assert failure_line(result) == "an engine needs 2 GPUs; this process sees 1 (0)"
