"""The one tiny CPU engine that the integration tests of a running server share, and the tiny
Llama as a GGUF file for llama.cpp's server.

Every start of vLLM costs 35-50 s on a 2-core CI machine, most of it three Python processes
importing torch and vLLM. Tests that only need *a* healthy TINY_CPU server (measuring against it,
reading its /metrics, pointing endpoint mode at it) take this one instead of starting their own.
Tests that start, break or count engines start their own, and leftover checks skip this one's
process group (tests/conftest.py).

Two kinds of real-engine test (markers in pyproject.toml). Most judge measurements and need the
machine to themselves (`alone`: given here to every test not marked otherwise). Those marked
`shares_machine` prove that something starts, fails, stops or is reported, not how fast: CI runs
them beside the unit tests on both cores (`-m "not alone" -n 2`), where a vLLM start, three
processes importing one after the other, fills one core. There each module stays on one worker
(its module fixtures start engines), its runs' disturbance and client checks only warn, and
leftover checks look only at this worker's engines (tests/conftest.py, LANE_ENV).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from scripts.tiny_gguf import make_tiny_gguf
from tests.conftest import LANE_ENV, REPO, shared_engine
from tests.integration.ab_suites import SUITE

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE not in item.path.parents:
            continue
        if item.get_closest_marker("shares_machine") is None:
            item.add_marker(pytest.mark.alone)
        else:  # a module's tests on one worker: they share its module-scoped engines
            item.add_marker(pytest.mark.xdist_group(item.path.stem))


@pytest.fixture(scope="module", autouse=True)
def lane(request):
    """A module beside others (`pytestmark = pytest.mark.shares_machine`): its runs only warn of
    disturbance and a limited client, and the processes it starts carry this worker's name
    (LANE_ENV) for the leftover checks. Its pytest runs must not look like pytest-xdist workers
    themselves (the plugin would bind their engines to the worker's core: plugin/hooks.py).
    Module-scoped, so that its module fixtures' engines start under it too."""
    if request.node.get_closest_marker("shares_machine") is None:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        if worker:
            patch.setenv(LANE_ENV, worker)
            patch.delenv("PYTEST_XDIST_WORKER")
        patch.setenv("LLMPERF_DISTURBANCE", "warn")
        patch.setenv("LLMPERF_CLIENT_CHECK", "warn")
        yield


@pytest.fixture(scope="session")
def tiny_server(tmp_path_factory):
    """TINY_CPU as the plugin starts it on CPU hardware (control processes off the compute core).
    Idle between tests: an idle vLLM CPU engine uses no CPU, so it does not disturb the
    measurements of tests that run beside it."""
    with shared_engine(tmp_path_factory.mktemp("shared-engine")) as server:
        yield server


@pytest.fixture(scope="session")
def tiny_gguf(request) -> Path:
    """The tiny Llama as GGUF (scripts/tiny_gguf.py), made once and kept (13 MB, with the sdist
    whose converter made it) in pytest's cache, or the temp dir under -p no:cacheprovider."""
    cache = getattr(request.config, "cache", None)
    where = (Path(cache.mkdir("llmperf-llamacpp")) if cache is not None
             else Path(tempfile.gettempdir()) / "llmperf-tiny-gguf")
    return make_tiny_gguf(where / "tiny-llama-f32.gguf", where / "sdist")


@pytest.fixture
def ab_suite(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    """The real-engine A/B tests' suite (ab_suites.SUITE) written, the repository importable."""
    pytester.makepyfile(test_ab_suite=SUITE)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    return pytester
