"""Models by name: ``build_model("lenet5", num_classes=10, in_channels=1)``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torch import nn

from fedchain.errors import ModelError
from fedchain.models.cnn import SmallCNN
from fedchain.models.lenet import LeNet5
from fedchain.models.resnet import resnet18

if TYPE_CHECKING:
    from fedchain.fl.params import ParamSpec


def _lenet5(num_classes: int, in_channels: int, image_size: int) -> nn.Module:
    return LeNet5(num_classes, in_channels, image_size)


def _cnn(num_classes: int, in_channels: int, image_size: int) -> nn.Module:
    return SmallCNN(num_classes, in_channels, image_size)


def _resnet18(num_classes: int, in_channels: int, image_size: int) -> nn.Module:
    return resnet18(num_classes, in_channels)


#: name -> builder(num_classes, in_channels, image_size).
MODELS: dict[str, Callable[[int, int, int], nn.Module]] = {
    "lenet5": _lenet5,
    "cnn": _cnn,
    "resnet18": _resnet18,
}

_ALIASES = {"lenet": "lenet5", "lenet-5": "lenet5", "small-cnn": "cnn", "smallcnn": "cnn", "resnet-18": "resnet18"}


def _canonical(name: str) -> str:
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in MODELS:
        raise ModelError(f"unknown model {name!r}", hint=f"use one of: {', '.join(MODELS)}")
    return key


def build_model(name: str, num_classes: int = 10, in_channels: int = 1, image_size: int | None = None) -> nn.Module:
    """A freshly initialised model ``name`` (``lenet5``, ``cnn``, ``resnet18``).

    ``image_size`` defaults to 28 for one channel (MNIST-like) and 32 otherwise (CIFAR-10).
    """
    key = _canonical(name)
    if num_classes < 2:
        raise ModelError(f"a classifier needs at least 2 classes, got {num_classes}")
    if in_channels < 1:
        raise ModelError(f"in_channels must be at least 1, got {in_channels}")
    size = image_size if image_size is not None else (28 if in_channels == 1 else 32)
    return MODELS[key](num_classes, in_channels, size)


@dataclass(frozen=True)
class ModelSpec:
    """A model by name and shape: small, hashable and picklable, so worker processes can build it."""

    name: str
    num_classes: int = 10
    in_channels: int = 1
    image_size: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", _canonical(self.name))

    def build(self) -> nn.Module:
        """A freshly initialised instance (torch's default initialisation, under the caller's seed)."""
        return build_model(self.name, self.num_classes, self.in_channels, self.image_size)

    def param_spec(self) -> ParamSpec:
        """Names, shapes and dtypes of the model's state dict, in the flat vector's order; built once per
        architecture (building a ResNet-18 to read it takes over half a second on a 2-core CPU)."""
        return _param_spec_of(self)


@functools.lru_cache(maxsize=16)
def _param_spec_of(spec: ModelSpec) -> ParamSpec:
    from fedchain.fl.params import ParamSpec

    return ParamSpec.of(spec.build().state_dict())
