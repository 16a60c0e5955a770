"""`llmperf history`: the results store's series as tables with their change points, or as a
self-contained HTML dashboard (`--html PATH`).

    llmperf history                                  the tests the store holds, and the open
                                                     and acknowledged regressions
    llmperf history TEST [--metric NAME] [--last N]  a test's series, a table per metric
    llmperf history [TEST ...] --html PATH           the dashboard, every test by default
    llmperf history [TEST ...] --json                the same as one JSON document on stdout
    llmperf history --stale [HOURS]                  the runner shapes with no run for longer
                                                     (default $LLMPERF_STALE_HOURS, else 36)

The store is `--history PATH|URL` (default: $LLMPERF_HISTORY, else .llmperf/history.sqlite, as
the plugin's); a TEST is a test id as the store has it, or a part of one that names exactly one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

from pytest_llmperf.errors import InputError
from pytest_llmperf.history import episode_book, location
from pytest_llmperf.history.episodes import stale_interval, stale_signals
from pytest_llmperf.history.store import HistoryError, HistoryStore
from pytest_llmperf.reports import history_json, history_page
from pytest_llmperf.reports.commands.exits import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE
from pytest_llmperf.reports.files import write_text
from pytest_llmperf.reports.history_table import table_lines
from pytest_llmperf.reports.history_view import DEFAULT_LAST, views
from pytest_llmperf.reports.regressions import regression_lines, regressions


def add_command(commands) -> None:
    """Register `history` on the `llmperf` command's subparsers."""
    history = commands.add_parser(
        "history", help="the results store's series with their change points (table or HTML)",
        description="Show the stored runs of a test, per metric, with the change points the "
                    "trend gate sees; --html writes a dashboard of every test.")
    history.add_argument("tests", nargs="*", metavar="TEST",
                         help="test ids (or a unique part of one); none: list the tests")
    history.add_argument("--history", default=os.environ.get("LLMPERF_HISTORY",
                                                             location.DEFAULT),
                         metavar="PATH|URL", help="the store (default: $LLMPERF_HISTORY, else "
                                                  f"{location.DEFAULT})")
    history.add_argument("--metric", action="append", default=None, metavar="NAME",
                         help="a metric to show (repeatable; default: the test's gated ones)")
    history.add_argument("--last", type=int, default=DEFAULT_LAST, metavar="N",
                         help=f"the newest N runs of each test (default {DEFAULT_LAST})")
    history.add_argument("--tolerance", type=float, default=None, metavar="FRACTION",
                         help="the smallest change that counts (default: the test's tolerance)")
    history.add_argument("--baselines", type=Path, default=Path("baselines"), metavar="DIR",
                         help="baseline directory for the bands (default: baselines)")
    history.add_argument("--stale", nargs="?", const=os.environ.get("LLMPERF_STALE_HOURS", ""),
                         default=None, metavar="HOURS",
                         help="list the runner shapes with no run for longer than HOURS "
                              "(default $LLMPERF_STALE_HOURS, else 36); exit 1 if any")
    shown = history.add_mutually_exclusive_group()
    shown.add_argument("--html", type=Path, default=None, metavar="PATH",
                       help="write the dashboard here instead of printing tables")
    shown.add_argument("--json", action="store_true",
                       help="print the dashboard's series, change points and regressions as "
                            "one JSON document (docs/history.md)")
    history.set_defaults(run=run)


def open_store(text: str) -> HistoryStore:
    value = location.parse_history(text)
    if value == location.OFF:
        raise HistoryError("--history is off; give a store: a file or a postgresql:// URL")
    where = location.resolve(value, Path.cwd())
    if where.is_sqlite and not where.path.is_file():
        raise HistoryError(f"--history {where.shown}: no store here yet; a pytest run with "
                           "pytest-llmperf makes it, or give another with --history PATH|URL")
    return HistoryStore.open(where, check_write=False)


def pick(known: list[str], wanted: str) -> str:
    if wanted in known:
        return wanted
    found = [test for test in known if wanted in test]
    if len(found) != 1:
        what = "no test" if not found else f"{len(found)} tests ({', '.join(found[:3])}, ...)"
        raise HistoryError(f"{wanted!r} names {what} in the store; run `llmperf history` for "
                           "the list")
    return found[0]


def run(args: argparse.Namespace) -> int:
    try:
        store = open_store(args.history)
        try:
            return _show(store, args)
        finally:
            store.close()
    except (InputError, ValueError) as exc:
        print(f"llmperf: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _stale(store: HistoryStore, hours: str) -> int:
    """--stale: a line per runner shape quiet for longer than the interval (history/episodes.py,
    as `llmperf nightly` raises its stale episodes); exit 1 if any."""
    interval = stale_interval(hours, "--stale")
    found = [signal for signal in stale_signals(episode_book.last_runs(store), interval,
                                                datetime.now(timezone.utc)) if signal.red]
    for signal in found:
        print(f"stale: {signal.line}")
    if not found:
        print(f"no runner shape is stale in {store.where.shown} (interval "
              f"{interval.total_seconds() / 3600:g} h)")
    return EXIT_REGRESSION if found else EXIT_OK


def _show(store: HistoryStore, args: argparse.Namespace) -> int:
    if args.stale is not None:
        return _stale(store, args.stale)
    known = store.test_ids()
    if not args.tests and not (args.html or args.json):
        for test, count in known:
            print(f"{count:>6}  {test}")
        print(f"{len(known)} tests in {store.where.shown}")
        for line in regression_lines(store):
            print(line)
        return EXIT_OK
    tests = [pick([t for t, _ in known], wanted) for wanted in args.tests] or \
        [t for t, _ in known]
    found = views(store, tests, metrics=args.metric, last=args.last, tolerance=args.tolerance,
                  baseline_dir=args.baselines)
    if args.html or args.json:
        return _dashboard(store, args, found, tests)
    for view in found:
        print("\n".join(table_lines(view)))
        print()
    return EXIT_OK


def _dashboard(store: HistoryStore, args: argparse.Namespace, found, tests: list[str]) -> int:
    """--html's page or --json's document, with the tests' regressions (as listed above)."""
    flagged = regressions(store, tests=set(tests))
    if args.json:
        document = history_json.document(found, store.where.shown, flagged,
                                         datetime.now(timezone.utc))
        print(json.dumps(document, indent=1))
    else:
        print(write_text("history dashboard", "--html", args.html,
                         history_page.page(found, store.where.shown, flagged,
                                           episode_book.open_episodes(store))))
    return EXIT_OK
