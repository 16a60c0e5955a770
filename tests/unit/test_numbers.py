"""The number checks every argument check and file reader shares."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_llmperf.numbers import finite_or_none, is_real, is_whole, number_or_nan


@pytest.mark.parametrize(("value", "expected"), [
    (1, True), (np.int64(3), True), (0, False), (True, False), (1.0, False), ("2", False),
    (None, False), (11, False),
])  # fmt: skip
def test_a_whole_number_is_an_integer_in_range_and_never_a_bool(value, expected):
    assert is_whole(value, 1, 10) is expected


@pytest.mark.parametrize(("value", "kwargs", "expected"), [
    (0.5, {"minimum": 0, "maximum": 1}, True),
    (np.float32(0.5), {"minimum": 0, "maximum": 1}, True),
    (1.5, {"minimum": 0, "maximum": 1}, False),
    (False, {}, False),
    (math.nan, {}, False),
    (math.nan, {"nan_ok": True}, True),
    (math.inf, {}, True),
    (math.inf, {"finite": True}, False),
    (0, {"above": 0}, False),
    (1e-9, {"above": 0}, True),
])  # fmt: skip
def test_a_real_number_is_a_number_in_range_and_nan_only_when_asked(value, kwargs, expected):
    assert is_real(value, **kwargs) is expected


@pytest.mark.parametrize(("value", "expected"), [
    (None, None), (math.nan, None), (math.inf, None), (-math.inf, None),
    (0, 0.0), (2.5, 2.5), (np.float64(3.0), 3.0),
])
def test_finite_or_none_keeps_only_finite_numbers(value, expected):
    found = finite_or_none(value)
    assert found == expected and (found is None or type(found) is float)


@pytest.mark.parametrize(("value", "expected"), [
    (0, 0.0), (2.5, 2.5), (np.int64(3), 3.0), (math.inf, math.inf), (-1, -1.0),
])
def test_number_or_nan_reads_a_number_as_a_float(value, expected):
    found = number_or_nan(value)
    assert found == expected and type(found) is float


@pytest.mark.parametrize("value", [None, True, "1.5", [1.0], {"value": 1.0}, math.nan])
def test_number_or_nan_reads_null_and_what_is_no_number_as_nan(value):
    assert math.isnan(number_or_nan(value))
