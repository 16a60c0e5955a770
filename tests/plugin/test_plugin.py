"""The plugin as users meet it: pytester runs pytest on small test files (no engine needed)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

ENGINE_A = 'Engine(model="/models/a", load_format="dummy")'
ENGINE_B = 'Engine(model="/models/b", max_num_seqs=1)'


def test_help_lists_every_option_with_its_default(pytester: pytest.Pytester):
    result = pytester.runpytest("--help")
    out = result.stdout.str()
    assert "LLM inference performance (pytest-llmperf):" in out
    result.stdout.fnmatch_lines([
        "*--llmperf-startup-timeout=SECONDS",
        "*seconds an engine may take to become healthy; ini",
        "*llmperf_startup_timeout, env $LLMPERF_STARTUP_TIMEOUT",
        "*(default: 900.0)",
    ])
    for flag in ("--llmperf-log-dir", "--llmperf-hardware", "--llmperf-endpoint",
                 "--llmperf-keep-engines"):
        assert flag in out


def test_markers_are_registered_with_signatures(pytester: pytest.Pytester):
    result = pytester.runpytest("--markers")
    for line in ("@pytest.mark.engine(spec):*",
                 "@pytest.mark.llmperf(*, repeat=None, slo=None, max_error_rate=0.0, "
                 "tolerance=None, gate=None):*",
                 "@pytest.mark.cpu:*", "@pytest.mark.h100:*", "@pytest.mark.h200:*",
                 "@pytest.mark.a100(memory_gb=None):*", "@pytest.mark.gpus(n):*"):
        result.stdout.fnmatch_lines([line])


def test_plugin_loads_where_vllm_and_torch_are_absent(tmp_path):
    """`pytest --help` must work on a machine without vLLM: block both imports and try."""
    for name in ("vllm", "torch"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('{name} blocked')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    out = subprocess.run([sys.executable, "-m", "pytest", "--help"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "--llmperf-endpoint" in out.stdout


def test_a_test_without_engine_fails_with_the_fix(pytester: pytest.Pytester):
    pytester.makepyfile("""
        from pytest_llmperf import Workload

        def test_x(llmperf):
            llmperf.run(Workload.fixed(input_tokens=8, output_tokens=8, num_requests=1,
                                       concurrency=1))
    """)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*test_a_test_without_engine_fails_with_the_fix.py::test_x: no engine: add "
        "@pytest.mark.engine(Engine(...)) or pass engine=... to llmperf.run",
    ])


@pytest.mark.parametrize(("marker_args", "message"), [
    ("repet=3", "*unexpected keyword argument 'repet'*"),  # a typo
    ("tolerance=10", "tolerance is a fraction (0.1 means 10%) from 0 to 4, got 10"),  # 10 for 10%
    ("repeat=0", "repeat is a whole number >= 1, got 0"),
    ("max_error_rate=5", "max_error_rate is a fraction from 0 to 1 (0.01 lets 1% of the requests "
                         "fail), got 5"),  # 5 for 5%
    ("client_check='off'", "client_check is one of fail, warn (as --llmperf-client-check), "
                           "got 'off'"),
], ids=["typo", "percentage", "repeat", "error-rate-percentage", "client-check"])
def test_a_bad_llmperf_marker_names_the_test(pytester: pytest.Pytester, marker_args, message):
    pytester.makepyfile(f"""
        import pytest
        from pytest_llmperf import Engine, Workload

        @pytest.mark.engine({ENGINE_A})
        @pytest.mark.llmperf({marker_args})
        def test_x(llmperf):
            llmperf.run(Workload.fixed(input_tokens=8, output_tokens=8, num_requests=1,
                                       concurrency=1))
    """)
    result = pytester.runpytest()
    result.stdout.fnmatch_lines([f"*test_x: @pytest.mark.llmperf: {message}"])
    assert result.ret != 0


def test_tests_are_grouped_so_each_engine_starts_once(pytester: pytest.Pytester):
    pytester.makepyfile(f"""
        import pytest
        from pytest_llmperf import Engine

        A, B = {ENGINE_A}, {ENGINE_B}

        @pytest.mark.engine(A)
        def test_1(): pass

        @pytest.mark.engine(B)
        def test_2(): pass

        def test_3(): pass

        @pytest.mark.engine(A)
        def test_4(): pass

        @pytest.mark.engine(B)
        def test_5(): pass
    """)
    result = pytester.runpytest("--collect-only", "-q")
    names = [line.split("::")[1] for line in result.stdout.lines if "::" in line]
    assert names == ["test_1", "test_4", "test_2", "test_5", "test_3"]


def test_engine_marker_needs_an_engine(pytester: pytest.Pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.engine("llama")
        def test_x(): pass
    """)
    result = pytester.runpytest()
    result.stderr.fnmatch_lines([
        "*test_x: @pytest.mark.engine needs a pytest_llmperf.Engine, got 'llama'",
    ])
    assert result.ret != 0


def test_endpoint_without_hardware_is_a_usage_error(pytester: pytest.Pytester):
    result = pytester.runpytest("--llmperf-endpoint", "http://127.0.0.1:9")
    result.stderr.fnmatch_lines([
        "ERROR: pytest-llmperf: --llmperf-endpoint needs --llmperf-hardware too (the hardware of "
        "that server, e.g. h100:8), so results are compared with the right baselines",
    ])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_bad_option_value_is_a_usage_error(pytester: pytest.Pytester):
    result = pytester.runpytest("--llmperf-repeat", "0")
    result.stderr.fnmatch_lines(["*error: argument --llmperf-repeat: expected a whole number >= 1"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_bad_value_from_the_environment_names_the_variable(pytester: pytest.Pytester,
                                                             monkeypatch):
    monkeypatch.setenv("LLMPERF_REPEAT", "0")
    result = pytester.runpytest()
    result.stderr.fnmatch_lines(
        ["ERROR: pytest-llmperf: $LLMPERF_REPEAT='0': expected a whole number >= 1"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
