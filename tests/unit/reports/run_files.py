"""Results and run files built by hand for the run file's and the `llmperf` command's tests."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.reports.runfile import run_document, write_run
from pytest_llmperf.verdict import references
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from tests.unit.fingerprints import fingerprint_of

FINGERPRINT = fingerprint_of({"hardware_class": "cpu", "cpu_model": "Fake CPU 9000",
                              "cpu_cores": 4, "vllm": "0.31.0", "python": "3.11.7"})
STARTED = datetime(2026, 11, 22, 10, 4, 31, tzinfo=timezone.utc)
TEST = "suites/test_cpu.py::test_fixed[64]"


def record(index: int, sent: float, ttft: float, tpot: float, tokens: int) -> RequestRecord:
    """A request sent at `sent`, first token after `ttft`, then one token every `tpot`."""
    times = [sent + ttft + k * tpot for k in range(tokens)]
    return RequestRecord(
        index=index, expected_prompt_tokens=8, expected_output_tokens=tokens, scheduled_s=sent,
        sent_s=sent, chunk_times_s=times, chunk_tokens=[1] * tokens, usage_prompt_tokens=8,
        usage_output_tokens=tokens,
    )


def make_result(
    nodeid: str = "suites/test_cpu.py::test_fixed[64]",
    ttfts: tuple[float, ...] = (0.2, 0.2, 0.2, 0.2),
    *,
    tpot: float = 0.01,
    tokens: int = 4,
    scales: tuple[float, ...] = (1.0,),
    keep_records: bool = True,
) -> Result:
    """One Result; repeat r has every TTFT multiplied by scales[r]. Requests are sent 1 s apart."""
    runs = []
    for scale in scales:
        records = [record(i, float(i), t * scale, tpot, tokens) for i, t in enumerate(ttfts)]
        runs.append((compute_metrics(records, engine_start_s=12.5), records))
    # As the session picks it: the repeat with the median output throughput.
    metrics, records = sorted(runs, key=lambda run: run[0].output_throughput_tok_s)[len(runs) // 2]
    return Result(
        test_id=nodeid, key=nodeid.split("::", 1)[1], engine={"model": "tiny", "max_num_seqs": 8},
        engine_label="tiny", workload={"num_prompts": len(ttfts)}, workload_label="fixed 8/4",
        metrics=metrics, runs=tuple(run[0] for run in runs),
        records=tuple(records) if keep_records else (),
    )


def records(*results: Result, verdicts=None, **fields) -> list[MeasurementRecord]:
    """The measurement records of `results`, each with its verdict from `verdicts`."""
    return [MeasurementRecord.of(result, (verdicts or {}).get(result.test_id), **fields)
            for result in results]


def document(*results: Result, verdicts=None, fingerprint=FINGERPRINT, commit="3f2c1e0"):
    return run_document(records(*results, verdicts=verdicts), fingerprint=fingerprint,
                        commit=commit, started=STARTED)


def save_document(path: Path, doc: dict) -> str:
    write_run(path, doc)
    return str(path)


def ab_run(tmp_path, b_ttft: float) -> str:
    """A run file of an --llmperf-ab session: side A at 200 ms TTFT over 4 pairs, side B at
    `b_ttft`, B judged against A by the plugin's own path (references.SideA)."""
    a = make_result(TEST, (0.2,) * 4, scales=(1.0,) * 4)
    b = make_result(TEST, (b_ttft,) * 4, scales=(1.0, 1.01, 0.99, 1.0))
    a = replace(a, key="test_fixed[64] (A)", test_id=f"{TEST} (A)")
    b = replace(b, key="test_fixed[64] (B)", test_id=f"{TEST} (B)")
    side_a = references.SideA(tuple(run.flat() for run in a.runs), 0.1)
    judged = references.judge(references.Current.of(b.runs), side_a, gated=("ttft_s.p50",))
    records = [MeasurementRecord.of(a),
               MeasurementRecord.of(b, judged.status, ab=judged.ab)]
    doc = run_document(records, fingerprint=FINGERPRINT, commit="3f2c1e0", started=STARTED)
    return save_document(tmp_path / "ab.json", doc)
