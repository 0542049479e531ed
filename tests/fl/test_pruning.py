"""Dynamic-topology pruning: schedule, mask, seeding and dense restoration."""

from __future__ import annotations

import math

import pytest
import torch

from fedchain.errors import ConfigError
from fedchain.fl import Pruning, get_strategy, strategy_names, topology_mask
from fedchain.fl.strategy import Evaluation, Validation


def test_over_pruning_follows_the_cosine_schedule() -> None:
    """alpha = 0.5, lambda^0 = 0.4, T = 4: alpha+ = 0.5 + 0.5 * 0.2 (1 + cos(pi (t-1)/4)).

    t = 1: 0.5 + 0.5 * 0.4 = 0.7; t = 3: 0.5 + 0.5 * 0.2 = 0.6; t = 5 (past T): 0.5.
    """
    pruning = Pruning(sparsity=0.5, initial_adjustment=0.4, total_rounds=4)

    assert pruning.over_pruning(1) == pytest.approx(0.7)
    assert pruning.over_pruning(3) == pytest.approx(0.6)
    assert pruning.over_pruning(5) == 0.5


def test_mask_prunes_exactly_alpha_and_keeps_the_largest_weights() -> None:
    """d = 20, alpha = 0.5, alpha+ = 0.7 at t = 1: 14 smallest pruned, 4 of them regrown; 10 kept.
    The 6 largest magnitudes are never pruned."""
    params = torch.arange(1, 21, dtype=torch.float32) * torch.tensor([1.0, -1.0]).repeat(10)
    pruning = Pruning(sparsity=0.5, initial_adjustment=0.4, total_rounds=4, seed=7)

    mask = topology_mask(params, 1, pruning)

    assert int(mask.sum()) == 10
    assert mask[14:].all()


def test_mask_is_seeded_and_moves_between_rounds_and_seeds() -> None:
    params = torch.randn(200, generator=torch.Generator().manual_seed(0))
    pruning = Pruning(sparsity=0.5, initial_adjustment=0.5, total_rounds=10, seed=1)

    first = topology_mask(params, 1, pruning)

    assert torch.equal(first, topology_mask(params, 1, pruning))
    assert not torch.equal(first, topology_mask(params, 2, pruning))
    other_seed = Pruning(sparsity=0.5, initial_adjustment=0.5, total_rounds=10, seed=2)
    assert not torch.equal(first, topology_mask(params, 1, other_seed))


def test_pruned_fedavg_restores_the_dense_weights_it_did_not_send() -> None:
    """theta^{t+1} = theta^t - theta_hat^t + theta_hat^{t+1/2}: pruned weights keep their dense values,
    sent weights move by the (masked) FedAvg update."""
    params = torch.randn(50, generator=torch.Generator().manual_seed(3))
    updates = torch.ones(2, 50)
    strategy = get_strategy("fedavg", pruning={"sparsity": 0.6, "initial_adjustment": 0.3, "total_rounds": 5})
    sent = strategy.broadcast(params)
    kept = sent != 0

    result = strategy.round(params, updates, [1, 1])

    assert int(kept.sum()) == 20
    torch.testing.assert_close(result.global_params[~kept], params[~kept])
    torch.testing.assert_close(result.global_params[kept], params[kept] + 1)


@pytest.mark.parametrize("name", ["fedavg", "cgsv"])
def test_pruning_is_an_option_of_every_strategy(name: str) -> None:
    strategy = get_strategy(name, pruning={"sparsity": 0.5})

    validation = Validation(evaluate=lambda model: Evaluation(loss=float(model.norm()), accuracy=0.5))
    result = strategy.round(torch.randn(10), torch.randn(3, 10), [1, 2, 3], validation=validation)

    assert torch.isfinite(result.global_params).all()
    assert name in strategy_names()


def test_pruning_rejects_a_sparsity_of_one() -> None:
    with pytest.raises(ConfigError, match="sparsity"):
        Pruning(sparsity=1.0)


def test_no_regrowth_when_the_schedule_has_ended() -> None:
    """Past T, alpha+ = alpha: the mask keeps exactly the largest (1 - alpha) d magnitudes."""
    params = torch.tensor([0.1, -0.5, 0.3, 0.9, -0.2, 0.7])

    mask = topology_mask(params, 99, Pruning(sparsity=0.5, total_rounds=3))

    assert mask.tolist() == [False, True, False, True, False, True]
    assert math.isclose(Pruning(sparsity=0.5, total_rounds=3).over_pruning(99), 0.5)
