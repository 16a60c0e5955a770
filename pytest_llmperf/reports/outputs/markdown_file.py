"""The report as Markdown: --llmperf-output markdown[=PATH] (--llmperf-markdown PATH), and a
GitHub Actions job's step summary."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_llmperf.reports import markdown
from pytest_llmperf.reports.files import write_text
from pytest_llmperf.reports.outputs.base import Output, OutputFile, Paths, SessionOutput

# GitHub Actions shows at most 1 MiB of a step's summary (docs/reports.md).
STEP_SUMMARY_LIMIT = 1024 * 1024


class MarkdownFile(Output):
    name = "markdown"
    default = "llmperf-report.md"
    reads_report = True
    reads_run = False  # the report alone

    def write(self, file: OutputFile, session: SessionOutput) -> str:
        assert session.report is not None
        return write_text("Markdown report", file.option, file.path,
                          markdown.document(session.report))


class StepSummary(Output):
    """Appended to $GITHUB_STEP_SUMMARY whenever a GitHub Actions job sets it."""

    reads_report = True
    reads_run = False

    @classmethod
    def files(cls, value: Any, paths: Paths, environ: Mapping[str, str]) -> list[OutputFile]:
        where = environ.get("GITHUB_STEP_SUMMARY")
        # The runner's own file, as the runner names it: never under the rootdir.
        return [OutputFile("$GITHUB_STEP_SUMMARY", where, Path(where), append=True,
                       checked=False)] if where else []

    def write(self, file: OutputFile, session: SessionOutput) -> str:
        assert session.report is not None
        return write_text("Markdown report", file.option, file.path,
                          markdown.document(session.report, limit=STEP_SUMMARY_LIMIT),
                          append=True)
