"""`llmperf nightly`'s pure parts: the failures text, the headline, the exit status, the lines of
a pytest that said nothing, the deadline rule, the GPU check, the pytest command line; and the
webhook against a local receiver that takes, refuses (500) or never answers."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from pytest_llmperf.nightly import command, webhook
from pytest_llmperf.nightly import outcomes as oc
from pytest_llmperf.session.deadline import left_out_reason
from tests.webhook_receiver import Receiver

DEADLINE = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC


def test_failure_lines_are_each_verdict_line_after_its_test():
    failed = [("suites/test_a.py::test_x",
               "tpot_s.p50 missed its target: 52.3 ms, target <= 40.0 ms\n"
               "e2el_s.p50 regressed: 900 ms vs baseline 100 ms\n"),
              ("suites/test_a.py::test_y", "AssertionError: assert 48 == 64"),
              ("suites/test_a.py::test_z", "")]
    assert oc.failure_lines(failed) == [
        "suites/test_a.py::test_x: tpot_s.p50 missed its target: 52.3 ms, target <= 40.0 ms",
        "suites/test_a.py::test_x: e2el_s.p50 regressed: 900 ms vs baseline 100 ms",
        "suites/test_a.py::test_y: AssertionError: assert 48 == 64",
        "suites/test_a.py::test_z: failed"]


def test_a_long_message_is_cut_after_ten_lines():
    message = "\n".join(f"line {n}" for n in range(1, 15))
    lines = oc.failure_lines([("t.py::a", message)])
    assert lines[-2:] == ["t.py::a: line 10", "t.py::a: ... 4 more lines in the reports"]
    assert len(lines) == 11


def test_the_left_out_line_and_the_headline():
    assert oc.left_out_line(["s.py::b", "s.py::c"], "--max-minutes 0.5") == (
        "left out by --max-minutes 0.5, which they would have overrun (2): s.py::b, s.py::c")
    found = oc.Outcomes(passed=3, failed=[("s.py::a", "x")], left_out=["s.py::b"], skipped=2)
    assert oc.headline("h200", found, "https://ci/job/7") == (
        "llmperf nightly -m h200: 1 failed, 3 passed, 1 left out, 2 skipped (https://ci/job/7)")
    assert oc.headline("h200", oc.Outcomes()) == "llmperf nightly -m h200: no test ran"


@pytest.mark.parametrize(("returncode", "store_ok", "failed", "left_out", "status"), [
    (0, True, False, False, 0),
    (1, True, True, False, 1),
    (1, True, True, True, 1),      # a failure says more than a budget
    (0, True, False, True, 4),
    (1, False, True, False, 3),    # no store: the night is not what the trend gate would say
    (0, False, False, False, 3),
    (5, True, False, False, 2),    # no test marked so
    (4, False, False, False, 2),   # pytest refused its command line
    (2, True, True, False, 2),     # interrupted
    (6, True, False, False, 2),    # --llmperf-expect's stop
])
def test_the_exit_status_is_the_first_that_applies(returncode, store_ok, failed, left_out,
                                                   status):
    found = oc.Outcomes(failed=[("a", "b")] if failed else [], left_out=["c"] if left_out else [])
    assert oc.exit_status(returncode, store_ok=store_ok, outcomes=found) == status


def test_the_lines_of_a_pytest_that_could_not_say_pass_or_fail():
    assert oc.pytest_problem(0, "h200", ["suites/"]) is None
    assert oc.pytest_problem(1, "h200", ["suites/"]) is None
    assert oc.pytest_problem(5, "h200", ["suites/"]) == "no test is marked h200 under suites/"
    assert oc.pytest_problem(4, "h200", ["a/", "b/"]) == (
        "pytest refused its command line (exit status 4); its output above says why")
    assert oc.pytest_problem(6, "h200", ["suites/"]) == (
        "pytest stopped (exit status 6); its output above says why")


def test_the_deadline_rule():
    assert left_out_reason(DEADLINE - 100, DEADLINE, None) is None  # nothing known: it starts
    assert left_out_reason(DEADLINE - 100, DEADLINE, 99.0) is None
    assert left_out_reason(DEADLINE - 100, DEADLINE, 101.0) == (
        "left out: the deadline 08:00:00 UTC (--llmperf-deadline) would be overrun: 100 s left, "
        "and the longest test so far took 101 s")
    assert left_out_reason(DEADLINE + 3, DEADLINE, None) == (
        "left out: the deadline 08:00:00 UTC (--llmperf-deadline) passed 3 s ago")


def test_node_ids_from_junit_classnames(tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites/test_gpu.py").write_text("")
    assert oc.node_id("suites.test_gpu", "test_a[8]", tmp_path) == "suites/test_gpu.py::test_a[8]"
    assert oc.node_id("suites.test_gpu.TestB", "test_c", tmp_path) == (
        "suites/test_gpu.py::TestB::test_c")
    assert oc.node_id("suites.test_gpu", "test_a@llmperf-0123abcd", tmp_path) == (
        "suites/test_gpu.py::test_a")  # pytest-xdist's group suffix, as a user never types it
    assert oc.node_id("elsewhere.test_x", "test_d", tmp_path) == "elsewhere.test_x::test_d"


def test_the_gpu_extra_is_named_when_vllm_is_missing():
    def missing(name):
        return None

    assert command.gpu_extra_missing("h200", missing) == (
        f"-m h200 selects GPU tests, and vLLM (the gpu extra) is not installed for "
        f"{sys.executable}; install the GPU stack with `bash scripts/install-gpu`")
    assert command.gpu_extra_missing("cpu", missing) is None
    assert command.gpu_extra_missing("h200 and not nightly", lambda name: object()) is None


def test_the_headline_links_the_ci_job():
    github = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "org/repo",
              "GITHUB_RUN_ID": "123"}
    assert command.ci_job_url(github) == "https://github.com/org/repo/actions/runs/123"
    assert command.ci_job_url({"CI_JOB_URL": "https://gitlab.com/org/repo/-/jobs/9"}) == (
        "https://gitlab.com/org/repo/-/jobs/9")
    assert command.ci_job_url({"BUILD_URL": "https://ci.example/job/n/4/"}) == (
        "https://ci.example/job/n/4/")
    assert command.ci_job_url({}) is None


def test_the_pytest_command_line():
    argv = command.pytest_argv("h200", ["suites/"], Path("/r"),
                               DEADLINE + 0.4, ["-k", "llama"], trend=True)
    assert argv == [sys.executable, "-m", "pytest", "-m", "h200", "suites/",
                    "--llmperf-nightly",
                    "--llmperf-json=/r/run.json", "--llmperf-markdown=/r/report.md",
                    "--llmperf-html=/r/report.html", "--junitxml=/r/junit.xml",
                    "--llmperf-log-dir=/r/logs", "--llmperf-trend",
                    "--llmperf-deadline=1800000000", "-k", "llama"]


def test_the_webhook_gets_slack_json():
    with Receiver() as receiver:
        assert webhook.post(receiver.url, "line 1\nline 2\n") is None
    assert receiver.bodies == [("application/json", {"text": "line 1\nline 2\n"})]


def test_a_webhook_that_refuses_or_never_answers_is_one_line_without_its_url():
    with Receiver(status=500) as receiver:
        assert webhook.post(receiver.url, "x") == (
            "the webhook ($LLMPERF_WEBHOOK_URL, host 127.0.0.1) answered HTTP 500; the failures "
            "are in the reports")
    with Receiver(delay_s=2.0) as receiver:
        started = time.monotonic()
        assert webhook.post(receiver.url, "x", timeout_s=0.3) == (
            "the webhook ($LLMPERF_WEBHOOK_URL, host 127.0.0.1) did not answer within 0.3 s; "
            "the failures are in the reports")
        assert time.monotonic() - started < 1.5
    assert webhook.post("http://127.0.0.1:9/hook", "x") == (
        "the webhook ($LLMPERF_WEBHOOK_URL, host 127.0.0.1) could not be reached "
        "(ConnectError); the failures are in the reports")
