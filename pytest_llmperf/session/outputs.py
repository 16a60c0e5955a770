"""What a session leaves behind: the summary's rows and lines, and the files its output formats
write (reports/outputs/: the run file, Markdown, HTML).

Under pytest-xdist every worker measures its own tests, so each builds a `payload` (plain data,
sent to the controller through `workeroutput`), and the controller merges them: one table, one
JSON file, whatever the number of workers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pytest_llmperf.engines.pool import MAX_DEATHS, EnginePool
from pytest_llmperf.errors import InputError
from pytest_llmperf.machine.hardware import Fingerprint
from pytest_llmperf.metrics import cost
from pytest_llmperf.metrics.cost import CostSetting
from pytest_llmperf.metrics.derived import derive_all
from pytest_llmperf.reports import markdown, model, runfile, terminal
from pytest_llmperf.reports.files import merge_documents
from pytest_llmperf.reports.headline import budget_headline, headline
from pytest_llmperf.reports.notes import Note, fold
from pytest_llmperf.reports.outputs.base import (
    Asked,
    Output,
    OutputFile,
    SessionOutput,
    named,
    writers,
)
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.session.provenance import git_commit
from pytest_llmperf.session.settings import RUNS_DIR
from pytest_llmperf.verdict.stored_run import StoredRun


@dataclass(frozen=True)
class OutputsConfig:
    """What the options say of the session's outputs (session/settings.py; the plugin makes it:
    plugin/configs.py): the formats asked for (Settings.formats), the rootdir relative paths
    resolve against, and the price per hour. It answers the writers' `Paths`."""

    asked: tuple[Asked, ...] = ()
    rootdir: Path = Path(".")
    cost_per_hour: CostSetting | None = None

    def path(self, value: Path) -> Path:
        """Relative paths are relative to pytest's rootdir (Settings.path)."""
        return value if value.is_absolute() else self.rootdir / value

    def runs_dir(self) -> Path:
        return self.path(RUNS_DIR)


def usd_per_hour(config: OutputsConfig, hardware_class: str) -> cost.Price | None:
    return cost.for_hardware(config.cost_per_hour, hardware_class)


def payload(ledger: Ledger, config: OutputsConfig, pool: EnginePool, started: datetime, *,
            recorded: bool) -> dict[str, Any]:
    """One process's share of the report, as JSON-able data. `recorded`: the results store
    appends the session's run (history_run.record_run)."""
    # A format that reads the run file (--llmperf-json, --llmperf-save, --llmperf-html, which
    # draws its plots from it: Output.reads_run) needs one; the results store appends it too.
    wants_document = recorded or any(writer.reads_run for writer, _ in files(config))
    price = usd_per_hour(config, ledger.hardware_class)
    # Per-GPU throughput, cost and roofline: worked out once per result, for the run file and
    # the summary's rows alike.
    derived = derive_all(ledger.results, price, config.rootdir)
    document = None
    if wants_document and ledger.measured:
        document = runfile.run_document(
            ledger.records, fingerprint=ledger.fingerprint, commit=git_commit(config.rootdir),
            started=started, usd_per_hour=price, root=config.rootdir, derived=derived)
        # Plain data, as the file will hold it: pytest-xdist's execnet sends builtins only (an
        # A/B annotation's Status, a str subclass, would stop a worker's hand-over).
        document = json.loads(json.dumps(document, default=str))
    return {
        "rows": model.summary_rows(ledger.records, price, root=config.rootdir,
                                   derived=derived),
        "extras": model.extra_lines(ledger.records),
        "starts": [[engine.label(), seconds] for engine, seconds in pool.starts],
        # [label, restarts, given up?]: the MAX_DEATHS-th death is not restarted
        "deaths": [[engine.label(), min(n, MAX_DEATHS - 1), n >= MAX_DEATHS]
                   for engine, n in pool.deaths.items() if n],
        "notes": [note.to_plain() for note in [*ledger.notes, *_cost_notes(ledger, config)]],
        "document": document,
        "hardware_class": ledger.hardware_class,
    }


def _cost_notes(ledger: Ledger, config: OutputsConfig) -> list[Note]:
    note = cost.missing_note(config.cost_per_hour, ledger.hardware_class)
    return [Note(None, note)] if note and ledger.measured else []


def files(config: OutputsConfig, environ: Mapping[str, str] = os.environ,
          *, reads_report: bool | None = None) -> list[tuple[Output, OutputFile]]:
    """Every file the session's output formats (reports/outputs/) will write, each with its
    writer; `reads_report` picks the writers that do (True) or do not (False). InputError (one
    line) for a format asked for that no module or conftest registered, or without the NAME it
    needs."""
    asked = asked_formats(config)
    found = []
    for writer in writers():
        if reads_report is not None and writer.reads_report != reads_report:
            continue
        how = asked.get(writer.name) if writer.name else None
        found += [(writer(), file if file.option or how is None else
                   replace(file, option=how.option, given=how.given))
                  for file in writer.files(how and how.value, config, environ)]
    return found


def asked_formats(config: OutputsConfig) -> dict[str, Asked]:
    """The formats the options ask for, each with its path (its own where none was given)."""
    known = named()
    asked = {}
    for how in config.asked:
        name = how.name
        writer = known.get(name)
        if writer is None:
            raise InputError(f"{how.option} {how.given}: no output format {name!r} (formats: "
                             f"{', '.join(sorted(known))}; a conftest adds one by subclassing "
                             "reports.outputs.base.Output: docs/reports.md)")
        if how.value is None and writer.default is None:
            raise InputError(f"{how.option} {how.given}: the {name} format needs a name: "
                             f"--llmperf-output {name}=NAME")
        asked[name] = how if how.value is not None else replace(how, value=writer.default)
    return asked


def run_of(payloads: list[dict[str, Any]]) -> StoredRun | None:
    """The session's run file, every worker's results merged, read through its model."""
    document = merge_documents([p["document"] for p in payloads])
    return None if document is None else StoredRun.from_plain(document)


def write_documents(config: OutputsConfig, payloads: list[dict[str, Any]],
                    environ: Mapping[str, str] = os.environ) -> list[str]:
    """The formats that write the run file alone (--llmperf-json, --llmperf-save); returns
    lines for the terminal."""
    session = SessionOutput(run_of(payloads))
    if session.run is None:
        return []
    return [line for writer, file in files(config, environ, reads_report=False)
            if (line := writer.write(file, session))]


def write_reports(config: OutputsConfig, payloads: list[dict[str, Any]],
                  report_data: markdown.Report,
                  environ: Mapping[str, str] = os.environ) -> list[str]:
    """The formats that write the report (--llmperf-markdown, $GITHUB_STEP_SUMMARY,
    --llmperf-html), after the run file's, whose lines the report lists."""
    session = SessionOutput(run_of(payloads), report_data)
    return [writer.write(file, session)
            for writer, file in files(config, environ, reads_report=True)]


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
        + budget_headline(rows, notes_of(payloads)) if payloads else []
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
                           fingerprint=fingerprint.to_dict(), provenance=provenance,
                           budget=budget_headline(rows, notes_of(payloads)))
