"""CGSV against the seed's update rule, worked by hand, and its FedAvg limit."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedchain.errors import ConfigError
from fedchain.fl import get_strategy
from fedchain.fl.strategies.cgsv import CGSV, CGSVState, loss_discount
from fedchain.fl.strategy import Evaluation, Validation
from tests.support import present

F64 = torch.float64


def cosine_cgsv(**options: Any) -> CGSV:
    """cgsv with the seed's contribution, the cosine alone: these tests check its arithmetic without a validation
    set (the product's loss discount needs one, below)."""
    return get_strategy("cgsv", contribution_measure="cosine", **options)


def test_cgsv_round_one_matches_hand_computed_weights() -> None:
    """Delta_1 = [3, 0], Delta_2 = [3, 4]; sizes 1, 3 so r^1 = [1/4, 3/4]; tau = 1, gamma^0 = 1/2.

    u_1 = [1, 0], u_2 = [0.6, 0.8]; U = 1/4 u_1 + 3/4 u_2 = [0.7, 0.6], |U| = sqrt(0.85).
    psi_1 = 0.7 / sqrt(0.85) = 0.759257, psi_2 = (0.42 + 0.48) / sqrt(0.85) = 0.976187.
    gamma^1 = 1 - (1 - 1/2)/1 = 1/2: r = [0.125 + 0.379628, 0.375 + 0.488094] = [0.504628, 0.863094],
    normalised by 1.367722: [0.368955, 0.631045]. New global = 0 + U = [0.7, 0.6].
    """
    strategy = cosine_cgsv(tau=1.0, gamma0=0.5)
    updates = torch.tensor([[3.0, 0.0], [3.0, 4.0]])

    result = strategy.round(torch.zeros(2), updates, [1, 3])

    torch.testing.assert_close(result.global_params, torch.tensor([0.7, 0.6]))
    torch.testing.assert_close(result.weights, torch.tensor([0.25, 0.75], dtype=F64))
    torch.testing.assert_close(result.contribution, torch.tensor([0.759257, 0.976187], dtype=F64), atol=1e-6, rtol=0)
    torch.testing.assert_close(
        present(result.state.weights), torch.tensor([0.368955, 0.631045], dtype=F64), atol=1e-6, rtol=0
    )


def test_cgsv_round_two_uses_the_decayed_gamma() -> None:
    """Round 2 on the same updates, r^2 = [0.368955, 0.631045], gamma^2 = 1 - (1/2)/2 = 3/4.

    U = [0.368955 + 0.631045 * 0.6, 0.631045 * 0.8] = [0.747582, 0.504836], |U| = 0.902074;
    psi = [0.747582 / 0.902074, (0.448549 + 0.403869) / 0.902074] = [0.828737, 0.944953];
    r = 3/4 r^2 + 1/4 psi = [0.483900, 0.709522] -> normalised [0.405473, 0.594527].
    """
    strategy = cosine_cgsv(tau=1.0, gamma0=0.5)
    updates = torch.tensor([[3.0, 0.0], [3.0, 4.0]])
    first = strategy.round(torch.zeros(2), updates, [1, 3])

    second = strategy.round(first.global_params, updates, [1, 3], first.state)

    assert second.state.round == 2
    torch.testing.assert_close(second.contribution, torch.tensor([0.828737, 0.944953], dtype=F64), atol=1e-6, rtol=0)
    torch.testing.assert_close(
        present(second.state.weights), torch.tensor([0.405473, 0.594527], dtype=F64), atol=1e-6, rtol=0
    )


def test_cgsv_with_leave_one_out_measures_each_client_against_the_others_part_of_the_aggregate() -> None:
    """The updates of the first test: the others' part of U is 3/4 u_2 for client 1 and 1/4 u_1 for client 2, so
    psi = [cos(u_1, u_2), cos(u_2, u_1)] = [0.6, 0.6]; r = 1/2 [1/4, 3/4] + 1/2 [0.6, 0.6] = [0.425, 0.675],
    normalised [0.386364, 0.613636]. The global model is the seed's, U = [0.7, 0.6]."""
    strategy = cosine_cgsv(tau=1.0, gamma0=0.5, leave_one_out=True)
    updates = torch.tensor([[3.0, 0.0], [3.0, 4.0]])

    result = strategy.round(torch.zeros(2), updates, [1, 3])

    torch.testing.assert_close(result.global_params, torch.tensor([0.7, 0.6]))
    torch.testing.assert_close(result.contribution, torch.tensor([0.6, 0.6], dtype=F64), atol=1e-6, rtol=0)
    torch.testing.assert_close(
        present(result.state.weights), torch.tensor([0.386364, 0.613636], dtype=F64), atol=1e-6, rtol=0
    )


def test_a_heavy_client_orthogonal_to_the_others_gets_no_credit_for_agreeing_with_itself() -> None:
    """Sizes 1, 1, 8: weights [0.1, 0.1, 0.8], U = [0.2, 0.8]. The seed's cosine gives the third client, orthogonal
    to the two others, 0.8 / |U| = 0.970 (its own share of U); the others' part of U is [0.2, 0], so 0."""
    updates = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    seed = cosine_cgsv(tau=1.0, gamma0=0.5).round(torch.zeros(2), updates, [1, 1, 8])

    result = cosine_cgsv(tau=1.0, gamma0=0.5, leave_one_out=True).round(torch.zeros(2), updates, [1, 1, 8])

    assert float(seed.contribution[2]) == pytest.approx(0.8 / (0.2**2 + 0.8**2) ** 0.5)
    assert float(result.contribution[2]) == pytest.approx(0.0, abs=1e-6)
    # the others: cos([1, 0], [0.1, 0.8]) each
    assert result.contribution[:2].tolist() == pytest.approx([0.1 / (0.1**2 + 0.8**2) ** 0.5] * 2)


def test_left_out_a_lone_client_scores_the_seeds_cosine_of_one() -> None:
    result = cosine_cgsv(leave_one_out=True).round(torch.zeros(3), torch.tensor([[1.0, 2.0, 2.0]]), [5])

    assert result.contribution.tolist() == pytest.approx([1.0])


@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 5), rounds=st.integers(1, 3))
def test_cgsv_with_gamma0_one_and_raw_updates_is_fedavg(seed: int, n: int, rounds: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, 50, (n,), generator=generator)
    cgsv, fedavg = cosine_cgsv(gamma0=1.0, tau=None), get_strategy("fedavg")
    params_c = params_f = torch.randn(4, generator=generator)
    state: CGSVState | None = None

    for _ in range(rounds):
        updates = torch.randn(n, 4, generator=generator)
        result = cgsv.round(params_c, updates, sizes, state)
        params_c, state = result.global_params, result.state
        params_f = fedavg.round(params_f, updates, sizes).global_params

    torch.testing.assert_close(params_c, params_f)
    torch.testing.assert_close(present(present(state).weights), sizes.to(F64) / sizes.sum())


@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 5))
def test_cgsv_weights_stay_a_distribution_and_follow_permutations(seed: int, n: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    updates = torch.randn(n, 6, generator=generator)
    sizes = torch.randint(1, 50, (n,), generator=generator)
    permutation = torch.randperm(n, generator=generator)
    strategy = cosine_cgsv(gamma0=0.2)

    plain = strategy.round(torch.zeros(6), updates, sizes)
    permuted = strategy.round(torch.zeros(6), updates[permutation], sizes[permutation])

    assert present(plain.state.weights).sum().item() == pytest.approx(1.0)
    assert (present(plain.state.weights) >= 0).all()
    torch.testing.assert_close(permuted.global_params, plain.global_params)
    torch.testing.assert_close(present(permuted.state.weights), present(plain.state.weights)[permutation])


def test_cgsv_zero_update_has_zero_contribution_and_loses_weight() -> None:
    """A zero update has no direction: psi = 0, so r_2 = 1/2 * 1/2 + 0 before renormalising drops."""
    updates = torch.tensor([[1.0, 0.0], [0.0, 0.0]])

    result = cosine_cgsv(gamma0=0.5).round(torch.zeros(2), updates, [1, 1])

    assert result.contribution[1].item() == 0.0
    assert present(result.state.weights)[1] < 0.5 < present(result.state.weights)[0]


def test_cgsv_state_for_another_client_count_is_refused() -> None:
    strategy = cosine_cgsv()
    state = strategy.round(torch.zeros(2), torch.ones(3, 2), [1, 1, 1]).state

    with pytest.raises(ConfigError, match="state for 3 clients"):
        strategy.round(torch.zeros(2), torch.ones(2, 2), [1, 1], state)


def test_cgsv_rejects_an_out_of_range_gamma0() -> None:
    with pytest.raises(ConfigError, match="gamma0"):
        get_strategy("cgsv", gamma0=1.5)


def test_cgsv_scales_every_update_to_the_rounds_median_norm_by_default() -> None:
    """Norms 3, 5 and 10 (median 5), equal data: every u_i has length 5, so the step is 5 times the mean unit
    vector; the third client's tenfold norm buys it no more weight than the first's."""
    updates = torch.tensor([[3.0, 0.0], [0.0, 5.0], [10.0, 0.0]])

    result = cosine_cgsv().round(torch.zeros(2), updates, [1, 1, 1])
    seed = cosine_cgsv(tau=1.0).round(torch.zeros(2), updates, [1, 1, 1])

    torch.testing.assert_close(result.global_params, torch.tensor([10.0, 5.0]) / 3)
    torch.testing.assert_close(result.global_params, 5 * seed.global_params)
    torch.testing.assert_close(result.contribution, seed.contribution)  # cosines do not see the length


def test_cgsv_median_length_leaves_rejected_and_zero_updates_out() -> None:
    nan = float("nan")
    updates = torch.tensor([[2.0, 0.0], [0.0, 0.0], [nan, nan], [0.0, 4.0]])

    result = cosine_cgsv().round(torch.zeros(2), updates, [1, 1, 1, 1])

    # median of the norms 2 and 4 (the lower middle value, as torch.median takes it) is 2
    torch.testing.assert_close(result.global_params, torch.tensor([2.0, 2.0]) / 3)


def test_cgsv_refuses_a_length_that_is_neither_a_number_nor_median() -> None:
    with pytest.raises(ConfigError, match="tau"):
        get_strategy("cgsv", tau="mean")
    with pytest.raises(ConfigError, match="tau must be positive"):
        get_strategy("cgsv", tau=0.0)


def test_the_loss_discount_keeps_the_median_and_better_and_scales_the_worse_by_how_much_worse() -> None:
    """Losses 1, 2, 4 (median 2): the first two keep 1, the third median / loss = 1/2; squared 1/4. A client not
    eligible, or with a loss that is not finite, gets 0 and stays out of the median."""
    losses = torch.tensor([1.0, 2.0, 4.0, 0.5, float("nan")], dtype=F64)
    eligible = torch.tensor([True, True, True, False, True])

    torch.testing.assert_close(loss_discount(losses, eligible), torch.tensor([1.0, 1.0, 0.5, 0.0, 0.0], dtype=F64))
    torch.testing.assert_close(loss_discount(losses, eligible, 2.0), torch.tensor([1, 1, 0.25, 0, 0], dtype=F64))
    torch.testing.assert_close(loss_discount(losses, eligible, 0.0), torch.tensor([1, 1, 1, 0, 0], dtype=F64))
    assert loss_discount(losses, torch.zeros(5, dtype=torch.bool)).tolist() == [0.0] * 5


def by_norm(model: torch.Tensor) -> Evaluation:
    """A stand-in validation set on which a model's loss is its distance from [1, 1]."""
    return Evaluation(loss=float((model - torch.ones(2)).norm()), accuracy=0.5)


def test_the_default_contribution_is_the_cosine_discounted_by_the_clients_validation_loss() -> None:
    """Three clients from [0, 0]: two step towards [1, 1] (losses 0 and sqrt(1/2)), the third sideways to [0, 1]
    (loss 1). The median loss is sqrt(1/2), so the third's cosine is discounted by sqrt(1/2) / 1; the global
    model and the weights are the seed's: the discount feeds only the chain's quality."""
    updates = torch.tensor([[1.0, 1.0], [0.5, 0.5], [0.0, 1.0]])
    validation = Validation(evaluate=by_norm)

    product = get_strategy("cgsv").round(torch.zeros(2), updates, [1, 1, 1], validation=validation)
    seed = cosine_cgsv().round(torch.zeros(2), updates, [1, 1, 1])

    median = 0.5**0.5
    expected = seed.contribution * torch.tensor([1.0, 1.0, median], dtype=F64)
    torch.testing.assert_close(product.contribution, expected)
    torch.testing.assert_close(product.global_params, seed.global_params)
    torch.testing.assert_close(present(product.state.weights), present(seed.state.weights))


def test_the_loss_discount_reads_the_evaluations_the_aggregator_already_made_and_skips_rejected_clients() -> None:
    nan = float("nan")
    updates = torch.tensor([[1.0, 0.0], [nan, nan], [0.0, 1.0], [1.0, 1.0]])
    given = [Evaluation(loss=1.0, accuracy=0.9), Evaluation(loss=nan, accuracy=0.0)]
    given += [Evaluation(loss=3.0, accuracy=0.5), Evaluation(loss=2.0, accuracy=0.7)]

    result = get_strategy("cgsv").round(
        torch.zeros(2), updates, [1, 1, 1, 1], validation=Validation(client_evaluations=given)
    )
    seed = cosine_cgsv().round(torch.zeros(2), updates, [1, 1, 1, 1])

    # the median of the accepted clients' losses 1, 3 and 2 is 2
    torch.testing.assert_close(result.contribution, seed.contribution * torch.tensor([1, 0, 2 / 3, 1], dtype=F64))
    assert result.contribution[1] == 0


def test_the_loss_discount_needs_a_validation_set_and_says_how_to_do_without() -> None:
    with pytest.raises(ConfigError, match="needs a validation evaluator") as raised:
        get_strategy("cgsv").round(torch.zeros(2), torch.eye(2), [1, 1])
    assert "Validation(evaluate=" in (raised.value.hint or "")


def test_cgsv_refuses_an_unknown_contribution_measure_and_a_negative_loss_exponent() -> None:
    with pytest.raises(ConfigError, match=r"contribution_measure.*loss_discounted"):
        get_strategy("cgsv", contribution_measure="accuracy")
    with pytest.raises(ConfigError, match="contribution_measure must be loss_discounted or cosine"):
        CGSV(contribution_measure="accuracy")  # type: ignore[arg-type]
    for exponent in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ConfigError, match="loss_exponent must be a finite number >= 0"):
            get_strategy("cgsv", loss_exponent=exponent)
