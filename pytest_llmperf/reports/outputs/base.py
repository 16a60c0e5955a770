"""An output format: a registered writer of the run file's model (verdict/stored_run.py) and the
session's report (markdown.Report), so a new format is one module in this package and its tests:
`--llmperf-output NAME[=PATH]` asks for it by its `name`. From a conftest or a plugin of the
plugin, the same subclass is the whole change. GuideLLM's outputs work the same way:
each format a registered consumer of one report object (src/guidellm/benchmark/outputs/output.py
and outputs/csv.py in https://github.com/vllm-project/guidellm).

A writer has a `name` (what --llmperf-output calls it; the older flags --llmperf-json,
--llmperf-markdown, --llmperf-html and --llmperf-save are its aliases), says where it writes
(`files`: checked writable before anything is measured) and writes one file (`write`), returning
the summary's line: where it went, or why not. Writers that read the report
write after the run file's writers, whose lines the report then lists. A writer that reads the
run file (`reads_run`, the default) is what makes the session build one: session/outputs.py asks
the registry, so a new format needs no line there.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pytest_llmperf.registry import Registry
from pytest_llmperf.reports.markdown import Report
from pytest_llmperf.verdict.stored_run import StoredRun

__all__ = ["FORMATS", "Asked", "Output", "OutputFile", "SessionOutput", "named", "writers"]


class Paths(Protocol):
    """Where the session's settings put files (session/settings.Settings answers it)."""

    def path(self, value: Path) -> Path: ...

    def runs_dir(self) -> Path: ...


@dataclass(frozen=True)
class OutputFile:
    """One file a writer writes: the option as the user gave it, its value, and the path."""

    option: str  # "--llmperf-json", or "$GITHUB_STEP_SUMMARY"; "": how the session asked
    given: Any
    path: Path
    append: bool = False
    checked: bool = True  # checked writable before the session measures anything


@dataclass(frozen=True)
class Asked:
    """One output format asked for: the option and its value as given ("--llmperf-output",
    "json=r.json"), the format's name, and its path (None: the format's own)."""

    option: str
    given: Any
    name: str
    value: Any


@dataclass(frozen=True)
class SessionOutput:
    """What the writers write: the session's run file read through its model (None: nothing was
    measured) and, for the writers that read it, the session's report."""

    run: StoredRun | None
    report: Report | None = None


class Output(ABC):
    """One output format; a concrete subclass registers in FORMATS as it is defined."""

    name: ClassVar[str] = ""  # --llmperf-output NAME asks for it ("": asked otherwise)
    default: ClassVar[str | None] = None  # its PATH where --llmperf-output names it alone
    reads_report: ClassVar[bool] = False
    reads_run: ClassVar[bool] = True  # SessionOutput.run: built only where a writer reads it
    what: ClassVar[str] = ""  # "Markdown report": the summary's line names it

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not getattr(cls, "__abstractmethods__", None):
            FORMATS.register(cls)

    @classmethod
    def files(cls, value: Any, paths: Paths, environ: Mapping[str, str]) -> list[OutputFile]:
        """Where it writes for the value it was asked with (None: not asked); by default the
        path that names, relative to the rootdir (the session names the option it came by)."""
        if not value:
            return []
        return [OutputFile("", value, paths.path(Path(value)))]

    @abstractmethod
    def write(self, file: OutputFile, session: SessionOutput) -> str:
        """Write `file`; the summary's line."""


# Every format, this package's found in its modules; a format asked for by name under its
# `name`, one asked otherwise (the step summary: by the environment) under its class's.
FORMATS: Registry[type[Output]] = Registry(
    "output format", lambda cls: cls.name or cls.__name__, package=__name__.rpartition(".")[0])


def writers() -> list[type[Output]]:
    """Every format, the run file's writers first."""
    return sorted(FORMATS.all().values(), key=lambda cls: (cls.reads_report, cls.__name__))


def named() -> dict[str, type[Output]]:
    """The formats --llmperf-output can name, by name."""
    return {cls.name: cls for cls in FORMATS.all().values() if cls.name}
