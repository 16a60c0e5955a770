"""The session's output formats (reports/outputs/): each a registered writer of the run file's
model and the report; where each writes, and what."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.reports.markdown import Report
from pytest_llmperf.reports.outputs.base import Output, OutputFile, SessionOutput, writers
from pytest_llmperf.reports.runfile import run_document
from pytest_llmperf.session import outputs
from pytest_llmperf.session.settings import resolve
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from pytest_llmperf.verdict.stored_run import StoredRun
from tests.unit.fingerprints import CPU


def settings(tmp_path: Path, **cli):
    """As the command line gives them: a path option's value already a Path."""
    cli = {name: value if name == "save" else Path(value) for name, value in cli.items()}
    return resolve(lambda name: cli.get(name), lambda key: None, {}, rootdir=tmp_path)


def payload() -> dict:
    records = [RequestRecord(index=0, expected_prompt_tokens=8, expected_output_tokens=2,
                             scheduled_s=0.0, sent_s=0.0, chunk_times_s=[0.1, 0.2],
                             chunk_tokens=[1, 1], usage_output_tokens=2)]
    metrics = compute_metrics(records)
    result = Result(test_id="s/test_a.py::test_a", key="test_a", engine={"model": "tiny"},
                    engine_label="tiny", workload={}, workload_label="w", metrics=metrics,
                    runs=(metrics,), records=tuple(records), fingerprint=CPU)
    document = run_document([MeasurementRecord.of(result)], fingerprint=CPU, commit=None,
                            started=datetime(2026, 11, 28, tzinfo=timezone.utc))
    return {"document": json.loads(json.dumps(document, default=str)), "notes": []}


def test_every_format_is_registered_the_run_files_first():
    assert [writer.__name__ for writer in writers()] == [
        "RunFileOutput", "SavedRunOutput", "HtmlFile", "MarkdownFile", "StepSummary"]


def test_each_format_says_where_it_writes(tmp_path):
    asked = settings(tmp_path, json="out/run.json", save="nightly", markdown="r.md",
                     html="/abs/r.html")
    found = [(type(writer).__name__, file) for writer, file in
             outputs.files(asked, {"GITHUB_STEP_SUMMARY": "/gh/summary.md"})]
    assert found == [
        ("RunFileOutput", OutputFile("--llmperf-json", Path("out/run.json"), tmp_path / "out/run.json")),
        ("SavedRunOutput", OutputFile("--llmperf-save", "nightly", tmp_path / ".llmperf/runs/nightly.json")),
        ("HtmlFile", OutputFile("--llmperf-html", Path("/abs/r.html"), Path("/abs/r.html"))),
        ("MarkdownFile", OutputFile("--llmperf-markdown", Path("r.md"), tmp_path / "r.md")),
        ("StepSummary", OutputFile("$GITHUB_STEP_SUMMARY", "/gh/summary.md",
                               Path("/gh/summary.md"), append=True, checked=False))]
    assert outputs.files(settings(tmp_path), {}) == []


def test_the_run_files_are_written_from_the_merged_model(tmp_path):
    asked = settings(tmp_path, json="run.json", save="night")
    payloads = [payload(), payload()]
    lines = outputs.write_documents(asked, payloads, environ={})
    assert lines == [f"results written to {tmp_path / 'run.json'}",
                     f"results written to {tmp_path / '.llmperf/runs/night.json'}"]
    written = json.loads((tmp_path / "run.json").read_text())
    assert written == StoredRun.from_plain(written).to_plain()
    assert [r["key"] for r in written["llmperf"]["results"]] == ["test_a", "test_a"]
    assert outputs.write_documents(asked, [{"document": None}], environ={}) == []


def test_a_refused_write_is_a_line_not_an_error(tmp_path):
    (tmp_path / "taken").write_text("a file where a folder must go")
    asked = settings(tmp_path, json="taken/run.json")
    [line] = outputs.write_documents(asked, [payload()], environ={})
    assert line.startswith(f"{tmp_path / 'taken/run.json'}: results not written (")
    assert line.endswith("); choose a writable path")


def test_the_report_formats_write_after_the_run_files(tmp_path):
    asked = settings(tmp_path, markdown="r.md")
    summary = tmp_path / "step.md"
    summary.write_text("earlier step\n")
    lines = outputs.write_reports(asked, [payload()], Report(rows=[]),
                                  environ={"GITHUB_STEP_SUMMARY": str(summary)})
    assert lines == [f"Markdown report written to {tmp_path / 'r.md'}",
                     f"Markdown report appended to {summary}"]
    assert summary.read_text() == "earlier step\n## pytest-llmperf: nothing measured\n"
    assert (tmp_path / "r.md").read_text() == "## pytest-llmperf: nothing measured\n"


def test_a_new_format_is_a_subclass(tmp_path):
    class Keys(Output):
        option = "json"

        def write(self, file: OutputFile, session: SessionOutput) -> str:
            file.path.write_text(",".join(r.key for r in session.run.results))
            return f"keys written to {file.path}"

    try:
        assert Output.registry["Keys"] is Keys
        run = StoredRun.from_plain(payload()["document"])
        line = Keys().write(OutputFile("--llmperf-json", "k", tmp_path / "k.txt"), SessionOutput(run))
        assert line == f"keys written to {tmp_path / 'k.txt'}"
        assert (tmp_path / "k.txt").read_text() == "test_a"
    finally:
        del Output.registry["Keys"]
