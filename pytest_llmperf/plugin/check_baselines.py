"""--llmperf-check-baselines: is every committed baseline table still the one its test would write?

    pytest --llmperf-check-baselines suites/

Tests are collected with their hardware markers bypassed (like --llmperf-check-args) and run up to
their first measurement call (`llmperf.run`, `capacity`, `offline`): there the call's workload and
engine identities, pure data from the objects the test passes, are compared with the test's table
in every `baselines/<hardware class>/<suite>.toml`, and the test ends: skipped, or failed with one
line per stale table (verdict/stale_baselines.py). No engine starts and no request is sent. At the
end of the session, each table whose test was not collected (and each file whose suite is gone)
is one more line, under "llmperf baseline check", and the session fails.

Not seen: measurements after the first in a test ("#2" tables: their test must exist, no more),
and tests whose first call is `llmperf.ab` or `sweep` (they write no baseline table).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import pytest

from pytest_llmperf import ids
from pytest_llmperf.verdict import stale_baselines
from pytest_llmperf.verdict.stale_baselines import Table

PLUGIN_NAME = "llmperf-check-baselines"


class CheckBaselinesPlugin:
    """The session's tables (read once), the tests collected, and the lines found at the end."""

    def __init__(self, baseline_dir: Path, rootdir: Path) -> None:
        self.baseline_dir, self.rootdir = baseline_dir, rootdir
        self.shown = stale_baselines.shown_from(rootdir)
        self._tables: tuple[list[Table], list[str]] | None = None
        self.collected: dict[str, set[str]] = {}  # suite stem -> test keys
        self.suites: dict[str, str] = {}  # suite stem -> its path as shown
        self.suite_dirs: set[Path] = set()
        self.unknown: set[str] = set()  # suites whose tests are not known
        self.lines: list[str] = []

    def _read(self) -> tuple[list[Table], list[str]]:
        """Every committed table, and a line for each file that cannot be read."""
        if self._tables is None:
            self._tables = stale_baselines.read_tables(self.baseline_dir, self.shown)
        return self._tables

    @property
    def tables(self) -> list[Table]:
        return self._read()[0]

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A suite that failed to import (or skipped itself) has tests nobody knows: none of
        its tables is called stale."""
        path = report.nodeid.split("::", 1)[0]
        if path.endswith(".py") and not report.passed:
            self.unknown.add(Path(path).stem)

    @pytest.hookimpl(tryfirst=True)  # before -k and -m deselect: those tests still exist
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            path = Path(item.path)
            self.collected.setdefault(path.stem, set()).add(ids.test_key(item.nodeid))
            self.suites[path.stem] = self.shown(path)
            self.suite_dirs.add(path.parent)

    def end_test(self, item: pytest.Item, key: str, engine: dict[str, Any] | None,
                 workload: dict[str, Any] | None, call: str) -> NoReturn:
        """The test's first measurement `call`: fail it for each stale table, else skip it."""
        suite = self.shown(Path(item.path))
        if workload is None or engine is None:
            _skip(f"baselines not checked: llmperf.{call} writes no baseline table")
        lines = stale_baselines.identity_problems(self.tables, suite, key, engine, workload)
        if lines:
            pytest.fail("\n".join(lines), pytrace=False)
        stem = Path(item.path).stem
        files = [t.file for t in self.tables if (t.suite_stem, t.key) == (stem, key)]
        _skip(f"baseline workload and engine as recorded in {', '.join(files)}" if files
              else f'no committed baseline table ["{key}"]')

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        tables, unreadable = self._read()
        self.lines = unreadable + stale_baselines.missing_test_problems(
            tables, self.collected, self.suites, self.unknown, self._suite_exists)
        if self.lines and session.exitstatus in (pytest.ExitCode.OK,
                                                 pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.lines:
            terminalreporter.section("llmperf baseline check", red=True)
            for line in self.lines:
                terminalreporter.write_line(line)

    def _suite_exists(self, stem: str) -> bool:
        return any((directory / f"{stem}.py").is_file() for directory in self.suite_dirs)


def _skip(reason: str) -> NoReturn:
    skipped = pytest.skip.Exception(reason)
    # -rs then names the test, not this line: what pytest does for a fixture's skip.
    skipped._use_item_location = True
    raise skipped


def register(config: pytest.Config, baseline_dir: Path, rootdir: Path) -> None:
    """Load the check for this session. One process: pytest-xdist's controller collects no
    tests of its own, so it could not tell which tables lost theirs."""
    if getattr(config.option, "numprocesses", None):
        raise pytest.UsageError("pytest-llmperf: --llmperf-check-baselines runs in one process "
                                "(it starts no engine): drop -n")
    config.pluginmanager.register(CheckBaselinesPlugin(baseline_dir, rootdir), PLUGIN_NAME)


def plugin_of(config: pytest.Config) -> CheckBaselinesPlugin | None:
    return config.pluginmanager.get_plugin(PLUGIN_NAME)
