"""A new output format is one module and its option: a writer registered (here from a
conftest) that reads the run file gets one from the session though session/outputs.py names no
option of it (Output.reads_run), and writes it; one that reads the report alone does not make
the session build a run file. Measurements injected (gate_suite.py)."""

from __future__ import annotations

import pytest

from tests.plugin.gate_suite import CONFTEST, SUITE

# A toy CSV writer on the Markdown option (an option needs a Settings field: the second file a
# real format adds), asked for by --llmperf-markdown, reading the run file, not the report.
CSV = '''
from pytest_llmperf.reports.outputs.base import Output, OutputFile

class CsvRows(Output):
    option = "markdown"

    @classmethod
    def files(cls, value, paths, environ):
        return [OutputFile("--llmperf-markdown", value, paths.path(value).with_suffix(".csv"))] \\
            if value else []

    def write(self, file, session):
        if session.run is None:
            file.path.write_text("no run file\\n")
            return "CSV: no run file"
        rows = [f"{r.test_id},{r.metrics['ttft_s.p50'].value:.3f}" for r in session.run.results]
        file.path.write_text("\\n".join(["test,ttft_s.p50", *rows]) + "\\n")
        return f"CSV written to {file.path.name}"
'''


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST + CSV)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_a_registered_format_that_reads_the_run_file_gets_one(suite):
    # In a process of its own: the writer registers itself in Output.registry for good.
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "--llmperf-markdown",
                                        "run.md", "--llmperf-history", "off")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*CSV written to run.csv*"])
    assert (suite.path / "run.csv").read_text().splitlines() == [
        "test,ttft_s.p50", "test_suite.py::test_a,0.100", "test_suite.py::test_b,0.100",
        "test_suite.py::test_slo,0.100"]
    assert (suite.path / "run.md").is_file()  # the Markdown report, beside it
