"""A measuring mode from a plugin of the plugin: a conftest adds its own option and answers
`pytest_llmperf_make_measurer` (plugin/hookspecs.py), as pytest-xdist lets a plugin add a
scheduler; no file of the package changes. Here a dry run that ends each test saying what it
would measure; without its option the built-in answer measures (injected measurements,
gate_suite.py)."""

from __future__ import annotations

import pytest

from tests.plugin.gate_suite import CONFTEST, SUITE

DRY_RUN = '''
def pytest_addoption(parser):
    parser.addoption("--dry-run", action="store_true", help="say what each test would measure")

class DryRun:
    """Every call ends its test skipped, naming the workload and the engine it would start."""

    def __init__(self, measuring):
        self.measuring = measuring

    def run(self, test, workload, engine, repeat, slo):
        pytest.skip(f"would measure {workload.label()} on {test.engine(engine).label()}")

    ab = sweep = capacity = offline = run

@pytest.hookimpl
def pytest_llmperf_make_measurer(config, measuring):
    return DryRun(measuring) if config.getoption("--dry-run") else None
'''


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST + DRY_RUN)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_a_mode_from_a_conftest_takes_every_call(suite):
    result = suite.runpytest("-p", "no:cacheprovider", "--dry-run", "-rs",
                             "--llmperf-history", "off")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines([f"SKIPPED [[]1[]] conftest.py:*: would measure {name} x20 @ "
                                 "concurrency 1 on m seqs=32" for name in ("a", "b", "slo")])


def test_without_its_option_the_built_in_mode_measures(suite):
    result = suite.runpytest("-p", "no:cacheprovider", "--llmperf-history", "off")
    result.assert_outcomes(passed=3)
