"""The live progress line: its text, and how often it is written on a terminal and in a CI log
(an injected clock: no sleeping)."""

from __future__ import annotations

from pytest_llmperf.client.progress import Snapshot
from pytest_llmperf.client.progressline import (
    Display,
    ProgressLine,
    for_measurement,
    render,
    showing,
)

TEST = "suites/test_cpu.py::test_fixed"


def snap(done: int, tokens: int) -> Snapshot:
    return Snapshot(in_flight=4, done=done, tokens=tokens, last_progress_s=0.0)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_line_says_test_done_of_total_rate_and_elapsed():
    assert render(TEST, snap(120, 24_680), 400, 20.0) == (
        "suites/test_cpu.py::test_fixed  120/400 requests  1,234 tok/s  20 s")


def test_a_long_test_id_is_cut_at_its_start_to_fit():
    line = render("suites/" + "x" * 200 + "::test_y", snap(1, 10), 2, 1.0, width=60)
    assert len(line) == 60
    assert line == "..." + "x" * 20 + "::test_y  1/2 requests  10 tok/s  1 s"


def line_on(tty: bool, column: int = 0) -> tuple[ProgressLine, list[str], Clock]:
    written, clock = [], Clock()
    display = Display(TEST, written.append, tty=tty, column=lambda: column)
    return ProgressLine(display, 400, clock=clock), written, clock


def test_on_a_terminal_the_line_is_rewritten_every_half_second_then_erased():
    line, written, clock = line_on(tty=True, column=22)
    for clock.now in (0.2, 0.5, 0.7, 1.0):
        line.update(snap(int(clock.now * 10), int(clock.now * 100)))
    line.close()
    assert written == [
        f"\n{TEST}  5/400 requests  100 tok/s  0 s\x1b[K",  # below pytest's own line
        f"\r{TEST}  10/400 requests  100 tok/s  1 s\x1b[K",
        "\r\x1b[K\x1b[1A\x1b[22C",  # erased; the cursor back at the end of pytest's line
    ]


def test_in_a_ci_log_one_line_every_ten_seconds_at_most():
    line, written, clock = line_on(tty=False, column=22)
    for step in range(1, 51):  # 25 s of updates, every half second
        clock.now = step / 2
        line.update(snap(step, step * 10))
    line.close()
    assert written == [
        f"\n{TEST}  20/400 requests  20 tok/s  10 s\n",  # not glued to pytest's dots
        f"{TEST}  40/400 requests  20 tok/s  20 s\n",
    ]


def test_a_measurement_shorter_than_ten_seconds_writes_nothing_in_a_ci_log():
    line, written, clock = line_on(tty=False)
    for step in range(1, 20):
        clock.now = step / 2
        line.update(snap(step, step))
    line.close()
    assert written == []


def test_only_a_test_with_a_display_gets_a_line():
    with showing(None):  # (this test itself runs under the plugin, which shows one)
        assert for_measurement(10) is None
        with showing(Display(TEST, print, tty=False)):
            assert isinstance(for_measurement(10), ProgressLine)
        assert for_measurement(10) is None
