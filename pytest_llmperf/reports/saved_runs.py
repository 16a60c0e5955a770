"""Reading run files back (their model: verdict/stored_run.py; their layout: runfile.py): for
--llmperf-compare, `llmperf compare`, `llmperf plot` and the HTML report's plots. A file that
cannot be used is a `RunFileError`: one line naming the file, the place in it and the fix."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.verdict.stored_run import RunFileError, StoredResult, StoredRun, bad

__all__ = ["ReadRun", "RunFileError", "load_run", "read_run", "resolve_saved"]



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
class ReadRun:
    """A run file as read back: its fingerprint and one StoredResult per baseline key."""

    path: str
    fingerprint: dict[str, Any]
    results: dict[str, StoredResult]
    commit: str | None = None
    started: str | None = None


def read_run(path: str | os.PathLike[str]) -> ReadRun:
    """Read a run file; RunFileError (one line: file, problem, fix) when it is not one of ours."""
    name = os.fspath(path)
    run = StoredRun.from_plain(load_run(path), name)
    results: dict[str, StoredResult] = {}
    for index, saved in enumerate(run.results):
        if saved.key in results:
            raise bad(name, f"llmperf.results[{index}].key", f"{saved.key!r} appears twice")
        results[saved.key] = saved
    return ReadRun(name, run.fingerprint, results, run.commit, run.started)


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

