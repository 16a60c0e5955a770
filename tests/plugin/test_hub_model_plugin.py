"""A test whose engine names a Hugging Face Hub id that is not in the cache fails with one line,
before any engine starts (no vLLM needed); the real engine serving a cached one is
tests/integration/test_hub_model.py."""

from __future__ import annotations

import pytest

from tests.hub_cache import tiny_llama_hub

SUITE = """
import pytest
from pytest_llmperf import Engine, Workload

@pytest.mark.engine(Engine(model="acme/no-such-model", load_format="dummy"))
def test_x(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=4, num_requests=2, concurrency=1))
"""


def test_a_hub_id_missing_from_the_cache_fails_its_test_with_one_line(pytester: pytest.Pytester,
                                                                     monkeypatch):
    cache = tiny_llama_hub(pytester.path / "hf-home", monkeypatch)  # another model is cached
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", "--llmperf-log-dir",
                                str(pytester.path / "logs"))
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "Traceback" not in out and "raise " not in out, out
    assert not (pytester.path / "logs").exists(), "no engine was started"
    lines = result.stdout.lines
    at = next(i for i, line in enumerate(lines) if line.startswith("___") and "test_x" in line)
    assert lines[at + 1] == (
        f"acme/no-such-model: not in the Hugging Face cache {cache} (HF_HUB_OFFLINE is set); "
        "fetch its config and tokenizer with: hf download acme/no-such-model --include '*.json'")
