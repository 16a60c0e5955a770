"""Hardware markers, detection override, the conftest hook, and pytest-xdist grouping."""

from __future__ import annotations

import pytest

SUITE = """
import pytest

@pytest.mark.h100
def test_h100(): pass

@pytest.mark.h200
def test_h200(): pass

@pytest.mark.a100(memory_gb=40)
def test_a100_40(): pass

@pytest.mark.gpus(8)
def test_eight(): pass

@pytest.mark.cpu
def test_cpu(): pass

def test_anywhere(): pass
"""


def skipped(result) -> dict[str, str]:
    """test name -> skip reason, from the -rs summary lines."""
    reasons = {}
    for line in result.stdout.lines:
        if line.startswith("SKIPPED"):
            location, _, reason = line.partition(": ")
            reasons[location.split(":")[-1].strip() or location] = reason
    return reasons


def test_gpu_tests_skip_on_this_cpu_machine_naming_what_was_found(pytester: pytest.Pytester):
    pytester.makepyfile(SUITE)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=2, skipped=4)
    found = result.stdout.str()
    assert "needs h100; found cpu (" in found
    assert "needs h200; found cpu (" in found
    assert "needs a100 (40 GB); found cpu (" in found
    assert "needs 8 GPUs; found cpu (" in found


def test_override_pretends_to_be_an_h100(pytester: pytest.Pytester):
    pytester.makepyfile(SUITE)
    result = pytester.runpytest("-rs", "--llmperf-hardware", "h100")
    result.assert_outcomes(passed=2, skipped=4)
    result.stdout.fnmatch_lines([
        "SKIPPED * needs h200; found 1x h100 (override)",
        "SKIPPED * needs a100 (40 GB); found 1x h100 (override)",
        "SKIPPED * needs 8 GPUs; found 1x h100 (override)",
        "SKIPPED * needs cpu; found 1x h100 (override)",
    ])
    assert "llmperf: 1x h100 (override)" in result.stdout.str(), "the header shows it"


def test_marker_selection_with_dash_m(pytester: pytest.Pytester):
    pytester.makepyfile(SUITE)
    result = pytester.runpytest("-m", "h200", "--llmperf-hardware", "h200:8")
    result.assert_outcomes(passed=1, deselected=5)


def test_environment_variable_sets_the_hardware(pytester: pytest.Pytester, monkeypatch):
    pytester.makepyfile(SUITE)
    monkeypatch.setenv("LLMPERF_HARDWARE", "h200:8")
    result = pytester.runpytest()
    result.assert_outcomes(passed=3, skipped=3)  # h200, gpus(8) and the unmarked test run


def test_a_conftest_can_answer_the_detection_hook(pytester: pytest.Pytester):
    pytester.makeconftest("""
        from pytest_llmperf.machine.hardware import Hardware

        def pytest_llmperf_detect_hardware(config):
            return Hardware(hardware_class="a100-40gb", device_name="NVIDIA A100-SXM4-40GB",
                            device_count=4, source="conftest")
    """)
    pytester.makepyfile(SUITE)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=2, skipped=4)
    result.stdout.fnmatch_lines(["SKIPPED * needs h100; found 4x NVIDIA A100-SXM4-40GB"])


def test_bad_override_is_a_usage_error(pytester: pytest.Pytester):
    result = pytester.runpytest("--llmperf-hardware", "h300")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-llmperf: hardware override 'h300' is not valid*"])


def test_bad_marker_argument_names_the_marker(pytester: pytest.Pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.a100(memory_gb=60)
        def test_x(): pass
    """)
    result = pytester.runpytest()
    assert result.ret != 0
    assert "@pytest.mark.a100(memory_gb=60): memory_gb must be 40 or 80" in result.stdout.str() \
        + result.stderr.str()


def test_tests_sharing_an_engine_get_one_xdist_group(pytester: pytest.Pytester):
    pytester.makeconftest("""
        def pytest_collection_finish(session):
            for item in session.items:
                groups = [m.args[0] for m in item.iter_markers("xdist_group")]
                print("GROUP", item.name, groups)
    """)
    pytester.makepyfile("""
        import pytest
        from pytest_llmperf import Engine

        A, B = Engine(model="/a"), Engine(model="/b")

        @pytest.mark.engine(A)
        def test_1(): pass

        @pytest.mark.engine(B)
        def test_2(): pass

        @pytest.mark.engine(A)
        def test_3(): pass
    """)
    result = pytester.runpytest("-s", "--collect-only", "-q")
    groups = {line.split()[1]: line.split("[")[1] for line in result.stdout.lines
              if line.startswith("GROUP")}
    assert groups["test_1"] == groups["test_3"] != groups["test_2"]
    assert groups["test_1"].startswith("'llmperf-")


def test_dash_n_defaults_to_loadgroup_distribution(pytester: pytest.Pytester):
    pytester.makeconftest("""
        def pytest_configure(config):
            if not hasattr(config, "workerinput"):
                print("DIST", config.option.dist)
    """)
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("-n", "2", "-s")
    result.stdout.fnmatch_lines(["DIST loadgroup"])
    explicit = pytester.runpytest_subprocess("-n", "2", "--dist", "load", "-s")
    explicit.stdout.fnmatch_lines(["DIST load"])
