"""bisect/search.py: which pair a bisection measures next and what it concludes, driven by an
oracle that says what each step would find."""

from __future__ import annotations

import math

import pytest

from pytest_llmperf.bisect.search import Finding, Outcome, Search


def drive(search: Search, oracle) -> list[tuple[int, int]]:
    """Run the search to its end; returns the pairs in the order measured."""
    taken = []
    while (pair := search.next_pair()) is not None:
        assert pair not in taken, f"measured {pair} twice"
        taken.append(pair)
        search.record(*pair, oracle(*pair))
    return taken


def planted(first_bad: int, failing=()):
    def oracle(a: int, b: int) -> Outcome:
        if b in failing:
            return Outcome.FAILED
        return Outcome.BAD if a < first_bad <= b else Outcome.GOOD
    return oracle


@pytest.mark.parametrize("count", range(2, 10))
def test_the_planted_candidate_is_found_against_its_neighbour(count):
    for first_bad in range(1, count):
        search = Search(count)
        taken = drive(search, planted(first_bad))
        assert search.finding() == Finding.FIRST_BAD
        assert search.in_question() == (first_bad - 1, first_bad)
        assert taken[0] == (0, count - 1)  # the far end first
        assert (first_bad - 1, first_bad) in taken  # the verdict's A/B was measured
        # a bisection: about log2 steps, plus the far end and the neighbours' own A/B
        assert len(taken) <= math.ceil(math.log2(count)) + 2


def test_every_step_compares_against_the_last_good_candidate():
    search = Search(8)
    taken = drive(search, planted(6))
    goods = [0]
    for a, b in taken:
        assert a == goods[-1]
        if search.measured[(a, b)] == Outcome.GOOD:
            goods.append(b)


def test_no_change_at_the_far_end_ends_the_search_in_one_step():
    search = Search(6)
    assert drive(search, planted(99)) == [(0, 5)]
    assert search.finding() == Finding.NO_CHANGE


def test_a_candidate_that_fails_is_skipped_and_the_search_goes_on_around_it():
    search = Search(8)
    taken = drive(search, planted(5, failing={4, 5}))
    assert search.skipped == {4, 5}
    # 5 cannot be measured: the first bad that can is 6, after the last good 3
    assert search.in_question() == (3, 6)
    assert search.finding() == Finding.FIRST_BAD
    assert (3, 6) in taken


def test_a_far_end_that_fails_moves_the_far_end_in():
    search = Search(5)
    taken = drive(search, planted(2, failing={4}))
    assert taken[:2] == [(0, 4), (0, 3)]
    assert search.in_question() == (1, 2)


def test_an_unsettled_step_stops_the_search_where_it_is():
    def oracle(a, b):
        return Outcome.BAD if (a, b) == (0, 7) else Outcome.UNSETTLED

    search = Search(8)
    assert drive(search, oracle) == [(0, 7), (0, 3)]
    assert search.finding() == Finding.UNSETTLED
    assert search.unsettled_at == (0, 3)
    assert search.in_question() == (0, 7)


def test_a_regression_spread_over_several_candidates_is_called_gradual():
    """Each candidate 3% slower than the one before, a band of 10%: the far end is worse than
    the first, but no neighbour is worse than the one before it."""
    def oracle(a, b):
        return Outcome.BAD if (b - a) * 0.03 > 0.10 else Outcome.GOOD

    search = Search(8)
    drive(search, oracle)
    assert search.finding() == Finding.GRADUAL


def test_nothing_measurable_when_every_later_candidate_fails():
    search = Search(4)
    drive(search, planted(2, failing={1, 2, 3}))
    assert search.finding() == Finding.NOTHING_MEASURABLE


def test_one_candidate_is_not_a_search():
    with pytest.raises(ValueError, match="at least 2 candidates, got 1"):
        Search(1)


def test_the_verdict_s_a_b_is_measured_again_before_the_search_names_it():
    search = Search(6, repeat_verdict=True)
    taken = []
    while (pair := search.next_pair()) is not None:
        taken.append((pair, search.is_repeat(*pair)))
        search.record(*pair, planted(3)(*pair))
    assert taken[-2:] == [((2, 3), False), ((2, 3), True)]
    assert search.finding() == Finding.FIRST_BAD


def test_a_first_bad_that_does_not_repeat_leaves_the_search_unsettled_there():
    """As on the 2-core VM: +5.2% once, 1.006 when measured again."""
    search = Search(4, repeat_verdict=True)
    repeats = []

    def oracle(a, b):
        if search.is_repeat(a, b):
            repeats.append((a, b))
            return Outcome.GOOD
        return planted(2)(a, b)

    while (pair := search.next_pair()) is not None:
        search.record(*pair, oracle(*pair))
    assert repeats == [(1, 2)]
    assert (search.finding(), search.unsettled_at, search.repeated) == (
        Finding.UNSETTLED, (1, 2), Outcome.GOOD)
