"""A/B confirm pairs measured minutes later: a suspect test is rerun after its engine's other tests.

On a shared machine one of two identical engines can run ~20% slower than the other for a minute
or so (docs/ab.md, "Confirm pairs"). Confirm pairs measured right after a suspect set often see
the same state, so they cleared only half of the false alarms. Measured after the other tests of
the same engines, they see the machine minutes later, while a real regression is still there.

How: when a test's first A/B pairs regress, the session keeps them and raises `ConfirmLater`
(session.run_ab). This plugin's `pytest_runtest_protocol` then holds the test's reports back
instead of logging them, and reruns the test once the last test of its engine has run; in the
rerun, run_ab measures the confirm pairs and the test is judged on all of them. Only the rerun's
reports are logged, so the test shows once, with its final outcome, after the others of its
engine. The engines stay up for the rerun (`keeps_engine`). pytest-rerunfailures reruns items
the same way (`runtestprotocol` with `log=False`). Not registered in a pytest-xdist worker,
which requires each report while its own test runs: there the confirm pairs follow at once.
"""

from __future__ import annotations

import pytest
from _pytest.runner import runtestprotocol

from pytest_llmperf.session.ab_run import ConfirmLater

__all__ = ["ConfirmLater", "ConfirmLaterPlugin"]

PLUGIN_NAME = "llmperf-confirm-later"


class ConfirmLaterPlugin:
    """Registered for A/B runs with confirm pairs, outside pytest-xdist workers
    (plugin.pytest_configure)."""

    def __init__(self, engine_of) -> None:
        self._engine_of = engine_of
        self._waiting: list[pytest.Item] = []  # deferred, in the order they ran
        self._rerunning: pytest.Item | None = None

    def may_defer(self, item: pytest.Item) -> bool:
        """Whether a regression in `item` may wait for a rerun (not in the rerun itself)."""
        return item is not self._rerunning

    def defer(self, item: pytest.Item) -> None:
        """`item` raised ConfirmLater (the fixture says so): rerun it at its group's end."""
        self._waiting.append(item)

    def keeps_engine(self, item: pytest.Item) -> bool:
        """Whether `item`'s engine must stay up past its teardown: it, or another test of
        its engine, waits for a rerun."""
        engine = self._engine_of(item)
        return any(self._engine_of(waiting) == engine for waiting in self._waiting)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool:
        group_ends = nextitem is None or self._engine_of(nextitem) != self._engine_of(item)
        # The last test of a group hands over to the first rerun, so what they share (module
        # fixtures) stays set up.
        reports = runtestprotocol(
            item, log=False, nextitem=self._waiting[0] if group_ends and self._waiting
            else nextitem)
        if item not in self._waiting:  # a deferred test's reports are dropped: the rerun's stand
            _log(item, reports)
        if group_ends:
            self._rerun_waiting(nextitem)
        return True

    def _rerun_waiting(self, nextitem: pytest.Item | None) -> None:
        """The last test of an engine has run: rerun those of its tests that wait, in order."""
        waiting = self._waiting
        while waiting:
            item = waiting.pop(0)
            self._rerunning = item
            try:
                reports = runtestprotocol(item, log=False,
                                          nextitem=waiting[0] if waiting else nextitem)
            finally:
                self._rerunning = None
            _log(item, reports)


def _log(item: pytest.Item, reports: list[pytest.TestReport]) -> None:
    """What pytest's own protocol does around runtestprotocol: the reports, framed by
    logstart and logfinish."""
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
