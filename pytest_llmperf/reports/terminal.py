"""The `llmperf` section pytest prints at the end: the table of measurements, the engines, the
notes. By default it fits WIDTH columns (a 120-column terminal or a CI log page): test ids are
shown under their file's name, the columns are the most telling ones that fit, and notes that
repeat for many tests are folded. `-v` (or `--llmperf-summary full`) shows every column, the
whole test ids and every note.

Either way, errors, regressions, missed targets and client-limited runs come first. Where the
server timed its requests, `-v` also splits each test's TTFT into where the time went, and a
client whose ITL disagrees with the engine's gets one line either way (metrics/phases.py).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from pytest_llmperf.metrics import phases
from pytest_llmperf.reports import notes as notes_mod
from pytest_llmperf.reports.model import (
    COLUMNS,
    Column,
    Row,
    by_severity,
    engine_keys,
    legend,
    rank,
    shown_columns,
    status_of,
    verdict_text,
)
from pytest_llmperf.reports.notes import Note
from pytest_llmperf.verdict import detectable

WIDTH = 120
GAP = "  "
INDENT = "  "  # a test under its file's name
ELIDED = "..."
# The short table's columns, most telling first: each is added if it still fits. The first
# MUST_SHOW are shown even if the test ids then have to be shortened. A metric's column says its
# own rank (metrics/metric.py's Column.priority); the two text columns rank among them here.
TEXT_PRIORITY = {"engine": 8, "workload": 15}
BY_PRIORITY = tuple(name for name, _ in sorted(
    [*TEXT_PRIORITY.items(),
     *((column.header, column.priority) for column in COLUMNS if column.priority is not None)],
    key=lambda item: item[1]))
MUST_SHOW = 5
# Test ids are never elided below this: under ~70 columns the table then runs over the width.
MIN_TEST_WIDTH = 16


def _text_columns(rows: Sequence[Row], keys: dict[str, str]) -> list[tuple[str, list[str]]]:
    """`keys` from engine_keys over the rows in measured order, as the legend numbers them (a
    table sorted worst first would otherwise number its engines in another order)."""
    return [("engine", [keys[row["engine"]] for row in rows]),
            ("workload", [row["workload"] for row in rows])]


def _cells(columns: Sequence[Column], rows: Sequence[Row]) -> list[tuple[str, list[str]]]:
    return [(column.header, [column.cell(row["values"]) for row in rows]) for column in columns]


def _width(header: str, cells: Sequence[str]) -> int:
    return max(len(text) for text in [header, *cells])


def _layout(header: list[str], lines: list[list[str] | str]) -> list[str]:
    """Left-align the text columns (the first ones, up to the first number, and the verdict),
    right-align numbers. A plain string in `lines` is a line of its own (a file's name)."""
    rows = [line for line in lines if not isinstance(line, str)]
    widths = [_width(header[i], [row[i] for row in rows]) for i in range(len(header))]
    numbers = {i for i, name in enumerate(header) if name in {c.header for c in COLUMNS}}

    def joined(cells: list[str]) -> str:
        return GAP.join(cell.rjust(w) if i in numbers else cell.ljust(w)
                        for i, (cell, w) in enumerate(zip(cells, widths))).rstrip()

    out = [joined(header), GAP.join("-" * w for w in widths)]
    out += [line if isinstance(line, str) else joined(line) for line in lines]
    return out


def _detects(rows: Sequence[Row]) -> list[tuple[str, list[str]]]:
    """The -v column of the largest change for the worse a test's noise lets its gate see
    (verdict/detectable.py), where some row was gated."""
    if not any(row.get("detectable") for row in rows):
        return []
    return [("detects", [detectable.worst(row.get("detectable")) for row in rows])]


def full_table(rows: Sequence[Row]) -> list[str]:
    """Every column that has a value, whole test ids, one line per row, worst first."""
    keys = engine_keys(row["engine"] for row in rows)
    rows = by_severity(rows)
    columns = [*_text_columns(rows, keys), *_cells(shown_columns(rows), rows),
               *_detects(rows), ("verdict", [verdict_text(row) for row in rows])]
    header = ["test", *(name for name, _ in columns)]
    lines = [[row["test_id"], *(cells[i] for _, cells in columns)] for i, row in enumerate(rows)]
    return _layout(header, lines) + [legend(shown_columns(rows))]


def _sections(rows: Sequence[Row]) -> list[tuple[str, list[Row]]]:
    """Rows grouped by test file: the file with the worst row first, then in order of first
    appearance; within a file, worst first, then in order."""
    files: dict[str, list[Row]] = {}
    for row in by_severity(rows):
        files.setdefault(row["test_id"].split("::", 1)[0], []).append(row)
    worst = {name: min(rank(status_of(r)) for r in members)
             for name, members in files.items()}
    order = list(files)
    return sorted(files.items(), key=lambda item: (worst[item[0]], order.index(item[0])))


def _elide(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    keep = max(width - len(ELIDED), 2)
    return text[:keep - keep // 2] + ELIDED + text[len(text) - keep // 2:]


def short_table(rows: Sequence[Row], width: int = WIDTH) -> list[str]:
    """The table in `width` columns: the most telling columns that fit (a column no row has a
    value for is left out, the engine column too when there is one engine), test ids under their
    file's name, elided in the middle only if even the first MUST_SHOW columns do not fit."""
    sections = _sections(rows)
    ordered = [row for _, members in sections for row in members]
    available = dict(_text_columns(ordered, engine_keys(row["engine"] for row in rows)))
    available.update(_cells(shown_columns(ordered), ordered))
    if len(set(available["engine"])) == 1:
        del available["engine"]  # the engine legend under the table names it
    available = {name: cells for name, cells in available.items() if set(cells) != {"-"}}
    verdicts = [verdict_text(row) for row in ordered]
    labels = [INDENT + row["test_id"].split("::", 1)[1] for row in ordered]

    def used(names) -> int:
        return sum(_width(name, available[name]) + len(GAP) for name in names) \
            + _width("verdict", verdicts)

    wanted = [name for name in BY_PRIORITY if name in available]
    chosen = wanted[:MUST_SHOW]
    for name in wanted[MUST_SHOW:]:
        if used([*chosen, name]) + _width("test", labels) + len(GAP) <= width:
            chosen.append(name)
    room = max(width - used(chosen) - len(GAP), MIN_TEST_WIDTH) - len(INDENT)
    labels = [INDENT + _elide(label[len(INDENT):], room) for label in labels]
    names = [name for name in ["engine", "workload", *(c.header for c in COLUMNS)]
             if name in chosen]
    header = ["test", *names, "verdict"]
    lines: list[list[str] | str] = []
    index = 0
    for file, members in sections:
        lines.append(_elide(file, width))
        for _ in members:
            lines.append([labels[index], *(available[n][index] for n in names), verdicts[index]])
            index += 1
    shown = [c for c in COLUMNS if c.header in names]
    return _layout(header, lines) + wrap([legend(shown)], width)


def wrap(lines: Sequence[str], width: int = WIDTH) -> list[str]:
    """Lines longer than `width` continue on indented lines."""
    out = []
    for line in lines:
        out += textwrap.wrap(line, width, subsequent_indent="    ", break_on_hyphens=False) \
            if len(line) > width else [line]
    return out


def phase_lines(rows: Sequence[Row], full: bool) -> list[str]:
    """Per test: with `full`, its TTFT split into where the time went ("test: ttft 262.0 ms =
    queue 6.3 + prefill 225.1 + hand-off 19.4 + frontend and wire 11.2"); either way, a line
    where the client's ITL disagrees with the engine's. Nothing for a server without timings."""
    lines = []
    for row in rows:
        values = {key: value for key, value in row["values"].items() if value is not None}
        found = phases.split(values) if full else None
        suspect = phases.itl_check(values)
        lines += [f"{row['test_id']}: {text}" for text in (found and found.line(), suspect)
                  if text]
    return lines


def section(rows: Sequence[Row], engines: Sequence[str], others: Sequence[str],
            notes: Sequence[Note], *, full: bool, width: int = WIDTH) -> list[str]:
    """The whole section: the table, the engine legend, the other lines (capacities, offline
    throughputs, where the time went), then the notes, folded unless `full`."""
    others = [*others, *phase_lines(rows, full)]
    if full:
        table = full_table(rows) if rows else []
        return table + list(engines) + list(others) + [n.render() for n in dict.fromkeys(notes)]
    table = short_table(rows, width) if rows else []
    return table + wrap([*engines, *others, *notes_mod.fold(notes)], width)
