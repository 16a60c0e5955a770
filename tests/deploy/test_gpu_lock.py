"""deploy/gpu-lock.txt, the GPU install's every package pinned (scripts/lock_gpu.py): the
committed lock agrees with pyproject.toml, deploy/constraints-gpu.txt and the two installs that
use it, and the check names each disagreement in one line, on copies of those files changed the
way a hand edit would change them. Making the lock needs the package index (pip's resolver), so
CI checks it and a person remakes it (docs/install.md)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import lock_gpu

REPO = Path(__file__).resolve().parents[2]
FILES = ("pyproject.toml", "deploy/constraints-gpu.txt", "deploy/gpu-lock.txt",
         "scripts/install-gpu", "deploy/docker/Dockerfile")


@pytest.fixture
def tree(tmp_path) -> Path:
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


def test_the_committed_lock_agrees():
    done = subprocess.run([sys.executable, "scripts/lock_gpu.py", "--check"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("lock_gpu: deploy/gpu-lock.txt agrees with pyproject.toml, "
                           "deploy/constraints-gpu.txt and scripts/install-gpu, "
                           "deploy/docker/Dockerfile\n")


def test_the_lock_holds_every_requirement_of_the_gpu_install_and_the_hand_pins():
    locked = lock_gpu.pins((REPO / "deploy/gpu-lock.txt").read_text())
    assert locked["vllm"] == "0.24.0" and locked["torch"] == "2.11.0"
    names = {r.name for r in lock_gpu.requirements(REPO / "pyproject.toml")}
    assert {"vllm", "nvidia-ml-py", "psycopg", "matplotlib", "pytest"} <= names
    assert "tomli" not in names  # `python_version < '3.11'`: not on the GPU machine's 3.12
    # More than what was asked for: the resolution's every package (transformers, numpy, ...).
    assert {"transformers", "numpy"} <= set(locked) and len(locked) > 3 * len(names)


def test_a_moved_hand_pin_is_named(tree):
    _edit(tree / "deploy/constraints-gpu.txt", "vllm==0.24.0", "vllm==0.25.0")
    assert "deploy/constraints-gpu.txt pins vllm==0.25.0, deploy/gpu-lock.txt has 0.24.0: run " \
           "`python scripts/lock_gpu.py`" in lock_gpu.check(tree)


def test_a_requirement_the_lock_lacks_or_contradicts_is_named(tree):
    _edit(tree / "pyproject.toml", '"sqlalchemy>=2.0",',
          '"sqlalchemy>=2.0",\n    "no-such-package>=13",')
    _edit(tree / "pyproject.toml", 'plots = ["matplotlib>=3.10"]', 'plots = ["matplotlib<3"]')
    problems = lock_gpu.check(tree)
    assert ("pyproject.toml requires no-such-package>=13, which deploy/gpu-lock.txt lacks: run "
            "`python scripts/lock_gpu.py`") in problems
    matplotlib = lock_gpu.pins((tree / "deploy/gpu-lock.txt").read_text())["matplotlib"]
    assert (f"pyproject.toml requires matplotlib<3, deploy/gpu-lock.txt has "
            f"matplotlib=={matplotlib}: run `python scripts/lock_gpu.py`") in problems


def test_an_install_that_does_not_use_the_lock_is_named(tree):
    _edit(tree / "scripts/install-gpu", "-c deploy/gpu-lock.txt ", "")
    assert lock_gpu.check(tree) == [
        "scripts/install-gpu does not install under deploy/gpu-lock.txt "
        "(pip -c deploy/gpu-lock.txt)"]
    (tree / "deploy/gpu-lock.txt").unlink()
    assert lock_gpu.check(tree) == [
        "deploy/gpu-lock.txt: missing; make it with `python scripts/lock_gpu.py`"]
