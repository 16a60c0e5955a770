"""One step of a bisection: the test measured by paired A/B with side A's interpreter against
side B's, in a pytest session of its own, and what its run file says.

A session per step, not a step inside this process: an engine that crashes or a candidate that
cannot import vLLM ends that session, not the search; the command is one a person can rerun to
see the same A/B (the verdict prints the last one); and every step's measurements go into the
results store as any run's do.
"""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.bisect.environments import Environment
from pytest_llmperf.bisect.search import Outcome
from pytest_llmperf.metrics import registry
from pytest_llmperf.reports.saved_runs import RunFileError, SavedResult, read_run
from pytest_llmperf.verdict.status import Status

__all__ = ["StepPlan", "StepResult", "classify", "step_command"]


@dataclass(frozen=True)
class StepPlan:
    """How every step measures: the test, the A/B settings, the metrics that decide, and what
    else the user passes to pytest (e.g. -m cpu, --llmperf-hardware h200)."""

    test_id: str
    metrics: tuple[str, ...] = ()  # () : any metric the test gates
    pairs: int = 4
    confirm_pairs: int = 4
    tolerance: float = 0.10
    pytest_args: tuple[str, ...] = ()
    history: str | None = None  # --llmperf-history for the steps' sessions (None: its default)
    timeout_s: float | None = None

    def key_fields(self) -> dict[str, Any]:
        """What decides a step's outcome besides its two environments."""
        return {"test": self.test_id, "metrics": list(self.metrics), "pairs": self.pairs,
                "confirm_pairs": self.confirm_pairs, "tolerance": self.tolerance,
                "pytest_args": list(self.pytest_args)}


@dataclass
class StepResult:
    """What one step found, kept in the results store (to_plain) so a resumed search reads it
    instead of measuring again."""

    outcome: Outcome
    metric: str = ""  # the metric that decided; "" when the step failed
    median: float | None = None  # its B/A median, interval and pairs
    low: float | None = None
    high: float | None = None
    pairs: int = 0
    message: str = ""  # the A/B verdict's line, or why the step failed
    ratios: dict[str, float | None] = field(default_factory=dict)  # every judged metric's median
    seconds: float = 0.0
    command: list[str] = field(default_factory=list)
    run_file: str = ""

    def to_plain(self) -> dict[str, Any]:
        plain = asdict(self)
        plain["outcome"] = self.outcome.value
        return plain

    @classmethod
    def from_plain(cls, plain: dict[str, Any]) -> StepResult:
        known = {name: plain[name] for name in cls.__dataclass_fields__ if name in plain}
        known["outcome"] = Outcome(plain["outcome"])
        return cls(**known)


def step_command(plan: StepPlan, a: Environment, b: Environment, run_file: Path) -> list[str]:
    """The pytest command of one step (the verdict prints the last one to reproduce it)."""
    command = [sys.executable, "-m", "pytest", plan.test_id, "-q", "-rfE", "-p", "no:cacheprovider",
               "--llmperf-ab-a", json.dumps({"python": str(a.python)}),
               "--llmperf-ab", json.dumps({"python": str(b.python)}),
               "--llmperf-ab-pairs", str(plan.pairs),
               "--llmperf-ab-confirm-pairs", str(plan.confirm_pairs),
               "--llmperf-ab-tolerance", f"{plan.tolerance:g}",
               "--llmperf-json", str(run_file)]
    if plan.history:
        command += ["--llmperf-history", plan.history]
    return command + list(plan.pytest_args)


def run_step(plan: StepPlan, a: Environment, b: Environment, run_file: Path,
             log_file: Path) -> StepResult:
    """Measure the step in its own pytest session; its output goes to `log_file`."""
    command = step_command(plan, a, b, run_file)
    run_file.unlink(missing_ok=True)
    started = time.monotonic()
    try:
        with open(log_file, "w", encoding="utf-8") as log:
            log.write(f"$ {shlex.join(command)}\n")
            log.flush()
            subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, text=True,
                           timeout=plan.timeout_s)
        failure = None
    except subprocess.TimeoutExpired:
        failure = f"the step ran past {plan.timeout_s:.0f} s and was stopped"
    seconds = time.monotonic() - started
    result = classify(plan, run_file, log_file, failure)
    result.seconds, result.command, result.run_file = seconds, command, str(run_file)
    return result


def classify(plan: StepPlan, run_file: Path, log_file: Path, failure: str | None = None
             ) -> StepResult:
    """The step's outcome from its run file: side B's A/B judgement of the deciding metrics.
    FAILED, with pytest's own line, where the session judged no A/B."""
    side_b = None
    if failure is None:
        try:
            side_b = next((saved for saved in read_run(run_file).results.values()
                           if saved.ab.get("metrics")), None)
        except RunFileError:
            side_b = None
    if side_b is None:
        reason = failure or _failure_line(log_file) or "the test measured no A/B"
        return StepResult(Outcome.FAILED, message=f"{reason} (log: {log_file})")
    return _judged(plan, side_b)


def _judged(plan: StepPlan, side_b: SavedResult) -> StepResult:
    entry = side_b.ab
    metrics: dict[str, dict[str, Any]] = entry["metrics"]
    names = list(plan.metrics) or sorted(metrics)
    missing = [name for name in names if name not in metrics]
    if missing:
        return StepResult(Outcome.FAILED, message=(
            f"the test does not gate {', '.join(missing)} (it gates {', '.join(sorted(metrics))}); "
            "bisect on one of those, or add it to the test's gate="))
    tolerance = float(entry.get("tolerance") or plan.tolerance)
    ranked = []
    for name in names:
        metric = metrics[name]
        outcome = _metric_outcome(name, metric, tolerance, side_b.directions.get(name))
        ranked.append((_RANK[outcome], name, outcome, metric))
    _, name, outcome, metric = max(ranked, key=lambda item: item[0])
    low, high = (metric.get("interval") or [None, None])[:2]
    return StepResult(outcome, name, metric.get("median"), low, high, int(entry.get("pairs", 0)),
                      str(metric.get("message", "")),
                      {n: metrics[n].get("median") for n in sorted(metrics)})


# Which metric's outcome speaks for the step: any regression makes it bad; else any metric its
# pairs could not settle makes it unsettled.
_RANK = {Outcome.GOOD: 0, Outcome.UNSETTLED: 1, Outcome.BAD: 2}


def _metric_outcome(name: str, metric: dict[str, Any], tolerance: float,
                    direction: str | None) -> Outcome:
    status = Status(metric.get("status") or Status.PASS)
    if status == Status.REGRESSION:
        return Outcome.BAD
    if status == Status.INCONCLUSIVE:
        return Outcome.UNSETTLED
    median = metric.get("median")
    if median is None or not math.isfinite(median):
        return Outcome.UNSETTLED
    # "no change detected": worse than the band allows, but the interval still holds 1 (or the
    # confirm pairs did not repeat it). A pass for a test; for a search, a step it cannot use.
    lower = (direction or registry.direction(name)) == "lower"
    limit = 1 + tolerance if lower else 1 / (1 + tolerance)
    beyond = median > limit if lower else median < limit
    return Outcome.UNSETTLED if beyond else Outcome.GOOD


def _failure_line(log_file: Path) -> str:
    """pytest's short summary line for the test (`FAILED id - message`), or its last error."""
    try:
        lines = log_file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    for line in lines:
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" - ", 1)[-1].strip()
    errors = [line[2:].strip() for line in lines if line.startswith("E ")]
    return errors[-1] if errors else ""
