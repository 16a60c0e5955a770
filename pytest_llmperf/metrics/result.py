"""What a test gets back from `llmperf.run(...)`: metrics to assert on, and how they were made."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from pytest_llmperf.failures import count_kinds, describe_counts
from pytest_llmperf.machine.disturbance import Disturbance
from pytest_llmperf.machine.gpu_telemetry import GpuTelemetry
from pytest_llmperf.machine.hardware import Fingerprint
from pytest_llmperf.metrics import breakdown, phases, spec_pin
from pytest_llmperf.metrics.breakdown import Breakdown
from pytest_llmperf.metrics.client_check import ClientCheck
from pytest_llmperf.metrics.compute import RunMetrics, Summary
from pytest_llmperf.metrics.facts import EngineFacts, WorkloadFacts
from pytest_llmperf.metrics.stats import combine_repeats
from pytest_llmperf.metrics.work import ExecutedWork
from pytest_llmperf.records import RequestRecord


@dataclass(frozen=True)
class Result:
    """One measured run. Metrics read as attributes, with the unit in the name:
    `result.ttft_s.p90`, `result.output_throughput_tok_s`, `result.failed`.

    With repeats, `metrics` is the run whose output throughput is the median, `runs` holds all of
    them, and `value(name)` gives the median of a metric over the runs (what the gate uses).

    `engine` and `workload` may be given as the plain dicts a run file holds: they are read into
    their facts (metrics/facts.py), as a dict `fingerprint` is into a Fingerprint.
    """

    test_id: str  # the measurement id (ids.py): the suite file and `key`
    key: str  # the test's table in its baseline file
    engine: EngineFacts
    engine_label: str
    workload: WorkloadFacts
    workload_label: str
    metrics: RunMetrics
    runs: tuple[RunMetrics, ...]
    records: tuple[RequestRecord, ...] = field(repr=False)
    # The machine it ran on (machine/hardware.py); None: not known (a Result built by hand).
    fingerprint: Fingerprint | None = None
    server_metrics: dict[str, float] = field(default_factory=dict)
    client: ClientCheck | None = None  # the load generator's self-check for `metrics`' run
    client_error: str | None = None  # a client worker died during the run
    # Which server measured it, as that server and its interpreter say (client/server_info.py):
    # {"vllm": "0.32.0", "torch": ..., "source": "GET /version"}; {} when not asked.
    server: dict[str, str] = field(default_factory=dict)
    # What else used the machine during the run (machine/disturbance.py); None: not watched.
    disturbance: Disturbance | None = None
    # The engine's cards over the representative run (machine/gpu_telemetry.py); () on a CPU.
    gpu_telemetry: tuple[GpuTelemetry, ...] = ()
    # A probed run's probes, measured apart (`Workload.with_probes`, session/probe_record.py):
    # their own Result, "<test>@probes"; None for a run without probes.
    probes: Result | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.engine, EngineFacts):
            object.__setattr__(self, "engine", EngineFacts.from_dict(self.engine))
        if not isinstance(self.workload, WorkloadFacts):
            object.__setattr__(self, "workload", WorkloadFacts.from_dict(self.workload))
        if isinstance(self.fingerprint, Mapping):
            object.__setattr__(self, "fingerprint", Fingerprint.from_dict(self.fingerprint)
                               if self.fingerprint else None)

    @cached_property
    def work(self) -> ExecutedWork:
        """What the representative run executed: tokens, finish reasons, cached prompt tokens,
        output digests (metrics/work.py)."""
        return ExecutedWork.of(self.records)

    @cached_property
    def breakdowns(self) -> dict[str, Breakdown]:
        """The representative run's breakdowns by name (metrics/breakdown.py): "by_turn",
        "by_adapter", "structured_outputs", "tool_calls", "agent_sessions", "reasoning",
        "embeddings", and any a plugin registers; each also reads as an attribute
        (`result.tool_calls["invalid"]`), None for a run it does not apply to."""
        return breakdown.of_result(self)

    @property
    def ttft_split(self) -> phases.Split | None:
        """Where the representative run's mean TTFT went: queue, prefill, hand-off, frontend and
        wire (metrics/phases.py); None where the server did not time its requests."""
        return phases.split(self.metrics.flat())

    @property
    def transport_check(self) -> str | None:
        """One line when the client's ITL mean and the engine's disagree beyond the calibrated
        bound: the client or the transport is suspect (metrics/phases.py); else None."""
        return phases.itl_check(self.metrics.flat())

    @property
    def machine(self) -> str:
        """The machine it ran on, for a line that says why a number came out as it did on it:
        "cpu (AMD EPYC, 2 cores, avx2), AuthenticAMD family 23 model 1"."""
        if self.fingerprint is None:
            return "an unrecorded machine"
        hardware = self.fingerprint.hardware
        signature = None if hardware.is_gpu else hardware.cpu_signature
        return hardware.describe() + (f", {signature}" if signature else "")

    @property
    def disturbed(self) -> bool:
        return self.disturbance is not None and self.disturbance.disturbed

    def __getattr__(self, name: str) -> Summary | float | Breakdown | None:
        # Only reached for names that are not fields: a breakdown's name gives it (None where
        # it does not apply), a metric's name is forwarded to RunMetrics.
        if name in breakdown.kinds():
            return self.breakdowns.get(name)
        metrics = object.__getattribute__(self, "metrics")
        try:
            return getattr(metrics, name)
        except AttributeError:
            raise AttributeError(
                f"Result has no metric {name!r}; metrics: {', '.join(sorted(_base_names(metrics)))}"
            ) from None

    def value(self, name: str) -> float:
        """A metric by name ("ttft_s.p50", "output_throughput_tok_s"), median over repeats."""
        # The gate's own statistic, so the table shows exactly what was judged (NaN included).
        return combine_repeats([run.get(name) for run in self.runs]).value

    def expect_acceptance(self, length: float | None = None,
                          tolerance: float = spec_pin.DEFAULT_TOLERANCE) -> float:
        """Speculative decoding's self-check: the mean accepted length the engine's counters
        measured (pooled over the runs) against the engine's pinned acceptance, or against
        `length`, a golden length the test holds; AssertionError naming both where they differ
        by more than `tolerance` tokens (metrics/spec_pin.py). Returns the measured length."""
        return spec_pin.expect(self.engine.get("speculative_config"),
                               [run.flat() for run in self.runs], length, tolerance)

    def first_errors(self, limit: int = 3) -> list[str]:
        return [f"request {r.index}: {r.error}" for r in self.records if r.error][:limit]

    def failure_kinds(self) -> dict[str, int]:
        """Failed requests per kind (failures.KINDS), as the run file's "failures" holds them."""
        return count_kinds(self.records)

    def failures_text(self, limit: int = 3) -> str:
        """`2 overloaded, 1 cut_off; request 0: HTTP 429: ...`: the count per kind, then the
        first errors."""
        return "; ".join([describe_counts(self.failure_kinds()), *self.first_errors(limit)])


def _base_names(metrics: RunMetrics) -> set[str]:
    return {name.split(".")[0] for name in metrics.flat()}

