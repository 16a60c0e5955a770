"""What every source answers (workloads/source.py): its requests, its identity with the files it
reads named by the caller, its text form, and its type tag."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from pytest_llmperf.records import Request
from pytest_llmperf.workloads.lengths import Fixed
from pytest_llmperf.workloads.source import Source, TextOf, source_type
from pytest_llmperf.workloads.workload import (
    DatasetSource,
    ProfileSource,
    SharedPrefix,
    Synthetic,
    Workload,
)


@dataclass(frozen=True, kw_only=True)
class Lines(Source):
    """A source defined outside the package: one text prompt per line of `path`."""

    prompt_format: ClassVar[str] = "text"
    file_fields: ClassVar[tuple[str, ...]] = ("path",)
    path: str
    words: int = 3

    def requests(self, n, tokenizer, rng):
        return [Request(prompt=f"line {i}", prompt_tokens=2, output_tokens=self.words)
                for i in range(n)]


SHARED = SharedPrefix(num_prefixes=2, prefix_tokens=8, suffix_tokens=Fixed(tokens=4),
                      output_tokens=Fixed(tokens=2))


def test_each_source_is_found_by_the_type_a_run_file_records():
    assert [source_type(name) for name in ("DatasetSource", "TextOf", "Lines", "Nope")] == [
        DatasetSource, TextOf, Lines, None]


def test_a_source_names_the_files_it_reads_and_only_those():
    assert DatasetSource(path="data/q.jsonl").files() == {"path": "data/q.jsonl"}
    assert ProfileSource(profile="chat").files() == {}
    assert ProfileSource(profile="chat", dataset_path="d.json").files() == {
        "dataset_path": "d.json"}
    assert SHARED.files() == {}


def test_its_identity_names_each_file_as_the_caller_says_even_inside_a_wrapper():
    named = TextOf(source=ProfileSource(profile="chat", dataset_path="d.json")).to_dict(
        name_file=lambda path: f"<{path}>")
    assert named == {"type": "TextOf", "source": {"type": "ProfileSource", "profile": "chat",
                                                  "scale": 1.0, "dataset_path": "<d.json>"}}
    assert Lines(path="p.txt").to_dict(str.upper) == {"type": "Lines", "path": "P.TXT",
                                                      "words": 3}


def test_as_text_asks_a_source_that_can_make_text_else_decodes_its_token_ids():
    synthetic = Synthetic(input_tokens=Fixed(tokens=4), output_tokens=Fixed(tokens=2))
    dataset = DatasetSource(path="q.jsonl")
    assert synthetic.as_text() == Synthetic(input_tokens=Fixed(tokens=4),
                                            output_tokens=Fixed(tokens=2), prompt_format="text")
    assert dataset.as_text() is dataset
    assert SHARED.as_text() == TextOf(source=SHARED)
    assert TextOf(source=SHARED).as_text() == TextOf(source=SHARED)


def test_only_a_trace_can_be_replayed_faster():
    assert SHARED.at_speedup(2.0) is None


def test_a_new_source_is_measured_through_workload_of():
    workload = Workload.of(Lines(path="p.txt"), name="lines", num_requests=2, rate=4.0,
                           api="chat")
    measured, warmup = workload.build(tokenizer=None)
    assert ([r.prompt for r in measured], warmup) == (["line 0", "line 1"], [])
    assert workload.to_dict()["source"] == {"type": "Lines", "path": "p.txt", "words": 3}


def test_a_chat_workload_needs_a_source_of_text_prompts():
    with pytest.raises(ValueError, match=r"^Workload 'shared': api='chat' needs text prompts"):
        Workload.of(SHARED, name="shared", num_requests=2, concurrency=1, api="chat")


def test_the_base_class_requires_requests():
    @dataclass(frozen=True)
    class Empty(Source):
        pass

    with pytest.raises(TypeError, match=r"abstract method '?requests"):
        Empty()
