"""A workload's identity (workloads/identity.py): the files it reads are named alike in every
checkout (relative to the rootdir inside it, by content digest outside), and references recorded
with a checkout's absolute path still match (verdict/baselines.workload_changes)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from pytest_llmperf.verdict.baselines import workload_changes
from pytest_llmperf.workloads.identity import file_identity, workload_identity
from pytest_llmperf.workloads.text_only import as_text
from pytest_llmperf.workloads.workload import Workload

SUITE_DATA = Path(__file__).parents[3] / "suites" / "data"


def clone(at: Path) -> Path:
    """A checkout of the project's suite data at `at`, as CI's clone would be."""
    shutil.copytree(SUITE_DATA, at / "suites" / "data")
    return at


def file_workloads(root: Path) -> list[Workload]:
    data = root / "suites" / "data"
    return [
        Workload.dataset(data / "prompts.jsonl", num_requests=4, concurrency=2),
        Workload.trace(data / "mooncake-tiny.jsonl", format="mooncake"),
        Workload.conversation_file(data / "sharegpt-tiny.json", format="sharegpt", api="chat"),
        Workload.profile("chat", num_requests=2, concurrency=1,
                         dataset_path=str(data / "prompts.jsonl")),
        as_text(Workload.trace(data / "mooncake-tiny.jsonl", format="mooncake")),
    ]


def test_two_clones_in_different_directories_give_the_same_identity(tmp_path):
    first, second = clone(tmp_path / "a" / "repo"), clone(tmp_path / "ci" / "work" / "checkout")
    ours = [workload_identity(w, first) for w in file_workloads(first)]
    theirs = [workload_identity(w, second) for w in file_workloads(second)]
    assert ours == theirs
    assert [w.to_dict() for w in file_workloads(first)] != \
        [w.to_dict() for w in file_workloads(second)], "to_dict keeps the absolute paths"
    dataset, trace, conversations, profile, text = ours
    assert dataset["source"]["path"] == "suites/data/prompts.jsonl"
    assert trace["source"]["path"] == "suites/data/mooncake-tiny.jsonl"
    assert conversations["source"]["path"] == "suites/data/sharegpt-tiny.json"
    assert profile["source"]["dataset_path"] == "suites/data/prompts.jsonl"
    assert text["source"] == {"type": "TextOf", "source": trace["source"]}


def test_a_relative_path_is_read_from_the_working_directory(tmp_path, monkeypatch):
    root = clone(tmp_path / "repo")
    monkeypatch.chdir(root / "suites")
    workload = Workload.dataset("data/prompts.jsonl", num_requests=2, concurrency=1)
    assert workload_identity(workload, root)["source"]["path"] == "suites/data/prompts.jsonl"


def test_a_file_outside_the_project_is_named_by_its_content(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    text = (SUITE_DATA / "prompts.jsonl").read_bytes()
    here, there = tmp_path / "downloads" / "p.jsonl", tmp_path / "cache" / "other-name.jsonl"
    for path in (here, there):
        path.parent.mkdir()
        path.write_bytes(text)
    digest = "sha256:" + hashlib.sha256(text).hexdigest()[:16]
    assert file_identity(str(here), root) == file_identity(str(there), root) == digest

    there.write_bytes(text + b'{"prompt": "one more", "output_tokens": 4}\n')
    assert file_identity(str(there), root).startswith("sha256:")
    assert file_identity(str(there), root) != digest, "an edited file is another workload"


def test_a_path_that_names_no_file_is_kept(tmp_path):
    assert file_identity("/nowhere/sharegpt.json", tmp_path) == "/nowhere/sharegpt.json"


def test_a_reference_recorded_with_another_checkouts_absolute_path_matches(tmp_path):
    root = clone(tmp_path / "repo")
    identity = workload_identity(file_workloads(root)[0], root)
    recorded = {**identity, "source": {**identity["source"],
                                       "path": "/work/main/suites/data/prompts.jsonl"}}
    assert workload_changes(recorded, identity) == []


def test_an_old_absolute_path_matches_in_whatever_field_a_source_names_its_file():
    # A trace's file, and a field no source of the package has: no list of file fields.
    recorded = {"name": "w", "source": {"type": "Mine", "corpus": "/ci/repo/data/c.txt",
                                        "inner": {"type": "TraceSource",
                                                  "path": "/ci/repo/t.jsonl"}}}
    current = {"name": "w", "source": {"type": "Mine", "corpus": "data/c.txt",
                                       "inner": {"type": "TraceSource", "path": "t.jsonl"}}}
    assert workload_changes(recorded, current) == []
    assert workload_changes({**recorded, "source": {"type": "Mine", "corpus": "/ci/c.txt"}},
                            {**current, "source": {"type": "Mine", "corpus": "data/c.txt"}}) == [
        'source {"corpus": "/ci/c.txt", "type": "Mine"} -> '
        '{"corpus": "data/c.txt", "type": "Mine"}']


@pytest.mark.parametrize("old_path", ["/work/main/suites/other/prompts.jsonl",
                                      "/work/main/data/prompts.jsonl"])
def test_another_file_at_an_old_absolute_path_is_another_workload(tmp_path, old_path):
    root = clone(tmp_path / "repo")
    identity = workload_identity(file_workloads(root)[0], root)
    recorded = {**identity, "source": {**identity["source"], "path": old_path}}
    assert workload_changes(recorded, identity) == [
        f'source {{"path": "{old_path}", "type": "DatasetSource"}} -> '
        '{"path": "suites/data/prompts.jsonl", "type": "DatasetSource"}']
