"""Fairness metrics: Pearson correlation (FedAVE, FedFAIM) and Jain's fairness index.

Pure functions of two (or one) sequences of numbers, computed in float64.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fedchain.errors import DataError

#: Below this standard deviation a sample counts as constant.
ZERO_VARIANCE = 1e-12


def _vector(name: str, values: Sequence[float] | torch.Tensor) -> torch.Tensor:
    vector = torch.as_tensor(values, dtype=torch.float64).reshape(-1).cpu()
    if not torch.isfinite(vector).all():
        raise DataError(f"{name} must be finite, got {vector.tolist()}", hint="drop or fix the NaN/infinite entries")
    return vector


def pearson(x: Sequence[float] | torch.Tensor, y: Sequence[float] | torch.Tensor) -> float:
    """Pearson correlation of ``x`` and ``y`` in [-1, 1].

    Zero-variance rule: when either sample is constant the correlation is
    undefined (0/0); we return 0.0, "no linear relation can be measured", so
    that means over seeds stay defined. A constant reward is never counted as fair.
    """
    xs, ys = _vector("x", x), _vector("y", y)
    if xs.numel() != ys.numel() or xs.numel() < 2:
        raise DataError(
            f"pearson needs two samples of the same length >= 2, got {xs.numel()} and {ys.numel()}",
            hint="pass one value per client for both",
        )
    dx, dy = xs - xs.mean(), ys - ys.mean()
    sx, sy = dx.norm(), dy.norm()
    if sx <= ZERO_VARIANCE * xs.numel() ** 0.5 or sy <= ZERO_VARIANCE * ys.numel() ** 0.5:
        return 0.0
    return float(((dx @ dy) / (sx * sy)).clamp(-1.0, 1.0))


def jain_index(values: Sequence[float] | torch.Tensor) -> float:
    """Jain's fairness index ``(sum x)^2 / (n sum x^2)`` of non-negative values, in [1/n, 1].

    All zeros count as perfectly even: 1.0.
    """
    xs = _vector("values", values)
    if xs.numel() == 0 or (xs < 0).any():
        raise DataError(
            f"Jain's index needs a non-empty sample of non-negative values, got {xs.tolist()}",
            hint="pass accuracies, rewards or other non-negative allocations",
        )
    squares = (xs * xs).sum()
    if squares == 0:
        return 1.0
    return float(xs.sum() ** 2 / (xs.numel() * squares))
