"""README.md and docs/ name only what exists: every test id (`path::name`: the file exists and
defines the name), every file path under the project's folders, every `--llmperf-*` option (the
plugin's option table, session/settings.py) and every test named alone (`test_...`, defined in
suites/ or tests/). A doc naming a test that was renamed away fails here, not in a reader's
terminal. The checker itself fails on a made-up doc naming a missing test."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_llmperf.session.settings import OPTIONS
from tests.conftest import REPO

ROOTS = ("suites", "tests", "scripts", "pytest_llmperf", "deploy", "docs")
TEST_ID = re.compile(r"((?:[\w.-]+/)*[\w.-]+\.py)::(\w+)")
# A path under one of ROOTS, not a pattern's stem (`suites/test_gpu_*.py`, `runs/<pod>/`).
PATH = re.compile(r"(?<![\w./-])(?:\.\./)?((?:%s)/[\w./-]*[\w/])(?![\w*<{])" % "|".join(ROOTS))
OPTION = re.compile(r"--llmperf-[a-z][a-z0-9-]*[a-z0-9]")
BARE_TEST = re.compile(r"[`\"](test_\w+)[`\"]")
# Names that stand for something else, on purpose: a reader's own suite in an error line's
# example (test_x, test_suite.py, suite.py, a calibration suite in a temporary folder, the
# nights test's suite in a quoted post: test_nights.py), the
# removed test a stale table names, a mode docs/layout.md imagines, inference-perf's own
# docs/config.md, and a store column.
EXAMPLES = {"suites/test_x.py", "test_suite.py", "suite.py", "test_history_cal.py", "test_nights.py",
            "test_removed", "--llmperf-dry-run", "docs/config.md", "test_id"}


def defined_tests(repo: Path) -> set[str]:
    """Every test function, and every test file's stem, under suites/ and tests/."""
    found = set()
    for root in ("suites", "tests"):
        for path in (repo / root).rglob("*.py"):
            found.add(path.stem)
            found.update(re.findall(r"^\s*(?:async\s+)?def (test_\w+)",
                                    path.read_text(errors="replace"), re.M))
    return found


def _test_file(repo: Path, path: str) -> Path | None:
    """The named file; a bare file name is looked for under suites/ and tests/."""
    if (repo / path).is_file():
        return repo / path
    if "/" in path:
        return None
    return next((found for root in ("suites", "tests") for found in (repo / root).rglob(path)),
                None)


def missing_names(text: str, repo: Path, tests: set[str] | None = None) -> list[str]:
    """One line per name in `text` that does not exist in `repo`."""
    missing = []
    for path, name in TEST_ID.findall(text):
        file = _test_file(repo, path)
        if path in EXAMPLES:
            continue
        if file is None:
            missing.append(f"{path}::{name}: no file {path}")
        elif not re.search(rf"^\s*(?:async\s+)?(?:def|class) {name}\b", file.read_text(), re.M):
            missing.append(f"{path}::{name}: {path} defines no {name}")
    missing += [f"{path}: no such file or folder" for path in PATH.findall(text)
                if path not in EXAMPLES and not (repo / path).exists()]
    flags = {option.flag for option in OPTIONS}
    missing += [f"{flag}: no such option" for flag in OPTION.findall(text)
                if flag not in flags | EXAMPLES]
    tests = defined_tests(repo) if tests is None else tests
    missing += [f"{name}: no test of that name" for name in BARE_TEST.findall(text)
                if name not in tests | EXAMPLES]
    return sorted(set(missing))


def test_the_docs_name_only_tests_files_and_options_that_exist():
    tests = defined_tests(REPO)
    found = [f"{doc.relative_to(REPO)}: {line}"
             for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
             for line in missing_names(doc.read_text(encoding="utf-8"), REPO, tests)]
    assert found == []


def test_a_made_up_doc_naming_missing_tests_fails(tmp_path):
    suite = tmp_path / "suites" / "test_gpu_llama8b.py"
    suite.parent.mkdir()
    suite.write_text("def test_chat_conversations(llmperf):\n    pass\n")
    doc = ("Run `suites/test_gpu_llama8b.py::test_chat_conversations` and "
           "suites/test_gpu_llama8b.py::test_chat, `test_tp8` and suites/test_gpu_ab.py with "
           "--llmperf-trend and --llmperf-tren.\n")
    assert missing_names(doc, tmp_path) == [
        "--llmperf-tren: no such option",
        "suites/test_gpu_ab.py: no such file or folder",
        "suites/test_gpu_llama8b.py::test_chat: suites/test_gpu_llama8b.py defines no test_chat",
        "test_tp8: no test of that name"]
