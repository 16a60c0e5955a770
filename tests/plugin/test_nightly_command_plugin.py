"""`llmperf nightly` end to end on a suite that starts no engine (tests/integration/
test_nightly_real.py runs it on the real engine): a real pytest session in a subprocess, a
SQLite store outside the suite's folder, a webhook receiver on 127.0.0.1. A clean night posts
nothing; failed tests post exactly their lines, and a webhook answering 500 changes nothing;
--max-minutes leaves tests out and names them; a store out of reach, a marker with no tests and
a missing GPU extra are one line each."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from pytest_llmperf.cli import main
from pytest_llmperf.nightly.outcomes import read_junit
from tests.webhook_receiver import Receiver

SUITE = """
import pytest

pytestmark = pytest.mark.cpu

def test_one():
    FAIL_ONE

def test_two():
    pass
"""
STOPPED = """
import pathlib, time, pytest

@pytest.mark.cpu
def test_long():
    pathlib.Path({started!r}).touch()
    time.sleep(60)
"""
FAILS = ('pytest.fail("tpot_s.p50 missed its target: 52.3 ms, target <= 40.0 ms", '
         'pytrace=False)')


@pytest.fixture
def night(tmp_path, monkeypatch):
    """Run `llmperf nightly` in a suite folder: night(fails=..., *more args) -> exit status."""
    folder = tmp_path / "checkout"
    folder.mkdir()
    monkeypatch.chdir(folder)
    for name in ("GITHUB_RUN_ID", "GITHUB_STEP_SUMMARY", "CI_JOB_URL", "BUILD_URL"):
        # the headline links no CI job, and the reports go to no step summary
        monkeypatch.delenv(name, raising=False)
    store = tmp_path / "store" / "history.sqlite"
    store.parent.mkdir()

    def run(*args: str, fails: bool = False, store_arg: str | None = None) -> int:
        (folder / "test_night.py").write_text(SUITE.replace("FAIL_ONE",
                                                            FAILS if fails else "pass"))
        return main(["nightly", "--marker", "cpu", "--store", store_arg or str(store), "--out",
                     "reports", "--publish", "site", "--suites", "test_night.py", *args,
                     "--", "-p", "no:cacheprovider"])

    run.folder = folder
    (folder / "test_night.py").write_text(SUITE.replace("FAIL_ONE", "pass"))
    return run


def test_a_clean_night_posts_nothing_and_publishes_the_page(night, monkeypatch, capsys):
    with Receiver() as receiver:
        monkeypatch.setenv("LLMPERF_WEBHOOK_URL", receiver.url)
        assert night() == 0
    assert receiver.bodies == []
    reports = night.folder / "reports"
    assert (reports / "failures.txt").read_text() == ""
    assert (reports / "junit.xml").is_file()
    page = (night.folder / "site/index.html").read_text()
    assert "<title>pytest-llmperf history</title>" in page
    assert capsys.readouterr().out.splitlines()[-1] == (
        "llmperf nightly: llmperf nightly -m cpu: 2 passed; exit status 0")


def test_failed_tests_post_their_lines_and_a_refusing_webhook_changes_nothing(night,
                                                                              monkeypatch,
                                                                              capsys):
    with Receiver(status=500) as receiver:
        monkeypatch.setenv("LLMPERF_WEBHOOK_URL", receiver.url)
        assert night(fails=True) == 1
    failures = (night.folder / "reports/failures.txt").read_text()
    assert failures == ("test_night.py::test_one: tpot_s.p50 missed its target: 52.3 ms, "
                        "target <= 40.0 ms\n")
    assert [body for _, body in receiver.bodies] == [
        {"text": "llmperf nightly -m cpu: 1 failed, 1 passed\n" + failures}]
    assert capsys.readouterr().err == (
        "llmperf nightly: the webhook ($LLMPERF_WEBHOOK_URL, host 127.0.0.1) answered HTTP "
        "500; the failures are in the reports\n")


def test_max_minutes_leaves_tests_out_and_names_them(night, monkeypatch, capsys):
    with Receiver() as receiver:
        monkeypatch.setenv("LLMPERF_WEBHOOK_URL", receiver.url)
        assert night("--max-minutes", "0.001") == 4  # 60 ms: gone before pytest has started
    left = ("left out by --max-minutes 0.001, which they would have overrun (2): "
            "test_night.py::test_one, test_night.py::test_two")
    assert f"llmperf nightly: {left}" in capsys.readouterr().out.splitlines()
    assert (night.folder / "reports/failures.txt").read_text() == left + "\n"
    assert [body["text"] for _, body in receiver.bodies] == [
        f"llmperf nightly -m cpu: 2 left out\n{left}\n"]


def test_a_store_out_of_reach_is_one_line_and_the_reports_are_still_written(night, capsys):
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert night(store_arg=f"postgresql://ci:pw@127.0.0.1:{port}/history") == 3
    err = capsys.readouterr().err
    assert err.startswith(
        "llmperf nightly: the store cannot be reached, so this night runs without it (no trend "
        f"gate, nothing recorded, no history page): --llmperf-history postgresql+psycopg://ci:"
        f"***@127.0.0.1:{port}/history: cannot use the database (")
    assert err.count("\n") == 1 and "pw" not in err
    reports = night.folder / "reports"
    assert read_junit(reports / "junit.xml", night.folder).passed == 2
    assert (reports / "report.md").read_text().startswith("## pytest-llmperf: nothing measured")
    assert (reports / "failures.txt").read_text() == err.removeprefix(
        "llmperf nightly: ")
    assert not (night.folder / "site/index.html").exists()


def test_no_test_marked_so_and_no_gpu_extra_are_one_line_each(night, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "vllm" else real(name, *a))
    assert main(["nightly", "--marker", "h200", "--store", str(night.folder.parent / "s.db"),
                 "--out", "reports", "--publish", "site", "--suites", "test_night.py"]) == 2
    assert capsys.readouterr().err == ("llmperf nightly: no test is marked h200 under "
                                       "test_night.py\n")
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "vllm" else real(name, *a))
    assert main(["nightly", "--marker", "h200", "--store", str(night.folder.parent / "s.db"),
                 "--out", "reports", "--publish", "site"]) == 2
    line = capsys.readouterr().err
    assert line.startswith("llmperf nightly: -m h200 selects GPU tests, and vLLM (the gpu extra) "
                           "is not installed for ")
    assert line.endswith("; install the GPU stack with `bash scripts/install-gpu`\n")
    assert (night.folder / "reports/failures.txt").read_text() == line.removeprefix(
        "llmperf nightly: ")


def test_a_stopped_night_still_writes_and_posts_its_line(night):
    """As a CI runner or Kubernetes stops a job: SIGTERM to the command alone."""
    started = night.folder / "started"
    (night.folder / "test_night.py").write_text(STOPPED.format(started=str(started)))
    with Receiver() as receiver:
        command = subprocess.Popen(
            [sys.executable, "-m", "pytest_llmperf.cli", "nightly", "--marker", "cpu", "--store",
             str(night.folder.parent / "store" / "history.sqlite"), "--out", "reports",
             "--publish", "site", "--suites", "test_night.py", "--", "-p", "no:cacheprovider"],
            cwd=night.folder, env={**os.environ, "LLMPERF_WEBHOOK_URL": receiver.url},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        waited = time.monotonic()
        while not started.exists():
            assert command.poll() is None and time.monotonic() - waited < 60
            time.sleep(0.1)
        command.send_signal(signal.SIGTERM)
        _, err = command.communicate(timeout=60)
    line = "pytest was interrupted (exit status 2); its output above says why"
    assert command.returncode == 2
    assert f"llmperf nightly: {line}\n" in err
    assert (night.folder / "reports/failures.txt").read_text() == line + "\n"
    assert [body["text"].splitlines()[-1] for _, body in receiver.bodies] == [line]
