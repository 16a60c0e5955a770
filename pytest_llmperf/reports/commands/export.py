"""`llmperf export`: one stored night in the format of a tool a team already runs.

    llmperf export --format prometheus|bencher|pytorch [--store URL|PATH] [--run N|latest]
                   [-o PATH] [--push URL]

The night is a run of the results store (`--store`, default $LLMPERF_HISTORY, else the
plugin's .llmperf/history.sqlite), the newest by default; its text goes to stdout, or to -o PATH.
--push (prometheus only) PUTs it to a Pushgateway (exports/pushgateway.py). The formats:
reports/exports/ and docs/history.md ("Exports").
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pytest_llmperf.history import location
from pytest_llmperf.history.store import HistoryError, HistoryStore
from pytest_llmperf.reports.commands.exits import EXIT_OK, EXIT_USAGE, CliError
from pytest_llmperf.reports.exports import prometheus, pushgateway
from pytest_llmperf.reports.exports.night import LATEST, Night, read_night
from pytest_llmperf.reports.exports.registry import FORMATS
from pytest_llmperf.reports.files import write_text

__all__ = ["add_command", "run"]


def add_command(commands) -> None:
    """Register `export` on the `llmperf` command's subparsers."""
    export = commands.add_parser(
        "export", help="a stored night as Prometheus text, Bencher JSON or PyTorch benchmark "
                       "records",
        description="Write one run of the results store in the format of Prometheus (and push "
                    "it to a Pushgateway), Bencher (BMF) or the PyTorch OSS benchmark database.")
    export.add_argument("--format", required=True, choices=sorted(FORMATS),
                        help="the tool's format")
    export.add_argument("--store", default=os.environ.get("LLMPERF_HISTORY", location.DEFAULT),
                        metavar="URL|PATH", help="the results store (default: $LLMPERF_HISTORY, "
                                                 f"else {location.DEFAULT})")
    export.add_argument("--run", dest="night", default=LATEST, metavar="N|latest",
                        help="the run to export (default: the newest)")
    export.add_argument("-o", "--output", type=Path, default=None, metavar="PATH",
                        help="write here (default: stdout)")
    export.add_argument("--push", default=None, metavar="URL",
                        help="with --format prometheus: PUT the night to this Pushgateway")
    export.set_defaults(run=run)


def _night(args: argparse.Namespace) -> Night:
    value = location.parse_history(args.store)
    if value == location.OFF:
        raise HistoryError(f"--store {args.store}: give a store, a file or a postgresql:// URL")
    where = location.resolve(value, Path.cwd())
    if where.is_sqlite and not where.path.is_file():
        raise HistoryError(f"--store {where.shown}: no store here; give the one `llmperf "
                           "nightly --store` or --llmperf-history wrote to")
    store = HistoryStore.open(where, check_write=False)
    try:
        return read_night(store, args.night)
    finally:
        store.close()


def run(args: argparse.Namespace) -> int:
    if args.push and args.format != "prometheus":
        raise CliError(f"--push sends Prometheus text to a Pushgateway; give --format "
                       f"prometheus, not {args.format}")
    try:
        night = _night(args)
    except (HistoryError, ValueError) as exc:
        print(f"llmperf: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    body = FORMATS[args.format](night)
    if args.push:
        try:
            url = pushgateway.push(args.push, prometheus.group_labels(night.first), body)
        except pushgateway.PushError as exc:
            raise CliError(str(exc)) from None
        print(f"llmperf export: run {night.run_id} pushed to {url}")
    if args.output is not None:
        print(write_text(f"{args.format} export", "-o", args.output, body))
    elif not args.push:
        sys.stdout.write(body)
    return EXIT_OK
