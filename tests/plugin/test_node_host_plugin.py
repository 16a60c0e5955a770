"""On Kubernetes each night is a new pod with a new host name, on the same node: with the node's
name in LLMPERF_HOST (the CronJob sets it from the downward API's spec.nodeName), "what changed"
names no host change between two nights on one node, and does name a move to another node."""

from __future__ import annotations

import platform

import pytest

from tests.plugin.history_suite import CONFTEST, NOISE, SUITE, run
from tests.plugin.lines import assert_lines


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def night(suite, monkeypatch, pod: int, node: str, tpot_ms: float):
    monkeypatch.setattr(platform, "node", lambda: f"llmperf-nightly-h200-{pod}-x7k2p")
    monkeypatch.setenv("LLMPERF_HOST", node)
    return run(suite, monkeypatch, tpot_ms / 1000, "--llmperf-history",
               str(suite.path / "nights.sqlite"), "--llmperf-trend")


def test_new_pods_on_one_node_are_one_host_and_another_node_is_named(suite, monkeypatch):
    for pod, factor in enumerate(NOISE[:6]):
        night(suite, monkeypatch, pod, "gpu-node-3", 10.0 * factor).assert_outcomes(passed=1)
    night(suite, monkeypatch, 6, "gpu-node-3", 12.5).assert_outcomes(passed=1)
    same_node = night(suite, monkeypatch, 7, "gpu-node-3", 12.6)
    same_node.assert_outcomes(failed=1)
    assert "host " not in same_node.stdout.str()
    assert_lines(same_node, "tpot_s.p50 changed for the worse at run 7 *; see: llmperf history *")
    for pod in (8, 9):
        night(suite, monkeypatch, pod, "gpu-node-7", 15.0)
    moved = night(suite, monkeypatch, 10, "gpu-node-7", 15.1)
    assert_lines(moved, "*host gpu-node-3 -> gpu-node-7*")
