"""--llmperf-cost-per-hour: parsing, per hardware class, and $ per 1M tokens."""

from __future__ import annotations

import pytest

from pytest_llmperf.metrics.cost import (
    PER_OUTPUT,
    PER_TOTAL,
    RULE,
    for_hardware,
    missing_note,
    parse_cost_per_hour,
    per_million_tokens,
)


def test_one_price_for_any_hardware():
    assert parse_cost_per_hour(" 2.49 ") == 2.49
    assert for_hardware(2.49, "h100") == for_hardware(2.49, "cpu") == 2.49
    assert for_hardware(None, "cpu") is None


def test_a_price_per_hardware_class():
    prices = parse_cost_per_hour("h100=2.49, H200 = 3.5,\ncpu=0.1,")
    assert prices == {"h100": 2.49, "h200": 3.5, "cpu": 0.1}
    assert for_hardware(prices, "h200") == 3.5
    assert for_hardware(prices, "a100-80gb") is None
    assert missing_note(prices, "a100-80gb") == (
        "no cost columns: --llmperf-cost-per-hour has no price for hardware class a100-80gb "
        "(it has h100, h200, cpu); add a100-80gb=USD")
    assert missing_note(prices, "cpu") is None and missing_note(2.0, "cpu") is None


@pytest.mark.parametrize("text", ["", "free", "0", "-1", "nan", "inf", "h100", "h100=",
                                  "tpu=2", "h100=2,cpu=x", ","])
def test_a_bad_price_says_what_is_expected(text):
    with pytest.raises(ValueError) as error:
        parse_cost_per_hour(text)
    assert str(error.value) == RULE
    assert RULE.startswith("expected what the machine costs in US dollars per hour")


def test_dollars_per_million_tokens():
    # $3.60 an hour is $0.001 a second; at 1000 tok/s that is $1 per million tokens.
    values = {"output_throughput_tok_s": 1000.0, "total_throughput_tok_s": 4000.0}
    assert per_million_tokens(values, 3.6) == {PER_OUTPUT: pytest.approx(1.0, rel=1e-12),
                                               PER_TOTAL: pytest.approx(0.25, rel=1e-12)}


def test_no_price_or_no_throughput_no_cost():
    values = {"output_throughput_tok_s": 1000.0, "total_throughput_tok_s": None}
    assert per_million_tokens(values, None) == {PER_OUTPUT: None, PER_TOTAL: None}
    assert per_million_tokens(values, 3.6)[PER_TOTAL] is None
    assert per_million_tokens({"output_throughput_tok_s": 0.0}, 3.6)[PER_OUTPUT] is None
