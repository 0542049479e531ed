"""A small convolutional network for CIFAR-10 (and MNIST-like data)."""

from __future__ import annotations

import torch
from torch import nn


class SmallCNN(nn.Module):
    """Three conv 3x3 + ReLU + max-pool stages (32, 64, 64 channels), then fc 256 and fc classes.

    No batch normalisation and no dropout: the model has no buffers and no
    randomness of its own, so clients vectorise over it (the ``stacked`` and ``vmap`` engines).
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 3, image_size: int = 32) -> None:
        super().__init__()
        channels = (32, 64, 64)
        layers: list[nn.Module] = []
        previous = in_channels
        side = image_size
        for width in channels:
            layers += [nn.Conv2d(previous, width, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
            previous = width
            side //= 2
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(previous * side * side, 256),
            nn.ReLU(),
            nn.Linear(256, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[batch, num_classes]``."""
        return self.classifier(self.features(x))
