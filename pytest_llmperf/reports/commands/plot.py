"""`llmperf plot RUN.json [RUN.json ...] -o DIR`: the run files' pictures as PNGs
(reports/plots.py).

One run file gives its sweeps, capacity searches, a conversation's TTFT by turn, a trace
replay's offered against achieved rate, latency distributions and A/B ratios; several
(nightly runs) add each gated metric over time with its baseline's band.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_llmperf.reports import plotdata, plots
from pytest_llmperf.reports.commands.exits import EXIT_OK, EXIT_USAGE
from pytest_llmperf.reports.saved_runs import RunFileError, load_run, read_run


def add_command(commands) -> None:
    """Register `plot` on the `llmperf` command's subparsers."""
    plot = commands.add_parser(
        "plot", help="draw run files (--llmperf-json) as PNGs: sweeps, capacity searches, "
                     "TTFT by turn, trace rates, latencies, A/B ratios, metrics over time",
        description="Write PNGs of one or more run files. Several files (nightly runs) add each "
                    "gated metric over time with its baseline's band. Needs the plots extra: "
                    "pip install 'pytest-llmperf[plots]'.")
    plot.add_argument("runs", nargs="+", metavar="RUN.json", help="run files to draw")
    plot.add_argument("-o", "--output", type=Path, default=Path("plots"), metavar="DIR",
                      help="directory for the PNGs (default: plots)")
    plot.add_argument("--baselines", type=Path, default=Path("baselines"), metavar="DIR",
                      help="baseline directory for the bands of metrics over time (default: "
                           "baselines)")
    plot.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not plots.available():
        print(f"llmperf: error: {plots.MISSING}", file=sys.stderr)
        return EXIT_USAGE
    try:
        documents = [load_run(path) for path in args.runs if read_run(path)]
    except RunFileError as exc:
        print(f"llmperf: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    found = plots.pictures(plotdata.gather(documents, args.baselines))
    if not found:
        print(f"llmperf: error: nothing to draw in {', '.join(args.runs)} (no results)",
              file=sys.stderr)
        return EXIT_USAGE
    for path in plots.write(found, args.output):
        print(path)
    return EXIT_OK
