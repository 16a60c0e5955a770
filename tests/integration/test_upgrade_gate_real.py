"""The upgrade gate on the real CPU engine (docs/upgrades.md): an A/B whose side B ends most
generations early (tests/integration/early_stop: a stand-in for a release that stops early) is
NOT COMPARABLE, naming the output tokens and finish reasons, never "improved"; the run file it
writes, saved on another host, is refused before any engine starts. Its model is named by its
Hub id, `acme/tiny-llama`, found in an offline Hugging Face cache (tests/hub_cache.py) by the
prompts' tokenizer and both engines: how users name models, proved here without an engine start
of its own (tests/integration/test_hub_model.py, the README's first test so named, is
nightly). The early-stop A/B also compares the two sides' greedy outputs request by request on
the real engine (token ids streamed and hashed), and says on how many they differ.

Nightly, both (docs/testing.md, "Where CI's time goes"). The early-stop A/B since 2026-11-29
(180-252 s of a CI worker, two engine starts): NOT COMPARABLE by the status precedence and the
run file refused on another host are tests/plugin/test_upgrade_gate_plugin.py's with injected
measurements, the Hub id on the real engine tests/integration/test_hub_model.py's (one start),
and a real A/B's regression verdict tests/integration/test_ab_weaker_real.py's (nightly too). B in float32 against A in bfloat16 gives other
outputs, which fail under --llmperf-outputs must-match (two engine starts, about 170 s of a CI
worker; the must-match line with injected measurements is tests/plugin/test_upgrade_gate_plugin.py's,
and the outputs comparison on the real engine is the early-stop A/B's). B = A, INCONCLUSIVE on a
tiny workload, is a verdict on noise: tests/integration/test_inconclusive_real.py, nightly too.
The same paths with injected measurements: tests/plugin/test_upgrade_gate_plugin.py."""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.conftest import REPO, leftover_vllm_processes, requires_vllm
from tests.integration.upgrade_ab import flat, prepared, run_ab

# Verdicts on token counts and digests, not on timings: beside other tests is fine.
pytestmark = [requires_vllm, pytest.mark.shares_machine]

EARLY_STOP = REPO / "tests" / "integration" / "early_stop"


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch):
    return prepared(pytester, monkeypatch)


@pytest.mark.nightly  # 180-252 s of a CI worker (docs/testing.md); its lines: the plugin test's
def test_a_side_b_that_stops_early_is_not_comparable_and_another_host_is_refused(suite):
    early = {"env": {"PYTHONPATH": os.pathsep.join([str(EARLY_STOP), str(REPO)]),
                     "LLMPERF_INDUCED_STOP_AFTER": "2"}}
    result = run_ab(suite, early)
    assert leftover_vllm_processes() == []
    commands = [log.read_text(errors="replace").splitlines()[0]
                for log in (suite.path / ".llmperf" / "logs").glob("vllm-*.log")]
    assert len(commands) == 2 and all("--model acme/tiny-llama " in c for c in commands), commands
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([
        r"NOT COMPARABLE: the two sides did not execute the same work: B produced 0\.\d\dx the "
        r"output tokens: \d+ of 16 requests stopped early, finish_reason stop; "
        r"finish_reason length on \d+% of B's requests against 100% of A's; finish_reason stop "
        r"on \d+% of B's requests against 0% of A's"])
    assert "improved" not in result.stdout.str()
    results = json.loads((suite.path / "run.json").read_text())["llmperf"]["results"]
    side_a, side_b = (next(r for r in results if r["key"] == f"test_concurrent ({side})")
                      for side in "AB")
    assert side_a["work"]["finish_reasons"] == {"length": 16}
    assert (side_a["work"]["output_tokens"], side_a["work"]["short"]) == (256, 0)
    assert side_b["work"]["finish_reasons"]["stop"] == side_b["work"]["short"] >= 4
    # The outputs compared request by request: every request that stopped early differs.
    differ = re.search(r"test_concurrent \(B\): outputs differ on (\d+) of 16 requests",
                       flat(result))
    assert differ and int(differ.group(1)) >= side_b["work"]["short"], flat(result)
    # Different work is a fact no neighbour causes: on a shared machine (CI's first step), where
    # a run may also be disturbed or client limited, the row still says NOT COMPARABLE
    # (verdict/status.PRECEDENCE), the noise named in a note beside it.
    assert side_b["status"] == "not comparable"
    # The same file as a "before" saved on another node: refused before any engine starts.
    document = json.loads((suite.path / "run.json").read_text())
    document["llmperf"]["fingerprint"]["host"] = "gpu-3"
    (suite.path / "before.json").write_text(json.dumps(document))
    for log in (suite.path / ".llmperf" / "logs").glob("*"):
        log.unlink()
    refused = suite.runpytest_subprocess("-p", "no:cacheprovider", "--llmperf-compare",
                                         "before.json", timeout=60)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([
        "ERROR: pytest-llmperf: --llmperf-compare before.json: saved on host gpu-3, this run is "
        "on *; a before/after comparison holds on one node only: *"])
    assert list((suite.path / ".llmperf" / "logs").glob("*")) == []


@pytest.mark.nightly  # two engine starts for a line the plugin test holds (docstring)
def test_float32_against_bfloat16_changes_outputs_a_note_unless_they_must_match(suite):
    result = run_ab(suite, {"dtype": "float32"}, "--llmperf-outputs", "must-match", requests=8)
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([
        r"NOT COMPARABLE: the two sides did not execute the same work: outputs differ on [1-8] "
        r"of 8 requests \(--llmperf-outputs must-match\)"])
