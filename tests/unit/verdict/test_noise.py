"""The noise band (verdict/noise.py): baselines that store each metric's run-to-run spread and
where it came from, gated by max(floor, K x spread), on the two H200 reruns of
tests/unit/data/h200_reruns.json (one NVIDIA H200, vLLM 0.24.0, 2026-11-26, docs/noise.md)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_llmperf.history.record import MetricValue, from_document
from pytest_llmperf.metrics.compute import RunMetrics
from pytest_llmperf.metrics.stats import Estimate, combine_repeats, relative_spread
from pytest_llmperf.verdict import baselines, noise, references
from pytest_llmperf.verdict.baselines import BaselineEntry
from pytest_llmperf.verdict.gate import DEFAULT_GATED, check_metric
from pytest_llmperf.verdict.status import Status
from tests.conftest import REPO

DATA = Path(__file__).parents[1] / "data" / "h200_reruns.json"
RUNS = json.loads(DATA.read_text())["runs"]
TESTS = sorted(RUNS[0]["results"])
CLASSIFICATION, INTERACTIVE = "test_profiles[classification]", \
    "test_interactive_limits_at_concurrency_16"
H200 = {"hardware_class": "h200"}


def measured(run: int, test: str, **worse: float) -> dict[str, Estimate]:
    """Run `run`'s metrics of `test` as one run's estimates (the engine's start included),
    each metric in `worse` made that fraction worse in its own direction."""
    values = {**RUNS[run]["results"][test], "engine_start_s": RUNS[run]["engine_start_s"]}
    for name, loss in worse.items():
        values[name] *= 1 - loss if name.endswith(("_tok_s", "_req_s")) else 1 + loss
    return {name: Estimate(value, 0.0, 1) for name, value in values.items()}


def written(tmp_path: Path, test: str, run: int, gate: tuple[str, ...] = (),
            kind: str | None = noise.GPU) -> references.BaselineTable:
    """The baseline --llmperf-update-baselines writes from one run (gate: the names a test
    gave in gate=), as the table that judges the next runs."""
    ref = references.BaselineRef(tmp_path / "baselines/h200/test_gpu.toml", test,
                            f"suites/test_gpu.py::{test}")
    entries = references.updated_entries(measured(run, test), ref, None, gate or DEFAULT_GATED,
                                    exact=bool(gate), kind=kind)
    baselines.update_baseline(ref.path, ref.key, entries, {})
    return references.BaselineTable(ref, {}, H200, exact=bool(gate))


def against(table: references.BaselineTable, current: dict[str, Estimate],
            gate: tuple[str, ...] = ()) -> references.Judgement:
    return references.judge(references.Current(current), table, gated=gate or DEFAULT_GATED)


def where(test: str) -> str:
    return (f'[{Path("baselines/h200/test_gpu.toml")} :: "{test}"]; if this change is intended, '
            f'update with: pytest --llmperf-update-baselines "suites/test_gpu.py::{test}"')


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # messages show the baseline's path relative to here


def _up_to_two_digits(value: float) -> float:
    step = 10 ** (math.floor(math.log10(value)) - 1)
    return math.ceil(round(value / step, 9)) * step


def test_the_gpu_priors_are_the_h200_reruns_largest_spreads_rounded_up():
    largest: dict[tuple[str, str], float] = {}
    for test in TESTS:
        for name in RUNS[0]["results"][test]:
            spread = relative_spread(combine_repeats([run["results"][test][name] for run in RUNS]))
            family = noise.family_of(name)
            largest[family] = max(largest.get(family, 0.0), spread)
    starts = combine_repeats([run["engine_start_s"] for run in RUNS])
    largest[noise.family_of("engine_start_s")] = relative_spread(starts)
    priors = {family: prior.spread for family, prior in noise.PRIORS[noise.GPU].items()}
    assert priors == pytest.approx({f: _up_to_two_digits(s) for f, s in largest.items()})
    assert priors[("TTFT", "p50")] == 0.33 and priors[("throughput", "")] == 0.0017


def test_a_3_percent_throughput_or_tpot_loss_fails_where_a_flat_10_percent_passed_it(tmp_path):
    table = written(tmp_path, INTERACTIVE, run=1)
    slower = against(table, measured(0, INTERACTIVE, output_throughput_tok_s=0.03))
    assert slower.status == Status.REGRESSION
    assert [v.message for v in slower.report.failures] == [
        "output_throughput_tok_s regressed: 1865 tok/s vs baseline 1927 tok/s (-3.2%, allowed "
        f"-2.0%, higher is better) {where(INTERACTIVE)}"]
    for test in TESTS:
        tpot = against(written(tmp_path, test, run=1), measured(0, test, **{"tpot_s.p50": 0.03}))
        assert [v.name for v in tpot.report.failures] == ["tpot_s.p50"], test
    flat = written(tmp_path / "before", INTERACTIVE, run=1, kind=None)  # as written before
    assert against(flat, measured(0, INTERACTIVE, output_throughput_tok_s=0.03)).status == \
        Status.PASS


def test_an_unchanged_rerun_passes_though_its_ttft_p50_moved_36_percent(tmp_path):
    for test in TESTS:
        for first, then in ((0, 1), (1, 0)):
            rerun = against(written(tmp_path, test, run=first), measured(then, test))
            assert rerun.status == Status.PASS, (test, rerun.failure_text())
            assert "ttft_s.p50" not in {v.name for v in rerun.report.verdicts}
            assert rerun.notes == [
                "ttft_s.p50 not gated: run-to-run spread 33.0% (prior for GPU TTFT p50) makes "
                "its band 3 x spread = 99%, over the 30% a gate may have; name it in gate= to "
                "gate it"]
    moved = measured(0, CLASSIFICATION)["ttft_s.p50"].value / \
        measured(1, CLASSIFICATION)["ttft_s.p50"].value
    assert moved == pytest.approx(1.565, abs=1e-3)  # 362.1 ms -> 231.3 ms


def test_a_named_ttft_p50_is_gated_with_its_wide_band(tmp_path):
    named = ("ttft_s.p50", "output_throughput_tok_s")
    table = written(tmp_path, CLASSIFICATION, run=1, gate=named)
    entry = baselines.load_baseline(table.ref.path, CLASSIFICATION).metrics["ttft_s.p50"]
    assert (entry.spread_source, entry.tolerance) == ("prior", noise.FLOOR)
    assert entry.spread == pytest.approx(0.33 * entry.value, rel=1e-5)
    rerun = against(table, measured(0, CLASSIFICATION), named)  # 231.3 ms -> 362.1 ms
    assert rerun.status == Status.PASS and rerun.notes == []
    assert {v.name for v in rerun.report.verdicts} == set(named)
    tripled = against(table, measured(1, CLASSIFICATION, **{"ttft_s.p50": 2.0}), named)
    assert [v.message for v in tripled.report.failures] == [
        "ttft_s.p50 regressed: 693.8 ms vs baseline 231.3 ms (+200.0%, allowed +99.0% by 3 x "
        f"run-to-run spread 33.0% (prior), lower is better) {where(CLASSIFICATION)}"]


def test_a_named_cold_start_is_gated_and_one_start_carries_no_spread_of_its_own(tmp_path):
    named = ("engine_start_s",)
    table = written(tmp_path, INTERACTIVE, run=1, gate=named)  # healthy after 67.2 s
    assert against(table, measured(0, INTERACTIVE), named).status == Status.PASS  # 102.7 s
    slow = against(table, measured(1, INTERACTIVE, engine_start_s=1.5), named)
    assert [v.message for v in slow.report.failures] == [
        "engine_start_s regressed: 167.949 s vs baseline 67.180 s (+150.0%, allowed +96.0% by 3 "
        f"x run-to-run spread 32.0% (prior), lower is better) {where(INTERACTIVE)}"]
    # Three repeats served by one start: one sample (Metric.one_sample), not three.
    current = references.Current.of([RunMetrics({"engine_start_s": 20.5})] * 3)
    assert current.estimates == {"engine_start_s": Estimate(20.5, 0.0, 1)}
    assert references.Current.of([]).estimates == {}


def test_the_cold_start_of_a_file_written_before_it_was_a_metric_lands_in_history():
    document = {"llmperf": {"format": 2, "results": [
        {"key": "test_a", "engine_start_s": 67.2, "metrics": {}},
        {"key": "test_b", "engine_start_s": None, "metrics": {}}]}}
    first, second = from_document(document).results
    assert first.metrics == {"engine_start_s": MetricValue(67.2, 0.0, 1, "lower")}
    assert second.metrics == {}  # an endpoint's server: no start of ours


@pytest.mark.parametrize(("estimate", "spread"), [
    (Estimate(10.0, 0.9, 3), noise.Spread(0.09, "repeats")),
    (Estimate(10.0, 0.5, 3), noise.Spread(0.065, "prior", "CPU throughput")),  # understated
    (Estimate(10.0, 0.4, 5, source="history"), noise.Spread(0.04, "history")),
    (Estimate(10.0, 0.4, 2, source="history"), noise.Spread(0.065, "prior", "CPU throughput")),
    (Estimate(10.0, 0.0, 1), noise.Spread(0.065, "prior", "CPU throughput")),
])
def test_the_spread_comes_from_repeats_history_or_the_prior(estimate, spread):
    assert noise.spread_for("output_throughput_tok_s", estimate, noise.CPU) == spread


def test_no_spread_for_a_metric_without_a_prior_or_a_value():
    assert noise.spread_for("server:kv_cache_usage_max", Estimate(0.5, 0.0, 1), noise.GPU) is None
    assert noise.spread_for("server:kv_cache_usage_max", Estimate(0.5, 0.01, 3),
                            noise.GPU) is None  # repeats alone: the old band
    assert noise.spread_for("server:kv_cache_usage_max", Estimate(
        0.5, 0.01, 3, source="history"), noise.GPU) == noise.Spread(0.02, "history")
    assert noise.spread_for("ttft_s.mean", Estimate(0.5, 0.0, 1), noise.CPU) is None
    assert noise.spread_for("ttft_s.p50", Estimate(math.nan, math.nan, 1), noise.GPU) is None


@pytest.mark.parametrize(("name", "family"), [
    ("ttft_s.p50", ("TTFT", "p50")), ("turn2:ttft_s.p50", ("TTFT", "p50")),
    ("icl_s.p99", ("ITL", "p99")), ("offline_output_throughput_tok_s", ("throughput", "")),
    ("request_throughput_req_s", ("throughput", "")), ("engine_start_s", ("engine start", "")),
    ("ttft_s.max", None), ("goodput_req_s", None), ("server:kv_cache_usage_max", None),
])
def test_families(name, family):
    assert noise.family_of(name) == family


def test_kinds():
    assert [noise.kind_of(c) for c in ("cpu", None, "h200", "a100-80gb")] == [
        noise.CPU, noise.CPU, noise.GPU, noise.GPU]


def test_the_users_tolerance_is_kept_and_the_floor_written_otherwise(tmp_path):
    ref = references.BaselineRef(tmp_path / "b.toml", "test_a", "t.py::test_a")
    # as every entry was written before:
    old = BaselineEntry(value=0.1, spread=0.0, direction="lower", tolerance=0.1, n=1)
    baselines.update_baseline(ref.path, "test_a", {
        "ttft_s.p50": old, "tpot_s.p50": BaselineEntry(value=0.01, spread=0.0, direction="lower",
                                                       tolerance=0.25, n=1),
        "e2el_s.p50": BaselineEntry(value=0.2, spread=0.0058, direction="lower",
                                    tolerance=noise.FLOOR, n=1, spread_source="prior")}, {})
    now = {"ttft_s.p50": Estimate(0.1, 0.0, 1), "tpot_s.p50": Estimate(0.01, 0.0, 1),
           "e2el_s.p50": Estimate(0.2, 0.0, 1), "ttft_s.mean": Estimate(0.3, 0.0, 1)}
    gated = ("ttft_s.p50", "tpot_s.p50", "e2el_s.p50", "ttft_s.mean")
    entries = references.updated_entries(now, ref, None, gated, kind=noise.CPU)
    assert {n: (e.tolerance, e.spread_source) for n, e in entries.items()} == {
        "ttft_s.p50": (noise.FLOOR, "prior"), "tpot_s.p50": (0.25, "prior"),
        "e2el_s.p50": (noise.FLOOR, "prior"),
        "ttft_s.mean": (0.1, None)}  # no CPU prior: the tolerance band, as before
    assert entries["tpot_s.p50"].spread == pytest.approx(0.09 * 0.01)
    declared = references.updated_entries(now, ref, 0.5, gated, kind=noise.CPU)
    assert {e.tolerance for e in declared.values()} == {0.5}


def test_a_noisier_session_widens_the_band_with_its_own_repeats():
    entry = BaselineEntry(value=100.0, spread=0.5, direction="higher", tolerance=noise.FLOOR, n=1,
                          spread_source="prior")
    verdict = check_metric("output_throughput_tok_s", Estimate(88.0, 5.0, 3), entry)
    assert verdict.status == Status.PASS
    assert verdict.message == ("output_throughput_tok_s within the band: 88.00 tok/s vs "
                               "baseline 100 tok/s (-12.0%, band -13.0% by 3 x run-to-run spread "
                               "5.0% (this run's repeats))")
    assert check_metric("output_throughput_tok_s", Estimate(88.0, 0.0, 1), entry).failed


def test_a_wide_band_is_a_factor_both_ways():
    entry = BaselineEntry(value=1000.0, spread=500.0, direction="higher", tolerance=noise.FLOOR,
                          n=1, spread_source="prior")  # 3 x 50%: 2.5x
    assert check_metric("output_throughput_tok_s", 401.0, entry).status == Status.PASS
    assert check_metric("output_throughput_tok_s", 399.0, entry).status == Status.REGRESSION
    assert check_metric("output_throughput_tok_s", 2499.0, entry).status == Status.PASS
    zero = BaselineEntry(value=0.0, spread=0.5, direction="lower", tolerance=noise.FLOOR, n=1,
                         spread_source="repeats")
    assert check_metric("server:preemptions", 1.5, zero).status == Status.PASS
    assert check_metric("server:preemptions", 1.6, zero).status == Status.REGRESSION


def test_two_noisy_metrics_are_one_line():
    entries = {"ttft_s.p50": BaselineEntry(value=0.1, spread=0.05, direction="lower",
                                           tolerance=noise.FLOOR, n=1, spread_source="history"),
               "tpot_s.p90": BaselineEntry(value=0.002, spread=0.0003, direction="lower",
                                           tolerance=noise.FLOOR, n=1, spread_source="prior"),
               "tpot_s.p50": BaselineEntry(value=0.002, spread=0.0001, direction="lower",
                                           tolerance=noise.FLOOR, n=1, spread_source="prior"),
               "e2el_s.p50": BaselineEntry(value=0.2, spread=0.1, direction="lower",
                                           tolerance=0.1, n=1)}  # old: always gated
    kept, noisy = noise.split_noisy(baselines.Baseline(entries))
    assert sorted(kept.metrics) == ["e2el_s.p50", "tpot_s.p50"]
    assert noise.noisy_line(noisy, noise.CPU) == (
        "tpot_s.p90, ttft_s.p50 not gated: run-to-run spreads 15.0% (prior for CPU TPOT p90), "
        "50.0% (history) make their bands 3 x spread = 45%, 150%, over the 30% a gate may have; "
        "name them in gate= to gate them")
    assert noise.split_noisy(baselines.Baseline(entries), ["ttft_s.p50"])[1].keys() == \
        {"tpot_s.p90"}


def test_the_source_is_stored_and_a_file_without_it_reads_as_before(tmp_path):
    path = tmp_path / "b.toml"
    baselines.update_baseline(path, "t", {
        "ttft_s.p50": BaselineEntry(value=0.2, spread=0.066, direction="lower", tolerance=0.02,
                                    n=1, spread_source="prior"),
        "ttft_s.p90": BaselineEntry(value=0.3, spread=0.0, direction="lower", tolerance=0.1,
                                    n=1)}, {})
    text = path.read_text()
    assert 'tolerance = 0.02\nspread_source = "prior"\n' in text
    assert text.count("spread_source") == 1
    metrics = baselines.load_baseline(path, "t").metrics
    assert (metrics["ttft_s.p50"].spread_source, metrics["ttft_s.p90"].spread_source) == \
        ("prior", None)
    path.write_text(text.replace('"prior"', '"guess"'))
    with pytest.raises(baselines.BaselineError) as excinfo:
        baselines.load_baseline(path, "t")
    assert str(excinfo.value) == (
        f'{path}: ["t"].metrics."ttft_s.p50": "spread_source" must be one of "repeats", '
        '"history", "prior", got \'guess\'; fix the entry or regenerate it with '
        "--llmperf-update-baselines")


def test_the_calibration_script_prints_the_bands_of_the_h200_reruns():
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "calibrate_noise.py"),
                           str(DATA), "--kind", "gpu"], capture_output=True, text=True,
                          check=True, cwd=REPO)
    lines = done.stdout.splitlines()
    assert lines[0] == "K = 3, floor = 2%, too noisy above a band of 30%; 2 runs, GPU priors"
    for row in ("| ttft_s.p50 | 99.0% | named only | 0/8 | 0/8 | 0/8 |",
                "| tpot_s.p50 | 2.0% | yes | 0/8 | 8/8 | 8/8 |",
                "| output_throughput_tok_s | 2.0% | yes | 0/8 | 8/8 | 8/8 |",
                "| engine_start_s | 96.0% | named only | 0/2 | 0/2 | 0/2 |",
                "| ttft_s.p50 | 4 | 32.70% | test_profiles[classification] | 33.00% |"):
        assert row in lines
