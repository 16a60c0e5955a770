"""`llmperf compare-pools`: the same suite on an old and a new pool of runners, judged with both
pools' measured noise.

    llmperf compare-pools --old A1.json A2.json A3.json --new B1.json B2.json B3.json
                          [--metrics ttft_s.p50,...] [--tolerance 0.1]

For a change no node can run both sides of (a driver rolled out to new nodes while the old ones
keep theirs): each pool's run files (--llmperf-json, one per node or night) become one run of
medians and spreads (reports/pools.py), and the new pool is judged against the old by
`llmperf compare`'s gate. It says first that it is weaker than a paired A/B
(docs/upgrades.md, "A new pool"): the pools differ in their nodes and nights as well as in the
change, so only a change larger than both pools' noise shows. Exit status as `llmperf
compare`'s: 0 no regression, 1 a regression, 2 unusable input.
"""

from __future__ import annotations

import argparse

from pytest_llmperf.reports import pools
from pytest_llmperf.reports.commands import compare
from pytest_llmperf.reports.commands.exits import CliError
from pytest_llmperf.reports.saved_runs import ReadRun
from pytest_llmperf.verdict import gate

__all__ = ["add_command", "run"]

# Below this many runs a pool's spread is a guess: MAD over two values is half their distance.
FEW_RUNS = 3
WEAKER = ("a pool comparison is weaker than a paired A/B: the pools differ in their nodes and "
          "nights as well as in the change, so it shows only a change larger than both pools' "
          "measured noise; where one node can run both sides, use --llmperf-ab or a "
          "before/after on that node (docs/upgrades.md)")


def add_command(commands) -> None:
    parser = commands.add_parser(
        "compare-pools", help="judge a new pool of runners against an old one, run files each",
        description="Judge the same suite's runs on a new pool against those on an old pool, "
                    "each metric's median over a pool's runs, with both pools' spreads in the "
                    "band. Exit 0 no regression, 1 regression, 2 bad input.")
    parser.add_argument("--old", nargs="+", required=True, metavar="RUN.json",
                        help="the old pool's run files (--llmperf-json), one per node or night")
    parser.add_argument("--new", nargs="+", required=True, metavar="RUN.json",
                        help="the new pool's run files")
    parser.add_argument("--metrics", metavar="NAMES", default=None,
                        help="comma-separated metrics to judge (default: each test's own gate= "
                             "list as recorded in the old pool's first run, else "
                             f"{','.join(gate.DEFAULT_GATED)})")
    parser.add_argument("--tolerance", type=compare.tolerance_type, default=None,
                        metavar="FRACTION", help="allowed relative change before the noise "
                                                 f"widens it (default: each test's own, else "
                                                 f"{gate.DEFAULT_TOLERANCE})")
    parser.set_defaults(run=run)


def _pool(runs: list[ReadRun], label: str) -> ReadRun:
    try:
        return pools.pool_of(runs, label)
    except pools.PoolError as exc:
        raise CliError(str(exc)) from None


def _describe(label: str, paths: list[str], runs: list[ReadRun]) -> str:
    nodes = pools.hosts(runs)
    return (f"{label}: {len(paths)} run(s) on {len(nodes)} node(s) ({', '.join(nodes)}): "
            f"{', '.join(paths)}")


def run(args: argparse.Namespace) -> int:
    names = compare.metric_names(args.metrics)
    old_runs = [compare.read(path) for path in args.old]
    new_runs = [compare.read(path) for path in args.new]
    old, new = _pool(old_runs, "old pool"), _pool(new_runs, "new pool")
    compare.check_metric_names(names, old, new)
    rows, verdicts = compare.compare_runs(old, new, names, args.tolerance)
    print(WEAKER)
    print(_describe("A (old pool)", args.old, old_runs))
    print(_describe("B (new pool)", args.new, new_runs))
    few = [label for label, runs in (("old", old_runs), ("new", new_runs)) if len(runs) < FEW_RUNS]
    if few:
        print(f"the {' and '.join(few)} pool has fewer than {FEW_RUNS} runs: its spread is "
              f"hardly measured, and with one run not at all (the tolerance alone judges it); "
              f"give each pool {FEW_RUNS} runs or more")
    # The nodes differ by design (listed above); anything else is the change, or a mistake.
    changes = [change for change in compare.fingerprint_changes(old_runs[0], new_runs[0])
               if not change.startswith("host ")]
    if changes:
        print("changed from the old pool to the new: " + ", ".join(changes))
    print()
    for line in compare.format_table(compare.HEADER, rows) if rows else ["no tests in either pool"]:
        print(line)
    if any(compare.NOISE_MARK in row[5] for row in rows):
        print(f"{compare.NOISE_MARK} band widened by noise: {gate.NOISE_K:g} x the combined "
              "spread of the two pools' runs")
    return compare.summarize(verdicts, rows)
