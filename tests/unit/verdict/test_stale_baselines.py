"""Stale committed baselines (verdict/stale_baselines.py): a table whose test is gone, or whose
test now measures another workload or engine, is one line naming the file, the table, what
differs and the fix."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pytest_llmperf.verdict.stale_baselines import (
    Table,
    identity_problems,
    missing_test_problems,
    read_tables,
    shown_from,
    update_command,
)

ENGINE = {"model": "suites/models/tiny-llama", "max_num_seqs": 8}
WORKLOAD = {"name": "fixed-16in-8out", "num_requests": 12, "seed": 0, "warmup_requests": 0,
            "api": "completions", "pattern": {"type": "Concurrency", "max_concurrency": 4},
            "source": {"type": "DatasetSource", "path": "suites/data/prompts.jsonl"}}
FILE = "baselines/cpu/test_cpu.toml"
SUITE = "suites/test_cpu.py"
FIX = "pytest -m cpu suites/test_cpu.py --llmperf-update-baselines"


def table(key: str = "test_x", hardware_class: str = "cpu", **provenance) -> Table:
    recorded = {"engine": ENGINE, "workload": WORKLOAD, **provenance}
    return Table(f"baselines/{hardware_class}/test_cpu.toml", hardware_class, "test_cpu", key,
                 recorded)


def test_the_same_workload_and_engine_are_not_stale():
    renamed = {**WORKLOAD, "name": "a new label"}  # a name is a label, not the workload
    assert identity_problems([table()], SUITE, "test_x", ENGINE, renamed) == []


def test_a_changed_workload_field():
    now = {**WORKLOAD, "warmup_requests": 4}
    assert identity_problems([table()], SUITE, "test_x", ENGINE, now) == [
        f'{FILE}: ["test_x"]: stale: suites/test_cpu.py::test_x now measures another workload '
        f"(warmup_requests 0 -> 4); re-record it: {FIX}"]


def test_a_changed_engine_field():
    now = {**ENGINE, "max_num_seqs": 16}
    assert identity_problems([table()], SUITE, "test_x", now, WORKLOAD) == [
        f'{FILE}: ["test_x"]: stale: suites/test_cpu.py::test_x now measures another engine '
        f"(max_num_seqs 8 -> 16); re-record it: {FIX}"]


def test_both_changed_on_every_hardware_class_its_tables_are_for():
    engine, workload = {**ENGINE, "max_num_seqs": 16}, {**WORKLOAD, "num_requests": 6}
    tables = [table(), table(hardware_class="a100-40gb"), table("test_y")]
    both = ("now measures another workload (num_requests 12 -> 6) and another engine "
            "(max_num_seqs 8 -> 16)")
    assert identity_problems(tables, SUITE, "test_x", engine, workload) == [
        f'{FILE}: ["test_x"]: stale: suites/test_cpu.py::test_x {both}; re-record it: {FIX}',
        f'baselines/a100-40gb/test_cpu.toml: ["test_x"]: stale: suites/test_cpu.py::test_x '
        f"{both}; re-record it: pytest -m a100 suites/test_cpu.py --llmperf-update-baselines"]


def test_an_old_absolute_dataset_path_is_the_same_file():
    old = {**WORKLOAD, "source": {"type": "DatasetSource",
                                  "path": "/home/ci/repo/suites/data/prompts.jsonl"}}
    assert identity_problems([table(workload=old)], SUITE, "test_x", ENGINE, WORKLOAD) == []


def test_a_table_whose_test_no_longer_exists():
    tables = [table(), table("test_gone"), table("test_x#2"), table("test_x@rate4")]
    lines = missing_test_problems(tables, {"test_cpu": {"test_x"}}, {"test_cpu": SUITE},
                                  set(), lambda stem: True)
    assert lines == [
        f'{FILE}: ["test_gone"]: stale: no test suites/test_cpu.py::test_gone (renamed or '
        f"removed); delete the table (a renamed test records its own: {FIX})"]


def test_a_file_whose_suite_is_gone_is_one_line():
    tables = [table(), table("test_y")]
    assert missing_test_problems(tables, {}, {}, set(), lambda stem: False) == [
        f"{FILE}: stale: no suite test_cpu.py beside the collected suites; delete the file"]


def test_a_suite_not_collected_or_not_importable_is_not_judged():
    tables = [table("test_gone")]
    assert missing_test_problems(tables, {}, {}, set(), lambda stem: True) == []
    assert missing_test_problems(tables, {}, {}, {"test_cpu"}, lambda stem: False) == []


def test_update_command_names_the_marker_of_the_class():
    assert update_command("h200", "suites/test_gpu_llama8b.py") == \
        "pytest -m h200 suites/test_gpu_llama8b.py --llmperf-update-baselines"
    assert update_command("a100-80gb", "suites/x.py").startswith("pytest -m a100 suites/x.py")


def test_read_tables_reads_every_class_folder(tmp_path):
    (tmp_path / "baselines" / "cpu").mkdir(parents=True)
    (tmp_path / "baselines" / "h200").mkdir()
    (tmp_path / "baselines" / "cpu" / "test_a.toml").write_text(
        '[test_x.provenance.engine]\nmodel = "m"\n\n["test_y[1]".metrics]\n')
    (tmp_path / "baselines" / "h200" / "test_b.toml").write_text("[test_z\n")
    tables, problems = read_tables(tmp_path / "baselines", shown_from(tmp_path))
    assert tables == [Table("baselines/cpu/test_a.toml", "cpu", "test_a", "test_x",
                            {"engine": {"model": "m"}}),
                      Table("baselines/cpu/test_a.toml", "cpu", "test_a", "test_y[1]", {})]
    with pytest.raises(tomllib.TOMLDecodeError) as parsed:
        tomllib.loads("[test_z\n")
    assert problems == [
        f"baselines/h200/test_b.toml: cannot be read ({parsed.value}); fix the file, or delete it "
        "and re-record it with --llmperf-update-baselines"]


def test_shown_from_keeps_a_path_outside_the_rootdir_absolute(tmp_path):
    shown = shown_from(tmp_path / "repo")
    assert shown(tmp_path / "repo" / "baselines" / "cpu" / "a.toml") == "baselines/cpu/a.toml"
    assert shown(tmp_path / "elsewhere" / "a.toml") == (tmp_path / "elsewhere" / "a.toml").as_posix()
    assert Path(shown(tmp_path / "elsewhere" / "a.toml")).is_absolute()
