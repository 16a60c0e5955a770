"""Replaying published production traces: when each request came, how long it was, and (for
Mooncake) which prompt blocks it shared with earlier requests.

Three formats, as their publishers ship them:
- Mooncake (https://github.com/kvcache-ai/Mooncake, FAST25-release/traces): JSONL, one object per
  request: `timestamp` (ms since the trace's start), `input_length`, `output_length`, `hash_ids`
  (one id per 512-token block of the prompt; requests sharing an id share that block);
- Azure LLM inference traces (https://github.com/Azure/AzurePublicDataset,
  AzureLLMInferenceTrace_{code,conv}.csv): `TIMESTAMP` (a datetime), `ContextTokens`,
  `GeneratedTokens`;
- BurstGPT (https://github.com/HPMLL/BurstGPT, data/BurstGPT_*.csv): `Timestamp` (seconds),
  `Request tokens`, `Response tokens`, and columns we do not need (`Model`, `Total tokens`,
  `Log Type`).

A trace is read whole and checked before anything is sent: a bad row is one line naming the file,
its line and the field. Prompts are random token ids of the trace's lengths; a Mooncake prompt is
built from per-hash-id blocks drawn from a seed and the id, so equal ids give equal blocks and the
trace's prefix reuse reaches the server's prefix cache as it did in production.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from pytest_llmperf.records import Request
from pytest_llmperf.workloads import prompts
from pytest_llmperf.workloads.datasets import DatasetError
from pytest_llmperf.workloads.source import NameFile, Source

__all__ = ["FORMATS", "MOONCAKE_BLOCK_TOKENS", "TraceRow", "TraceSource", "check_speedup",
           "read_trace", "replay_offsets", "select"]

TraceFormat = Literal["mooncake", "azure", "burstgpt"]
FORMATS: tuple[str, ...] = ("mooncake", "azure", "burstgpt")
MOONCAKE_BLOCK_TOKENS = 512  # Mooncake's traces hash prompts in blocks of 512 tokens

# (time column, input column, output column) of the CSV formats
_CSV_COLUMNS = {"azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
                "burstgpt": ("Timestamp", "Request tokens", "Response tokens")}
_MOONCAKE_FIELDS = ("timestamp", "input_length", "output_length")


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One request of a trace: seconds since the trace's first row, its lengths, its blocks."""

    offset_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


def _count(where: str, name: str, value: Any, hint: str = "") -> int:
    if value is None or value == "":
        raise DatasetError(f"{where}: {name!r} is missing")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DatasetError(f"{where}: {name!r} is {value!r}, not a number") from None
    if number != int(number) or number < 1:
        raise DatasetError(f"{where}: {name!r} is {value!r}; a token count must be a whole "
                           f"number >= 1{hint}")
    return int(number)


def _mooncake_row(where: str, line: str) -> tuple[float, int, int, tuple[int, ...]]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{where}: not JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: a Mooncake row is a JSON object, got {type(obj).__name__}")
    missing = [f for f in _MOONCAKE_FIELDS if f not in obj]
    if missing:
        raise DatasetError(f"{where}: {missing[0]!r} is missing")
    stamp = obj["timestamp"]
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or stamp < 0:
        raise DatasetError(f"{where}: 'timestamp' is {stamp!r}; Mooncake's is ms >= 0")
    ids = obj.get("hash_ids", [])
    if not isinstance(ids, list) or not all(isinstance(h, int) for h in ids):
        raise DatasetError(f"{where}: 'hash_ids' is {ids!r}; a list of ints")
    return (stamp / 1000.0, _count(where, "input_length", obj["input_length"]),
            _count(where, "output_length", obj["output_length"]), tuple(ids))


def _mooncake(path: Path) -> Iterator[tuple[str, tuple]]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                where = f"{path} line {number}"
                yield where, _mooncake_row(where, line)


def _csv_rows(path: Path, fmt: str, when: Callable[[str, str], float]) -> Iterator[tuple]:
    time_col, in_col, out_col = _CSV_COLUMNS[fmt]
    hint = ("; BurstGPT's failed requests have 0 response tokens: use its "
            "BurstGPT_without_fails_*.csv" if fmt == "burstgpt" else "")
    with path.open(encoding="utf-8", newline="") as file:
        reader = csv.DictReader(file)
        absent = [c for c in (time_col, in_col, out_col) if c not in (reader.fieldnames or [])]
        if absent:
            label = {"azure": "an Azure LLM inference", "burstgpt": "a BurstGPT"}[fmt]
            raise DatasetError(f"{path}: no {absent[0]!r} column; {label} trace has "
                               f"{time_col!r}, {in_col!r} and {out_col!r}")
        for row in reader:
            where = f"{path} line {reader.line_num}"
            stamp = row.get(time_col)
            if stamp is None or stamp == "":
                raise DatasetError(f"{where}: {time_col!r} is missing")
            yield where, (when(where, stamp), _count(where, in_col, row.get(in_col)),
                          _count(where, out_col, row.get(out_col), hint), ())


def _seconds(where: str, stamp: str) -> float:
    try:
        value = float(stamp)
    except ValueError:
        raise DatasetError(f"{where}: 'Timestamp' is {stamp!r}, not seconds") from None
    if value < 0:
        raise DatasetError(f"{where}: 'Timestamp' is {stamp!r}; seconds >= 0")
    return value


def _datetime_reader() -> Callable[[str, str], float]:
    """Azure's TIMESTAMP as seconds since the first row's (datetimes, 7 fraction digits)."""
    first: list[datetime] = []

    def when(where: str, stamp: str) -> float:
        try:
            moment = datetime.fromisoformat(stamp.strip())
        except ValueError:
            raise DatasetError(f"{where}: 'TIMESTAMP' is {stamp!r}, not a datetime") from None
        first[:] = first or [moment]
        try:
            return (moment - first[0]).total_seconds()
        except TypeError:  # one with a time zone, one without
            raise DatasetError(f"{where}: 'TIMESTAMP' {stamp!r} mixes time zones with the "
                               "first row's") from None
    return when


def read_trace(path: str | Path, fmt: str) -> list[TraceRow]:
    """Every row of the trace, in file order, offsets from its first row; checked whole."""
    path = Path(path)
    if fmt not in FORMATS:
        raise DatasetError(f"trace format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if not path.is_file():
        raise DatasetError(f"{path}: no such trace file")
    if fmt == "mooncake":
        parsed = _mooncake(path)
    else:
        parsed = _csv_rows(path, fmt, _seconds if fmt == "burstgpt" else _datetime_reader())
    rows: list[TraceRow] = []
    time_name = {"mooncake": "timestamp", "azure": "TIMESTAMP", "burstgpt": "Timestamp"}[fmt]
    for where, (stamp, n_in, n_out, ids) in parsed:
        if rows and stamp < rows[-1].offset_s:
            raise DatasetError(f"{where}: {time_name!r} goes backwards (a trace's rows must be "
                               "in time order)")
        rows.append(TraceRow(stamp, n_in, n_out, ids))
    if not rows:
        raise DatasetError(f"{path}: no rows")
    first = rows[0].offset_s
    return [TraceRow(r.offset_s - first, r.input_tokens, r.output_tokens, r.hash_ids)
            for r in rows]


def select(rows: list[TraceRow], *, start_s: float = 0.0, duration_s: float | None = None,
           num_requests: int | None = None) -> list[TraceRow]:
    """The rows in [start_s, start_s + duration_s) of trace time, the first `num_requests`."""
    end = float("inf") if duration_s is None else start_s + duration_s
    chosen = [r for r in rows if start_s <= r.offset_s < end][:num_requests]
    if not chosen:
        raise DatasetError(f"no trace rows between {start_s:g} s and {end:g} s (the trace spans "
                           f"{rows[-1].offset_s:g} s)")
    return chosen


def check_speedup(speedup: Any) -> float:
    """`speedup` as a float, or the one line that says what a speedup must be."""
    if isinstance(speedup, bool) or not (isinstance(speedup, (int, float)) and speedup > 0
                                         and math.isfinite(speedup)):
        raise DatasetError(f"speedup must be a finite number > 0, got {speedup!r}")
    return float(speedup)


def replay_offsets(rows: tuple[TraceRow, ...] | list[TraceRow],
                   speedup: float) -> tuple[float, ...]:
    """When each row is sent, in seconds from the first: its trace offset / speedup."""
    first = rows[0].offset_s
    return tuple((r.offset_s - first) / speedup for r in rows)


@dataclass(frozen=True, kw_only=True)
class TraceSource(Source):
    """A trace's selected rows as token-id prompts; warm-up requests (asked for beyond the rows)
    come first, with the first row's lengths and prompts of their own. `speedup` is the pace
    the rows are replayed at (the workload's schedule is replay_offsets(rows, speedup)): kept
    here so a capacity search can replay the same rows faster (loads.speedup_workload)."""

    file_fields: ClassVar[tuple[str, ...]] = ("path",)
    path: str
    format: str
    rows: tuple[TraceRow, ...] = field(repr=False)
    block_tokens: int = MOONCAKE_BLOCK_TOKENS
    speedup: float = 1.0

    def to_dict(self, name_file: NameFile = str) -> dict[str, Any]:
        return {"type": "TraceSource", "path": name_file(self.path), "format": self.format,
                "rows": len(self.rows), "block_tokens": self.block_tokens,
                "speedup": self.speedup}

    def at_speedup(self, speedup: float) -> TraceSource:
        return replace(self, speedup=check_speedup(speedup))

    @property
    def offsets_s(self) -> tuple[float, ...]:
        """When each row is sent at this source's speedup (the Trace pattern's schedule)."""
        return replay_offsets(self.rows, self.speedup)

    def requests(self, n: int, tokenizer: Any, rng: np.random.Generator) -> list[Request]:
        extra = n - len(self.rows)
        first = self.rows[0]
        warm = prompts.token_id_prompts([first.input_tokens] * extra, tokenizer, rng)
        block_seed = int(rng.integers(2**62))
        texts = [*warm, *trace_prompts(self.rows, tokenizer, rng, block_seed, self.block_tokens)]
        outputs = [first.output_tokens] * extra + [r.output_tokens for r in self.rows]
        return prompts.make_requests(texts, outputs)


def trace_prompts(rows: tuple[TraceRow, ...], tokenizer: Any, rng: np.random.Generator,
                  block_seed: int, block_tokens: int) -> list[tuple[int, ...]]:
    """Each row's prompt: its hash ids' blocks (the same id, the same tokens), cut to its input
    length, or filled up with unique random tokens where the blocks fall short."""
    allowed = prompts._allowed_ids(tokenizer)  # the vocabulary minus special ids
    blocks: dict[int, tuple[int, ...]] = {}

    def block(h: int) -> tuple[int, ...]:
        if h not in blocks:
            draw = np.random.default_rng([block_seed, h & (2**63 - 1)])
            blocks[h] = tuple(allowed[draw.integers(0, allowed.size, block_tokens)].tolist())
        return blocks[h]

    out = []
    for row in rows:
        shared = tuple(t for h in row.hash_ids for t in block(h))[: row.input_tokens]
        rest = row.input_tokens - len(shared)
        fill = allowed[rng.integers(0, allowed.size, rest)].tolist() if rest else []
        out.append(shared + tuple(fill))
    return out
