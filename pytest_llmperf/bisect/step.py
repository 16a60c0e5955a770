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
from pytest_llmperf.reports.saved_runs import RunFileError, read_run
from pytest_llmperf.verdict.ab_judgement import AbJudgement, PairedMetric
from pytest_llmperf.verdict.paired_ratios import PairedRatios, ab_entry, judge_pairs
from pytest_llmperf.verdict.status import Status

__all__ = ["DEFAULT_MAX_PAIRS", "StepPlan", "StepResult", "classify", "merge", "pairs_wanted",
           "step_command"]

# An unsettled step grows to at most this many pairs. On the 2-core VM a B = A step with 4 + 4
# pairs could not resolve 10% of TPOT p50 (docs/bisect.md, "Unsettled steps"); 24 pairs resolve
# about half the spread 8 do (the resolution shrinks as the square root of the pairs).
DEFAULT_MAX_PAIRS = 24


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
    # The most pairs an unsettled step may grow to (Bisect._settle): more sessions of `pairs`
    # pairs each, judged together with the first, until the step settles.
    max_pairs: int = DEFAULT_MAX_PAIRS

    def key_fields(self) -> dict[str, Any]:
        """What decides a step's outcome besides its two environments."""
        return {"test": self.test_id, "metrics": list(self.metrics), "pairs": self.pairs,
                "confirm_pairs": self.confirm_pairs, "tolerance": self.tolerance,
                "pytest_args": list(self.pytest_args), "max_pairs": self.max_pairs}


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
    # Every judged metric's raw ratios and one side's back-to-back ratios ("ratios", "nulls",
    # None for a NaN), and its direction: what `merge` judges again with more pairs.
    paired: dict[str, dict[str, list]] = field(default_factory=dict)
    directions: dict[str, str | None] = field(default_factory=dict)
    sessions: int = 1  # pytest sessions the step took: 1, and 1 more per round of more pairs

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
    """The pytest command of one step (the verdict prints the last one to reproduce it). Each
    option and its value are one word, so pytest never takes a value for a test path
    (bootstrap.pytest_command says why)."""
    command = [sys.executable, "-m", "pytest", plan.test_id, "-q", "-rfE", "-p", "no:cacheprovider",
               "--llmperf-ab-a=" + json.dumps({"python": str(a.python)}),
               "--llmperf-ab=" + json.dumps({"python": str(b.python)}),
               f"--llmperf-ab-pairs={plan.pairs}",
               f"--llmperf-ab-confirm-pairs={plan.confirm_pairs}",
               f"--llmperf-ab-tolerance={plan.tolerance:g}",
               f"--llmperf-json={run_file}"]
    if plan.history:
        command.append(f"--llmperf-history={plan.history}")
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
                           if saved.ab is not None and saved.ab.metrics), None)
        except RunFileError:
            side_b = None
    if side_b is None:
        reason = failure or _failure_line(log_file) or "the test measured no A/B"
        return StepResult(Outcome.FAILED, message=f"{reason} (log: {log_file})")
    return _judged(plan, side_b.ab or AbJudgement(), side_b.directions)


def merge(plan: StepPlan, first: StepResult, more: StepResult) -> StepResult:
    """A step's pairs and the pairs a later session measured for it, judged as one set by the
    paired rule (verdict/paired_ratios.py), as if one session had measured them all."""
    names = sorted(set(first.paired) & set(more.paired))
    if not names:  # a step remembered from before ratios were kept: nothing to add them to
        return first
    merged = {name: PairedRatios(name, _floats(first.paired[name]["ratios"])
                                 + _floats(more.paired[name]["ratios"]),
                                 nulls=_floats(first.paired[name]["nulls"])
                                 + _floats(more.paired[name]["nulls"]))
              for name in names}
    entry = ab_entry(merged, plan.tolerance, judge_pairs(merged, plan.tolerance))
    result = _judged(plan, entry, first.directions)
    result.seconds = first.seconds + more.seconds
    result.command, result.run_file = more.command, more.run_file
    result.sessions = first.sessions + more.sessions
    return result


def pairs_wanted(plan: StepPlan, result: StepResult) -> int:
    """How many pairs in all an unsettled step should grow to: the pairs its deciding metric's
    spread says would resolve the tolerance (ab.PairedRatios.pairs_to_resolve), at least one
    more session of the plan's pairs, at most the plan's most pairs."""
    paired = result.paired.get(result.metric)
    wanted = result.pairs + plan.pairs
    if paired:
        ratios = PairedRatios(result.metric, _floats(paired["ratios"]),
                              nulls=_floats(paired["nulls"]))
        wanted = max(wanted, ratios.pairs_to_resolve(plan.tolerance))
    return min(wanted, plan.max_pairs)


def _floats(values: list) -> tuple[float, ...]:
    return tuple(math.nan if value is None else float(value) for value in values)


def _judged(plan: StepPlan, entry: AbJudgement, directions: dict[str, str]) -> StepResult:
    metrics = entry.metrics
    names = list(plan.metrics) or sorted(metrics)
    missing = [name for name in names if name not in metrics]
    if missing:
        return StepResult(Outcome.FAILED, message=(
            f"the test does not gate {', '.join(missing)} (it gates {', '.join(sorted(metrics))}); "
            "bisect on one of those, or add it to the test's gate="))
    tolerance = float(entry.tolerance or plan.tolerance)
    ranked = []
    for name in names:
        metric = metrics[name]
        outcome = _metric_outcome(name, metric, tolerance, directions.get(name))
        ranked.append((_RANK[outcome], name, outcome, metric))
    _, name, outcome, metric = max(ranked, key=lambda item: item[0])
    low, high = metric.interval
    return StepResult(outcome, name, metric.median, low, high, entry.pairs, metric.message,
                      {n: metrics[n].median for n in sorted(metrics)},
                      paired={n: {"ratios": list(metrics[n].ratios),
                                  "nulls": list(metrics[n].nulls or ())}
                              for n in sorted(metrics)},
                      directions={n: directions.get(n) for n in sorted(metrics)})


# Which metric's outcome speaks for the step: any regression makes it bad; else any metric its
# pairs could not settle makes it unsettled.
_RANK = {Outcome.GOOD: 0, Outcome.UNSETTLED: 1, Outcome.BAD: 2}


def _metric_outcome(name: str, metric: PairedMetric, tolerance: float,
                    direction: str | None) -> Outcome:
    status = Status(metric.status or Status.PASS)
    if status == Status.REGRESSION:
        return Outcome.BAD
    if status == Status.INCONCLUSIVE:
        return Outcome.UNSETTLED
    median = metric.median
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
