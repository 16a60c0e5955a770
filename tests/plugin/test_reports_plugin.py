"""The reports as a user meets them: pytester runs a suite whose measurements are injected (the
gate plugin tests' conftest), and we read the terminal, the Markdown, the JUnit XML and the JSON.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from pytest_llmperf.metrics import roofline
from pytest_llmperf.reports import plots
from tests.plugin.gate_suite import CONFTEST, SUITE

LONG = "test_a_test_whose_name_says_a_lot_about_what_it_measures_and_why"


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE, test_other=SUITE.replace("def test_a(", f"def {LONG}("))
    for name in ("a", "b", "slo"):
        monkeypatch.setenv(f"FAKE_{name}", "0.1,0.01")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return pytester


def llmperf_section(result) -> list[str]:
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "= llmperf =" in line) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("="))
    kept = [line for line in lines[start:end] if line]
    # From the table on: a run without committed tables opens with a headline (headline.py).
    table = next((i for i, line in enumerate(kept) if line.startswith("test ")), 0)
    return kept[table:]


def unwrapped(result) -> list[str]:
    """stdout with each line the summary wrapped at 120 columns joined again: whether a line
    with a path wraps depends on how long pytest's temporary directory is (longer under -n)."""
    joined: list[str] = []
    for line in result.stdout.lines:
        if line.startswith("    ") and joined and not line.strip().startswith(("test", "-")):
            joined[-1] += " " + line.strip()
        else:
            joined.append(line)
    return joined


def test_the_summary_fits_120_columns_and_v_shows_everything(suite):
    result = suite.runpytest("--llmperf-cost-per-hour", "0.1")
    section = llmperf_section(result)
    assert max(len(line) for line in section) <= 120, "\n".join(section)
    # Before the table, what gated instead of committed tables (none here), in its first line.
    first = result.stdout.lines.index(next(t for t in result.stdout.lines if "= llmperf =" in t))
    assert [line for line in result.stdout.lines[first + 1:first + 4] if line][0] == (
        "no committed baseline in baselines/ for this machine's hardware for 6 of 6 "
        "measurements: 6 not gated (their first-run")
    # The files in the order they ran (no verdict is worse than another), each test under its
    # file's name, the long one whole: the columns that did not fit beside it gave way.
    assert section[0].split() == ["test", "ok", "fail", "out", "tok/s", "TTFT", "p50", "TPOT",
                                  "p50", "verdict"]
    assert section[2] == "test_other.py"
    assert section[3] == (f"  {LONG}  20     0       52.6     100.0     10.00  no baseline")
    assert section[6] == "test_suite.py"
    assert any(line.startswith("6 tests: no baseline for ") for line in section)
    # The first run records this machine's own baselines; the next runs gate against them.
    full = llmperf_section(suite.runpytest("-v", "--llmperf-cost-per-hour", "0.1"))
    assert full[0].split() == [
        "test", "engine", "workload", "ok", "fail", "out", "tok/s", "req/s", "good/s", "good%",
        "TTFT", "p50", "TTFT", "p99", "TPOT", "p50", "ITL", "p50", "E2EL", "p50", "queue", "p99", "KV", "max%",
        "hit%", "$/1M", "out", "$/1M", "tot", "detects", "verdict"]
    assert any(line.startswith(f"test_other.py::{LONG} ") for line in full)
    assert sum("gated against this machine's first-run baseline" in line for line in full) == 6
    # (The store off: each run would add its own "history: run N recorded" line.)
    assert llmperf_section(suite.runpytest("--llmperf-summary", "full", "--llmperf-history",
                                           "off")) == \
        llmperf_section(suite.runpytest("-v", "--llmperf-history", "off"))


def test_markdown_file_and_github_step_summary(suite, monkeypatch):
    step = suite.path / "step.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    monkeypatch.setenv("FAKE_slo", "0.2,0.01")  # misses its SLO in both files
    result = suite.runpytest("--llmperf-markdown", "reports/r.md")
    result.assert_outcomes(passed=4, failed=2)
    text = (suite.path / "reports/r.md").read_text()
    assert text.startswith("## pytest-llmperf: **2 failed**; **2 MISSED TARGET**, 4 no baseline\n")
    assert "**`test_other.py::test_slo`**\n\n```text\nttft_s.p50 missed its target: 200.0 ms, " \
           "target <= 150.0 ms\n```" in text
    assert "| `test_suite.py::test_slo` | m | slo x20 @ concurrency 1 | 20 | 0 | 34.5 |" in text
    assert "| hardware_class | `cpu` |" in text
    assert step.read_text() == "earlier step\n" + text, "appended, the same report"
    assert f"Markdown report written to {suite.path / 'reports/r.md'}" in unwrapped(result)
    assert f"Markdown report appended to {step}" in unwrapped(result)


def test_an_unwritable_markdown_path_is_one_line_before_any_test(suite):
    (suite.path / "afile").write_text("")
    result = suite.runpytest("--llmperf-markdown", "afile/r.md")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: pytest-llmperf: --llmperf-markdown afile/r.md: cannot create a file under "
        f"{suite.path / 'afile'}; choose a writable path"])


@pytest.mark.parametrize("option", ["--llmperf-json", "--llmperf-html"])
def test_an_unwritable_run_file_path_is_one_line_before_any_test(suite, option):
    (suite.path / "afile").write_text("")
    result = suite.runpytest(option, "afile/r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: pytest-llmperf: {option} afile/r.json: cannot create a file under "
        f"{suite.path / 'afile'}; choose a writable path"])


def test_a_run_file_the_disk_refuses_at_the_end_is_a_line_and_the_summary_stays(suite):
    """The path was fine at the start; by the end its folder is a file (a disk gone read-only
    or full reads the same): one line, and the summary is still printed."""
    suite.makeconftest(suite.path.joinpath("conftest.py").read_text() + """
@pytest.hookimpl(tryfirst=True)  # before the plugin's own, which writes the run file
def pytest_sessionfinish(session):
    import shutil
    shutil.rmtree("out", ignore_errors=True)
    open("out", "w").close()
""")
    (suite.path / "out").mkdir()
    result = suite.runpytest("--llmperf-json", "out/r.json")
    assert result.ret == pytest.ExitCode.OK
    line = (f"{suite.path / 'out' / 'r.json'}: results not written (File exists); choose a "
            "writable path")
    # However the summary wrapped the long path: the line's characters, in order.
    assert "".join(line.split()) in "".join(result.stdout.str().split())
    assert "test_suite.py" in result.stdout.str()  # the summary's table


def test_junit_xml_carries_each_tests_metrics_and_verdict(suite):
    suite.runpytest("--junitxml", "j.xml").assert_outcomes(passed=6)
    cases = {case.get("classname") + "::" + case.get("name"): case
             for case in ET.parse(suite.path / "j.xml").getroot().iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_suite::test_a"].iter("property")}
    assert props == {
        "verdict": "no baseline", "engine": "m seqs=32", "workload": "a x20 @ concurrency 1",
        "completed": "20", "failed": "0", "output_throughput_tok_s": "52.6316",
        "request_throughput_req_s": "5.26316", "ttft_s.p50": "0.1", "ttft_s.p99": "0.1",
        "tpot_s.p50": "0.01", "itl_s.p50": "0.01", "e2el_s.p50": "0.19", "queue_s.p99": "0",
        "total_throughput_tok_s": "94.7368",
        # the means the -v line of where the time went splits (metrics/phases.py)
        "ttft_s.mean": "0.1", "e2el_s.mean": "0.19", "itl_s.mean": "0.01"}


def test_html_page_with_its_plots_and_the_roofline_none_on_cpu(suite):
    result = suite.runpytest("--llmperf-html", "reports/r.html", "--llmperf-json", "r.json")
    result.assert_outcomes(passed=6)
    text = (suite.path / "reports/r.html").read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert "<p>6 no baseline</p>" in text
    assert ("<tr><td>no baseline</td><td>test_suite.py::test_a</td><td>m</td>"
            "<td>a x20 @ concurrency 1</td>") in text
    assert "<tr><th>hardware_class</th><td><code>cpu</code></td></tr>" in text
    if plots.available():  # the latency distributions, from the run file
        assert text.count('src="data:image/png;base64,') == 4
    else:
        assert plots.MISSING in text
    assert f"HTML report written to {suite.path / 'reports/r.html'}" in unwrapped(result)
    [first, *_] = json.loads((suite.path / "r.json").read_text())["llmperf"]["results"]
    assert first["roofline"] == {"none": roofline.NO_CPU}


def test_cost_per_hour_in_the_json_and_per_hardware_class_from_ini(suite):
    suite.runpytest("--llmperf-cost-per-hour", "0.36", "--llmperf-json", "r.json")
    [first, *_] = json.loads((suite.path / "r.json").read_text())["llmperf"]["results"]
    assert first["cost"] == {"usd_per_hour": 0.36, "price_usd_per_hour": 0.36,
                             "price_per": "machine", "engine_gpus": 1, "machine_gpus": 0,
                             "usd_per_1m_output_tok": pytest.approx(1.9, rel=1e-12),
                             "usd_per_1m_total_tok": pytest.approx(0.36 / 94.7368421 / 0.0036,
                                                                   rel=1e-6)}
    suite.makeini("[pytest]\nllmperf_cost_per_hour = h100=2.49, h200=3.5\n")
    section = llmperf_section(suite.runpytest("-v"))  # -v: every column there is
    assert "$/1M out" not in section[0] and "hit%" in section[0]
    assert ("no cost columns: --llmperf-cost-per-hour has no price for hardware class cpu (it has "
            "h100, h200); add cpu=USD") in section


@pytest.mark.parametrize("where", ["cli", "ini"])
def test_a_bad_price_is_one_line_naming_the_option(suite, where):
    if where == "ini":
        suite.makeini("[pytest]\nllmperf_cost_per_hour = two dollars\n")
        result = suite.runpytest()
        expected = "ERROR: pytest-llmperf: ini llmperf_cost_per_hour='two dollars': expected *"
    else:
        result = suite.runpytest("--llmperf-cost-per-hour", "-1")
        expected = "*error: argument --llmperf-cost-per-hour: expected US dollars per hour, *"
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])


def test_a_cpu_price_per_gpu_is_refused_in_one_line(suite):
    suite.makeini("[pytest]\nllmperf_cost_per_hour = h100=2.49/gpu, cpu=0.1/gpu\n")
    result = suite.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: pytest-llmperf: ini llmperf_cost_per_hour='h100=2.49/gpu, cpu=0.1/gpu': "
        "cpu=0.1/gpu: hardware class cpu has no GPUs; price the machine (cpu=0.1) or one engine "
        "(cpu=0.1/engine)"])


# The injected results carry the session's fingerprint, as measured ones do.
GPU_CONFTEST = CONFTEST.replace("records=())",
                               "records=(), fingerprint=session.ledger.fingerprint.to_dict())")


def test_on_gpus_an_engine_pays_its_share_and_shows_output_per_gpu(pytester, monkeypatch):
    # A fake 8-GPU H100 machine (the hardware override): the GPU path, checked on the CPU.
    pytester.makeconftest(GPU_CONFTEST)
    pytester.makepyfile(test_suite=SUITE.replace("max_num_seqs=32", "tensor_parallel_size=2"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    result = pytester.runpytest("-v", "--llmperf-hardware", "h100:8", "--llmperf-cost-per-hour",
                                "2.4", "--llmperf-json", "r.json")
    result.assert_outcomes(passed=3)
    section = llmperf_section(result)
    assert section[0].split()[3:8] == ["ok", "fail", "out", "tok/s", "out/GPU"]
    assert "engine m = m tp=2; cost 0.6 USD/h: 2 of 8 GPUs of a 2.4 USD/h machine" in section
    [first, *_] = json.loads((pytester.path / "r.json").read_text())["llmperf"]["results"]
    assert first["per_gpu"] == {"gpus": 2,
                                "output_throughput_tok_s_per_gpu": pytest.approx(52.6316 / 2,
                                                                                 rel=1e-5)}
    assert (first["cost"]["usd_per_hour"], first["cost"]["machine_gpus"]) == (0.6, 8)


# Every other request takes twice the TTFT: under a 150 ms TTFT limit, half of them are good.
ALTERNATING = CONFTEST.replace("chunks = [t + ttft + k * tpot", "chunks = [t + ttft * (1 + i % 2) + k * tpot")
GOODPUT_SUITE = '''
import pytest
from pytest_llmperf import Engine, Workload
from pytest_llmperf.verdict.gate import SLO

pytestmark = pytest.mark.engine(Engine(model="m"))
WORKLOAD = Workload.fixed(input_tokens=8, output_tokens=10, num_requests=20, concurrency=1,
                          name="a")

@pytest.mark.llmperf(slo=SLO(max={"ttft_s.p50": 0.15}, min={"goodput_share": 0.9}))
def test_attainment(llmperf):
    llmperf.run(WORKLOAD)

@pytest.mark.llmperf(slo=SLO(max={"ttft_s.p99": 0.25}), gate=("goodput_req_s",))
def test_gated(llmperf):
    llmperf.run(WORKLOAD)
'''


def test_goodput_with_an_slo_is_reported_and_gated_like_any_metric(pytester, monkeypatch):
    assert ALTERNATING != CONFTEST
    pytester.makeconftest(ALTERNATING)
    pytester.makepyfile(test_goodput=GOODPUT_SUITE)
    monkeypatch.setenv("FAKE_a", "0.1,0.01")
    result = pytester.runpytest("--llmperf-update-baselines", "--llmperf-json", "r.json")
    # 10 of 20 requests within 150 ms: a 50% share misses the 90% target.
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*goodput_share missed its target: 0.5, target >= 0.9"])
    section = llmperf_section(result)
    assert section[0].split() == [
        "test", "ok", "fail", "out", "tok/s", "req/s", "good/s", "good%", "TTFT", "p50", "TTFT",
        "p99", "TPOT", "p50", "E2EL", "p50", "verdict"]
    assert section[3].split() == ["test_attainment", "20", "0", "41.7", "4.17", "2.08", "50",
                                  "150.0", "200.0", "10.00", "240", "MISSED", "TARGET"]
    results = json.loads((pytester.path / "r.json").read_text())["llmperf"]["results"]
    metrics = {r["key"]: r["metrics"] for r in results}
    # 10 good requests in 4.8 s (10 x 0.19 s + 10 x 0.29 s, one after another).
    assert metrics["test_attainment"]["goodput_req_s"]["value"] == pytest.approx(10 / 4.8)
    assert metrics["test_attainment"]["goodput_share"] == {
        "value": 0.5, "spread": 0.0, "n": 1, "direction": "higher"}
    assert metrics["test_gated"]["goodput_req_s"]["value"] == pytest.approx(20 / 4.8)
    monkeypatch.setenv("FAKE_a", "0.1,0.05")  # TPOT x5: the same good requests, in more time
    result = pytester.runpytest("-v")
    result.assert_outcomes(failed=2)  # test_attainment still misses its target
    # All 20 still within 250 ms TTFT, now in 12 s: 1.67 good requests/s.
    result.stdout.fnmatch_lines(["goodput_req_s regressed: 1.67 req/s vs baseline 4.17 req/s *"])
