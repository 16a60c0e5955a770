"""Conversations read from files (workloads/conversation_files.py) on small files written here,
in both formats; bad records with their exact one-line messages; and the workload they make."""

from __future__ import annotations

import json

import pytest

from pytest_llmperf import Workload
from pytest_llmperf.client.patterns import Concurrency, Rate
from pytest_llmperf.client.sessions import Sessions
from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request
from pytest_llmperf.workloads.conversation_files import read_conversations
from pytest_llmperf.workloads.datasets import CONVERSATION_FORMAT, SHAREGPT_FORMAT, DatasetError
from pytest_llmperf.workloads.prompts import load_tokenizer
from pytest_llmperf.workloads.text_only import as_text
from suites.tiny import TINY_CPU


class Words:
    """One token per whitespace-separated word, each word its own id (from 10 on): token
    counts can be read off the text, and the ids name the words."""

    vocab_size = 1000
    special_ids = frozenset({0})

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        return [self.ids.setdefault(w, 10 + len(self.ids)) for w in text.split()]

    def decode(self, ids) -> str:
        raise AssertionError("not needed")


def write(tmp_path, records, name="convs.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(records), encoding="utf-8")
    return str(path)


def sharegpt(rid, *messages):
    return {"id": rid, "conversations": [{"from": f, "value": v} for f, v in messages]}


def benchmarker(rid, *messages):
    return {"id": rid, "conversations": [{"role": r, "content": c} for r, c in messages]}


THREE_TURNS = (("human", "a b"), ("gpt", "one two three"), ("human", "c"), ("gpt", "x y"),
               ("human", "d e f"), ("gpt", "z"))


# --- reading ------------------------------------------------------------------------------------


def test_sharegpt_records_become_turns_of_user_message_and_recorded_answer(tmp_path):
    path = write(tmp_path, [sharegpt("a", *THREE_TURNS),
                            sharegpt("b", ("human", "q"), ("gpt", "r"), ("human", "s"),
                                     ("gpt", "t"))])
    found, skipped = read_conversations(path, "sharegpt")
    assert skipped == 0
    assert [c.where for c in found] == ["record 0 (id 'a')", "record 1 (id 'b')"]
    assert found[0].system is None
    assert found[0].turns == (("a b", "one two three"), ("c", "x y"), ("d e f", "z"))
    assert found[1].turns == (("q", "r"), ("s", "t"))


def test_every_answer_speaker_of_sharegpt_answers(tmp_path):
    path = write(tmp_path, [sharegpt("a", ("user", "q"), ("chatgpt", "r"), ("human", "s"),
                                     ("bing", "t"), ("human", "u"), ("bard", "v"))])
    assert read_conversations(path, "sharegpt")[0][0].turns == (("q", "r"), ("s", "t"),
                                                                ("u", "v"))


def test_inference_benchmarker_records_with_their_system_prompt(tmp_path):
    """The shape of inference-benchmarker's own test data (test_data/chat.json): a system
    message may come first."""
    path = write(tmp_path, [benchmarker("i6IyJda_0", ("system", "You are helpful."),
                                        ("user", "q1"), ("assistant", "r1 r1"),
                                        ("user", "q2"), ("assistant", "r2"))])
    found, _ = read_conversations(path, "inference-benchmarker")
    assert found[0].system == "You are helpful."
    assert found[0].turns == (("q1", "r1 r1"), ("q2", "r2"))


def test_shapes_of_real_files_are_taken_as_they_come(tmp_path):
    """A leading answer (a "_split" part's start) and a last unanswered message are dropped;
    records of fewer than 2 turns are skipped: the workload is about multi-turn."""
    path = write(tmp_path, [
        sharegpt("single", ("human", "q"), ("gpt", "r")),
        sharegpt("empty"),
        sharegpt("x_1", ("gpt", "the end of part 0"), *THREE_TURNS[:4], ("human", "unanswered")),
        sharegpt("after", *THREE_TURNS),
    ])
    found, skipped = read_conversations(path, "sharegpt")
    assert [c.where for c in found] == ["record 2 (id 'x_1')", "record 3 (id 'after')"]
    assert found[0].turns == (("a b", "one two three"), ("c", "x y"))
    assert skipped == 0


def test_sessions_takes_the_first_conversations_and_max_turns_cuts_them(tmp_path):
    records = [sharegpt(str(i), *THREE_TURNS) for i in range(4)]
    records[3] = {"no": "conversations"}  # after the last one used: never checked
    path = write(tmp_path, records)
    found, _ = read_conversations(path, "sharegpt", sessions=2, max_turns=2)
    assert [c.where for c in found] == ["record 0 (id '0')", "record 1 (id '1')"]
    assert [len(c.turns) for c in found] == [2, 2]


BAD = [
    ("sharegpt", ["text"],
     "record 0: is a string, not an object; expected " + SHAREGPT_FORMAT),
    ("sharegpt", [{"id": "a"}],
     "record 0 (id 'a'): \"conversations\" is missing or not a list; expected " + SHAREGPT_FORMAT),
    ("sharegpt", [{"id": "a", "conversations": [{"value": "hi"}]}],
     "record 0 (id 'a'): conversations[0]: \"from\" is missing; expected " + SHAREGPT_FORMAT),
    ("sharegpt", [{"id": "a", "conversations": [{"from": "human", "value": 3}]}],
     "record 0 (id 'a'): conversations[0]: \"value\" is a number, not a string; expected "
     + SHAREGPT_FORMAT),
    ("sharegpt", [sharegpt("a", ("human", "q"), ("gpt", " "))],
     "record 0 (id 'a'): conversations[1]: \"value\" is empty; fix the record, or pass "
     "skip_bad_records=True to leave such records out"),
    ("sharegpt", [sharegpt("a", ("human", "q"), ("robot", "r"))],
     "record 0 (id 'a'): conversations[1]: \"from\" is 'robot', not one of human, user, bard, "
     "bing, chatgpt, gpt, system; fix the record, or pass skip_bad_records=True to leave such "
     "records out"),
    ("sharegpt", [sharegpt("a", ("human", "q"), ("human", "q again"), ("gpt", "r"))],
     "record 0 (id 'a'): conversations[1]: \"from\" is 'human' right after another user message "
     "(a user message follows an answer); fix the record, or pass skip_bad_records=True to leave "
     "such records out"),
    ("sharegpt", [sharegpt("a", ("human", "q"), ("gpt", "r"), ("gpt", "r again"))],
     "record 0 (id 'a'): conversations[2]: \"from\" is 'gpt' right after another answer (an "
     "answer follows a user message); fix the record, or pass skip_bad_records=True to leave "
     "such records out"),
    ("inference-benchmarker", [benchmarker("b", ("user", "q"), ("assistant", "r"),
                                           ("system", "late"))],
     "record 0 (id 'b'): conversations[2]: \"role\" is 'system' after the first message (only a "
     "conversation's first message may be its system prompt); fix the record, or pass "
     "skip_bad_records=True to leave such records out"),
    ("inference-benchmarker", [sharegpt("c", ("human", "q"))],
     "record 0 (id 'c'): conversations[0]: \"role\" is missing; expected " + CONVERSATION_FORMAT),
]


@pytest.mark.parametrize(("fmt", "records", "line"), BAD)
def test_a_bad_record_is_one_line_naming_the_file_record_message_and_field(tmp_path, fmt,
                                                                           records, line):
    path = write(tmp_path, [sharegpt("fine", *THREE_TURNS) if fmt == "sharegpt"
                            else benchmarker("fine", ("user", "q"), ("assistant", "r"),
                                             ("user", "s"), ("assistant", "t")), *records])
    with pytest.raises(DatasetError) as raised:
        read_conversations(path, fmt)
    assert str(raised.value) == f"{path}: {line.replace('record 0', 'record 1')}"


def test_skip_bad_records_leaves_them_out_and_counts_them(tmp_path):
    path = write(tmp_path, [sharegpt("bad", ("human", "q"), ("human", "q")), "text",
                            sharegpt("good", *THREE_TURNS)])
    found, skipped = read_conversations(path, "sharegpt", skip_bad_records=True)
    assert [c.where for c in found] == ["record 2 (id 'good')"] and skipped == 2


def test_too_few_conversations_say_why(tmp_path):
    path = write(tmp_path, [sharegpt("a", *THREE_TURNS), sharegpt("b", ("human", "q"),
                                                                  ("gpt", "r")), "bad"])
    with pytest.raises(DatasetError) as raised:
        read_conversations(path, "sharegpt", sessions=3, skip_bad_records=True)
    assert str(raised.value) == (f"{path}: 1 conversations of 2 or more turns (1 bad records "
                                 "left out), and sessions=3 asks for more: lower sessions")
    single = write(tmp_path, [sharegpt("b", ("human", "q"), ("gpt", "r"))], "single.json")
    with pytest.raises(DatasetError) as raised:
        read_conversations(single, "sharegpt")
    assert str(raised.value) == (f"{single}: no conversation of 2 or more turns; expected "
                                 + SHAREGPT_FORMAT)


def test_bad_arguments_say_why(tmp_path):
    path = write(tmp_path, [sharegpt("a", *THREE_TURNS)])
    with pytest.raises(DatasetError, match=r"^conversation file format must be one of sharegpt, "
                                           r"inference-benchmarker, got 'vicuna'$"):
        read_conversations(path, "vicuna")
    with pytest.raises(InputError, match=r"^sessions must be an int >= 1, or None for every "
                                         r"conversation in the file, got 0$"):
        read_conversations(path, "sharegpt", sessions=0)
    with pytest.raises(InputError, match=r"^max_turns must be an int >= 2 \(one turn carries no "
                                         r"earlier answer\), or None for every turn, got 1$"):
        read_conversations(path, "sharegpt", max_turns=1)
    with pytest.raises(DatasetError, match=r"no such file"):
        read_conversations(tmp_path / "missing.json", "sharegpt")


# --- the workload ---------------------------------------------------------------------------


def test_conversation_file_workload_lays_out_each_sessions_turns(tmp_path):
    path = write(tmp_path, [sharegpt("a", *THREE_TURNS), sharegpt("b", *THREE_TURNS[:4])],
                 "chats.json")
    workload = Workload.conversation_file(path, format="sharegpt", think_time_s=0.5,
                                          warmup_requests=3)
    assert workload.name == "chats-2sessions" and workload.num_requests == 5
    assert workload.pattern == Sessions(turns=3, think_time_s=0.5, session_turns=(3, 2),
                                        start=Concurrency(max_concurrency=2))
    assert workload.label() == ("chats-2sessions x5 @ up to 3 turns, think 0.5 s, sessions at "
                                "concurrency 2")
    assert workload.to_dict()["source"] == {
        "type": "ConversationFileSource", "path": path, "format": "sharegpt", "sessions": 2,
        "turns": 5, "prompt_format": "token_ids"}
    assert workload.to_dict()["pattern"] == {
        "type": "Sessions", "turns": 3, "think_time_s": 0.5, "sessions": 2, "all_turns": 5,
        "start": {"type": "Concurrency", "max_concurrency": 2}}
    words = Words()
    requests, warmup = workload.build(words)
    ids = words.ids
    assert [r.prompt for r in requests] == [
        (ids["a"], ids["b"]), (ids["c"],), (ids["d"], ids["e"], ids["f"]),
        (ids["a"], ids["b"]), (ids["c"],)]
    assert [r.output_tokens for r in requests] == [3, 2, 1, 3, 2]  # the recorded answers'
    # Warm-ups: the first turns' lengths, prompts of their own (no prefix shared)
    assert [(len(r.prompt), r.output_tokens) for r in warmup] == [(2, 3)] * 3
    assert not {r.prompt for r in warmup} & {r.prompt for r in requests}


def test_a_system_prompt_goes_before_the_first_message(tmp_path):
    path = write(tmp_path, [benchmarker("s", ("system", "be brief"), ("user", "q1"),
                                        ("assistant", "r1"), ("user", "q2"),
                                        ("assistant", "r2 r2"))])
    ids_workload = Workload.conversation_file(path, format="inference-benchmarker")
    words = Words()
    requests, _ = ids_workload.build(words)
    assert requests[0].prompt == tuple(words.encode("be brief q1"))
    assert requests[0].prompt_tokens == 3 and requests[1].prompt == tuple(words.encode("q2"))
    chat = Workload.conversation_file(path, format="inference-benchmarker", api="chat")
    assert chat.source.prompt_format == "text"
    requests, _ = chat.build(Words())
    assert requests == [
        Request(prompt="q1", prompt_tokens=3, output_tokens=1, history=(("system", "be brief"),)),
        Request(prompt="q2", prompt_tokens=1, output_tokens=2)]


def test_conversation_file_workload_options(tmp_path):
    path = write(tmp_path, [sharegpt(str(i), *THREE_TURNS) for i in range(3)] + ["bad"])
    workload = Workload.conversation_file(path, format="sharegpt", sessions=2, max_turns=2,
                                          rate=4.0, name="sg", skip_bad_records=True)
    assert workload.num_requests == 4
    assert workload.pattern.start == Rate(requests_per_s=4.0)
    assert workload.to_dict()["source"]["max_turns"] == 2
    everything = Workload.conversation_file(path, format="sharegpt", skip_bad_records=True)
    assert everything.to_dict()["source"]["skipped_records"] == 1
    with pytest.raises(ValueError, match=r"api='chat' needs text prompts"):
        Workload.conversation_file(path, format="sharegpt", sessions=1, api="chat",
                                   prompt_format="token_ids")


def test_a_server_without_token_ids_gets_the_file_as_text(tmp_path):
    """text_only.as_text (llama.cpp's server) switches a conversation file to text messages."""
    path = write(tmp_path, [sharegpt("a", *THREE_TURNS)])
    text = as_text(Workload.conversation_file(path, format="sharegpt"))
    requests, _ = text.build(Words())
    assert [r.prompt for r in requests] == ["a b", "c", "d e f"]


# --- synthetic chat conversations --------------------------------------------------------------


def test_chat_conversations_draw_text_messages_of_exact_lengths():
    tokenizer = load_tokenizer(TINY_CPU.model)
    workload = Workload.conversations(sessions=2, turns=3, input_tokens=12, output_tokens=4,
                                      api="chat")
    assert workload.source.prompt_format == "text" and workload.api == "chat"
    requests, _ = workload.build(tokenizer)
    assert [len(tokenizer.encode(r.prompt)) for r in requests] == [12] * 6
    token_ids = Workload.conversations(sessions=2, turns=3, input_tokens=12, output_tokens=4)
    assert token_ids.source.prompt_format == "token_ids"
    assert as_text(token_ids).source.prompt_format == "text"
    with pytest.raises(ValueError, match=r"api='chat' needs text prompts"):
        Workload.conversations(sessions=1, turns=2, input_tokens=4, output_tokens=4, api="chat",
                               prompt_format="token_ids")
