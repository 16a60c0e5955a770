"""The package's import contracts (pyproject.toml, [tool.importlinter]): layers that import only
downwards, pytest only in plugin/, vLLM only in engines/, no cycle between sibling modules.
import-linter checks them; the second test shows it fails a package that breaks them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=directory, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(directory)})


def test_the_package_keeps_its_import_contracts():
    run = lint(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Contracts: 5 kept, 0 broken." in run.stdout


def test_an_upward_import_and_a_cycle_break_the_contracts(tmp_path):
    package = tmp_path / "layered"
    (package / "low").mkdir(parents=True)
    (package / "high").mkdir()
    for path, text in {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "from layered.high import c\nfrom layered.low import b\n",  # upward
        "low/b.py": "from layered.low import a\n",  # a cycle with a.py
        "high/__init__.py": "",
        "high/c.py": "",
    }.items():
        (package / path).write_text(text)
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.importlinter]
        root_package = "layered"

        [[tool.importlinter.contracts]]
        name = "layers"
        type = "layers"
        layers = ["layered.high", "layered.low"]

        [[tool.importlinter.contracts]]
        name = "acyclic"
        type = "acyclic_siblings"
        ancestors = ["layered"]
        """))
    run = lint(tmp_path)
    assert run.returncode == 1
    assert "Contracts: 0 kept, 2 broken." in run.stdout
    assert "layered.low is not allowed to import layered.high" in run.stdout
