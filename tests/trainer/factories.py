"""Small models and data for trainer tests; imports only torch, so worker processes load it fast."""

from __future__ import annotations

import torch
from torch import nn


def linear_two_by_two() -> nn.Module:
    """A bias-free 2->2 linear classifier over 1x1x2 'images', weights zero: hand-computable."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(2, 2, bias=False))
    linear = model[1]
    assert isinstance(linear, nn.Linear)
    nn.init.zeros_(linear.weight)
    return model


def tiny_batchnorm_net() -> nn.Module:
    """A conv + batch-norm net on 1x6x6 images: has buffers, including an int64 counter."""
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(32, 3))


def random_clients(sizes: list[int], shape: tuple[int, ...], classes: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Clients of random images and labels, one per size."""
    generator = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(n, *shape, generator=generator), torch.randint(0, classes, (n,), generator=generator))
        for n in sizes
    ]
