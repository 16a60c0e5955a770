"""`llmperf bootstrap-baselines`: a runner shape's first baselines, from repeats, as new files.

    llmperf bootstrap-baselines --marker h200 [--repeats 3] [SUITE ... (default suites/)]
                                [-- pytest args]

The first night on a new runner shape (a GPU model and the GPUs its engines occupy, or a CPU:
verdict/shapes.py) has no committed table to gate against. This runs the marked tests once as a
pytest session of its own with --llmperf-update-baselines and --llmperf-repeat N into a scratch
folder, so each table's spread is measured on this machine (its repeats; n = N) instead of a
prior from elsewhere, then copies into baselines/ every table the repository does not hold yet.
A committed table is never touched: rewriting one is a decision (pytest --llmperf-update-
baselines), not a side effect of setting up a runner. The new files are ready to commit
(`bash scripts/commit-baselines`, docs/nightly.md, "The first night").
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_llmperf.nightly.command import DEFAULT_SUITES
from pytest_llmperf.verdict import baselines

__all__ = ["add_command", "merge_new_tables", "run", "split_pytest_args"]

DEFAULT_REPEATS = 3
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_command(commands) -> None:
    parser = commands.add_parser(
        "bootstrap-baselines", help="measure a runner shape's first baselines (repeats) and "
                                    "write the tables the repository lacks, ready to commit",
        description="Run the tests of --marker with --llmperf-update-baselines and "
                    "--llmperf-repeat N, then add each table that baselines/ does not hold yet; "
                    "committed tables are kept. Arguments after -- go to pytest.")
    parser.add_argument("--marker", required=True, metavar="MARKER",
                        help="the hardware marker of this runner (cpu, h100, h200, a100, gpus)")
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, metavar="N",
                        help="measurements of each test, whose spread the tables keep "
                             f"(default {DEFAULT_REPEATS}; 2 or more)")
    parser.add_argument("--baseline-dir", type=Path, default=Path("baselines"), metavar="DIR",
                        help="the committed baselines (default baselines)")
    parser.add_argument("suites", nargs="*", metavar="SUITE",
                        help="suite files or folders (default "
                             f"{' '.join(DEFAULT_SUITES)}, as llmperf nightly)")
    parser.set_defaults(run=run)


def split_pytest_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """This command's arguments, and pytest's after its `--` (argparse would take them for
    suites); other commands' argv as it is."""
    argv = list(argv)
    if "bootstrap-baselines" not in argv[:1] or "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1:]


@dataclass
class Merged:
    """What a merge did: tables added (by file), files made new, committed tables kept."""

    added: dict[Path, list[str]] = field(default_factory=dict)
    new_files: list[Path] = field(default_factory=list)
    kept: int = 0


def merge_new_tables(scratch: Path, target: Path) -> Merged:
    """Copy each table of `scratch`/<shape>/<suite>.toml that `target` lacks into `target`."""
    merged = Merged()
    for path in sorted(scratch.glob("*/*.toml")):
        destination = target / path.relative_to(scratch)
        have = _keys(destination)
        is_new = not destination.exists()
        for key in tomllib.loads(path.read_text(encoding="utf-8")):
            if key in have:
                merged.kept += 1
                continue
            table = baselines.load_baseline(path, key)
            destination.parent.mkdir(parents=True, exist_ok=True)
            baselines.update_baseline(destination, key, table.metrics, table.provenance)
            merged.added.setdefault(destination, []).append(key)
        if is_new and destination in merged.added:
            merged.new_files.append(destination)
    return merged


def _keys(path: Path) -> set[str]:
    try:
        return set(tomllib.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return set()


def pytest_command(marker: str, repeats: int, scratch: Path, suites: Sequence[str],
                   extra: Sequence[str]) -> list[str]:
    # `--llmperf-baseline-dir=DIR` in one word: pytest finds its rootdir before it loads plugins,
    # so a plugin option's value given as a word of its own is taken for a test path, and the
    # rootdir becomes the common folder of the suite and the scratch folder (/tmp for a checkout
    # under /tmp). Baselines record model paths relative to the rootdir: the tables then named
    # the model "ci-clone/suites/models/..." and the next night, rooted in its checkout, saw
    # another engine configuration (CI, 2026-11-28).
    return [sys.executable, "-m", "pytest", "-m", marker, *suites, "--llmperf-update-baselines",
            "--llmperf-repeat", str(repeats), f"--llmperf-baseline-dir={scratch}", *extra]


def run(args: argparse.Namespace) -> int:
    if args.repeats < 2:
        print(f"llmperf: error: --repeats {args.repeats}: give 2 or more (the tables keep their "
              "spread)", file=sys.stderr)
        return EXIT_USAGE
    scratch = Path(tempfile.mkdtemp(prefix="llmperf-bootstrap-"))
    try:
        suites = args.suites or list(DEFAULT_SUITES)
        command = pytest_command(args.marker, args.repeats, scratch, suites, args.after_dashes)
        print("llmperf: " + " ".join(command), flush=True)
        done = subprocess.run(command, check=False)
        merged = merge_new_tables(scratch, args.baseline_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for line in _report(merged, args.marker, suites):
        print(line)
    return EXIT_OK if done.returncode == 0 else EXIT_FAILED


def _report(merged: Merged, marker: str, suites: Sequence[str]) -> list[str]:
    lines = []
    for path, keys in merged.added.items():
        new = " (new file)" if path in merged.new_files else ""
        lines.append(f"llmperf: {path}{new}: {len(keys)} table{'s' * (len(keys) != 1)} added")
    if merged.kept:
        lines.append(f"llmperf: {merged.kept} committed table{'s' * (merged.kept != 1)} kept; "
                     f"rewrite them with: pytest -m {marker} {' '.join(suites)} "
                     "--llmperf-update-baselines")
    if merged.added:
        lines.append("llmperf: commit them: bash scripts/commit-baselines")
    else:
        lines.append("llmperf: no table added (no test of this marker passed, or every table "
                     "is committed already)")
    return lines
