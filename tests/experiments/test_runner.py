"""The experiment runner's strategy set-up."""

from __future__ import annotations

from fedchain.experiments.runner import fit_strategy
from fedchain.fl import get_strategy
from fedchain.models import ModelSpec


def test_fedave_gets_the_model_layer_sizes_unless_it_was_given_some() -> None:
    spec = ModelSpec("lenet5", 10, 1, 28)
    sizes = tuple(tensor.numel() for tensor in spec.build().state_dict().values())

    filled = fit_strategy(get_strategy("fedave"), spec, 10)

    assert filled.layer_sizes == sizes and sum(sizes) == 61_706  # LeNet-5 on MNIST
    assert fit_strategy(get_strategy("fedave", layer_sizes=(61_706,)), spec, 10).layer_sizes == (61_706,)
    assert fit_strategy(get_strategy("fedavg"), spec, 10) == get_strategy("fedavg")
