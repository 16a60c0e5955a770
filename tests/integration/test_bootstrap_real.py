"""The first night on a new runner, on the real CPU engine: `llmperf bootstrap-baselines` writes
the runner's tables as new files of a git checkout, `scripts/commit-baselines` commits and
pushes them to a real (bare, local) remote, and the next night, a fresh clone of what was
pushed, is gated by them (docs/nightly.md, "The first night").

Two engine starts (the bootstrap's, with 2 repeats, and the next night's), few requests. It
proves a path, not how fast the engine is, but it runs with the machine to itself (CI's second
step): beside other tests a disturbed measurement writes no baseline, and the bootstrap then had
no table to add (CI, 2026-11-28). The suite keeps the CPU suite's 2.5x band (suites/tiny.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO, leftover_vllm_processes, requires_vllm

pytestmark = requires_vllm

SUITE = """
import pytest
from pytest_llmperf import Workload
from suites.tiny import CPU_GATED, CPU_TOLERANCE, TINY_CPU

pytestmark = [pytest.mark.cpu, pytest.mark.engine(TINY_CPU),
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE, gate=CPU_GATED)]

def test_first_night(llmperf):
    llmperf.run(Workload.fixed(input_tokens=32, output_tokens=16, num_requests=16,
                               concurrency=4, warmup_requests=2))
"""
BRANCH = "llmperf/baselines-first-night"
TABLE = "baselines/cpu/test_night_suite.toml"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          check=True)
    return done.stdout


def run(cwd: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=400,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    assert leftover_vllm_processes() == []
    return done


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A team's repository as a runner checks it out: a suite, no baselines/ yet, and `origin`
    a bare repository on this disk."""
    remote, work = tmp_path / "remote.git", tmp_path / "night-1"
    git(tmp_path, "init", "--bare", "-q", str(remote))
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "test_night_suite.py").write_text(SUITE)
    (work / ".gitignore").write_text(".llmperf/\n")  # engine logs, the results store
    for key, value in (("user.name", "night one"), ("user.email", "night@example.com")):
        git(work, "config", key, value)
    git(work, "add", "test_night_suite.py", ".gitignore")
    git(work, "commit", "-q", "-m", "suite")
    git(work, "remote", "add", "origin", str(remote))
    git(work, "push", "-q", "origin", "main")
    return work


# Nightly: two engine starts that CI's other tests already make cover no line of their own
# (docs/testing.md). It failed on a clean clone under /tmp (2026-11-28): the bootstrap's pytest
# took the scratch folder for a test path and rooted itself in /tmp, so its tables named the
# model relative to /tmp and the next night saw another engine configuration. Fixed in
# bootstrap.pytest_command; tests/unit/test_bootstrap.py holds the rootdir to the checkout.
@pytest.mark.nightly
def test_bootstrap_commit_push_then_the_next_night_is_gated(checkout: Path, tmp_path: Path):
    boot = run(checkout, sys.executable, "-m", "pytest_llmperf.cli", "bootstrap-baselines",
               "--marker", "cpu", "--repeats", "2", "test_night_suite.py", "--",
               "-p", "no:cacheprovider", "--llmperf-history", "off")
    assert boot.returncode == 0, boot.stdout[-4000:] + boot.stderr[-2000:]
    lines = boot.stdout.splitlines()
    assert f"llmperf: {TABLE} (new file): 1 table added" in lines
    assert lines[-1] == "llmperf: commit them: bash scripts/commit-baselines"
    entry = tomllib.loads((checkout / TABLE).read_text())["test_first_night"]["metrics"]
    assert {metric["n"] for metric in entry.values()} == {2}  # measured here, twice
    assert git(checkout, "status", "--porcelain") == "?? baselines/\n"  # new, untracked

    pushed = run(checkout, "bash", str(REPO / "scripts/commit-baselines"),
                 env={"LLMPERF_BASELINE_BRANCH": BRANCH})
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert git(tmp_path / "remote.git", "ls-tree", "-r", "--name-only", BRANCH).split() == [
        ".gitignore", TABLE, "test_night_suite.py"]
    again = run(checkout, "bash", str(REPO / "scripts/commit-baselines"))
    assert again.stdout == "commit-baselines: nothing to commit in baselines\n"

    night_2 = tmp_path / "night-2"  # a fresh clone of what was pushed
    git(tmp_path, "clone", "-q", "--branch", BRANCH, str(tmp_path / "remote.git"), str(night_2))
    gated = run(night_2, sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "cpu",
                "--llmperf-require-baseline", "--llmperf-history", "off", "-v")
    # Gated by the pushed table: under --llmperf-require-baseline a missing or unusable one
    # would be an error naming it. Whether the numbers pass is the machine's business here (a
    # neighbour on the shared CI machine once made this night 27x slower): a regression is
    # gated too, against that table.
    shown = gated.stdout[-4000:] + gated.stderr[-2000:]
    assert gated.returncode in (0, 1), shown
    for unused in ("no baseline for", "other hardware", "first-run baseline", "no committed"):
        assert unused not in gated.stdout, shown
    if gated.returncode == 1:
        assert f'[{TABLE} :: "test_first_night"]' in gated.stdout, shown
