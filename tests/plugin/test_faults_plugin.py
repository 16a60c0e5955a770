"""Bad files and missing GPUs as users meet them: the test that uses them fails with one line, no
traceback, and no engine is started for it (no vLLM needed)."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import REPO
from tests.plugin.mock_endpoint import mock_fixture

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
    # A local directory: a Hub id is looked up in the Hugging Face cache instead
    # (tests/plugin/test_hub_model_plugin.py).
    model = pytester.path / "model"
    model.mkdir()
    result = run_suite(pytester, model=str(model))
    assert failure_line(result) == (
        f"{model}: no tokenizer.json; point at a local model directory "
        "that has one (e.g. save it there with transformers' AutoTokenizer.save_pretrained)")


def test_an_engine_needing_more_gpus_than_the_machine_has(pytester: pytest.Pytester):
    result = run_suite(pytester, "--llmperf-hardware", "h100:1",
                       engine_extra=", tensor_parallel_size=2")
    assert failure_line(result) == "an engine needs 2 GPUs; this process sees 1 (0)"


# ------------------------------------------------------------------ server answers (mock server)

MOCK_SUITE = """
import pytest
from pytest_llmperf import Engine, Workload

@pytest.mark.engine(Engine(model={model!r}))
def test_x(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=4, num_requests=5, concurrency=1))
"""


# A busy machine (pytest-xdist workers on 2 cores) must not turn these into client-limited failures.
CALM = ("--llmperf-client-check", "warn")


mock = mock_fixture(0.005)


def test_failed_requests_are_counted_by_kind_in_the_failure_and_the_run_file(
        pytester: pytest.Pytester, mock):
    mock.set_faults(["429", None, "503", "cut", None])
    pytester.makepyfile(test_suite=MOCK_SUITE.format(model=str(ARCH)))
    result = pytester.runpytest("-p", "no:cacheprovider", "--llmperf-endpoint", mock.url,
                                "--llmperf-hardware", "cpu", "--llmperf-model", "mock",
                                *CALM, "--llmperf-json", "run.json")
    result.assert_outcomes(failed=1)
    overloaded = '{"error": {"message": "mock fault %d", "type": "MockError", "code": %d}}'
    assert failure_line(result) == (
        "3 of 5 requests failed (error rate 60.0%, allowed 0.0%): 2 overloaded, 1 cut_off; "
        f"request 0: HTTP 429: {overloaded % (429, 429)}; "
        f"request 2: HTTP 503: {overloaded % (503, 503)}; "
        "request 3: StreamClosed: the server closed the connection before the response ended")
    (entry,) = json.loads((pytester.path / "run.json").read_text())["llmperf"]["results"]
    assert entry["failures"] == {"overloaded": 2, "cut_off": 1}
    # And a note under the summary, which an allowed error rate would still show.
    assert "test_suite.py::test_x: 3 of 5 requests failed: 2 overloaded, 1 cut_off" in \
        " ".join(result.stdout.str().split())


def test_a_stalled_endpoint_fails_its_test_after_the_stall_timeout(pytester: pytest.Pytester,
                                                                   mock):
    mock.set_faults([None, None, "stall"])
    pytester.makepyfile(test_suite=MOCK_SUITE.format(model=str(ARCH)))
    result = pytester.runpytest("-p", "no:cacheprovider", "--llmperf-endpoint", mock.url,
                                "--llmperf-hardware", "cpu", "--llmperf-model", "mock",
                                *CALM, "--llmperf-stall-timeout", "1")
    result.assert_outcomes(failed=1)
    line = failure_line(result)
    assert re.fullmatch(
        rf"the server at {re.escape(mock.url)} stalled during the test \(no chunk for 1\.\d s "
        r"on the 1 request in flight \(stall timeout 1 s, --llmperf-stall-timeout\)\); it is "
        r"not ours to restart", line), line
    assert re.search(r"\btest_x\b.* ENGINE STALLED\n", result.stdout.str())  # 2 measured, kept
