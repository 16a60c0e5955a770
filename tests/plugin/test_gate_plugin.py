"""The gate as users meet it: pytester runs suites whose measurements are injected.

The measurement itself is replaced (conftest patches the session's `run`) so each test can say
exactly which numbers it produced; everything after it (SLOs, baselines, update, A/B compare,
messages, summary) is the real plugin. The real engine path is in tests/integration.
"""

from __future__ import annotations

import json
import re
import tomllib

import pytest

from tests.plugin.gate_suite import CONFTEST, SUITE
from tests.plugin.lines import assert_lines


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    for name in ("a", "b", "slo"):
        monkeypatch.setenv(f"FAKE_{name}", "0.1,0.01")
    return pytester


def test_no_baseline_passes_with_a_note(suite):
    result = suite.runpytest("-v")  # -v: a note per test, not one line folding all three
    result.assert_outcomes(passed=3)
    assert_lines(result, *[
        # The runner shape: this CPU's model, generation and cores (verdict/shapes.py).
        '*test_suite.py::test_a: no baseline for *, * cores: baselines/cpu/test_suite.toml '
        'has no ["test_a"]',
    ])


def test_require_baseline_fails_each_test_with_the_command(suite):
    result = suite.runpytest("--llmperf-require-baseline")
    result.assert_outcomes(failed=3)
    assert_lines(result, *[
        '*no baseline for *, * cores: baselines/cpu/test_suite.toml has no ["test_a"] '
        "(--llmperf-require-baseline); make this runner shape's first baselines with: "
        'llmperf bootstrap-baselines --marker cpu test_suite.py',
    ])


def test_injected_regression_fails_exactly_the_affected_test(suite, monkeypatch):
    suite.runpytest("--llmperf-update-baselines").assert_outcomes(passed=3)
    assert (suite.path / "baselines/cpu/test_suite.toml").is_file()
    monkeypatch.setenv("FAKE_b", "0.2,0.01")  # test_b's TTFT doubles
    result = suite.runpytest("-rfw", "-v")  # -v: the summary shows whole test ids
    result.assert_outcomes(passed=2, failed=1)
    assert_lines(result, *[
        "ttft_s.p50 regressed: 200.0 ms vs baseline 100.0 ms (+100.0%, allowed +24.0% by 3 x "
        "run-to-run spread 8.0% (prior), lower is better) "
        '[*baselines/cpu/test_suite.toml :: "test_b"]; if this change is intended, '
        'update with: pytest --llmperf-update-baselines "test_suite.py::test_b"',
        "ttft_s.p90 regressed: 200.0 ms vs baseline 100.0 ms (+100.0%, allowed +19.5% by 3 x "
        "run-to-run spread 6.5% (prior), lower is better) "
        '[*baselines/cpu/test_suite.toml :: "test_b"]; *',
    ])
    assert_lines(result, *["FAILED test_suite.py::test_b*"])
    assert_lines(result, *["*test_suite.py::test_b * REGRESSION"])


def test_improvement_warns_that_the_baseline_is_stale(suite, monkeypatch):
    suite.runpytest("--llmperf-update-baselines").assert_outcomes(passed=3)
    monkeypatch.setenv("FAKE_a", "0.05,0.01")
    result = suite.runpytest("-rfw")
    # TTFT halves: its p50 and p90, E2EL and throughput all move beyond their bands.
    result.assert_outcomes(passed=3, warnings=4)
    assert_lines(result, *[
        "*StaleBaselineWarning: ttft_s.p50 improved beyond the band: 50.0 ms vs baseline 100.0 ms "
        "(-50.0%, band -19.4% by 3 x run-to-run spread 8.0% (prior)) "
        '[*test_suite.toml :: "test_a"]: baseline is stale; refresh with: '
        'pytest --llmperf-update-baselines "test_suite.py::test_a"',
    ])


def test_missed_slo_fails_and_does_not_update_the_baseline(suite, monkeypatch):
    monkeypatch.setenv("FAKE_slo", "0.2,0.01")
    result = suite.runpytest("--llmperf-update-baselines")
    result.assert_outcomes(passed=2, failed=1)
    assert_lines(result, *["ttft_s.p50 missed its target: 200.0 ms, target <= 150.0 ms"])
    text = (suite.path / "baselines/cpu/test_suite.toml").read_text()
    assert "test_a" in text and "test_slo" not in text


def test_malformed_baseline_names_file_and_key_and_keeps_the_result(suite):
    suite.runpytest("--llmperf-update-baselines").assert_outcomes(passed=3)
    path = suite.path / "baselines/cpu/test_suite.toml"
    path.write_text(path.read_text().replace('direction = "lower"', 'direction = "down"', 1))
    result = suite.runpytest("--llmperf-json", "out.json")
    result.assert_outcomes(passed=2, failed=1)
    assert_lines(result, 'baselines/cpu/test_suite.toml: ["test_a"].metrics."e2el_s.p50": '
                         '"direction" must be "lower" or "higher", got \'down\'; fix the entry or '
                         "regenerate it with --llmperf-update-baselines")
    assert '"test_a"' in (suite.path / "out.json").read_text(), "the measurement is kept"


def test_a_baseline_that_cannot_be_written_fails_its_tests_not_the_session(suite):
    suite.runpytest("--llmperf-update-baselines").assert_outcomes(passed=3)
    path = suite.path / "baselines/cpu/test_suite.toml"
    path.write_text("this is [not toml\n")
    result = suite.runpytest("--llmperf-update-baselines", "--llmperf-json", "out.json")
    result.assert_outcomes(failed=3)
    assert "INTERNALERROR" not in result.stdout.str()
    assert_lines(result, "baseline not updated: *baselines/cpu/test_suite.toml: *")
    assert '"test_a"' in (suite.path / "out.json").read_text(), "the measurement is kept"


def test_baseline_for_another_engine_is_one_clear_line(suite):
    suite.runpytest("--llmperf-update-baselines").assert_outcomes(passed=3)
    (suite.path / "test_suite.py").write_text(SUITE.replace("max_num_seqs=32", "max_num_seqs=1"))
    result = suite.runpytest()
    result.assert_outcomes(failed=3)
    assert_lines(result, *[
        '*test_suite.toml: ["test_a"]: baseline was measured with another engine configuration '
        "(max_num_seqs 32 -> 1); if the change is intended, regenerate it with "
        "--llmperf-update-baselines",
    ])


def test_unknown_slo_metric_is_one_line(suite):
    (suite.path / "test_suite.py").write_text(SUITE.replace('"ttft_s.p50": 0.15',
                                                            '"ttft.p50": 0.15'))
    result = suite.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    assert_lines(result, *["SLO: *ttft.p50*"])


def test_save_then_compare_gates_against_the_saved_run(suite, monkeypatch):
    suite.runpytest("--llmperf-save", "before").assert_outcomes(passed=3)
    assert (suite.path / ".llmperf/runs/before.json").is_file()
    assert suite.runpytest("--llmperf-compare", "before").ret == 0
    monkeypatch.setenv("FAKE_a", "0.1,0.02")  # TPOT doubles after the "upgrade"
    result = suite.runpytest("--llmperf-compare", "before")
    result.assert_outcomes(passed=2, failed=1)
    assert_lines(result, *["tpot_s.p50 regressed: 20.0 ms vs baseline 10.0 ms *"])


def test_compare_with_a_missing_saved_run_is_one_line(suite):
    result = suite.runpytest("--llmperf-compare", "nope")
    result.assert_outcomes(failed=3)
    assert_lines(result, *["*nope*"])


def test_baseline_from_other_hardware_is_a_note_not_a_verdict(suite, monkeypatch):
    suite.runpytest("--llmperf-update-baselines").assert_outcomes(passed=3)
    path = suite.path / "baselines/cpu/test_suite.toml"
    path.write_text(path.read_text().replace("cpu_cores = 2", "cpu_cores = 64"))
    monkeypatch.setenv("FAKE_b", "0.5,0.01")  # would be a regression on the same machine
    result = suite.runpytest("-v")  # -v: a note per test, not one line folding all three
    result.assert_outcomes(passed=3)
    assert_lines(result, '*test_suite.py::test_b: baselines/cpu/test_suite.toml: ["test_b"]: '
                         "baseline is from other hardware (cpu_cores 64 -> 2); not gated")


def test_a_test_can_name_the_metrics_its_baseline_gates(suite, monkeypatch):
    (suite.path / "test_suite.py").write_text(SUITE.replace(
        "def test_a(llmperf):", '@pytest.mark.llmperf(gate=("tpot_s.p50",))\ndef test_a(llmperf):'))
    suite.runpytest("--llmperf-update-baselines").assert_outcomes(passed=3)
    text = (suite.path / "baselines/cpu/test_suite.toml").read_text()
    table_a = text[text.index("[test_a.metrics"):text.index("[test_a.provenance")]
    assert table_a.count(".metrics.") == 1 and "tpot_s.p50" in table_a
    monkeypatch.setenv("FAKE_a", "0.3,0.01")  # TTFT triples: not gated for test_a
    suite.runpytest().assert_outcomes(passed=3)
    monkeypatch.setenv("FAKE_a", "0.1,0.03")  # TPOT triples: gated
    result = suite.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    assert_lines(result, "tpot_s.p50 regressed: 30.0 ms vs baseline 10.0 ms *")


def test_the_run_file_records_the_gate_each_test_declared(suite):
    (suite.path / "test_suite.py").write_text(SUITE.replace(
        "def test_a(llmperf):",
        '@pytest.mark.llmperf(tolerance=0.5, gate=("tpot_s.p50",))\ndef test_a(llmperf):'))
    suite.runpytest("--llmperf-json", "out.json").assert_outcomes(passed=3)
    results = json.loads((suite.path / "out.json").read_text())["llmperf"]["results"]
    gates = {result["key"]: result["gate"] for result in results}
    assert gates["test_a"] == {"tolerance": 0.5, "metrics": ["tpot_s.p50"]}
    assert gates["test_b"] == {}  # left to the defaults


def test_an_unknown_gate_metric_is_one_line(suite):
    (suite.path / "test_suite.py").write_text(SUITE.replace(
        "def test_a(llmperf):", '@pytest.mark.llmperf(gate=("tpot.p50",))\ndef test_a(llmperf):'))
    result = suite.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    assert_lines(result, "@pytest.mark.llmperf(gate=...): *tpot.p50*")


def test_marker_settings_merge_across_module_class_and_function(suite):
    """A function's own `slo=` keeps the module's `tolerance=` and `gate=`; the nearest marker
    wins per key (here the class's tolerance over the module's)."""
    (suite.path / "test_suite.py").write_text(SUITE.replace(
        'pytestmark = pytest.mark.engine(Engine(model="m", max_num_seqs=32))',
        'pytestmark = [pytest.mark.engine(Engine(model="m", max_num_seqs=32)),\n'
        '              pytest.mark.llmperf(tolerance=0.5, gate=("tpot_s.p50",))]',
    ).replace("def test_b(llmperf):\n    llmperf.run(wl(\"b\"))",
              "class TestB:\n    pytestmark = pytest.mark.llmperf(tolerance=0.25)\n"
              "    @pytest.mark.llmperf(slo=SLO(max={'ttft_s.p50': 0.15}))\n"
              "    def test_b(self, llmperf):\n        llmperf.run(wl(\"b\"))"))
    suite.runpytest("--llmperf-json", "out.json").assert_outcomes(passed=3)
    results = json.loads((suite.path / "out.json").read_text())["llmperf"]["results"]
    gates = {result["key"]: result["gate"] for result in results}
    assert gates["test_a"] == {"tolerance": 0.5, "metrics": ["tpot_s.p50"]}
    assert gates["TestB::test_b"] == {"tolerance": 0.25, "metrics": ["tpot_s.p50"]}
    assert gates["test_slo"] == {"tolerance": 0.5, "metrics": ["tpot_s.p50"]}


def joined(result) -> str:
    """The output with the summary's wrapped lines joined back (notes wrap at 120 columns)."""
    return re.sub(r"\n\s+", " ", result.stdout.str())


def test_a_first_run_records_this_machines_baseline_and_the_next_run_gates(suite, monkeypatch):
    first = suite.runpytest("-v")
    first.assert_outcomes(passed=3)
    local = r"\.llmperf/baselines/cpu-[0-9a-f]{10}/cpu/test_suite\.toml"
    assert re.search(r"test_suite\.py::test_a: this machine's first-run baseline recorded: "
                     rf'{local} :: "test_a"; the next run here gates against it', joined(first))
    assert not (suite.path / "baselines").exists()  # committed baselines only on request
    # One run with the CPU prior: this machine's noise is unmeasured, so only large changes
    # fail (docs/gate.md): TTFT doubled passes, tripled fails.
    monkeypatch.setenv("FAKE_b", "0.2,0.01")
    suite.runpytest("-v").assert_outcomes(passed=3)
    monkeypatch.setenv("FAKE_b", "0.3,0.01")
    second = suite.runpytest("-v")
    second.assert_outcomes(passed=2, failed=1)
    text = joined(second)
    assert re.search(r"ttft_s\.p50 regressed: 300\.0 ms vs baseline 100\.0 ms \(\+200\.0%, "
                     r"allowed \+150\.0% while this machine's run-to-run spread is unmeasured "
                     r"\(one run, a prior from elsewhere; measure it: llmperf bootstrap-baselines\),"
                     rf' lower is better\) \[{local} :: "test_b"\]', text)
    assert re.search(r"test_suite\.py::test_a: gated against this machine's first-run baseline "
                     rf'{local} :: "test_a" \(no committed baseline for this hardware\); commit '
                     r'one with: pytest --llmperf-update-baselines "test_suite\.py::test_a"', text)
    assert not (suite.path / "baselines").exists()


def test_the_run_file_keeps_each_capacity_probes_slo_and_outcome(suite):
    """`llmperf plot` draws the probes against the SLO from these fields."""
    (suite.path / "test_suite.py").write_text(SUITE + '''
def test_capacity(llmperf):
    probe = Workload.fixed(input_tokens=8, output_tokens=10, num_requests=20, rate=1.0,
                           name="probe")
    llmperf.capacity(probe, SLO(max={"ttft_s.p50": 0.15}), low=1.0, high=2.0, max_runs=3)
''')
    suite.runpytest("--llmperf-json", "out.json", "-k", "capacity").assert_outcomes(passed=1)
    results = json.loads((suite.path / "out.json").read_text())["llmperf"]["results"]
    probes = [result for result in results if "capacity" in result]
    assert len(probes) == 3  # low, high, then doubled until out of runs (the fake always meets it)
    assert [probe["capacity"] for probe in probes] == [
        {"slo": {"max": {"ttft_s.p50": 0.15}, "min": {}}, "passed": True,
         "reason": "met every target"}] * 3



NOT_GATED = ("tpot_s.p90 not gated: run-to-run spread 15.0% (prior for CPU TPOT p90) makes its "
             "band 3 x spread = 45%, over the 30% a gate may have; name it in gate= to gate it")


def halve_in_baseline(suite, test: str, metric: str) -> None:
    """Halve `metric`'s value and spread in `test`'s baseline: the next run measures it twice as
    bad (the injected requests' TPOT p90 cannot move without their p50)."""
    path = suite.path / "baselines/cpu/test_suite.toml"
    table = tomllib.loads(path.read_text())
    entry = table[test]["metrics"][metric]
    old = f'value = {entry["value"]!r}\nspread = {entry["spread"]!r}\n'
    new = f'value = {entry["value"] / 2!r}\nspread = {entry["spread"] / 2!r}\n'
    text = path.read_text()
    head = text.index(f'[{test}.metrics."{metric}"]')
    path.write_text(text[:head] + text[head:].replace(old, new, 1))


def test_a_metric_too_noisy_to_gate_is_one_line_per_test_unless_the_test_names_it(suite):
    (suite.path / "test_suite.py").write_text(SUITE.replace(
        "def test_b(llmperf):",
        '@pytest.mark.llmperf(gate=("tpot_s.p90", "tpot_s.p50"))\ndef test_b(llmperf):'))
    suite.runpytest("--llmperf-update-baselines").assert_outcomes(passed=3)
    table = tomllib.loads((suite.path / "baselines/cpu/test_suite.toml").read_text())
    stored = table["test_a"]["metrics"]["tpot_s.p90"]
    assert (stored["spread_source"], stored["tolerance"]) == ("prior", 0.02)
    assert stored["spread"] == pytest.approx(0.15 * stored["value"], rel=1e-5)
    for test in ("test_a", "test_b"):
        halve_in_baseline(suite, test, "tpot_s.p90")
    result = suite.runpytest("-v")  # -v: one note per test, not one folding them
    result.assert_outcomes(passed=2, failed=1)  # test_b named it: gated, with its wide band
    assert_lines(result, f"test_suite.py::test_a: {NOT_GATED}",
                 f"test_suite.py::test_slo: {NOT_GATED}")
    assert NOT_GATED not in joined_lines(result, "test_suite.py::test_b: ")
    assert_lines(result, "tpot_s.p90 regressed: 10.0 ms vs baseline 5.0 ms (+100.0%, allowed "
                         "+45.0% by 3 x run-to-run spread 15.0% (prior), lower is better) "
                         '[baselines/cpu/test_suite.toml :: "test_b"]; *')
    folded = suite.runpytest()
    assert_lines(folded, f"2 tests: {NOT_GATED[:60]}*")


def joined_lines(result, prefix: str) -> str:
    return "\n".join(line for line in joined(result).splitlines() if line.startswith(prefix))


START_CONFTEST = CONFTEST.replace(
    "compute_metrics(fake_records(ttft, tpot), limits)",
    "compute_metrics(fake_records(ttft, tpot), limits,\n"
    "                                    engine_start_s=float(os.environ['FAKE_START']))")
START_SUITE = SUITE.replace("def test_a(llmperf):",
                            '@pytest.mark.llmperf(gate=("engine_start_s", "tpot_s.p50"))\n'
                            "def test_a(llmperf):")


def test_the_engines_start_is_gated_where_a_test_names_it(pytester, monkeypatch):
    assert START_CONFTEST != CONFTEST
    pytester.makeconftest(START_CONFTEST)
    pytester.makepyfile(test_suite=START_SUITE)
    monkeypatch.setenv("FAKE_START", "20.0")  # seconds to healthy
    pytester.runpytest("--llmperf-update-baselines").assert_outcomes(passed=3)
    table = tomllib.loads((pytester.path / "baselines/cpu/test_suite.toml").read_text())
    assert table["test_a"]["metrics"]["engine_start_s"]["value"] == 20.0
    assert "engine_start_s" not in table["test_b"]["metrics"]  # never gated by default
    monkeypatch.setenv("FAKE_START", "25.0")  # inside 3 x the CPU prior's 9.9%
    pytester.runpytest().assert_outcomes(passed=3)
    monkeypatch.setenv("FAKE_START", "40.0")
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    assert_lines(result, "engine_start_s regressed: 40.000 s vs baseline 20.000 s (+100.0%, "
                         "allowed +29.7% by 3 x run-to-run spread 9.9% (prior), lower is better) "
                         '[baselines/cpu/test_suite.toml :: "test_a"]; if this change is '
                         'intended, update with: pytest --llmperf-update-baselines '
                         '"test_suite.py::test_a"')
    assert_lines(result, "FAILED test_suite.py::test_a*")


def test_naming_the_start_of_an_engine_this_session_did_not_start_is_one_line(suite):
    (suite.path / "test_suite.py").write_text(START_SUITE)  # its results carry no start time
    result = suite.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    assert_lines(result, "@pytest.mark.llmperf(gate=...): gate names unknown metric "
                         "'engine_start_s' (this session did not start the engine "
                         "(--llmperf-endpoint): no start time)")


def test_a_baseline_from_history_stores_the_spread_of_its_runs(suite, monkeypatch):
    for tpot in ("0.0100", "0.0104", "0.0098"):  # three sessions recorded in the history store
        monkeypatch.setenv("FAKE_a", f"0.1,{tpot}")
        suite.runpytest("-k", "test_a").assert_outcomes(passed=1)
    monkeypatch.setenv("FAKE_a", "0.1,0.0101")
    suite.runpytest("-k", "test_a", "--llmperf-update-baselines", "--llmperf-from-history",
                    "4").assert_outcomes(passed=1)
    entry = tomllib.loads((suite.path / "baselines/cpu/test_suite.toml").read_text())[
        "test_a"]["metrics"]["tpot_s.p50"]
    assert (entry["value"], entry["n"], entry["spread_source"]) == (0.01005, 4, "history")
    assert entry["spread"] == pytest.approx(0.00015 * 1.4826, rel=1e-5)  # MAD 0.15 ms
    monkeypatch.setenv("FAKE_a", "0.1,0.0103")  # +2.5%: over the 2% floor, inside 3 x 2.2%
    suite.runpytest("-k", "test_a").assert_outcomes(passed=1)
    monkeypatch.setenv("FAKE_a", "0.1,0.0108")
    result = suite.runpytest("-k", "test_a")
    result.assert_outcomes(failed=1)
    assert_lines(result, "tpot_s.p50 regressed: 10.8 ms vs baseline 10.1 ms (+7.5%, allowed "
                         "+6.6% by 3 x run-to-run spread 2.2% (history), lower is better) *")
