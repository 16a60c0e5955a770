"""Judging one result: SLOs, the baseline file, a saved run, and the verdict word for the table.

Baseline files are real TOML files in tmp_path, written with baselines.update_baseline, and the
working directory is tmp_path, so the paths in messages are the short relative ones a user sees.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.verdict import baselines, gate, references
from pytest_llmperf.verdict.baselines import BaselineEntry
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from pytest_llmperf.verdict.status import Status
from pytest_llmperf.verdict.stored_run import StoredResult

FILE = "baselines/cpu/test_cpu.toml"
KEY = "test_fixed[64]"
NODEID = "suites/test_cpu.py::test_fixed[64]"
WHERE = f'[{FILE} :: "{KEY}"]'
SAVED = Path(".llmperf/runs/before.json")
UPDATE = f'pytest --llmperf-update-baselines "{NODEID}"'
ENGINE = {"model": "suites/models/tiny-llama", "max_num_seqs": 8}
# This machine, as hardware.py fingerprints it; baselines below are written with it.
HERE = {"hardware_class": "cpu", "device_name": "AMD EPYC 9654", "device_count": 1,
        "cpu_cores": 8, "vllm": "0.32.0"}

TTFT = BaselineEntry(value=0.1, spread=0.0, direction="lower", tolerance=0.1, n=1)
TPUT = BaselineEntry(value=1000.0, spread=0.0, direction="higher", tolerance=0.1, n=1)


def est(value: float) -> Estimate:
    return Estimate(value, 0.0, 1)


# 100 ms TTFT and 1000 tok/s: exactly the baseline above.
ON_BASELINE = {"ttft_s.p50": est(0.1), "output_throughput_tok_s": est(1000.0)}


@pytest.fixture
def ref(tmp_path, monkeypatch) -> references.BaselineRef:
    monkeypatch.chdir(tmp_path)
    return references.BaselineRef(tmp_path / FILE, KEY, NODEID)


def write(ref: references.BaselineRef, engine=ENGINE, fingerprint=HERE,
          **entries: BaselineEntry) -> None:
    metrics = entries or {"ttft_s.p50": TTFT, "output_throughput_tok_s": TPUT}
    provenance = baselines.make_provenance(fingerprint, engine, {"num_prompts": 64})
    baselines.update_baseline(ref.path, ref.key, metrics, provenance)


def against(estimates, ref, engine=ENGINE, *, require: bool, fingerprint=HERE):
    """The one judging path, against the baseline table (gating what the table gates)."""
    table = references.BaselineTable(ref, engine, fingerprint, require=require)
    return references.judge(references.Current(estimates), table)


def saved_result(entries) -> StoredResult:
    """A saved run's test holding exactly these values (spread 0) and directions."""
    estimates = {name: Estimate(e.value, e.spread, e.n, e.direction)
                 for name, e in entries.items()}
    return StoredResult(key=KEY, test_id=NODEID,
                                  record=MeasurementRecord(MeasurementId.parse(NODEID)),
                                  metrics=estimates)


def against_saved(estimates, entries):
    """The one judging path, against a saved run's test (None: the run lacks the test)."""
    saved = None if entries is None else saved_result(entries)
    return references.judge(references.Current(estimates), references.SavedRun(SAVED, KEY, saved))


def verdict(status: str) -> gate.Verdict:
    return gate.Verdict("ttft_s.p50", Status(status), 0.1, 0.1, 0.0, 0.01, 10.0, f"ttft_s.p50 {status}")


def judged(*statuses: str, **kwargs) -> references.Judgement:
    return references.Judgement(report=gate.GateReport(tuple(verdict(s) for s in statuses)), **kwargs)


# ------------------------------------------------------------------ Judgement.label


def test_label_error_wins_over_everything():
    assert judged("missed", "regression", error="broken file").label() == "ERROR"


def test_label_missed_target_before_regression():
    # A hard target is the stronger statement; the table shows it first.
    assert judged("pass", "regression", "missed").label() == "MISSED TARGET"


def test_label_regression():
    assert judged("pass", "improvement", "regression").label() == "REGRESSION"


def test_label_says_why_a_measurement_was_not_gated():
    for reason in (Status.NO_BASELINE, Status.OTHER_HARDWARE, Status.NOT_COMPARED):
        judgement = judged("pass")
        judgement.ungated = reason
        assert judgement.label() == reason.summary == str(reason)


def test_label_no_baseline_does_not_hide_a_missed_target():
    note = f'no baseline for this hardware: {FILE} has no ["{KEY}"]'
    assert judged("missed", notes=[note]).label() == "MISSED TARGET"


def test_label_stale_baseline():
    assert judged("pass", "improvement").label() == "pass (stale baseline)"


def test_label_pass():
    assert judged("pass", "pass").label() == "pass"
    assert references.Judgement().label() == "pass"  # nothing to check is not a failure


def test_failed_warnings_and_failure_text():
    judgement = judged("pass", "improvement", "regression")
    assert judgement.failed
    assert judgement.warnings == ["ttft_s.p50 improvement"]
    assert judgement.failure_text() == "ttft_s.p50 regression"
    broken = references.Judgement(error="bad file")
    assert broken.failed and broken.failure_text() == "bad file"
    assert not judged("pass", "improvement").failed


def test_combine_keeps_the_first_error_all_notes_and_every_verdict():
    first = judged("pass", notes=["a"])
    second = judged("regression", error="e1", notes=["b"])
    third = references.Judgement(error="e2")
    combined = references.combine(first, second, third)
    assert combined.error == "e1"
    assert combined.notes == ["a", "b"]
    assert [v.status for v in combined.report.verdicts] == ["pass", "regression"]
    assert first.notes == ["a"]  # the inputs are not changed


# ------------------------------------------------------------------ estimates and SLOs


def test_the_current_estimates_are_the_median_over_repeats():
    def run(ttft: float):
        record = RequestRecord(index=0, expected_prompt_tokens=4, expected_output_tokens=2,
                               scheduled_s=0.0, sent_s=0.0, chunk_times_s=[ttft, ttft + 0.5],
                               chunk_tokens=[1, 1], usage_output_tokens=2)
        return compute_metrics([record])

    estimates = references.Current.of([run(0.25), run(1.0), run(0.5)]).estimates
    assert estimates["ttft_s.p50"].value == 0.5
    assert estimates["ttft_s.p50"].n == 3
    assert estimates["completed"] == Estimate(1.0, 0.0, 3)


def test_check_slo_without_slo_is_an_empty_pass():
    judgement = references.check_slo(ON_BASELINE, None, known=ON_BASELINE.__contains__)
    assert judgement.report.verdicts == ()
    assert judgement.label() == "pass"


def test_check_slo_met_and_missed():
    slo = gate.SLO(max={"ttft_s.p50": 0.05}, min={"output_throughput_tok_s": 500})
    judgement = references.check_slo(ON_BASELINE, slo, known=ON_BASELINE.__contains__)
    assert judgement.label() == "MISSED TARGET"
    assert judgement.failure_text() == "ttft_s.p50 missed its target: 100.0 ms, target <= 50.0 ms"


def test_check_slo_unknown_metric_is_one_error_line():
    slo = gate.SLO(max={"ttft_s.p5": 0.1})
    judgement = references.check_slo(ON_BASELINE, slo, known=ON_BASELINE.__contains__)
    assert judgement.error == (
        "SLO: SLO names unknown metric 'ttft_s.p5'; use the metric names of the report, "
        "e.g. 'ttft_s.p50' or 'output_throughput_tok_s'"
    )
    assert judgement.label() == "ERROR"
    assert judgement.report.verdicts == ()


# ------------------------------------------------------------------ baselines


def test_shown_path_is_relative_to_the_working_directory(ref):
    assert ref.shown == Path(FILE)


def test_no_baseline_is_a_note(ref):
    judgement = against(ON_BASELINE, ref, require=False)
    assert judgement.error is None
    # The runner shape (verdict/shapes.py): on a CPU its model, cores and generation.
    assert judgement.notes == [f'no baseline for AMD EPYC 9654, 8 cores: {FILE} has no ["{KEY}"]']
    assert judgement.label() == "no baseline"
    assert not judgement.failed


def test_no_baseline_with_require_is_an_error_with_the_command(ref):
    judgement = against(ON_BASELINE, ref, require=True)
    assert judgement.error == (
        f'no baseline for AMD EPYC 9654, 8 cores: {FILE} has no ["{KEY}"] '
        "(--llmperf-require-baseline); make this runner shape's first baselines with: llmperf "
        "bootstrap-baselines --marker cpu suites/test_cpu.py"
    )
    assert judgement.failed


def test_file_with_other_tests_but_not_this_one(ref):
    baselines.update_baseline(ref.path, "test_other", {"ttft_s.p50": TTFT}, {})
    judgement = against(ON_BASELINE, ref, require=False)
    assert judgement.label() == "no baseline"


def test_on_the_baseline_passes(ref):
    write(ref)
    judgement = against(ON_BASELINE, ref, require=True)
    assert judgement.error is None
    assert [(v.name, v.status) for v in judgement.report.verdicts] == [
        ("output_throughput_tok_s", "pass"), ("ttft_s.p50", "pass"),
    ]
    assert judgement.label() == "pass"
    assert judgement.baseline is not None and judgement.baseline.test_id == KEY


def test_regression_against_the_baseline(ref):
    write(ref)
    slower = {**ON_BASELINE, "ttft_s.p50": est(0.2)}
    judgement = against(slower, ref, require=False)
    assert judgement.label() == "REGRESSION"
    assert judgement.failure_text() == (
        "ttft_s.p50 regressed: 200.0 ms vs baseline 100.0 ms (+100.0%, allowed +10.0%, lower is "
        f"better) {WHERE}; if this change is intended, update with: {UPDATE}"
    )


def test_improvement_beyond_the_band_is_a_stale_baseline_warning(ref):
    write(ref)
    faster = {**ON_BASELINE, "output_throughput_tok_s": est(2000.0)}
    judgement = against(faster, ref, require=False)
    assert not judgement.failed
    assert judgement.label() == "pass (stale baseline)"
    assert judgement.warnings == [
        "output_throughput_tok_s improved beyond the band: 2000 tok/s vs baseline 1000 tok/s "
        f"(+100.0%, band +10.0%) {WHERE}: baseline is stale; refresh with: {UPDATE}"
    ]


def test_baseline_for_another_engine_is_an_error(ref):
    write(ref)
    other = {**ENGINE, "max_num_seqs": 16, "enforce_eager": True}
    judgement = against(ON_BASELINE, ref, other, require=False)
    assert judgement.error == (
        f'{FILE}: ["{KEY}"]: baseline was measured with another engine configuration '
        "(enforce_eager (absent) -> true, max_num_seqs 8 -> 16); if the change is intended, "
        "regenerate it with --llmperf-update-baselines"
    )
    assert judgement.label() == "ERROR"
    assert judgement.report.verdicts == ()  # numbers from another engine are not compared


def test_engine_field_set_to_none_matches_an_absent_one(ref):
    write(ref)
    judgement = against(ON_BASELINE, ref, {**ENGINE, "seed": None}, require=False)
    assert judgement.error is None


def test_baseline_from_another_gpu_is_a_note_not_a_verdict(ref):
    h100 = {"hardware_class": "h100", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 1}
    write(ref, fingerprint=h100)
    pcie = {**h100, "device_name": "NVIDIA H100 PCIe"}
    slower = {**ON_BASELINE, "ttft_s.p50": est(0.5)}  # would regress if it were gated
    judgement = against(slower, ref, require=False, fingerprint=pcie)
    assert judgement.notes == [
        f'{FILE}: ["{KEY}"]: baseline is from other hardware (device_name "NVIDIA H100 80GB '
        'HBM3" -> "NVIDIA H100 PCIe"); not gated'
    ]
    assert judgement.report.verdicts == ()
    assert not judgement.failed


def test_cpu_core_count_matters_only_on_the_cpu(ref):
    write(ref)
    judgement = against(ON_BASELINE, ref, require=False, fingerprint={**HERE, "cpu_cores": 16})
    assert judgement.notes == [
        f'{FILE}: ["{KEY}"]: baseline is from other hardware (cpu_cores 8 -> 16); not gated'
    ]
    # Only device and count are hardware; another vLLM version is what a baseline catches.
    assert against(ON_BASELINE, ref, require=False,
                   fingerprint={**HERE, "vllm": "0.33.0"}).report.verdicts != ()


def test_another_cpu_generation_behind_the_same_model_name_is_other_hardware(ref):
    zen4 = {**HERE, "device_name": "AMD EPYC", "cpu_signature": "AuthenticAMD family 25 model 17"}
    write(ref, fingerprint=zen4)
    zen5 = {**zen4, "cpu_signature": "AuthenticAMD family 26 model 2"}
    judgement = against(ON_BASELINE, ref, require=False, fingerprint=zen5)
    assert judgement.notes == [
        f'{FILE}: ["{KEY}"]: baseline is from other hardware (cpu_signature "AuthenticAMD '
        'family 25 model 17" -> "AuthenticAMD family 26 model 2"); not gated'
    ]
    assert judgement.report.verdicts == ()


def test_gpu_runs_ignore_cpu_cores(ref):
    h100 = {"hardware_class": "h100", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 1,
            "cpu_cores": 16}
    write(ref, fingerprint=h100)
    judgement = against(ON_BASELINE, ref, require=False,
                        fingerprint={**h100, "cpu_cores": 26, "cpu_signature": "GenuineIntel"})
    assert judgement.notes == [] and judgement.label() == "pass"
    assert len(judgement.report.verdicts) == 2


def test_baseline_from_other_hardware_with_require_is_an_error(ref):
    write(ref)
    judgement = against(ON_BASELINE, ref, require=True, fingerprint={**HERE, "device_count": 2})
    assert judgement.error == (
        f'{FILE}: ["{KEY}"]: baseline is from other hardware (device_count 1 -> 2); not gated '
        f"(--llmperf-require-baseline); make one here with: {UPDATE}"
    )


def test_label_when_the_baseline_is_from_other_hardware_is_not_pass(ref):
    write(ref)
    judgement = against(ON_BASELINE, ref, require=False, fingerprint={**HERE, "cpu_cores": 16})
    assert judgement.label() == "other hardware"


def test_malformed_baseline_is_an_error_line(ref):
    ref.path.parent.mkdir(parents=True)
    ref.path.write_text(f'["{KEY}".metrics."ttft_s.p50"]\nvalue = 0.1\n')
    judgement = against(ON_BASELINE, ref, require=False)
    assert judgement.error == (
        f'{FILE}: ["{KEY}"].metrics."ttft_s.p50": missing "spread", "n", "direction", '
        '"tolerance"; fix the entry or regenerate it with --llmperf-update-baselines'
    )
    assert judgement.label() == "ERROR"


def test_a_gated_metric_missing_from_the_run_regresses(ref):
    write(ref)
    judgement = against({"ttft_s.p50": est(0.1)}, ref, require=False)
    assert judgement.failure_text() == (
        f"output_throughput_tok_s not measured in this run (baseline 1000 tok/s) {WHERE}; "
        f"if this change is intended, update with: {UPDATE}"
    )


# ------------------------------------------------------------------ saved runs (A/B)

def test_saved_run_without_the_test_is_a_note():
    judgement = against_saved(ON_BASELINE, None)
    assert judgement.notes == [f'not in the saved run {SAVED} :: "{KEY}": nothing to compare']
    assert not judgement.failed


def test_label_when_the_saved_run_lacks_the_test_is_not_pass():
    assert against_saved(ON_BASELINE, None).label() == "not compared"


def test_saved_run_gates_only_the_default_metrics():
    saved = {
        "ttft_s.p50": TTFT,
        # p99 and error_rate are saved in a run but not gated by default (too noisy / zero band).
        "ttft_s.p99": BaselineEntry(value=0.01, spread=0.0, direction="lower", tolerance=0.1, n=1),
        "error_rate": BaselineEntry(value=0.0, spread=0.0, direction="lower", tolerance=0.1, n=1),
    }
    current = {**ON_BASELINE, "ttft_s.p99": est(1.0), "error_rate": est(0.5)}
    judgement = against_saved(current, saved)
    assert sorted(judgement.baseline.metrics) == ["ttft_s.p50"]
    assert [(v.name, v.status) for v in judgement.report.verdicts] == [("ttft_s.p50", "pass")]
    assert judgement.label() == "pass"


def test_saved_run_regression_has_no_update_command():
    # Against a saved run there is no baseline to update: the message just says where.
    judgement = against_saved({"ttft_s.p50": est(0.2)}, {"ttft_s.p50": TTFT})
    assert judgement.label() == "REGRESSION"
    assert judgement.failure_text() == (
        "ttft_s.p50 regressed: 200.0 ms vs baseline 100.0 ms (+100.0%, allowed +10.0%, lower is "
        f'better) [{SAVED} :: "{KEY}"]'
    )


def test_label_of_an_improvement_over_a_saved_run_does_not_say_stale():
    judgement = against_saved({"ttft_s.p50": est(0.05)}, {"ttft_s.p50": TTFT})
    assert judgement.warnings  # the improvement itself is reported
    assert judgement.label() == "pass (improved)"


# ------------------------------------------------------------------ --llmperf-update-baselines


def test_updated_entries_for_a_new_baseline(ref):
    entries = references.updated_entries(ON_BASELINE, ref, None)
    # Only the gated metrics the run measured; default tolerance and each metric's direction.
    assert entries == {
        "output_throughput_tok_s": BaselineEntry(value=1000.0, spread=0.0, direction="higher",
                                                 tolerance=0.1, n=1),
        "ttft_s.p50": BaselineEntry(value=0.1, spread=0.0, direction="lower", tolerance=0.1, n=1),
    }


def test_updated_entries_keep_a_hand_edited_tolerance(ref):
    edited = BaselineEntry(value=0.1, spread=0.0, direction="lower", tolerance=0.25, n=1)
    write(ref, **{"ttft_s.p50": edited, "output_throughput_tok_s": TPUT})
    entries = references.updated_entries({**ON_BASELINE, "ttft_s.p50": est(0.12)}, ref, None)
    assert entries["ttft_s.p50"] == BaselineEntry(value=0.12, spread=0.0, direction="lower",
                                                  tolerance=0.25, n=1)
    assert entries["output_throughput_tok_s"].tolerance == 0.1


def test_updated_entries_keep_a_metric_added_by_hand(ref):
    p99 = BaselineEntry(value=0.3, spread=0.0, direction="lower", tolerance=0.5, n=1)
    write(ref, **{"ttft_s.p99": p99})
    current = {**ON_BASELINE, "ttft_s.p99": est(0.4)}
    entries = references.updated_entries(current, ref, None)
    assert entries["ttft_s.p99"] == BaselineEntry(value=0.4, spread=0.0, direction="lower",
                                                  tolerance=0.5, n=1)
    assert sorted(entries) == ["output_throughput_tok_s", "ttft_s.p50", "ttft_s.p99"]


def test_updated_entries_marker_tolerance_overrides_every_entry(ref):
    edited = BaselineEntry(value=0.1, spread=0.0, direction="lower", tolerance=0.25, n=1)
    write(ref, **{"ttft_s.p50": edited})
    entries = references.updated_entries(ON_BASELINE, ref, 0.05)
    assert {name: e.tolerance for name, e in entries.items()} == {
        "output_throughput_tok_s": 0.05, "ttft_s.p50": 0.05,
    }


def test_updated_entries_replace_a_broken_table_whole(ref):
    ref.path.parent.mkdir(parents=True)
    ref.path.write_text(f'["{KEY}".metrics."ttft_s.p50"]\nvalue = "fast"\n')
    entries = references.updated_entries(ON_BASELINE, ref, None)
    assert entries["ttft_s.p50"] == BaselineEntry(value=0.1, spread=0.0, direction="lower",
                                                  tolerance=0.1, n=1)


def test_updated_entries_with_explicit_gated_names(ref):
    # Capacity and offline tests gate whatever they measured, not the run defaults.
    capacity = {"slo_capacity_req_s": Estimate(12.5, 0.5, 3)}
    entries = references.updated_entries(capacity, ref, None, gated=("slo_capacity_req_s",))
    assert entries == {"slo_capacity_req_s": BaselineEntry(value=12.5, spread=0.5,
                                                           direction="higher", tolerance=0.1, n=3)}


def test_updated_entries_round_trip_through_the_file(ref):
    # What is written must load back and pass against the run it came from.
    baselines.update_baseline(ref.path, ref.key, references.updated_entries(ON_BASELINE, ref, None),
                              baselines.make_provenance(HERE, ENGINE, {}))
    judgement = against(ON_BASELINE, ref, require=True)
    assert judgement.label() == "pass"
    assert len(judgement.report.verdicts) == 2


# ------------------------------------------------------------------ one judge(), every reference


def test_side_a_judges_the_paired_ratios_and_keeps_them_for_the_run_file():
    side_a = references.SideA(({"ttft_s.p50": 0.1},) * 4, tolerance=0.1)
    current = references.Current({"ttft_s.p50": est(0.13)}, ({"ttft_s.p50": 0.13},) * 4)
    judgement = references.judge(current, side_a, gated=("ttft_s.p50",))
    assert judgement.status == Status.REGRESSION and judgement.label() == "REGRESSION"
    assert judgement.failure_text() == (
        "ttft_s.p50 regressed in A/B: B/A median 1.300 (88% interval 1.300-1.300 over 4 ABBA "
        "pairs), allowed <= 1.100 (lower is better; A/B tolerance 0.1)")
    assert judgement.ab.metrics["ttft_s.p50"].ratios == pytest.approx([1.3] * 4)
    # Better than A beyond the band: reported as improved, never as a stale baseline.
    faster = references.Current({}, ({"ttft_s.p50": 0.07},) * 4)
    assert references.judge(faster, side_a, gated=("ttft_s.p50",)).label() == "pass (improved)"


def test_targets_are_judged_before_any_reference_and_without_one():
    slo = gate.SLO(max={"ttft_s.p50": 0.05})
    alone = references.judge(references.Current(ON_BASELINE), None, slo=slo)
    assert alone.label() == "MISSED TARGET"
    why = references.NotJudged("measured on side A only")
    judgement = references.judge(references.Current(ON_BASELINE), why, slo=slo)
    assert judgement.label() == "MISSED TARGET" and judgement.notes == ["measured on side A only"]
    assert references.judge(references.Current(ON_BASELINE), why).label() == "not compared"


def test_an_unusable_reference_is_its_one_line():
    judgement = references.judge(references.Current(ON_BASELINE), references.Unusable("x.json: broken"))
    assert judgement.failed and judgement.failure_text() == "x.json: broken"
    assert judgement.status == Status.ERROR


def test_every_status_has_its_words_and_only_verdicts_of_the_gate_fail():
    assert {s for s in Status if s.failing} == {Status.REGRESSION, Status.MISSED, Status.ERROR,
                                                Status.NOT_COMPARABLE}
    assert Status.from_summary("MISSED TARGET") is Status.MISSED
    assert len({s.summary for s in Status}) == len(Status)  # no two read the same
    assert Status.REGRESSION == "regression"  # the run file's metric status, unchanged


def test_a_committed_baseline_from_other_hardware_gives_way_to_this_machines_own(ref, tmp_path):
    write(ref, fingerprint={**HERE, "cpu_cores": 16})
    local = references.BaselineRef(tmp_path / ".llmperf/baselines/here/cpu/test_cpu.toml", KEY,
                               NODEID)
    table = references.BaselineTable(ref, ENGINE, HERE, local=local)
    first = references.judge(references.Current(ON_BASELINE), table)
    assert first.label() == "other hardware" and first.record_local  # the session records it
    write(local, **{"ttft_s.p50": TTFT})
    second = references.judge(references.Current({"ttft_s.p50": est(0.2)}), table)
    assert second.label() == "REGRESSION" and not second.record_local
    assert second.failure_text().endswith(
        '[.llmperf/baselines/here/cpu/test_cpu.toml :: "test_fixed[64]"]; if this change is '
        f"intended, update with: {UPDATE}")
    # Its own spec changed: the machine-local table no longer describes it; recorded anew.
    other_engine = references.BaselineTable(ref, {**ENGINE, "max_num_seqs": 16}, HERE, local=local)
    assert references.judge(references.Current(ON_BASELINE), other_engine).record_local


# ---------------------------------------------------------------- only comparable references

EDITED = {"num_prompts": 32}  # the test's workload now; write() records {"num_prompts": 64}


def test_a_baseline_of_another_workload_is_not_compared_and_says_what_changed(ref):
    write(ref)
    table = references.BaselineTable(ref, ENGINE, HERE, workload=EDITED)
    slower = {"ttft_s.p50": est(0.5), "output_throughput_tok_s": est(100.0)}  # would regress
    judgement = references.judge(references.Current(slower), table)
    assert judgement.status == Status.NOT_COMPARED and not judgement.failed
    assert judgement.notes == [
        f'{FILE}: ["{KEY}"]: baseline was measured with another workload (num_prompts 64 -> '
        "32); not compared; if the change is intended, regenerate it with "
        "--llmperf-update-baselines"]


def test_the_workloads_name_is_a_label_and_the_same_workload_is_compared(ref):
    write(ref)
    same = references.BaselineTable(ref, ENGINE, HERE, workload={"num_prompts": 64, "name": "new"})
    assert references.judge(references.Current(ON_BASELINE), same).status == Status.PASS


def test_with_require_baseline_another_workload_is_an_error(ref):
    write(ref)
    table = references.BaselineTable(ref, ENGINE, HERE, require=True, workload=EDITED)
    judgement = references.judge(references.Current(ON_BASELINE), table)
    assert judgement.status == Status.ERROR
    assert judgement.error.endswith("(--llmperf-require-baseline)")


def test_a_machine_local_baseline_of_another_workload_is_recorded_anew(ref, tmp_path):
    write(ref, fingerprint={**HERE, "cpu_cores": 16})
    local = references.BaselineRef(tmp_path / ".llmperf/baselines/here/cpu/test_cpu.toml", KEY,
                              NODEID)
    write(local)
    table = references.BaselineTable(ref, ENGINE, HERE, local=local, workload=EDITED)
    assert references.judge(references.Current(ON_BASELINE), table).record_local


@pytest.mark.parametrize("verdict", ["CLIENT LIMITED", "ENGINE DIED", "ENGINE STALLED"])
def test_a_saved_result_that_says_nothing_of_its_engine_is_no_reference(verdict):
    record = MeasurementRecord(MeasurementId.parse(NODEID), status=Status.from_summary(verdict))
    saved = dataclasses.replace(saved_result({"ttft_s.p50": TTFT}), record=record)
    judgement = references.judge(references.Current({"ttft_s.p50": est(0.5)}),
                            references.SavedRun(SAVED, KEY, saved))
    assert judgement.status == Status.NOT_COMPARED and not judgement.failed
    assert judgement.notes == [f'{SAVED} :: "{KEY}": the saved result was {verdict}, no '
                               "reference; not compared"]


def test_a_saved_result_of_another_workload_is_not_compared():
    saved = dataclasses.replace(saved_result({"ttft_s.p50": TTFT}), workload={"num_prompts": 64})
    judgement = references.judge(references.Current({"ttft_s.p50": est(0.5)}),
                            references.SavedRun(SAVED, KEY, saved, workload=EDITED))
    assert judgement.notes == [f'{SAVED} :: "{KEY}": saved with another workload (num_prompts '
                               "64 -> 32); not compared; save the run again with --llmperf-save "
                               "NAME"]
