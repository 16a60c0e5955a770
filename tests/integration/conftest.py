"""The one tiny CPU engine that the integration tests of a running server share, and the tiny
Llama as a GGUF file for llama.cpp's server.

Every start of vLLM costs 35-50 s on a 2-core CI machine, most of it three Python processes
importing torch and vLLM. Tests that only need *a* healthy TINY_CPU server (measuring against it,
reading its /metrics, pointing endpoint mode at it) take this one instead of starting their own.
Tests that start, break or count engines start their own, and leftover checks skip this one's
process group (tests/conftest.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from pytest_llmperf.engines.server import CPU_ENGINE_NICE, VllmServer
from scripts.tiny_gguf import make_tiny_gguf
from suites.tiny import TINY_CPU
from tests.conftest import SHARED_ENGINE_GROUPS


@pytest.fixture(scope="session")
def tiny_server(tmp_path_factory):
    """TINY_CPU as the plugin starts it on CPU hardware (control processes off the compute core).
    Idle between tests: an idle vLLM CPU engine uses no CPU, so it does not disturb the
    measurements of tests that run beside it."""
    server = VllmServer(TINY_CPU, tmp_path_factory.mktemp("shared-engine"), nice=CPU_ENGINE_NICE,
                        separate_control=True).start()
    group = server.process.pid  # its own session: the group id is the API server's pid
    SHARED_ENGINE_GROUPS.add(group)
    try:
        yield server
    finally:
        server.stop()
        SHARED_ENGINE_GROUPS.discard(group)


@pytest.fixture(scope="session")
def tiny_gguf(request) -> Path:
    """The tiny Llama as GGUF (scripts/tiny_gguf.py), made once and kept (13 MB, with the sdist
    whose converter made it) in pytest's cache, or the temp dir under -p no:cacheprovider."""
    cache = getattr(request.config, "cache", None)
    where = (Path(cache.mkdir("llmperf-llamacpp")) if cache is not None
             else Path(tempfile.gettempdir()) / "llmperf-tiny-gguf")
    return make_tiny_gguf(where / "tiny-llama-f32.gguf", where / "sdist")
