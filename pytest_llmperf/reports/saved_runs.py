"""Reading run files back (their format: runfile.py): for --llmperf-compare, `llmperf compare`,
`llmperf plot` and the HTML report's plots. A file that cannot be used is a `RunFileError`: one
line naming the file, the place in it and the fix."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.metrics.work import ExecutedWork
from pytest_llmperf.numbers import is_real, is_whole
from pytest_llmperf.reports.runfile import FORMAT, WRITE_ONE
from pytest_llmperf.verdict.baselines import DIRECTIONS, BaselineEntry
from pytest_llmperf.verdict.gate import DEFAULT_GATED, DEFAULT_TOLERANCE
from pytest_llmperf.verdict.measurement import MeasurementRecord
from pytest_llmperf.verdict.status import Status

__all__ = ["RunFile", "RunFileError", "SavedResult", "load_run", "read_run", "resolve_saved"]


class RunFileError(InputError):
    """A run file that is missing or cannot be read; the message is one line with the fix."""


def load_run(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a run file as JSON; RunFileError (one line with the fix) when absent or malformed."""
    path = Path(path)
    name = os.fspath(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunFileError(
            f"{name}: no saved run here; save one first with --llmperf-save NAME"
        ) from None
    try:
        run = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunFileError(
            f"{name}: not valid JSON ({exc}); save the run again with --llmperf-save NAME"
        ) from None
    if not isinstance(run, dict):
        raise RunFileError(
            f"{name}: expected a JSON object, got {type(run).__name__}; "
            "save the run again with --llmperf-save NAME"
        )
    return run


@dataclass(frozen=True)
class SavedResult:
    """One test of a saved run: each metric's median over repeats, spread, n and direction,
    and its measurement record as the run file kept it (verdict, declared gate settings, side
    B's A/B judgement: verdict/measurement.py)."""

    key: str
    test_id: str
    estimates: dict[str, Estimate]
    directions: dict[str, str]
    engine: dict[str, Any] = field(default_factory=dict)
    engine_label: str = ""
    workload: dict[str, Any] = field(default_factory=dict)
    workload_label: str = ""
    engine_start_s: float | None = None
    path: str = ""
    record: MeasurementRecord | None = None  # None: a result made by hand, never judged
    work: ExecutedWork | None = None  # None: written before the run file recorded it

    @property
    def status(self) -> Status | None:
        return self.record.status if self.record else None

    @property
    def verdict(self) -> str:
        """The verdict column's words (judge.SavedRun reads them)."""
        return self.status.summary if self.status else ""

    @property
    def tolerance(self) -> float | None:
        """The tolerance the test declared (None: it left it to the default)."""
        return self.record.gate.tolerance if self.record else None

    @property
    def gated(self) -> tuple[str, ...] | None:
        """The metrics the test declared with gate= (None: it left them to the defaults)."""
        return self.record.gate.metrics if self.record else None

    @property
    def ab(self) -> dict[str, Any]:
        """Side B of a paired run: its judgement (ab.ab_entry); {} for any other result."""
        return (self.record.ab if self.record else None) or {}

    def entries(
        self, names: Iterable[str] | None = DEFAULT_GATED, tolerance: float = DEFAULT_TOLERANCE
    ) -> dict[str, BaselineEntry]:
        """Baseline entries for `names` (None: every metric) that this run measured.

        A metric saved as NaN/null is left out: there is no value to compare against.
        """
        wanted = self.estimates if names is None else [n for n in names if n in self.estimates]
        entries = {}
        for name in sorted(wanted):
            estimate = self.estimates[name]
            if not math.isfinite(estimate.value):
                continue
            spread = estimate.spread if math.isfinite(estimate.spread) else 0.0
            direction = self.directions[name]
            entries[name] = BaselineEntry(estimate.value, spread, direction, tolerance, estimate.n)
        return entries


@dataclass(frozen=True)
class RunFile:
    """A run file as read back: its fingerprint and one SavedResult per baseline key."""

    path: str
    fingerprint: dict[str, Any]
    results: dict[str, SavedResult]
    commit: str | None = None
    started: str | None = None


def _bad(path: str, where: str, problem: str) -> RunFileError:
    return RunFileError(f"{path}: {where}: {problem}; write the file again with "
                         "--llmperf-json PATH or --llmperf-save NAME")


def _number(path: str, where: str, value: Any) -> float:
    if value is None:
        return math.nan  # written as null: a NaN, see the module docstring
    if not is_real(value, nan_ok=True):
        raise _bad(path, where, f"expected a number or null, got {value!r}")
    return float(value)


def _metric(path: str, where: str, entry: Any) -> tuple[Estimate, str]:
    if not isinstance(entry, dict) or not {"value", "spread", "n", "direction"} <= set(entry):
        raise _bad(path, where, f"expected value, spread, n and direction, got {entry!r}")
    n, direction = entry["n"], entry["direction"]
    if not is_whole(n, 0):
        raise _bad(path, f"{where}.n", f"expected an integer >= 0, got {n!r}")
    if direction not in DIRECTIONS:
        raise _bad(path, f"{where}.direction", f'expected "lower" or "higher", got {direction!r}')
    value = _number(path, f"{where}.value", entry["value"])
    spread = _number(path, f"{where}.spread", entry["spread"])
    return Estimate(value, spread, n), direction


def _check_gate(path: str, where: str, entry: Any) -> None:
    """A result's declared gate settings, if any (files written before they were recorded have
    none), must be of MeasurementRecord's form."""
    if entry is None:
        return
    if not isinstance(entry, dict):
        raise _bad(path, where, f"expected an object, got {entry!r}")
    tolerance, names = entry.get("tolerance"), entry.get("metrics")
    if tolerance is not None:
        _number(path, f"{where}.tolerance", tolerance)
    if names is not None and not (isinstance(names, list)
                                  and all(isinstance(name, str) for name in names)):
        raise _bad(path, f"{where}.metrics", f"expected a list of metric names, got {names!r}")


def _object(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}  # descriptive only: never fatal


def _saved_result(path: str, index: int, item: Any) -> SavedResult:
    where = f"llmperf.results[{index}]"
    if not isinstance(item, dict):
        raise _bad(path, where, f"expected an object, got {item!r}")
    key, metrics = item.get("key"), item.get("metrics")
    if not isinstance(key, str) or not key:
        raise _bad(path, f"{where}.key", f"expected the test's key, got {key!r}")
    if not isinstance(metrics, dict):
        raise _bad(path, f"{where}.metrics", f"expected an object, got {metrics!r}")
    parsed = {name: _metric(path, f"{where}.metrics.{name}", m) for name, m in metrics.items()}
    _check_gate(path, f"{where}.gate", item.get("gate"))
    return SavedResult(
        key=key,
        test_id=str(item.get("test_id", key)),
        estimates={name: estimate for name, (estimate, _) in parsed.items()},
        directions={name: direction for name, (_, direction) in parsed.items()},
        engine=_object(item.get("engine")),
        engine_label=str(item.get("engine_label", "")),
        workload=_object(item.get("workload")),
        workload_label=str(item.get("workload_label", "")),
        engine_start_s=item.get("engine_start_s"),
        path=path,
        record=MeasurementRecord.from_plain(item),
        work=_work(path, f"{where}.work", item.get("work")),
    )


def _work(path: str, where: str, entry: Any) -> ExecutedWork | None:
    if entry is None:
        return None
    try:
        return ExecutedWork.from_dict(entry)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _bad(path, where, f"not an executed-work record ({exc})") from None


def read_run(path: str | os.PathLike[str]) -> RunFile:
    """Read a run file; RunFileError (one line: file, problem, fix) when it is not one of ours."""
    name = os.fspath(path)
    document = load_run(path)
    section = document.get("llmperf")
    if not isinstance(section, dict):
        raise RunFileError(f'{name}: not a pytest-llmperf run file (no "llmperf" key); '
                            f"{WRITE_ONE}")
    if section.get("format") != FORMAT:
        raise RunFileError(
            f"{name}: run file format {section.get('format')!r} is not supported (this "
            f"pytest-llmperf reads format {FORMAT}); {WRITE_ONE}"
        )
    items = section.get("results")
    if not isinstance(items, list):
        raise _bad(name, "llmperf.results", f"expected a list, got {items!r}")
    results: dict[str, SavedResult] = {}
    for index, item in enumerate(items):
        saved = _saved_result(name, index, item)
        if saved.key in results:
            raise _bad(name, f"llmperf.results[{index}].key", f"{saved.key!r} appears twice")
        results[saved.key] = saved
    commit_info = document.get("commit_info")
    commit = commit_info.get("id") if isinstance(commit_info, dict) else None
    fingerprint = _object(section.get("fingerprint"))
    return RunFile(name, fingerprint, results, commit, document.get("datetime"))


def resolve_saved(name_or_path: str, runs_dir: str | os.PathLike[str]) -> Path:
    """NAME -> runs_dir/NAME.json; a path ending in .json is used as is. Must exist."""
    if name_or_path.endswith(".json"):
        path = Path(name_or_path)
        if not path.is_file():
            raise RunFileError(f"{path}: no such run file; write one with --llmperf-json {path}")
        return path
    path = Path(runs_dir) / f"{name_or_path}.json"
    if not path.is_file():
        saved = sorted(p.stem for p in Path(runs_dir).glob("*.json"))
        known = f" (saved runs: {', '.join(saved)})" if saved else ""
        raise RunFileError(
            f"no saved run {name_or_path!r}: {path} does not exist{known}; save one with "
            f"--llmperf-save {name_or_path}"
        )
    return path

