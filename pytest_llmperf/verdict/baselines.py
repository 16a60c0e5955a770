"""Baseline files: read one test's table, rewrite one test's table atomically, save A/B runs.

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

Several pytest-xdist workers may update the same file at once: each update holds a FileLock on
`<file>.lock` (keep `*.toml.lock` out of git; the lock file is left in place on purpose, since
deleting a lock file races with the next holder) and replaces the file with os.replace, so a
reader sees the old file or the new one, never half of one. No pytest imports here.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, NoReturn

import tomli_w
import tomlkit
from filelock import FileLock

from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.numbers import is_real, is_whole
from pytest_llmperf.secrets import redact_env
from pytest_llmperf.verdict import shapes

__all__ = [
    "DIRECTIONS",
    "LOCK_TIMEOUT_S",
    "SPREAD_SOURCES",
    "Baseline",
    "BaselineEntry",
    "BaselineError",
    "engine_changes",
    "engine_mismatch",
    "workload_changes",
    "workload_mismatch",
    "load_baseline",
    "make_provenance",
    "update_baseline",
]

DIRECTIONS = ("lower", "higher")
# A write holds the lock for milliseconds; a minute means a stuck process, not contention.
LOCK_TIMEOUT_S = 60.0
REGENERATE = "fix the entry or regenerate it with --llmperf-update-baselines"
_ENTRY_FIELDS = ("value", "spread", "n", "direction", "tolerance")
# Optional: absent in files written before it existed, which keep the old band (gate.py).
SPREAD_SOURCE = "spread_source"
SPREAD_SOURCES = ("repeats", "history", "prior")
# A tolerance is a factor minus one (gate.py): 4 lets a metric get 5x worse. Anything above is
# almost surely a percentage written as a number ("10" for 10%).
MAX_TOLERANCE = 4.0
TOLERANCE_RULE = f"a fraction (0.1 means 10%) from 0 to {MAX_TOLERANCE:g}"


def is_tolerance(value: object) -> bool:
    """Does `value` follow TOLERANCE_RULE? (A bool is not a number here.)"""
    return is_real(value, 0, MAX_TOLERANCE)
_SIGNIFICANT_DIGITS = 6


class BaselineError(InputError):
    """A baseline or saved-run file that cannot be used; the message is one line with the fix."""


@dataclass(frozen=True, slots=True)
class BaselineEntry:
    """The stored form of one gated metric; see the module docstring for the file layout."""

    value: float
    spread: float
    direction: str
    tolerance: float
    n: int
    # Where `spread` came from (SPREAD_SOURCES); None: an entry from before the field existed,
    # whose spread is its repeats' only and which the gate judges by the old rule.
    spread_source: str | None = None
    # Never stored: the band (a factor, like the tolerance) while this machine's run-to-run
    # spread is unmeasured (noise.unmeasured_here); 0 where it was measured.
    unmeasured: float = 0.0

    @classmethod
    def of(cls, estimate: Estimate, tolerance: float) -> BaselineEntry:
        """The entry of a stored estimate (its direction set) at `tolerance`; a NaN spread (one
        repeat of a metric that had none) as 0."""
        spread = estimate.spread if math.isfinite(estimate.spread) else 0.0
        return cls(estimate.value, spread, str(estimate.direction), tolerance, estimate.n)

    @property
    def estimate(self) -> Estimate:
        """The entry's numbers as the one estimate type (metrics/stats.py)."""
        return Estimate(self.value, self.spread, self.n, self.direction, self.spread_source)


@dataclass(frozen=True)
class Baseline:
    """One test's table. `path` and `test_id` say where it came from, for messages."""

    metrics: dict[str, BaselineEntry]
    provenance: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    test_id: str = ""

    @property
    def where(self) -> str:
        return f'{self.path} :: "{self.test_id}"'


def _key(*parts: str) -> str:
    # The TOML spelling of a key path, as a user would search for it in the file.
    head, *rest = parts
    out = f'["{head}"]'
    for part in rest:
        bare = part.replace("_", "").replace("-", "").isalnum() and part.isascii()
        out += f".{part}" if bare else f'."{part}"'
    return out


def _fail(path: str | os.PathLike[str], key: str, problem: str, fix: str = REGENERATE) -> NoReturn:
    raise BaselineError(f"{os.fspath(path)}: {key}: {problem}; {fix}")


def _number(path: Path, key: str, table: Mapping[str, Any], name: str) -> float:
    value = table[name]
    # bool is an int in Python but `value = true` is never a measurement.
    if not is_real(value, nan_ok=True):
        _fail(path, key, f'"{name}" must be a number, got {type(value).__name__} {value!r}')
    if not math.isfinite(value) or (name != "value" and value < 0):
        kind = "finite" if name == "value" else "finite and >= 0"
        _fail(path, key, f'"{name}" must be {kind}, got {value!r}')
    return float(value)


def _entry(path: Path, key: str, table: Any) -> BaselineEntry:
    if not isinstance(table, dict):
        _fail(path, key, f"expected a table of {', '.join(_ENTRY_FIELDS)}, got {table!r}")
    missing = [name for name in _ENTRY_FIELDS if name not in table]
    if missing:
        _fail(path, key, "missing " + ", ".join(f'"{name}"' for name in missing))
    unknown = sorted(set(table) - {*_ENTRY_FIELDS, SPREAD_SOURCE})
    if unknown:
        _fail(path, key, f'unknown field "{unknown[0]}" (fields: {", ".join(_ENTRY_FIELDS)})')
    direction = table["direction"]
    if direction not in DIRECTIONS:
        _fail(path, key, f'"direction" must be "lower" or "higher", got {direction!r}')
    n = table["n"]
    if not is_whole(n, 1):
        _fail(path, key, f'"n" must be an integer >= 1, got {n!r}')
    tolerance = _number(path, key, table, "tolerance")
    if not is_tolerance(tolerance):
        _fail(path, key, f'"tolerance" is {TOLERANCE_RULE}, got {tolerance!r}')
    source = table.get(SPREAD_SOURCE)
    if source is not None and source not in SPREAD_SOURCES:
        _fail(path, key, f'"{SPREAD_SOURCE}" must be one of '
                         f'{", ".join(map(json.dumps, SPREAD_SOURCES))}, got {source!r}')
    return BaselineEntry(
        value=_number(path, key, table, "value"),
        spread=_number(path, key, table, "spread"),
        direction=direction,
        tolerance=tolerance,
        n=n,
        spread_source=source,
    )


def _parse_test(path: Path, test_id: str, table: Any) -> Baseline:
    if not isinstance(table, dict):
        _fail(path, _key(test_id), f"expected a table, got {table!r}")
    unknown = sorted(set(table) - {"metrics", "provenance"})
    if unknown:
        _fail(path, _key(test_id), f'unknown key "{unknown[0]}" (keys: metrics, provenance)')
    if "metrics" not in table:
        _fail(path, _key(test_id), 'missing "metrics"')
    metrics, provenance = table["metrics"], table.get("provenance", {})
    for name, value in (("metrics", metrics), ("provenance", provenance)):
        if not isinstance(value, dict):
            _fail(path, _key(test_id, name), f"expected a table, got {value!r}")
    entries = {
        name: _entry(path, _key(test_id, "metrics", name), entry)
        for name, entry in sorted(metrics.items())
    }
    return Baseline(entries, provenance, os.fspath(path), test_id)


def _read_toml(path: Path, fix: str) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BaselineError(f"{os.fspath(path)}: not valid TOML ({exc}); {fix}") from None


def load_baseline(path: str | os.PathLike[str], test_id: str) -> Baseline | None:
    """One test's baseline, or None when the file or the test's table does not exist.

    Only that test's table is validated, so a broken entry fails the test it belongs to and no
    other. Raises BaselineError (one line: file, key, problem, fix) for a malformed table.
    """
    path = Path(path)
    fix = "fix the file, or delete it and regenerate it with --llmperf-update-baselines"
    document = _read_toml(path, fix)
    if document is None or test_id not in document:
        return None
    return _parse_test(path, test_id, document[test_id])


def _toml_safe(value: Any) -> Any:
    """Provenance as TOML can hold it: None dropped, tuples as arrays, unknown types as str."""
    if isinstance(value, Mapping):
        return {str(k): _toml_safe(v) for k, v in sorted(value.items()) if v is not None}
    if isinstance(value, (list, tuple)):
        return [_toml_safe(v) for v in value if v is not None]
    if isinstance(value, (bool, int, str, datetime, date)):
        return value
    if isinstance(value, float):
        return float(f"{value:.{_SIGNIFICANT_DIGITS}g}") if math.isfinite(value) else value
    return str(value)


def _entry_table(path: Path, key: str, entry: BaselineEntry) -> dict[str, Any]:
    if not math.isfinite(entry.value):
        # A metric the run could not measure (NaN: no requests completed) has nothing to store.
        _fail(path, key, f"refusing to write value {entry.value!r}", "leave it out of the baseline")
    fields = (*_ENTRY_FIELDS, SPREAD_SOURCE) if entry.spread_source else _ENTRY_FIELDS
    table = _toml_safe({name: getattr(entry, name) for name in fields})
    _entry(path, key, table)  # refuse to write what load_baseline would reject
    # Fixed field order, not sorted: the value first is what a reader looks for.
    return {name: table[name] for name in fields}


def atomic_write(path: Path, text: str) -> None:
    # The temp file must be in the same directory: os.replace is atomic only within a filesystem.
    path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp makes the file 0600; keep the mode of the file being replaced (or 0644).
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


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
            name: _entry_table(path, _key(test_id, "metrics", name), metrics[name])
            for name in sorted(metrics)
        },
        "provenance": _toml_safe(provenance),
    }
    fix = "fix the file, or delete it to start it afresh"
    with FileLock(os.fspath(path) + ".lock", timeout=LOCK_TIMEOUT_S):
        if _read_toml(path, fix) is None:  # a new file: every table in one order
            atomic_write(path, tomli_w.dumps({test_id: table}))
        else:
            atomic_write(path, _with_table(path.read_text(encoding="utf-8"), test_id, table))


def _with_table(text: str, test_id: str, table: Mapping[str, Any]) -> str:
    """`text` with one test's table replaced in place, through tomlkit, which keeps what a user
    wrote around the values: comments (why a tolerance was widened), blank lines, the order of
    the tables (tomli-w, which wrote the file before, drops every comment:
    https://tomlkit.readthedocs.io/en/latest/quickstart/ , "style-preserving")."""
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


def make_provenance(
    fingerprint: Mapping[str, Any],
    engine: Mapping[str, Any],
    workload: Mapping[str, Any],
    commit: str | None = None,
    now: datetime | None = None,
    server: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The provenance table: what was measured, on what, when, at which commit. `server`: which
    vLLM served it, as the server said (client/server_info.py); the fingerprint names the
    client's own packages, which an engine run with another interpreter does not share."""
    when = (now or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    provenance = {
        "commit": commit or "unknown",
        "date": when,
        "engine": dict(engine),
        "fingerprint": dict(fingerprint),
        "workload": dict(workload),
    }
    if server:
        provenance["server"] = dict(server)
    return provenance


def _show(value: Any) -> str:
    return "(absent)" if value is None else json.dumps(value, default=str)


def _changed(recorded: Mapping[str, Any], current: Mapping[str, Any],
             ignore: tuple[str, ...] = ()) -> list[str]:
    """"name old -> new" for each field that differs, both compared as TOML stores them (None
    dropped, tuples as lists), so a field set to None matches a field that is absent."""
    stored, now = _toml_safe(dict(recorded)), _toml_safe(dict(current))
    return [f"{name} {_show(stored.get(name))} -> {_show(now.get(name))}"
            for name in sorted(set(stored) | set(now))
            if name not in ignore and stored.get(name) != now.get(name)]


def engine_changes(recorded: Any, engine: Mapping[str, Any]) -> list[str]:
    """Each engine field that differs between a recorded engine and this test's
    ("max_num_seqs 256 -> 128"); none where nothing was recorded."""
    return _changed(_hidden(recorded), engine) if isinstance(recorded, dict) else []


def engine_mismatch(baseline: Baseline, engine: Mapping[str, Any]) -> str | None:
    """One line naming the file, the test and each engine field that differs; None if equal.
    A baseline without a recorded engine cannot be checked and gives None."""
    changed = engine_changes(baseline.provenance.get("engine"), engine)
    if not changed:
        return None
    return (
        f"{baseline.path}: {_key(baseline.test_id)}: baseline was measured with another engine "
        f"configuration ({', '.join(changed)}); if the change is intended, regenerate it with "
        "--llmperf-update-baselines"
    )


def _hidden(engine: dict[str, Any]) -> dict[str, Any]:
    """A recorded engine with its secrets hidden, as the current one is (session/provenance.py):
    a baseline written before secrets were hidden still matches, and a mismatch line never
    prints the secret it holds."""
    return {name: redact_env(value) if name in ("env", "extra_args") and isinstance(value, dict)
            else value for name, value in engine.items()}


# A workload's name is a label: renaming it changes no number. Every other field (the requests,
# their lengths, the load pattern, the seed, the API, the warm-up) does.
WORKLOAD_LABELS = ("name",)


def workload_changes(recorded: Any, workload: Mapping[str, Any] | None) -> list[str]:
    """Each workload field that differs between a reference's recorded workload and this
    test's ("num_requests 64 -> 32"); none where either is unknown."""
    if not isinstance(recorded, dict) or not workload:
        return []
    recorded = {**recorded, "source": _same_files_as(recorded.get("source"),
                                                     workload.get("source"))}
    return _changed(recorded, workload, ignore=WORKLOAD_LABELS)


def _same_files_as(recorded: Any, current: Any) -> Any:
    """`recorded` with each absolute file path that ends in `current`'s rootdir-relative path
    written as that path. References recorded before workload identities named files relative
    to the rootdir hold the recording checkout's absolute path ("/home/ci/repo/suites/data/
    p.jsonl"); the same file in this checkout is "suites/data/p.jsonl". A digest (a file outside
    the project) never matches an old path: the old reference cannot say what the file held.
    Any field may name a file (a source says which of its own do: workloads/source.py); only a
    file's field holds an absolute path in one and its tail in the other."""
    if not isinstance(recorded, dict) or not isinstance(current, dict):
        return recorded
    out = {}
    for name, value in recorded.items():
        now = current.get(name)
        if isinstance(value, str) and isinstance(now, str) and value.startswith("/") \
                and not now.startswith("/") and value.endswith("/" + now):
            value = now
        out[name] = _same_files_as(value, now)
    return out


def workload_mismatch(baseline: Baseline, workload: Mapping[str, Any] | None) -> str | None:
    """One line naming the file, the test and each workload field that differs; None if the
    baseline measured this workload (or did not record one)."""
    changed = workload_changes(baseline.provenance.get("workload"), workload)
    if not changed:
        return None
    return (f"{baseline.path}: {_key(baseline.test_id)}: baseline was measured with another "
            f"workload ({', '.join(changed)}); not compared; if the change is intended, "
            "regenerate it with --llmperf-update-baselines")


# A baseline's hardware is its runner shape (verdict/shapes.py): the GPU model and the GPUs the
# engine occupies, or the CPU model, cores and generation.
machine_id = shapes.machine_id


def hardware_mismatch(baseline: Baseline, fingerprint: Mapping[str, Any],
                      engine: Mapping[str, Any] | None = None) -> str | None:
    """One line naming what differs between the baseline's runner shape and this one (this
    machine, and `engine`, the test's engine); None when they match or the baseline recorded no
    fingerprint."""
    changed = shapes.hardware_mismatch(baseline.provenance.get("fingerprint"), fingerprint,
                                       baseline.provenance.get("engine"), engine)
    if not changed:
        return None
    return (f"{baseline.path}: {_key(baseline.test_id)}: baseline is from other hardware "
            f"({', '.join(changed)}); not gated")
