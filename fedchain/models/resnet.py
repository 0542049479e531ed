"""ResNet-18, CIFAR variant (He et al. 2016; the 3x3 stem without max pooling used for 32x32 images)."""

from __future__ import annotations

from torch import nn


def resnet18(num_classes: int = 10, in_channels: int = 3) -> nn.Module:
    """torchvision's ResNet-18 with a 3x3 stride-1 stem and no max pooling, for small images.

    It has batch normalisation (running statistics are buffers), so it trains
    with the ``sequential`` or ``process`` engine, not ``stacked`` or ``vmap``.
    """
    from torchvision.models import resnet18 as torchvision_resnet18  # torchvision loads slowly; only here

    model = torchvision_resnet18(weights=None, num_classes=num_classes)
    model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model
