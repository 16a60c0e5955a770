"""A pinned speculative acceptance (metrics/spec_pin.py): what a speculative_config pins, its
lines where vLLM would refuse it, the counters pooled over runs, and the self-check's lines."""

from __future__ import annotations

import math

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.metrics.spec_pin import (
    Measured,
    Pin,
    acceptance_problem,
    expect,
    length_to_rates,
    note,
    pin_of,
    synthetic_problem,
)

WHERE = "Engine(speculative_config=...)"


def synthetic(**pin) -> dict:
    return {"method": "ngram", "num_speculative_tokens": 3,
            "rejection_sample_method": "synthetic", **pin}


def counters(drafts: float, positions: list[float], draft_tokens: float | None = None) -> dict:
    """One run's flat server metrics as metrics/spec_decode.py derives them: `positions` are
    the accepted tokens at each position, every draft full length unless told."""
    accepted = sum(positions)
    run = {"server:spec_decode_drafts": drafts,
           "server:spec_decode_draft_tokens": (drafts * len(positions) if draft_tokens is None
                                               else draft_tokens),
           "server:spec_decode_accepted_tokens": accepted}
    run.update({f"server:spec_decode_acceptance_pos_{i}": accepted_at / drafts
                for i, accepted_at in enumerate(positions)})
    return run


@pytest.mark.parametrize(("length", "n", "rates"), [
    (2.5, 3, (1.0, 0.5, 0.0)),
    (1.0, 3, (0.0, 0.0, 0.0)),
    (4.0, 3, (1.0, 1.0, 1.0)),
    (3.0, 3, (1.0, 1.0, 0.0)),
    (1.75, 1, (0.75,)),
])
def test_a_length_becomes_vllms_minimum_variance_rates(length, n, rates):
    assert length_to_rates(length, n) == rates


def test_a_length_pins_its_rates_and_a_rate_per_token():
    pin = pin_of(synthetic(synthetic_acceptance_length=2.5))
    assert pin == Pin(2.5, (1.0, 0.5, 0.0), "synthetic_acceptance_length 2.5 of 3")
    assert pin.acceptance_rate == 0.5


def test_rates_pin_one_plus_their_sum_and_json_text_is_read_too():
    pin = pin_of('{"method": "ngram", "num_speculative_tokens": 3, '
                 '"rejection_sample_method": "synthetic", '
                 '"synthetic_acceptance_rates": [0.9, 0.5, 0.2]}')
    assert pin.length == pytest.approx(2.6)
    assert (pin.rates, pin.what) == ((0.9, 0.5, 0.2),
                                     "synthetic_acceptance_rates [0.9, 0.5, 0.2] of 3")
    assert pin.acceptance_rate == pytest.approx(1.6 / 3)


def test_an_engines_frozen_config_is_read():
    engine = Engine(model="m", speculative_config=synthetic(synthetic_acceptance_length=2.0))
    assert pin_of(engine.speculative_config).rates == (1.0, 0.0, 0.0)


@pytest.mark.parametrize("config", [
    None, {"method": "ngram", "num_speculative_tokens": 3}, "not json",
    synthetic(synthetic_acceptance_length=9),
])
def test_no_pin_without_a_servable_synthetic_config(config):
    assert pin_of(config) is None


@pytest.mark.parametrize(("config", "line"), [
    (synthetic(synthetic_acceptance_rates=[0.9, 1.2, 0.1]),
     f"{WHERE}: synthetic_acceptance_rates=[0.9, 1.2, 0.1] has a rate outside [0, 1]: each is "
     "the chance that the draft's tokens up to that position are all accepted"),
    (synthetic(synthetic_acceptance_rates=[-0.1, -0.2, -0.3]),
     f"{WHERE}: synthetic_acceptance_rates=[-0.1, -0.2, -0.3] has a rate outside [0, 1]: each "
     "is the chance that the draft's tokens up to that position are all accepted"),
    (synthetic(synthetic_acceptance_rates=[0.5, 0.6, 0.1]),
     f"{WHERE}: synthetic_acceptance_rates=[0.5, 0.6, 0.1] rises: each rate is unconditional "
     "(the first i+1 tokens all accepted), so it can only stay or fall from one position to the "
     "next"),
    (synthetic(synthetic_acceptance_rates=[0.9, 0.5]),
     f"{WHERE}: synthetic_acceptance_rates=[0.9, 0.5] needs one rate per draft position, 3 for "
     "num_speculative_tokens=3"),
    (synthetic(synthetic_acceptance_length=4.5),
     f"{WHERE}: synthetic_acceptance_length=4.5 is outside [1, 4]: a draft of "
     "num_speculative_tokens=3 accepts 1 to 4 tokens, the bonus token included"),
    (synthetic(synthetic_acceptance_length=0.5),
     f"{WHERE}: synthetic_acceptance_length=0.5 is outside [1, 4]: a draft of "
     "num_speculative_tokens=3 accepts 1 to 4 tokens, the bonus token included"),
    (synthetic(synthetic_acceptance_length="2.5"),
     f"{WHERE}: synthetic_acceptance_length='2.5' is outside [1, 4]: a draft of "
     "num_speculative_tokens=3 accepts 1 to 4 tokens, the bonus token included"),
    (synthetic(),
     f"{WHERE}: rejection_sample_method='synthetic' takes exactly one of "
     "synthetic_acceptance_rates (one rate per draft position) or synthetic_acceptance_length "
     "(a mean accepted length)"),
    (synthetic(synthetic_acceptance_length=2.5, synthetic_acceptance_rates=[1, 0.5, 0]),
     f"{WHERE}: rejection_sample_method='synthetic' takes exactly one of "
     "synthetic_acceptance_rates (one rate per draft position) or synthetic_acceptance_length "
     "(a mean accepted length)"),
    ({"method": "ngram", "rejection_sample_method": "synthetic",
      "synthetic_acceptance_length": 2.5},
     f"{WHERE}: a synthetic pin needs num_speculative_tokens, a whole number >= 1 (got None): "
     "the pin is checked against it"),
    ({"method": "ngram", "num_speculative_tokens": 3, "synthetic_acceptance_length": 2.5},
     f"{WHERE}: synthetic_acceptance_length is only used with "
     "rejection_sample_method='synthetic' (got None): add it, or drop the pin"),
])
def test_each_unservable_pin_gets_its_line(config, line):
    assert synthetic_problem(config) == line


def test_an_engine_with_an_unservable_pin_is_refused_where_it_is_written():
    with pytest.raises(InputError) as refused:
        Engine(model="m", speculative_config=synthetic(synthetic_acceptance_length=5))
    assert str(refused.value) == (
        f"{WHERE}: synthetic_acceptance_length=5 is outside [1, 4]: a draft of "
        "num_speculative_tokens=3 accepts 1 to 4 tokens, the bonus token included")


@pytest.mark.parametrize("config", [
    None, {"method": "ngram", "num_speculative_tokens": 3},
    synthetic(synthetic_acceptance_length=4), synthetic(synthetic_acceptance_rates=[1, 1, 1]),
])
def test_servable_configs_have_no_problem(config):
    assert synthetic_problem(config) is None


def test_counters_pool_over_runs_weighting_positions_by_drafts():
    measured = Measured.of([counters(100, [100, 50, 0]), counters(300, [300, 150, 30]),
                            {"ttft_s.p50": 0.1}])
    assert measured == Measured(400, 1200, 630, (1.0, 0.5, 0.075))
    assert measured.length == pytest.approx(2.575)
    assert measured.acceptance_rate == pytest.approx(630 / 1200)


def test_the_standard_error_comes_from_the_positions():
    # A in {1, 2} with equal chance: sd 0.5; over 400 drafts 0.025.
    measured = Measured.of([counters(400, [400, 200, 0])])
    assert measured.spread == pytest.approx(0.5)
    assert measured.standard_error == pytest.approx(0.025)


def test_no_counters_is_none_and_no_drafts_measure_nothing():
    assert Measured.of([{"ttft_s.p50": 0.1}]) is None
    nothing = Measured.of([{"server:spec_decode_drafts": 0.0,
                            "server:spec_decode_draft_tokens": 0.0,
                            "server:spec_decode_accepted_tokens": 0.0,
                            "server:spec_decode_acceptance_pos_0": math.nan}])
    assert nothing == Measured(0.0, 0.0, 0.0, ())
    assert math.isnan(nothing.length)


PIN = Pin(2.5, (1.0, 0.5, 0.0), "synthetic_acceptance_length 2.5 of 3")


def test_a_measured_length_within_the_tolerance_holds():
    assert acceptance_problem(PIN, Measured.of([counters(400, [400, 170, 0])])) is None


def test_a_measured_length_outside_the_tolerance_names_both():
    assert acceptance_problem(PIN, Measured.of([counters(400, [400, 140, 0])])) == (
        "speculative decoding: pinned acceptance length 2.50, measured 2.35 over 400 drafts: "
        "outside ±0.1 (synthetic_acceptance_length 2.5 of 3)")


def test_too_few_drafts_to_tell_says_how_many_are_needed():
    assert acceptance_problem(PIN, Measured.of([counters(20, [20, 10, 0])]), 0.1) == (
        "speculative decoding: pinned acceptance length 2.50 (synthetic_acceptance_length 2.5 "
        "of 3) cannot be checked within ±0.1: 20 drafts give a standard error of 0.112; send "
        "more output tokens (about 100 drafts) or widen the tolerance")


def test_nothing_drafted_is_a_miss_not_a_pass():
    assert acceptance_problem(PIN, None) == (
        "speculative decoding: pinned acceptance length 2.50 (synthetic_acceptance_length 2.5 "
        "of 3), measured none: the engine drafted nothing in the measured runs (no speculative "
        "decoding, no spec_decode counters on its /metrics, or a drafter that found nothing to "
        "propose)")


def test_the_v_line_shows_pinned_against_measured():
    runs = [counters(400, [400, 196, 0])]
    assert note(synthetic(synthetic_acceptance_length=2.5), runs) == (
        "speculative decoding pinned (synthetic_acceptance_length 2.5 of 3): acceptance length "
        "2.50, measured 2.49 over 400 drafts (within ±0.1, s.e. 0.025); acceptance rate 49.7%, "
        "pinned 50.0%; by position 1.00/0.49/0.00, pinned 1.00/0.50/0.00")
    assert note({"method": "ngram", "num_speculative_tokens": 3}, runs) is None
    assert note(synthetic(synthetic_acceptance_length=2.5), [{"ttft_s.p50": 0.1}]) == (
        "speculative decoding pinned (synthetic_acceptance_length 2.5 of 3): acceptance length "
        "2.50, measured none (no drafts)")


def test_the_v_line_says_outside_and_too_few():
    config = synthetic(synthetic_acceptance_length=2.5)
    assert "measured 2.35 over 400 drafts (outside ±0.1, s.e. 0.024)" in note(
        config, [counters(400, [400, 140, 0])])
    assert "measured 2.50 over 20 drafts (too few drafts to check ±0.1, s.e. 0.112)" in note(
        config, [counters(20, [20, 10, 0])])


def test_expect_returns_the_measured_length_or_fails_with_one_line():
    config = synthetic(synthetic_acceptance_length=2.5)
    assert expect(config, [counters(400, [400, 196, 0])]) == pytest.approx(2.49)
    with pytest.raises(AssertionError) as missed:
        expect(config, [counters(400, [400, 196, 0])], tolerance=0.005)
    assert str(missed.value) == (
        "speculative decoding: pinned acceptance length 2.50 (synthetic_acceptance_length 2.5 "
        "of 3) cannot be checked within ±0.005: 400 drafts give a standard error of 0.025; "
        "send more output tokens (about 39984 drafts) or widen the tolerance")


def test_expect_holds_a_golden_length_on_any_drafting_engine():
    ngram = {"method": "ngram", "num_speculative_tokens": 3}
    every_draft_right = [counters(96, [96, 96, 90])]  # tests/unit/metrics' captured CPU run
    assert expect(ngram, every_draft_right, length=3.94, tolerance=0.05) == pytest.approx(
        1 + 282 / 96)
    with pytest.raises(AssertionError) as missed:
        expect(ngram, every_draft_right, length=3.5)
    assert str(missed.value) == ("speculative decoding: pinned acceptance length 3.50, measured "
                                 "3.94 over 96 drafts: outside ±0.1 (golden 3.5)")


@pytest.mark.parametrize(("config", "length", "tolerance", "line"), [
    ({"method": "ngram", "num_speculative_tokens": 3}, None, 0.1,
     "result.expect_acceptance(): the engine pins no acceptance (its speculative_config has no "
     "rejection_sample_method='synthetic'): pin one with speculative_config="
     "pinned_acceptance(...) or state the length to hold: expect_acceptance(length=...)"),
    ({"method": "ngram", "num_speculative_tokens": 3}, 4.5, 0.1,
     "result.expect_acceptance(): length=4.5: a mean accepted length counts the bonus token, so "
     "it lies in [1, 4]"),
    (None, 0.5, 0.1,
     "result.expect_acceptance(): length=0.5: a mean accepted length counts the bonus token, so "
     "it lies in [1, num_speculative_tokens + 1]"),
    (synthetic(synthetic_acceptance_length=2.5), None, 0,
     "result.expect_acceptance(): tolerance=0: a number of tokens above 0 (the default is 0.1)"),
])
def test_expect_refuses_what_it_cannot_check(config, length, tolerance, line):
    with pytest.raises(InputError) as refused:
        expect(config, [counters(400, [400, 200, 0])], length, tolerance)
    assert str(refused.value) == line


def test_a_result_checks_its_own_engines_pin_over_every_run():
    def run(positions):
        return {"output_throughput_tok_s": 10.0, **counters(200, positions)}

    result = Result(test_id="t", key="t",
                    engine={"model": "m", "speculative_config":
                            synthetic(synthetic_acceptance_rates=[0.9, 0.5, 0.2])},
                    engine_label="m", workload={}, workload_label="w",
                    metrics=_metrics(run([180, 100, 40])),
                    runs=(_metrics(run([180, 100, 40])), _metrics(run([180, 104, 36]))),
                    records=())
    assert result.expect_acceptance(tolerance=0.1) == pytest.approx(2.6)


def _metrics(flat: dict):
    from pytest_llmperf.metrics.compute import RunMetrics
    return RunMetrics(flat)
