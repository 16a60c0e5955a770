"""verdict/status.PRECEDENCE: which status holds when several do. A fact about the work outranks
a fact about the noise, which outranks any judgement of the numbers."""

import pytest

from pytest_llmperf.verdict import gate
from pytest_llmperf.verdict.references import Judgement
from pytest_llmperf.verdict.status import (
    NOISE,
    PRECEDENCE,
    WORK_FACTS,
    Status,
    decide,
    named_beside,
)


def test_every_status_has_one_place_in_the_table():
    assert sorted(PRECEDENCE) == sorted(Status)
    assert len(set(PRECEDENCE)) == len(PRECEDENCE)


def test_not_comparable_with_a_client_limited_side_is_not_comparable_naming_client_limited():
    decided = decide(Status.CLIENT_LIMITED, Status.NOT_COMPARABLE)
    assert decided == Status.NOT_COMPARABLE
    assert named_beside(decided, Status.CLIENT_LIMITED, Status.NOT_COMPARABLE) == [
        Status.CLIENT_LIMITED]


@pytest.mark.parametrize("work", WORK_FACTS)
@pytest.mark.parametrize("noise", NOISE)
def test_each_fact_about_the_work_outranks_each_about_the_noise(work, noise):
    assert decide(noise, work) == decide(work, noise) == work
    assert named_beside(work, noise, work) == [noise]


@pytest.mark.parametrize("numbers", [Status.REGRESSION, Status.MISSED, Status.INCONCLUSIVE,
                                     Status.PASS, Status.STALE, Status.NO_BASELINE])
def test_the_noise_outranks_a_judgement_of_the_numbers_and_is_not_named_beside_it(numbers):
    assert decide(numbers, Status.CLIENT_LIMITED) == Status.CLIENT_LIMITED
    assert decide(Status.DISTURBED, numbers) == Status.DISTURBED
    assert named_beside(Status.DISTURBED, Status.DISTURBED, Status.CLIENT_LIMITED) == []


def test_a_neighbour_outranks_the_client_it_also_slowed():
    assert decide(Status.CLIENT_LIMITED, Status.DISTURBED) == Status.DISTURBED


def test_nothing_given_decides_nothing():
    assert decide() is None
    assert decide(None, Status.PASS, None) == Status.PASS


def test_the_table_orders_the_numbers_as_a_judgement_does():
    """Judgement.status picks a missed target over a regression over an inconclusive A/B; the
    table must agree, or a test and its row would say different things."""
    missed, regressed, undecided = (
        gate.Verdict(name, status, 1.0, 0.5, 100.0, 0.0, 0.0, status.summary)
        for name, status in [("ttft_s.p90", Status.MISSED), ("tpot_s.p50", Status.REGRESSION),
                             ("e2el_s.p50", Status.INCONCLUSIVE)])
    for verdicts in ([missed, regressed, undecided], [regressed, undecided], [undecided]):
        judged = Judgement(report=gate.GateReport(tuple(verdicts))).status
        assert judged == decide(*(verdict.status for verdict in verdicts))
