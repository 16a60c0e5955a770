"""pytest hooks of the reports beyond the terminal summary: each test's metrics as JUnit
properties, the failures' messages for the Markdown and HTML reports, and writing them at the
end.

Registered by plugin/hooks.py once the session exists, as a plugin of its own so the measuring hooks
and the reporting hooks stay apart.
"""

from __future__ import annotations

import pytest

from pytest_llmperf import ids
from pytest_llmperf.plugin import xdist
from pytest_llmperf.plugin.fixture import user_nodeid
from pytest_llmperf.reports import junit
from pytest_llmperf.reports.files import check_writable
from pytest_llmperf.session import outputs
from pytest_llmperf.session.provenance import git_commit

NAME = "llmperf-reports"


class ReportHooks:
    def __init__(self, config: pytest.Config, session_key, started_key) -> None:
        self.config = config
        self.session_key = session_key
        self.started_key = started_key
        self.failures: list[tuple[str, str]] = []  # node id, pytest's text of the failure

    @property
    def session(self):
        return self.config.stash[self.session_key]

    def pytest_configure(self, config: pytest.Config) -> None:
        """Every file the session will write, checked before anything is measured: a path that
        cannot be written is a usage error now, not a report lost after hours of benchmarks."""
        try:
            for _, file in outputs.files(self.session.config.outputs):
                if file.checked:
                    check_writable(file.option, file.given, file.path)
        except ValueError as exc:
            raise pytest.UsageError(f"pytest-llmperf: {exc}") from None

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: sees the final verdicts
    def pytest_runtest_makereport(self, item: pytest.Item, call):
        """As record_property does: on the item, so the teardown report, which is the one
        pytest's junitxml reads them from, carries them."""
        report = yield
        if report.when == "call":
            llmperf = self.session
            ledger = llmperf.ledger
            item.user_properties += junit.properties(
                user_nodeid(item), ledger.records,
                outputs.usd_per_hour(llmperf.config.outputs, ledger.hardware_class),
                root=llmperf.config.outputs.rootdir)
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Failures from every pytest-xdist worker arrive here on the controller too."""
        if report.failed and not xdist.is_worker(self.config):
            self.failures.append((ids.user_nodeid(report.nodeid), report.longreprtext))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """After plugin/hooks.py's own (tryfirst) one has gathered every worker's payload."""
        llmperf = self.session
        if xdist.is_worker(self.config) or not llmperf.payloads:
            return
        started = self.config.stash[self.started_key]
        provenance = {
            "started": started.isoformat(timespec="seconds"),
            "commit": git_commit(llmperf.config.outputs.rootdir),
            "command": " ".join(["pytest", *self.config.invocation_params.args]),
        }
        data = outputs.markdown_report(llmperf.payloads, failures=self.failures,
                                       fingerprint=llmperf.ledger.fingerprint,
                                       provenance=provenance)
        outputs.add_notes(llmperf.payloads,
                          outputs.write_reports(llmperf.config.outputs, llmperf.payloads, data))
