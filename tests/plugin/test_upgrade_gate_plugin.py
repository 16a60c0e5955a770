"""The upgrade gate as a user meets it (docs/upgrades.md), pytester over a suite whose A/B
measurements are injected (test_confirm_later_plugin's conftest, side B's records varied per
test): --llmperf-inconclusive's three policies, --llmperf-expect stopping the run before any
engine starts, an A/B whose side B did other work (NOT COMPARABLE, never "improved"), the
outputs note and --llmperf-outputs must-match, and a saved run from another host refused. The
real engine's path is tests/integration/test_upgrade_gate_real.py."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from tests.conftest import TINY_LLAMA
from tests.plugin.ab_suite import with_factors

FACTORS = '''B_FACTORS = {
    "test_noisy": [0.5, 2.0, 0.4, 2.5, 0.45, 2.2, 0.5, 1.9],
    "test_early": [1.0] * 8,
    "test_other_text": [1.0] * 8,
}
'''
# Side B of test_early stops after 1 of its 3 tokens (finish_reason "stop"), and so does every
# side under $STOP_EARLY; side B of test_other_text generates other tokens (another digest) in
# every other request.
WORK = '''
            usage_prompt_tokens=r.prompt_tokens, usage_output_tokens=3,
            finish_reason="length", output_digest=100 + i)
            for i, r in enumerate(requests)]
        if side == "B" and test == "test_early" or os.environ.get("STOP_EARLY"):
            for record in records:
                record.usage_output_tokens, record.finish_reason = 1, "stop"
        if side == "B" and test == "test_other_text":
            for record in records[::2]:
                record.output_digest = 7
        if side == "B" and os.environ.get("B_CLIENT_LAGS"):  # its event loop 50 ms late
            from pytest_llmperf.records import ClientStats
            return Measurement(records, client=ClientStats(loop_lag_s=[0.050] * 20))
        return Measurement(records)
'''

ENGINE_AND_WORKLOAD = f"""
import pytest
from pytest_llmperf import Engine, Workload

ENGINE = Engine(model={str(TINY_LLAMA)!r}, load_format="dummy", served_model_name="first")
WORKLOAD = Workload.fixed(input_tokens=8, output_tokens=3, num_requests=4, concurrency=2)
"""
ONE_TEST = """
@pytest.mark.engine(ENGINE)
@pytest.mark.llmperf(gate=["tpot_s.p50"])
def {name}(llmperf):
    llmperf.run(WORKLOAD)
"""
SUITE = ENGINE_AND_WORKLOAD + "".join(ONE_TEST.format(name=name) for name in (
    "test_noisy", "test_early", "test_other_text"))


def _conftest() -> str:
    text = with_factors(FACTORS)
    old = '''
            usage_prompt_tokens=r.prompt_tokens, usage_output_tokens=3)
            for i, r in enumerate(requests)])
'''
    assert old in text
    text = text.replace("        return Measurement([RequestRecord(", "        records = [RequestRecord(")
    return text.replace(old, WORK)


@pytest.fixture
def suite(pytester: pytest.Pytester):
    pytester.makeconftest(_conftest())
    pytester.makepyfile(test_suite=SUITE)
    return pytester


AB = ("-p", "no:cacheprovider", "--llmperf-ab", json.dumps({"max_num_seqs": 8}),
      "--llmperf-json", "run.json")


def _flat(result) -> str:
    return " ".join(result.stdout.str().split())  # the summary's notes wrap


def test_side_b_that_stopped_early_is_not_comparable_never_improved(suite):
    result = suite.runpytest(*AB, "-k", "test_early")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "NOT COMPARABLE: the two sides did not execute the same work: B produced 0.33x the "
        "output tokens: 4 of 4 requests stopped early, finish_reason stop; finish_reason length "
        "on 0% of B's requests against 100% of A's; finish_reason stop on 100% of B's requests "
        "against 0% of A's"])
    # Confirm pairs would not change the work: none are measured.
    assert "more measured" not in result.stdout.str()
    row = next(line for line in result.stdout.str().splitlines()
               if line.strip().startswith("test_early (B)"))
    assert row.rstrip().endswith("NOT COMPARABLE")
    results = json.loads((suite.path / "run.json").read_text())["llmperf"]["results"]
    side_b = next(r for r in results if r["key"] == "test_early (B)")
    assert side_b["status"] == "not comparable"
    assert side_b["work"]["finish_reasons"] == {"stop": 4}
    # The ratios are kept for the record, unjudged.
    assert side_b["ab"]["metrics"]["tpot_s.p50"]["status"] is None


def test_different_work_with_a_client_limited_side_is_not_comparable_naming_the_client(
        suite, monkeypatch):
    """A fact about the work outranks one about the noise (verdict/status.PRECEDENCE): side B
    stopped early and its client lagged; the test fails as NOT COMPARABLE, with the client named
    beside it, never as CLIENT LIMITED instead."""
    monkeypatch.setenv("B_CLIENT_LAGS", "1")
    result = suite.runpytest(*AB, "-k", "test_early")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "NOT COMPARABLE: the two sides did not execute the same work: B produced 0.33x the "
        "output tokens: * against 0% of A's; the run was also client limited (event-loop lag "
        "p90 50.0 ms (limit 10.0 ms))"])
    assert "client-limited measurement" not in result.stdout.str()
    assert ("test_early (B): NOT COMPARABLE, whatever the noise: the run was also client "
            "limited (a fact about the work outranks one about the noise)") in _flat(result)
    results = json.loads((suite.path / "run.json").read_text())["llmperf"]["results"]
    side_b = next(r for r in results if r["key"] == "test_early (B)")
    assert side_b["status"] == "not comparable"


def test_outputs_that_differ_are_a_note_and_fail_only_when_they_must_match(suite):
    result = suite.runpytest(*AB, "-k", "test_other_text", "--llmperf-summary", "full")
    result.assert_outcomes(passed=1)
    assert "test_other_text (B): outputs differ on 2 of 4 requests" in _flat(result)
    strict = suite.runpytest(*AB, "-k", "test_other_text", "--llmperf-outputs", "must-match")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines([
        "NOT COMPARABLE: the two sides did not execute the same work: outputs differ on 2 of 4 "
        "requests (--llmperf-outputs must-match)"])


def test_an_ab_of_the_same_work_says_the_outputs_were_identical(suite):
    result = suite.runpytest(*AB, "-k", "test_noisy", "--llmperf-summary", "full")
    assert "test_noisy (B): outputs identical on 4 of 4 requests" in _flat(result)


def test_inconclusive_fails_under_fail_with_the_spread_in_the_line(suite):
    result = suite.runpytest(*AB, "-k", "test_noisy", "--llmperf-inconclusive", "fail")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([
        r"INCONCLUSIVE \(--llmperf-inconclusive fail\): "
        r"tpot_s\.p50 inconclusive on this machine in A/B: B/A median 1\.200 .* spread \d+% "
        r"\(robust sd\), so 8 pairs resolve only about \d+%, wider than the tolerance 10%; "
        r"about \d+ pairs, or a quieter machine, would settle it"])


@pytest.mark.parametrize(("mode", "warned"), [("warn", True), ("pass", False)])
def test_inconclusive_passes_under_warn_and_pass(suite, monkeypatch, mode, warned):
    monkeypatch.setenv("LLMPERF_INCONCLUSIVE", mode)
    result = suite.runpytest(*AB, "-k", "test_noisy")
    result.assert_outcomes(passed=1)
    assert ("InconclusiveWarning" in result.stdout.str()) is warned


def test_an_unknown_policy_is_one_line(suite):
    result = suite.runpytest(*AB, "--llmperf-inconclusive", "maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llmperf-inconclusive*expected pass, warn or fail*"])


def test_the_warnings_are_public():
    import pytest_llmperf

    assert issubclass(pytest_llmperf.InconclusiveWarning, pytest_llmperf.LlmperfWarning)
    assert pytest_llmperf.InconclusiveWarning.__module__ == "pytest_llmperf.warning_types"


# ---------------------------------------------------------------- --llmperf-expect


def test_an_unexpected_environment_stops_the_run_before_any_engine(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llmperf-expect",
                                           "vllm==0.0.1,hardware=cpu")
    assert result.ret == 6
    result.stderr.re_match_lines([
        r"^Exit: pytest-llmperf: this machine is not the environment --llmperf-expect names: "
        r"vllm expected 0\.0\.1, found \S+; fix the machine, or the expectation if the change "
        r"was meant \(docs/upgrades\.md\)$"])
    assert "collected" not in result.stdout.str()
    assert not (pytester.path / ".llmperf" / "logs").exists()


def test_an_expected_environment_goes_on(pytester: pytest.Pytester):
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--llmperf-expect", "hardware=cpu,gpus=0")
    result.assert_outcomes(passed=1)


def test_an_unknown_expect_key_names_the_keys(pytester: pytest.Pytester):
    result = pytester.runpytest("-p", "no:cacheprovider", "--llmperf-expect", "gpu_count=8")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*--llmperf-expect*unknown key 'gpu_count'; keys: vllm, torch, transformers, python, "
        "pytest_llmperf, driver, cuda, gpu, gpus, hardware, cpu, host"])


# ---------------------------------------------------------------- before/after on one node


def test_a_saved_run_from_another_host_is_refused_before_any_engine(suite):
    saved = suite.runpytest("-p", "no:cacheprovider", "-k", "test_early", "--llmperf-save",
                            "before")
    saved.assert_outcomes(passed=1)
    path = suite.path / ".llmperf" / "runs" / "before.json"
    document = json.loads(path.read_text())
    here = document["llmperf"]["fingerprint"]["host"]
    document["llmperf"]["fingerprint"]["host"] = "gpu-3"
    path.write_text(json.dumps(document))
    result = suite.runpytest("-p", "no:cacheprovider", "-k", "test_early",
                             "--llmperf-compare", "before")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: pytest-llmperf: --llmperf-compare before: saved on host gpu-3, this run is on "
        f"{here}; a before/after comparison holds on one node only: save the 'before' run on "
        f"{here} (--llmperf-save NAME), or compare two nodes with an A/B"])


def test_the_same_node_names_what_changed_and_checks_the_work(suite):
    suite.runpytest("-p", "no:cacheprovider", "-k", "test_early", "--llmperf-save", "before")
    path = suite.path / ".llmperf" / "runs" / "before.json"
    document = json.loads(path.read_text())
    document["llmperf"]["fingerprint"]["vllm"] = "0.31.0"
    path.write_text(json.dumps(document))
    result = suite.runpytest("-p", "no:cacheprovider", "-k", "test_early", "--llmperf-compare",
                             "before", "--llmperf-summary", "full")
    result.assert_outcomes(passed=1)
    flat = _flat(result)
    assert "test_early: changed since the saved run: vLLM 0.31.0 -> " in flat
    assert "test_early: outputs identical on 4 of 4 requests" in flat
    # A file saved before the work was recorded is compared as before, with one line.
    for entry in document["llmperf"]["results"]:
        del entry["work"]
    path.write_text(json.dumps(document))
    older = suite.runpytest("-p", "no:cacheprovider", "-k", "test_early", "--llmperf-compare",
                            "before", "--llmperf-summary", "full")
    older.assert_outcomes(passed=1)
    assert ("test_early: the work could not be checked: the saved run has no record of the work "
            "it executed (written by an older pytest-llmperf); save it again to check it"
            ) in _flat(older)


def test_a_before_run_kept_in_the_store_is_compared_by_name_on_a_runner_that_starts_empty(
        suite, tmp_path, monkeypatch):
    """The driver before/after on an ephemeral runner: the "before" night saves into the team's
    store; the "after" night's checkout has no .llmperf/runs/ and reads it back from there."""
    store = f"sqlite:///{tmp_path / 'team.sqlite'}"
    monkeypatch.setenv("LLMPERF_HOST", "gpu-3")
    before = suite.runpytest("-p", "no:cacheprovider", "-k", "test_early", "--llmperf-save",
                             "before-580", "--llmperf-history", store)
    before.assert_outcomes(passed=1)
    assert "saved there as 'before-580' too, for --llmperf-compare before-580" in _flat(before)
    saved = (suite.path / ".llmperf" / "runs" / "before-580.json").read_text()
    shutil.rmtree(suite.path / ".llmperf")  # the next night's runner starts empty
    after = suite.runpytest("-p", "no:cacheprovider", "-k", "test_early", "--llmperf-compare",
                            "before-580", "--llmperf-history", store, "--llmperf-summary",
                            "full")
    after.assert_outcomes(passed=1)
    flat = _flat(after)
    assert re.search(r"--llmperf-compare before-580: read from the results store \S+team\.sqlite"
                     r" \(saved on gpu-3 at \d{4}-\d\d-\d\d \d\d:\d\d UTC\)", flat), flat
    assert "test_early: outputs identical on 4 of 4 requests" in flat  # compared with it
    assert (suite.path / ".llmperf" / "runs" / "before-580.json").read_text() == saved
    # Saved on another node: refused before any engine starts, as a file from there would be.
    shutil.rmtree(suite.path / ".llmperf")
    monkeypatch.setenv("LLMPERF_HOST", "gpu-7")
    refused = suite.runpytest("-p", "no:cacheprovider", "-k", "test_early", "--llmperf-compare",
                              "before-580", "--llmperf-history", store)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([
        "ERROR: pytest-llmperf: --llmperf-compare before-580: saved on host gpu-3, this run is "
        "on gpu-7; a before/after comparison holds on one node only: *"])


# ---------------------------------------------------------------- against a baseline


def test_a_baseline_of_other_work_is_not_comparable(suite, monkeypatch):
    written = suite.runpytest("-p", "no:cacheprovider", "-k", "test_early",
                              "--llmperf-update-baselines")
    written.assert_outcomes(passed=1)
    table = (suite.path / "baselines" / "cpu" / "test_suite.toml").read_text()
    assert "[test_early.provenance.work]" in table
    assert suite.runpytest("-p", "no:cacheprovider", "-k", "test_early").ret == 0
    monkeypatch.setenv("STOP_EARLY", "1")
    result = suite.runpytest("-p", "no:cacheprovider", "-k", "test_early")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "NOT COMPARABLE (A: the baseline baselines/cpu/test_suite.toml, B: this run): the two "
        "sides did not execute the same work: B produced 0.33x the output tokens: 4 of 4 "
        "requests stopped early, finish_reason stop; *"])
