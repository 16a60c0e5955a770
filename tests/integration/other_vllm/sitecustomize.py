"""Makes this interpreter's vLLM call itself another version: a stand-in for "side B is another
vLLM install" in an upgrade A/B (docs/ab.md), without a second install on the machine.

Put this directory on PYTHONPATH (tests/integration/test_server_version_real.py does it in a
wrapper it names as side B's `python`): every vLLM process started from that environment reports
LLMPERF_FAKE_VLLM_VERSION (default 0.31.0+test) as `vllm.__version__`, which is what vLLM's
`GET /version` answers (vllm/entrypoints/serve/instrumentator/basic.py reads
vllm.version.__version__, itself from vllm/_version.py). Nothing else about vLLM changes, and
nothing is imported until vLLM itself is.
"""

import os
import runpy
from pathlib import Path

VERSION = os.environ.get("LLMPERF_FAKE_VLLM_VERSION", "0.31.0+test")
TARGET = "vllm._version"  # generated at build time; vllm/version.py imports it first
# tests/integration/import_hook.py, run by its location: only this folder is on the path.
HOOK = Path(__file__).resolve().parents[1] / "import_hook.py"


def _renamed(module):
    """Rewrites vllm._version's version strings right after the module is first executed."""
    module.__version__ = module.version = VERSION


runpy.run_path(str(HOOK))["after_import"](TARGET, _renamed)
