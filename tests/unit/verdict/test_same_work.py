"""The same work, or no verdict (verdict/same_work.py): the line that makes a comparison NOT
COMPARABLE, the outputs note, --llmperf-outputs must-match, and an old saved run."""

from __future__ import annotations

from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.verdict.same_work import Rule
from tests.work_records import FULL, record, work

EARLY = [record(i, 4, reason="stop") if i < 12 else record(i, 16) for i in range(32)]
OTHER_TEXT = [record(i, 16, digest=7) if i < 3 else record(i, 16) for i in range(32)]


def test_an_ab_side_that_stopped_early_is_not_comparable():
    check = Rule().check(work(FULL), {}, work(EARLY), {}, reference_name="A")
    assert check.incomparable == (
        "NOT COMPARABLE: the two sides did not execute the same work: B produced 0.72x the "
        "output tokens: 12 of 32 requests stopped early, finish_reason stop; finish_reason "
        "length on 62% of B's requests against 100% of A's; finish_reason stop on 38% of B's "
        "requests against 0% of A's")


def test_a_saved_run_names_which_side_is_which():
    check = Rule().check(work(FULL), {}, work(EARLY), {}, reference_name="the saved run")
    assert check.incomparable.startswith(
        "NOT COMPARABLE (A: the saved run, B: this run): the two sides did not execute")


def test_outputs_that_differ_are_a_note_unless_they_must_match():
    check = Rule().check(work(FULL), {}, work(OTHER_TEXT), {}, reference_name="A")
    assert (check.incomparable, check.notes) == (None, ["outputs differ on 3 of 32 requests"])
    strict = Rule(outputs_must_match=True).check(work(FULL), {}, work(OTHER_TEXT), {},
                                                 reference_name="A")
    assert strict.incomparable == (
        "NOT COMPARABLE: the two sides did not execute the same work: outputs differ on 3 of "
        "32 requests (--llmperf-outputs must-match)")
    same = Rule(outputs_must_match=True).check(work(FULL), {}, work(FULL), {},
                                               reference_name="A")
    assert (same.incomparable, same.notes) == (None, ["outputs identical on 32 of 32 requests"])


def test_engine_counters_come_from_the_estimates():
    check = Rule().check(work(FULL), {"server:spec_decode_acceptance_rate": Estimate(0.9, 0, 1)},
                         work(FULL), {"server:spec_decode_acceptance_rate": Estimate(0.6, 0, 1)},
                         reference_name="A")
    assert check.incomparable.endswith("speculative acceptance 60% on B against 90% on A")


def test_a_reference_without_a_work_record_is_compared_with_one_line():
    check = Rule().check(None, {}, work(FULL), {}, reference_name="the saved run")
    assert (check.incomparable, check.notes) == (None, [
        "the work could not be checked: the saved run has no record of the work it executed "
        "(written by an older pytest-llmperf); save it again to check it"])
    assert Rule().check(work(FULL), {}, None, {}, reference_name="A").notes == []
