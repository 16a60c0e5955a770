"""Where a measurement came from, as baselines and run files record it: the checkout's commit and
the engine spec in a form that matches across checkouts."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_llmperf.engines.spec import Engine

GIT_TIMEOUT_S = 5
# The commit an image was built from, where there is no .git (deploy/docker/Dockerfile sets it
# from its build argument LLMPERF_COMMIT).
COMMIT_ENV = "LLMPERF_COMMIT"


def git_commit(directory: Path, environ: Mapping[str, str] = os.environ) -> str | None:
    """The checkout's commit (with "-dirty" when it has changes), for provenance; outside a
    checkout, $LLMPERF_COMMIT (an image's), else None."""
    return _checkout_commit(directory) or environ.get(COMMIT_ENV, "").strip() or None


def _checkout_commit(directory: Path) -> str | None:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True,
                             text=True, timeout=GIT_TIMEOUT_S)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=directory, capture_output=True, text=True,
                               timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if sha.returncode != 0:
        return None
    return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def engine_identity(engine: Engine, rootdir: Path) -> dict[str, Any]:
    """The spec as baselines record it: paths inside the project relative to its root, so a
    baseline made in one checkout matches the same spec in another (CI clones elsewhere), and
    secret env and flag values as a marker (secrets.py), so none is committed and a changed
    token still matches the recorded engine."""
    identity = engine.shown()
    for name in ("model", "tokenizer", "chat_template"):
        value = identity.get(name)
        if isinstance(value, str) and value.startswith("/"):
            try:
                identity[name] = str(Path(value).relative_to(rootdir))
            except ValueError:
                pass
    if "lora_modules" in identity:  # adapters inside the project likewise
        identity["lora_modules"] = {name: _in_project(path, rootdir)
                                    for name, path in identity["lora_modules"].items()}
    return identity


def _in_project(path: str, rootdir: Path) -> str:
    try:
        return str(Path(path).relative_to(rootdir)) if path.startswith("/") else path
    except ValueError:
        return path
