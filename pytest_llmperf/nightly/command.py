"""`llmperf nightly`: one night of the GPU suites, as every deploy file runs it (docs/nightly.md).

    llmperf nightly --marker h200 --store URL_OR_PATH --out reports/ --publish site/
                    [--max-minutes N] [--suites suites/] [-- extra pytest args]

Runs `pytest -m MARKER SUITES` in a subprocess of this interpreter with the results store, the
trend gate and the tests marked nightly; writes into --out the run file, Markdown, HTML, JUnit,
the engines' logs and failures.txt; publishes the history page as --publish/index.html; posts
failures.txt to $LLMPERF_WEBHOOK_URL unless the night was clean. Exit status (outcomes.py):
0 all passed, 1 tests failed, 2 bad input, 3 the store out of reach, 4 tests left out by
--max-minutes.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree.ElementTree import ParseError

from pytest_llmperf.errors import InputError
from pytest_llmperf.history import location, record
from pytest_llmperf.history.episode_book import open_episodes
from pytest_llmperf.history.store import HistoryError, HistoryStore
from pytest_llmperf.nightly import episode_night, webhook
from pytest_llmperf.nightly import outcomes as oc
from pytest_llmperf.reports import history_page
from pytest_llmperf.reports.files import check_writable, write_text
from pytest_llmperf.reports.history_view import views
from pytest_llmperf.reports.regressions import regressions

__all__ = ["DEFAULT_SUITES", "FILES", "add_command", "ci_job_url", "gpu_extra_missing",
           "pytest_argv", "pytest_environ", "run", "run_pytest"]

# What --out holds after a night, by what wrote it.
FILES = {"run": "run.json", "markdown": "report.md", "html": "report.html",
         "junit": "junit.xml", "failures": "failures.txt", "logs": "logs"}
PAGE = "index.html"
# Markers of tests that start vLLM on GPUs (plugin/markers.py): they need the gpu extra.
GPU_MARKERS = ("h100", "h200", "a100", "gpus")
PREFIX = "llmperf nightly: "
HISTORY_ENV = "LLMPERF_HISTORY"  # the plugin's --llmperf-history, from the environment
# Where the suites are when no path is given: `llmperf nightly` and `llmperf bootstrap-baselines`
# both (pyproject's testpaths is tests/, where no test is marked for hardware).
DEFAULT_SUITES = ("suites/",)


def add_command(commands) -> None:
    """Register `nightly` on the `llmperf` command's subparsers."""
    nightly = commands.add_parser(
        "nightly", help="run the suites of one marker as a night: store, reports, history "
                        "page, webhook",
        description="Run pytest -m MARKER SUITES with the results store and the trend gate; "
                    "write the reports into --out, the history page into --publish; post the "
                    "failures to $LLMPERF_WEBHOOK_URL. Exit 0 all passed, 1 tests failed, 2 "
                    "bad input, 3 the store cannot be reached, 4 tests left out by "
                    "--max-minutes.")
    nightly.add_argument("--marker", required=True, metavar="MARKER",
                         help="the tests to run, as pytest -m takes it, e.g. h200")
    nightly.add_argument("--store", required=True, metavar="URL|PATH",
                         help="the results store: a postgresql:// URL, or a SQLite file outside "
                              "this checkout (the nights before are what the trend gate reads)")
    nightly.add_argument("--out", required=True, type=Path, metavar="DIR",
                         help="the reports: " + ", ".join(FILES.values()))
    nightly.add_argument("--publish", required=True, type=Path, metavar="DIR",
                         help=f"the history page as a static site ({PAGE})")
    nightly.add_argument("--max-minutes", type=_minutes, default=None, metavar="N",
                         help="start no test that would end after N minutes from now; name the "
                              "tests left out (exit 4 when nothing failed)")
    nightly.add_argument("--suites", action="append", default=None, metavar="PATH",
                         help="where the tests are (repeatable; default "
                              f"{' '.join(DEFAULT_SUITES)})")
    nightly.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS",
                         help="more arguments for pytest, after --")
    nightly.set_defaults(run=run)


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected minutes above 0, e.g. 90; got {text!r}")
    return value


@dataclass
class Night:
    """One run of the command: its arguments and the lines of what went wrong."""

    args: argparse.Namespace
    problems: list[str] = field(default_factory=list)  # one line each, in failures.txt too
    store_ok: bool = True
    episodes: bool = False  # the webhook heard of episodes, not failures (episode_night.py)

    @property
    def suites(self) -> list[str]:
        return self.args.suites or list(DEFAULT_SUITES)

    def say(self, line: str) -> None:
        self.problems.append(line)
        print(PREFIX + line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    night = Night(args)
    try:
        _check_folders(args.out, args.publish)
        store = _check_store(night, args.store, Path.cwd())
    except InputError as exc:
        night.say(str(exc))
        return _finish(night, oc.Outcomes(), oc.EXIT_USAGE)
    missing = gpu_extra_missing(args.marker)
    if missing:
        night.say(missing)
        return _finish(night, oc.Outcomes(), oc.EXIT_USAGE)
    deadline = time.time() + args.max_minutes * 60 if args.max_minutes else None
    argv = pytest_argv(args.marker, night.suites, args.out.resolve(), deadline,
                       args.pytest_args, trend=night.store_ok)
    returncode = run_pytest(argv, pytest_environ(store))
    found = _outcomes(night, args.out / FILES["junit"])
    problem = oc.pytest_problem(returncode, args.marker, night.suites)
    if problem:
        night.say(problem)
    if night.store_ok and episode_night.enabled(os.environ):  # before the page is published
        night.episodes = True
        summary = oc.headline(args.marker, found, ci_job_url())
        for line in episode_night.after_night(store, os.environ, summary, found,
                                              args.out / FILES["junit"]):
            print(PREFIX + line, file=sys.stderr, flush=True)
    if night.store_ok:
        _publish(night, store, args.publish)
    status = oc.exit_status(returncode, store_ok=night.store_ok, outcomes=found)
    return _finish(night, found, status)


def _check_folders(out: Path, publish: Path) -> None:
    """Both folders writable before the night starts: hours of measuring must not end in a
    report that has nowhere to go."""
    for option, folder, name in (("--out", out, FILES["junit"]), ("--publish", publish, PAGE)):
        if folder.exists() and not folder.is_dir():
            raise InputError(f"{option} {folder}: is a file; give a folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            check_writable(option, folder / name, folder / name)
        except OSError as exc:
            raise InputError(f"{option} {folder}: cannot make the folder ({exc.strerror}); "
                             "choose a writable path") from None
        except ValueError as exc:
            raise InputError(str(exc)) from None


def _check_store(night: Night, text: str, checkout: Path) -> str:
    """The store as the pytest session gets it. One out of reach is said now, and the night
    runs without it (`off`): the baseline gate and the reports still have a night's worth."""
    try:
        value = location.parse_history(text)
    except ValueError as exc:
        raise InputError(f"--store {text!r}: {exc}") from None
    if value == location.OFF:
        raise InputError("--store off: a night keeps its results; give a postgresql:// URL or "
                         "a SQLite file outside this checkout")
    where = location.resolve(value, checkout)
    if where.is_sqlite:
        if where.path.resolve().is_relative_to(checkout.resolve()):
            raise InputError(f"--store {text}: is inside this checkout ({checkout}), which an "
                             "ephemeral runner loses with it; give a path outside it, or a "
                             "postgresql:// URL")
        if not where.path.is_file():  # made when the first run is recorded (history_run.py)
            return str(where.path)
    try:
        HistoryStore.open(where, check_write=False).close()
    except HistoryError as exc:
        night.store_ok = False
        night.say(f"the store cannot be reached, so this night runs without it (no trend "
                  f"gate, nothing recorded, no history page): {exc}")
        return location.OFF
    return str(where.path) if where.is_sqlite else value


def gpu_extra_missing(marker: str,
                      find_spec: Callable[[str], object] | None = None) -> str | None:
    """The line for GPU tests asked of an environment without vLLM; None when it has it (or
    the marker selects no GPU test). find_spec: whether vLLM is there, without importing it."""
    find_spec = find_spec or importlib.util.find_spec
    words = set(re.findall(r"[\w-]+", marker))
    if not words & set(GPU_MARKERS) or find_spec("vllm") is not None:
        return None
    return (f"-m {marker} selects GPU tests, and vLLM (the gpu extra) is not installed for "
            f"{sys.executable}; install the GPU stack with `bash scripts/install-gpu`")


def pytest_environ(store: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The night's pytest's environment: the store in LLMPERF_HISTORY (the plugin's setting,
    session/settings.py), never on its command line, where a postgresql:// URL's password would
    sit in the process list for the whole night."""
    return {**environ, HISTORY_ENV: store}


def pytest_argv(marker: str, suites: Sequence[str], out: Path,
                deadline: float | None, extra: Sequence[str], *, trend: bool) -> list[str]:
    """The night's pytest command line (the store goes in its environment: pytest_environ);
    `out` absolute (the plugin reads relative report paths against pytest's rootdir, which need
    not be here). Each option and its value are one word: pytest finds its rootdir before it
    loads plugins, and takes a plugin option's value given as a word of its own for a test path
    (bootstrap.pytest_command says what that cost)."""
    argv = [sys.executable, "-m", "pytest", "-m", marker, *suites, "--llmperf-nightly",
            f"--llmperf-json={out / FILES['run']}",
            f"--llmperf-markdown={out / FILES['markdown']}",
            f"--llmperf-html={out / FILES['html']}",
            f"--junitxml={out / FILES['junit']}",
            f"--llmperf-log-dir={out / FILES['logs']}"]
    if trend:
        argv.append("--llmperf-trend")
    if deadline is not None:
        argv.append(f"--llmperf-deadline={deadline:.0f}")
    return argv + list(extra)


def run_pytest(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """The night's pytest, in a session of its own so that a stop reaches it once, from here: a
    job is stopped with a signal to one process (Kubernetes: SIGTERM to a container's main
    process; GitHub Actions: SIGINT, then SIGTERM, to a step's; docs/nightly.md), a terminal
    with SIGINT. The plugin then stops its engines (plugin/hooks.py), pytest ends as
    interrupted, and this command still writes failures.txt and posts it."""
    child = subprocess.Popen(list(argv), start_new_session=True,
                             env=None if env is None else dict(env))

    def forward(signum, frame) -> None:
        child.send_signal(signum)

    stops = (signal.SIGTERM, signal.SIGINT)
    try:
        previous = {stop: signal.signal(stop, forward) for stop in stops}
    except ValueError:  # not the main thread: no handler here, the child is still waited for
        previous = {}
    try:
        return child.wait()
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)


def _outcomes(night: Night, junit: Path) -> oc.Outcomes:
    try:
        return oc.read_junit(junit, Path.cwd())
    except ParseError as exc:
        night.say(f"{junit}: pytest's JUnit XML cannot be read ({exc}); the other reports "
                  "still say how the tests went")
        return oc.Outcomes()


def _publish(night: Night, store: str, folder: Path) -> None:
    """The history page, every test of the store, as the static site's index.html."""
    where = location.resolve(store, Path.cwd())
    try:
        if where.is_sqlite and not where.path.is_file():
            found, flagged, episodes = [], [], []  # no run yet: the page says the store holds none
        else:
            opened = HistoryStore.open(where, check_write=False)
            try:
                tests = [test for test, _ in opened.test_ids()]
                found = views(opened, tests, baseline_dir=Path("baselines"))
                flagged = regressions(opened)
                episodes = open_episodes(opened)
            finally:
                opened.close()
    except HistoryError as exc:
        night.store_ok = False
        night.say(f"the history page was not published: {exc}")
        return
    line = write_text("history page", "--publish", folder / PAGE,
                      history_page.page(found, where.shown, flagged, episodes))
    print(PREFIX + line, flush=True)


def ci_job_url(environ: Mapping[str, str] = os.environ) -> str | None:
    """The page of the CI job running this night: GitHub Actions' run (as the store records
    it), GitLab's job (CI_JOB_URL), Jenkins' build (BUILD_URL); None elsewhere."""
    return record.ci_url(environ)


def _finish(night: Night, found: oc.Outcomes, status: int) -> int:
    """failures.txt, the webhook (unless the night was clean), the closing lines."""
    args = night.args
    lines = [*night.problems, *oc.failure_lines(found.failed)]
    if found.left_out:
        budget = f"--max-minutes {args.max_minutes:g}" if args.max_minutes else \
            "--llmperf-deadline"
        left = oc.left_out_line(found.left_out, budget)
        lines.append(left)
        print(PREFIX + left, flush=True)
    text = "".join(line + "\n" for line in lines)
    print(PREFIX + write_text("failures", "--out", args.out / FILES["failures"], text),
          flush=True)
    url = os.environ.get(webhook.ENV)
    if url and status != oc.EXIT_OK and not night.episodes:
        said = webhook.post(url, oc.headline(args.marker, found, ci_job_url()) + "\n" + text)
        if said:
            print(PREFIX + said, file=sys.stderr, flush=True)
    print(f"{PREFIX}{oc.headline(args.marker, found)}; exit status {status}", flush=True)
    return status
