"""The `llmperf` fixture's object: what a test calls to measure.

It gets plain callables and the test item, never the pytest config (pytest-benchmark's rule), so
it can be built and tested on its own.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from pytest_llmperf.checks import Judgement
from pytest_llmperf.engines.server import EngineStartError
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.result import Result
from pytest_llmperf.workloads import Workload


@dataclass(frozen=True, kw_only=True)
class TestOptions:
    """Keyword arguments of `@pytest.mark.llmperf(...)`; a typo is a TypeError."""

    __test__ = False  # not a test class, despite the name

    repeat: int | None = None
    slo: Any = None
    max_error_rate: float = 0.0
    tolerance: float | None = None


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
    mark = item.get_closest_marker("llmperf")
    if mark is None:
        return TestOptions()
    try:
        return TestOptions(*mark.args, **mark.kwargs)
    except TypeError as exc:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.llmperf: {exc}") from None


def baseline_key(item: pytest.Item, run_number: int) -> str:
    """The test's table in its suite's baseline file: the node id after the file name
    ("test_x[64]", "TestA::test_x"); a second run in the same test gets "#2", and so on."""
    key = item.nodeid.split("::", 1)[-1]
    return key if run_number == 1 else f"{key}#{run_number}"


# run(nodeid, key, engine, workload, repeat) -> Result, recorded for the session report.
RunFn = Callable[[str, str, Engine, Workload, int], Result]
# judge(item, result, options, slo) -> Judgement: the SLOs and the baseline gate.
JudgeFn = Callable[[pytest.Item, Result, TestOptions, Any], Judgement]


class Llmperf:
    """`llmperf.run(workload)` measures the marked engine; `engine=` picks another one."""

    def __init__(self, item: pytest.Item, run: RunFn, judge: JudgeFn,
                 default_repeat: int = 1) -> None:
        self._item = item
        self._run = run
        self._judge = judge
        self._default_repeat = default_repeat
        self.results: list[Result] = []

    @property
    def options(self) -> TestOptions:
        return options_of(self._item)

    def run(self, workload: Workload, *, engine: Engine | None = None,
            repeat: int | None = None, slo: Any = None) -> Result:
        """Measure `workload` on the engine; then check `slo` (or the marker's) and the
        baseline. A regression or a missed target fails the test here, after the result has
        been recorded for the report and the JSON file."""
        engine = engine or engine_of(self._item)
        if engine is None:
            pytest.fail(f"{self._item.nodeid}: no engine: add @pytest.mark.engine(Engine(...)) "
                        "or pass engine=... to llmperf.run", pytrace=False)
        options = self.options
        repeat = repeat or options.repeat or self._default_repeat
        key = baseline_key(self._item, len(self.results) + 1)
        try:
            result = self._run(self._item.nodeid, key, engine, workload, repeat)
        except EngineStartError as exc:
            failure = str(exc)
        else:
            failure = None
        if failure:  # outside the except block, so pytest shows one line, not a chained trace
            pytest.fail(failure, pytrace=False)
        self.results.append(result)
        self._check_errors(result, options.max_error_rate)
        judgement = self._judge(self._item, result, options, slo or options.slo)
        for message in judgement.warnings:
            warnings.warn(StaleBaselineWarning(message), stacklevel=2)
        if judgement.failed:
            pytest.fail(judgement.failure_text(), pytrace=False)
        return result

    @staticmethod
    def _check_errors(result: Result, limit: float) -> None:
        """Failed requests fail the test past the allowed rate; the result is already recorded."""
        if result.failed and result.error_rate > limit:
            errors = "; ".join(result.first_errors())
            pytest.fail(f"{result.failed} of {result.failed + result.completed} requests failed "
                        f"(error rate {result.error_rate:.1%}, allowed {limit:.1%}): {errors}",
                        pytrace=False)


class StaleBaselineWarning(UserWarning):
    """A metric improved beyond its band: the baseline no longer describes this engine."""
