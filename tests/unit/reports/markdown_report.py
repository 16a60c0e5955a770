"""A small report for the Markdown and HTML reports' tests: two rows (one a regression), an
engine line, another result, a note, a failure, the fingerprint and provenance."""

from __future__ import annotations

from pytest_llmperf.reports.markdown import Report
from pytest_llmperf.verdict.status import Status


def status_value(verdict: str) -> str:
    """A row's status from the verdict column's words ("" for none)."""
    return Status.from_summary(verdict).value if verdict else ""


def row(test_id, verdict, **values):
    base = {"completed": 4.0, "failed": 0.0, "output_throughput_tok_s": 40.0,
            "ttft_s.p50": 0.125, "usd_per_1m_output_tok": None}
    return {"test_id": test_id, "engine": "tiny eager=True", "workload": "w x4 | c1",
            "status": status_value(verdict), "values": {**base, **values}}


REPORT = Report(
    rows=[row("s/t.py::test_a", "pass"), row("s/t.py::test_b[x]", "REGRESSION")],
    engines=["engine tiny = tiny eager=True; healthy after 2.0 s"],
    others=["s/t.py::test_c: slo_capacity_req_s = 4.00 (3 engine runs)  pass"],
    notes=["2 tests: no baseline for this hardware: b/*.toml has no ... (-v lists each)"],
    failures=[("s/t.py::test_b[x]", "ttft_s.p50 regressed: 250.0 ms vs baseline 125.0 ms")],
    fingerprint={"hardware_class": "cpu", "cpu_flags": ["avx2", "avx512f"], "vllm": "0.32.0",
                 "driver_version": None},
    provenance={"started": "2026-01-02T03:04:05+00:00", "commit": None, "command": "pytest -m cpu"},
)
