"""A plain-text table: the header, a rule of dashes, the rows; each column as wide as its widest
cell, the columns named in `right` right-aligned (numbers), trailing spaces cut. `llmperf
compare`, `llmperf history` and `llmperf bisect` print their tables with it."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

__all__ = ["aligned", "cell_text"]

GAP = "  "


def aligned(header: Sequence[str], rows: Sequence[Sequence[str]],
            right: Collection[str] = ()) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [GAP.join(cell.rjust(width) if title in right else cell.ljust(width)
                     for cell, width, title in zip(row, widths, header)).rstrip()
            for row in [header, ["-" * width for width in widths], *rows]]


def cell_text(value: Any) -> str:
    """A value as one cell: a list's items joined by spaces, nothing as "-"."""
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value)) or "-"
    return "-" if value is None else str(value)
