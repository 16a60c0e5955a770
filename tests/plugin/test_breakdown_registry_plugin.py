"""A new per-run breakdown is one class: registered on subclassing Breakdown (here from a
conftest, as a plugin of the plugin would), it is computed from each measured run, says its -v
line under the summary, is written to the run file under its name and reads back, and reads as
the Result's attribute, though no module of the package names it. Against the mock server
behind --llmperf-endpoint (pytest_llmperf/clientbench/mockserver.py), through the session's real
runner."""

from __future__ import annotations

import json

import httpcore  # noqa: F401  (imported before any in-process run: test_deployment_plugin.py)

from pytest_llmperf.verdict.stored_run import StoredRun
from tests.conftest import REPO
from tests.plugin.mock_endpoint import CALM, against, mock_fixture

ARCH = REPO / "suites" / "models" / "tiny-llama-arch"

# The toy breakdown: how many requests got as many tokens as they asked for.
CONFTEST = '''
from pytest_llmperf.metrics.breakdown import Breakdown

class FullLength(Breakdown):
    name = "full_length"

    @classmethod
    def of(cls, result):
        done = [r for r in result.records if r.ok]
        full = sum(r.output_tokens == r.expected_output_tokens for r in done)
        return cls({"requests": len(done), "full": full}) if done else None

    def notes(self):
        return [f"full length: {self['full']} of {self['requests']} requests"]
'''

SUITE = """
import pytest
from pytest_llmperf import Engine, Workload

pytestmark = pytest.mark.engine(Engine(model={model!r}))

def test_fixed(llmperf):
    result = llmperf.run(Workload.fixed(input_tokens=8, output_tokens=4, num_requests=6,
                                        concurrency=2))
    assert result.full_length == {{"requests": 6, "full": 6}}
    assert result.tool_calls is None  # a built-in kind that does not apply to this run
"""

mock = mock_fixture(0.002)


def test_a_breakdown_registered_by_a_conftest_is_computed_noted_and_stored(pytester, mock):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE.format(model=str(ARCH)))
    # In a process of its own: the class registers itself for good.
    result = pytester.runpytest_subprocess(*against(mock.url), *CALM, "-v", "--llmperf-json",
                                           "run.json", "--llmperf-history", "off")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*full length: 6 of 6 requests*"])
    document = json.loads((pytester.path / "run.json").read_text())
    [entry] = document["llmperf"]["results"]
    assert entry["full_length"] == {"requests": 6, "full": 6}
    # Read back by a process that has not registered it: kept as it was, written back.
    [stored] = StoredRun.from_plain(document).results
    assert stored.to_plain()["full_length"] == {"requests": 6, "full": 6}
