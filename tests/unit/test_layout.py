"""The tests' own layout: tests/unit mirrors the package, and no test module imports another.

A unit test module sits in tests/unit/<sub-package>/ for the sub-package it tests: the one it
imports the most names from (a top-level module, or the package's own names such as Engine,
count for tests/unit/ itself), or the one holding the module it is named after (test_junit.py:
reports/junit.py). Where sub-packages tie, any of them will do. Shared builders live in helper
modules and conftest.py files, so that running or moving one test module never depends on
another (pytest imports each test module once, under the name its folder gives it)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROOT_FOLDER = ""  # tests/unit/ itself: top-level modules and the package's own names


def sub_packages(package: Path) -> set[str]:
    return {path.name for path in package.iterdir() if (path / "__init__.py").is_file()}


def module_folders(package: Path) -> dict[str, set[str]]:
    """Each module or package name -> the sub-packages holding one of that name ("" for a
    top-level module)."""
    folders: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            folder = parts[0] if len(parts) > 1 or (package / parts[0]).is_dir() else ROOT_FOLDER
            folders.setdefault(parts[-1], set()).add(folder)
    return folders


def names_imported(tree: ast.Module, package_name: str, subs: set[str]) -> Counter:
    """How many names the module imports from each sub-package (ROOT_FOLDER: the rest)."""
    counts: Counter = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts[0] != package_name:
                continue
            for alias in node.names:
                first = parts[1] if len(parts) > 1 else alias.name
                counts[first if first in subs else ROOT_FOLDER] += 1
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == package_name:
                    counts[parts[1] if len(parts) > 1 and parts[1] in subs else ROOT_FOLDER] += 1
    return counts


def allowed_folders(test_module: Path, package: Path) -> set[str]:
    subs = sub_packages(package)
    counts = names_imported(ast.parse(test_module.read_text()), package.name, subs)
    most = {folder for folder, n in counts.items() if n == max(counts.values())}
    named = module_folders(package).get(test_module.stem.removeprefix("test_"), set())
    return (most or {ROOT_FOLDER}) | named


def misplaced(unit_dir: Path, package: Path) -> list[str]:
    """'<path>: belongs in <folders>' for each unit test module outside its folder."""
    found = []
    for test_module in sorted(unit_dir.rglob("test_*.py")):
        folder = test_module.parent.relative_to(unit_dir).as_posix()
        folder = ROOT_FOLDER if folder == "." else folder
        allowed = allowed_folders(test_module, package)
        if folder not in allowed:
            where = " or ".join(sorted((unit_dir / name).relative_to(unit_dir.parent.parent)
                                       .as_posix() for name in allowed))
            found.append(f"{test_module.relative_to(unit_dir.parent.parent)}: belongs in {where}")
    return found


def imported_modules(tree: ast.Module, module_name: str) -> set[str]:
    """The full names of what `tree` (the module `module_name`) imports: each module, and each
    name imported from one (a name may be a module too)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package `level` steps up
                above = module_name.split(".")[:-node.level]
                base = ".".join(above + ([node.module] if node.module else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def imports_of_test_modules(tests_dir: Path) -> list[str]:
    """'<path> imports <test module>' for each file under `tests_dir` that imports one."""
    found = []
    for path in sorted(tests_dir.rglob("*.py")):
        name = ".".join(path.relative_to(tests_dir.parent).with_suffix("").parts)
        for module in sorted(imported_modules(ast.parse(path.read_text()), name)):
            if module.split(".")[0] == tests_dir.name and \
                    module.rsplit(".", 1)[-1].startswith("test_"):
                found.append(f"{path.relative_to(tests_dir.parent)} imports {module}")
    return found


def test_every_unit_test_sits_in_the_folder_of_the_sub_package_it_tests():
    assert misplaced(ROOT / "tests" / "unit", ROOT / "pytest_llmperf") == []


def test_no_test_module_imports_another():
    assert imports_of_test_modules(ROOT / "tests") == []


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_test_module_outside_its_folder_is_named_with_where_it_belongs(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "", "pkg/api.py": "", "pkg/low/__init__.py": "",
        "pkg/low/stats.py": "", "pkg/high/__init__.py": "", "pkg/high/report.py": "",
        # most names from low: low
        "tests/unit/test_numbers.py": "from pkg.low.stats import a, b\nfrom pkg.high import c\n",
        # as many from low as from high, and named after high/report.py: either
        "tests/unit/low/test_report.py": "from pkg.low.stats import a\nfrom pkg.high import b\n",
        # nothing of the package, or top-level modules only: tests/unit itself
        "tests/unit/high/test_misc.py": "import os\n",
        "tests/unit/test_api.py": "from pkg import api\nfrom pkg.api import x\n",
        # a top-level module and a sub-package, one name each: either
        "tests/unit/low/test_top.py": "import pkg.api\nfrom pkg.high import report\n",
    })
    assert misplaced(tmp_path / "tests" / "unit", tmp_path / "pkg") == [
        "tests/unit/high/test_misc.py: belongs in tests/unit",
        "tests/unit/low/test_top.py: belongs in tests/unit or tests/unit/high",
        "tests/unit/test_numbers.py: belongs in tests/unit/low",
    ]


def test_an_import_of_a_test_module_is_named_however_it_is_written(tmp_path):
    write(tmp_path, {
        "tests/__init__.py": "", "tests/helpers.py": "X = 1\n",
        "tests/unit/test_a.py": "from tests.unit.test_b import X\nfrom tests.helpers import X\n",
        "tests/unit/test_b.py": "from .test_a import X\nimport tests.unit.test_a\n",
        "tests/unit/test_c.py": "from tests.unit import test_a\nfrom .. import helpers\n",
        "tests/unit/helper.py": "def f():\n    from tests.unit.test_c import X\n",
    })
    assert imports_of_test_modules(tmp_path / "tests") == [
        "tests/unit/helper.py imports tests.unit.test_c",
        "tests/unit/test_a.py imports tests.unit.test_b",
        "tests/unit/test_b.py imports tests.unit.test_a",
        "tests/unit/test_c.py imports tests.unit.test_a",
    ]
