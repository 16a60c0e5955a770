"""The `llmperf` fixture's object: what a test calls to measure.

It gets plain callables and the test item, never the pytest config (pytest-benchmark's rule), so
it can be built and tested on its own.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_llmperf import ids
from pytest_llmperf.engines import arg_check
from pytest_llmperf.engines.overrides import with_overrides
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import InputError, LlmperfError
from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.metrics import goodput
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.numbers import is_real, is_whole
from pytest_llmperf.plugin import check_baselines, confirm_later
from pytest_llmperf.session.ab_run import AbPlan, AbRunner
from pytest_llmperf.session.judging import Judge
from pytest_llmperf.session.runner import Runner
from pytest_llmperf.session.settings import CLIENT_CHECK_MODES, Settings, usable_cores
from pytest_llmperf.verdict.ab import DEFAULT_AB_PAIRS, PairedRun, ab_entry
from pytest_llmperf.verdict.baselines import TOLERANCE_RULE, is_tolerance
from pytest_llmperf.verdict.gate import DEFAULT_GATED, GateReport
from pytest_llmperf.verdict.judge import Current, Judgement, Subject
from pytest_llmperf.verdict.measurement import MeasurementRecord
from pytest_llmperf.warning_types import (
    ClientLimitedWarning,
    DisturbedWarning,
    InconclusiveWarning,
    StaleBaselineWarning,
)
from pytest_llmperf.workloads import sweeps
from pytest_llmperf.workloads.workload import Workload


@dataclass(frozen=True, kw_only=True)
class TestOptions:
    """Keyword arguments of `@pytest.mark.llmperf(...)`; a typo is a TypeError."""

    __test__ = False  # not a test class, despite the name

    repeat: int | None = None
    slo: Any = None
    max_error_rate: float = 0.0
    tolerance: float | None = None
    gate: tuple[str, ...] | None = None  # the metrics the baseline gates (default: DEFAULT_GATED)
    # --llmperf-client-check for this test alone: "warn" where the engine's ranks must share
    # the client's cores (two ranks on a 2-core machine), so a limited client is expected.
    client_check: str | None = None

    def __post_init__(self) -> None:
        # Checked here, not when the baseline is written after minutes of measuring.
        if self.tolerance is not None and not is_tolerance(self.tolerance):
            raise ValueError(f"tolerance is {TOLERANCE_RULE}, got {self.tolerance!r}")
        if self.repeat is not None and not _whole_from_1(self.repeat):
            raise ValueError(f"repeat is a whole number >= 1, got {self.repeat!r}")
        if self.client_check is not None and self.client_check not in CLIENT_CHECK_MODES:
            raise ValueError(f"client_check is one of {', '.join(CLIENT_CHECK_MODES)} (as "
                             f"--llmperf-client-check), got {self.client_check!r}")
        if not _fraction_0_to_1(self.max_error_rate):
            raise ValueError("max_error_rate is a fraction from 0 to 1 (0.01 lets 1% of the "
                             f"requests fail), got {self.max_error_rate!r}")


def _whole_from_1(value: Any) -> bool:
    return is_whole(value, 1)


def _fraction_0_to_1(value: Any) -> bool:
    return is_real(value, 0, 1)


def engine_of(item: pytest.Item) -> Engine | None:
    """The spec from the closest `@pytest.mark.engine(...)` (function, class, then module)."""
    mark = item.get_closest_marker("engine")
    if mark is None:
        return None
    spec = mark.args[0] if mark.args else mark.kwargs.get("spec")
    if not isinstance(spec, Engine):
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.engine needs a pytest_llmperf.Engine, got {spec!r}"
        )
    return spec


def options_of(item: pytest.Item) -> TestOptions:
    """The `@pytest.mark.llmperf(...)` settings merged across module, class and function, the
    nearest winning per key: a function's `slo=` keeps its module's `tolerance=` and `gate=`."""
    merged: dict[str, Any] = {}
    args: list[Any] = []
    for mark in reversed(list(item.iter_markers("llmperf"))):  # farthest first
        merged.update(mark.kwargs)
        args += mark.args
    try:
        return TestOptions(*args, **merged)
    except (TypeError, ValueError) as exc:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.llmperf: {exc}") from None


def user_nodeid(item: pytest.Item) -> str:
    """The node id a user would type (ids.user_nodeid)."""
    return ids.user_nodeid(item.nodeid)


class Llmperf:
    """What a test measures with. `run` measures one workload; `sweep`, `capacity` and
    `offline` build on it. Each judges its metrics (SLOs, baseline) before it returns; a
    regression or a missed target fails the test there, after the numbers have been recorded."""

    def __init__(self, item: pytest.Item, runner: Runner, ab: AbRunner, judge: Judge) -> None:
        self._item = item
        self._runner, self._ab, self._judge = runner, ab, judge
        self._settings = runner.settings
        self._measurements = 0
        self.results: list[Result] = []

    @property
    def options(self) -> TestOptions:
        return options_of(self._item)

    def run(self, workload: Workload, *, engine: Engine | None = None,
            repeat: int | None = None, slo: Any = None) -> Result:
        """Measure `workload` on the engine (`repeat` times), then check `slo` (or the
        marker's) and the baseline."""
        options = self.options
        self._check_baselines_instead("run", workload, engine)
        if self._settings.check_args:
            self._check_args_instead(*self._sides(engine))
        slo = slo or options.slo
        if self._settings.ab:
            return self._run_ab(workload, engine, slo)
        repeat = repeat or options.repeat or self._settings.repeat
        record = self._measure(workload, engine, repeat, limits=_limits(slo))
        self._settle(self._judge.judge(self._item, record, options, slo))
        return record.result

    def ab(self, workload: Workload, *, a: Engine, b: Engine, pairs: int = DEFAULT_AB_PAIRS,
           ) -> PairedRun:
        """Measure `workload` on engines `a` and `b` alternately (ABBA, `pairs` pairs) and return
        the paired B/A ratios of every metric, for the test to assert on:
        `assert run.median("output_throughput_tok_s") > 1.2`. Both sides are rows of the summary;
        nothing is gated against a baseline."""
        if not is_whole(pairs, 1):
            raise InputError(f"llmperf.ab(pairs={pairs!r}): a whole number of ABBA pairs, "
                             "1 or more")
        self._check_baselines_instead("ab")
        if self._settings.check_args:
            self._check_args_instead(("A/B side A", a), ("A/B side B", b))
        record_a, record_b = _engine_or_fail(self._ab.run_ab, self._next_id(), a, b, workload,
                                             AbPlan(pairs))
        run = PairedRun(record_a.result, record_b.result)
        # The run file keeps the ratios of the gated metrics, unjudged: the test judges them.
        names = self.options.gate or DEFAULT_GATED
        record_b.ab = ab_entry({name: run.ratios(name) for name in names}, None, GateReport())
        self._check_sides(record_a, record_b)
        return run

    def _run_ab(self, workload: Workload, engine: Engine | None, slo: Any) -> Result:
        """--llmperf-ab: side A is the test's engine, side B it with the overrides; judged on
        the paired ratios (and B on the test's SLO). Returns side B, the candidate."""
        engine = self._engine(engine)
        settings = self._settings
        # A regression over the first pairs is confirmed after the engine's other tests
        # (confirm_later.py), unless this test measured before: a rerun would measure that again.
        later = self._item.config.pluginmanager.get_plugin(confirm_later.PLUGIN_NAME)
        plan = AbPlan(settings.ab_pairs, settings.ab_confirm_pairs,
                      tuple(self.options.gate or DEFAULT_GATED),
                      defer=bool(later and later.may_defer(self._item) and not self.results))
        try:  # both sides' goodput against the test's per-request limits
            record_a, record_b = _engine_or_fail(
                self._ab.run_ab, self._next_id(), *self._ab_sides(engine), workload, plan,
                _limits(slo))
        except confirm_later.ConfirmLater:
            later.defer(self._item)
            raise
        self._check_sides(record_a, record_b)
        # An A/B improvement is in the summary's notes; there is no baseline to call stale.
        self._settle(self._judge.judge_ab(record_a, record_b, self.options, slo), warn=False)
        return record_b.result

    def _check_sides(self, *records: MeasurementRecord) -> None:
        for record in records:
            self.results.append(record.result)
            self._check_client(record.result, self._settings)
            self._check_errors(record.result, self.options.max_error_rate)

    def sweep(self, workload: Workload, *, rates=None, concurrencies=None,
              engine: Engine | None = None) -> sweeps.Sweep:
        """One engine, several loads: a throughput-versus-latency curve. Every point is a row in
        the summary; assert on the returned Sweep (points are not gated one by one)."""
        self._check_baselines_instead("sweep")
        if self._settings.check_args:
            self._check_args_instead(("engine", self._engine(engine)))

        def measure(point: Workload):
            return self._measure(point, engine, 1, point=True).result.metrics

        return sweeps.sweep(measure, workload, rates=rates, concurrencies=concurrencies)

    def capacity(self, workload: Workload, slo: Any, *, low: float, high: float,
                 rel_tol: float = 0.1, max_runs: int = 8,
                 engine: Engine | None = None) -> sweeps.Capacity:
        """The highest Poisson rate meeting `slo`, found by search and gated as the metric
        `slo_capacity_req_s` (higher is better) against the baseline. For a trace replay
        (Workload.trace) `low` and `high` are speedups of the trace's own arrivals, and the
        highest speedup is gated as `slo_capacity_speedup` (sweeps.find_capacity)."""
        self._check_baselines_instead("capacity", workload, engine)
        if self._settings.check_args:
            self._check_args_instead(("engine", self._engine(engine)))
        probes: list[MeasurementRecord] = []

        def measure(point: Workload):
            probes.append(self._measure(point, engine, 1, point=True, limits=_limits(slo)))
            return probes[-1].result.metrics

        found = sweeps.find_capacity(measure, workload, slo, low=low, high=high,
                                     rel_tol=rel_tol, max_runs=max_runs)
        bounds = {"max": dict(slo.max), "min": dict(slo.min)}
        for probe, run in zip(probes, found.runs, strict=True):  # one measurement per probe
            probe.capacity = {"slo": bounds, "passed": run.passed, "reason": run.reason}
        estimates = {name: Estimate(value, 0.0, 1) for name, value in found.as_metric().items()}
        self._judge_extra(workload, engine, estimates,
                          f"{found.engine_runs} engine runs" + ("" if found.converged
                                                                else f"; {found.note}"))
        return found

    def offline(self, workload: Workload, *, engine: Engine | None = None):
        """Maximum throughput with vLLM's in-process engine (`LLM.generate`, as `vllm bench
        throughput`), in a child process; gated as offline_*_throughput_* metrics."""
        engine = self._engine(engine)
        self._check_baselines_instead("offline", workload, engine)
        if self._settings.check_args:
            self._check_args_instead(("engine", engine))
        result = _engine_or_fail(self._runner.run_offline, engine, workload)
        estimates = {f"offline_{name}": Estimate(getattr(result, name), 0.0, 1) for name in
                     ("output_throughput_tok_s", "total_throughput_tok_s")}
        self._judge_extra(workload, engine, estimates,
                          f"{result.requests} requests in {result.elapsed_s:.2f} s")
        return result

    # ------------------------------------------------------------------ helpers

    def _engine(self, engine: Engine | None) -> Engine:
        engine = engine or engine_of(self._item)
        if engine is None:
            pytest.fail(f"{user_nodeid(self._item)}: no engine: add "
                        "@pytest.mark.engine(Engine(...)) or pass engine=... to llmperf.run",
                        pytrace=False)
        return engine

    def _sides(self, engine: Engine | None) -> tuple[tuple[str, Engine], ...]:
        """What `run` starts: the engine, or under --llmperf-ab both of its sides."""
        spec = self._engine(engine)
        if not self._settings.ab:
            return (("engine", spec),)
        a, b = self._ab_sides(spec)
        return ("A/B side A", a), ("A/B side B", b)

    def _ab_sides(self, engine: Engine) -> tuple[Engine, Engine]:
        """--llmperf-ab's two engines: the test's own with --llmperf-ab-a's fields (if any) and
        with --llmperf-ab's."""
        settings = self._settings
        side_a = with_overrides(engine, settings.ab_a) if settings.ab_a else engine
        return side_a, with_overrides(engine, settings.ab)

    @staticmethod
    def _check_args_instead(*sides: tuple[str, Engine]) -> None:
        """--llmperf-check-args: the call's engines go through vLLM's own `vllm serve` parser
        instead of starting (engines/arg_check.py). The test ends here: skipped, saying what
        was checked, or failed with vLLM's error naming the engine and the flag."""
        outcome = _engine_or_fail(arg_check.check_engines, sides)
        if outcome.failure:
            pytest.fail(outcome.failure, pytrace=False)
        skipped = pytest.skip.Exception(outcome.summary)
        # -rs then names the test, not this line: what pytest does for a fixture's skip.
        skipped._use_item_location = True
        raise skipped

    def _check_baselines_instead(self, call: str, workload: Workload | None = None,
                                 engine: Engine | None = None) -> None:
        """--llmperf-check-baselines: the call's workload and engine against the test's
        committed tables (plugin/check_baselines.py); the test ends here."""
        if not self._settings.check_baselines:
            return
        identities = (None, None) if workload is None else (
            self._runner.engine_identity(self._engine(engine)),
            self._runner.workload_identity(workload))
        check_baselines.plugin_of(self._item.config).end_test(
            self._item, MeasurementId(user_nodeid(self._item), run=self._measurements + 1).key,
            *identities, call=call)

    def _next_id(self) -> MeasurementId:
        self._measurements += 1
        return MeasurementId(user_nodeid(self._item), run=self._measurements)

    def _measure(self, workload: Workload, engine: Engine | None, repeat: int,
                 point: bool = False, limits: goodput.Limits | None = None
                 ) -> MeasurementRecord:
        engine = self._engine(engine)
        # Sweep and search points are named after their load and take no run number, so the
        # keys of the gated measurements after them do not depend on how many points there were.
        id = (MeasurementId(user_nodeid(self._item), point=workload.name) if point
              else self._next_id())
        record = _engine_or_fail(self._runner.run, id, engine, workload, repeat, limits)
        self.results.append(record.result)
        self._check_client(record.result, self._settings)
        self._check_errors(record.result, self.options.max_error_rate)
        return record

    def _judge_extra(self, workload: Workload, engine: Engine | None,
                     estimates: dict[str, Estimate], detail: str) -> None:
        engine = self._engine(engine)
        id = self._next_id()
        subject = Subject(self._item, id.format(), id.key, self._runner.engine_identity(engine),
                          self._runner.workload_identity(workload))
        judgement = self._judge.judge_estimates(
            id, subject, Current(estimates), self.options, slo=None,
            known=estimates.__contains__, gated=tuple(estimates))
        self._runner.ledger.add_extras(id, estimates, detail)
        self._settle(judgement)

    def _settle(self, judgement: Judgement, warn: bool = True) -> None:
        for message in judgement.warnings if warn else ():
            warnings.warn(StaleBaselineWarning(message), stacklevel=3)
        if judgement.failed:
            pytest.fail(judgement.failure_text(), pytrace=False)
        undecided = judgement.report.inconclusive
        if undecided and self._settings.inconclusive == "fail":
            pytest.fail("INCONCLUSIVE (--llmperf-inconclusive fail): " + "; ".join(undecided),
                        pytrace=False)
        for message in undecided if self._settings.inconclusive == "warn" else ():
            warnings.warn(InconclusiveWarning(message), stacklevel=3)

    def _check_client(self, result: Result, settings: Settings) -> None:
        """A run a neighbour disturbed, or the load generator limited, or lost a worker in,
        measured something else than the engine: it fails here, before any judging (with
        --llmperf-disturbance / --llmperf-client-check warn it warns; the session then writes
        no baseline from it). It stays in the summary either way."""
        if result.client_error:
            pytest.fail(result.client_error, pytrace=False)
        if result.disturbed:  # a neighbour that disturbed the client too is the cause
            _fail_or_warn(result.disturbance.failure(), settings.disturbance, DisturbedWarning)
        elif result.client is not None and result.client.limited:
            _fail_or_warn(result.client.failure(usable_cores()),
                          self.options.client_check or settings.client_check,
                          ClientLimitedWarning)

    @staticmethod
    def _check_errors(result: Result, limit: float) -> None:
        """Failed requests fail the test past the allowed rate; the result is already recorded."""
        if result.failed and result.error_rate > limit:
            errors = result.failures_text()
            pytest.fail(f"{result.failed} of {result.failed + result.completed} requests failed "
                        f"(error rate {result.error_rate:.1%}, allowed {limit:.1%}): {errors}",
                        pytrace=False)


def _limits(slo: Any) -> goodput.Limits | None:
    """The SLO's per-request limits, for each run's goodput (None: it sets none)."""
    return goodput.limits_from(slo) or None


def _engine_or_fail(call, *args):
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
    warnings.warn(warning(message), stacklevel=4)
