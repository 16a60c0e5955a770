"""The highest rate at which MLPerf's Server scenario stays VALID on this machine, found the way
a submitter finds it: a short, bounded search over the target QPS, each step a whole Server run
judged by the scenario's own rules (workloads/scenarios.judge_server).

LoadGen's FindPeakPerformance test mode searches the same way
(https://github.com/mlcommons/inference/blob/master/loadgen/loadgen.cc): it finds a rate that is
VALID and one that is not, then bisects between them. Here the upper bound comes from what the
engine completes with a closed-loop burst (an open loop cannot sustain more than that), so the
search starts at a share of it and moves down while a run is INVALID, then bisects (in log space:
loads span orders of magnitude and the tolerance is relative) until the two rates are within
`rel_tol` or the runs are spent. The answer is the highest VALID rate measured; none is a
finding of its own (no rate above `low` was VALID), never a guess. Pure: the caller runs a rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pytest_llmperf.errors import InputError
from pytest_llmperf.workloads.scenarios import ScenarioVerdict

__all__ = ["DOWN_FACTOR", "PeakRun", "PeakSearch", "find_peak_qps"]

# A step down from an INVALID rate: 0.7 brings a rate 40% over the peak under it in one step,
# and a start at twice the peak in two.
DOWN_FACTOR = 0.7


@dataclass(frozen=True)
class PeakRun:
    qps: float
    verdict: ScenarioVerdict

    @property
    def valid(self) -> bool:
        return self.verdict.valid


@dataclass(frozen=True)
class PeakSearch:
    qps: float  # the highest VALID target QPS measured; 0.0: none
    runs: tuple[PeakRun, ...]
    note: str

    @property
    def found(self) -> bool:
        return self.qps > 0

    def table(self) -> list[str]:
        """One line per run, in the order run: its target QPS and verdict."""
        return [f"{run.qps:8.3g} QPS  {run.verdict.status}"
                + ("" if run.valid else f"  ({'; '.join(run.verdict.reasons)})")
                for run in self.runs]


def find_peak_qps(run_at: Callable[[float], ScenarioVerdict], *, start: float, high: float,
                  low: float = 1.0, rel_tol: float = 0.3, max_runs: int = 4) -> PeakSearch:
    """`run_at(qps)` runs the Server scenario at `qps` and returns its verdict. `start` first;
    `high` is a rate known to be out of reach (or the most the caller will offer: a VALID run
    there ends the search); `low` the lowest rate worth running."""
    _check(start, high, low, rel_tol, max_runs)
    runs: list[PeakRun] = []

    def probe(qps: float) -> PeakRun:
        runs.append(PeakRun(qps, run_at(qps)))
        return runs[-1]

    first = probe(start)
    valid, invalid = (first.qps, high) if first.valid else (None, first.qps)
    while valid is None:  # down until a rate holds
        qps = invalid * DOWN_FACTOR
        if qps < low or len(runs) >= max_runs:
            why = "none was" if qps < low else f"out of runs ({max_runs})"
            return PeakSearch(0.0, tuple(runs), f"no VALID rate from {start:.3g} QPS down to "
                                                f"{invalid:.3g}: {why}; "
                                                f"{'; '.join(runs[-1].verdict.reasons)}")
        if probe(qps).valid:
            valid = qps
        else:
            invalid = qps
    while invalid / valid - 1 >= rel_tol and len(runs) < max_runs and valid < high:
        middle = probe(math.sqrt(valid * invalid))
        valid, invalid = (middle.qps, invalid) if middle.valid else (valid, middle.qps)
    return PeakSearch(valid, tuple(runs), _note(runs, valid, invalid, high, rel_tol))


def _note(runs: list[PeakRun], valid: float, invalid: float, high: float,
          rel_tol: float) -> str:
    if valid >= high:
        bound = f" (the most offered, {high:.3g})"
    elif any(run.qps == invalid and not run.valid for run in runs):
        bound = f", INVALID at {invalid:.3g}"
    else:
        bound = f", under the {high:.3g} QPS out of reach"
    converged = valid >= high or invalid / valid - 1 < rel_tol
    return (f"VALID at {valid:.3g} QPS{bound} after {len(runs)} runs"
            + ("" if converged else f"; not within {rel_tol:.0%} (raise max_runs)"))


def _check(start: float, high: float, low: float, rel_tol: float, max_runs: int) -> None:
    if not 0 < low <= start <= high:
        raise InputError(f"find_peak_qps: need 0 < low <= start <= high, got low={low}, "
                         f"start={start}, high={high}; start between the two bounds")
    if rel_tol <= 0 or max_runs < 1:
        raise InputError(f"find_peak_qps: rel_tol must be > 0 and max_runs >= 1, got "
                         f"rel_tol={rel_tol}, max_runs={max_runs}")
