"""Tool calls: chat requests that send `tools` with `tool_choice="required"`, every call the
engine streams back parsed and checked against its tool, and the time until the calls were
complete.

vLLM 0.32.0 turns "required" into a JSON schema, an array of `{"name": ..., "parameters": ...}`
objects, one per tool (`get_json_schema_from_tools` in vllm/tool_parsers/utils.py), and
constrains the output to it through structured outputs, so even random weights write
well-formed calls. The server needs `--enable-auto-tool-choice` and a `--tool-call-parser` whose
parser takes "required" this way (`supports_required_and_named`, e.g. "pythonic"): without a
parser it answers HTTP 400 "tool_choice="required" requires --tool-call-parser to be set"
(vllm/renderers/online_renderer.py), and vllm/parser/parser_manager.py gives no parser without
`--enable-auto-tool-choice`. It streams each call in `delta.tool_calls`: the first piece with
the call's name, the later ones more of its arguments (vllm/tool_parsers/streaming.py).

For random weights: `parallel_tool_calls=False` (the default here) makes vLLM cap the array at
one call, else a model that never stops adds calls until `max_tokens` cuts the JSON; a string
parameter without an enum never ends either; and the server must run with
`--structured-outputs-config '{"disable_any_whitespace": true}'`, for the reason
workloads/structured.py gives. `bounded_tools` makes tools such a model can fill.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request
from pytest_llmperf.workloads import prompts
from pytest_llmperf.workloads.source import PromptFormat, Source

__all__ = ["ToolCallCheck", "ToolCallSource", "bounded_tools"]

SHOWN_CHARS = 80  # of a call's arguments that failed their check, in the failure's line
# OpenAI's rule for a function's name (https://platform.openai.com/docs/api-reference/chat/create)
NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
WHERE = "Workload.tool_calls"


@dataclass(frozen=True)
class ToolCallCheck:
    """What one request's calls must be: each names one of `tools` (JSON text of {name:
    parameters schema}) with arguments its schema accepts; one call at most unless `parallel`.
    Plain data, so it crosses to the client worker processes."""

    tools: str
    parallel: bool
    name: str = "tool calls"

    def problem(self, calls: Sequence[Sequence[str]]) -> str | None:
        """What is wrong with the streamed calls ([name, arguments] each); None when all is
        as asked."""
        if not calls:
            return "no tool call in the output, as tool_choice='required' asks"
        if len(calls) > 1 and not self.parallel:
            return f"{len(calls)} tool calls, where parallel_tool_calls=False asks for one"
        tools = json.loads(self.tools)
        return next(filter(None, (_call_problem(i, name, arguments, tools)
                                  for i, (name, arguments) in enumerate(calls))), None)


def _call_problem(index: int, name: str, arguments: str, tools: dict[str, Any]) -> str | None:
    if name not in tools:
        return f"call {index} names {name!r}, none of the tools ({', '.join(sorted(tools))})"
    shown = arguments if len(arguments) <= SHOWN_CHARS else arguments[:SHOWN_CHARS] + "..."
    try:
        value = json.loads(arguments)
    except ValueError as exc:
        return f"call {index} ({name}): arguments {shown!r} are not JSON ({exc.msg})"
    from jsonschema import Draft202012Validator, validators

    schema = tools[name]
    error = next(iter(validators.validator_for(schema, Draft202012Validator)(schema)
                      .iter_errors(value)), None)
    return None if error is None else (f"call {index} ({name}): arguments {shown!r} do not "
                                       f"match the tool's parameters: {error.message}")


@dataclass(frozen=True, kw_only=True)
class ToolCallSource(Source):
    """Chat prompts of `input_tokens` random tokens, each sent with every tool in `tools` (each
    tool's JSON text, as the request sends it) and `tool_choice="required"`."""

    prompt_format: ClassVar[PromptFormat] = "text"  # a chat's messages are text

    tools: tuple[str, ...]
    input_tokens: int
    max_tokens: int
    parallel_tool_calls: bool = False

    @classmethod
    def of(cls, tools: Any, *, input_tokens: int, max_tokens: int,
           parallel_tool_calls: bool) -> ToolCallSource:
        """The source of `tools`, each checked: one the server could not take is one line."""
        if isinstance(tools, (str, dict)) or not isinstance(tools, Sequence) or not tools:
            raise InputError(f"{WHERE}: tools must be a non-empty list of tools ({{'type': "
                             "'function', 'function': {'name': ..., 'parameters': SCHEMA}}), got "
                             f"{type(tools).__name__}")
        if min(input_tokens, max_tokens) < 1:
            raise InputError(f"{WHERE}: input_tokens and max_tokens must be >= 1")
        checked = [_checked(tool, i) for i, tool in enumerate(tools)]
        names = [json.loads(tool)["function"]["name"] for tool in checked]
        if len(set(names)) < len(names):
            twice = sorted({name for name in names if names.count(name) > 1})
            raise InputError(f"{WHERE}: tool names must differ, and {', '.join(twice)} is given "
                             "more than once; rename one")
        return cls(tools=tuple(checked), input_tokens=input_tokens, max_tokens=max_tokens,
                   parallel_tool_calls=parallel_tool_calls)

    def requests(self, n: int, tokenizer: Any, rng: np.random.Generator) -> list[Request]:
        texts = prompts.text_prompts([self.input_tokens] * n, tokenizer, rng)
        tools = [json.loads(tool) for tool in self.tools]
        body = (("tools", tools), ("tool_choice", "required"),
                ("parallel_tool_calls", self.parallel_tool_calls))
        schemas = {tool["function"]["name"]: _parameters(tool) for tool in tools}
        check = ToolCallCheck(json.dumps(schemas, sort_keys=True), self.parallel_tool_calls)
        return [replace(request, body=body, check=check, forced_length=False)
                for request in prompts.make_requests(texts, [self.max_tokens] * n)]


def _parameters(tool: dict[str, Any]) -> dict[str, Any]:
    """The tool's parameters schema; vLLM constrains a tool without one to an object
    (`_params_or_empty_object` in vllm/tool_parsers/utils.py)."""
    return tool["function"].get("parameters") or {"type": "object", "properties": {}}


def _checked(tool: Any, index: int) -> str:
    """`tool` as the source keeps it (JSON text), or InputError naming it and what to fix."""
    function = tool.get("function") if isinstance(tool, dict) else None
    if not (isinstance(function, dict) and tool.get("type") == "function"):
        raise InputError(f"{WHERE}: tool {index} must be {{'type': 'function', 'function': "
                         f"{{'name': ..., 'parameters': SCHEMA}}}}, got {tool!r}")
    name = function.get("name")
    if not (isinstance(name, str) and NAME.fullmatch(name)):
        raise InputError(f"{WHERE}: tool {index}'s name must be 1 to 64 letters, digits, _ or "
                         f"-, got {name!r}")
    where = f"{WHERE}: tool {index} ({name})"
    schema = function.get("parameters")
    if schema is not None:
        _check_schema(schema, where)
    return json.dumps(tool, sort_keys=True)


def _check_schema(schema: Any, where: str) -> None:
    from jsonschema import Draft202012Validator, SchemaError, validators

    fix = "fix the schema (https://json-schema.org/understanding-json-schema)"
    if not isinstance(schema, dict):
        raise InputError(f"{where}: parameters are not a JSON schema (a dict), got "
                         f"{type(schema).__name__}; {fix}")
    try:
        validators.validator_for(schema, Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        path = "/".join(str(p) for p in exc.path) or "(top)"
        raise InputError(f"{where}: parameters are not a JSON schema: {exc.message} (at "
                         f"{path}); {fix}") from None
    if schema.get("type") != "object":
        raise InputError(f"{where}: parameters must be the schema of an object ({{'type': "
                         f"'object', 'properties': ...}}): a call's arguments are one, got "
                         f"type {schema.get('type')!r}")


def bounded_tools(n: int, values: int = 4) -> list[dict[str, Any]]:
    """`n` tools whose every argument is one of `values` words of its own or a boolean, all
    required, nothing else allowed: calls a model with random weights can only fill in and end
    (see the module's note)."""
    words = ["red", "green", "blue", "amber", "violet", "cyan", "olive", "grey"]
    return [{"type": "function", "function": {
        "name": f"set_colour_{i}", "description": f"Set lamp {i}'s colour.",
        "parameters": {"type": "object", "additionalProperties": False,
                       "required": ["colour", "blink"],
                       "properties": {"colour": {"type": "string",
                                                 "enum": [f"{w}-{i}" for w in words[:values]]},
                                      "blink": {"type": "boolean"}}}}}
            for i in range(n)]
