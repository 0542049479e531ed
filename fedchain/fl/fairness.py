"""Kernels of the fair reward protocol: a ranking from server-side signals, and
reward quotas calibrated to the accuracy they buy.

Pure tensor functions (no I/O, no evaluation): the :class:`~fedchain.fl.strategies.Fair`
strategy evaluates the candidate models and passes the numbers in.

- Ranking: each round's signal is rescaled to [0, 1] over the eligible clients
  (:func:`rescale_unit`); the clients' mean over the rounds, rescaled again, is
  their score ``s_i`` (1 for the best ranked, 0 for the worst).
- Targets: client i aims at ``A_top - spread * (1 - s_i)``, ``A_top`` the
  validation accuracy of the whole update (:func:`accuracy_targets`).
- Calibration: the quota of a target is read off the measured quota-to-accuracy
  curve, interpolated linearly in accuracy between the logarithms of the two
  grid quotas that bracket it (:func:`calibrated_quotas`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch


def rescale_unit(values: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
    """``(v - min) / (max - min)`` over the eligible entries, float64 ``[n]``; 0 for the others.

    Equal values (or a single eligible entry) all get 1: nothing tells them apart.
    Non-finite values of eligible entries count as the lowest.
    """
    values = values.to(torch.float64)
    usable = eligible & torch.isfinite(values)
    out = torch.zeros_like(values)
    if not usable.any():
        return out
    low, high = values[usable].min(), values[usable].max()
    if high - low <= 0:
        out[usable] = 1.0
        return out
    out[usable] = (values[usable] - low) / (high - low)
    return out


def accuracy_targets(scores: torch.Tensor, top_accuracy: float, spread: float) -> torch.Tensor:
    """``top_accuracy - spread * (1 - s_i)`` for scores ``s`` in [0, 1], float64 ``[n]``."""
    return top_accuracy - spread * (1.0 - scores.to(torch.float64).clamp(0.0, 1.0))


def monotone_curve(accuracies: Sequence[float]) -> list[float]:
    """The running maximum of accuracies measured at increasing quotas.

    More of the update never buys less accuracy here: a dip measured at a larger
    quota is noise of the validation set, and the calibration needs a monotone map.
    """
    curve: list[float] = []
    for accuracy in accuracies:
        curve.append(accuracy if not curve else max(curve[-1], accuracy))
    return curve


def calibrated_quotas(grid: Sequence[float], accuracies: Sequence[float], targets: torch.Tensor) -> torch.Tensor:
    """The quota (fraction of the update in (0, 1]) that buys each target accuracy, float64 ``[n]``.

    ``grid`` holds increasing quotas and ``accuracies`` what each bought (made monotone with
    :func:`monotone_curve`). A target at or below the first accuracy gets the first quota, one
    above the last gets the last; in between, the smallest bracketing pair of grid quotas is
    interpolated linearly in accuracy on a logarithmic quota scale (what a quota buys grows
    about with its logarithm). A flat segment gives its lower end.
    """
    if len(grid) != len(accuracies) or not grid:
        raise ValueError(f"a calibration needs one accuracy per grid quota, got {len(accuracies)} for {len(grid)}")
    if any(not 0 < q <= 1 for q in grid) or any(b <= a for a, b in itertools.pairwise(grid)):
        raise ValueError(f"grid quotas must increase within (0, 1], got {list(grid)}")
    curve = monotone_curve(accuracies)
    logs = [math.log(q) for q in grid]
    quotas = []
    for target in targets.tolist():
        if target <= curve[0]:
            quotas.append(grid[0])
            continue
        if target > curve[-1]:
            quotas.append(grid[-1])
            continue
        k = next(k for k in range(1, len(curve)) if curve[k] >= target)
        low, high = curve[k - 1], curve[k]
        share = 0.0 if high <= low else (target - low) / (high - low)
        quotas.append(math.exp(logs[k - 1] + share * (logs[k] - logs[k - 1])))
    return torch.tensor(quotas, dtype=torch.float64)


__all__ = ["accuracy_targets", "calibrated_quotas", "monotone_curve", "rescale_unit"]
