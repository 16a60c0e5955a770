"""A new output format is one subclass: a writer registered (here from a conftest) is asked for by
its name with `--llmperf-output NAME[=PATH]`, needing no option of its own, and one that reads
the run file gets one from the session though session/outputs.py names nothing of it
(Output.reads_run). A name no format has is a usage error before anything is measured.
Measurements injected (gate_suite.py)."""

from __future__ import annotations

import pytest

from tests.plugin.gate_suite import CONFTEST, SUITE

# A toy CSV writer, reading the run file, not the report.
CSV = '''
from pytest_llmperf.reports.outputs.base import Output

class CsvRows(Output):
    name = "csv"
    default = "llmperf-results.csv"

    def write(self, file, session):
        rows = [f"{r.test_id},{r.metrics['ttft_s.p50'].value:.3f}" for r in session.run.results]
        file.path.write_text("\\n".join(["test,ttft_s.p50", *rows]) + "\\n")
        return f"CSV written to {file.path.name}"
'''


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST + CSV)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_a_registered_format_is_asked_for_by_its_name(suite):
    # In a process of its own: the writer registers itself in FORMATS for good.
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "--llmperf-output",
                                        "csv=run.csv", "--llmperf-output", "markdown",
                                        "--llmperf-history", "off")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*CSV written to run.csv*"])
    assert (suite.path / "run.csv").read_text().splitlines() == [
        "test,ttft_s.p50", "test_suite.py::test_a,0.100", "test_suite.py::test_b,0.100",
        "test_suite.py::test_slo,0.100"]
    assert (suite.path / "llmperf-report.md").is_file()  # the Markdown report, its own name


def test_its_own_file_name_and_an_unknown_name(suite):
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "--llmperf-output", "csv",
                                        "--llmperf-history", "off")
    result.assert_outcomes(passed=3)
    assert (suite.path / "llmperf-results.csv").is_file()
    refused = suite.runpytest_subprocess("-p", "no:cacheprovider", "--llmperf-output", "tsv",
                                         "--llmperf-history", "off")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([
        "ERROR: pytest-llmperf: --llmperf-output tsv: no output format 'tsv' (formats: csv, "
        "html, json, markdown, save; a conftest adds one by subclassing "
        "reports.outputs.base.Output: docs/reports.md)"])
    assert "CSV written" not in refused.stdout.str()
