"""What the `llmperf` fixture's five calls do in this session, chosen once by the hook
`pytest_llmperf_make_measurer` (plugin/hookspecs.py), whose built-in answer is
`choose_measurer`: measure (`Measure`), measure `run` as a paired A/B (`AbMeasure`,
--llmperf-ab), or end each test at its first call having checked its engines' arguments
(`CheckArgs`, --llmperf-check-args) or its committed baseline tables (`CheckBaselines`,
--llmperf-check-baselines). The fixture (plugin/fixture.py) hands each call to the measurer and
never asks which one it is, as pytest-xdist's session hands its tests to the one scheduler
`pytest_xdist_make_scheduler` picks
(https://github.com/pytest-dev/pytest-xdist/blob/master/src/xdist/dsession.py); a plugin of the
plugin adds a mode by answering that hook first (tests/plugin/test_mode_plugin.py).
"""

from __future__ import annotations

from typing import Any, NoReturn, Protocol

import pytest

from pytest_llmperf.engines import arg_check
from pytest_llmperf.engines.overrides import with_overrides
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.metrics import probes as probe_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.plugin import check_baselines, confirm_later
from pytest_llmperf.plugin.running import RunningTest, engine_or_fail, limits_of
from pytest_llmperf.session.ab_run import AbPlan
from pytest_llmperf.session.settings import Settings
from pytest_llmperf.verdict.gate import DEFAULT_GATED, GateReport
from pytest_llmperf.verdict.measurement_record import CapacityProbe, MeasurementRecord
from pytest_llmperf.verdict.paired_ratios import PairedRun, ab_entry
from pytest_llmperf.workloads import sweeps
from pytest_llmperf.workloads.workload import Workload

__all__ = ["MODES", "AbMeasure", "CheckArgs", "CheckBaselines", "Measure", "Measurer",
           "choose_measurer", "measuring_of"]

Sides = tuple[tuple[str, Engine], ...]  # (what a line calls the engine, the engine)


class Measurer(Protocol):
    """The fixture's five calls, for one test (`test`); each ends judged, or ends the test."""

    def run(self, test: RunningTest, workload: Workload, engine: Engine | None,
            repeat: int | None, slo: Any) -> Result: ...

    def ab(self, test: RunningTest, workload: Workload, a: Engine, b: Engine,
           pairs: int) -> PairedRun: ...

    def sweep(self, test: RunningTest, workload: Workload, rates, concurrencies,
              engine: Engine | None) -> sweeps.Sweep: ...

    def capacity(self, test: RunningTest, workload: Workload, slo: Any, search: dict[str, Any],
                 engine: Engine | None) -> sweeps.Capacity: ...

    def offline(self, test: RunningTest, workload: Workload, engine: Engine | None): ...


class Measure:
    """Measures every call and judges it against the session's reference."""

    def run_sides(self, test: RunningTest, engine: Engine | None) -> Sides:
        """The engines `run` starts."""
        return (("engine", test.engine(engine)),)

    def run(self, test: RunningTest, workload: Workload, engine: Engine | None,
            repeat: int | None, slo: Any) -> Result:
        options = test.options
        slo = slo or options.slo
        repeat = repeat or options.repeat or test.config.repeat
        record = test.measure(workload, engine, repeat, limits=limits_of(slo), judged=True)
        judgements = [test.judge.judge_record(test.node, record, options, slo)]
        if record.result.probes is not None:  # gated apart, against their own table; the
            # test's SLO is the load's (session/probe_record.py)
            probes = test.runner.ledger.entry(probe_metrics.measurement_id(record.id))
            judgements.append(test.judge.judge_record(test.node, probes, options, None))
        for judgement in judgements:  # every one judged, then the first failure raised
            test.settle(judgement, measured=(record.result,) if judgement is judgements[0]
                        else ())
        return record.result

    def ab(self, test: RunningTest, workload: Workload, a: Engine, b: Engine,
           pairs: int) -> PairedRun:
        record_a, record_b = engine_or_fail(test.ab_runner.run_ab, test.next_id(), a, b, workload,
                                            AbPlan(pairs))
        run = PairedRun(record_a.result, record_b.result)
        # The run file keeps the ratios of the gated metrics, unjudged: the test judges them.
        names = test.options.gate or DEFAULT_GATED
        record_b.ab = ab_entry({name: run.ratios(name) for name in names}, None, GateReport())
        test.check_sides(record_a, record_b)
        return run

    def sweep(self, test: RunningTest, workload: Workload, rates, concurrencies,
              engine: Engine | None) -> sweeps.Sweep:
        def measure(point: Workload):
            return test.measure(point, engine, 1, point=True).result.metrics

        return sweeps.sweep(measure, workload, rates=rates, concurrencies=concurrencies)

    def capacity(self, test: RunningTest, workload: Workload, slo: Any, search: dict[str, Any],
                 engine: Engine | None) -> sweeps.Capacity:
        probes: list[MeasurementRecord] = []

        def measure(point: Workload):
            probes.append(test.measure(point, engine, 1, point=True, limits=limits_of(slo)))
            return probes[-1].result.metrics

        found = sweeps.find_capacity(measure, workload, slo, **search)
        for probe, run in zip(probes, found.runs, strict=True):  # one measurement per probe
            probe.capacity = CapacityProbe(dict(slo.max), dict(slo.min), run.passed, run.reason)
        estimates = {name: Estimate(value, 0.0, 1) for name, value in found.as_metric().items()}
        test.judge_extra(workload, engine, estimates,
                         f"{found.engine_runs} engine runs" + ("" if found.converged
                                                               else f"; {found.note}"))
        return found

    def offline(self, test: RunningTest, workload: Workload, engine: Engine | None):
        engine = test.engine(engine)
        result = engine_or_fail(test.runner.run_offline, engine, workload)
        estimates = {f"offline_{name}": Estimate(getattr(result, name), 0.0, 1) for name in
                     ("output_throughput_tok_s", "total_throughput_tok_s")}
        test.judge_extra(workload, engine, estimates,
                         f"{result.requests} requests in {result.elapsed_s:.2f} s")
        return result


# What a call other than `run` measured in an A/B session, said once per test and call under
# the summary: it gates nothing in an upgrade, and the summary says so rather than stay silent.
UNPAIRED = ("llmperf.{call} measured the test's {what} and was not judged: --llmperf-ab pairs "
            "llmperf.run only")
UNPAIRED_WHAT = {"ab": "own engines a and b, without --llmperf-ab's side B",
                 "sweep": "engine alone, without --llmperf-ab's side B",
                 "capacity": "engine alone, without --llmperf-ab's side B",
                 "offline": "engine alone, without --llmperf-ab's side B"}


class AbMeasure(Measure):
    """--llmperf-ab: `run` measures side A (the test's engine, with --llmperf-ab-a's fields if
    any) and side B (with --llmperf-ab's) alternately and is judged on the paired ratios (and
    B on the test's SLO); it returns side B, the candidate. The other calls measure the test's
    own engines, unjudged (session/judge.py), each with a line under the summary saying so
    (UNPAIRED)."""

    def __init__(self, settings: Settings,
                 later: confirm_later.ConfirmLaterPlugin | None = None) -> None:
        self.overrides_a, self.overrides_b = settings.ab_a, settings.ab
        self.plan = AbPlan(settings.ab_pairs, settings.ab_confirm_pairs,
                           tolerance=settings.ab_tolerance)
        self.later = later  # confirm pairs after the engine's other tests (confirm_later.py)

    def sides(self, engine: Engine) -> tuple[Engine, Engine]:
        side_a = with_overrides(engine, self.overrides_a) if self.overrides_a else engine
        return side_a, with_overrides(engine, self.overrides_b)

    def run_sides(self, test: RunningTest, engine: Engine | None) -> Sides:
        a, b = self.sides(test.engine(engine))
        return ("A/B side A", a), ("A/B side B", b)

    def run(self, test: RunningTest, workload: Workload, engine: Engine | None,
            repeat: int | None, slo: Any) -> Result:
        slo = slo or test.options.slo
        engine = test.engine(engine)
        # A regression over the first pairs is confirmed after the engine's other tests, unless
        # this test measured before: a rerun would measure that again.
        later = self.later
        defer = bool(later and later.may_defer(test.item) and not test.results)
        plan = AbPlan(self.plan.pairs, self.plan.confirm_pairs,
                      tuple(test.options.gate or DEFAULT_GATED), defer, self.plan.tolerance)
        try:  # both sides' goodput against the test's per-request limits
            record_a, record_b = engine_or_fail(test.ab_runner.run_ab, test.next_id(),
                                                *self.sides(engine), workload, plan,
                                                limits_of(slo))
        except confirm_later.ConfirmLater:
            later.defer(test.item)
            raise
        test.check_sides(record_a, record_b, judged=True)
        # An A/B improvement is in the summary's notes; there is no baseline to call stale.
        test.settle(test.judge.judge_ab(record_a, record_b, test.options, slo, plan), warn=False,
                    measured=(record_a.result, record_b.result))
        return record_b.result

    @staticmethod
    def _unpaired(test: RunningTest, call: str) -> None:
        """Said before the call measures, so a call that fails is named too."""
        test.runner.ledger.note_once(test.node.nodeid, UNPAIRED.format(
            call=call, what=UNPAIRED_WHAT[call]))

    def ab(self, test: RunningTest, workload: Workload, a: Engine, b: Engine,
           pairs: int) -> PairedRun:
        self._unpaired(test, "ab")
        return super().ab(test, workload, a, b, pairs)

    def sweep(self, test: RunningTest, workload: Workload, rates, concurrencies,
              engine: Engine | None) -> sweeps.Sweep:
        self._unpaired(test, "sweep")
        return super().sweep(test, workload, rates, concurrencies, engine)

    def capacity(self, test: RunningTest, workload: Workload, slo: Any, search: dict[str, Any],
                 engine: Engine | None) -> sweeps.Capacity:
        self._unpaired(test, "capacity")
        return super().capacity(test, workload, slo, search, engine)

    def offline(self, test: RunningTest, workload: Workload, engine: Engine | None):
        self._unpaired(test, "offline")
        return super().offline(test, workload, engine)


class CheckArgs:
    """--llmperf-check-args: each call's engines go through vLLM's own `vllm serve` parser
    instead of starting (engines/arg_check.py). The test ends there: skipped, saying what was
    checked, or failed with vLLM's error naming the engine and the flag."""

    def __init__(self, measuring: Measure) -> None:
        self.measuring = measuring  # what `run` would start: one engine, or both A/B sides

    def run(self, test: RunningTest, workload: Workload, engine: Engine | None,
            repeat: int | None, slo: Any) -> NoReturn:
        _check_args(*self.measuring.run_sides(test, engine))

    def ab(self, test: RunningTest, workload: Workload, a: Engine, b: Engine,
           pairs: int) -> NoReturn:
        _check_args(("A/B side A", a), ("A/B side B", b))

    def sweep(self, test: RunningTest, workload: Workload, rates, concurrencies,
              engine: Engine | None) -> NoReturn:
        _check_args(("engine", test.engine(engine)))

    def capacity(self, test: RunningTest, workload: Workload, slo: Any, search: dict[str, Any],
                 engine: Engine | None) -> NoReturn:
        _check_args(("engine", test.engine(engine)))

    def offline(self, test: RunningTest, workload: Workload, engine: Engine | None) -> NoReturn:
        _check_args(("engine", test.engine(engine)))


def _check_args(*sides: tuple[str, Engine]) -> NoReturn:
    outcome = engine_or_fail(arg_check.check_engines, sides)
    if outcome.failure:
        pytest.fail(outcome.failure, pytrace=False)
    skipped = pytest.skip.Exception(outcome.summary)
    # -rs then names the test, not this line: what pytest does for a fixture's skip.
    skipped._use_item_location = True
    raise skipped


class CheckBaselines:
    """--llmperf-check-baselines: the first call's workload and engine against the test's
    committed tables (plugin/check_baselines.py); the test ends there."""

    def __init__(self, check: check_baselines.CheckBaselinesPlugin) -> None:
        self.check = check

    def run(self, test: RunningTest, workload: Workload, engine: Engine | None,
            repeat: int | None, slo: Any) -> NoReturn:
        self._end(test, "run", workload, engine)

    def ab(self, test: RunningTest, workload: Workload, a: Engine, b: Engine,
           pairs: int) -> NoReturn:
        self._end(test, "ab")

    def sweep(self, test: RunningTest, workload: Workload, rates, concurrencies,
              engine: Engine | None) -> NoReturn:
        self._end(test, "sweep")

    def capacity(self, test: RunningTest, workload: Workload, slo: Any, search: dict[str, Any],
                 engine: Engine | None) -> NoReturn:
        self._end(test, "capacity", workload, engine)

    def offline(self, test: RunningTest, workload: Workload, engine: Engine | None) -> NoReturn:
        self._end(test, "offline", workload, engine)

    def _end(self, test: RunningTest, call: str, workload: Workload | None = None,
             engine: Engine | None = None) -> NoReturn:
        """A call that writes no baseline table (ab, sweep) checks no identity."""
        identities = (None, None) if workload is None else (
            test.runner.engine_identity(test.engine(engine)),
            test.runner.workload_identity(workload))
        self.check.end_test(test.item, test.next_key(), *identities, call=call)


def measuring_of(settings: Settings,
                 later: confirm_later.ConfirmLaterPlugin | None = None) -> Measure:
    """What measuring is this session: a paired A/B under --llmperf-ab (`later`: the
    confirm-later plugin, where its confirm pairs wait for the engine's other tests)."""
    return AbMeasure(settings, later) if settings.ab else Measure()


def choose_measurer(settings: Settings, measuring: Measure | None = None, *,
                    check: check_baselines.CheckBaselinesPlugin | None = None) -> Measurer:
    """The built-in answer to `pytest_llmperf_make_measurer`: the first mode of MODES whose
    flag is given (settings.py's EXCLUSIVE refuses two at once), else `measuring`. `check`: the
    registered --llmperf-check-baselines plugin."""
    measuring = measuring or measuring_of(settings)
    for flag, make in MODES:
        if getattr(settings, flag):
            return make(measuring, check)
    return measuring


def _check_baselines(measuring: Measure, check: check_baselines.CheckBaselinesPlugin | None
                     ) -> CheckBaselines:
    assert check is not None, "registered with --llmperf-check-baselines (plugin/hooks.py)"
    return CheckBaselines(check)


# The built-in modes that measure nothing, by the flag that asks for each, in precedence order:
# each made from what measuring would be (CheckArgs checks what `run` would start: one engine,
# or both A/B sides) and the --llmperf-check-baselines plugin.
MODES = (("check_baselines", _check_baselines),
         ("check_args", lambda measuring, check: CheckArgs(measuring)))
