"""Loss histograms and KL divergence, against hand-computed values and properties."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedchain.errors import DataError
from fedchain.fl.divergence import kl_divergence, loss_histogram, loss_kl, shared_edges


def test_histogram_counts_losses_into_shared_bins() -> None:
    """Losses [0, 0.2, 0.6, 1.0] over edges [0, 0.5, 1]: 2 in each bin -> [0.5, 0.5] (epsilon tiny)."""
    losses = torch.tensor([0.0, 0.2, 0.6, 1.0], dtype=torch.float64)

    histogram = loss_histogram(losses, torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64), epsilon=1e-15)

    torch.testing.assert_close(histogram, torch.tensor([0.5, 0.5], dtype=torch.float64))


def test_loss_kl_matches_the_closed_form() -> None:
    """p = [.75, .25], q = [.5, .5]: KL = .75 ln 1.5 + .25 ln .5 = 0.130812."""
    local = torch.tensor([0.0, 0.0, 0.0, 1.0])
    validation = torch.tensor([0.0, 0.0, 1.0, 1.0])

    expected = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)

    assert loss_kl(local, validation, bins=2, epsilon=1e-15) == pytest.approx(expected)


def test_empty_bins_give_a_finite_divergence() -> None:
    value = loss_kl(torch.tensor([0.0, 0.1]), torch.tensor([5.0, 5.1]))

    assert math.isfinite(value) and value > 1.0


def test_constant_losses_get_a_unit_range() -> None:
    edges = shared_edges(torch.tensor([2.0]), torch.tensor([2.0]), bins=2)

    assert edges.tolist() == [1.5, 2.0, 2.5]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    st.lists(st.floats(0, 10), min_size=1, max_size=30),
    st.lists(st.floats(0, 10), min_size=1, max_size=30),
)
def test_kl_is_non_negative_and_zero_for_identical_samples(first: list[float], second: list[float]) -> None:
    a, b = torch.tensor(first), torch.tensor(second)

    assert loss_kl(a, b) >= -1e-12
    assert loss_kl(a, a) == pytest.approx(0.0, abs=1e-12)


def test_kl_of_identical_distributions_is_zero() -> None:
    p = torch.tensor([0.2, 0.8], dtype=torch.float64)

    assert kl_divergence(p, p) == 0.0


def test_non_finite_losses_are_refused() -> None:
    with pytest.raises(DataError, match="finite per-sample losses"):
        loss_kl(torch.tensor([float("nan")]), torch.tensor([1.0]))
