"""The node a fingerprint names, and the commit a run records outside a checkout: on Kubernetes
the pod's host name and the image's missing .git would name a new host every night and no
commit (docs/nightly.md, Kubernetes)."""

from __future__ import annotations

import platform

from pytest_llmperf.machine import hardware
from pytest_llmperf.session.provenance import git_commit


def test_the_host_is_the_node_the_environment_names(monkeypatch):
    monkeypatch.setattr(platform, "node", lambda: "llmperf-nightly-h200-29391840-x7k2p")
    assert hardware.host_name({"LLMPERF_HOST": "gpu-node-07"}) == "gpu-node-07"
    assert hardware.host_name({"LLMPERF_HOST": " "}) == "llmperf-nightly-h200-29391840-x7k2p"
    assert hardware.host_name({}) == "llmperf-nightly-h200-29391840-x7k2p"


def test_two_pods_on_one_node_give_one_host(monkeypatch):
    monkeypatch.setenv("LLMPERF_HOST", "gpu-node-07")
    cpu = hardware.Hardware("cpu", "a CPU", 0, "cpu")
    hosts = set()
    for pod in ("llmperf-nightly-h200-1-aaaaa", "llmperf-nightly-h200-2-bbbbb"):
        monkeypatch.setattr(platform, "node", lambda pod=pod: pod)
        hosts.add(hardware.current_fingerprint(cpu).to_dict()["host"])
    assert hosts == {"gpu-node-07"}


def test_outside_a_checkout_the_commit_is_the_images(tmp_path):
    assert git_commit(tmp_path, {"LLMPERF_COMMIT": "0123abc"}) == "0123abc"
    assert git_commit(tmp_path, {}) is None
