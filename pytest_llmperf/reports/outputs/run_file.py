"""The run file (reports/runfile.py's layout): --llmperf-output json[=PATH] (--llmperf-json PATH)
and --llmperf-output save=NAME (--llmperf-save NAME)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_llmperf.reports.outputs.base import Output, OutputFile, Paths, SessionOutput
from pytest_llmperf.reports.runfile import write_run


class RunFileOutput(Output):
    name = "json"
    default = "llmperf-results.json"

    def write(self, file: OutputFile, session: SessionOutput) -> str:
        """The summary's line says where it went or, if the disk refused it (full, gone
        read-only since the start), why not: the rest of the session's output goes on."""
        if session.run is None:
            return ""
        try:
            file.path.parent.mkdir(parents=True, exist_ok=True)
            write_run(file.path, session.run.to_plain())
        except OSError as exc:
            return (f"{file.path}: results not written ({exc.strerror or exc}); choose a "
                    "writable path")
        return f"results written to {file.path}"


class SavedRunOutput(RunFileOutput):
    """--llmperf-save NAME: the run file under the saved runs' folder, for --llmperf-compare."""

    name = "save"
    default = None  # a saved run needs a NAME

    @classmethod
    def files(cls, value: Any, paths: Paths, environ: Mapping[str, str]) -> list[OutputFile]:
        if not value:
            return []
        return [OutputFile("", value, paths.runs_dir() / Path(f"{value}.json"))]
