"""Interference probes through the plugin, against the mock server behind --llmperf-endpoint: the
probes are a measurement of their own ("<test>@probes": a row, a run-file entry and a baseline
table), the load's metrics leave them out, and each is gated apart. The real engine's run is
suites/test_cpu_requests.py's."""

from __future__ import annotations

import json

import httpcore  # noqa: F401  (imported before any in-process run: test_deployment_plugin.py)
import pytest
import tomlkit

from tests.conftest import REPO
from tests.plugin.mock_endpoint import CALM, mock_fixture

ARCH = REPO / "suites" / "models" / "tiny-llama-arch"
SUITE = """
import pytest
from pytest_llmperf import Engine, Workload

# The mock's TPOT is its per-token delay; its TTFT, a millisecond or two, is this machine's
# noise: TPOT alone is gated.
pytestmark = [pytest.mark.engine(Engine(model={model!r})),
              pytest.mark.llmperf(gate=["tpot_s.p50"])]
LOAD = Workload.fixed(input_tokens=64, output_tokens=16, num_requests=24, rate=12.0, seed=4)

def test_probed(llmperf):
    result = llmperf.run(LOAD.with_probes(rate=4.0, input_tokens=4, output_tokens=6))
    assert result.probes is not None
    assert result.completed == 24 and result.probes.completed == 11
    assert result.output_tokens == 24 * 16 and result.probes.output_tokens == 11 * 6
"""
TABLE = "baselines/cpu/test_suite.toml"


mock = mock_fixture(0.02)  # TTFT ~20 ms: a client check whose lag limit a busy CI allows


def run(pytester: pytest.Pytester, url: str, *args: str) -> tuple[pytest.RunResult, dict]:
    result = pytester.runpytest("-p", "no:cacheprovider", "-rfE", "--llmperf-endpoint", url,
                                "--llmperf-hardware", "cpu", "--llmperf-model", "mock",
                                "--llmperf-json", "run.json", *CALM, *args)
    document = json.loads((pytester.path / "run.json").read_text())
    return result, {entry["key"]: entry for entry in document["llmperf"]["results"]}


def test_probes_are_a_measurement_of_their_own_gated_apart(pytester, mock):
    pytester.makepyfile(test_suite=SUITE.format(model=str(ARCH)))
    first, entries = run(pytester, mock.url, "--llmperf-update-baselines")
    first.assert_outcomes(passed=1)
    assert sorted(entries) == ["test_probed", "test_probed@probes"]
    assert entries["test_probed"]["metrics"]["output_tokens"]["value"] == 24 * 16
    assert entries["test_probed@probes"]["metrics"]["output_tokens"]["value"] == 11 * 6
    table = tomlkit.parse((pytester.path / TABLE).read_text())
    assert sorted(table) == ["test_probed", "test_probed@probes"]

    # The probes' table says they were 5x faster: only their row fails, naming its table.
    table["test_probed@probes"]["metrics"]["tpot_s.p50"]["value"] /= 5
    (pytester.path / TABLE).write_text(tomlkit.dumps(table))
    second, entries = run(pytester, mock.url)
    second.assert_outcomes(failed=1)
    second.stdout.re_match_lines([
        r"^tpot_s\.p50 regressed: .* \[baselines/cpu/test_suite\.toml :: "
        r"\"test_probed@probes\"\].*$"])
    assert entries["test_probed"]["status"] == "pass"
    assert entries["test_probed@probes"]["status"] == "regression"


def test_probes_beside_a_closed_loop_are_one_line(pytester, mock):
    pytester.makepyfile(test_suite=SUITE.format(model=str(ARCH)).replace(
        "rate=12.0", "concurrency=4"))
    result = pytester.runpytest("-p", "no:cacheprovider", "--llmperf-endpoint", mock.url,
                                "--llmperf-hardware", "cpu", "--llmperf-model", "mock", *CALM)
    result.assert_outcomes(failed=1)  # where the test wrote the workload
    result.stdout.fnmatch_lines([
        "*Workload.with_probes: probes need an open-loop load without a concurrency cap (rate=, "
        "ramp= or a trace), got concurrency 4: a closed loop's queue would hold the probes too"])
