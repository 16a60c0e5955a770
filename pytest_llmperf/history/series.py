"""A test's series of one metric, as the trend gate, `llmperf history` and baselines from
history read it, and what else changed at a run.

A stored result is a point of its series unless its verdict says the measurement was not of the
engine (verdict/references.NOT_REFERENCES: CLIENT LIMITED, DISTURBED, ENGINE DIED, ENGINE STALLED):
such a run stays in the store and in `llmperf history`'s table, marked, but no change point is
ever drawn from it. A point without a usable value of the metric (NaN, or 0 for a metric that
must be positive to be a level) is left out of that metric's series alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.history.changepoints import Change, find_changes
from pytest_llmperf.history.store import Point
from pytest_llmperf.verdict.references import NOT_REFERENCES

__all__ = ["NOT_POINTS", "Series", "changed_text", "context", "is_point", "run_name",
           "series_of", "what_changed"]

NOT_POINTS = frozenset(status.summary for status in NOT_REFERENCES)
SOFTWARE = ("vllm", "torch", "transformers", "python", "pytest_llmperf")
COMMIT_SHOWN = 10


def is_point(point: Point) -> bool:
    return point.verdict not in NOT_POINTS


@dataclass(frozen=True)
class Series:
    """One metric's points (oldest first) with their values, and the changes found in them."""

    metric: str
    points: tuple[Point, ...]
    values: tuple[float, ...]
    changes: tuple[Change, ...]

    def at(self, change: Change) -> Point:
        return self.points[change.index]

    def level_start(self) -> int:
        """Where the level it is at now begins: its last change's first run (0 without one)."""
        return self.changes[-1].index if self.changes else 0

    def recent(self, window: int) -> list[Change]:
        """The changes whose first run is one of the last `window` runs."""
        return [change for change in self.changes if change.index >= len(self.points) - window]


def series_of(points: Iterable[Point], metric: str, min_effect: float) -> Series:
    """The series of `metric` over `points` (not-points and unusable values left out), with
    its changes larger than the factor 1 + `min_effect`."""
    kept = [(p, p.values[metric].value) for p in points if is_point(p) and metric in p.values]
    kept = [(p, v) for p, v in kept if v is not None and math.isfinite(v) and v > 0]
    values = tuple(v for _, v in kept)
    return Series(metric, tuple(p for p, _ in kept), values,
                  tuple(find_changes(values, min_effect)))


def _commit(text: str | None) -> str | None:
    if not text:
        return text
    dirty = text.endswith("-dirty")
    return text.removesuffix("-dirty")[:COMMIT_SHOWN] + ("-dirty" if dirty else "")


def context(point: Point) -> dict[str, Any]:
    """What a run was measured with, flat: versions, driver, CUDA, commit, the host (a series
    spans the nodes of one runner shape, and a slower node is a change), clocks, engine spec
    and, where the run file has it, the versions the server reported."""
    fingerprint = point.fingerprint
    out: dict[str, Any] = {key: fingerprint.get(key) for key in SOFTWARE}
    out |= {"driver": fingerprint.get("driver_version"), "CUDA": fingerprint.get("cuda_version"),
            "commit": _commit(point.commit), "host": point.host or None,
            "GPUs": ",".join(fingerprint.get("gpu_uuids") or ()) or None}
    out |= {f"clocks.{k}": v for k, v in sorted(point.clocks.items())}
    out |= {f"engine.{k}": v for k, v in sorted(point.engine.items())}
    server = point.extra.get("server")
    if isinstance(server, Mapping):
        out |= {f"server.{k}": v for k, v in sorted(server.items()) if k != "source"}
    return out


def _shown(value: Any) -> str:
    return "(none)" if value in (None, "", [], {}) else str(value)


def what_changed(before: Point, at: Point) -> list[str]:
    """"name old -> new" for everything recorded that differs between two runs."""
    old, new = context(before), context(at)
    return [f"{name} {_shown(old.get(name))} -> {_shown(new.get(name))}"
            for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]


def run_name(point: Point) -> str:
    """"run 7 (2026-11-25, commit 1a2b3c4d5e)"; the run being measured is "this run"."""
    if point.run_id is None:
        return "this run"
    details = [point.started_at.date().isoformat() if point.started_at else None,
               f"commit {_commit(point.commit)}" if point.commit else None]
    shown = ", ".join(d for d in details if d)
    return f"run {point.run_id}" + (f" ({shown})" if shown else "")


def changed_text(series: Series, change: Change) -> str:
    """What else changed at a change's first run, as one clause."""
    at = series.at(change)
    changes = what_changed(series.points[change.index - 1], at)
    where = "this run" if at.run_id is None else f"run {at.run_id}"
    if not changes:
        return (f"nothing recorded changed at {where} (versions, driver, CUDA, commit, host, "
                "clocks and engine spec as before)")
    return f"what changed at {where}: {', '.join(changes)}"

