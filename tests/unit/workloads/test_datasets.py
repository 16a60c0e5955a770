"""Dataset loaders on small files written here, the malformed ones with their exact messages."""

from __future__ import annotations

import json

import pytest

from pytest_llmperf.records import Request
from pytest_llmperf.workloads.datasets import (
    CONVERSATION_FORMAT,
    JSONL_FORMAT,
    SHAREGPT_FORMAT,
    DatasetError,
    Sample,
    load_conversations,
    load_jsonl,
    load_samples,
    load_sharegpt,
    requests_from_samples,
)


class Words:
    """One token per whitespace-separated word: token counts can be read off the text."""

    vocab_size = 1000
    special_ids = frozenset({0})

    def encode(self, text: str) -> list[int]:
        return [1 + hash(w) % 999 for w in text.split()]

    def decode(self, ids) -> str:
        return " ".join(f"w{i}" for i in ids)


def write(tmp_path, name, content) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


def sharegpt(*pairs):
    return {"id": "x", "conversations": [{"from": f, "value": v} for f, v in pairs]}


# --- ShareGPT ----------------------------------------------------------------------------------


def test_sharegpt_prompt_is_first_human_turn_output_is_reply_length(tmp_path):
    path = write(
        tmp_path,
        "sg.json",
        [
            sharegpt(
                ("human", "what is a TPOT"),
                ("gpt", "time per output token, in seconds"),
                ("human", "x"),
            ),
            sharegpt(
                ("gpt", "hello there"), ("human", "second record prompt"), ("gpt", "one two three")
            ),
            sharegpt(("human", "only a question")),  # no reply: skipped
            sharegpt(("human", "q"), ("human", "q again")),  # no reply after the first human turn
            sharegpt(("human", "   "), ("gpt", "reply to nothing")),  # empty prompt
            sharegpt(("human", "silent"), ("gpt", "")),  # empty reply
        ],
    )
    assert load_sharegpt(path, Words()) == [
        Sample(prompt="what is a TPOT", output_tokens=6),
        Sample(prompt="second record prompt", output_tokens=3),
    ]
    assert load_sharegpt(path, Words(), limit=1) == [
        Sample(prompt="what is a TPOT", output_tokens=6)
    ]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            [sharegpt(("human", "a"), ("gpt", "b")), {"conversation": []}],
            'record 1: no "conversations" list',
        ),
        ([sharegpt(("human", "a"), ("gpt", "b")), "text"], 'record 1: no "conversations" list'),
        (
            [{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt"}]}],
            'record 0: turn 1 needs string "from" and "value"',
        ),
        ({"conversations": []}, "the top level is an object, not a list"),
        (
            [sharegpt(("human", "a"))],
            "no usable record (each needs a non-empty human turn followed by a reply)",
        ),
    ],
)
def test_sharegpt_malformed_names_file_record_and_format(tmp_path, content, problem):
    path = write(tmp_path, "sg.json", content)
    with pytest.raises(DatasetError) as info:
        load_sharegpt(path, Words())
    assert str(info.value) == f"{path}: {problem}; expected {SHAREGPT_FORMAT}"
    assert "\n" not in str(info.value)


def test_bad_json_gives_line_and_column(tmp_path):
    path = write(tmp_path, "sg.json", '[\n  {"conversations": [}\n]')
    with pytest.raises(DatasetError) as info:
        load_sharegpt(path, Words())
    assert str(info.value) == (
        f"{path}: line 2, column 22: invalid JSON (Expecting value); expected {SHAREGPT_FORMAT}"
    )


def test_missing_file_says_nothing_is_downloaded(tmp_path):
    path = tmp_path / "absent.json"
    with pytest.raises(DatasetError) as info:
        load_sharegpt(path, Words())
    assert (
        str(info.value)
        == f"{path}: no such file; pass the path of a local file in {SHAREGPT_FORMAT}"
    )


# --- inference-benchmarker conversations -------------------------------------------------------


def ib(*turns):
    return {"id": "c", "conversations": [{"role": r, "content": c} for r, c in turns]}


def test_conversations_keep_turns_in_order_and_drop_empty_ones(tmp_path):
    path = write(
        tmp_path,
        "ib.json",
        [
            ib(("system", "be brief"), ("user", "hi"), ("assistant", "hello"), ("user", "bye")),
            ib(),
            ib(("user", "alone")),
        ],
    )
    assert load_conversations(path) == [
        (("system", "be brief"), ("user", "hi"), ("assistant", "hello"), ("user", "bye")),
        (("user", "alone"),),
    ]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            [ib(("user", "a")), ib(("user", "b")), {"id": "no turns"}],
            'record 2: no "conversations" list',
        ),
        (
            [{"conversations": [{"role": "user", "content": 7}]}],
            'record 0: turn 0 needs string "role" and "content"',
        ),
        (
            [{"conversations": [{"from": "human", "value": "sharegpt?"}]}],
            'record 0: turn 0 needs string "role" and "content"',
        ),
        ([ib(), ib()], "no conversation has a turn"),
        ("42", "the top level is a number, not a list"),
    ],
)
def test_conversations_malformed(tmp_path, content, problem):
    path = write(tmp_path, "ib.json", content)
    with pytest.raises(DatasetError) as info:
        load_conversations(path)
    assert str(info.value) == f"{path}: {problem}; expected {CONVERSATION_FORMAT}"


# --- JSONL -------------------------------------------------------------------------------------


def test_jsonl_records_with_optional_prompt_tokens(tmp_path):
    path = write(
        tmp_path,
        "d.jsonl",
        '{"prompt": "a b c", "output_tokens": 8}\n\n'
        '{"prompt": "d", "output_tokens": 1, "prompt_tokens": 40}\n',
    )
    assert load_jsonl(path) == [
        Sample(prompt="a b c", output_tokens=8),
        Sample(prompt="d", output_tokens=1, prompt_tokens=40),
    ]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            '{"prompt": "a", "output_tokens": 3}\n\n{"prompt": "b", "output_tokens": 3,}\n',
            "line 3, column 36: invalid JSON (Expecting property name enclosed in double quotes)",
        ),
        (
            '{"prompt": "a", "output_tokens": 3}\n{"text": "b", "output_tokens": 3}\n',
            'line 2: no string "prompt"',
        ),
        ("[1, 2]\n", 'line 1: no string "prompt"'),
        ('{"prompt": "a"}\n', 'line 1: "output_tokens" must be an integer >= 1, got None'),
        (
            '{"prompt": "a", "output_tokens": 0}\n',
            'line 1: "output_tokens" must be an integer >= 1, got 0',
        ),
        (
            '{"prompt": "a", "output_tokens": 2.0}\n',
            'line 1: "output_tokens" must be an integer >= 1, got 2.0',
        ),
        (
            '{"prompt": "a", "output_tokens": 2, "prompt_tokens": true}\n',
            'line 1: "prompt_tokens" must be an integer >= 0, got True',
        ),
        ("\n\n", "no records"),
    ],
)
def test_jsonl_malformed(tmp_path, content, problem):
    path = write(tmp_path, "d.jsonl", content)
    with pytest.raises(DatasetError) as info:
        load_jsonl(path)
    assert str(info.value) == f"{path}: {problem}; expected {JSONL_FORMAT}"


# --- any format, and requests ------------------------------------------------------------------


def test_load_samples_tells_the_formats_apart(tmp_path):
    jsonl = write(tmp_path, "d.jsonl", '{"prompt": "p q", "output_tokens": 5}\n')
    sg = write(tmp_path, "sg.json", [sharegpt(("human", "p"), ("gpt", "r r"))])
    conv = write(
        tmp_path,
        "ib.json",
        [ib(("system", "s"), ("user", "first"), ("user", "second")), ib(("assistant", "x"))],
    )
    assert load_samples(jsonl, Words()) == [Sample(prompt="p q", output_tokens=5)]
    assert load_samples(sg, Words()) == [Sample(prompt="p", output_tokens=2)]
    assert load_samples(conv, Words()) == [Sample(prompt="first", output_tokens=None)]


def test_requests_from_samples_counts_prompt_tokens_unless_given():
    samples = [Sample("one two three", 4), Sample("x", None, prompt_tokens=9)]
    assert requests_from_samples(samples, Words(), default_output=7) == [
        Request(prompt="one two three", prompt_tokens=3, output_tokens=4),
        Request(prompt="x", prompt_tokens=9, output_tokens=7),
    ]
    with pytest.raises(
        ValueError, match=r"^sample 1 has no output length >= 1; pass default_output$"
    ):
        requests_from_samples(samples, Words())
    with pytest.raises(
        ValueError, match=r"^sample 0 has no prompt_tokens; pass a tokenizer to count them$"
    ):
        requests_from_samples(samples, default_output=1)
