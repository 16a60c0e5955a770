"""plugin/measurers.py: the session's one measurer, chosen from the settings once; the fixture
hands it each call and never asks which one it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.plugin.check_baselines import CheckBaselinesPlugin
from pytest_llmperf.plugin.measurers import (
    AbMeasure,
    CheckArgs,
    CheckBaselines,
    Measure,
    choose_measurer,
)
from pytest_llmperf.session.settings import resolve

ENGINE = Engine(model="m", max_num_seqs=16)


def settings(**cli):
    return resolve(lambda name: cli.get(name), lambda ini: None, environ={})


def test_a_plain_session_measures():
    assert type(choose_measurer(settings())) is Measure


def test_an_ab_session_pairs_run_with_the_overrides_and_its_plan():
    chosen = choose_measurer(settings(ab={"max_num_seqs": 8}, ab_a={"max_num_seqs": 4},
                                      ab_pairs=6, ab_tolerance=0.2))
    assert type(chosen) is AbMeasure
    assert chosen.sides(ENGINE) == (ENGINE.replace(max_num_seqs=4),
                                    ENGINE.replace(max_num_seqs=8))
    assert (chosen.plan.pairs, chosen.plan.confirm_pairs, chosen.plan.tolerance) == (6, 4, 0.2)


@pytest.mark.parametrize(("ab", "measuring"), [(None, Measure), ({"max_num_seqs": 8}, AbMeasure)])
def test_check_args_checks_what_run_would_start(ab, measuring):
    chosen = choose_measurer(settings(check_args=True, ab=ab))
    assert type(chosen) is CheckArgs
    assert type(chosen.measuring) is measuring


def test_check_baselines_ends_each_test_at_the_registered_check():
    check = CheckBaselinesPlugin(Path("baselines"), Path("."))
    chosen = choose_measurer(settings(check_baselines=True, ab={"max_num_seqs": 8}), check=check)
    assert type(chosen) is CheckBaselines
    assert chosen.check is check
