"""An output format: a registered writer of the run file's model (verdict/stored_run.py) and the
session's report (markdown.Report), so a new format is one module in this package and its tests,
plus the option that asks for it (session/settings.py). GuideLLM's outputs work the same way:
each format a registered consumer of one report object (src/guidellm/benchmark/outputs/output.py
and outputs/csv.py in https://github.com/vllm-project/guidellm).

A writer names the Settings field that asks for it (`option`, its flag --llmperf-<option>), says
where it writes (`files`: checked writable before anything is measured) and writes one file
(`write`), returning the summary's line: where it went, or why not. Writers that read the report
write after the run file's writers, whose lines the report then lists. A writer that reads the
run file (`reads_run`, the default) is what makes the session build one: session/outputs.py asks
the registry, so a new format needs no line there.
"""

from __future__ import annotations

import importlib
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pytest_llmperf.reports.markdown import Report
from pytest_llmperf.verdict.stored_run import StoredRun

__all__ = ["Output", "SessionOutput", "OutputFile", "writers"]


class Paths(Protocol):
    """Where the session's settings put files (session/settings.Settings answers it)."""

    def path(self, value: Path) -> Path: ...

    def runs_dir(self) -> Path: ...


@dataclass(frozen=True)
class OutputFile:
    """One file a writer writes: the option as the user gave it, its value, and the path."""

    option: str  # "--llmperf-json", or "$GITHUB_STEP_SUMMARY"
    given: Any
    path: Path
    append: bool = False
    checked: bool = True  # checked writable before the session measures anything


@dataclass(frozen=True)
class SessionOutput:
    """What the writers write: the session's run file read through its model (None: nothing was
    measured) and, for the writers that read it, the session's report."""

    run: StoredRun | None
    report: Report | None = None


class Output(ABC):
    """One output format; a concrete subclass is registered as it is defined."""

    registry: ClassVar[dict[str, type[Output]]] = {}
    option: ClassVar[str] = ""  # the Settings field that asks for it
    reads_report: ClassVar[bool] = False
    reads_run: ClassVar[bool] = True  # SessionOutput.run: built only where a writer reads it
    what: ClassVar[str] = ""  # "Markdown report": the summary's line names it

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not getattr(cls, "__abstractmethods__", None):
            Output.registry[cls.__name__] = cls

    @classmethod
    def files(cls, value: Any, paths: Paths, environ: Mapping[str, str]) -> list[OutputFile]:
        """Where it writes for the option's `value` (None: not asked); by default the path the
        option names, relative to the rootdir."""
        if not value:
            return []
        return [OutputFile("--llmperf-" + cls.option.replace("_", "-"), value, paths.path(value))]

    @abstractmethod
    def write(self, file: OutputFile, session: SessionOutput) -> str:
        """Write `file`; the summary's line."""


def writers() -> list[type[Output]]:
    """Every format of this package, the run file's writers first."""
    package = __name__.rpartition(".")[0]
    for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
        importlib.import_module(f"{package}.{module.name}")  # registers its writers
    return sorted(Output.registry.values(), key=lambda cls: (cls.reads_report, cls.__name__))
