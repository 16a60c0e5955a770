"""What an item's marks say: its engine (`@pytest.mark.engine`) and its measurement options
(`@pytest.mark.llmperf`), and the node id a user would type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from pytest_llmperf import ids
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.numbers import is_real, is_whole
from pytest_llmperf.session.settings import CLIENT_CHECK_MODES
from pytest_llmperf.verdict.baselines import TOLERANCE_RULE, is_tolerance

__all__ = ["TestOptions", "engine_of", "options_of", "user_nodeid"]


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
