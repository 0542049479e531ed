"""Fairness metrics: Pearson correlation and Jain's index."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedchain.errors import DataError
from fedchain.fl import jain_index, pearson


def test_pearson_matches_hand_computation() -> None:
    """x = [1, 2, 3], y = [2, 4, 7]: dx = [-1, 0, 1], dy = [-7/3, -1/3, 8/3], dx.dy = 5,
    |dx| = sqrt 2, |dy| = sqrt(114)/3 -> r = 15 / sqrt(228) = 0.993399."""
    assert pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(15 / math.sqrt(228))


def test_pearson_of_a_constant_sample_is_zero() -> None:
    assert pearson([1, 2, 3], [5, 5, 5]) == 0.0
    assert pearson([0.7, 0.7], [0.7, 0.7]) == 0.0


def test_pearson_of_perfectly_anticorrelated_samples_is_minus_one() -> None:
    assert pearson([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.floats(-100, 100), st.floats(-100, 100)), min_size=2, max_size=20))
def test_pearson_is_bounded_and_symmetric(pairs: list[tuple[float, float]]) -> None:
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]

    value = pearson(xs, ys)

    assert -1.0 <= value <= 1.0
    assert value == pytest.approx(pearson(ys, xs))


def test_pearson_refuses_mismatched_lengths() -> None:
    with pytest.raises(DataError, match="same length"):
        pearson([1, 2, 3], [1, 2])


def test_jain_index_matches_hand_computation() -> None:
    """[1, 2, 3]: 36 / (3 * 14) = 6/7; one of four gets all: 1/4; equal shares: 1."""
    assert jain_index([1, 2, 3]) == pytest.approx(6 / 7)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert jain_index([0.3, 0.3, 0.3]) == pytest.approx(1.0)
    assert jain_index([0, 0]) == 1.0


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.floats(0, 1000), min_size=1, max_size=20))
def test_jain_index_lies_between_one_over_n_and_one(values: list[float]) -> None:
    value = jain_index(values)

    assert 1 / len(values) - 1e-12 <= value <= 1 + 1e-12


def test_jain_index_refuses_negative_values() -> None:
    with pytest.raises(DataError, match="non-negative"):
        jain_index([1.0, -1.0])
