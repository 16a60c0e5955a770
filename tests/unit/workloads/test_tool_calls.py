"""Tool calls (workloads/tool_calls.py, metrics/tool_calls.py, the client's reading of
`delta.tool_calls` in client/sse.py): what a request sends, how its calls are read and checked,
each bad input's one line, and the numbers. A real HTTP round trip (tests/unit/canned_server.py's
server) shows a refused call as a failed request."""

from __future__ import annotations

import json

import pytest

from pytest_llmperf import Workload
from pytest_llmperf.client.sse import StreamDecoder
from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics import structured
from pytest_llmperf.metrics import tool_calls as numbers
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.workloads.prompts import load_tokenizer
from pytest_llmperf.workloads.tool_calls import ToolCallCheck, bounded_tools
from tests.conftest import REPO
from tests.unit.canned_server import client, send
from tests.unit.vllm_chunks import CHAT_ROLE, DONE, USAGE

TINY = REPO / "suites" / "models" / "tiny-llama"
PARAMS = {"type": "object", "properties": {"city": {"enum": ["oslo", "lima"]}},
          "required": ["city"], "additionalProperties": False}
WEATHER = {"type": "function", "function": {"name": "weather", "parameters": PARAMS}}
CLOCK = {"type": "function", "function": {"name": "clock"}}  # no parameters: an empty object


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(TINY)


def built(tokenizer, tools=(WEATHER, CLOCK), n=2, **options):
    workload = Workload.tool_calls(list(tools), num_requests=n, input_tokens=6, max_tokens=40,
                                   concurrency=1, **options)
    return workload.build(tokenizer)[0]


def piece(index=0, name=None, arguments=None, ids="[5]", finish="null"):
    """A chat chunk as vLLM 0.32 streams a "required" call's piece (the first with its id and
    name: vllm/tool_parsers/streaming.py)."""
    call = {"index": index, "function": {"arguments": arguments}}
    if name is not None:
        call.update(id=f"chatcmpl-tool-{index}", type="function")
        call["function"]["name"] = name
    # A token that adds nothing to a call (the array's brackets) streams an empty delta.
    delta = json.dumps({"tool_calls": [call]} if arguments is not None else {})
    return (f'data: {{"choices":[{{"index":0,"delta":{delta},"logprobs":null,'
            f'"finish_reason":{finish},"token_ids":{ids}}}]}}')


# ------------------------------------------------------------------ what a request sends

def test_a_request_sends_every_tool_required_and_one_call_by_default(tokenizer):
    requests = built(tokenizer)
    body = client("chat").body(requests[0])
    assert body["tools"] == [WEATHER, CLOCK]
    assert (body["tool_choice"], body["parallel_tool_calls"]) == ("required", False)
    assert body["messages"][0]["role"] == "user" and isinstance(requests[0].prompt, str)
    assert "min_tokens" not in body and "ignore_eos" not in body
    assert body["max_tokens"] == 40
    assert all(r.check.name == "tool calls" and not r.forced_length for r in requests)
    parallel = built(tokenizer, parallel_tool_calls=True)[0]
    assert client("chat").body(parallel)["parallel_tool_calls"] is True


def test_the_workload_is_a_chat_named_by_its_tools_and_records_them():
    workload = Workload.tool_calls([WEATHER], num_requests=2, concurrency=1)
    assert (workload.api, workload.name) == ("chat", "tool-calls-1")
    assert [json.loads(tool) for tool in workload.to_dict()["source"]["tools"]] == [WEATHER]


# ------------------------------------------------------------------ reading streamed calls

def test_pieces_of_calls_are_joined_and_the_last_ones_time_kept():
    record = RequestRecord(index=0, expected_prompt_tokens=1, expected_output_tokens=9,
                           scheduled_s=0.0, tool_calls=[])
    decoder = StreamDecoder(record)
    reads = [[CHAT_ROLE, piece(ids="[1,2,3]")], [piece(0, "weather", '{"city":')],
             [piece(0, None, '"oslo"}')], [piece(1, "clock", "{}"), piece(ids="[9]")],
             [piece(ids="[7]", finish='"tool_calls"'), USAGE, DONE]]
    for stamp, events in enumerate(reads, start=1):
        body = "".join(f"{event}\n\n" for event in events).encode()
        decoder.feed_reads(body, [len(body)], [float(stamp)])
    assert record.tool_calls == [["weather", '{"city":"oslo"}'], ["clock", "{}"]]
    assert record.tool_calls_done_s == 4.0
    assert record.chunk_times_s == [1.0, 2.0, 3.0, 4.0, 4.0, 5.0]
    assert sum(record.chunk_tokens) == 8 and decoder.finished
    assert record.finish_reason == "tool_calls"


def test_a_request_without_tools_keeps_no_calls():
    record = RequestRecord(index=0, expected_prompt_tokens=1, expected_output_tokens=1,
                           scheduled_s=0.0)
    StreamDecoder(record).feed(f"{piece(0, 'weather', '{}')}\n\n".encode(), 1.0)
    assert (record.tool_calls, record.tool_calls_done_s, record.chunk_tokens) == (None, None, [1])


# ------------------------------------------------------------------ checking calls

CHECK = ToolCallCheck(json.dumps({"weather": PARAMS, "clock": {"type": "object"}}), False)


@pytest.mark.parametrize("calls, problem", [
    ([["weather", '{"city":"oslo"}']], None),
    ([["clock", "{}"]], None),
    ([], "no tool call in the output, as tool_choice='required' asks"),
    ([["clock", "{}"], ["clock", "{}"]],
     "2 tool calls, where parallel_tool_calls=False asks for one"),
    ([["alarm", "{}"]], "call 0 names 'alarm', none of the tools (clock, weather)"),
    ([["weather", '{"city":']],
     "call 0 (weather): arguments '{\"city\":' are not JSON (Expecting value)"),
    ([["weather", '{"city":"rome"}']],
     "call 0 (weather): arguments '{\"city\":\"rome\"}' do not match the tool's parameters: "
     "'rome' is not one of ['oslo', 'lima']"),
])
def test_each_call_is_checked_against_its_tool(calls, problem):
    assert CHECK.problem(calls) == problem


def test_parallel_calls_are_each_checked_and_a_long_refused_one_cut():
    parallel = ToolCallCheck(CHECK.tools, True)
    assert parallel.problem([["clock", "{}"], ["weather", '{"city":"lima"}']]) is None
    long = '{"city":"' + "x" * 100 + '"}'
    assert parallel.problem([["clock", "{}"], ["weather", long]]) == (
        f"call 1 (weather): arguments '{long[:80]}...' do not match the tool's parameters: "
        f"'{'x' * 100}' is not one of ['oslo', 'lima']")


def test_bounded_tools_are_distinct_and_checked(tokenizer):
    tools = bounded_tools(2)
    request = built(tokenizer, tools, n=1)[0]
    assert [tool["function"]["name"] for tool in tools] == ["set_colour_0", "set_colour_1"]
    assert request.check.problem([["set_colour_1", '{"colour":"amber-1","blink":true}']]) is None
    assert request.check.problem([["set_colour_1", '{"colour":"amber-0","blink":true}']]) == (
        "call 0 (set_colour_1): arguments '{\"colour\":\"amber-0\",\"blink\":true}' do not "
        "match the tool's parameters: 'amber-0' is not one of ['red-1', 'green-1', 'blue-1', "
        "'amber-1']")


# ------------------------------------------------------------------ bad input: one line each

SCHEMA_FIX = "fix the schema (https://json-schema.org/understanding-json-schema)"


@pytest.mark.parametrize("tools, line", [
    ([WEATHER, {"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}],
     "Workload.tool_calls: tool 1 (f): parameters are not a JSON schema: 'objekt' is not valid "
     f"under any of the given schemas (at type); {SCHEMA_FIX}"),
    ([{"type": "function", "function": {"name": "f", "parameters": "{}"}}],
     f"Workload.tool_calls: tool 0 (f): parameters are not a JSON schema (a dict), got str; "
     f"{SCHEMA_FIX}"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}],
     "Workload.tool_calls: tool 0 (f): parameters must be the schema of an object ({'type': "
     "'object', 'properties': ...}): a call's arguments are one, got type 'string'"),
    ([{"name": "f"}], "Workload.tool_calls: tool 0 must be {'type': 'function', 'function': "
     "{'name': ..., 'parameters': SCHEMA}}, got {'name': 'f'}"),
    ([{"type": "function", "function": {"name": "get weather"}}],
     "Workload.tool_calls: tool 0's name must be 1 to 64 letters, digits, _ or -, got "
     "'get weather'"),
    ([WEATHER, WEATHER], "Workload.tool_calls: tool names must differ, and weather is given "
     "more than once; rename one"),
    (WEATHER, "Workload.tool_calls: tools must be a non-empty list of tools ({'type': "
     "'function', 'function': {'name': ..., 'parameters': SCHEMA}}), got dict"),
    ([], "Workload.tool_calls: tools must be a non-empty list of tools ({'type': "
     "'function', 'function': {'name': ..., 'parameters': SCHEMA}}), got list"),
])
def test_a_bad_tool_fails_where_the_workload_is_written(tools, line):
    with pytest.raises(InputError) as raised:
        Workload.tool_calls(tools, num_requests=2, concurrency=1)
    assert str(raised.value) == line


def test_tools_on_the_completions_api_fail_where_the_workload_is_written():
    with pytest.raises(InputError) as raised:
        Workload.tool_calls([WEATHER], num_requests=2, concurrency=1, api="completions")
    assert str(raised.value) == ("Workload.tool_calls: tools need /v1/chat/completions, got "
                                 "api='completions'; leave api at 'chat', its default here")


# ------------------------------------------------------------------ the numbers

def record(index, sent, done, calls, error_kind=None):
    return RequestRecord(index=index, expected_prompt_tokens=1, expected_output_tokens=9,
                         scheduled_s=sent, sent_s=sent, chunk_times_s=[sent + 0.1],
                         chunk_tokens=[1], done_s=done, tool_calls=calls,
                         tool_calls_done_s=done, output_check="tool calls",
                         error="bad" if error_kind else None, error_kind=error_kind)


def test_calls_invalid_ones_and_time_to_complete_calls():
    records = [record(0, 0.0, 0.2, [["a", "{}"]]), record(1, 1.0, 1.4, [["a", "{}"]]),
               record(2, 2.0, 2.6, [["a", "{}"], ["b", "{}"]]),
               record(3, 3.0, 3.1, [["a", "{"]], error_kind="invalid_output")]
    found = numbers.summary(records)
    assert found == {"requests": 4, "calls": 5, "invalid": 1,
                     "complete_call_s.p50": pytest.approx(0.4),
                     "complete_call_s.p90": pytest.approx(0.56)}
    assert numbers.note(found) == (
        "tool calls: 5 calls in 4 requests, 1 of 4 requests failed their check; time to "
        "complete calls p50 400.0 ms, p90 560.0 ms")
    assert structured.summary(records) is None  # tool calls are not structured outputs'


def test_a_run_without_tools_has_no_summary_and_no_ok_request_shows_dashes():
    plain = RequestRecord(index=0, expected_prompt_tokens=1, expected_output_tokens=1,
                          scheduled_s=0.0)
    assert numbers.summary([plain]) is None
    found = numbers.summary([record(0, 0.0, 0.2, [], error_kind="invalid_output")])
    assert (found["complete_call_s.p50"], found["complete_call_s.p90"]) == (None, None)
    assert numbers.note(found).endswith("time to complete calls p50 -, p90 -")


# ------------------------------------------------------------------ through the client

def test_a_call_its_check_refuses_is_a_failed_request(server, tokenizer):
    request = built(tokenizer, n=1)[0]
    server.sse(CHAT_ROLE, piece(0, "weather", '{"city":"rome"}'), USAGE, DONE)
    failed = send(server.url, request, api="chat")
    assert (failed.error_kind, failed.output_check) == ("invalid_output", "tool calls")
    assert failed.error == ("call 0 (weather): arguments '{\"city\":\"rome\"}' do not match the "
                            "tool's parameters: 'rome' is not one of ['oslo', 'lima']")
    assert server.requests[-1][1]["tool_choice"] == "required"
    server.sse(CHAT_ROLE, piece(0, "weather", '{"city":'), piece(0, None, '"lima"}'), USAGE,
               DONE)
    sent = send(server.url, request, api="chat")
    assert sent.ok and sent.tool_calls == [["weather", '{"city":"lima"}']]
