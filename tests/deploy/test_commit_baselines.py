"""scripts/commit-baselines as the baseline jobs call it: two runner shapes bootstrapped on one
day, from two clones, push two branches to a real (bare) remote without colliding; the pull
request is opened with gh where gh and a token are at hand, and otherwise one line says how."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "commit-baselines"
TOKENS = ("GH_TOKEN", "GITHUB_TOKEN", "LLMPERF_GITLAB_TOKEN", "LLMPERF_BASELINE_BRANCH",
          "CI_API_V4_URL")


def _run(cwd: Path, *command: str, env: dict[str, str] | None = None) -> str:
    environ = {key: value for key, value in os.environ.items() if key not in TOKENS}
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={**environ, **(env or {})})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _clone_with_table(tmp_path: Path, name: str, shape: str) -> Path:
    clone = tmp_path / name
    _run(tmp_path, "git", "clone", "-q", str(tmp_path / "remote.git"), str(clone))
    table = clone / "baselines" / shape / "test_s.toml"
    table.parent.mkdir(parents=True)
    table.write_text('[test_a.metrics."tpot_s.p50"]\nvalue = 0.5\n')
    return clone


def _remote_with_main(tmp_path: Path) -> Path:
    remote = tmp_path / "remote.git"
    _run(tmp_path, "git", "init", "-q", "--bare", "-b", "main", str(remote))
    seed = tmp_path / "seed"
    _run(tmp_path, "git", "clone", "-q", str(remote), str(seed))
    (seed / "baselines").mkdir()
    (seed / "baselines" / ".keep").write_text("")
    for command in (("git", "add", "baselines"),
                    ("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "seed"),
                    ("git", "push", "-q", "origin", "HEAD:main")):
        _run(seed, *command)
    return remote


def test_two_shapes_on_one_day_push_two_branches_and_say_how_to_open_the_requests(tmp_path):
    remote = _remote_with_main(tmp_path)
    day = time.strftime("%Y-%m-%d", time.gmtime())
    h200 = _clone_with_table(tmp_path, "h200", "h200-8gpu")
    h100 = _clone_with_table(tmp_path, "h100", "h100-8gpu")
    said = [_run(clone, "bash", str(SCRIPT)).splitlines()[-2:] for clone in (h200, h100)]
    branches = _run(remote, "git", "for-each-ref", "--format=%(refname:short)", "refs/heads")
    assert branches.split() == sorted(["main", f"llmperf/baselines-{day}-h200-8gpu",
                                       f"llmperf/baselines-{day}-h100-8gpu"])
    branch = f"llmperf/baselines-{day}-h100-8gpu"
    assert said[1] == [f"commit-baselines: pushed {branch} to origin",
                       f"commit-baselines: open a pull request from {branch} (gh pr create "
                       f"--head {branch}, or the forge's page; gh with GH_TOKEN, or "
                       "LLMPERF_GITLAB_TOKEN in GitLab CI, opens it)"]
    assert _run(remote, "git", "ls-tree", "-r", "--name-only", branch).split() == [
        "baselines/.keep", "baselines/h100-8gpu/test_s.toml"]


def test_gh_with_a_token_opens_the_pull_request(tmp_path):
    _remote_with_main(tmp_path)
    clone = _clone_with_table(tmp_path, "h200", "h200-8gpu")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_gh = bin_dir / "gh"  # records its arguments, one a line
    fake_gh.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/gh-args\n')
    fake_gh.chmod(0o755)
    _run(clone, "bash", str(SCRIPT),
         env={"GH_TOKEN": "t", "PATH": f"{bin_dir}:{os.environ['PATH']}",
              "LLMPERF_BASELINE_BRANCH": "llmperf/b"})
    args = (tmp_path / "gh-args").read_text().splitlines()
    assert args[:4] == ["pr", "create", "--head", "llmperf/b"]
    assert args[5].startswith("Baselines for h200-8gpu from ")


def test_a_pull_request_gh_cannot_open_is_said_and_the_push_stands(tmp_path):
    remote = _remote_with_main(tmp_path)
    clone = _clone_with_table(tmp_path, "h200", "h200-8gpu")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "gh").chmod(0o755)
    said = _run(clone, "bash", str(SCRIPT),
                env={"GH_TOKEN": "t", "PATH": f"{bin_dir}:{os.environ['PATH']}",
                     "LLMPERF_BASELINE_BRANCH": "llmperf/b"})
    assert said.splitlines()[-1] == (
        "commit-baselines: gh could not open the pull request; open a pull request from "
        "llmperf/b (gh pr create --head llmperf/b, or the forge's page; gh with GH_TOKEN, or "
        "LLMPERF_GITLAB_TOKEN in GitLab CI, opens it)")
    assert "llmperf/b" in _run(remote, "git", "branch", "--list", "llmperf/b")
