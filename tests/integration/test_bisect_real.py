"""`llmperf bisect` on the real CPU engine finds a planted regression, and resumes.

Environments hold the same vLLM (each a venv whose site-packages reach this one's); from a given
one on, an import hook slows every model step (tests/integration/slowdown), as a release that
regressed would. The command must name the first slowed one as the first bad candidate and the
one before it as the last good one, having measured them against each other. It is run twice,
the way an interrupted bisect is: the first run's time budget stops it before its second step,
and the same search, asked for through pytest's own option (--llmperf-bisect) this time, takes
its first step from the results store, measures what is left, and measures the verdict's A/B
once more before it names it.

Both searches are nightly (docs/testing.md, "Where CI's time goes"): two environments (two A/B
steps: every module of bisect/ that runs a step, resumes, repeats and reports; 216-276 s of CI on
2 cores, its largest test), and four, where the middle steps are chosen and one comes out good
(about 90 s more). CI holds the search's choices (tests/unit/bisect/test_bisect_search.py), the
steps' judgement, resumption and budget from their results (tests/unit/bisect/test_bisect.py)
and the option as a user meets it (tests/plugin/test_bisect_option_plugin.py); what only this
module runs is the step's own pytest session over two interpreters.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scripts.calibrate_bisect import SUITE, make_environment
from tests.conftest import REPO, leftover_vllm_processes, requires_vllm

pytestmark = requires_vllm

A_B = ["--pairs", "2", "--confirm-pairs", "2", "--tolerance", "0.3"]
# Two engines and a client on 2 cores can trip the client's self-check; the verdict is the point.
STEP_ARGS = ["--llmperf-client-check", "warn"]


def llmperf_bisect(where: Path, environments: list[Path], *more: str):
    command = [sys.executable, "-m", "pytest_llmperf.cli", "bisect", "test_planted.py::test_decode",
               *map(str, environments), *A_B, "--pytest-args", " ".join(STEP_ARGS), *more]
    return subprocess.run(command, cwd=where, capture_output=True, text=True, timeout=900)


def pytest_bisect(where: Path, environments: list[Path]):
    """The same search through the pytest option: the A/B settings are the --llmperf-ab-* ones."""
    settings = [f"--llmperf-ab-{name[2:]}" if name.startswith("--") else name for name in A_B]
    command = [sys.executable, "-m", "pytest", "test_planted.py::test_decode",
               "--llmperf-bisect", " ".join(map(str, environments)),
               *settings, *STEP_ARGS]
    return subprocess.run(command, cwd=where, capture_output=True, text=True, timeout=900)


# (environments, the first slowed one, the measured steps of the second run after the one taken
# from history: (A, B, outcome, again))
SEARCHES = [
    pytest.param(2, 1, [(0, 1, "bad", True)], id="2-environments", marks=pytest.mark.nightly),
    pytest.param(4, 2, [(0, 1, "good", False), (1, 2, "bad", False), (1, 2, "bad", True)],
                 id="4-environments", marks=pytest.mark.nightly),
]


@pytest.mark.parametrize(("count", "first_bad", "steps"), SEARCHES)
def test_bisect_finds_the_planted_environment_and_resumes(pytester, monkeypatch, count,
                                                          first_bad, steps):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_planted=SUITE)
    environments = [make_environment(pytester.path / f"env-{i}",
                                     step_delay_s=0.005 if i >= first_bad else 0.0)
                    for i in range(count)]
    names = [str(env) for env in environments]

    # Stopped by its budget: the first step always runs (nothing measured says how long one
    # takes), and no step fits in the 3 s left after it, however fast this machine is.
    first = llmperf_bisect(pytester.path, environments, "--max-minutes", "0.05")
    assert first.returncode == 3, first.stdout + first.stderr
    progress = [line for line in first.stdout.splitlines() if line.startswith("bisect step")]
    assert [line.split(": ")[1] for line in progress] == [f"{names[0]} vs {names[-1]}"]
    assert [line.split(": ")[2] for line in progress] == ["bad"]
    assert "not finished: the time budget of 0.05 min would be spent" in first.stdout

    second = pytest_bisect(pytester.path, environments)
    assert leftover_vllm_processes() == []
    assert second.returncode == 0, second.stdout + second.stderr
    lines = second.stdout.splitlines()
    progress = [line for line in lines if line.startswith("bisect step")]
    assert len(progress) == 1 + len(steps)
    assert "[from history; " in progress[0]
    for number, (line, (a, b, outcome, again)) in enumerate(zip(progress[1:], steps), start=2):
        # The verdict's A/B measured once more before the search names it.
        assert line.startswith(f"bisect step {number}: {names[a]} vs {names[b]}"
                               f"{' (again)' if again else ''}: {outcome}: "), line
    assert progress[-1].split(": ", 3)[3].startswith("tpot_s.p50 B/A ")
    verdict = lines[lines.index(next(line for line in lines if line.startswith("bisect of"))):]
    assert verdict[0] == (f"bisect of test_planted.py::test_decode over {count} candidates "
                          f"({names[0]} .. {names[-1]}): first bad")
    assert verdict[1] == f"first bad: {names[first_bad]}; last good: {names[first_bad - 1]}"
    assert verdict[2].startswith("  tpot_s.p50 regressed in A/B: B/A median ")
    assert verdict[3].startswith("  measured again: tpot_s.p50 regressed in A/B: B/A median ")
    assert verdict[4].startswith("  the two environments resolve to the same packages")
    reproduce = verdict.index("reproduce the last A/B:")
    assert (f"'--llmperf-ab-a={{\"python\": \"{names[first_bad - 1]}\"}}'"
            in verdict[reproduce + 1])
    print(first.stdout, second.stdout, sep="\n")
