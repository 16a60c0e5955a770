"""The deploy files' own commands, run as written, on the CPU: each `run:` step of the GitHub
workflow and each `script:` line of the GitLab pipeline goes to bash unchanged, in throw-away
clones of this repository whose suites/ holds one small test (its measurements injected, as in
the plugin tests: tests/plugin/history_suite.py), with a real bare git remote, a real PostgreSQL
store and a webhook receiver on 127.0.0.1. The steps a CPU cannot run are in SKIPPED, and that
list is all this skips.

The scenario: the first baselines of two runner shapes on one day, the CPU from the workflow's
`baselines` job and an H100 (the hardware override) from the GitLab `baselines` job, each from
its own clone, both pushed without colliding; both branches merged; a night from the workflow's
`suite` job gated by the merged table and green; a night twice as slow from the GitLab `nightly`
job red, its failure posted to the webhook; `llmperf ack` from a third clone, and the next
night as slow green. And the CronJob's command and args, with its
environment as Kubernetes sets it ($(VAR) expanded, LLMPERF_HOST from the downward API's
spec.nodeName, the reports volume mounted in a temporary folder), on an H200 by the hardware
override: two nights in two pods of one node are one host in the store."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.deploy.linting import DEPLOY, REPO
from tests.plugin.history_suite import CONFTEST, SUITE
from tests.webhook_receiver import Receiver

WORKFLOW = DEPLOY / "github" / "nightly-gpu.yml"
GITLAB = DEPLOY / "gitlab" / "nightly.gitlab-ci.yml"
CRONJOB = DEPLOY / "kubernetes" / "nightly-cronjob.yaml"
# The steps a CPU cannot run, by the name the file gives them, and why.
SKIPPED = {
    "install the pinned GPU stack": "installs the CUDA build of vLLM; the clones use this .venv",
    "bash scripts/install-gpu": "the same, in the GitLab jobs",
    "notify that the night did not start": "runs only when the install failed",
}
MARKED = SUITE.replace(
    'pytestmark = pytest.mark.engine(Engine(model="m", max_num_seqs=32))',
    'pytestmark = [pytest.mark.engine(Engine(model="m", max_num_seqs=32)), pytest.mark.cpu, '
    'pytest.mark.h100, pytest.mark.h200]')
TPOT_S = 0.010
# What a night twice as slow regresses (tests/plugin/test_acks_plugin.py's suite): acknowledged.
ACKED = ("tpot_s.p50", "tpot_s.p90", "e2el_s.p50", "output_throughput_tok_s")


def _github(job: str) -> list[tuple[str, str]]:
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"][job]["steps"]
    return [(step.get("name", step["run"]), step["run"]) for step in steps if "run" in step]


def _gitlab(job: str) -> list[tuple[str, str]]:
    return [(line, line) for line in yaml.safe_load(GITLAB.read_text())[job]["script"]]


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _steps(clone: Path, steps: list[tuple[str, str]], env: dict[str, str]) -> list[int]:
    """Each step as the runner gives it to bash (errexit, pipefail); its exit status."""
    statuses = []
    for name, command in steps:
        if name in SKIPPED:
            continue
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               command], cwd=clone, env=env, capture_output=True, text=True,
                              timeout=300)
        statuses.append(done.returncode)
        if done.returncode not in (0, 1):
            pytest.fail(f"{name}: exit {done.returncode}\n{done.stdout[-3000:]}{done.stderr}")
    return statuses


def _clone(tmp_path: Path, name: str) -> Path:
    clone = tmp_path / name
    _git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), str(clone))
    for key, value in (("user.name", "ci"), ("user.email", "ci@localhost")):
        _git(clone, "config", key, value)
    (clone / ".venv").symlink_to(REPO / ".venv")
    return clone


def _origin(tmp_path: Path) -> None:
    """A bare remote holding this repository with suites/ replaced by the one small test."""
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(tmp_path / "origin.git"))
    seed = tmp_path / "seed"
    _git(tmp_path, "clone", "-q", "--no-hardlinks", str(REPO), str(seed))
    _git(seed, "rm", "-rq", "suites")
    (seed / "suites").mkdir()
    (seed / "suites" / "conftest.py").write_text(CONFTEST)
    (seed / "suites" / "test_night.py").write_text(MARKED)
    _git(seed, "add", "suites")
    _git(seed, "-c", "user.name=ci", "-c", "user.email=ci@localhost", "commit", "-qm", "suite")
    _git(seed, "push", "-q", str(tmp_path / "origin.git"), "HEAD:refs/heads/main")


def test_the_deploy_files_commands_as_written(tmp_path, postgres_db):
    _origin(tmp_path)
    with Receiver() as receiver:
        base = {key: value for key, value in os.environ.items()
                if not key.startswith(("LLMPERF_", "GH_", "GITHUB_", "CI"))}
        base.update(LLMPERF_HISTORY=postgres_db, LLMPERF_WEBHOOK_URL=receiver.url,
                    FAKE_a=f"0.1,{TPOT_S}")
        _steps(_clone(tmp_path, "cpu"), _github("baselines"), {**base, "MARKER": "cpu"})
        _steps(_clone(tmp_path, "h100"), _gitlab("baselines"),
               {**base, "MARKER": "h100", "LLMPERF_HARDWARE": "h100"})
        day = time.strftime("%Y-%m-%d", time.gmtime())
        branches = _git(tmp_path / "origin.git", "for-each-ref", "--format=%(refname:short)",
                        "refs/heads/llmperf").split()
        assert branches == [f"llmperf/baselines-{day}-cpu", f"llmperf/baselines-{day}-h100"]

        reviewer = _clone(tmp_path, "reviewer")  # merges both pull requests
        for branch in branches:
            _git(reviewer, "merge", "-q", "--no-edit", f"origin/{branch}")
        _git(reviewer, "push", "-q", "origin", "HEAD:main")
        assert {p.parent.name for p in (reviewer / "baselines").glob("*/test_night.toml")} == {
            "cpu", "h100"}

        green = _steps(_clone(tmp_path, "night-1"), _github("suite"), {**base, "MARKER": "cpu"})
        assert green == [0] and receiver.bodies == []
        # Twice as slow: 20 injected requests make a band the gate states ("it sees 54%").
        slowed = {**base, "MARKER": "cpu", "FAKE_a": f"0.1,{TPOT_S * 2}"}
        red = _steps(_clone(tmp_path, "night-2"), _gitlab("nightly"), slowed)
        assert red == [1]
        [(_, posted)] = receiver.bodies
        assert "suites/test_night.py::test_a: tpot_s.p50" in posted["text"], posted

        # Someone reads the post and acknowledges it from a clone of their own (docs/nightly.md's
        # command); the next night, as slow, is green on the same files.
        triage = _clone(tmp_path, "triage")
        for metric in ACKED:
            done = subprocess.run(
                [".venv/bin/llmperf", "ack", "suites/test_night.py::test_a", "--metric", metric,
                 "--reason", "driver 580: known, tracked in #412", "--history",
                 postgres_db], cwd=triage, env=base, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
        acked = _steps(_clone(tmp_path, "night-3"), _gitlab("nightly"), slowed)
    assert acked == [0]
    assert len(receiver.bodies) == 1  # nothing new to post


def _cronjob(env: dict[str, str], reports: Path) -> str:
    """The container's command and args as Kubernetes runs them: each $(VAR) of its env
    expanded, the reports volume's mount path moved to `reports`."""
    spec = yaml.safe_load(CRONJOB.read_text())["spec"]["jobTemplate"]["spec"]["template"]
    [container] = spec["spec"]["containers"]
    mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "reports")
    words = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], word)
             for word in container["command"] + container["args"]]
    return " ".join(".venv/bin/" + word if i == 0 else f"'{word.replace(mount, str(reports))}'"
                    for i, word in enumerate(words))


def test_the_cronjobs_command_names_the_node_as_the_host(tmp_path, postgres_db):
    _origin(tmp_path)
    cronjob = yaml.safe_load(CRONJOB.read_text())
    [container] = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    from_node = [e["name"] for e in container["env"]
                 if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName"]
    assert from_node == ["LLMPERF_HOST"]
    base = {key: value for key, value in os.environ.items() if not key.startswith("LLMPERF_")}
    base.update(LLMPERF_HISTORY=postgres_db, FAKE_a=f"0.1,{TPOT_S}", LLMPERF_HARDWARE="h200",
                LLMPERF_HOST="gpu-node-7")
    for pod in ("llmperf-nightly-h200-1-aaaaa", "llmperf-nightly-h200-2-bbbbb"):
        env = {**base, "POD_NAME": pod}
        command = _cronjob(env, tmp_path / "reports")
        assert _steps(_clone(tmp_path, pod), [("cronjob", command)], env) == [0]
        assert (tmp_path / "reports" / "runs" / pod / "junit.xml").is_file()
    import psycopg

    with psycopg.connect(postgres_db) as connection:
        hosts = connection.execute("SELECT host FROM runs ORDER BY id").fetchall()
    assert hosts == [("gpu-node-7",), ("gpu-node-7",)]
