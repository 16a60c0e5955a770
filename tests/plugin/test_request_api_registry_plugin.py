"""A new request API is one module: a records.RequestApi (its name, path, whether it pools or
chats) and the client's body writer and answer reader for it (client/request_apis.serves), here
made in a conftest as a plugin of the plugin would. A workload names it by `api`, the session's
real runner sends it to its path through the client, and the run file records it; no module of
the package names it. Against the mock server behind --llmperf-endpoint
(pytest_llmperf/clientbench/mockserver.py), which streams /v1/completions."""

from __future__ import annotations

import json

import httpcore  # noqa: F401  (imported before any in-process run: test_deployment_plugin.py)

from tests.conftest import REPO
from tests.plugin.mock_endpoint import CALM, against, mock_fixture

ARCH = REPO / "suites" / "models" / "tiny-llama-arch"

# The toy API: /v1/completions, its prompt always sent as text and a `user` field of its own.
CONFTEST = '''
from pytest_llmperf.client.openai import OpenAIStreamClient, stream_ended, stream_reader
from pytest_llmperf.client.request_apis import serves
from pytest_llmperf.records import RequestApi

TEXT_COMPLETIONS = RequestApi("text-completions", "/v1/completions")


def body(client, request):
    body = client.generation_body(request)
    body["prompt"] = " ".join(map(str, body["prompt"])) if isinstance(body["prompt"], list) \\
        else body["prompt"]
    return {**body, "user": "llmperf-toy"}


serves(TEXT_COMPLETIONS, body, stream_reader, stream_ended)
'''

SUITE = """
import pytest
from pytest_llmperf import Engine, Workload

pytestmark = pytest.mark.engine(Engine(model={model!r}))

def test_toy_api(llmperf):
    result = llmperf.run(Workload.fixed(input_tokens=8, output_tokens=4, num_requests=6,
                                        concurrency=2, api="text-completions"))
    assert result.completed == 6 and result.output_tokens == 24
"""

mock = mock_fixture(0.002)


def test_a_request_api_registered_by_a_conftest_is_sent_and_recorded(pytester, mock):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE.format(model=str(ARCH)))
    result = pytester.runpytest_subprocess(*against(mock.url), *CALM, "--llmperf-json",
                                           "run.json", "--llmperf-history", "off")
    result.assert_outcomes(passed=1)
    [entry] = json.loads((pytester.path / "run.json").read_text())["llmperf"]["results"]
    assert entry["workload"]["api"] == "text-completions"


def test_an_api_nobody_registered_is_one_line(pytester, mock):
    pytester.makepyfile(test_suite=SUITE.format(model=str(ARCH)))
    result = pytester.runpytest_subprocess(*against(mock.url), *CALM, "--llmperf-history", "off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*Workload 'fixed-8in-4out': api='text-completions' is no request API; one of: "
        "completions, chat, embeddings, rerank (or one a module registers: records.RequestApi)"])
