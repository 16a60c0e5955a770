"""What the stand-in hooks share (a sitecustomize.py per folder: slowdown, frontend_delay,
other_vllm, early_stop): run a patch on a module right after its first import, in every process
started with the hook's folder on its path (vLLM's API server, engine core and workers alike).

A hook's folder is all that is on the path (a bisect environment's .pth names only it), so each
hook runs this file by its location, not by a package import:

    after_import = runpy.run_path(str(Path(__file__).resolve().parents[1] / "import_hook.py"))[
        "after_import"]
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, patch: Callable[[ModuleType], None]) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        original_exec = spec.loader.exec_module

        def exec_module(module):
            original_exec(module)
            self.patch(module)

        spec.loader.exec_module = exec_module
        return spec


def after_import(name: str, patch: Callable[[ModuleType], None]) -> None:
    """Call `patch(module)` once module `name` has been executed, before anyone uses it."""
    sys.meta_path.insert(0, _AfterImport(name, patch))

