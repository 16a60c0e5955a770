"""--llmperf-check-baselines (plugin/check_baselines.py): each test runs to its first measurement
call, where its workload and engine are compared with its committed tables; a table whose test is
gone fails the session. Hardware markers are bypassed and nothing is started or sent."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pytest_llmperf import Engine, Workload
from pytest_llmperf.session.provenance import engine_identity
from pytest_llmperf.verdict.baselines import BaselineEntry, make_provenance, update_baseline
from pytest_llmperf.workloads.identity import workload_identity
from tests.conftest import REPO

SUITE = """
import pytest
from pathlib import Path
from pytest_llmperf import SLO, Engine, Workload

ENGINE = Engine(model="/models/llama", load_format="dummy", max_num_seqs=8)
LOAD = Workload.fixed(input_tokens=8, output_tokens=8, num_requests=4, concurrency=2)
DATA = Path(__file__).resolve().parent / "data" / "prompts.jsonl"

pytestmark = [pytest.mark.h100, pytest.mark.engine(ENGINE)]


def test_same(llmperf):
    llmperf.run(LOAD)


def test_dataset(llmperf):
    llmperf.run(Workload.dataset(DATA, num_requests=4, concurrency=2))


def test_more_requests(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=8, num_requests=8, concurrency=2))


@pytest.mark.engine(ENGINE.replace(max_num_seqs=16))
def test_more_seqs(llmperf):
    llmperf.run(LOAD)


def test_capacity(llmperf):
    llmperf.capacity(LOAD, SLO(max={"ttft_s.p90": 1.0}), low=1.0, high=4.0)


def test_ab(llmperf):
    llmperf.ab(LOAD, a=ENGINE, b=ENGINE.replace(max_num_seqs=4))


def test_not_recorded(llmperf):
    llmperf.offline(LOAD)
"""

ENGINE = Engine(model="/models/llama", load_format="dummy", max_num_seqs=8)
LOAD = Workload.fixed(input_tokens=8, output_tokens=8, num_requests=4, concurrency=2)
ENTRY = {"output_throughput_tok_s": BaselineEntry(value=100.0, spread=1.0, direction="higher",
                                                  tolerance=0.1, n=3)}
FILE = "baselines/h100/test_suite.toml"
FIX = "pytest -m h100 test_suite.py --llmperf-update-baselines"


def record(path: Path, key: str, workload: dict, engine: Engine = ENGINE) -> None:
    provenance = make_provenance({"hardware_class": "h100"},
                                 engine_identity(engine, Path("/elsewhere")), workload)
    update_baseline(path, key, ENTRY, provenance)


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """The suite above with its tables as they were recorded in another checkout, plus a table
    of a test that was removed since."""
    pytester.makepyfile(test_suite=SUITE)
    (pytester.path / "data").mkdir()
    shutil.copy(REPO / "suites" / "data" / "prompts.jsonl", pytester.path / "data")
    table = pytester.path / FILE
    table.parent.mkdir(parents=True)
    dataset = workload_identity(Workload.dataset(pytester.path / "data" / "prompts.jsonl",
                                                 num_requests=4, concurrency=2), pytester.path)
    # Written before workload identities named files relative to the rootdir:
    dataset["source"]["path"] = "/home/ci/old-clone/data/prompts.jsonl"
    for key, workload in (("test_same", LOAD.to_dict()), ("test_dataset", dataset),
                          ("test_more_requests", LOAD.to_dict()), ("test_more_seqs", LOAD.to_dict()),
                          ("test_capacity", LOAD.to_dict()), ("test_removed", LOAD.to_dict())):
        record(table, key, workload)
    return pytester


def failure_lines(result: pytest.RunResult) -> dict[str, str]:
    lines, found = result.stdout.lines, {}
    for i, line in enumerate(lines):
        heading = re.match(r"_+ (test_\w+) _+$", line)
        if heading:
            found[heading.group(1)] = lines[i + 1]
    return found


def check_section(result: pytest.RunResult) -> list[str]:
    """The lines under "llmperf baseline check" at the end of the session."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "llmperf baseline check" in line)
    end = next(i for i, line in enumerate(lines) if i > start and line.startswith("="))
    return [line for line in lines[start + 1:end] if line]


def test_stale_tables_fail_with_the_field_and_the_fix(suite: pytest.Pytester):
    result = suite.runpytest_subprocess("-rs", "--llmperf-check-baselines",
                                        "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(skipped=5, failed=2)
    assert failure_lines(result) == {
        "test_more_requests": f'{FILE}: ["test_more_requests"]: stale: '
                              "test_suite.py::test_more_requests now measures another workload "
                              f"(num_requests 4 -> 8); re-record it: {FIX}",
        "test_more_seqs": f'{FILE}: ["test_more_seqs"]: stale: test_suite.py::test_more_seqs now '
                          f"measures another engine (max_num_seqs 8 -> 16); re-record it: {FIX}",
    }
    assert check_section(result) == [
        f'{FILE}: ["test_removed"]: stale: no test test_suite.py::test_removed (renamed or '
        f"removed); delete the table (a renamed test records its own: {FIX})"]
    same = f"baseline workload and engine as recorded in {FILE}"
    result.stdout.fnmatch_lines_random([
        f"SKIPPED [[]1[]] test_suite.py:12: {same}",  # an h100 test, not skipped for hardware
        f"SKIPPED [[]1[]] test_suite.py:16: {same}",  # the old clone's path is the same file
        f"SKIPPED [[]1[]] test_suite.py:29: {same}",
        "SKIPPED [[]1[]] test_suite.py:33: baselines not checked: llmperf.ab writes no baseline "
        "table",
        'SKIPPED [[]1[]] test_suite.py:37: no committed baseline table [[]"test_not_recorded"[]]'])
    assert not (suite.path / ".llmperf" / "logs").exists(), "no engine started"


@pytest.mark.parametrize("selected", [["-k", "same"], ["-m", "cpu"]])
def test_deselected_tests_still_exist(suite: pytest.Pytester, selected: list[str]):
    result = suite.runpytest_subprocess("--llmperf-check-baselines", *selected,
                                        "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # for the removed test's table only
    assert [line.split(": stale: ")[0] for line in check_section(result)] == [
        f'{FILE}: ["test_removed"]']


def test_a_fresh_tree_passes(suite: pytest.Pytester):
    (suite.path / FILE).unlink()
    result = suite.runpytest_subprocess("--llmperf-check-baselines", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(skipped=7)
    assert "llmperf baseline check" not in result.stdout.str()


def test_a_suite_that_fails_to_import_loses_no_table(suite: pytest.Pytester):
    suite.makepyfile(test_suite="import no_such_module_here\n" + SUITE)
    result = suite.runpytest_subprocess("--llmperf-check-baselines", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # the collection error, nothing else
    assert "llmperf baseline check" not in result.stdout.str()


def test_it_is_refused_with_update_baselines(pytester: pytest.Pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--llmperf-check-baselines", "--llmperf-update-baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: pytest-llmperf: --llmperf-check-baselines ends each test at its first "
        "measurement, measuring nothing: drop --llmperf-check-args and "
        "--llmperf-update-baselines"])


def test_it_is_refused_under_xdist(pytester: pytest.Pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("--llmperf-check-baselines", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: pytest-llmperf: --llmperf-check-baselines runs in one process (it starts no "
        "engine): drop -n"])
