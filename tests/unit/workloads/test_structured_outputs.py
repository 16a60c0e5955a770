"""Structured outputs (workloads/structured.py, metrics/structured.py): what a request asks for,
how its output is checked, each bad spec's one line, and cold against warm TTFT. A real HTTP
round trip (tests/unit/canned_server.py's server) shows a refused output as a failed
request."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_llmperf import Workload
from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics import structured as numbers
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.workloads.structured import OutputCheck, distinct_schemas
from tests.conftest import REPO
from tests.unit.canned_server import client, send
from tests.unit.vllm_chunks import DONE, USAGE

TINY = REPO / "suites" / "models" / "tiny-llama"

GRAMMAR = 'root ::= ("yes" | "no") "-" [0-9] [0-9]?'
SCHEMA = {"type": "object", "properties": {"a": {"enum": ["x", "y"]}}, "required": ["a"],
          "additionalProperties": False}


def built(kind, specs, n=4, **options):
    workload = Workload.structured(kind, specs, num_requests=n, input_tokens=5, max_tokens=16,
                                   concurrency=2, **options)
    return workload.build(1000)[0]  # a vocabulary size stands in for a tokenizer


# ------------------------------------------------------------------ what a request asks for

def test_each_request_asks_for_its_spec_in_turn_and_keeps_its_output():
    requests = built("regex", [r"[a-z]{3}", r"[0-9]+"], n=4)
    assert [dict(r.body)["structured_outputs"] for r in requests] == [
        {"regex": "[a-z]{3}"}, {"regex": "[0-9]+"}, {"regex": "[a-z]{3}"}, {"regex": "[0-9]+"}]
    assert [r.check.name for r in requests] == ["regex spec 0", "regex spec 1"] * 2
    assert all(r.keep_output and not r.forced_length and len(r.prompt) == 5 for r in requests)


def test_a_json_body_has_no_forced_length_and_a_fresh_comment_per_build():
    workload = Workload.structured("json", [SCHEMA], num_requests=2, input_tokens=5, rate=1.0,
                                   max_tokens=16)
    first, again = workload.build(1000)[0][0], workload.build(1000)[0][0]
    body = client().body(first)
    asked = body["structured_outputs"]
    assert list(asked) == ["json"]
    assert {k: v for k, v in asked["json"].items() if k != "$comment"} == SCHEMA
    # A grammar is cached by its text: another build's schema must be compiled again.
    assert asked["json"]["$comment"] != dict(again.body)["structured_outputs"]["json"][
        "$comment"]
    assert body["max_tokens"] == 16
    assert "min_tokens" not in body and "ignore_eos" not in body
    assert body["return_token_ids"] is True


def test_a_grammar_is_asked_for_under_a_fresh_comment_per_build_and_checked_as_written():
    workload = Workload.structured("grammar", [GRAMMAR], num_requests=2, input_tokens=5,
                                   concurrency=1)
    first, again = workload.build(1000)[0][0], workload.build(1000)[0][0]
    asked = dict(first.body)["structured_outputs"]["grammar"]
    comment, grammar = asked.split("\n", 1)
    assert comment.startswith("# pytest-llmperf ") and grammar == GRAMMAR
    assert asked != dict(again.body)["structured_outputs"]["grammar"]  # compiled cold again
    assert first.check == OutputCheck("grammar", GRAMMAR, "grammar spec 0")
    import xgrammar  # the commented grammar is the same grammar to the backend's parser

    compiler = xgrammar.GrammarCompiler(xgrammar.TokenizerInfo([]), cache_enabled=False)
    matcher = xgrammar.GrammarMatcher(compiler.compile_grammar(asked),
                                      terminate_without_stop_token=True)
    assert matcher.accept_string("yes-7") and matcher.is_terminated()


def test_each_distinct_check_is_prepared_once_before_the_clock(monkeypatch):
    from pytest_llmperf.client.measurement import prepare_checks
    from pytest_llmperf.workloads import structured

    requests = built("grammar", [GRAMMAR, 'root ::= "a"'], n=6)
    compiled = []
    monkeypatch.setattr(structured, "_compiled_grammar", compiled.append)
    prepare_checks(requests + built("regex", ["[a-z]"], n=2))
    assert sorted(compiled) == sorted([GRAMMAR, 'root ::= "a"'])


def test_the_workload_records_its_specs_and_a_chat_workload_needs_text():
    workload = Workload.structured("choice", [["a", "b"]], num_requests=2, concurrency=1)
    assert workload.name == "structured-choice-1"
    assert list(workload.to_dict()["source"]["specs"]) == ['["a", "b"]']
    with pytest.raises(ValueError, match="api='chat' needs text prompts"):
        Workload.structured("choice", [["a"]], num_requests=2, concurrency=1, api="chat")


def test_every_prompt_ends_where_the_detokenizer_has_no_character_half_read():
    """vLLM's detokenizer streams the prompt's tail with the first output piece when the prompt
    ends inside a UTF-8 character (workloads/structured.py). With the tiny model's tokenizer and
    seed 0, prompts 6 and 9 of 16 did (their outputs failed their checks on the engine); after
    the fix, none does: tokenizers' DecodeStream, which vLLM's detokenizer uses, is caught up."""
    from tokenizers import Tokenizer
    from tokenizers.decoders import DecodeStream

    from pytest_llmperf.workloads.prompts import load_tokenizer, token_id_prompts

    tokenizer = load_tokenizer(TINY)
    raw = Tokenizer.from_file(str(TINY / "tokenizer.json"))

    def half_read(prompt):
        stream, last = DecodeStream(skip_special_tokens=True), None
        for token in prompt:
            last = stream.step(raw, token)
        return last is None or last.endswith("\ufffd")

    unfixed = token_id_prompts([32] * 16, tokenizer, np.random.default_rng(0))
    assert [i for i, prompt in enumerate(unfixed) if half_read(prompt)] == [6, 9]
    fixed = Workload.structured("json", [SCHEMA], num_requests=16, input_tokens=32,
                                concurrency=1).build(tokenizer)[0]
    assert [i for i, r in enumerate(fixed) if half_read(r.prompt)] == []
    assert all(r.prompt[:-1] == p[:-1] for r, p in zip(fixed, unfixed, strict=True))
    assert raw.decode([fixed[0].prompt[-1]]).isalpha()


# ------------------------------------------------------------------ checking an output

@pytest.mark.parametrize("kind, spec, text, problem", [
    ("json", json.dumps(SCHEMA), '{"a":"x"}', None),
    ("json", json.dumps(SCHEMA), '{"a":"z"}',
     "output '{\"a\":\"z\"}' does not match s: 'z' is not one of ['x', 'y']"),
    ("json", json.dumps(SCHEMA), '{"a":', "output '{\"a\":' is not JSON (Expecting value), as "
     "s asks"),
    ("regex", "[a-z]{3}", "abc", None),
    ("regex", "[a-z]{3}", "abcd", "output 'abcd' does not match s's regex"),
    ("choice", '["yes", "no"]', "no", None),
    ("choice", '["yes", "no"]', "maybe", "output 'maybe' is none of s's choices"),
    ("grammar", GRAMMAR, "no-42", None),
    ("grammar", GRAMMAR, "no-", "output 'no-' is not in s's grammar"),  # not ended
    ("grammar", GRAMMAR, "maybe-1", "output 'maybe-1' is not in s's grammar"),
])
def test_an_output_is_checked_against_its_spec(kind, spec, text, problem):
    assert OutputCheck(kind, spec, "s").problem(text) == problem


def test_a_long_refused_output_is_cut_in_its_line():
    assert OutputCheck("regex", "x", "s").problem("y" * 100) == (
        f"output '{'y' * 80}...' does not match s's regex")


def test_distinct_schemas_are_distinct_and_valid():
    schemas = distinct_schemas(3)
    assert len({json.dumps(s, sort_keys=True) for s in schemas}) == 3
    check = OutputCheck("json", json.dumps(schemas[1]), "s")
    assert check.problem('"amber-1"') is None
    assert check.problem('"amber-0"') == ("output '\"amber-0\"' does not match s: 'amber-0' "
                                          "is not one of ['red-1', 'green-1', 'blue-1', "
                                          "'amber-1']")


# ------------------------------------------------------------------ bad specs: one line each

@pytest.mark.parametrize("kind, specs, line", [
    ("json", [SCHEMA, {"type": "objekt"}],
     "Workload.structured: json spec 1 does not compile: 'objekt' is not valid under any of the "
     "given schemas (at type); fix the schema "
     "(https://json-schema.org/understanding-json-schema)"),
    ("json", ["{}"], "Workload.structured: json spec 0 must be a JSON schema (a dict), got str"),
    ("regex", ["[a-z"], "Workload.structured: regex spec 0 does not compile (unterminated "
     "character set at position 0); fix the regex"),
    ("choice", [[]], "Workload.structured: choice spec 0 must be a non-empty list of non-empty "
     "strings, got []"),
    ("grammar", ['root ::= ("yes" | "no"'],
     "Workload.structured: grammar spec 0 does not compile (EBNF parser error at line 1, column "
     "23: Expect )); fix the grammar "
     "(https://xgrammar.mlc.ai/docs/tutorials/ebnf_guided_generation.html)"),
    ("grammar", [""], "Workload.structured: grammar spec 0 must be a grammar in EBNF (text, e.g. "
     "'root ::= \"yes\" | \"no\"'), got ''"),
    ("ebnf", ["x"], "Workload.structured: kind 'ebnf' is not one of json, regex, choice, "
     "grammar"),
    ("json", SCHEMA, "Workload.structured: specs must be a non-empty list (one schema, regex or "
     "choice list per item), got dict"),
])
def test_a_bad_spec_fails_where_the_workload_is_written(kind, specs, line):
    with pytest.raises(InputError) as raised:
        Workload.structured(kind, specs, num_requests=4, concurrency=1)
    assert str(raised.value) == line


# ------------------------------------------------------------------ cold and warm

def record(index, sent, ttft, check="json spec 0", error_kind=None):
    return RequestRecord(index=index, expected_prompt_tokens=1, expected_output_tokens=1,
                         scheduled_s=sent, sent_s=sent, chunk_times_s=[sent + ttft],
                         chunk_tokens=[1], done_s=sent + 1, output_check=check,
                         error="bad" if error_kind else None, error_kind=error_kind)


def test_each_specs_first_sent_request_is_cold_the_rest_warm():
    records = [record(0, 0.2, 0.5), record(1, 0.1, 0.4, "json spec 1"),
               record(2, 0.0, 0.3, "json spec 0"),  # sent first: spec 0's cold one
               record(3, 1.0, 0.01), record(4, 1.1, 0.03, "json spec 1"),
               record(5, 1.2, 0.02, error_kind="invalid_output")]
    found = numbers.summary(records)
    assert found == {"kind": "json", "specs": 2, "requests": 6, "invalid": 1,
                     "cold": {"requests": 2, "ttft_s.p50": pytest.approx(0.35),
                              "ttft_s.mean": pytest.approx(0.35)},
                     "warm": {"requests": 3, "ttft_s.p50": pytest.approx(0.03),
                              "ttft_s.mean": pytest.approx(0.18)}}
    assert numbers.note(found) == (
        "structured outputs (json, 2 specs): TTFT p50 cold 350.0 ms (2 ok) first request of "
        "each spec, warm 30.0 ms (3 ok) later; 1 of 6 outputs failed their check")


def test_a_run_without_checked_outputs_has_no_summary():
    assert numbers.summary([record(0, 0.0, 0.1, check=None)]) is None


def test_a_group_without_an_ok_request_shows_a_dash():
    found = numbers.summary([record(0, 0.0, 0.1)])
    assert found["warm"] == {"requests": 0, "ttft_s.p50": None, "ttft_s.mean": None}
    assert "warm - (0 ok) later" in numbers.note(found)


# ------------------------------------------------------------------ through the client

def test_an_output_its_check_refuses_is_a_failed_request(server):
    server.sse('data: {"choices":[{"index":0,"text":"{\\"a\\":","token_ids":[5]}]}', USAGE,
               DONE)
    request = built("json", [SCHEMA], n=1)[0]
    failed = send(server.url, request)
    assert (failed.error_kind, failed.output_check) == ("invalid_output", "json spec 0")
    assert failed.error == "output '{\"a\":' is not JSON (Expecting value), as json spec 0 asks"
    server.sse('data: {"choices":[{"index":0,"text":"{\\"a\\":\\"y\\"}","token_ids":[5]}]}',
               USAGE, DONE)
    assert send(server.url, request).ok


def test_the_same_seed_builds_the_same_prompts():
    a, b = (built("choice", [["a"]], n=2) for _ in range(2))
    assert np.array_equal(a[0].prompt, b[0].prompt)
