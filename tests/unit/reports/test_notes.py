"""Folding the notes under the summary: the same thing said of many tests becomes one line."""

from __future__ import annotations

import re

from pytest_llmperf.reports.notes import Note
from pytest_llmperf.reports.notes import fold as fold_notes

# "<file>.py::<rest>: <text>" as the summary shows a note about a test.
ABOUT_A_TEST = re.compile(r"^(?P<id>\S+\.py::.+?): (?P<text>.+)$")


def fold(lines: list[str]) -> list[str]:
    """The notes these summary lines show, folded."""
    notes = []
    for line in lines:
        match = ABOUT_A_TEST.match(line)
        notes.append(Note(match["id"], match["text"]) if match else Note(None, line))
    return fold_notes(notes)


def other_hardware(test_id: str, toml: str) -> str:
    key = test_id.split("::", 1)[1]
    return (f'{test_id}: baselines/cpu/{toml}: ["{key}"]: baseline is from other hardware '
            '(cpu_family 25 -> 26); not gated')


def test_other_hardware_in_three_files_is_one_line_that_counts_the_tests():
    notes = [other_hardware("suites/test_cpu.py::test_a", "test_cpu.toml"),
             other_hardware("suites/test_cpu.py::test_b[x]", "test_cpu.toml"),
             other_hardware("suites/test_w.py::test_c", "test_w.toml")]
    # The files as one pattern; the differing keys (a location, ["test_a"]:) left out.
    assert fold(notes) == [
        "3 tests: baselines/cpu/test_*.toml: baseline is from other hardware (cpu_family 25 -> "
        "26); not gated (-v lists each)"]


def test_a_location_they_share_is_kept():
    notes = [other_hardware("suites/test_cpu.py::test_a", "test_cpu.toml"),
             other_hardware("suites/test_cpu.py::test_b", "test_cpu.toml")]
    assert fold(notes) == [
        "2 tests: baselines/cpu/test_cpu.toml: baseline is from other hardware (cpu_family "
        "25 -> 26); not gated (-v lists each)"]


def test_a_differing_word_that_is_not_a_location_shows_as_dots():
    notes = ['s/t.py::test_a: no baseline for this hardware: baselines/cpu/t.toml has no '
             '["test_a"]',
             's/t.py::test_b: no baseline for this hardware: baselines/cpu/t.toml has no '
             '["test_b"]']
    assert fold(notes) == ["2 tests: no baseline for this hardware: baselines/cpu/t.toml has no "
                           "... (-v lists each)"]


def test_differing_paths_that_are_not_a_location_become_a_pattern_too():
    notes = ['s/t.py::test_a: no baseline for this hardware: b/cpu/t.toml has no ["test_a"]',
             's/t2.py::test_a: no baseline for this hardware: b/cpu/t2.toml has no ["test_a"]']
    assert fold(notes) == ['2 tests: no baseline for this hardware: b/cpu/t*.toml has no '
                           '["test_a"] (-v lists each)']


def test_different_facts_stay_apart_and_a_single_note_is_kept_whole():
    notes = [other_hardware("s/t.py::test_a", "t.toml"),
             "s/t.py::test_b: baselines/cpu/t.toml: [\"test_b\"]: baseline is from other "
             "hardware (cpu_cores 64 -> 2); not gated",
             other_hardware("s/t.py::test_c", "t.toml")]
    assert fold(notes) == [
        "2 tests: baselines/cpu/t.toml: baseline is from other hardware (cpu_family 25 -> 26); "
        "not gated (-v lists each)",
        notes[1]]


def test_notes_about_no_test_are_kept_once_in_order():
    notes = ["server metrics unavailable", "results written to r.json",
             "server metrics unavailable"]
    assert fold(notes) == ["server metrics unavailable", "results written to r.json"]


def test_nothing_to_fold():
    assert fold([]) == []
