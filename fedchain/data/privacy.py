"""Local differential privacy on images before they leave the client.

A client hands its data to a fog node (DESIGN.md, step 4) after adding noise
to every pixel. The noise is added on pixels scaled to ``[0, 1]`` (the
dataset's normalisation is undone first and redone after), and the result is
clipped back to ``[0, 1]``, which is post-processing and costs no privacy.

Sensitivity assumed: one pixel value changes by at most ``1`` (its range), and
each pixel is released once by its own mechanism. So

* Laplace: noise ``Laplace(0, b)`` with ``b = 1 / epsilon`` makes every pixel
  ``epsilon``-DP;
* Gaussian: noise ``N(0, sigma^2)`` with
  ``sigma = sqrt(2 ln(1.25 / delta)) / epsilon`` makes every pixel
  ``(epsilon, delta)``-DP (the classical bound, stated for ``epsilon < 1``).

The guarantee is per pixel, not per image: an image of ``P`` pixels is
``P * epsilon``-DP by composition. Per-pixel budgets are what the papers'
experiments vary; choose epsilon with that in mind.
"""

from __future__ import annotations

import math
from typing import Literal

import torch

from fedchain.data.datasets import ImageDataset
from fedchain.errors import ConfigError

Mechanism = Literal["laplace", "gaussian"]

#: Sensitivity of one pixel on the [0, 1] scale.
PIXEL_SENSITIVITY = 1.0


def noise_scale(epsilon: float, mechanism: Mechanism = "laplace", delta: float = 1e-5) -> float:
    """The Laplace scale ``b`` or the Gaussian ``sigma`` for budget ``epsilon`` (and ``delta``)."""
    if not epsilon > 0 or not math.isfinite(epsilon):
        raise ConfigError(f"privacy budget epsilon must be a positive number, got {epsilon}")
    if mechanism == "laplace":
        return PIXEL_SENSITIVITY / epsilon
    if mechanism == "gaussian":
        if not 0 < delta < 1:
            raise ConfigError(f"Gaussian mechanism needs 0 < delta < 1, got {delta}")
        return PIXEL_SENSITIVITY * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon
    raise ConfigError(f"unknown privacy mechanism {mechanism!r}", hint="use laplace or gaussian")


def privatise(
    dataset: ImageDataset,
    epsilon: float,
    *,
    mechanism: Mechanism = "laplace",
    delta: float = 1e-5,
    generator: torch.Generator,
) -> ImageDataset:
    """``dataset`` with locally private images (labels unchanged); see the module docstring."""
    scale = noise_scale(epsilon, mechanism, delta)
    images = dataset.images
    mean = torch.tensor(dataset.mean, dtype=images.dtype, device=images.device).view(1, -1, 1, 1)
    std = torch.tensor(dataset.std, dtype=images.dtype, device=images.device).view(1, -1, 1, 1)
    pixels = images * std + mean
    if mechanism == "laplace":
        # Laplace(0, b) as the difference of two exponentials of mean b.
        uniform = torch.rand((2, *images.shape), generator=generator, dtype=torch.float64)
        noise = (-torch.log1p(-uniform[0]) + torch.log1p(-uniform[1])) * scale
    else:
        noise = torch.randn(images.shape, generator=generator, dtype=torch.float64) * scale
    noisy = (pixels + noise.to(device=images.device, dtype=images.dtype)).clamp_(0.0, 1.0)
    return dataset.with_tensors(images=(noisy - mean) / std)
