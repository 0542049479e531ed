"""FedFAIM against the seed's formulas, worked by hand on a quadratic validation loss."""

from __future__ import annotations

import math

import pytest
import torch

from fedchain.errors import ConfigError
from fedchain.fl import Evaluation, Validation, get_strategy
from fedchain.fl.strategies.fedfaim import SEED_QUALITY_CHECK, FedFAIM, gompertz_quality
from fedchain.fl.strategy import RoundInputs
from tests.support import present

F64 = torch.float64
TARGET = torch.tensor([1.0, 1.0])


def squared_distance(params: torch.Tensor) -> Evaluation:
    """Validation loss ||p - [1, 1]||^2: the best model is [1, 1]."""
    return Evaluation(loss=float(((params - TARGET) ** 2).sum()), accuracy=0.0)


VALIDATION = Validation(evaluate=squared_distance)


def seed_fedfaim(**options: object) -> FedFAIM:
    """FedFAIM with the seed's plain quality check (no tolerance, a fixed threshold), the one these hand computations work."""
    strategy = get_strategy("fedfaim", **SEED_QUALITY_CHECK, **options)
    assert isinstance(strategy, FedFAIM)
    return strategy


def _inputs(updates: torch.Tensor) -> RoundInputs:
    """A round's inputs from the global model 0 with equal data sizes and the quadratic validation."""
    n = updates.shape[0]
    sizes, finite = torch.ones(n, dtype=F64), torch.ones(n, dtype=torch.bool)
    return RoundInputs(torch.zeros(updates.shape[1]), updates, sizes, finite, VALIDATION)


def test_fedfaim_round_matches_hand_computed_values() -> None:
    """u_1 = [1, 1] (good), u_2 = [1, 0], u_3 = [-1, -1] (harmful); global 0; delta = 0, gamma = 1;
    the seed's renormalised leave-one-out models.

    l = loss(mean = [1/3, 0]) = 4/9 + 1 = 13/9.
    l_{-1} = loss([0, -1/2]) = 1 + 9/4 -> delta_1 = 13/4 - 13/9 = 1.805556.
    l_{-2} = loss([0, 0]) = 2 -> delta_2 = 5/9; l_{-3} = loss([1, 1/2]) = 1/4 -> delta_3 = -43/36: rejected.
    alpha = softmax([delta_1, delta_2]) = [e^1.25, 1] / (e^1.25 + 1) = [0.777300, 0.222700].
    u_G = [1, 0.777300]; |u_G| = 1.266568.
    phi_1 = (1 + 0.777300) / 1.266568 = 1.403241; phi_2 = 1 / 1.266568 = 0.789535; phi_3 = 0.
    z = [1, 0.562651, 0]; x = [1, 1, -1]; q = exp(-exp(-5.5)) = 0.995922 for both passers.
    num = floor(r / max r * 2) = [2, floor(1.125303) = 1, 0].
    Client 2: s_2 = [1, 0], s_G = [1, 0.7773] / 1.7773 -> keeps entry 0: reward [1, 0].
    """
    updates = torch.tensor([[1.0, 1.0], [1.0, 0.0], [-1.0, -1.0]])

    strategy = seed_fedfaim(delta=0.0, gamma=1.0, renormalise_leave_one_out=True)

    result = strategy.round(torch.zeros(2), updates, [5, 5, 5], None, VALIDATION)

    assert result.accepted.tolist() == [True, True, False]
    torch.testing.assert_close(result.weights, torch.tensor([0.777300, 0.222700, 0.0], dtype=F64), atol=1e-6, rtol=0)
    torch.testing.assert_close(result.global_params, torch.tensor([1.0, 0.777300]), atol=1e-6, rtol=0)
    expected_phi = torch.tensor([1.403241, 0.789535, 0.0], dtype=F64)
    torch.testing.assert_close(result.contribution, expected_phi, atol=1e-6, rtol=0)
    torch.testing.assert_close(present(result.rewards)[0], result.global_params)
    torch.testing.assert_close(present(result.rewards)[1], torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(present(result.rewards)[2], torch.zeros(2))
    assert present(result.state.passed).tolist() == [1, 1, 0]
    assert present(result.state.failed).tolist() == [0, 0, 1]


def test_a_small_helpful_update_passes_unless_the_leave_one_out_model_is_renormalised() -> None:
    """u_1 = [1, 1], u_2 = [0.1, 0.1]: both point at the best model [1, 1]; global 0.

    Default: l = loss([0.55, 0.55]) = 2 * 0.45^2 = 0.405; l_{-2} = loss([0.5, 0.5]) = 0.5,
    delta_2 = 0.095 (passes); l_{-1} = loss([0.05, 0.05]) = 1.805, delta_1 = 1.4.
    Renormalised (the seed): l_{-1} = loss([0.1, 0.1]) = 1.62, delta_1 = 1.215; l_{-2} = loss([1, 1]) = 0,
    delta_2 = -0.405: the small update fails although it helps, because leaving it out doubles
    the weight of the large one.
    """
    updates = torch.tensor([[1.0, 1.0], [0.1, 0.1]])

    default = seed_fedfaim()
    renormalised = seed_fedfaim(renormalise_leave_one_out=True)

    result = default.round(torch.zeros(2), updates, [5, 5], None, VALIDATION)

    torch.testing.assert_close(
        default.marginal_loss_test(_inputs(updates))[0], torch.tensor([1.4, 0.095], dtype=F64), atol=1e-6, rtol=0
    )
    torch.testing.assert_close(
        renormalised.marginal_loss_test(_inputs(updates))[0],
        torch.tensor([1.215, -0.405], dtype=F64),
        atol=1e-6,
        rtol=0,
    )
    assert result.accepted.tolist() == [True, True]
    assert renormalised.round(torch.zeros(2), updates, [5, 5], None, VALIDATION).accepted.tolist() == [True, False]


def _two_sample_losses(params: torch.Tensor) -> Evaluation:
    """Per-sample losses (p - 0)^2 and (p - 2)^2 of a one-parameter model: their mean is best at p = 1."""
    losses = torch.stack([params[0] ** 2, (params[0] - 2) ** 2]).double()
    return Evaluation(loss=float(losses.mean()), accuracy=0.0, sample_losses=losses)


def test_significance_passes_a_slightly_negative_marginal_loss_within_its_standard_error() -> None:
    """u_1 = 1, u_2 = -0.1, global 0; full model 0.45, without 1: -0.05, without 2: 0.5.

    Client 2: per-sample differences l_{-2}(x) - l(x) = [0.25 - 0.2025, 2.25 - 2.4025] = [0.0475, -0.1525]:
    delta_2 = -0.0525, std = 0.2 / sqrt(2), se_2 = std / sqrt(2) = 0.1.
    Client 1: [0.0025 - 0.2025, 4.2025 - 2.4025] = [-0.2, 1.8]: delta_1 = 0.8, se_1 = 1.
    The plain check fails client 2; one standard error of tolerance (threshold -0.1) passes it,
    half of one (threshold -0.05) does not.
    """
    updates = torch.tensor([[1.0], [-0.1]])
    validation = Validation(evaluate=_two_sample_losses)
    inputs = RoundInputs(torch.zeros(1), updates, torch.ones(2, dtype=F64), torch.ones(2, dtype=torch.bool), validation)

    deltas, errors = get_strategy("fedfaim", significance=1.0, outlier_spread=None).marginal_loss_test(inputs)

    torch.testing.assert_close(deltas, torch.tensor([0.8, -0.0525], dtype=F64), atol=1e-6, rtol=0)
    torch.testing.assert_close(errors, torch.tensor([1.0, 0.1], dtype=F64), atol=1e-6, rtol=0)
    accepted = {
        z: get_strategy("fedfaim", significance=z, outlier_spread=None, reject_failed=True)
        .round(torch.zeros(1), updates, [1, 1], None, validation)
        .accepted
        for z in (0.0, 0.5, 1.0)
    }
    assert accepted[0.0].tolist() == [True, False]
    assert accepted[0.5].tolist() == [True, False]
    assert accepted[1.0].tolist() == [True, True]


def test_a_round_whose_mean_step_overshoots_fails_only_the_client_far_below_the_typical_one() -> None:
    """u = 2.4, 2.5, 2.6 and 4 times [1, 1], global 0, best model [1, 1]: the mean step (2.875) overshoots, so
    leaving anyone out lowers the loss and every delta_i is negative: -3.78, -3.91, -4.03 and -5.5 for the
    largest. The seed's fixed threshold 0 fails all four. The robust bound: median (the lower one) -4.03,
    absolute deviations 0.25, 0.124, 0, 1.47 with median 0.124, sigma 1.4826 * 0.124 = 0.184, bound
    -4.03 - 3 * 0.184 = -4.58: only the last fails."""
    updates = torch.tensor([[2.4, 2.4], [2.5, 2.5], [2.6, 2.6], [4.0, 4.0]])
    seed, robust = (
        get_strategy("fedfaim", significance=0.0, outlier_spread=spread, reject_failed=True) for spread in (None, 3.0)
    )

    deltas, _ = robust.marginal_loss_test(_inputs(updates))
    fixed, relative = (s.round(torch.zeros(2), updates, [1, 1, 1, 1], None, VALIDATION) for s in (seed, robust))

    assert robust.threshold(deltas) == pytest.approx(-4.03 - 3 * 1.4826 * 0.124, abs=2e-3)
    assert fixed.accepted.tolist() == [False] * 4
    assert relative.accepted.tolist() == [True, True, True, False]


def test_the_standard_errors_and_the_robust_bound_are_alternatives_not_a_sum() -> None:
    """Round 4 of an IID MNIST run with 3 of 10 clients on 50% noisy labels (clients 1, 2, 8), as measured:
    median delta (the lower middle one) -0.00097, absolute deviations with median 0.00236, robust sigma
    1.4826 * 0.00236 = 0.0035, bound -0.00097 - 3 * 0.0035 = -0.01147. The noisy clients' updates raised the
    loss (-0.0151, -0.0129, -0.0136): below the bound, so they fail. Taken again below the bound, two standard
    errors (0.0022, 0.0018, 0.0016) let all three through (-0.01147 - 2 * 0.0022 = -0.0159 < -0.0151), as the
    rule of older specs did. The clean clients pass either way; client 0 (-0.0033) because it is above the
    bound, not within its standard errors of delta = 0."""
    deltas = torch.tensor(
        [-0.00333, -0.01511, -0.01293, 0.00022, 0.00269, -0.00097, 0.00085, 0.00115, -0.01356, 0.00156],
        dtype=torch.float64,
    )
    errors = torch.tensor(
        [0.00097, 0.0022, 0.00178, 0.00104, 0.00095, 0.00107, 0.00091, 0.0009, 0.00155, 0.00072], dtype=torch.float64
    )
    today, before = (get_strategy("fedfaim", tolerances_add=add) for add in (False, True))

    assert today.threshold(deltas) == pytest.approx(-0.00097 - 3 * 1.4826 * 0.00236, abs=1e-6)
    assert today.passes(deltas, errors).tolist() == [i not in (1, 2, 8) for i in range(10)]
    assert before.passes(deltas, errors).all()
    # without an overshoot the bound is delta = 0 and the standard errors still pass a near miss
    near = torch.tensor([0.01, 0.012, -0.001, 0.011], dtype=torch.float64)
    assert today.passes(near, torch.full((4,), 0.001, dtype=torch.float64)).tolist() == [True, True, True, True]
    assert not today.passes(near, torch.full((4,), 0.0004, dtype=torch.float64))[2]


def test_significance_needs_per_sample_losses_and_a_sensible_value() -> None:
    with pytest.raises(ConfigError, match="per-sample validation losses"):
        get_strategy("fedfaim", significance=2.0).round(torch.zeros(2), torch.ones(2, 2), [1, 1], None, VALIDATION)
    with pytest.raises(ConfigError, match="significance"):
        get_strategy("fedfaim", significance=-1.0)
    with pytest.raises(ConfigError, match="outlier_spread"):
        get_strategy("fedfaim", outlier_spread=-1.0)


def test_gompertz_quality_matches_the_seed_constants() -> None:
    """3 passes, 1 failure: x = 1/2, q = exp(-exp(-2.75)) = 0.938073; no checks yet: x = 0, q = e^-1."""
    quality = gompertz_quality(torch.tensor([3, 0]), torch.tensor([1, 0]))

    torch.testing.assert_close(quality, torch.tensor([0.938073, math.exp(-1)], dtype=F64), atol=1e-6, rtol=0)


def test_fedfaim_zero_update_gets_no_reward() -> None:
    """A free rider's zero update has ||u|| = 0, so phi = 0, z = 0, r = floor = 1e-3 and num = floor(2e-3) = 0."""
    updates = torch.tensor([[1.0, 1.0], [0.5, 1.0], [0.0, 0.0]])
    strategy = seed_fedfaim(delta=-10.0)

    result = strategy.round(torch.zeros(2), updates, [1, 1, 1], None, VALIDATION)

    assert result.accepted[2]
    assert result.contribution[2].item() == 0.0
    torch.testing.assert_close(present(result.reward_updates)[2], torch.zeros(2))
    assert present(result.reward_updates)[0].abs().sum() > 0


def test_fedfaim_nan_update_fails_the_quality_check() -> None:
    updates = torch.tensor([[1.0, 1.0], [float("nan"), 1.0]])

    result = seed_fedfaim().round(torch.zeros(2), updates, [1, 1], None, VALIDATION)

    assert result.accepted.tolist() == [True, False]
    torch.testing.assert_close(result.global_params, torch.tensor([1.0, 1.0]))
    assert present(result.state.failed).tolist() == [0, 1]


def test_fedfaim_without_an_evaluator_says_what_to_pass() -> None:
    with pytest.raises(ConfigError, match="validation evaluator"):
        seed_fedfaim().round(torch.zeros(2), torch.ones(2, 2), [1, 1])


def test_fedfaim_reputation_accumulates_over_rounds() -> None:
    """Two rounds of the same updates double the cumulative contribution and the pass counts."""
    updates = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    strategy = seed_fedfaim(delta=-10.0)
    first = strategy.round(torch.zeros(2), updates, [1, 1], None, VALIDATION)

    second = strategy.round(torch.zeros(2), updates, [1, 1], first.state, VALIDATION)

    torch.testing.assert_close(
        present(second.state.cumulative_contribution), 2 * present(first.state.cumulative_contribution)
    )
    assert present(second.state.passed).tolist() == [2, 2]


def test_fedfaim_batched_evaluation_gives_the_same_round_in_one_call() -> None:
    """evaluate_many receives the N + 1 models (all clients, then each one left out) in one batch."""
    updates = torch.tensor([[1.0, 1.0], [1.0, 0.0], [-1.0, -1.0]])
    batches: list[int] = []

    def evaluate_many(models: torch.Tensor) -> list[Evaluation]:
        batches.append(models.shape[0])
        return [squared_distance(model) for model in models]

    strategy = seed_fedfaim(gamma=1.0)
    one_by_one = strategy.round(torch.zeros(2), updates, [5, 5, 5], None, VALIDATION)

    batched = strategy.round(torch.zeros(2), updates, [5, 5, 5], None, Validation(evaluate_many=evaluate_many))

    assert batches == [4]
    torch.testing.assert_close(batched.global_params, one_by_one.global_params)
    torch.testing.assert_close(batched.contribution, one_by_one.contribution)


def test_fedfaim_reputation_floor_keeps_a_failing_client_rewarded() -> None:
    """d = 4000; client 1's update is harmful (fails, r = q z = 0): with the default floor its
    reputation is 1e-3, so it still receives floor(1e-3 / r_0 * 4000) entries, r_0 = q(x=1) = 0.995922:
    4 entries. With reputation_floor = 0 (the unclamped formula) it receives none."""
    d = 4000
    target = torch.ones(d)

    def loss(params: torch.Tensor) -> Evaluation:
        return Evaluation(loss=float(((params - target) ** 2).sum()), accuracy=0.0)

    updates = torch.stack([torch.ones(d), -torch.ones(d)])
    validation = Validation(evaluate=loss)

    floored = seed_fedfaim().round(torch.zeros(d), updates, [1, 1], None, validation)
    unclamped = seed_fedfaim(reputation_floor=0.0).round(torch.zeros(d), updates, [1, 1], None, validation)

    assert floored.accepted.tolist() == [True, False]
    assert (
        (present(floored.reward_updates)[1] != 0).sum().item() == math.floor(1e-3 / math.exp(-math.exp(-5.5)) * d) == 4
    )
    assert (present(unclamped.reward_updates)[1] != 0).sum().item() == 0
    with pytest.raises(ConfigError, match="reputation_floor"):
        seed_fedfaim(reputation_floor=1.5)


def test_a_client_failing_the_check_is_left_out_of_the_aggregate_but_kept_for_the_chain_by_default() -> None:
    """Today's default: the harmful update of the hand-computed round weighs 0 and contributes 0, yet is accepted,
    so the chain scores it the task's quality floor rather than removing the client; the seed rejected it."""
    from fedchain.fl.quality import round_quality

    updates = torch.tensor([[1.0, 1.0], [1.0, 0.0], [-1.0, -1.0], [float("nan"), 1.0]])
    options = {"delta": 0.0, "gamma": 1.0, "renormalise_leave_one_out": True}
    kept = get_strategy("fedfaim", **{**SEED_QUALITY_CHECK, "reject_failed": False}, **options)
    seed = seed_fedfaim(**options)

    today, before = (s.round(torch.zeros(2), updates, [5, 5, 5, 5], None, VALIDATION) for s in (kept, seed))

    assert before.accepted.tolist() == [True, True, False, False]
    assert today.accepted.tolist() == [True, True, True, False]  # a non-finite update is still rejected
    torch.testing.assert_close(today.global_params, before.global_params)
    torch.testing.assert_close(today.weights, before.weights)
    torch.testing.assert_close(today.contribution, before.contribution)
    assert present(today.state.failed).tolist() == [0, 0, 1, 1]
    assert round_quality(today, source="contribution", floor=0.2).values[2:] == (0.2, 0.0)
    assert round_quality(before, source="contribution", floor=0.2).values[2:] == (0.0, 0.0)
