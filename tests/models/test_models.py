"""Models by name: output shapes, parameter counts, clear errors."""

from __future__ import annotations

import pickle

import pytest
import torch
from torch import nn

from fedchain.errors import ModelError
from fedchain.models import MODELS, ModelSpec, build_model


@pytest.mark.parametrize(
    "name, channels, size",
    [("lenet5", 1, 28), ("lenet5", 3, 32), ("cnn", 3, 32), ("cnn", 1, 28), ("resnet18", 3, 32)],
)
def test_every_model_maps_a_batch_of_images_to_one_logit_per_class(name: str, channels: int, size: int) -> None:
    model = build_model(name, num_classes=7, in_channels=channels, image_size=size)

    logits = model(torch.zeros(3, channels, size, size))

    assert logits.shape == (3, 7)


def test_lenet5_has_the_hand_counted_61706_parameters() -> None:
    # conv1 1*6*25+6 = 156, conv2 6*16*25+16 = 2416, fc 400*120+120 = 48120,
    # fc 120*84+84 = 10164, fc 84*10+10 = 850.
    model = build_model("lenet5", num_classes=10, in_channels=1)

    assert sum(p.numel() for p in model.parameters()) == 156 + 2416 + 48120 + 10164 + 850


def test_resnet18_is_the_cifar_variant_with_a_3x3_stem() -> None:
    model = build_model("resnet18", num_classes=10, in_channels=3)

    assert sum(p.numel() for p in model.parameters()) == 11_173_962
    assert isinstance(model.conv1, nn.Conv2d) and model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1)


def test_unknown_model_names_the_known_ones() -> None:
    with pytest.raises(ModelError, match="unknown model 'vgg'") as caught:
        build_model("vgg")
    for name in MODELS:
        assert name in caught.value.hint


def test_model_spec_is_picklable_and_builds_the_same_model_under_a_seed() -> None:
    spec = pickle.loads(pickle.dumps(ModelSpec("LeNet-5")))

    torch.manual_seed(0)
    first = spec.build().state_dict()
    torch.manual_seed(0)
    second = spec.build().state_dict()

    assert spec.name == "lenet5"
    assert all(torch.equal(first[k], second[k]) for k in first)
