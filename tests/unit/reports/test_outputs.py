"""The session's output formats (reports/outputs/): each a registered writer of the run file's
model and the report; where each writes, and what."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.plugin import configs
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.reports.markdown import Report
from pytest_llmperf.reports.outputs.base import FORMATS, Output, OutputFile, SessionOutput, writers
from pytest_llmperf.reports.runfile import run_document
from pytest_llmperf.session import outputs
from pytest_llmperf.session.settings import parse_output, resolve
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from pytest_llmperf.verdict.stored_run import StoredRun
from tests.unit.fingerprints import CPU


def settings(tmp_path: Path, **cli):
    """As the command line gives them: a path option's value already a Path."""
    cli = {name: value if name == "save" else [(pair,) for pair in value]  # a flag each
           if name == "output" else Path(value) for name, value in cli.items()}
    return configs.outputs_config(resolve(lambda name: cli.get(name), lambda key: None, {},
                                          rootdir=tmp_path))


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


def test_one_option_asks_for_any_format_by_name(tmp_path):
    asked = settings(tmp_path, output=(("json", "out/run.json"), ("html", None),
                                       ("save", "nightly")), markdown="r.md")
    found = [(type(writer).__name__, file) for writer, file in outputs.files(asked, {})]
    assert found == [
        ("RunFileOutput", OutputFile("--llmperf-output", "json=out/run.json",
                                     tmp_path / "out/run.json")),
        ("SavedRunOutput", OutputFile("--llmperf-output", "save=nightly",
                                      tmp_path / ".llmperf/runs/nightly.json")),
        ("HtmlFile", OutputFile("--llmperf-output", "html", tmp_path / "llmperf-report.html")),
        ("MarkdownFile", OutputFile("--llmperf-markdown", Path("r.md"), tmp_path / "r.md"))]


def test_a_format_asked_wrongly_is_one_line(tmp_path):
    def refused(**cli) -> str:
        with pytest.raises(ValueError) as raised:
            outputs.files(settings(tmp_path, **cli), {})
        return str(raised.value)

    assert refused(output=(("csv", "r.csv"),)) == (
        "--llmperf-output csv=r.csv: no output format 'csv' (formats: html, json, markdown, "
        "save; a conftest adds one by subclassing reports.outputs.base.Output: docs/reports.md)")
    assert refused(output=(("json", "a.json"),), json="b.json") == (
        "--llmperf-json b.json: the json format is asked for twice (also --llmperf-output "
        "json=a.json); give it once")
    assert refused(output=(("save", None),)) == (
        "--llmperf-output save: the save format needs a name: --llmperf-output save=NAME")
    assert parse_output("json=r.json, html\nmarkdown") == (
        ("json", "r.json"), ("html", None), ("markdown", None))
    for bad in ("", "json=", "=r.json"):
        with pytest.raises(ValueError, match="^expected FORMAT or FORMAT=PATH, e.g. html or "
                                             "json=results.json$"):
            parse_output(bad)


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
        assert FORMATS.get("Keys") is Keys
        run = StoredRun.from_plain(payload()["document"])
        line = Keys().write(OutputFile("--llmperf-json", "k", tmp_path / "k.txt"), SessionOutput(run))
        assert line == f"keys written to {tmp_path / 'k.txt'}"
        assert (tmp_path / "k.txt").read_text() == "test_a"
    finally:
        FORMATS.forget("Keys")
