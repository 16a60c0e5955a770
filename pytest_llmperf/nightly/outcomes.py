"""What a night's pytest session said, read from the JUnit XML it wrote (`--junitxml`): the
failed tests with their messages, the tests the deadline left out, the counts; and what
`llmperf nightly` makes of them: the failures text, its headline, the exit status.

Why JUnit: pytest writes it for every test, whoever failed it (the plugin's verdict, a plain
assert, a fixture's error), and the plugin fails a test with its verdict lines as the message
(`pytest.fail(..., pytrace=False)`), which JUnit keeps whole as the `message` of `<failure>`
(after "Failed: "). The session's own report model of failures lives in the pytest process
(plugin/reporthooks.py) and reaches files only as Markdown and HTML text. The failures text is
those messages, one line per verdict line, each after its test's id.

Pure but for reading the file.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_llmperf.ids import user_nodeid
from pytest_llmperf.session.deadline import LEFT_OUT

__all__ = ["EXIT_FAILED", "EXIT_LEFT_OUT", "EXIT_OK", "EXIT_STORE", "EXIT_USAGE", "Outcomes",
           "exit_status", "failure_lines", "headline", "left_out_line", "pytest_problem",
           "read_junit"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_STORE, EXIT_LEFT_OUT = 0, 1, 2, 3, 4
# pytest's own exit statuses (pytest.ExitCode; this module must not import pytest).
PYTEST_OK, PYTEST_FAILED, PYTEST_NO_TESTS = 0, 1, 5
# pytest.fail's exception as JUnit's message names it, before the plugin's own words.
FAILED_PREFIX = "Failed: "
# A message can be a long traceback's summary; the reports have the rest.
MAX_LINES_PER_TEST = 10


@dataclass
class Outcomes:
    passed: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # node id, message
    left_out: list[str] = field(default_factory=list)  # node ids
    skipped: int = 0  # skipped for another reason (hardware absent, nightly-only)


def node_id(classname: str, name: str, rootdir: Path) -> str:
    """The id pytest gave the test, from JUnit's dotted classname: the longest leading part of
    it that is a .py file under `rootdir` is the file, the rest its classes."""
    parts = classname.split(".") if classname else []
    for end in range(len(parts), 0, -1):
        path = Path(*parts[:end]).with_suffix(".py")
        if (rootdir / path).is_file():
            return user_nodeid("::".join([path.as_posix(), *parts[end:], name]))
    return user_nodeid("::".join([*([classname] if classname else []), name]))


def read_junit(path: Path, rootdir: Path) -> Outcomes:
    """The outcomes in pytest's JUnit XML at `path`; an empty Outcomes when there is none (the
    session stopped before writing it). ET.ParseError for a file that is no XML."""
    outcomes = Outcomes()
    if not path.is_file():
        return outcomes
    seen: set[str] = set()
    for case in ET.parse(path).getroot().iter("testcase"):
        test = node_id(case.get("classname", ""), case.get("name", ""), rootdir)
        problem = case.find("failure")
        problem = problem if problem is not None else case.find("error")
        skipped = case.find("skipped")
        if problem is not None:
            if test not in seen:  # a teardown error after a failure: one test, one entry
                message = problem.get("message") or problem.text or ""
                outcomes.failed.append((test, message.removeprefix(FAILED_PREFIX)))
        elif skipped is not None:
            if (skipped.get("message") or "").startswith(LEFT_OUT):
                outcomes.left_out.append(test)
            else:
                outcomes.skipped += 1
        else:
            outcomes.passed += 1
        seen.add(test)
    return outcomes


def failure_lines(failed: Iterable[tuple[str, str]]) -> list[str]:
    """One line per line of each failed test's message (the plugin's: one per verdict), after
    the test's id; at most MAX_LINES_PER_TEST of a test's."""
    lines = []
    for test, message in failed:
        said = [line.strip() for line in message.splitlines() if line.strip()] or ["failed"]
        if len(said) > MAX_LINES_PER_TEST:
            more = len(said) - MAX_LINES_PER_TEST
            said = said[:MAX_LINES_PER_TEST] + [f"... {more} more lines in the reports"]
        lines += [f"{test}: {line}" for line in said]
    return lines


def left_out_line(tests: Sequence[str], budget: str) -> str:
    """`budget`: what set the deadline, "--max-minutes 150" (or a --llmperf-deadline given with
    the pytest arguments)."""
    return f"left out by {budget}, which they would have overrun ({len(tests)}): " + \
        ", ".join(tests)


def pytest_problem(returncode: int, marker: str, suites: Sequence[str]) -> str | None:
    """The line for a pytest session that could not say pass or fail; None when it did."""
    if returncode in (PYTEST_OK, PYTEST_FAILED):
        return None
    if returncode == PYTEST_NO_TESTS:
        return f"no test is marked {marker} under {' '.join(suites)}"
    why = {2: "was interrupted", 3: "stopped on an internal error",
           4: "refused its command line"}.get(returncode, "stopped")
    return f"pytest {why} (exit status {returncode}); its output above says why"


def exit_status(returncode: int, *, store_ok: bool, outcomes: Outcomes) -> int:
    """The first that applies: bad input (2), the store out of reach (3), failed tests (1),
    tests left out by the time budget (4), all passed (0)."""
    if returncode not in (PYTEST_OK, PYTEST_FAILED):
        return EXIT_USAGE
    if not store_ok:
        return EXIT_STORE
    if returncode == PYTEST_FAILED or outcomes.failed:
        return EXIT_FAILED
    return EXIT_LEFT_OUT if outcomes.left_out else EXIT_OK


def headline(marker: str, outcomes: Outcomes, ci_url: str | None = None) -> str:
    """The webhook message's first line: which night, what it counted, where its job is."""
    counts = [(len(outcomes.failed), "failed"), (outcomes.passed, "passed"),
              (len(outcomes.left_out), "left out"), (outcomes.skipped, "skipped")]
    said = ", ".join(f"{n} {what}" for n, what in counts if n) or "no test ran"
    return f"llmperf nightly -m {marker}: {said}" + (f" ({ci_url})" if ci_url else "")
