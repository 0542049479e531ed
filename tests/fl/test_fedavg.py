"""FedAvg: data-size weights, NaN rejection, shape errors (properties shared by all strategies: test_strategies.py)."""

from __future__ import annotations

import pytest
import torch

from fedchain.errors import ConfigError, UpdateRejected
from fedchain.fl import get_strategy, strategy_names


def test_fedavg_weights_updates_by_data_share() -> None:
    """Sizes 1 and 3 give weights 1/4, 3/4: [0,0,0] + 1/4*[1,2,3] + 3/4*[3,2,1] = [2.5, 2, 1.5]."""
    strategy = get_strategy("fedavg")

    result = strategy.round(torch.zeros(3), torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]), [1, 3])

    torch.testing.assert_close(result.global_params, torch.tensor([2.5, 2.0, 1.5]))
    torch.testing.assert_close(result.weights, torch.tensor([0.25, 0.75], dtype=torch.float64))
    assert result.accepted.tolist() == [True, True]
    assert result.state.round == 1
    assert result.rewards is None


def test_fedavg_rejects_nan_and_inf_updates_and_renormalises_the_rest() -> None:
    """Client 1 is NaN and client 2 infinite: only client 0 (size 2) is averaged, with weight 1."""
    updates = torch.tensor([[1.0, -1.0], [float("nan"), 0.0], [float("inf"), 1.0]])

    result = get_strategy("fedavg").round(torch.tensor([1.0, 1.0]), updates, [2, 5, 5])

    assert result.accepted.tolist() == [True, False, False]
    torch.testing.assert_close(result.global_params, torch.tensor([2.0, 0.0]))
    assert torch.isfinite(result.global_params).all()
    assert result.weights.tolist() == [1.0, 0.0, 0.0]


def test_fedavg_with_every_update_rejected_keeps_the_global_model() -> None:
    global_params = torch.tensor([0.5, -0.5])

    result = get_strategy("fedavg").round(global_params, torch.full((2, 2), float("nan")), [1, 1])

    assert result.accepted.tolist() == [False, False]
    torch.testing.assert_close(result.global_params, global_params)


@pytest.mark.parametrize(
    ("updates", "sizes", "message"),
    [
        (torch.zeros(2, 4), [1, 1], "updates must be a \\[n_clients, 3\\]"),
        (torch.zeros(3), [1], "updates must be"),
        (torch.zeros(2, 3), [1, 1, 1], "data sizes must be \\[2\\]"),
        (torch.zeros(2, 3), [1, -1], "non-negative"),
        (torch.zeros(2, 3, dtype=torch.float64), [1, 1], "convert the updates"),
        (torch.zeros(0, 3), [], "at least one"),
    ],
)
def test_round_rejects_malformed_inputs_with_a_clear_error(
    updates: torch.Tensor, sizes: list[int], message: str
) -> None:
    with pytest.raises(UpdateRejected, match=message):
        get_strategy("fedavg").round(torch.zeros(3), updates, sizes)


def test_unknown_strategy_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        get_strategy("fedsgd")

    assert "fedsgd" in str(info.value)
    for name in strategy_names():
        assert name in info.value.hint


def test_unknown_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"fedavg\.learning_rate"):
        get_strategy("fedavg", learning_rate=0.1)
