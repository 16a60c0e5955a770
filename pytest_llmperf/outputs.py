"""What a session leaves behind: the summary table's rows and lines, and the JSON run file.

Under pytest-xdist every worker measures its own tests, so each builds a `payload` (plain data,
sent to the controller through `workeroutput`), and the controller merges them: one table, one
JSON file, whatever the number of workers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_llmperf import report, runfile


def payload(session, started) -> dict[str, Any]:
    """One process's share of the report, as JSON-able data."""
    wants_document = session.settings.json or session.settings.save
    document = None
    if wants_document and session.results:
        from pytest_llmperf.session import git_commit

        document = runfile.run_document(
            session.results, verdicts=session.verdicts, fingerprint=session.fingerprint,
            commit=git_commit(session.settings.rootdir), started=started, gates=session.gates)
    return {
        "rows": report.summary_rows(session.results, session.verdicts),
        "extras": report.extra_lines(session.extras, session.verdicts),
        "starts": [[engine.label(), seconds] for engine, seconds in session.pool.starts],
        "notes": list(session.notes),
        "document": document,
    }


def merge_documents(documents: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One run file from the workers' ones: the first one's header, everyone's results."""
    documents = [d for d in documents if d]
    if not documents:
        return None
    merged = {**documents[0], "benchmarks": [], "llmperf": {**documents[0]["llmperf"],
                                                            "results": []}}
    for document in documents:
        merged["benchmarks"] += document["benchmarks"]
        merged["llmperf"]["results"] += document["llmperf"]["results"]
    return merged


def write_documents(session, payloads: list[dict[str, Any]]) -> list[str]:
    """--llmperf-json and --llmperf-save; returns lines for the terminal."""
    targets: list[Path] = []
    if session.settings.json:
        targets.append(session.settings.path(session.settings.json))
    if session.settings.save:
        targets.append(session.runs_dir() / f"{session.settings.save}.json")
    document = merge_documents([p["document"] for p in payloads])
    if document is None:
        return []
    for path in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        runfile.write_run(path, document)
    return [f"results written to {path}" for path in targets]


def summary(payloads: list[dict[str, Any]]) -> list[str]:
    """The terminal section: the table and its engine legend (with start times), then
    capacities/offline throughputs and notes."""
    rows = [row for p in payloads for row in p["rows"]]
    starts = [(label, seconds) for p in payloads for label, seconds in p["starts"]]
    lines = report.table_lines(rows) + report.engine_lines(rows, starts)
    for key in ("extras", "notes"):
        lines += [line for p in payloads for line in p[key]]
    return lines
