"""Properties every strategy keeps: NaN rejection, distributions of weights, permutation equivariance."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedchain.errors import UpdateSpecMismatch
from fedchain.fl import Evaluation, Validation, get_strategy, strategy_names
from tests.support import present

D = 6
#: Validation "samples": the loss of sample k is the squared distance to TARGETS[k].
TARGETS = torch.randn(8, D, generator=torch.Generator().manual_seed(42))


def evaluate(params: torch.Tensor) -> Evaluation:
    sample_losses = ((params - TARGETS) ** 2).mean(dim=1)
    loss = float(sample_losses.mean())
    return Evaluation(loss=loss, accuracy=1 / (1 + loss), sample_losses=sample_losses)


def validation_for(n: int, seed: int) -> Validation:
    generator = torch.Generator().manual_seed(seed)
    local = [torch.rand(12, generator=generator) * 3 for _ in range(n)]
    return Validation(evaluate=evaluate, local_sample_losses=local)


@pytest.mark.parametrize("name", ["fedavg", "quality", "cgsv", "fedfaim", "fedave", "fair"])
def test_every_registered_strategy_is_tested_here(name: str) -> None:
    assert name in strategy_names()


@pytest.mark.parametrize("name", ["fedavg", "quality", "cgsv", "fedfaim", "fedave", "fair"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_update_is_rejected_and_never_averaged_in(name: str, bad: float) -> None:
    updates = torch.randn(3, D, generator=torch.Generator().manual_seed(1))
    updates[1, 2] = bad
    strategy = get_strategy(name, **({"delta": -1e9} if name == "fedfaim" else {}))

    result = strategy.round(torch.zeros(D), updates, [10, 20, 30], None, validation_for(3, 0))

    assert not result.accepted[1]
    assert result.weights[1].item() == 0.0
    assert torch.isfinite(result.global_params).all()
    assert torch.isfinite(result.contribution).all()
    if result.rewards is not None:
        assert torch.isfinite(result.rewards).all()


@pytest.mark.parametrize("name", ["fedavg", "quality", "cgsv", "fedfaim", "fedave", "fair"])
@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=st.integers(0, 1000), n=st.integers(2, 5))
def test_strategies_are_permutation_equivariant_with_weights_summing_to_one(name: str, seed: int, n: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    updates = torch.randn(n, D, generator=generator)
    sizes = torch.randint(1, 100, (n,), generator=generator)
    permutation = torch.randperm(n, generator=generator)
    validation = validation_for(n, seed)
    permuted_validation = Validation(
        evaluate=evaluate,
        local_sample_losses=[present(validation.local_sample_losses)[i] for i in permutation.tolist()],
    )
    strategy = get_strategy(name, **({"delta": -1e9} if name == "fedfaim" else {}))

    plain = strategy.round(torch.zeros(D), updates, sizes, None, validation)
    permuted = strategy.round(torch.zeros(D), updates[permutation], sizes[permutation], None, permuted_validation)

    assert plain.weights.sum().item() == pytest.approx(1.0)
    torch.testing.assert_close(permuted.global_params, plain.global_params, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(permuted.contribution, plain.contribution[permutation], atol=1e-5, rtol=1e-5)
    if plain.rewards is not None:
        torch.testing.assert_close(permuted.rewards, plain.rewards[permutation], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["fedavg", "quality", "cgsv", "fedfaim", "fedave", "fair"])
def test_round_leaves_its_inputs_untouched(name: str) -> None:
    updates = torch.randn(3, D, generator=torch.Generator().manual_seed(5))
    updates[0, 0] = float("nan")
    global_params = torch.randn(D)
    before = (updates.clone(), global_params.clone())

    get_strategy(name, pruning={"sparsity": 0.5}).round(global_params, updates, [1, 2, 3], None, validation_for(3, 1))

    assert torch.equal(global_params, before[1])
    assert torch.equal(updates.isnan(), before[0].isnan())
    assert torch.equal(updates.nan_to_num(), before[0].nan_to_num())


def test_strategies_take_yaml_style_options() -> None:
    strategy = get_strategy("cgsv", gamma0="0.25", tau=None, pruning={"sparsity": "0.3", "seed": 4})

    assert strategy.gamma0 == 0.25 and strategy.tau is None
    assert present(strategy.pruning).sparsity == 0.3 and present(strategy.pruning).seed == 4


def test_clients_with_own_models_are_evaluated_and_rewarded_on_their_own_models() -> None:
    """Client i trained from start_i = [i, i] and sent Delta_i = [1, 0]: the evaluator sees
    start_i + Delta_i, and the reward is start_i + reward_update_i (not global + reward_update_i)."""
    seen: list[list[float]] = []

    def recording(params: torch.Tensor) -> Evaluation:
        seen.append(params.tolist())
        return Evaluation(loss=1.0, accuracy=0.5, sample_losses=params.abs())

    starts = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    updates = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    validation = Validation(evaluate=recording, local_sample_losses=[torch.tensor([0.0, 1.0])] * 2)

    result = get_strategy("fedave", tau=1.0).round(
        torch.full((2,), 5.0), updates, [1, 1], None, validation, client_params=starts
    )

    assert seen == [[1.0, 0.0], [2.0, 1.0]]
    torch.testing.assert_close(result.rewards, starts + present(result.reward_updates))
    torch.testing.assert_close(result.global_params, torch.tensor([6.0, 5.0]))


def test_client_params_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(UpdateSpecMismatch, match="client params"):
        get_strategy("fedavg").round(torch.zeros(2), torch.ones(3, 2), [1, 1, 1], client_params=torch.zeros(2, 2))
