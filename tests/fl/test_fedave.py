"""FedAVE against the seed's formulas with histograms chosen so the KL is exact."""

from __future__ import annotations

import math

import pytest
import torch

from fedchain.errors import ConfigError
from fedchain.fl import Evaluation, Validation, get_strategy
from fedchain.fl.rewards import sparsify_top_magnitude, sparsify_top_magnitude_by_layer
from fedchain.fl.strategies.fedave import FedAVEState, discounted_accuracy
from fedchain.fl.strategy import RoundResult
from tests.support import present

F64 = torch.float64
#: Losses 0 and 1 over 2 bins [0, 0.5), [0.5, 1]: a histogram is the fraction of ones.
ONES_90 = torch.tensor([0.0] + [1.0] * 9)
ONES_10 = torch.tensor([0.0] * 9 + [1.0])
ONES_50 = torch.tensor([0.0] * 5 + [1.0] * 5)
DESCENDING = torch.arange(10, 0, -1, dtype=torch.float32)


def two_client_validation() -> Validation:
    return Validation(
        client_evaluations=[
            Evaluation(loss=0.5, accuracy=0.9, sample_losses=ONES_90),
            Evaluation(loss=0.7, accuracy=0.3, sample_losses=ONES_90),
        ],
        local_sample_losses=[ONES_10, ONES_50],
    )


def reputation(result: RoundResult[FedAVEState]) -> torch.Tensor:
    """The normalised reputation r after the round (what the reward quotas use)."""
    return present(result.state.reputation)


def test_fedave_round_matches_hand_computed_reputation_and_quotas() -> None:
    """Both clients send Delta = [10, 9, ..., 1] (|.| = sqrt(385)); sizes 1, 3; tau = 0.5; beta = 1; d = 10.

    KL_A = KL([.9, .1] || [.1, .9]) = .9 ln 9 + .1 ln(1/9) = 1.757780;
    KL_B = KL([.5, .5] || [.1, .9]) = .5 ln 5 + .5 ln(5/9) = 0.510826.
    r~ = [0.9 / 1.757780, 0.3 / 0.510826] = [0.512010, 0.587285]; round 1: r = r~ normalised = [0.465762, 0.534238].
    quota_A = 10 tanh(0.465762) / (tanh(0.534238) * 1.757780) = 5.0621 -> 5; quota_B = 19.58 -> clamped to 10.
    u_G = 0.5 * Delta / sqrt(385) (both units equal): A keeps its 5 largest entries (the first five).
    """
    strategy = get_strategy("fedave", tau=0.5, beta=1.0, bins=2, histogram_epsilon=1e-12, relative_divergence=False)
    updates = torch.stack([DESCENDING, DESCENDING])

    result = strategy.round(torch.zeros(10), updates, [1, 3], None, two_client_validation())

    expected_global = 0.5 * DESCENDING / DESCENDING.norm()
    torch.testing.assert_close(result.global_params, expected_global)
    torch.testing.assert_close(reputation(result), torch.tensor([0.465762, 0.534238], dtype=F64), atol=1e-6, rtol=0)
    torch.testing.assert_close(present(result.rewards)[0][:5], expected_global[:5])
    assert present(result.rewards)[0][5:].abs().sum().item() == 0.0
    torch.testing.assert_close(present(result.rewards)[1], expected_global)
    torch.testing.assert_close(result.weights, torch.tensor([0.25, 0.75], dtype=F64))


def test_fedave_relative_divergence_divides_quotas_by_kl_over_the_smallest_kl() -> None:
    """Same round as above with relative_divergence: KL_A / min KL = 1.757780 / 0.510826 = 3.441040, KL_B / min KL = 1.
    quota_A = 10 tanh(0.465762) / tanh(0.534238) / 3.441040 = 10 * 0.434769 / 0.488614 / 3.441040 = 2.5858 -> 2;
    quota_B = 10. The reputation itself still uses the raw KL."""
    strategy = get_strategy("fedave", tau=0.5, beta=1.0, bins=2, histogram_epsilon=1e-12)
    updates = torch.stack([DESCENDING, DESCENDING])

    result = strategy.round(torch.zeros(10), updates, [1, 3], None, two_client_validation())

    assert strategy.relative_divergence  # the default, as in the authors' code
    assert (present(result.reward_updates)[0] != 0).sum().item() == 2
    assert (present(result.reward_updates)[1] != 0).sum().item() == 10
    torch.testing.assert_close(reputation(result), torch.tensor([0.465762, 0.534238], dtype=F64), atol=1e-6, rtol=0)


def test_fedave_layer_sizes_apply_the_quota_fraction_to_every_layer() -> None:
    """Same round, d = 10 split into layers of 6 and 4: quota_A = 2 is 20% of the entries, so A keeps
    ceil(0.2 * 6) = 2 entries of the first layer (10, 9) and ceil(0.2 * 4) = 1 of the second (4):
    the whole-vector top-2 would have kept only the first layer's 10 and 9."""
    strategy = get_strategy("fedave", tau=0.5, beta=1.0, bins=2, histogram_epsilon=1e-12, layer_sizes=(6, 4))
    updates = torch.stack([DESCENDING, DESCENDING])

    result = strategy.round(torch.zeros(10), updates, [1, 3], None, two_client_validation())

    expected_global = 0.5 * DESCENDING / DESCENDING.norm()
    kept = torch.tensor([1, 1, 0, 0, 0, 0, 1, 0, 0, 0], dtype=torch.bool)
    torch.testing.assert_close(present(result.reward_updates)[0], torch.where(kept, expected_global, torch.zeros(10)))
    torch.testing.assert_close(present(result.reward_updates)[1], expected_global)


def test_fedave_layer_sizes_that_do_not_fit_the_model_say_what_to_give() -> None:
    strategy = get_strategy("fedave", bins=2, layer_sizes=(6, 3))

    with pytest.raises(ConfigError, match="add up to 9 entries, the model has 10"):
        strategy.round(torch.zeros(10), torch.stack([DESCENDING, DESCENDING]), [1, 3], None, two_client_validation())
    with pytest.raises(ConfigError, match="must all be positive"):
        get_strategy("fedave", layer_sizes=(10, 0))


def test_fedave_fixed_quota_fractions_replace_the_dynamic_quotas_but_not_the_reputation() -> None:
    """Same round as the first test with quota_fractions 0.3 and 1: A keeps floor(0.3 * 10) = 3 entries
    (the dynamic quota gave 5), B all 10; the reputation is the hand-computed one."""
    strategy = get_strategy(
        "fedave",
        tau=0.5,
        beta=1.0,
        bins=2,
        histogram_epsilon=1e-12,
        relative_divergence=False,
        quota_fractions=[0.3, 1.0],
    )
    updates = torch.stack([DESCENDING, DESCENDING])

    result = strategy.round(torch.zeros(10), updates, [1, 3], None, two_client_validation())

    expected_global = 0.5 * DESCENDING / DESCENDING.norm()
    torch.testing.assert_close(present(result.reward_updates)[0][:3], expected_global[:3])
    assert (present(result.reward_updates)[0] != 0).sum().item() == 3
    torch.testing.assert_close(present(result.reward_updates)[1], expected_global)
    torch.testing.assert_close(reputation(result), torch.tensor([0.465762, 0.534238], dtype=F64), atol=1e-6, rtol=0)


def test_fedave_fixed_quota_fractions_still_give_a_zero_update_nothing() -> None:
    updates = torch.stack([DESCENDING, torch.zeros(10)])
    strategy = get_strategy("fedave", bins=2, quota_fractions=[1.0, 1.0])

    result = strategy.round(torch.zeros(10), updates, [1, 1], None, two_client_validation())

    torch.testing.assert_close(present(result.reward_updates)[1], torch.zeros(10))
    assert (present(result.reward_updates)[0] != 0).sum().item() == 10


def test_fedave_quota_fractions_out_of_range_or_of_the_wrong_count_say_what_to_give() -> None:
    with pytest.raises(ConfigError, match=r"quota_fractions=\[0.5, 1.5\] must all lie in \[0, 1\]"):
        get_strategy("fedave", quota_fractions=[0.5, 1.5])
    strategy = get_strategy("fedave", bins=2, quota_fractions=[0.5, 0.5, 0.5])
    with pytest.raises(ConfigError, match="3 quota_fractions for 2 clients") as caught:
        strategy.round(torch.zeros(10), torch.stack([DESCENDING, DESCENDING]), [1, 3], None, two_client_validation())
    assert "one fraction per client" in (caught.value.hint or "")


def test_fedave_smooths_the_reputation_with_alpha() -> None:
    """Round 2 with r^1 = [0.465762, 0.534238], the same r~ and alpha = 0.5: r = (r^1 + r~)/2 normalised.

    (r^1 + r~) / 2 = [0.488886, 0.560762] -> normalised by 1.049648: [0.465762, 0.534238] (a fixed point).
    With a new r~ = [0, 0.587285] (client A's accuracy drops to 0): [0.232881, 0.560761] -> [0.293433, 0.706567].
    """
    strategy = get_strategy("fedave", alpha=0.5, bins=2, histogram_epsilon=1e-12)
    updates = torch.stack([DESCENDING, DESCENDING])
    first = strategy.round(torch.zeros(10), updates, [1, 3], None, two_client_validation())
    before = two_client_validation()
    dropped = Validation(
        client_evaluations=[
            Evaluation(loss=0.5, accuracy=0.0, sample_losses=ONES_90),
            present(before.client_evaluations)[1],
        ],
        local_sample_losses=before.local_sample_losses,
    )

    steady = strategy.round(torch.zeros(10), updates, [1, 3], first.state, two_client_validation())
    second = strategy.round(torch.zeros(10), updates, [1, 3], first.state, dropped)

    torch.testing.assert_close(reputation(steady), reputation(first))
    torch.testing.assert_close(reputation(second), torch.tensor([0.293433, 0.706567], dtype=F64), atol=1e-6, rtol=0)


def test_the_contribution_is_the_accuracy_discounted_by_the_fourth_root_of_the_smallest_kl_over_the_clients() -> None:
    """Same round: accuracies 0.9, 0.3; KL_A / KL_B = 1.757780 / 0.510826, so A's discount is
    (0.510826 / 1.757780) ** 0.25 = 0.290608 ** 0.25 = 0.734222: contribution [0.660799, 0.3]. The seed's
    reputation ranks A below B (0.465762 < 0.534238); the fourth root of the divergence ranks it above."""
    updates = torch.stack([DESCENDING, DESCENDING])

    default = get_strategy("fedave", bins=2, histogram_epsilon=1e-12)
    result = default.round(torch.zeros(10), updates, [1, 3], None, two_client_validation())
    seed = get_strategy("fedave", bins=2, histogram_epsilon=1e-12, contribution_measure="reputation")
    seeds = seed.round(torch.zeros(10), updates, [1, 3], None, two_client_validation())
    whole = get_strategy("fedave", bins=2, histogram_epsilon=1e-12, divergence_exponent=1.0)
    exponent_one = whole.round(torch.zeros(10), updates, [1, 3], None, two_client_validation())

    assert default.contribution_measure == "discounted_accuracy" and default.divergence_exponent == 0.25
    torch.testing.assert_close(result.contribution, torch.tensor([0.660799, 0.3], dtype=F64), atol=1e-6, rtol=0)
    torch.testing.assert_close(reputation(result), reputation(seeds))  # the quotas' reputation is the seed's either way
    torch.testing.assert_close(seeds.contribution, reputation(seeds))
    # exponent 1 ranks as the seed's Acc / KL: the same ratio between the two clients
    ratio = exponent_one.contribution[0] / exponent_one.contribution[1]
    torch.testing.assert_close(ratio, reputation(seeds)[0] / reputation(seeds)[1])


def test_discounted_accuracy_is_zero_for_an_ineligible_client_and_takes_the_smallest_kl_over_the_eligible() -> None:
    accuracy = torch.tensor([0.8, 0.6, 0.9], dtype=F64)
    divergence = torch.tensor([0.4, 0.1, math.nan], dtype=F64)  # the third was rejected: no KL, not the smallest
    eligible = torch.tensor([True, True, False])

    got = discounted_accuracy(accuracy, divergence, eligible, 0.5)
    none = discounted_accuracy(accuracy, divergence, torch.zeros(3, dtype=torch.bool), 0.5)

    torch.testing.assert_close(got, torch.tensor([0.8 * 0.5, 0.6, 0.0], dtype=F64))
    assert none.tolist() == [0.0, 0.0, 0.0]
    torch.testing.assert_close(
        discounted_accuracy(accuracy, divergence, eligible, 0.0), torch.tensor([0.8, 0.6, 0.0], dtype=F64)
    )


@pytest.mark.parametrize(
    "options", [{"divergence_exponent": -0.5}, {"divergence_exponent": math.inf}, {"contribution_measure": "loss"}]
)
def test_a_wrong_contribution_setting_is_refused_with_what_to_set(options: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=r"divergence_exponent|contribution_measure"):
        get_strategy("fedave", **options)
    with pytest.raises(ConfigError, match=r"divergence_exponent|contribution_measure"):
        get_strategy("fair", **options)


def test_fedave_zero_update_gets_no_reward() -> None:
    updates = torch.stack([DESCENDING, torch.zeros(10)])

    result = get_strategy("fedave", bins=2).round(torch.zeros(10), updates, [1, 1], None, two_client_validation())

    assert result.contribution[1].item() == 0.0
    torch.testing.assert_close(present(result.reward_updates)[1], torch.zeros(10))


def test_fedave_nan_update_is_rejected_and_unrewarded() -> None:
    updates = torch.stack([DESCENDING, torch.full((10,), float("nan"))])

    result = get_strategy("fedave", bins=2).round(torch.zeros(10), updates, [1, 1], None, two_client_validation())

    assert result.accepted.tolist() == [True, False]
    assert torch.isfinite(result.global_params).all()
    torch.testing.assert_close(present(result.reward_updates)[1], torch.zeros(10))


def test_fedave_without_local_losses_says_what_to_pass() -> None:
    validation = Validation(client_evaluations=two_client_validation().client_evaluations)

    with pytest.raises(ConfigError, match="local per-sample losses"):
        get_strategy("fedave").round(torch.zeros(10), torch.ones(2, 10), [1, 1], None, validation)


def test_fedave_client_with_an_update_but_no_local_losses_is_named() -> None:
    validation = Validation(
        client_evaluations=two_client_validation().client_evaluations, local_sample_losses=[ONES_10, None]
    )

    with pytest.raises(ConfigError, match="client 1 has an update but no local per-sample losses"):
        get_strategy("fedave").round(torch.zeros(10), torch.ones(2, 10), [1, 1], None, validation)


def test_sparsify_keeps_the_largest_magnitudes_with_ties_to_the_earlier_entry() -> None:
    """|-2| = |2|: the earlier entry wins; quotas beyond [0, d] are clamped."""
    update = torch.tensor([0.5, -2.0, 2.0, 0.0, 1.0])

    kept = sparsify_top_magnitude(update, [0, 1, 3, 7, -1])

    assert kept.tolist() == [
        [0.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, -2.0, 0.0, 0.0, 0.0],
        [0.0, -2.0, 2.0, 0.0, 1.0],
        [0.5, -2.0, 2.0, 0.0, 1.0],
        [0.0, 0.0, 0.0, 0.0, 0.0],
    ]


def test_sparsify_by_layer_keeps_a_rounded_up_share_of_each_layer() -> None:
    """Layers [3, -1, 2] and [0.5, -4]: 50% keeps ceil(1.5) = 2 and 1 entries; 0 and 100% keep none and all."""
    update = torch.tensor([3.0, -1.0, 2.0, 0.5, -4.0])

    kept = sparsify_top_magnitude_by_layer(update, [0.5, 0.0, 1.0], [3, 2])

    assert kept.tolist() == [
        [3.0, 0.0, 2.0, 0.0, -4.0],
        [0.0, 0.0, 0.0, 0.0, 0.0],
        [3.0, -1.0, 2.0, 0.5, -4.0],
    ]
    with pytest.raises(ValueError, match="do not split"):
        sparsify_top_magnitude_by_layer(update, [0.5], [3, 3])
