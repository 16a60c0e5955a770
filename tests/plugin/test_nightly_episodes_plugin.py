"""`llmperf nightly` with LLMPERF_EPISODES=1 end to end on a suite that starts no engine: three
nights (a test fails, fails again, passes) post "opened" once and "resolved" once to the real
webhook receiver, with a summary line each night where asked, and no failure post; a receiver
that refuses the first night gets the message on the next, once; the published page lists the
open episode."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_llmperf.cli import main
from tests.plugin.nightly_checkout import checkout
from tests.webhook_receiver import Receiver

SUITE = """
import pytest

@pytest.mark.cpu
def test_one():
    {body}

@pytest.mark.cpu
def test_two():
    pass
"""
MISSED = 'pytest.fail("tpot_s.p50 missed its target: 52.3 ms, target <= 40.0 ms", pytrace=False)'


@pytest.fixture
def nights(tmp_path, monkeypatch):
    """nights(failing, ...) -> the exit statuses of one `llmperf nightly` per night."""
    folder, store = checkout(tmp_path, monkeypatch)

    def run(*failing: bool) -> list[int]:
        codes = []
        for fails in failing:
            (folder / "test_night.py").write_text(SUITE.format(body=MISSED if fails else "pass"))
            codes.append(main(["nightly", "--marker", "cpu", "--store", str(store), "--out",
                               "reports", "--publish", "site", "--suites", "test_night.py",
                               "--", "-p", "no:cacheprovider"]))
        return codes

    return run


def test_three_nights_post_opened_once_resolved_once_and_a_summary_each(nights, monkeypatch):
    with Receiver() as receiver:
        monkeypatch.setenv("LLMPERF_WEBHOOK_URL", receiver.url)
        monkeypatch.setenv("LLMPERF_EPISODES", "1")
        monkeypatch.setenv("LLMPERF_NIGHT_SUMMARY", "1")
        assert nights(True, True, False) == [1, 1, 0]
    assert [body["text"] for _, body in receiver.bodies] == [
        "opened: test_night.py::test_one: tpot_s.p50 missed its target: 52.3 ms, target <= "
        "40.0 ms",
        "llmperf nightly -m cpu: 1 failed, 1 passed",
        "llmperf nightly -m cpu: 1 failed, 1 passed",
        "resolved (passed): test_night.py::test_one: passed",
        "llmperf nightly -m cpu: 2 passed"]


def test_a_receiver_that_refuses_gets_the_post_on_the_next_night_once(nights, monkeypatch,
                                                                       capsys):
    with Receiver(status=500) as receiver:
        monkeypatch.setenv("LLMPERF_WEBHOOK_URL", receiver.url)
        monkeypatch.setenv("LLMPERF_EPISODES", "1")
        assert nights(True) == [1]
        assert capsys.readouterr().err == (
            "llmperf nightly: the webhook ($LLMPERF_WEBHOOK_URL, host 127.0.0.1) answered HTTP "
            "500; the failures are in the reports (kept in the store's outbox for the next "
            "run)\n")
        receiver.status = 200
        assert nights(True, True) == [1, 1]
    opened = ("opened: test_night.py::test_one: tpot_s.p50 missed its target: 52.3 ms, target "
              "<= 40.0 ms")
    assert [body["text"] for _, body in receiver.bodies] == [opened, opened]  # refused, taken
    page = Path("site/index.html").read_text()  # the published page lists the open episode
    assert ("<h2>Open episodes</h2>" in page) and re.search(
        r'<li><span class="open">failed</span>: test_night.py::test_one: tpot_s.p50 missed its '
        r"target: 52.3 ms, target &lt;= 40.0 ms \(open since \d{4}-\d\d-\d\d, 0 days, 3 "
        r"nights\)</li>", page)
