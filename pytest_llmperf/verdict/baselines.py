"""Baseline files: read one test's table, rewrite one test's table atomically under the
file's lock.

One file per hardware class and suite file, `baselines/<hardware class>/<suite file stem>.toml`,
one table per test id; the file's layout, field by field, is verdict/baseline_toml.py's
docstring.

Several pytest-xdist workers may update the same file at once: each update holds a FileLock on
`<file>.lock` (keep `*.toml.lock` out of git; the lock file is left in place on purpose, since
deleting a lock file races with the next holder) and replaces the file with os.replace, so a
reader sees the old file or the new one, never half of one. No pytest imports here.

The file's format is verdict/baseline_toml.py's, an entry verdict/baseline_entry.py's, the
provenance table verdict/baseline_provenance.py's, and the engine, workload and hardware checks
against a recorded provenance verdict/mismatch.py's; their names are kept here too, where the
callers have always found them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_llmperf.verdict.atomic_file import atomic_write, locked
from pytest_llmperf.verdict.baseline_entry import (
    TOLERANCE_RULE,
    Baseline,
    BaselineEntry,
    BaselineError,
    is_tolerance,
)
from pytest_llmperf.verdict.baseline_provenance import make_provenance
from pytest_llmperf.verdict.baseline_toml import (
    entry_table,
    key_path,
    new_file,
    parse_test,
    read_toml,
    toml_safe,
    with_table,
)
from pytest_llmperf.verdict.mismatch import (
    WORKLOAD_LABELS,
    engine_changes,
    engine_mismatch,
    hardware_mismatch,
    machine_id,
    workload_changes,
    workload_mismatch,
)

# The names callers import from here (the modules above hold them).
__all__ = [
    "TOLERANCE_RULE", "WORKLOAD_LABELS", "Baseline", "BaselineEntry",
    "BaselineError", "engine_changes", "engine_mismatch", "hardware_mismatch", "is_tolerance",
    "load_baseline", "machine_id", "make_provenance", "update_baseline", "workload_changes",
    "workload_mismatch",
]


def load_baseline(path: str | os.PathLike[str], test_id: str) -> Baseline | None:
    """One test's baseline, or None when the file or the test's table does not exist.

    Only that test's table is validated, so a broken entry fails the test it belongs to and no
    other. Raises BaselineError (one line: file, key, problem, fix) for a malformed table.
    """
    path = Path(path)
    fix = "fix the file, or delete it and regenerate it with --llmperf-update-baselines"
    document = read_toml(path, fix)
    if document is None or test_id not in document:
        return None
    return parse_test(path, test_id, document[test_id])


def update_baseline(
    path: str | os.PathLike[str],
    test_id: str,
    metrics: Mapping[str, BaselineEntry],
    provenance: Mapping[str, Any],
) -> None:
    """Replace one test's table (metrics and provenance) and keep every other table as it is.

    Read-modify-write under a FileLock, then an atomic replace: safe with several xdist workers
    writing the same file. Entries are checked first, so a NaN or an unknown direction raises
    BaselineError instead of writing a file that would not load.
    """
    path = Path(path)
    table = {
        "metrics": {
            name: entry_table(path, key_path(test_id, "metrics", name), metrics[name])
            for name in sorted(metrics)
        },
        "provenance": toml_safe(provenance),
    }
    fix = "fix the file, or delete it to start it afresh"
    with locked(path):
        if read_toml(path, fix) is None:
            atomic_write(path, new_file({test_id: table}))
        else:
            atomic_write(path, with_table(path.read_text(encoding="utf-8"), test_id, table))
