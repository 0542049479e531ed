"""Robust aggregation rules against hand-computed values (Flower's formulas) and their properties."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

from fedchain.errors import ConfigError
from fedchain.fl.robust import (
    coordinate_median,
    krum_scores,
    krum_selection,
    leave_one_out_medians,
    multi_krum,
    norm_clipped_mean,
    trimmed_mean,
)

F64 = torch.float64
Rule = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def ones(n: int) -> torch.Tensor:
    return torch.ones(n, dtype=F64)


def everyone(n: int) -> torch.Tensor:
    return torch.ones(n, dtype=torch.bool)


RULES: dict[str, Rule] = {
    "median": coordinate_median,
    "trimmed mean": lambda u, w, m: trimmed_mean(u, w, m, beta=0.2),
    "multi-krum": lambda u, w, m: multi_krum(u, w, m, f=1, to_keep=3),
    "norm clipping": lambda u, w, m: norm_clipped_mean(u, w, m, max_norm=1.0),
}


def test_coordinate_median_takes_the_middle_value_of_each_coordinate() -> None:
    updates = torch.tensor([[1.0, 10.0], [2.0, 20.0], [100.0, -5.0]])

    torch.testing.assert_close(coordinate_median(updates, ones(3), everyone(3)), torch.tensor([2.0, 10.0]))


def test_coordinate_median_of_an_even_count_averages_the_two_middle_values_like_numpy() -> None:
    updates = torch.randn(6, 50, generator=torch.Generator().manual_seed(0), dtype=F64)

    median = coordinate_median(updates, ones(6), everyone(6))

    np.testing.assert_allclose(median.numpy(), np.median(updates.numpy(), axis=0))


def test_coordinate_median_weighs_clients() -> None:
    """Values 1, 2, 3 with weights 1, 1, 5: cumulative 1, 2, 7 passes half (3.5) at 3."""
    updates = torch.tensor([[1.0], [2.0], [3.0]])

    assert coordinate_median(updates, torch.tensor([1.0, 1.0, 5.0], dtype=F64), everyone(3)).item() == 3.0


def test_trimmed_mean_drops_the_extremes_of_each_coordinate() -> None:
    """5 values, beta 0.2: one cut from each end; [1, 2, 3, 4, 100] -> mean(2, 3, 4) = 3."""
    updates = torch.tensor([[1.0, -100.0], [2.0, 1.0], [3.0, 2.0], [4.0, 3.0], [100.0, 4.0]])

    torch.testing.assert_close(trimmed_mean(updates, ones(5), everyone(5), beta=0.2), torch.tensor([3.0, 2.0]))


def test_trimmed_mean_weighs_the_kept_values() -> None:
    """Kept 2, 3, 4 with weights 1, 1, 2: (2 + 3 + 8) / 4 = 3.25."""
    updates = torch.tensor([[1.0], [2.0], [3.0], [4.0], [100.0]])
    weights = torch.tensor([9.0, 1.0, 1.0, 2.0, 9.0], dtype=F64)

    assert trimmed_mean(updates, weights, everyone(5), beta=0.2).item() == pytest.approx(3.25)


def test_trimmed_mean_with_beta_zero_is_the_weighted_mean() -> None:
    updates = torch.randn(4, 10, generator=torch.Generator().manual_seed(1), dtype=F64)
    weights = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=F64)

    torch.testing.assert_close(trimmed_mean(updates, weights, everyone(4), beta=0.0), weights @ updates / 10)


@pytest.mark.parametrize(("beta", "n"), [(0.5, 4), (-0.1, 4), (0.4, 0)])
def test_trimmed_mean_refuses_a_beta_outside_its_range_or_a_round_without_updates(beta: float, n: int) -> None:
    with pytest.raises(ConfigError):
        trimmed_mean(torch.zeros(n, 3), ones(n), everyone(n), beta=beta)


def test_krum_scores_sum_the_squared_distances_to_the_nearest_others() -> None:
    """Points 0, 1, 2, 10 with f = 1: each scores its m - f - 2 = 1 nearest squared distance: 1, 1, 1, 64."""
    updates = torch.tensor([[0.0], [1.0], [2.0], [10.0]])

    torch.testing.assert_close(krum_scores(updates, everyone(4), f=1), torch.tensor([1.0, 1.0, 1.0, 64.0], dtype=F64))


def test_krum_picks_one_update_of_the_cluster_and_multi_krum_averages_the_cluster() -> None:
    updates = torch.tensor([[0.0], [1.0], [2.0], [10.0]])
    weights = torch.tensor([1.0, 1.0, 2.0, 1.0], dtype=F64)

    assert multi_krum(updates, weights, everyone(4), f=1, to_keep=0).item() == 0.0
    assert krum_selection(updates, everyone(4), f=1, to_keep=3).tolist() == [True, True, True, False]
    assert multi_krum(updates, weights, everyone(4), f=1, to_keep=3).item() == pytest.approx((0 + 1 + 4) / 4)


def test_multi_krum_keeps_the_honest_cluster_against_two_colluding_outliers() -> None:
    generator = torch.Generator().manual_seed(2)
    honest = 1.0 + 0.1 * torch.randn(6, 20, generator=generator)
    attackers = torch.full((2, 20), -50.0)
    updates = torch.cat([honest, attackers])

    chosen = krum_selection(updates, everyone(8), f=2, to_keep=4)

    assert chosen[:6].sum() == 4 and not chosen[6:].any()


def test_norm_clipping_scales_large_updates_down_before_the_mean() -> None:
    """[3, 4] (norm 5) clipped to norm 2 is [1.2, 1.6]; [0, 1] stays; mean [0.6, 1.3]."""
    updates = torch.tensor([[3.0, 4.0], [0.0, 1.0]])

    torch.testing.assert_close(norm_clipped_mean(updates, ones(2), everyone(2), max_norm=2.0), torch.tensor([0.6, 1.3]))


@pytest.mark.parametrize("name", sorted(RULES))
def test_every_rule_is_invariant_to_the_order_of_the_clients(name: str) -> None:
    generator = torch.Generator().manual_seed(3)
    updates = torch.randn(7, 30, generator=generator, dtype=F64)
    weights = torch.rand(7, generator=generator, dtype=F64) + 0.5
    order = torch.randperm(7, generator=generator)

    before = RULES[name](updates, weights, everyone(7))
    after = RULES[name](updates[order], weights[order], everyone(7))

    torch.testing.assert_close(before, after)


@pytest.mark.parametrize("name", sorted(RULES))
def test_every_rule_ignores_masked_out_rows_even_when_they_are_nan(name: str) -> None:
    generator = torch.Generator().manual_seed(4)
    updates = torch.randn(6, 30, generator=generator, dtype=F64)
    with_nan = torch.cat([updates, torch.full((1, 30), math.nan, dtype=F64)])
    mask = torch.tensor([True] * 6 + [False])

    torch.testing.assert_close(RULES[name](with_nan, ones(7), mask), RULES[name](updates, ones(6), everyone(6)))


@pytest.mark.parametrize("name", sorted(RULES))
def test_every_rule_of_identical_updates_is_that_update(name: str) -> None:
    update = torch.tensor([0.3, -0.4], dtype=F64)  # norm 0.5, below the clipping norm

    torch.testing.assert_close(RULES[name](update.expand(5, -1), ones(5), everyone(5)), update)


def test_leave_one_out_medians_are_the_median_of_the_others_computed_one_by_one() -> None:
    generator = torch.Generator().manual_seed(5)
    updates = torch.randn(7, 40, generator=generator, dtype=F64)
    mask = torch.tensor([True, True, False, True, True, True, True])

    medians = leave_one_out_medians(updates, mask)

    for i in torch.nonzero(mask).flatten().tolist():
        others = mask.clone()
        others[i] = False
        torch.testing.assert_close(medians[i], coordinate_median(updates, ones(7), others))
    assert not medians[2].any()
