"""The experiment runner's set-up: the strategy, the grace."""

from __future__ import annotations

import pytest

from fedchain.experiments.config import ExperimentConfig
from fedchain.experiments.runner import experiment_grace, fit_strategy
from fedchain.fl import get_strategy
from fedchain.models import ModelSpec
from fedchain.taskspec import TaskSpec


def test_fedave_gets_the_model_layer_sizes_unless_it_was_given_some() -> None:
    spec = ModelSpec("lenet5", 10, 1, 28)
    sizes = tuple(tensor.numel() for tensor in spec.build().state_dict().values())

    filled = fit_strategy(get_strategy("fedave"), spec, 10)

    assert filled.layer_sizes == sizes and sum(sizes) == 61_706  # LeNet-5 on MNIST
    assert fit_strategy(get_strategy("fedave", layer_sizes=(61_706,)), spec, 10).layer_sizes == (61_706,)
    assert fit_strategy(get_strategy("fedavg"), spec, 10) == get_strategy("fedavg")


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"grace_first_round_screened": False},
        {"grace_first_round_extra": False},
        {"grace_first_round_loss": False},
        {"grace_first_round": False},
        {"quality_grace": 0},
    ],
)
def test_an_experiment_graces_as_a_task_spec_of_the_same_settings(settings: dict[str, object]) -> None:
    """The simulation's tables measure the product only if its grace is the spec's: every switch is passed on."""
    grace = experiment_grace(ExperimentConfig(**settings), 10)  # type: ignore[arg-type]

    assert grace == TaskSpec(dataset="mnist", model="lenet5", **settings).grace_rule(min_quality=0.5)  # type: ignore[arg-type]
    if not settings:
        assert grace is not None and grace.by_screen and grace.by_loss and grace.first_extra and grace.chance == 0.1
