"""The CPU suite, tool calls: chat requests with `tools` and tool_choice="required" on real vLLM,
every streamed call parsed and checked against its tool, the time to complete calls measured.

vLLM 0.32.0 serves "required" only with `--enable-auto-tool-choice` and a `--tool-call-parser`
(docs/workloads.md, "Tool calls"), and random weights fill a JSON object only when the server
allows no whitespace in it, so this file's engine is the suite's TINY_CPU with those three
flags (the grammar backend's one as the Engine's `structured_outputs_config`): an engine of its
own, which also serves JSON objects (the whitespace the backend refuses is what a random-weight
model would fill them with) (about 50 s to start here), hence `nightly`
(`pytest -m cpu suites/ --llmperf-nightly`; docs/testing.md).
"""

import pytest

from pytest_llmperf import Workload
from pytest_llmperf.workloads.tool_calls import bounded_tools
from suites.tiny import CPU_GATED, CPU_TOLERANCE, TINY_CPU

# "pythonic" takes "required" through the JSON schema vLLM builds from the tools
# (`supports_required_and_named`) and needs no special token in the tokenizer.
TINY_TOOLS = TINY_CPU.replace(
    extra_args={"enable-auto-tool-choice": True, "tool-call-parser": "pythonic"},
    structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True})

pytestmark = [pytest.mark.cpu, pytest.mark.nightly, pytest.mark.engine(TINY_TOOLS),
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE, gate=CPU_GATED)]


def test_required_tool_calls_are_parsed_and_timed(llmperf):
    """16 chat requests, each offered 3 tools, 2 at a time: each must call one of them with
    arguments its schema accepts (one call: parallel_tool_calls=False); the -v line and the run
    file hold the calls, the invalid ones and the time to complete calls."""
    result = llmperf.run(Workload.tool_calls(bounded_tools(3), num_requests=16,
                                             input_tokens=32, concurrency=2))
    assert result.completed == 16, result.failures_text()
    found = result.tool_calls
    assert (found["requests"], found["calls"], found["invalid"]) == (16, 16, 0)
    assert 0 < found["complete_call_s.p50"] <= found["complete_call_s.p90"]
    assert {r.finish_reason for r in result.records} == {"tool_calls"}


def test_json_objects_under_a_backend_without_whitespace(llmperf):
    """8 requests over 2 object schemas, one at a time, on the engine whose backend is xgrammar
    with no whitespace: each output parsed and checked, the schemas' first requests timed apart
    (on the suite's engine a random-weight model writes whitespace until max_tokens instead)."""
    schemas = [{"type": "object", "properties": {"size": {"enum": ["s", "m", "l"]},
                                                  "count": {"type": "integer", "minimum": 0,
                                                            "maximum": 9}},
                "required": ["size", "count"], "additionalProperties": False},
               {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
                "additionalProperties": False}]
    result = llmperf.run(Workload.structured("json", schemas, num_requests=8, input_tokens=32,
                                             max_tokens=32, concurrency=1))
    assert result.completed == 8, result.failures_text()
    assert result.structured_outputs["invalid"] == 0
    assert result.engine["structured_outputs_config"]["backend"] == "xgrammar"
