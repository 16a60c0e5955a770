"""The GPU install's lock file: every package it installs, resolved once, pinned.

    python scripts/lock_gpu.py            # resolve and write deploy/gpu-lock.txt (network)
    python scripts/lock_gpu.py --check    # the lock agrees with pyproject, the constraints
                                          # and the two installs (no network; CI runs it)

deploy/constraints-gpu.txt holds the pins chosen by hand (vLLM and what it pins exactly: torch,
CUDA); everything else (transformers, numpy, ...) would resolve anew each night. The lock is
that resolution written down: pip's own resolver (`pip install --dry-run --report`, the
installation report: https://pip.pypa.io/en/stable/reference/installation-report/) run for the
GPU machine's interpreter (CPython 3.12, manylinux_2_31 x86_64, wheels only) on pyproject's
dependencies and the extras scripts/install-gpu installs, under the hand-chosen pins.
scripts/install-gpu and deploy/docker/Dockerfile install under the lock, so a night installs
what the lock says and nothing resolved that night. A pin moves through the upgrade gate
(docs/upgrades.md): change the constraints and pyproject, then run this again.

The check (tests/deploy/test_gpu_lock.py) fails, one line per disagreement, when a hand-chosen
pin or pyproject's requirement is not what the lock holds, when a requirement is missing from it,
or when an install does not use it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tomllib
from datetime import date
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
LOCK = Path("deploy/gpu-lock.txt")
CONSTRAINTS = Path("deploy/constraints-gpu.txt")
INSTALLS = (Path("scripts/install-gpu"), Path("deploy/docker/Dockerfile"))
EXTRAS = ("gpu", "postgres", "plots")  # what scripts/install-gpu and the image install
# The GPU machine's interpreter: the stack known to work is on Python 3.12 (docs/install.md), on
# glibc 2.31 or later: vLLM 0.24.0 requires llguidance 1.7, whose wheels are manylinux_2_31 only
# (`pip download llguidance==1.7.6 --platform manylinux_2_28_x86_64` finds none).
TARGET = {"python_version": "3.12", "platform": "manylinux_2_31_x86_64"}


def requirements(pyproject: Path, extras: tuple[str, ...] = EXTRAS) -> list[Requirement]:
    """pyproject's dependencies and `extras`, those whose markers hold on the target."""
    project = tomllib.loads(pyproject.read_text())["project"]
    listed = [*project["dependencies"]]
    for extra in extras:
        listed += project["optional-dependencies"][extra]
    environment = {**default_environment(), "python_version": TARGET["python_version"],
                   "python_full_version": TARGET["python_version"] + ".0",
                   "sys_platform": "linux", "platform_machine": "x86_64", "extra": ""}
    found = [Requirement(line) for line in listed]
    return [r for r in found if r.marker is None or r.marker.evaluate(environment)]


def pins(text: str) -> dict[str, str]:
    """name -> version of every `name==version` line (comments and blank lines skipped)."""
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[canonicalize_name(name)] = version.strip()
    return out


def resolve(repo: Path = REPO) -> dict[str, str]:
    """pip's resolution of requirements() under the constraints, for TARGET: name -> version."""
    with tempfile.TemporaryDirectory() as scratch:
        wanted = Path(scratch) / "requirements.txt"
        wanted.write_text("".join(f"{r}\n" for r in requirements(repo / "pyproject.toml")))
        report = Path(scratch) / "report.json"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
             "--quiet", "--report", str(report), "--only-binary", ":all:",
             "--implementation", "cp", "--python-version", TARGET["python_version"],
             *(f"--platform={tag}" for tag in _platform_tags()),
             "--target", str(Path(scratch) / "target"),
             "-c", str(repo / CONSTRAINTS), "-r", str(wanted)],
            check=True)
        installed = json.loads(report.read_text())["install"]
    return {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
            for item in installed}


def _platform_tags() -> list[str]:
    """TARGET's manylinux tag and every older one such a machine runs: pip takes --platform
    literally (one tag), and many wheels (tokenizers', numpy's) are tagged manylinux_2_17 or
    manylinux2014 (https://peps.python.org/pep-0600/)."""
    newest = int(TARGET["platform"].split("_")[2])
    return ([f"manylinux_2_{minor}_x86_64" for minor in range(newest, 4, -1)]
            + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"])


def lock_text(resolved: dict[str, str], today: date) -> str:
    header = (
        f"# The GPU install, every package pinned: made by `python scripts/lock_gpu.py` on "
        f"{today.isoformat()}\n"
        f"# (pip's resolver, CPython {TARGET['python_version']} on {TARGET['platform']}, "
        f"wheels only) from pyproject.toml's dependencies\n"
        f"# and its {', '.join(EXTRAS)} extras under {CONSTRAINTS}. scripts/install-gpu and "
        "deploy/docker/Dockerfile\n"
        "# install under it (pip -c). Do not edit by hand: change the constraints or pyproject "
        "and run the script again.\n")
    return header + "".join(f"{name}=={resolved[name]}\n" for name in sorted(resolved))


def check(repo: Path = REPO) -> list[str]:
    """Every disagreement between the lock and what it was made from or is used by."""
    lock_path = repo / LOCK
    if not lock_path.is_file():
        return [f"{LOCK}: missing; make it with `python scripts/lock_gpu.py`"]
    locked = pins(lock_path.read_text())
    problems = []
    for name, version in pins((repo / CONSTRAINTS).read_text()).items():
        if locked.get(name) != version:
            problems.append(f"{CONSTRAINTS} pins {name}=={version}, {LOCK} has "
                            f"{locked.get(name, 'no ' + name)}: run `python scripts/lock_gpu.py`")
    for requirement in requirements(repo / "pyproject.toml"):
        name = canonicalize_name(requirement.name)
        if name not in locked:
            problems.append(f"pyproject.toml requires {requirement}, which {LOCK} lacks: run "
                            "`python scripts/lock_gpu.py`")
        elif requirement.specifier and not requirement.specifier.contains(locked[name],
                                                                          prereleases=True):
            problems.append(f"pyproject.toml requires {requirement}, {LOCK} has "
                            f"{name}=={locked[name]}: run `python scripts/lock_gpu.py`")
    for install in INSTALLS:
        if f"-c {LOCK}" not in (repo / install).read_text():
            problems.append(f"{install} does not install under {LOCK} (pip -c {LOCK})")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="check the lock against pyproject, the constraints and the installs")
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        for line in problems:
            print(f"lock_gpu: {line}", file=sys.stderr)
        if not problems:
            print(f"lock_gpu: {LOCK} agrees with pyproject.toml, {CONSTRAINTS} and "
                  f"{', '.join(map(str, INSTALLS))}")
        return 1 if problems else 0
    resolved = resolve()
    (REPO / LOCK).write_text(lock_text(resolved, date.today()))
    print(f"lock_gpu: {LOCK}: {len(resolved)} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
