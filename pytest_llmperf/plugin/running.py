"""What one test's measurement calls share, whatever the session's measurer
(plugin/measurers.py): its item and marker options, its measurements so far, the session's
runner and judge, and how a measurement's outcome becomes the test's (a failure, a warning)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import LlmperfError
from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.metrics import goodput
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.plugin.marks import TestOptions, engine_of, options_of, user_nodeid
from pytest_llmperf.session.ab_run import AbRunner
from pytest_llmperf.session.judge import Judge
from pytest_llmperf.session.runner import Runner
from pytest_llmperf.session.settings import Settings, usable_cores
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from pytest_llmperf.verdict.references import Current, Judgement, Subject, TestNode
from pytest_llmperf.verdict.status import WORK_FACTS
from pytest_llmperf.warning_types import (
    ClientLimitedWarning,
    DisturbedWarning,
    InconclusiveWarning,
    StaleBaselineWarning,
)
from pytest_llmperf.workloads.workload import Workload

__all__ = ["FixtureConfig", "RunningTest", "engine_or_fail", "limits_of"]


@dataclass(frozen=True)
class FixtureConfig:
    """What a test's calls read of the session's settings (session/settings.py)."""

    repeat: int = 1  # --llmperf-repeat, where neither the call nor the marker says
    client_check: str = "fail"
    disturbance: str = "fail"
    inconclusive: str = "warn"

    @classmethod
    def of(cls, settings: Settings) -> FixtureConfig:
        return cls(settings.repeat, settings.client_check, settings.disturbance,
                   settings.inconclusive)


class RunningTest:
    """One test's side of the session: its measurements are numbered here, recorded by the
    runner and judged by the judge; a failure or warning is raised in the test."""

    def __init__(self, item: pytest.Item, runner: Runner, ab_runner: AbRunner, judge: Judge,
                 config: FixtureConfig) -> None:
        self.item = item
        self.runner, self.ab_runner, self.judge, self.config = runner, ab_runner, judge, config
        self.node = TestNode(item.nodeid, Path(item.path))
        self.measurements = 0
        self.results: list[Result] = []

    @property
    def options(self) -> TestOptions:
        return options_of(self.item)

    def engine(self, engine: Engine | None) -> Engine:
        """The call's engine, else the test's marker's; a test with neither fails here."""
        engine = engine or engine_of(self.item)
        if engine is None:
            pytest.fail(f"{user_nodeid(self.item)}: no engine: add "
                        "@pytest.mark.engine(Engine(...)) or pass engine=... to llmperf.run",
                        pytrace=False)
        return engine

    def next_id(self) -> MeasurementId:
        self.measurements += 1
        return MeasurementId(user_nodeid(self.item), run=self.measurements)

    def next_key(self) -> str:
        """The baseline key the next measurement will have (next_id's, without counting it)."""
        return MeasurementId(user_nodeid(self.item), run=self.measurements + 1).key

    def measure(self, workload: Workload, engine: Engine | None, repeat: int,
                point: bool = False, limits: goodput.Limits | None = None,
                judged: bool = False) -> MeasurementRecord:
        """One measurement, kept. `judged`: the caller judges it and settles the noise with its
        judgement (settle's `measured`); else its client and neighbours are checked here."""
        engine = self.engine(engine)
        # Sweep and search points are named after their load and take no run number, so the
        # keys of the gated measurements after them do not depend on how many points there were.
        id = (MeasurementId(user_nodeid(self.item), point=workload.name) if point
              else self.next_id())
        record = engine_or_fail(self.runner.run, id, engine, workload, repeat, limits)
        self.check_sides(record, judged=judged)
        return record

    def check_sides(self, *records: MeasurementRecord, judged: bool = False) -> None:
        """Each measured record kept, then its failed requests checked and, unless a judgement
        will settle it (`judged`), its client and neighbours."""
        for record in records:
            self.results.append(record.result)
            if not judged:
                self.check_client(record.result)
            self.check_errors(record.result, self.options.max_error_rate)

    def judge_extra(self, workload: Workload, engine: Engine | None,
                    estimates: dict[str, Estimate], detail: str) -> None:
        """Metrics of the test's own making (an SLO capacity, an offline throughput) judged as
        a measurement of their own."""
        engine = self.engine(engine)
        id = self.next_id()
        subject = Subject(self.node, id.format(), id.key, self.runner.engine_identity(engine),
                          self.runner.workload_identity(workload))
        judgement = self.judge.judge_estimates(
            id, subject, Current(estimates), self.options, slo=None,
            known=estimates.__contains__, gated=tuple(estimates))
        self.runner.ledger.add_extras(id, estimates, detail)
        self.settle(judgement)

    def settle(self, judgement: Judgement, warn: bool = True,
               measured: Sequence[Result] = ()) -> None:
        """The test's outcome from a judgement of the `measured` results, in the order of
        verdict/status.PRECEDENCE: a fact about the work (different work, an error) fails it
        whatever the noise, naming the noise beside it; then a neighbour or the client (fail or
        warn, as configured); then the judgement of the numbers."""
        for message in judgement.warnings if warn else ():
            warnings.warn(StaleBaselineWarning(message), stacklevel=4)
        if judgement.failed and judgement.status in WORK_FACTS:
            beside = "".join(f"; the run was also {noise}" for noise in map(noise_of, measured)
                             if noise)
            pytest.fail(judgement.failure_text() + beside, pytrace=False)
        for result in measured:
            self.check_client(result)
        if judgement.failed:
            pytest.fail(judgement.failure_text(), pytrace=False)
        undecided = judgement.report.inconclusive
        if undecided and self.config.inconclusive == "fail":
            pytest.fail("INCONCLUSIVE (--llmperf-inconclusive fail): " + "; ".join(undecided),
                        pytrace=False)
        for message in undecided if self.config.inconclusive == "warn" else ():
            warnings.warn(InconclusiveWarning(message), stacklevel=4)

    def check_client(self, result: Result) -> None:
        """A run a neighbour disturbed, or the load generator limited, or lost a worker in,
        measured something else than the engine: it fails here, before any judging (with
        --llmperf-disturbance / --llmperf-client-check warn it warns; the session then writes
        no baseline from it). It stays in the summary either way."""
        if result.client_error:
            pytest.fail(result.client_error, pytrace=False)
        if result.disturbed:  # a neighbour that disturbed the client too is the cause
            _fail_or_warn(result.disturbance.failure(), self.config.disturbance,
                          DisturbedWarning)
        elif result.client is not None and result.client.limited:
            _fail_or_warn(result.client.failure(usable_cores()),
                          self.options.client_check or self.config.client_check,
                          ClientLimitedWarning)

    @staticmethod
    def check_errors(result: Result, limit: float) -> None:
        """Failed requests fail the test past the allowed rate; the result is already recorded."""
        if result.failed and result.error_rate > limit:
            errors = result.failures_text()
            pytest.fail(f"{result.failed} of {result.failed + result.completed} requests failed "
                        f"(error rate {result.error_rate:.1%}, allowed {limit:.1%}): {errors}",
                        pytrace=False)


def noise_of(result: Result) -> str | None:
    """What else set a result's numbers, in a few words with their measure; None: nothing."""
    if result.disturbed:
        return f"disturbed ({'; '.join(result.disturbance.reasons)})"
    if result.client is not None and result.client.limited:
        return f"client limited ({'; '.join(result.client.reasons)})"
    return None


def limits_of(slo) -> goodput.Limits | None:
    """The SLO's per-request limits, for each run's goodput (None: it sets none)."""
    return goodput.limits_from(slo) or None


def engine_or_fail(call, *args):
    """`call(*args)`; an engine that would not start, died or got no GPUs, or a bad dataset or
    model config, fails the test with its one line (what was measured before a death is
    already recorded)."""
    try:
        return call(*args)
    except LlmperfError as exc:  # engine faults and bad input alike: errors.py
        failure = str(exc)
    pytest.fail(failure, pytrace=False)  # outside the except block: one line, no chained trace


def _fail_or_warn(message: str, mode: str, warning: type[Warning]) -> None:
    if mode == "fail":
        pytest.fail(message, pytrace=False)
    warnings.warn(warning(message), stacklevel=5)
