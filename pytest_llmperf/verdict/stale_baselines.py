"""Committed baseline tables against the tests that would write them now (--llmperf-check-baselines,
plugin/check_baselines.py).

A table is stale when its test no longer exists (renamed or removed), or when the test's
measurement now sends another workload or starts another engine than the table recorded: the
gate would then say "measured with another workload" or refuse the engine on the machine the
table is for, and nobody would notice until a run there. Each stale table gives one line naming
the file, the table, what differs and the fix. Pure: the plugin hands in the tables, the tests it
collected and each measurement's identity. No pytest imports here.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.verdict import baselines, shapes

__all__ = ["Table", "identity_problems", "missing_test_problems", "read_tables", "shown_from",
           "update_command"]

@dataclass(frozen=True)
class Table:
    """One test's table in `file` (as shown: relative to the rootdir), for `hardware_class` (its
    folder: a class, or a runner shape's "h200-8gpu", verdict/shapes.py) and the suite file
    named `suite_stem`."""

    file: str
    hardware_class: str
    suite_stem: str
    key: str
    provenance: Mapping[str, Any] = field(default_factory=dict)

    @property
    def test(self) -> str:
        """The test that writes it: the key without "#n", "@point" or an A/B side."""
        return MeasurementId.parse(self.key).nodeid

    @property
    def where(self) -> str:
        return f'{self.file}: ["{self.key}"]'


def read_tables(directory: Path, shown: Callable[[Path], str]) -> tuple[list[Table], list[str]]:
    """Every table of every `<hardware class>/<suite>.toml` under `directory`, and one line for
    each file that cannot be read."""
    tables, problems = [], []
    for path in sorted(directory.glob("*/*.toml")):
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            problems.append(f"{shown(path)}: cannot be read ({exc}); fix the file, or delete it "
                            "and re-record it with --llmperf-update-baselines")
            continue
        for key, table in document.items():
            provenance = table.get("provenance") if isinstance(table, dict) else None
            tables.append(Table(shown(path), path.parent.name, path.stem, key,
                                provenance if isinstance(provenance, dict) else {}))
    return tables, problems


def update_command(hardware_class: str, suite: str) -> str:
    """What re-records a suite's tables, on a machine of that class."""
    marker = shapes.marker_of(shapes.class_of_folder(hardware_class))
    return f"pytest -m {marker} {suite} --llmperf-update-baselines"


def identity_problems(tables: Iterable[Table], suite: str, key: str, engine: Mapping[str, Any],
                      workload: Mapping[str, Any]) -> list[str]:
    """One line for each table of the measurement `key` of `suite` (a path relative to the
    rootdir) that recorded another workload or engine than `workload` and `engine` (their
    identities: session.workload_identity, session.engine_identity)."""
    stem = Path(suite).stem
    lines = []
    for table in tables:
        if (table.suite_stem, table.key) != (stem, key):
            continue
        moved = []
        if changed := baselines.workload_changes(table.provenance.get("workload"), workload):
            moved.append(f"another workload ({', '.join(changed)})")
        if changed := baselines.engine_changes(table.provenance.get("engine"), engine):
            moved.append(f"another engine ({', '.join(changed)})")
        if moved:
            lines.append(f"{table.where}: stale: {suite}::{table.test} now measures "
                         f"{' and '.join(moved)}; re-record it: "
                         f"{update_command(table.hardware_class, suite)}")
    return lines


def missing_test_problems(tables: Iterable[Table], collected: Mapping[str, set[str]],
                          suites: Mapping[str, str], unknown: set[str],
                          suite_exists: Callable[[str], bool]) -> list[str]:
    """One line for each table whose test was not collected, and one for each file whose suite
    is gone. `collected`: suite stem -> the test keys collected from it (before -k and -m
    deselect any); `suites`: suite stem -> its path relative to the rootdir; `unknown`: stems
    of suites whose collection failed or was skipped (their tests are not known, so no table of
    theirs is called stale); `suite_exists(stem)`: is there such a suite beside the collected
    ones (a suite not selected on the command line is not checked)."""
    lines, gone_files = [], set()
    for table in tables:
        stem = table.suite_stem
        if stem in unknown:
            continue
        if stem not in collected:
            if not suite_exists(stem) and table.file not in gone_files:
                gone_files.add(table.file)
                lines.append(f"{table.file}: stale: no suite {stem}.py beside the collected "
                             "suites; delete the file")
            continue
        if table.test not in collected[stem]:
            suite = suites[stem]
            lines.append(f"{table.where}: stale: no test {suite}::{table.test} (renamed or "
                         "removed); delete the table (a renamed test records its own: "
                         f"{update_command(table.hardware_class, suite)})")
    return lines


def shown_from(rootdir: Path) -> Callable[[Path], str]:
    """A path as the lines show it: relative to the rootdir where it is inside."""
    def shown(path: Path) -> str:
        relative = os.path.relpath(path, rootdir)
        return path.as_posix() if relative.startswith("..") else Path(relative).as_posix()

    return shown
