"""The baseline file's TOML format: one test's table checked as it is read, and written back
in place with what a user wrote around it kept. The standard library's tomllib reads it and
tomlkit writes it: tomlkit's parse keeps every comment and space for the write, and costs for
that (baselines/cpu/test_cpu_workloads.toml, 31 kB: 154 ms against tomllib's 20 ms on a 2-core
EPYC VM, 2026-11-28), while a session reads its suite's file at every test.

One file per hardware class and suite file, `baselines/<hardware class>/<suite file stem>.toml`,
one table per test id (the pytest node id relative to the suite file, parametrization included).
Each gated metric is a table of five fields; provenance says what the numbers were measured on:

    ["test_fixed[64]".metrics."ttft_s.p50"]
    value = 0.21
    spread = 0.0041
    n = 3
    direction = "lower"
    tolerance = 0.1

    ["test_fixed[64]".metrics.output_throughput_tok_s]
    value = 4310.0
    spread = 52.3
    n = 3
    direction = "higher"
    tolerance = 0.1

    ["test_fixed[64]".provenance]
    commit = "3f2c1e0"
    date = "2026-11-22T10:04:31+00:00"

    ["test_fixed[64]".provenance.engine]
    enforce_eager = true
    max_num_seqs = 256
    model = "suites/models/tiny-llama"

    ["test_fixed[64]".provenance.fingerprint]
    count = 1
    device = "cpu"
    python = "3.11.7"
    torch = "2.13.0+cpu"
    vllm = "0.32.0"

    ["test_fixed[64]".provenance.server]      # which vLLM served it (the client's may differ)
    python = "3.11.7"
    source = "GET /version"
    torch = "2.13.0+cpu"
    vllm = "0.32.0"

    ["test_fixed[64]".provenance.workload]
    input_len = 128
    num_prompts = 64
    output_len = 64

`value` is the median of the repeats and `spread` their robust scale (stats.py), in the unit the
metric name carries; `tolerance` is a fraction (0.1 = 10%) and may be edited by hand: a rewrite
keeps it (gate.make_entries). An optional sixth field, `spread_source = "repeats" | "history" |
"prior"`, says that `spread` is the metric's run-to-run spread and where it came from
(verdict/noise.py, docs/noise.md): such an entry is gated by the noise band
max(tolerance, noise.K x spread). An entry without it (every file written before the field
existed) keeps the old band, max(tolerance, 3 x the spreads of its repeats).

Test ids, metric names and provenance keys are written sorted and floats rounded to 6
significant digits, so a rewrite of one test is a small diff. TOML has no null, so None values
in provenance are left out, and anything that is not a TOML type is written as its str().
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from collections.abc import Mapping
from datetime import date, datetime
from pathlib import Path
from typing import Any, NoReturn

import tomlkit

from pytest_llmperf.numbers import is_real, is_whole
from pytest_llmperf.verdict.baseline_entry import (
    DIRECTIONS,
    SPREAD_SOURCE,
    SPREAD_SOURCES,
    TOLERANCE_RULE,
    Baseline,
    BaselineEntry,
    BaselineError,
    is_tolerance,
)

__all__ = ["REGENERATE", "entry_table", "fail", "key_path", "new_file", "parse_test",
           "read_toml", "toml_safe", "with_table"]

REGENERATE = "fix the entry or regenerate it with --llmperf-update-baselines"
_ENTRY_FIELDS = ("value", "spread", "n", "direction", "tolerance")
_SIGNIFICANT_DIGITS = 6


def key_path(*parts: str) -> str:
    # The TOML spelling of a key path, as a user would search for it in the file.
    head, *rest = parts
    out = f'["{head}"]'
    for part in rest:
        bare = part.replace("_", "").replace("-", "").isalnum() and part.isascii()
        out += f".{part}" if bare else f'."{part}"'
    return out


def fail(path: str | os.PathLike[str], key: str, problem: str, fix: str = REGENERATE) -> NoReturn:
    raise BaselineError(f"{os.fspath(path)}: {key}: {problem}; {fix}")


def _number(path: Path, key: str, table: Mapping[str, Any], name: str) -> float:
    value = table[name]
    # bool is an int in Python but `value = true` is never a measurement.
    if not is_real(value, nan_ok=True):
        fail(path, key, f'"{name}" must be a number, got {type(value).__name__} {value!r}')
    if not math.isfinite(value) or (name != "value" and value < 0):
        kind = "finite" if name == "value" else "finite and >= 0"
        fail(path, key, f'"{name}" must be {kind}, got {value!r}')
    return float(value)


def _entry(path: Path, key: str, table: Any) -> BaselineEntry:
    if not isinstance(table, dict):
        fail(path, key, f"expected a table of {', '.join(_ENTRY_FIELDS)}, got {table!r}")
    missing = [name for name in _ENTRY_FIELDS if name not in table]
    if missing:
        fail(path, key, "missing " + ", ".join(f'"{name}"' for name in missing))
    unknown = sorted(set(table) - {*_ENTRY_FIELDS, SPREAD_SOURCE})
    if unknown:
        fail(path, key, f'unknown field "{unknown[0]}" (fields: {", ".join(_ENTRY_FIELDS)})')
    direction = table["direction"]
    if direction not in DIRECTIONS:
        fail(path, key, f'"direction" must be "lower" or "higher", got {direction!r}')
    n = table["n"]
    if not is_whole(n, 1):
        fail(path, key, f'"n" must be an integer >= 1, got {n!r}')
    tolerance = _number(path, key, table, "tolerance")
    if not is_tolerance(tolerance):
        fail(path, key, f'"tolerance" is {TOLERANCE_RULE}, got {tolerance!r}')
    source = table.get(SPREAD_SOURCE)
    if source is not None and source not in SPREAD_SOURCES:
        fail(path, key, f'"{SPREAD_SOURCE}" must be one of '
                         f'{", ".join(map(json.dumps, SPREAD_SOURCES))}, got {source!r}')
    return BaselineEntry(
        value=_number(path, key, table, "value"),
        spread=_number(path, key, table, "spread"),
        direction=direction,
        tolerance=tolerance,
        n=n,
        spread_source=source,
    )


def parse_test(path: Path, test_id: str, table: Any) -> Baseline:
    if not isinstance(table, dict):
        fail(path, key_path(test_id), f"expected a table, got {table!r}")
    unknown = sorted(set(table) - {"metrics", "provenance"})
    if unknown:
        fail(path, key_path(test_id), f'unknown key "{unknown[0]}" (keys: metrics, provenance)')
    if "metrics" not in table:
        fail(path, key_path(test_id), 'missing "metrics"')
    metrics, provenance = table["metrics"], table.get("provenance", {})
    for name, value in (("metrics", metrics), ("provenance", provenance)):
        if not isinstance(value, dict):
            fail(path, key_path(test_id, name), f"expected a table, got {value!r}")
    entries = {
        name: _entry(path, key_path(test_id, "metrics", name), entry)
        for name, entry in sorted(metrics.items())
    }
    return Baseline(entries, provenance, os.fspath(path), test_id)


def read_toml(path: Path, fix: str) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BaselineError(f"{os.fspath(path)}: not valid TOML ({exc}); {fix}") from None


def toml_safe(value: Any) -> Any:
    """Provenance as TOML can hold it: None dropped, tuples as arrays, unknown types as str."""
    if isinstance(value, Mapping):
        return {str(k): toml_safe(v) for k, v in sorted(value.items()) if v is not None}
    if isinstance(value, (list, tuple)):
        return [toml_safe(v) for v in value if v is not None]
    if isinstance(value, (bool, int, str, datetime, date)):
        return value
    if isinstance(value, float):
        return float(f"{value:.{_SIGNIFICANT_DIGITS}g}") if math.isfinite(value) else value
    return str(value)


def entry_table(path: Path, key: str, entry: BaselineEntry) -> dict[str, Any]:
    if not math.isfinite(entry.value):
        # A metric the run could not measure (NaN: no requests completed) has nothing to store.
        fail(path, key, f"refusing to write value {entry.value!r}", "leave it out of the baseline")
    fields = (*_ENTRY_FIELDS, SPREAD_SOURCE) if entry.spread_source else _ENTRY_FIELDS
    table = toml_safe({name: getattr(entry, name) for name in fields})
    _entry(path, key, table)  # refuse to write what load_baseline would reject
    # Fixed field order, not sorted: the value first is what a reader looks for.
    return {name: table[name] for name in fields}


def with_table(text: str, test_id: str, table: Mapping[str, Any]) -> str:
    """`text` with one test's table replaced in place, through tomlkit, which keeps what a user
    wrote around the values: comments (why a tolerance was widened), blank lines, the order of
    the tables (https://tomlkit.readthedocs.io/en/latest/quickstart/ , "style-preserving")."""
    document = tomlkit.parse(text)
    if isinstance(document.get(test_id), Mapping):
        _merge(document[test_id], table)
    else:
        document[test_id] = table
    return tomlkit.dumps(document)


def _merge(container: Any, new: Mapping[str, Any]) -> None:
    """Make tomlkit `container` hold `new`: keys it lacks removed, tables merged key by key (a
    comment on a kept key stays), other values replaced."""
    for key in [key for key in container if key not in new]:
        del container[key]
    for key, value in new.items():
        if isinstance(value, Mapping) and isinstance(container.get(key), Mapping):
            _merge(container[key], value)
        else:
            container[key] = value


def new_file(tables: Mapping[str, Mapping[str, Any]]) -> str:
    """A new baseline file's text: every table in one order."""
    return tomlkit.dumps(tables)
