"""`llmperf compare`: judge run B against run A with the plugin's gate.

    llmperf compare A.json B.json [--metrics ttft_s.p50,...] [--tolerance 0.1]
    llmperf compare AB.json      (the paired results of an --llmperf-ab run)

B is the candidate (e.g. after a vLLM upgrade), A the reference: A's saved value and spread are
the baseline, B's the current estimate, each test judged by the plugin's own path
(verdict/references.py). Exit status: 0 no regression, 1 a regression, 2 unusable input (one line
on stderr says why).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.ids import without_side
from pytest_llmperf.metrics import registry
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.reports.commands.exits import EXIT_OK, EXIT_REGRESSION, CliError
from pytest_llmperf.reports.saved_runs import ReadRun, RunFileError, StoredResult, read_run
from pytest_llmperf.reports.text_table import aligned, cell_text
from pytest_llmperf.verdict import gate
from pytest_llmperf.verdict.baseline_entry import TOLERANCE_RULE, is_tolerance
from pytest_llmperf.verdict.paired_ratios import format_ratio
from pytest_llmperf.verdict.references import Current, SavedRun, judge
from pytest_llmperf.verdict.status import Status

__all__ = ["ab_rows", "add_command", "check_metric_names", "compare_runs", "fingerprint_changes",
           "format_table", "metric_names", "read", "run", "summarize", "tolerance_type"]

NOISE_MARK = "*"
HEADER = ["test", "metric", "A", "B", "delta", "allowed", "verdict"]
AB_HEADER = ["test", "metric", "B/A median", "interval", "pairs", "allowed", "verdict"]
RIGHT_ALIGNED = {"A", "B", "delta", "allowed", "B/A median", "interval", "pairs"}


def add_command(commands) -> None:
    """Register `compare` on the `llmperf` command's subparsers."""
    compare = commands.add_parser(
        "compare", help="judge run B against run A with the plugin's gate (exit 1 on regression)",
        description="Compare two run files (--llmperf-json / --llmperf-save): B is the "
                    "candidate, A the reference. Exit 0 no regression, 1 regression, 2 bad input.",
    )
    compare.add_argument("a", metavar="A.json", help="reference run (before the change)")
    compare.add_argument("b", metavar="B.json", nargs="?", default=None,
                         help="candidate run (after the change); without it, A's paired A/B "
                              "results (a run file of --llmperf-ab)")
    compare.add_argument("--metrics", metavar="NAMES", default=None,
                         help="comma-separated metrics to judge, for every test (default: each "
                              "test's own gate= list as recorded in A, else "
                              f"{','.join(gate.DEFAULT_GATED)})")
    compare.add_argument("--tolerance", type=tolerance_type, default=None, metavar="FRACTION",
                         help="allowed relative change, widened by noise, for every test "
                              "(default: each test's own tolerance= as recorded in A, else "
                              f"{gate.DEFAULT_TOLERANCE})")
    compare.set_defaults(run=run)


def metric_names(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None  # each test's own
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise CliError(f"--metrics {text!r} names no metric; e.g. --metrics ttft_s.p50,tpot_s.p50")
    return names


def tolerance_type(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.1, got {text!r}") from None
    if not is_tolerance(value):
        raise argparse.ArgumentTypeError(f"is {TOLERANCE_RULE}, got {text}")
    return value


def _cell(value: float, fmt: Any) -> str:
    return "NaN" if math.isnan(value) else fmt(value)


def _band(verdict: gate.Verdict, fmt: Any) -> str:
    # Marked when the measured noise, not the tolerance, set the band: a wide band then says
    # "these runs are too noisy to see a smaller change", not "a large change is fine".
    if math.isnan(verdict.band):  # B has no value: there is no band to show
        return "-"
    mark = NOISE_MARK if verdict.noisy else ""
    sign = gate.band_side(verdict.value - verdict.reference, verdict.reference)
    if verdict.reference:
        return f"{sign}{verdict.band_pct:.1f}%{mark}"
    return f"{sign}{fmt(verdict.band)}{mark}"


def _delta(verdict: gate.Verdict, fmt: Any) -> str:
    if math.isnan(verdict.value):
        return "-"
    if verdict.reference:
        # `or 0.0`: a rounding-sized negative change reads +0.0%, not -0.0%.
        return f"{round(verdict.delta_pct, 1) or 0.0:+.1f}%"
    change = verdict.value - verdict.reference
    return "+-"[change < 0] + fmt(abs(change))


def _only_row(key: str, name: str, *, in_a: bool) -> list[str]:
    return [key, name, "", "", "", "", "only in A" if in_a else "only in B"]


def _metric_row(key: str, verdict: gate.Verdict, a: StoredResult) -> list[str]:
    # The gate's own unit choice, so the table and the messages printed under it agree.
    fmt = registry.formatter(verdict.name, verdict.reference, verdict.value)
    cells = [key, verdict.name, fmt(verdict.reference), _cell(verdict.value, fmt)]
    return cells + [_delta(verdict, fmt), _band(verdict, fmt), verdict.status.summary]


def compare_runs(
    a: ReadRun, b: ReadRun, names: Sequence[str] | None = None, tolerance: float | None = None
) -> tuple[list[list[str]], list[gate.Verdict]]:
    """Table rows (tests in A's order, then B's extras) and every verdict, each test judged by
    the plugin's own path (verdict/references.py's judge against A's saved test). `names` and
    `tolerance` override every test's own: by default each is judged on the metrics and
    tolerance it declared when A was measured (as `--llmperf-compare` judges it), else the
    defaults."""
    rows: list[list[str]] = []
    verdicts: list[gate.Verdict] = []
    for key in [*a.results, *(k for k in b.results if k not in a.results)]:
        if key not in b.results or key not in a.results:
            rows.append(_only_row(key, "-", in_a=key in a.results))
            continue
        saved_a, saved_b = a.results[key], b.results[key]
        gated = names or saved_a.gated or gate.DEFAULT_GATED
        reference = SavedRun(Path(a.path), key, saved_a)
        judgement = judge(Current(saved_b.estimates, work=saved_b.work), reference,
                          gated=gated, tolerance=tolerance)
        if judgement.incomparable:  # the two did other work: no metric is judged
            rows.append([key, "-", "-", "-", "-", "-", Status.NOT_COMPARABLE.summary])
            verdicts.append(gate.Verdict("work", Status.NOT_COMPARABLE, math.nan, math.nan,
                                         math.nan, math.nan, math.nan, judgement.incomparable))
            continue
        judged = judgement.report.verdicts
        by_name = {verdict.name: verdict for verdict in judged}
        for name in gated:
            if name in by_name:
                rows.append(_metric_row(key, by_name[name], saved_a))
            elif name in saved_a.estimates:  # A has it as NaN: nothing to regress from
                fmt = registry.formatter(name, saved_b.estimates.get(name, Estimate(0, 0, 0)).value)
                shown = _cell(saved_b.estimates[name].value, fmt) if name in saved_b.estimates \
                    else ""
                rows.append([key, name, "NaN", shown, "-", "-", "no value in A"])
            elif name in saved_b.estimates:
                rows.append(_only_row(key, name, in_a=False))
        verdicts += judged
    return rows, verdicts


def ab_rows(run: ReadRun) -> tuple[list[list[str]], list[gate.Verdict]]:
    """Side B of each paired A/B test in a run file: per gated metric the median B/A ratio,
    its interval, the pairs, the allowed ratio and the verdict, as the session judged it
    (llmperf.ab() ratios, which their test judged, are shown without a verdict)."""
    rows, verdicts = [], []
    for saved in run.results.values():
        if saved.ab is None:
            continue
        tolerance = saved.ab.tolerance
        for name, entry in sorted(saved.ab.metrics.items()):
            low, high = entry.interval
            cells = [without_side(saved.key), name, format_ratio(entry.median),
                     f"{format_ratio(low)}-{format_ratio(high)}", str(saved.ab.pairs)]
            if tolerance is None:
                rows.append([*cells, "-", "judged by the test"])
                continue
            status = Status(entry.status or Status.PASS)
            lower = (saved.directions.get(name) or registry.direction(name)) == "lower"
            allowed = f"<= {1 + tolerance:.3f}" if lower else f">= {1 / (1 + tolerance):.3f}"
            rows.append([*cells, allowed, status.summary])
            verdicts.append(gate.Verdict(name, status, math.nan, 1.0, math.nan, tolerance,
                                         tolerance * 100, entry.message))
    return rows, verdicts


def format_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return aligned(header, rows, RIGHT_ALIGNED)


def fingerprint_changes(a: ReadRun, b: ReadRun) -> list[str]:
    """What differs between the two machines/stacks: the upgrade under test, or a mistake."""
    changes = []
    for name in sorted(set(a.fingerprint) | set(b.fingerprint)):
        before, after = a.fingerprint.get(name), b.fingerprint.get(name)
        if before != after:
            changes.append(f"{name} {cell_text(before)} -> {cell_text(after)}")
    return changes


def read(path: str) -> ReadRun:
    try:
        return read_run(path)
    except RunFileError as exc:
        raise CliError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    if args.b is None:
        return _compare_ab(read(args.a))
    names = metric_names(args.metrics)
    a, b = read(args.a), read(args.b)
    check_metric_names(names, a, b)
    rows, verdicts = compare_runs(a, b, names, args.tolerance)
    print(f"A (reference): {a.path}{_provenance(a)}")
    print(f"B (candidate): {b.path}{_provenance(b)}")
    changes = fingerprint_changes(a, b)
    if changes:
        print("changed from A to B: " + ", ".join(changes))
    print()
    for line in format_table(HEADER, rows) if rows else ["no tests in either file"]:
        print(line)
    if any(NOISE_MARK in row[5] for row in rows):
        print(f"{NOISE_MARK} band widened by noise: {gate.NOISE_K:g} x the combined spread of "
              "A's and B's repeats")
    return summarize(verdicts, rows)


def check_metric_names(names: Sequence[str] | None, a: ReadRun, b: ReadRun) -> None:
    """--metrics names only metrics one of the runs has (CliError: one line with the known)."""
    known = {name for run in (a, b) for saved in run.results.values() for name in saved.estimates}
    try:
        gate.check_names(names or (), known, what="--metrics")
    except gate.UnknownMetricError as exc:
        raise CliError(str(exc)) from None


def _compare_ab(run: ReadRun) -> int:
    """One run file of a paired A/B session (--llmperf-ab): its paired verdicts."""
    rows, verdicts = ab_rows(run)
    if not rows:
        raise CliError(f"{run.path} has no paired A/B results (it was not run with "
                       "--llmperf-ab); to compare two runs give both: llmperf compare A.json "
                       "B.json")
    print(f"A/B run: {run.path}{_provenance(run)}; ratios are B/A per ABBA pair")
    print()
    for line in format_table(AB_HEADER, rows):
        print(line)
    return summarize(verdicts, [])


def _provenance(run: ReadRun) -> str:
    parts = [f"commit {run.commit}" if run.commit else "", run.started or ""]
    shown = ", ".join(part for part in parts if part)
    return f" ({shown})" if shown else ""


def summarize(verdicts: list[gate.Verdict], rows: list[list[str]]) -> int:
    regressions = [v for v in verdicts if v.status in (Status.REGRESSION, Status.NOT_COMPARABLE)]
    counts = {status: sum(v.status == status for v in verdicts)
              for status in (Status.REGRESSION, Status.IMPROVEMENT, Status.PASS)}
    only = sum(row[-1].startswith("only in") and row[1] == "-" for row in rows)
    print()
    incomparable = sum(v.status == Status.NOT_COMPARABLE for v in verdicts)
    print(f"{counts[Status.REGRESSION]} regression(s), {counts[Status.IMPROVEMENT]} improved, "
          f"{counts[Status.PASS]} pass; {only} test(s) in one file only"
          + (f"; {incomparable} not comparable (other work)" if incomparable else ""))
    for verdict in regressions:
        print(verdict.message)
    return EXIT_REGRESSION if regressions else EXIT_OK
