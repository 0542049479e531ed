"""The fair reward protocol on hand-built rounds: FedAvg's global model, a ranking, calibrated quotas."""

from __future__ import annotations

import pytest
import torch

from fedchain.errors import ConfigError
from fedchain.fl import Evaluation, Validation, get_strategy
from tests.support import present

F64 = torch.float64
#: Client 0 (3 samples) sends U0, client 1 (1 sample) U1: u_G = 0.75 U0 + 0.25 U1 = [2, 3, 2, 1];
#: U0 . u_G = 22 and U1 . u_G = 6, so client 0 is the better aligned by far.
U0 = torch.tensor([4.0, 3.0, 2.0, 1.0])
U1 = torch.tensor([-4.0, 3.0, 2.0, 1.0])
GRID = (0.25, 0.5, 1.0)


def share_of_entries(params: torch.Tensor) -> Evaluation:
    """A validation stand-in whose accuracy is the share of non-zero entries: it buys 0.25, 0.5, 1 at GRID."""
    return Evaluation(loss=0.0, accuracy=float((params != 0).double().mean()))


def test_the_better_aligned_client_gets_the_whole_update_and_the_other_the_quota_its_target_buys() -> None:
    """Scores [1, 0]; spread 0.5: targets [1.0, 0.5] buy quotas 1.0 and 0.5 on the curve 0.25, 0.5, 1.0.
    Quota 0.5 keeps the two largest entries of u_G = [2, 3, 2, 1]: 3, then the first 2 (ties by position)."""
    strategy = get_strategy("fair", signal="cosine", spread=0.5, quota_grid=GRID, contribution_measure="signal")

    result = strategy.round(torch.zeros(4), torch.stack([U0, U1]), [3, 1], None, Validation(evaluate=share_of_entries))

    torch.testing.assert_close(result.global_params, torch.tensor([2.0, 3.0, 2.0, 1.0]))  # FedAvg's
    torch.testing.assert_close(result.weights, torch.tensor([0.75, 0.25], dtype=F64))
    torch.testing.assert_close(result.contribution, torch.tensor([1.0, 0.0], dtype=F64))
    torch.testing.assert_close(present(result.rewards), torch.tensor([[2.0, 3.0, 2.0, 1.0], [2.0, 3.0, 0.0, 0.0]]))


def test_rewards_sparsify_the_whole_way_from_the_first_global_model_not_the_last_round() -> None:
    """Round 2: both send [0, 0, 0, 4] (equal signals, the sums stay [2, 1] -> scores [1, 0]); the global model
    goes from [2, 3, 2, 1] to [2, 3, 2, 5], and client 1's half quota keeps 5 and 3 of the total from round 1's
    start, [0, 3, 0, 5] (round 1's reward plus half of this round's update would have been [2, 3, 2, 1])."""
    strategy = get_strategy("fair", signal="cosine", spread=0.5, quota_grid=GRID, contribution_measure="signal")
    validation = Validation(evaluate=share_of_entries)
    first = strategy.round(torch.zeros(4), torch.stack([U0, U1]), [3, 1], None, validation)
    again = torch.tensor([0.0, 0.0, 0.0, 4.0]).expand(2, -1).clone()

    second = strategy.round(first.global_params, again, [3, 1], first.state, validation)

    torch.testing.assert_close(second.global_params, torch.tensor([2.0, 3.0, 2.0, 5.0]))
    torch.testing.assert_close(present(second.rewards)[1], torch.tensor([0.0, 3.0, 0.0, 5.0]))
    torch.testing.assert_close(present(second.state.signal_sum), torch.tensor([2.0, 1.0], dtype=F64))
    assert second.state.round == 2


def test_neg_log_kl_ranks_the_client_whose_losses_look_like_the_validation_sets_higher() -> None:
    """Losses 0/1 over two bins: validation 90% ones; client 0's own data 10% ones (KL 1.76), client 1's
    50% (KL 0.51), so client 1 ranks first whatever the directions (both send the same update)."""
    ones = lambda k: torch.tensor([0.0] * (10 - k) + [1.0] * k)  # noqa: E731
    validation = Validation(
        evaluate=share_of_entries,
        client_evaluations=[Evaluation(0.5, 0.9, ones(9)), Evaluation(0.5, 0.9, ones(9))],
        local_sample_losses=[ones(1), ones(5)],
    )
    options = {"signal": "neg_log_kl", "spread": 0.5, "quota_grid": GRID, "bins": 2, "histogram_epsilon": 1e-12}
    strategy = get_strategy("fair", **options, contribution_measure="signal")

    result = strategy.round(torch.zeros(4), torch.stack([U0, U0]), [1, 1], None, validation)
    default = get_strategy("fair", **options).round(torch.zeros(4), torch.stack([U0, U0]), [1, 1], None, validation)

    torch.testing.assert_close(result.contribution, torch.tensor([0.0, 1.0], dtype=F64))
    assert (present(result.rewards)[0] != 0).sum().item() == 2 and (present(result.rewards)[1] != 0).all()
    # the chain's contribution by default: accuracy 0.9 each, client 0 discounted by (0.510826 / 1.757780) ** 0.25;
    # the signal's last client scores 0 whoever it is, this one keeps nearly three quarters of the first's
    torch.testing.assert_close(default.contribution, torch.tensor([0.9 * 0.734222, 0.9], dtype=F64), atol=1e-6, rtol=0)
    torch.testing.assert_close(present(default.rewards), present(result.rewards))  # the ranking is the signal's


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"signal": "accuracy"}, "signal"),
        ({"spread": 1.5}, "spread"),
        ({"spread": -0.1}, "spread"),
        ({"quota_grid": (0.5, 0.1)}, "quota_grid"),
        ({"quota_grid": (0.0, 1.0)}, "quota_grid"),
        ({"quota_grid": ()}, "quota_grid"),
        ({"kl_floor": 0.0}, "kl_floor"),
        ({"layer_sizes": (3, 0)}, "layer_sizes"),
    ],
)
def test_invalid_settings_are_refused_with_a_hint(options: dict, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as caught:
        get_strategy("fair", **options)
    assert caught.value.hint


def test_yaml_style_options_become_typed_fields() -> None:
    strategy = get_strategy("fair", spread="0.2", quota_grid=["0.1", "1.0"], signal="cosine")

    assert strategy.spread == 0.2 and strategy.quota_grid == (0.1, 1.0) and strategy.signal == "cosine"


def test_layer_sizes_that_do_not_split_the_model_are_refused() -> None:
    strategy = get_strategy("fair", signal="cosine", layer_sizes=(3,))

    with pytest.raises(ConfigError, match="layer_sizes"):
        strategy.round(torch.zeros(4), torch.stack([U0, U1]), [1, 1], None, Validation(evaluate=share_of_entries))
