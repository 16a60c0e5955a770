"""The `llmperf` command: compare tables and exit codes, exact error lines, the env fingerprint."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_llmperf import cli
from pytest_llmperf.machine import hardware
from tests.unit.reports.run_files import (
    FINGERPRINT,
    TEST,
    ab_run,
    document,
    make_result,
    save_document,
)


def save(path: Path, *results, fingerprint=FINGERPRINT, commit="3f2c1e0") -> str:
    return save_document(path, document(*results, fingerprint=fingerprint, commit=commit))


def compare(capsys, *argv: str) -> tuple[int, list[str], str]:
    code = cli.main(["compare", *argv])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


@pytest.fixture
def before(tmp_path) -> str:
    return save(tmp_path / "before.json", make_result(TEST, (0.2,) * 4))


# ---------------------------------------------------------------- compare


def test_identical_runs_pass(capsys, tmp_path, before):
    code, lines, err = compare(capsys, before, before)
    assert code == 0 and err == ""
    # Four requests sent 1 s apart, TTFT 200 ms, then 3 tokens 10 ms apart: E2EL 230 ms,
    # 16 tokens over 3.23 s = 4.95 tok/s.
    assert lines == [
        f"A (reference): {before} (commit 3f2c1e0, 2026-11-22T10:04:31+00:00)",
        f"B (candidate): {before} (commit 3f2c1e0, 2026-11-22T10:04:31+00:00)",
        "",
        "test            metric                            A           B  delta  allowed  verdict",
        "--------------  -----------------------  ----------  ----------  -----  -------  -------",
        "test_fixed[64]  ttft_s.p50                 200.0 ms    200.0 ms  +0.0%   +10.0%  pass",
        "test_fixed[64]  ttft_s.p90                 200.0 ms    200.0 ms  +0.0%   +10.0%  pass",
        "test_fixed[64]  tpot_s.p50                  10.0 ms     10.0 ms  +0.0%   +10.0%  pass",
        "test_fixed[64]  tpot_s.p90                  10.0 ms     10.0 ms  +0.0%   +10.0%  pass",
        "test_fixed[64]  e2el_s.p50                 230.0 ms    230.0 ms  +0.0%   +10.0%  pass",
        "test_fixed[64]  output_throughput_tok_s  4.95 tok/s  4.95 tok/s  +0.0%   +10.0%  pass",
        "",
        "0 regression(s), 0 improved, 6 pass; 0 test(s) in one file only",
    ]


def test_injected_regression_exits_1_with_the_verdict_line(capsys, tmp_path, before):
    after = save(tmp_path / "after.json", make_result(TEST, (0.3,) * 4))
    code, lines, _ = compare(capsys, before, after, "--metrics", "ttft_s.p50,tpot_s.p50")
    assert code == 1
    assert "test_fixed[64]  ttft_s.p50  200.0 ms  300.0 ms  +50.0%   +10.0%  REGRESSION" in lines
    assert "test_fixed[64]  tpot_s.p50   10.0 ms   10.0 ms   +0.0%   +10.0%  pass" in lines
    assert lines[-2:] == [
        "1 regression(s), 0 improved, 1 pass; 0 test(s) in one file only",
        "ttft_s.p50 regressed: 300.0 ms vs baseline 200.0 ms (+50.0%, allowed +10.0%, lower is "
        f'better) [{before} :: "test_fixed[64]"]',
    ]


def test_a_candidate_that_did_other_work_is_not_comparable(capsys, tmp_path, before):
    """B ran faster by stopping its generations early: no metric is judged, exit 1."""
    after = json.loads(Path(before).read_text())
    work = after["llmperf"]["results"][0]["work"]
    work.update(output_tokens=4, short=4, finish_reasons={"stop": 4})
    code, lines, _ = compare(capsys, before, save_document(tmp_path / "after.json", after))
    assert code == 1
    assert lines[5:] == [
        "test_fixed[64]  -       -  -      -        -  NOT COMPARABLE",
        "",
        "0 regression(s), 0 improved, 0 pass; 0 test(s) in one file only; 1 not comparable "
        "(other work)",
        "NOT COMPARABLE (A: the saved run, B: this run): the two sides did not execute the "
        "same work: B produced 0.25x the output tokens: 4 of 4 requests stopped early, "
        "finish_reason stop; no finish_reason on 0% of B's requests against 100% of A's; "
        "finish_reason stop on 100% of B's requests against 0% of A's",
    ]


def test_each_test_is_judged_by_the_gate_it_declared_unless_the_command_line_says(
        capsys, tmp_path):
    declared = {TEST: {"tolerance": 0.75, "metrics": ["ttft_s.p50", "tpot_s.p50"]}}
    def run_file(name, ttft):
        doc = document(make_result(TEST, (ttft,) * 4))
        doc["llmperf"]["results"][0]["gate"] = declared[TEST]
        return save_document(tmp_path / name, doc)
    before, after = run_file("before.json", 0.2), run_file("after.json", 0.3)
    # TTFT +50%: within the test's own 75% band; only its two declared metrics are judged.
    code, lines, _ = compare(capsys, before, after)
    assert code == 0
    assert [line.split()[1] for line in lines[5:7]] == ["ttft_s.p50", "tpot_s.p50"]
    assert "test_fixed[64]  ttft_s.p50  200.0 ms  300.0 ms  +50.0%   +75.0%  pass" in lines
    assert lines[8] == "0 regression(s), 0 improved, 2 pass; 0 test(s) in one file only"
    # The command line overrides every test's own.
    code, lines, _ = compare(capsys, before, after, "--tolerance", "0.1")
    assert code == 1
    assert "test_fixed[64]  ttft_s.p50  200.0 ms  300.0 ms  +50.0%   +10.0%  REGRESSION" in lines


def test_improvement_is_reported_and_passes(capsys, tmp_path, before):
    after = save(tmp_path / "after.json", make_result(TEST, (0.1,) * 4))
    code, lines, _ = compare(capsys, before, after, "--metrics", "ttft_s.p50")
    assert code == 0
    assert "test_fixed[64]  ttft_s.p50  200.0 ms  100.0 ms  -50.0%    -9.1%  pass (improved)" in lines
    assert lines[-1] == "0 regression(s), 1 improved, 0 pass; 0 test(s) in one file only"


def test_tolerance_widens_the_band(capsys, tmp_path, before):
    after = save(tmp_path / "after.json", make_result(TEST, (0.3,) * 4))
    code, lines, _ = compare(capsys, before, after, "--metrics", "ttft_s.p50", "--tolerance",
                             "0.6")
    assert code == 0
    assert "test_fixed[64]  ttft_s.p50  200.0 ms  300.0 ms  +50.0%   +60.0%  pass" in lines


def test_a_band_set_by_noise_is_marked(capsys, tmp_path):
    # Three repeats at TTFT x 0.5, 1, 1.5: the spread of ttft_s.p50 is 0.1 x 1.4826 = 148 ms,
    # so the band is 3 x sqrt(2) x 148 ms = 629 ms = 314.5% of 200 ms.
    noisy = save(tmp_path / "noisy.json", make_result(TEST, (0.2,) * 4, scales=(0.5, 1.0, 1.5)))
    code, lines, _ = compare(capsys, noisy, noisy, "--metrics", "ttft_s.p50")
    assert code == 0
    assert "test_fixed[64]  ttft_s.p50  200.0 ms  200.0 ms  +0.0%  +314.5%*  pass" in lines
    assert ("* band widened by noise: 3 x the combined spread of A's and B's repeats"
            in lines)


def test_tests_in_one_file_only_are_listed(capsys, tmp_path, before):
    after = save(tmp_path / "after.json", make_result(TEST, (0.2,) * 4),
                 make_result("suites/test_cpu.py::test_new", (0.2,) * 4))
    old = save(tmp_path / "old.json", make_result("suites/test_cpu.py::test_gone", (0.2,) * 4),
               make_result(TEST, (0.2,) * 4))
    code, lines, _ = compare(capsys, old, after, "--metrics", "ttft_s.p50")
    assert code == 0
    assert lines[3:] == [
        "test            metric             A         B  delta  allowed  verdict",
        "--------------  ----------  --------  --------  -----  -------  ---------",
        "test_gone       -                                               only in A",
        "test_fixed[64]  ttft_s.p50  200.0 ms  200.0 ms  +0.0%   +10.0%  pass",
        "test_new        -                                               only in B",
        "",
        "0 regression(s), 0 improved, 1 pass; 2 test(s) in one file only",
    ]


def test_a_metric_without_value_in_b_is_a_regression(capsys, tmp_path, before):
    # B measured no TPOT at all (written as null), on the same work: one token per output would
    # be other work, NOT COMPARABLE (the test above).
    document = json.loads(Path(before).read_text())
    document["llmperf"]["results"][0]["metrics"]["tpot_s.p50"]["value"] = None
    after = save_document(tmp_path / "after.json", document)
    code, lines, _ = compare(capsys, before, after, "--metrics", "tpot_s.p50")
    assert code == 1
    assert "test_fixed[64]  tpot_s.p50  10.0 ms  NaN      -        -  REGRESSION" in lines
    assert lines[-1] == (f'tpot_s.p50 has no value (NaN) vs baseline 10.0 ms [{before} :: '
                         '"test_fixed[64]"]')
    code, lines, _ = compare(capsys, after, before, "--metrics", "tpot_s.p50")
    assert code == 0
    assert "test_fixed[64]  tpot_s.p50  NaN  10.0 ms      -        -  no value in A" in lines


def test_changes_between_the_fingerprints_are_shown(capsys, tmp_path, before):
    upgraded = replace(FINGERPRINT, software={**FINGERPRINT.software, "vllm": "0.32.0",
                                              "torch": "2.13.0"})
    after = save(tmp_path / "after.json", make_result(TEST, (0.2,) * 4), fingerprint=upgraded)
    code, lines, _ = compare(capsys, before, after, "--metrics", "ttft_s.p50")
    assert code == 0
    assert lines[2] == "changed from A to B: torch - -> 2.13.0, vllm 0.31.0 -> 0.32.0"


# ---------------------------------------------------------------- unusable input


def test_unknown_metric_exits_2(capsys, before):
    code, lines, err = compare(capsys, before, before, "--metrics", "ttft.p50,tpot_s.p50")
    assert code == 2 and lines == []
    assert err == (
        "llmperf: error: --metrics names unknown metric 'ttft.p50' (did you mean "
        "'ttft_s.p50'?); use the metric names of the report, e.g. 'ttft_s.p50' or "
        "'output_throughput_tok_s'\n")


def test_empty_metrics_exits_2(capsys, before):
    code, _, err = compare(capsys, before, before, "--metrics", ",")
    assert code == 2
    assert err == ("llmperf: error: --metrics ',' names no metric; e.g. --metrics "
                   "ttft_s.p50,tpot_s.p50\n")


def test_missing_file_exits_2(capsys, tmp_path, before):
    code, lines, err = compare(capsys, before, str(tmp_path / "nope.json"))
    assert code == 2 and lines == []
    assert err == (f"llmperf: error: {tmp_path / 'nope.json'}: no saved run here; save one "
                   "first with --llmperf-save NAME\n")


def test_foreign_json_exits_2(capsys, tmp_path, before):
    foreign = tmp_path / "0001_bench.json"
    foreign.write_text(json.dumps({"benchmarks": [], "machine_info": {}}))
    code, _, err = compare(capsys, str(foreign), before)
    assert code == 2
    assert err == (f'llmperf: error: {foreign}: not a pytest-llmperf run file (no "llmperf" '
                   "key); write one with --llmperf-json PATH or --llmperf-save NAME\n")


def test_bad_tolerance_is_a_usage_error(capsys, before):
    code, _, err = compare(capsys, before, before, "--tolerance", "10")
    assert code == 2
    assert err.splitlines()[-1] == (
        "llmperf compare: error: argument --tolerance: is a fraction (0.1 means 10%) from 0 to 4, got 10")


# ---------------------------------------------------------------- env


def test_env_prints_the_fingerprint_with_the_cpu_model(capsys):
    assert cli.main(["env"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # The same detector the fingerprint uses; a CPU that names no model has no such line.
    model = hardware.from_cpu().cpu_model
    if model:
        assert f"cpu_model: {model}" in lines
    else:
        assert not any(line.startswith("cpu_model:") for line in lines)
    assert any(line.startswith("hardware_class: ") for line in lines)
    assert f"python: {sys.version.split()[0]}" in lines


def test_env_json_with_a_hardware_override(capsys):
    assert cli.main(["env", "--json", "--hardware", "h100:2"]) == 0
    fingerprint = json.loads(capsys.readouterr().out)
    assert fingerprint["hardware_class"] == "h100" and fingerprint["device_count"] == 2
    assert fingerprint["source"] == "override"
    assert isinstance(fingerprint["cpu_flags"], list)


def test_env_reads_the_override_from_the_environment(capsys, monkeypatch):
    monkeypatch.setenv("LLMPERF_HARDWARE", "h200:8")
    assert cli.main(["env"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == ["hardware_class: h200", "device_name: h200", "device_count: 8",
                         "source: override"]


def test_env_bad_override_exits_2(capsys):
    assert cli.main(["env", "--hardware", "tpu"]) == 2
    assert capsys.readouterr().err == (
        "llmperf: error: hardware override 'tpu' is not valid: use one of h100, h200, "
        "a100-80gb, a100-40gb, gpu, cpu, with ':<gpu count>' for a GPU class (e.g. 'h200:8')\n")


# ---------------------------------------------------------------- entry point


def test_help_and_missing_command(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: llmperf [-h] COMMAND ...")
    commands = [line.split()[0] for line in out.splitlines()
                if line.startswith("    ") and not line.startswith("     ")]
    assert commands == ["compare", "compare-pools", "env", "bench-client", "plot", "history", "ack",
                        "accept", "export", "bisect", "nightly", "bootstrap-baselines"]
    assert "judge run B against run A" in out and "print this machine's fingerprint" in out
    assert cli.main([]) == 2
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--workers", "--server-procs"])
@pytest.mark.parametrize("value", ["0", "two", "2,4"])
def test_bench_client_counts_are_one_whole_number(capsys, option, value):
    assert cli.main(["bench-client", option, value]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"llmperf bench-client: error: argument {option}: expected a whole number >= 1, e.g. 2; "
        f"got {value!r}")


def test_console_script_help_imports_nothing_heavy():
    # Run as users run it; and the import must not pull in vLLM, torch or transformers.
    script = Path(sys.executable).parent / "llmperf"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "pytest_llmperf.cli"]
    done = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "usage: llmperf" in done.stdout
    probe = ("import sys, pytest_llmperf.cli; "
             "print(sorted(m for m in ('vllm', 'torch', 'transformers') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


# ---------------------------------------------------------------- compare, one A/B run file


def test_one_ab_run_file_shows_its_paired_verdicts(capsys, tmp_path):
    code, lines, _ = compare(capsys, ab_run(tmp_path, 0.3))
    assert code == 1
    assert lines[2:] == [
        "test            metric      B/A median     interval  pairs   allowed  verdict",
        "--------------  ----------  ----------  -----------  -----  --------  ----------",
        "test_fixed[64]  ttft_s.p50       1.500  1.485-1.515      4  <= 1.100  REGRESSION",
        "",
        "1 regression(s), 0 improved, 0 pass; 0 test(s) in one file only",
        "ttft_s.p50 regressed in A/B: B/A median 1.500 (88% interval 1.485-1.515 over 4 ABBA "
        "pairs), allowed <= 1.100 (lower is better; A/B tolerance 0.1)",
    ]


def test_one_run_file_without_ab_results_exits_2(capsys, before):
    code, _, err = compare(capsys, before)
    assert code == 2
    assert err.strip() == (
        f"llmperf: error: {before} has no paired A/B results (it was not run with "
        "--llmperf-ab); to compare two runs give both: llmperf compare A.json B.json")


def test_ratios_a_test_judged_itself_are_shown_without_a_verdict(capsys, tmp_path):
    """llmperf.ab() keeps its ratios in the run file with no tolerance: the test asserted on
    them, so the table shows them and passes."""
    path = ab_run(tmp_path, 0.3)
    doc = json.loads(Path(path).read_text())
    side_b = doc["llmperf"]["results"][1]
    side_b["ab"]["tolerance"] = None
    side_b["ab"]["metrics"]["ttft_s.p50"].update(status=None, message="")
    code, lines, _ = compare(capsys, save_document(tmp_path / "self.json", doc))
    assert code == 0
    assert lines[4] == ("test_fixed[64]  ttft_s.p50       1.500  1.485-1.515      4        -  "
                        "judged by the test")
