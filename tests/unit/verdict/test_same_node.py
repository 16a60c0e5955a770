"""A before/after comparison on one node (verdict/same_node.py): another host or other cards are
refused with one line; what changed is named."""

from __future__ import annotations

from pytest_llmperf.verdict.same_node import refusal, stack_changes

BEFORE = {"host": "gpu-3", "driver_version": "570.86.15", "cuda_version": "12.8",
          "vllm": "0.24.0", "gpu_uuids": ["GPU-a", "GPU-b"]}
AFTER = {**BEFORE, "driver_version": "580.159.04", "cuda_version": "13.0"}


def test_the_same_node_after_a_driver_upgrade_names_what_changed():
    assert refusal(BEFORE, AFTER, "before-driver") is None
    assert stack_changes(BEFORE, AFTER) == ["driver 570.86.15 -> 580.159.04", "CUDA 12.8 -> 13.0"]


def test_another_host_is_refused():
    assert refusal(BEFORE, {**AFTER, "host": "gpu-7"}, "before-driver") == (
        "--llmperf-compare before-driver: saved on host gpu-3, this run is on gpu-7; a "
        "before/after comparison holds on one node only: save the 'before' run on gpu-7 "
        "(--llmperf-save NAME), or compare two nodes with an A/B")


def test_other_cards_are_refused():
    assert refusal(BEFORE, {**AFTER, "gpu_uuids": ["GPU-c", "GPU-b"]}, "x") == (
        "--llmperf-compare x: saved on other GPUs (gpu_uuids GPU-a,GPU-b, now GPU-c,GPU-b); a "
        "before/after comparison holds on the same cards only: pin the test to them "
        "(CUDA_VISIBLE_DEVICES) or save the run again")


def test_a_run_saved_before_hosts_were_recorded_is_not_refused():
    old = {key: value for key, value in BEFORE.items() if key != "host"}
    assert refusal(old, AFTER, "x") is None
    assert stack_changes(old, old) == []
