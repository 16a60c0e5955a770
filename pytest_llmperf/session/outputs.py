"""What a session leaves behind: the summary's rows and lines, and the JSON run file.

Under pytest-xdist every worker measures its own tests, so each builds a `payload` (plain data,
sent to the controller through `workeroutput`), and the controller merges them: one table, one
JSON file, whatever the number of workers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pytest_llmperf.engines.pool import MAX_DEATHS, EnginePool
from pytest_llmperf.machine.hardware import Fingerprint
from pytest_llmperf.metrics import cost
from pytest_llmperf.metrics.derived import derive_all
from pytest_llmperf.reports import html, markdown, model, runfile, terminal
from pytest_llmperf.reports.files import merge_documents, write_text
from pytest_llmperf.reports.headline import headline
from pytest_llmperf.reports.notes import Note, fold
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.session.provenance import git_commit
from pytest_llmperf.session.settings import Settings

# GitHub Actions shows at most 1 MiB of a step's summary (docs/reports.md).
STEP_SUMMARY_LIMIT = 1024 * 1024


def usd_per_hour(settings: Settings, hardware_class: str) -> cost.Price | None:
    return cost.for_hardware(settings.cost_per_hour, hardware_class)


def payload(ledger: Ledger, settings: Settings, pool: EnginePool, started: datetime, *,
            recorded: bool) -> dict[str, Any]:
    """One process's share of the report, as JSON-able data. `recorded`: the results store
    appends the session's run (history_run.record_run)."""
    # --llmperf-html draws its plots from the run file, so it needs one as much as --llmperf-json.
    # The results store appends the run file's document too.
    wants_document = settings.json or settings.save or settings.html or recorded
    price = usd_per_hour(settings, ledger.hardware_class)
    # Per-GPU throughput, cost and roofline: worked out once per result, for the run file and
    # the summary's rows alike.
    derived = derive_all(ledger.results, price, settings.rootdir)
    document = None
    if wants_document and ledger.measured:
        document = runfile.run_document(
            ledger.records, fingerprint=ledger.fingerprint, commit=git_commit(settings.rootdir),
            started=started, usd_per_hour=price, root=settings.rootdir, derived=derived)
        # Plain data, as the file will hold it: pytest-xdist's execnet sends builtins only (an
        # A/B annotation's Status, a str subclass, would stop a worker's hand-over).
        document = json.loads(json.dumps(document, default=str))
    return {
        "rows": model.summary_rows(ledger.records, price, root=settings.rootdir,
                                   derived=derived),
        "extras": model.extra_lines(ledger.records),
        "starts": [[engine.label(), seconds] for engine, seconds in pool.starts],
        # [label, restarts, given up?]: the MAX_DEATHS-th death is not restarted
        "deaths": [[engine.label(), min(n, MAX_DEATHS - 1), n >= MAX_DEATHS]
                   for engine, n in pool.deaths.items() if n],
        "notes": [note.to_plain() for note in [*ledger.notes, *_cost_notes(ledger, settings)]],
        "document": document,
        "hardware_class": ledger.hardware_class,
    }


def _cost_notes(ledger: Ledger, settings: Settings) -> list[Note]:
    note = cost.missing_note(settings.cost_per_hour, ledger.hardware_class)
    return [Note(None, note)] if note and ledger.measured else []


def write_documents(settings: Settings, payloads: list[dict[str, Any]]) -> list[str]:
    """--llmperf-json and --llmperf-save; returns lines for the terminal."""
    targets: list[Path] = []
    if settings.json:
        targets.append(settings.path(settings.json))
    if settings.save:
        targets.append(settings.runs_dir() / f"{settings.save}.json")
    document = merge_documents([p["document"] for p in payloads])
    if document is None:
        return []
    return [_write_run(path, document) for path in targets]


def _write_run(path: Path, document: dict[str, Any]) -> str:
    """One run file; the summary's line says where it went or, if the disk refused it (full,
    gone read-only since the start), why not: the rest of the session's output goes on."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        runfile.write_run(path, document)
    except OSError as exc:
        return f"{path}: results not written ({exc.strerror or exc}); choose a writable path"
    return f"results written to {path}"


def write_html(settings: Settings, payloads: list[dict[str, Any]],
               report_data: markdown.Report) -> str:
    """--llmperf-html: the page, with the plots of the session's merged run file."""
    document = merge_documents([p["document"] for p in payloads])
    return html.write(report_data, document, settings.path(settings.html))


def merged(payloads: list[dict[str, Any]], key: str) -> list[Any]:
    return [item for p in payloads for item in p[key]]


def notes_of(payloads: list[dict[str, Any]]) -> list[Note]:
    return [Note.from_plain(plain) for plain in merged(payloads, "notes")]


def add_notes(payloads: list[dict[str, Any]], lines: list[str]) -> None:
    """Lines about the session (where a report went, or why not) under the summary."""
    payloads[-1]["notes"] += [note.to_plain() for note in Note.about_session(lines)]


def engine_legend(payloads: list[dict[str, Any]], rows: list[Any]) -> list[str]:
    """The engine lines under the table, with every worker's start times and restarts (JSON
    turned their tuples into lists on the way from the workers)."""
    return model.engine_lines(rows, [tuple(start) for start in merged(payloads, "starts")],
                               [tuple(death) for death in merged(payloads, "deaths")])


def summary(payloads: list[dict[str, Any]], *, full: bool = False) -> list[str]:
    """The terminal section: the table and its engine legend (with start times), then
    capacities/offline throughputs and notes; `full` for every column and note."""
    rows = merged(payloads, "rows")
    first = headline(rows, notes_of(payloads), payloads[0].get("hardware_class")) \
        if payloads else []
    return terminal.wrap(first, terminal.WIDTH) + terminal.section(
        rows, engine_legend(payloads, rows), merged(payloads, "extras"), notes_of(payloads),
        full=full)


def markdown_report(payloads: list[dict[str, Any]], *, failures: list[tuple[str, str]],
                    fingerprint: Fingerprint,
                    provenance: Mapping[str, Any]) -> markdown.Report:
    rows = merged(payloads, "rows")
    return markdown.Report(rows=rows, engines=engine_legend(payloads, rows),
                           others=merged(payloads, "extras"),
                           notes=fold(notes_of(payloads)), failures=failures,
                           fingerprint=fingerprint.to_dict(), provenance=provenance)


def write_markdown(settings: Settings, report_data: markdown.Report,
                   environ: Mapping[str, str] = os.environ) -> list[str]:
    """--llmperf-markdown, and the step summary of a GitHub Actions job."""
    lines = []
    if settings.markdown:
        lines.append(write_text("Markdown report", "--llmperf-markdown",
                                settings.path(settings.markdown),
                                markdown.document(report_data)))
    if environ.get("GITHUB_STEP_SUMMARY"):
        lines.append(write_text("Markdown report", "$GITHUB_STEP_SUMMARY",
                                Path(environ["GITHUB_STEP_SUMMARY"]),
                                markdown.document(report_data, limit=STEP_SUMMARY_LIMIT),
                                append=True))
    return lines
