"""`llmperf ack` and `llmperf accept`: a regression the gates keep failing, acknowledged for a
while or accepted as the new level for good, in the results store (history/acks.py).

    llmperf ack TEST --metric NAME --reason TEXT [--until YYYY-MM-DD] [--shape FAMILY]
                [--history PATH|URL]
    llmperf accept TEST --metric NAME --reason TEXT [--shape FAMILY] [--history PATH|URL]

The acknowledgement silences one series: the test's metric on one runner shape (the store's
hardware family, `llmperf history` shows it). --shape defaults to the test's one shape, or, where
it has several, to this machine's; where this machine's is none of them it is required.

Bad input is one line and writes nothing: a test or metric the store has never seen, a date
already past, no reason (history/acks.py says what an acknowledgement covers and for how long).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from datetime import datetime, timezone

from pytest_llmperf.history import acks as acks_mod
from pytest_llmperf.history import location
from pytest_llmperf.history.identity import family
from pytest_llmperf.history.store import HistoryError, HistoryStore
from pytest_llmperf.machine.hardware import current_fingerprint, detect_hardware
from pytest_llmperf.reports.commands.exits import EXIT_OK, EXIT_USAGE
from pytest_llmperf.reports.commands.history import open_store, pick

__all__ = ["add_command", "run"]


def add_command(commands) -> None:
    ack = commands.add_parser(
        "ack", help="acknowledge a regression the gates fail, for a while",
        description="Record in the results store that a test's change for the worse is "
                    "known: the trend and baseline gates pass it, saying so, until --until "
                    f"(default {acks_mod.DEFAULT_DAYS} days), then fail it again.")
    _arguments(ack)
    ack.add_argument("--until", default=None, metavar="YYYY-MM-DD",
                     help=f"the last day it holds (default: {acks_mod.DEFAULT_DAYS} days on)")
    ack.set_defaults(run=run, kind=acks_mod.ACK)
    accept = commands.add_parser(
        "accept", help="accept a test's changed level as the new normal",
        description="Record in the results store that a test's metric is at a new level for "
                    "good: the trend gate passes the change, and the baseline gate judges the "
                    "metric against the level accepted (the median and spread of the runs "
                    "since the change) until the committed table is updated.")
    _arguments(accept)
    accept.set_defaults(run=run, kind=acks_mod.ACCEPT, until=None)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("test", metavar="TEST", help="the test id (or a unique part of one)")
    parser.add_argument("--metric", default=None, metavar="NAME", help="the changed metric")
    parser.add_argument("--reason", default=None, metavar="TEXT", help="why it is accepted")
    parser.add_argument("--shape", default=None, metavar="FAMILY",
                        help="the runner shape whose series it covers (default: the test's one "
                             "shape, else this machine's)")
    parser.add_argument("--history", default=os.environ.get("LLMPERF_HISTORY", location.DEFAULT),
                        metavar="PATH|URL", help="the store (default: $LLMPERF_HISTORY, else "
                                                 f"{location.DEFAULT})")


def run(args: argparse.Namespace, now: datetime | None = None) -> int:
    try:
        if not (args.reason or "").strip():
            raise ValueError("--reason TEXT: say why the change is accepted (every night's "
                             "line shows it)")
        now = now or datetime.now(timezone.utc)
        accept = args.kind == acks_mod.ACCEPT
        until = acks_mod.FOREVER if accept else acks_mod.parse_until(args.until, now)
        store = open_store(args.history)
        try:
            ack = _ack(store, args, now, until)
            store.record_ack(ack)
        finally:
            store.close()
    except (HistoryError, ValueError) as exc:
        print(f"llmperf: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"llmperf: {ack.test_id} {ack.metric}: {ack.line()} (shape {ack.shape}; in "
          f"{store.where.shown})")
    return EXIT_OK


def _ack(store: HistoryStore, args: argparse.Namespace, now: datetime,
         until: datetime) -> acks_mod.Ack:
    test = pick([test for test, _ in store.test_ids()], args.test)
    metrics = store.metric_names(test)
    if args.metric not in metrics:
        what = "--metric NAME is required" if args.metric is None else \
            f"{test} has no metric {args.metric!r} in the store"
        raise ValueError(f"{what}; its metrics: {', '.join(metrics[:12])}"
                         + (", ..." if len(metrics) > 12 else ""))
    shape = _shape(args.shape, test, sorted({p.family for p in store.points(test, None)}))
    return acks_mod.Ack(test, args.metric, args.reason.strip(), acks_mod.who_am_i(), now, until,
                        shape, args.kind)


def _shape(wanted: str | None, test: str, shapes: list[str],
           here: Callable[[], str] | None = None) -> str:
    """The runner shape the acknowledgement silences (ValueError: one line naming the shapes)."""
    if wanted is not None:
        if wanted not in shapes:
            raise ValueError(f"--shape {wanted}: {test} has no series on it; its shapes: "
                             f"{', '.join(shapes)}")
        return wanted
    if len(shapes) == 1:
        return shapes[0]
    mine = (here or _this_machine)()
    if mine in shapes:
        return mine
    raise ValueError(f"--shape FAMILY is required: {test} has series on {len(shapes)} runner "
                     f"shapes, none this machine's ({mine}): {', '.join(shapes)}")


def _this_machine() -> str:
    """This machine's shape as a night here records it ($LLMPERF_HARDWARE's override too)."""
    override = os.environ.get("LLMPERF_HARDWARE") or None
    return family(current_fingerprint(detect_hardware(override)).to_dict())
