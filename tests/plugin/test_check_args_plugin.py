"""--llmperf-check-args: every engine a test would start goes through vLLM's own `vllm serve`
parser instead (pytest_llmperf/engines/arg_check.py), on the CPU, hardware markers bypassed.

The runs that parse are subprocesses: the parser's child imports vLLM, which takes seconds;
nothing here starts an engine.
"""

from __future__ import annotations

import importlib.util
import os
import re

import pytest

from pytest_llmperf.engines.interpreter import installed_versions
from tests.conftest import REPO

needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vLLM is not installed: nothing to parse with")

SUITE = """
import pytest
from pytest_llmperf import SLO, Engine, Workload

GOOD = Engine(model="/models/llama", load_format="dummy", max_num_seqs=8)
LOAD = Workload.fixed(input_tokens=8, output_tokens=8, num_requests=4, concurrency=2)


@pytest.mark.h100
@pytest.mark.engine(GOOD)
def test_good(llmperf):
    llmperf.run(LOAD)


@pytest.mark.h100
@pytest.mark.engine(GOOD.replace(extra_args={"max-num-seqz": 8}))
def test_typo(llmperf):
    llmperf.run(LOAD)


@pytest.mark.gpus(8)
def test_ab_side_b_typo(llmperf):
    llmperf.ab(LOAD, a=GOOD, b=GOOD.replace(dtype="bf16"))


@pytest.mark.a100(memory_gb=40)
@pytest.mark.engine(GOOD)
def test_sweep(llmperf):
    llmperf.sweep(LOAD, concurrencies=[1, 2])


@pytest.mark.engine(GOOD.replace(quantization="fp7"))
def test_capacity_unknown_quantization(llmperf):
    llmperf.capacity(LOAD, SLO(max={"ttft_s.p90": 1.0}), low=1.0, high=4.0)


@pytest.mark.engine(GOOD)
def test_offline(llmperf):
    llmperf.offline(LOAD)
"""

GOOD_LABEL = "llama load=dummy seqs=8"


def failure_lines(result: pytest.RunResult) -> dict[str, str]:
    """test name -> its failure's line, from the failure sections."""
    lines, found = result.stdout.lines, {}
    for i, line in enumerate(lines):
        heading = re.match(r"_+ (test_\w+) _+$", line)
        if heading:
            found[heading.group(1)] = lines[i + 1]
    return found


@needs_vllm
def test_each_call_checks_its_engines_and_starts_none(pytester: pytest.Pytester):
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess("-v", "-rs", "--llmperf-check-args",
                                           "--llmperf-update-baselines")
    result.assert_outcomes(skipped=3, failed=3)
    version = installed_versions(None, os.environ)["vllm"]
    refuses = f"vLLM {version} refuses its arguments"
    lines = failure_lines(result)
    assert set(lines) == {"test_typo", "test_ab_side_b_typo", "test_capacity_unknown_quantization"}
    assert lines["test_typo"] == (f"engine ({GOOD_LABEL} extra_args=max-num-seqz:8): {refuses}: "
                                  "unrecognized arguments: --max-num-seqz")
    assert lines["test_ab_side_b_typo"] == (
        f"A/B side B (llama load=dummy dtype=bf16 seqs=8): {refuses}: argument --dtype: invalid "
        "choice: "
        "'bf16' (choose from 'auto', 'bfloat16', 'float', 'float16', 'float32', 'half')")
    # vLLM's own list of methods follows, which changes from release to release.
    assert lines["test_capacity_unknown_quantization"].startswith(
        f"engine ({GOOD_LABEL} quantization=fp7): {refuses}: argument --quantization/-q: "
        "Unknown quantization method: fp7. Must be one of ['awq', ")
    checked = f"engine arguments checked: engine ({GOOD_LABEL}) (vLLM {version}'s vllm serve parser)"
    # The h100 and a100 tests ran on this CPU machine: their markers did not skip them.
    for name in ("test_good", "test_sweep", "test_offline"):
        result.stdout.fnmatch_lines([f"*::{name} SKIPPED*"])
    result.stdout.fnmatch_lines([f"SKIPPED [[]1[]] *.py:*: {checked}"] * 3)
    assert "needs h100" not in result.stdout.str()
    # No engine started (it would have written its log) and no baseline written, though asked.
    assert not (pytester.path / ".llmperf" / "logs").exists()
    assert not (pytester.path / "baselines").exists()


@needs_vllm
def test_a_good_ab_names_both_sides(pytester: pytest.Pytester):
    pytester.makepyfile("""
        import pytest
        from pytest_llmperf import Engine, Workload

        A = Engine(model="/models/llama", load_format="dummy")

        def test_ab(llmperf):
            llmperf.ab(Workload.fixed(input_tokens=8, output_tokens=8, num_requests=4,
                                      concurrency=2), a=A, b=A.replace(kv_cache_dtype="fp8"))
    """)
    result = pytester.runpytest_subprocess("-rs", "--llmperf-check-args")
    result.assert_outcomes(skipped=1)
    version = installed_versions(None, os.environ)["vllm"]
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] test_a_good_ab_names_both_sides.py:6: engine arguments checked: "
        "A/B side A (llama load=dummy); A/B side B (llama load=dummy kv_dtype=fp8) "
        f"(vLLM {version}'s vllm serve parser)"])


def test_check_args_and_an_endpoint_are_refused_together(pytester: pytest.Pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--llmperf-check-args", "--llmperf-endpoint",
                                "http://127.0.0.1:9", "--llmperf-hardware", "h100")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: pytest-llmperf: --llmperf-check-args checks the engines the plugin would start, "
        "and with --llmperf-endpoint it starts none: drop --llmperf-endpoint"])


def test_without_vllm_the_flag_is_refused_before_any_test(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "vllm" else find_spec(name, *args))
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--llmperf-check-args")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: pytest-llmperf: --llmperf-check-args parses engine arguments with vLLM's own "
        "parser, and vLLM is not installed here: install it (pip install -e '.[cpu]' or "
        "'.[gpu]') or drop the flag"])


@needs_vllm
def test_every_gpu_suite_test_passes_the_check(pytester: pytest.Pytester):
    """The real GPU suites, checked as CI checks them: a misspelt flag, dtype or JSON in any
    GPU test fails here, on the CPU, instead of on the nightly GPU runner."""
    result = pytester.runpytest_subprocess(
        str(REPO / "suites"), "-m", "h100 or h200 or a100", "--llmperf-check-args", "-rs",
        "-p", "no:cacheprovider", "--llmperf-history", "off")
    outcomes = result.parseoutcomes()
    selected = int(re.search(r"collected \d+ items / \d+ deselected / (\d+) selected",
                             result.stdout.str()).group(1))
    assert outcomes.get("failed", 0) == outcomes.get("errors", 0) == 0, result.stdout.str()
    assert outcomes["skipped"] == selected
    skips = [re.match(r"SKIPPED \[(\d+)\] \S*?(suites/test_\w+\.py):\d+: (.*)$", line)
             for line in result.stdout.lines if line.startswith("SKIPPED")]
    assert sum(int(skip.group(1)) for skip in skips) == selected
    assert all(skip.group(3).startswith("engine arguments checked: ") for skip in skips)
    # Every GPU suite file took part: one whose tests lost their hardware marker would not.
    assert {skip.group(2) for skip in skips} == {
        f"suites/{path.name}" for path in (REPO / "suites").glob("test_gpu_*.py")}
