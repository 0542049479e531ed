"""LeNet-5 (LeCun et al. 1998) with ReLU and max pooling, for MNIST-like data."""

from __future__ import annotations

import torch
from torch import nn


class LeNet5(nn.Module):
    """conv 6@5x5 - pool - conv 16@5x5 - pool - fc 120 - fc 84 - fc classes.

    The first convolution pads the input to 32x32 (the original LeNet's input
    size), so 28x28 MNIST images and 32x32 images both fit.
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 1, image_size: int = 28) -> None:
        super().__init__()
        padding = max(0, (32 - image_size) // 2)
        side = ((image_size + 2 * padding - 4) // 2 - 4) // 2
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, kernel_size=5, padding=padding),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, kernel_size=5),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(16 * side * side, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[batch, num_classes]``."""
        return self.classifier(self.features(x))
