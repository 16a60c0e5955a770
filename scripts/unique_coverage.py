"""Which lines of pytest_llmperf each unit of tests covers that no other unit does.

    python scripts/unique_coverage.py /tmp/cov

reads one coverage.py data directory per unit (/tmp/cov/UNIT/.coverage*, written as
docs/testing.md says), combines each, and prints per unit its covered lines and the lines no
other unit covers, by file. This is how the project decides that a slow test may be `nightly`
(docs/testing.md).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from coverage import CoverageData

PACKAGE = "pytest_llmperf/"


def unit_lines(where: Path) -> set[tuple[str, int]]:
    """(file inside the package, line) covered by the unit whose data files are in `where`."""
    combined = where / ".coverage"
    parts = list(where.glob(".coverage.*"))
    if parts:  # coverage combine folds the parallel files into .coverage (kept: --keep)
        subprocess.run([sys.executable, "-m", "coverage", "combine", "--keep", "-q",
                        "--data-file", str(combined), *map(str, parts)], check=True)
    data = CoverageData(str(combined))
    data.read()
    return {(name.split(PACKAGE, 1)[-1], line) for name in data.measured_files()
            for line in data.lines(name) or ()}


def main(root: str) -> None:
    units = {d.name: unit_lines(d) for d in sorted(Path(root).iterdir())
             if d.is_dir() and any(d.glob(".coverage*"))}
    for name, lines in units.items():
        others = set().union(*(v for k, v in units.items() if k != name))
        by_file: dict[str, list[int]] = {}
        for file, line in sorted(lines - others):
            by_file.setdefault(file, []).append(line)
        unique = sum(map(len, by_file.values()))
        print(f"{name}: {len(lines)} lines, {unique} no other unit covers")
        for file, numbers in by_file.items():
            print(f"  {file}: {numbers}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/cov")
