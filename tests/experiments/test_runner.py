"""The experiment runner's strategy set-up."""

from __future__ import annotations

from fedchain.experiments.runner import with_layer_sizes
from fedchain.fl import get_strategy
from fedchain.models import ModelSpec


def test_fedave_gets_the_model_layer_sizes_unless_it_was_given_some() -> None:
    spec = ModelSpec("lenet5", 10, 1, 28)
    sizes = tuple(tensor.numel() for tensor in spec.build().state_dict().values())

    filled = with_layer_sizes(get_strategy("fedave"), spec)

    assert filled.layer_sizes == sizes and sum(sizes) == 61_706  # LeNet-5 on MNIST
    assert with_layer_sizes(get_strategy("fedave", layer_sizes=(61_706,)), spec).layer_sizes == (61_706,)
    assert with_layer_sizes(get_strategy("fedavg"), spec) == get_strategy("fedavg")
