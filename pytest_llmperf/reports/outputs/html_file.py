"""The report as one self-contained HTML page, plots included: --llmperf-output
html[=PATH] (--llmperf-html PATH)."""

from __future__ import annotations

from pytest_llmperf.reports import html
from pytest_llmperf.reports.outputs.base import Output, OutputFile, SessionOutput


class HtmlFile(Output):
    name = "html"
    default = "llmperf-report.html"
    reads_report = True

    def write(self, file: OutputFile, session: SessionOutput) -> str:
        assert session.report is not None
        return html.write(session.report, session.run, file.path)
