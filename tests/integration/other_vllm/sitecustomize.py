"""Makes this interpreter's vLLM call itself another version: a stand-in for "side B is another
vLLM install" in an upgrade A/B (docs/ab.md), without a second install on the machine.

Put this directory on PYTHONPATH (tests/integration/test_server_version_real.py does it in a
wrapper it names as side B's `python`): every vLLM process started from that environment reports
LLMPERF_FAKE_VLLM_VERSION (default 0.31.0+test) as `vllm.__version__`, which is what vLLM's
`GET /version` answers (vllm/entrypoints/serve/instrumentator/basic.py reads
vllm.version.__version__, itself from vllm/_version.py). Nothing else about vLLM changes, and
nothing is imported until vLLM itself is.
"""

import importlib.abc
import importlib.util
import os
import sys

VERSION = os.environ.get("LLMPERF_FAKE_VLLM_VERSION", "0.31.0+test")
TARGET = "vllm._version"  # generated at build time; vllm/version.py imports it first


class _Renamed(importlib.abc.MetaPathFinder):
    """Rewrites vllm._version's version strings right after the module is first executed."""

    def find_spec(self, name, path=None, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        original_exec = spec.loader.exec_module

        def exec_module(module):
            original_exec(module)
            module.__version__ = module.version = VERSION

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Renamed())
