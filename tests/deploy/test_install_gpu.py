"""scripts/install-gpu on a machine whose torch sees no GPU (this one: the CPU build of torch)
fails in one line unless LLMPERF_ALLOW_NO_GPU=1. The installs are skipped (a venv whose python
answers `-m pip` with success) and vLLM is a stand-in module, so only the script's check runs,
with the real torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINE = ("install-gpu: {}: torch sees no GPU: check the driver (nvidia-smi); the pinned stack "
        "needs one for CUDA 13.0 (known to work: 580.159.04)")


def _install(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\n[ "$1" = -m ] && exit 0\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    (tmp_path / "vllm.py").write_text('__version__ = "0.24.0"\n')
    environ = {key: value for key, value in os.environ.items() if key != "LLMPERF_ALLOW_NO_GPU"}
    environ.update(LLMPERF_VENV=str(venv), PYTHONPATH=str(tmp_path), CUDA_VISIBLE_DEVICES="",
                   **env)
    return subprocess.run(["bash", str(REPO / "scripts" / "install-gpu")], capture_output=True,
                          text=True, timeout=120, env=environ)


def test_no_gpu_fails_in_one_line(tmp_path):
    done = _install(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == LINE.format("error") + "; LLMPERF_ALLOW_NO_GPU=1 installs without one\n"


def test_no_gpu_is_a_warning_when_allowed(tmp_path):
    done = _install(tmp_path, LLMPERF_ALLOW_NO_GPU="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == LINE.format("warning") + "\n"
    assert ", 0 GPU(s) visible, in " in done.stdout
