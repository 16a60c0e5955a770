"""Structured outputs: requests that ask the engine for a JSON schema, a regex, one of a list of
choices or a grammar, each output checked against what it asked for, and the TTFT of a grammar's
first request (compiled cold) told apart from the later ones (compiled once, cached).

The request carries vLLM's `structured_outputs` field ({"json": SCHEMA}, {"regex": R},
{"choice": [...]}, {"grammar": EBNF}), which /v1/completions and /v1/chat/completions both take
(vllm/entrypoints/openai/completion/protocol.py; `StructuredOutputsParams` in
vllm/sampling_params.py; https://docs.vllm.ai/en/latest/features/structured_outputs.html). The
output's length is not forced: the grammar ends it, `max_tokens` only caps it.

Each prompt's last token is a plain one (ASCII letters): a random prompt may end inside a UTF-8
character (a byte-level tokenizer's byte tokens), and vLLM's incremental detokenizer, still
waiting for that character's other bytes, then streams text of the prompt's tail with the first
output piece (seen on the tiny model: the 3 tokens "ataulddi", which the regex `[a-z]{3,8}`
allowed, arrived as 150 characters of prompt text), so the output would fail its check for a
reason that is not the engine's grammar. Text prompts (`prompt_format="text"`) can end so too
(in a U+FFFD that decoding random ids made) and get no such fix.

Whitespace: vLLM 0.32's xgrammar backend lets a JSON object's output put any whitespace between
its tokens unless the server runs with `--structured-outputs-config '{"backend": "xgrammar",
"disable_any_whitespace": true}'` (vLLM 0.32.0 refuses the flag under its default backend
"auto"); the request's own `disable_any_whitespace` is not read
(vllm/v1/structured_output/backend_xgrammar.py reads the server's config). A model with random
weights then writes whitespace until `max_tokens` and the JSON is cut short. A top-level string
(an enum, a pattern) has no whitespace in its grammar: `distinct_schemas` makes those.

vLLM compiles each grammar once and caches it by its text (xgrammar's GrammarCompiler cache).
So that a schema's first request in a measurement really compiles it, each JSON schema gets a
`$comment` naming a value drawn fresh for each build (a keyword JSON Schema ignores, so the
grammar and the outputs are the same), and each grammar a first line `# pytest-llmperf <value>`
(a comment to xgrammar's EBNF parser and to llguidance's, both seen taking it); regexes and
choice lists have no such slot, and are compiled cold only the first time their engine sees them.

Grammars are EBNF as xgrammar reads it (GBNF's `root ::= ...`;
https://xgrammar.mlc.ai/docs/tutorials/ebnf_guided_generation.html), the form vLLM's default
backend takes. Each is compiled with xgrammar where the workload is written (one that does not
compile is one line there) and outputs are checked with xgrammar's matcher, compiled before the
measurement starts (`OutputCheck.prepare`: importing xgrammar imports torch, seconds of CPU the
measured requests must not share).
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request
from pytest_llmperf.workloads import prompts
from pytest_llmperf.workloads.source import Source
from pytest_llmperf.workloads.vocab import VocabOnly

__all__ = ["Kind", "OutputCheck", "StructuredSource", "distinct_schemas"]

Kind = Literal["json", "regex", "choice", "grammar"]
KINDS = ("json", "regex", "choice", "grammar")
GRAMMAR_DOCS = "https://xgrammar.mlc.ai/docs/tutorials/ebnf_guided_generation.html"
SHOWN_CHARS = 80  # of an output that failed its check, in the failure's line


@dataclass(frozen=True)
class OutputCheck:
    """What one request's output must be: `spec` is the schema (as JSON text), the regex, or
    the choices (as a JSON list); `name` is the spec's place in the workload ("schema 2").
    Plain data, so it crosses to the client worker processes."""

    kind: Kind
    spec: str
    name: str

    def prepare(self) -> None:
        """Compile what checking an output needs, before any measured request (a grammar)."""
        if self.kind == "grammar":
            _compiled_grammar(self.spec)

    def problem(self, text: str) -> str | None:
        """What is wrong with the complete output `text`; None when it is what was asked."""
        shown = text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."
        if self.kind == "regex":
            ok = re.fullmatch(self.spec, text) is not None
            return None if ok else f"output {shown!r} does not match {self.name}'s regex"
        if self.kind == "choice":
            ok = text in json.loads(self.spec)
            return None if ok else f"output {shown!r} is none of {self.name}'s choices"
        if self.kind == "grammar":
            ok = _grammar_accepts(self.spec, text)
            return None if ok else f"output {shown!r} is not in {self.name}'s grammar"
        try:
            value = json.loads(text)
        except ValueError as exc:
            return f"output {shown!r} is not JSON ({exc.msg}), as {self.name} asks"
        from jsonschema import Draft202012Validator, validators

        schema = json.loads(self.spec)
        error = next(iter(validators.validator_for(schema, Draft202012Validator)(schema)
                          .iter_errors(value)), None)
        return None if error is None else (f"output {shown!r} does not match {self.name}: "
                                           f"{error.message}")


@dataclass(frozen=True, kw_only=True)
class StructuredSource(Source):
    """Prompts of `input_tokens` random tokens; request i asks for `specs[i % len(specs)]`."""

    kind: Kind
    specs: tuple[str, ...]  # JSON text of each schema or choice list; each regex as written
    input_tokens: int
    max_tokens: int
    prompt_format: Literal["token_ids", "text"] = "token_ids"

    @classmethod
    def of(cls, kind: str, specs: Any, *, input_tokens: int, max_tokens: int,
           prompt_format: Literal["token_ids", "text"]) -> StructuredSource:
        """The source of `specs`, each checked: one that cannot compile is one line here."""
        if kind not in KINDS:
            raise InputError(f"Workload.structured: kind {kind!r} is not one of "
                             f"{', '.join(KINDS)}")
        if isinstance(specs, (str, dict)) or not isinstance(specs, Sequence) or not specs:
            raise InputError("Workload.structured: specs must be a non-empty list (one schema, "
                             f"regex or choice list per item), got {type(specs).__name__}")
        if min(input_tokens, max_tokens) < 1:
            raise InputError("Workload.structured: input_tokens and max_tokens must be >= 1")
        checked = tuple(_checked(kind, spec, i) for i, spec in enumerate(specs))
        return cls(kind=kind, specs=checked, input_tokens=input_tokens, max_tokens=max_tokens,
                   prompt_format=prompt_format)

    def requests(self, n: int, tokenizer: Any, rng: np.random.Generator) -> list[Request]:
        lengths = [self.input_tokens] * n
        texts = (prompts.text_prompts(lengths, tokenizer, rng) if self.prompt_format == "text"
                 else _plain_endings(prompts.token_id_prompts(lengths, tokenizer, rng),
                                     tokenizer))
        nonce = os.urandom(6).hex()  # fresh per build: a schema's first request compiles it
        fields = [self._field(spec, nonce) for spec in self.specs]
        checks = [OutputCheck(self.kind, spec, f"{self.kind} spec {i}")
                  for i, spec in enumerate(self.specs)]
        return [replace(request, body=(("structured_outputs", fields[i % len(fields)]),),
                        check=checks[i % len(checks)], forced_length=False, keep_output=True)
                for i, request in enumerate(prompts.make_requests(texts, [self.max_tokens] * n))]

    def _field(self, spec: str, nonce: str) -> dict[str, Any]:
        if self.kind == "regex":
            return {"regex": spec}
        if self.kind == "choice":
            return {"choice": json.loads(spec)}
        if self.kind == "grammar":
            return {"grammar": f"# pytest-llmperf {nonce}\n{spec}"}
        return {"json": {"$comment": f"pytest-llmperf {nonce}", **json.loads(spec)}}


def _plain_endings(ids: list[tuple[int, ...]], tokenizer: Any) -> list[tuple[int, ...]]:
    """Each prompt with its last id replaced by the first id whose text is ASCII letters alone
    (the module says why); as they are for a bare vocabulary, which has no text."""
    if isinstance(tokenizer, (int, np.integer, VocabOnly)):
        return ids
    plain = next((i for i in range(tokenizer.vocab_size) if i not in tokenizer.special_ids
                  and (text := tokenizer.decode([i])).isascii() and text.isalpha()), None)
    if plain is None:
        return ids
    return [(*prompt[:-1], plain) for prompt in ids]


def _checked(kind: str, spec: Any, index: int) -> str:
    """`spec` as the source keeps it, or InputError naming it and what to fix."""
    where = f"Workload.structured: {kind} spec {index}"
    if kind == "grammar":
        return _checked_grammar(spec, where)
    if kind == "regex":
        try:
            re.compile(spec)
        except (re.error, TypeError) as exc:
            raise InputError(f"{where} does not compile ({exc}); fix the regex") from None
        return spec
    if kind == "choice":
        if not (isinstance(spec, (list, tuple)) and spec
                and all(isinstance(c, str) and c for c in spec)):
            raise InputError(f"{where} must be a non-empty list of non-empty strings, got "
                             f"{spec!r}")
        return json.dumps(list(spec))
    from jsonschema import Draft202012Validator, SchemaError, validators

    if not isinstance(spec, dict):
        raise InputError(f"{where} must be a JSON schema (a dict), got {type(spec).__name__}")
    try:
        validators.validator_for(spec, Draft202012Validator).check_schema(spec)
    except SchemaError as exc:
        path = "/".join(str(p) for p in exc.path) or "(top)"
        raise InputError(f"{where} does not compile: {exc.message} (at {path}); fix the "
                         "schema (https://json-schema.org/understanding-json-schema)") from None
    return json.dumps(spec, sort_keys=True)


def _checked_grammar(spec: Any, where: str) -> str:
    if not (isinstance(spec, str) and spec.strip()):
        raise InputError(f"{where} must be a grammar in EBNF (text, e.g. 'root ::= \"yes\" | "
                         f"\"no\"'), got {spec!r}")
    try:
        _compiled_grammar(spec)
    except ImportError:
        raise InputError(f"{where}: grammars are compiled and their outputs checked with "
                         "xgrammar, which is not installed here; pip install xgrammar (vLLM "
                         "installs it)") from None
    except RuntimeError as exc:  # xgrammar's parser: "[time] file:line: EBNF parser error ..."
        said = str(exc).strip().splitlines()[0]
        said = said.split("] ", 1)[-1].split(": ", 1)[-1]
        raise InputError(f"{where} does not compile ({said}); fix the grammar "
                         f"({GRAMMAR_DOCS})") from None
    return spec


@functools.lru_cache(maxsize=64)
def _compiled_grammar(spec: str) -> Any:
    """`spec` compiled by xgrammar for matching text (no tokenizer: a matcher of strings), as
    xgrammar's own tests build one (xgrammar/testing.py, _get_matcher_from_grammar)."""
    import xgrammar

    compiler = xgrammar.GrammarCompiler(xgrammar.TokenizerInfo([]), cache_enabled=False)
    return compiler.compile_grammar(spec)


def _grammar_accepts(spec: str, text: str) -> bool:
    import xgrammar

    matcher = xgrammar.GrammarMatcher(_compiled_grammar(spec), terminate_without_stop_token=True)
    return matcher.accept_string(text) and matcher.is_terminated()


def distinct_schemas(n: int, values: int = 4) -> list[dict[str, Any]]:
    """`n` different JSON schemas, each a string of one of `values` words of its own: short,
    bounded outputs whose grammar has no whitespace, which a model with random weights can
    only fill in (see the module's note on whitespace)."""
    words = ["red", "green", "blue", "amber", "violet", "cyan", "olive", "grey"]
    return [{"type": "string", "enum": [f"{word}-{i}" for word in words[:values]]}
            for i in range(n)]
