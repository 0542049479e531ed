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


def every_stackable_layer() -> nn.Module:
    """A chain of every layer kind the stacked engine rewrites, on 2x8x8 images: grouped and bias-free
    convolutions, average pooling, a bias-free linear layer, a second Flatten and several activations."""
    return nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1, groups=2),
        nn.Tanh(),
        nn.AvgPool2d(2),
        nn.Conv2d(4, 4, 3, bias=False),
        nn.LeakyReLU(0.1),
        nn.Identity(),
        nn.Flatten(),
        nn.Linear(16, 5, bias=False),
        nn.GELU(),
        nn.Flatten(),
        nn.Linear(5, 3),
        nn.Sigmoid(),
    )


def with_dropout() -> nn.Module:
    """A small net with dropout, whose per-client random masks the stacked engine does not draw."""
    return nn.Sequential(nn.Flatten(), nn.Linear(36, 8), nn.Dropout(0.5), nn.Linear(8, 3))


class _FlattensOutsideALayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.fc = nn.Linear(32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.conv(x), 1))


def flattening_outside_a_layer() -> nn.Module:
    """A conv net that flattens with ``torch.flatten`` in its forward instead of an ``nn.Flatten`` layer."""
    return _FlattensOutsideALayer()


class _WithAnUnusedLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Sequential(nn.Flatten(), nn.Linear(36, 3))
        self.unused = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)


def with_an_unused_layer() -> nn.Module:
    """A net with a layer its forward never calls."""
    return _WithAnUnusedLayer()


def linear_before_flatten() -> nn.Module:
    """A linear layer on the image's last dimension, before any Flatten."""
    return nn.Sequential(nn.Linear(6, 6), nn.Flatten(), nn.Linear(36, 3))


class _WithASkipConnection(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 3, padding=1)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(36, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x) + x)


def with_a_skip_connection() -> nn.Module:
    """A residual block: the head takes the sum of a layer's output and the input."""
    return _WithASkipConnection()


class _BranchesOnItsInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(36, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x) if x.sum() > 0 else -self.net(x)


def branching_on_its_input() -> nn.Module:
    """A net whose forward branches on the values of its input, which fx cannot trace."""
    return _BranchesOnItsInput()


class _TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.flatten = nn.Flatten()
        self.first = nn.Linear(36, 3)
        self.second = nn.Linear(36, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.flatten(x)
        return self.first(features), self.second(features)


def with_two_heads() -> nn.Module:
    """Two linear heads on the same features: the second does not take the first's output."""
    return _TwoHeads()


def random_clients(
    sizes: list[int], shape: tuple[int, ...], classes: int, seed: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Clients of random images and labels, one per size."""
    generator = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(n, *shape, generator=generator), torch.randint(0, classes, (n,), generator=generator))
        for n in sizes
    ]
