"""The `llmperf` fixture's object: what a test calls to measure.

It gets plain callables and the test item, never the pytest config (pytest-benchmark's rule), so
it can be built and tested on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pytest

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


RunFn = Callable[[str, Engine, Workload, int], Result]


class Llmperf:
    """`llmperf.run(workload)` measures the marked engine; `engine=` picks another one."""

    def __init__(self, item: pytest.Item, run: RunFn, default_repeat: int = 1) -> None:
        self._item = item
        self._run = run
        self._default_repeat = default_repeat
        self.results: list[Result] = []

    @property
    def options(self) -> TestOptions:
        return options_of(self._item)

    def run(self, workload: Workload, *, engine: Engine | None = None,
            repeat: int | None = None) -> Result:
        engine = engine or engine_of(self._item)
        if engine is None:
            pytest.fail(f"{self._item.nodeid}: no engine: add @pytest.mark.engine(Engine(...)) "
                        "or pass engine=... to llmperf.run", pytrace=False)
        repeat = repeat or self.options.repeat or self._default_repeat
        try:
            result = self._run(self._item.nodeid, engine, workload, repeat)
        except EngineStartError as exc:
            failure = str(exc)
        else:
            failure = None
        if failure:  # outside the except block, so pytest shows one line, not a chained trace
            pytest.fail(failure, pytrace=False)
        self.results.append(result)
        self._check_errors(result)
        return result

    def _check_errors(self, result: Result) -> None:
        """Failed requests fail the test past the allowed rate; the result is already recorded."""
        limit = self.options.max_error_rate
        if result.failed and result.error_rate > limit:
            errors = "; ".join(result.first_errors())
            pytest.fail(f"{result.failed} of {result.failed + result.completed} requests failed "
                        f"(error rate {result.error_rate:.1%}, allowed {limit:.1%}): {errors}",
                        pytrace=False)
