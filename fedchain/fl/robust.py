"""Robust aggregation rules: coordinate-wise median, trimmed mean, Multi-Krum, norm clipping.

Each rule is a pure function of ``(updates [n, d], weights [n], mask [n])``
returning the aggregated update ``[d]`` in the updates' dtype and device; only
rows where ``mask`` is True take part (the others may hold anything, NaN
included, and are never read into the result). The formulas are Flower's
(``flwr.server.strategy.aggregate``: ``aggregate_median``,
``aggregate_trimmed_avg``, ``aggregate_krum``, and the clipping of its
differential-privacy wrappers); where Flower ignores the clients' weights
(median, trimmed mean) the weighted form below reduces to Flower's when the
weights are equal, so a data-size weighting stays available:

- median: per coordinate, the weighted median (the mean of the lower and upper
  weighted medians: with equal weights, numpy's median, which averages the two
  middle values of an even count);
- trimmed mean: per coordinate, drop the ``floor(beta * m)`` smallest and
  largest of the ``m`` present values, then the weighted mean of the rest;
- Multi-Krum (Blanchard et al. 2017): score each update by the sum of squared
  distances to its ``m - f - 2`` nearest others (at least 1), keep the
  ``to_keep`` lowest scores and take their weighted mean (``to_keep = 0``:
  Krum, the single best update);
- norm clipping: scale each update to norm at most ``max_norm``, then the
  weighted mean.

Weights are normalised over the rows each rule keeps, so they need not sum to 1.
"""

from __future__ import annotations

import torch

from fedchain.errors import ConfigError
from fedchain.fl.aggregate import ZERO_NORM, normalise_weights, row_norms, weighted_sum


def _present(updates: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The present rows ``[m, d]`` and their float64 weights ``[m]``; a :class:`ConfigError` for bad shapes."""
    if updates.ndim != 2 or weights.shape != (updates.shape[0],) or mask.shape != (updates.shape[0],):
        raise ConfigError(
            f"a robust rule needs updates [n, d] with weights [n] and mask [n], got {tuple(updates.shape)}, "
            f"{tuple(weights.shape)} and {tuple(mask.shape)}",
            hint="pass one weight and one mask entry per update row",
        )
    rows = torch.nonzero(mask.cpu()).flatten()
    if weights.to(torch.float64)[rows].lt(0).any():
        raise ConfigError("robust aggregation weights must be non-negative", hint="pass data sizes or shares")
    return updates[rows.to(updates.device)], weights.to(torch.float64).cpu()[rows]


def _weighted_mean(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``sum_i w_i x_i / sum_i w_i`` over the rows; the zero update when nothing (or no weight) is left."""
    return weighted_sum(rows, normalise_weights(weights)) if rows.shape[0] else rows.new_zeros(rows.shape[1])


def coordinate_median(updates: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per coordinate, the weighted median of the present updates (module docstring); zeros when none is present."""
    rows, w = _present(updates, weights, mask)
    if rows.shape[0] == 0:
        return updates.new_zeros(updates.shape[1])
    if float(w.sum()) <= 0:
        w = torch.ones_like(w)
    values, order = torch.sort(rows, dim=0)
    cumulative = torch.cumsum(w.to(rows.device)[order], dim=0)  # [m, d], float64
    half = cumulative[-1] / 2
    # The lower weighted median is the first value whose cumulative weight reaches half the total; the upper
    # one the first that passes it. Ties of cumulative weight with half are where an even count splits.
    lower = torch.searchsorted(cumulative.T.contiguous(), half[:, None].contiguous(), right=False).squeeze(1)
    upper = torch.searchsorted(cumulative.T.contiguous(), half[:, None].contiguous(), right=True).squeeze(1)
    last = rows.shape[0] - 1
    low = values.gather(0, lower.clamp(max=last)[None, :]).squeeze(0)
    high = values.gather(0, upper.clamp(max=last)[None, :]).squeeze(0)
    return (low + high) / 2


def leave_one_out_medians(updates: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per present update, the unweighted coordinate-wise median of the OTHER present updates, ``[n, d]``.

    What the others agree on, untouched by the update it is compared with: with the update
    itself in the median, pure noise correlates with it by about 1/sqrt(n). Rows not present
    are zero. One sort serves all rows: removing the value of rank r from a coordinate's
    sorted values leaves order statistic k at position k (k < r) or k + 1 (k >= r). Needs
    at least 2 present updates.
    """
    rows = torch.nonzero(mask.cpu()).flatten()
    m = rows.numel()
    if m < 2:
        raise ConfigError(f"a leave-one-out median needs at least 2 updates, got {m}", hint="wait for more updates")
    present = updates[rows.to(updates.device)]
    values, order = torch.sort(present, dim=0)
    ranks = torch.empty_like(order)
    ranks.scatter_(0, order, torch.arange(m, device=order.device)[:, None].expand(-1, present.shape[1]))
    low, high = (m - 2) // 2, (m - 1) // 2  # the middle order statistics of the m - 1 others

    def others_order_statistic(k: int) -> torch.Tensor:
        return torch.where(ranks > k, values[k], values[k + 1])  # [m, d]

    medians = torch.zeros_like(updates)
    medians[rows.to(updates.device)] = (others_order_statistic(low) + others_order_statistic(high)) / 2
    return medians


def trimmed_mean(updates: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor, beta: float) -> torch.Tensor:
    """Per coordinate, the weighted mean after dropping the ``floor(beta * m)`` smallest and largest values.

    ``beta`` is the fraction cut from each end, in ``[0, 0.5)``; a :class:`ConfigError` otherwise or when
    it would cut every value (Flower: "Proportion too big").
    """
    if not 0 <= beta < 0.5:
        raise ConfigError(f"trimmed mean beta must be in [0, 0.5), got {beta}", hint="cut less than half from each end")
    rows, w = _present(updates, weights, mask)
    m = rows.shape[0]
    cut = int(beta * m)
    if m == 0 or m - 2 * cut <= 0:
        raise ConfigError(
            f"trimmed mean with beta {beta} keeps none of {m} updates", hint="lower beta or wait for more updates"
        )
    values, order = torch.sort(rows, dim=0)
    kept_weights = w.to(rows.device)[order[cut : m - cut]]  # [m - 2 cut, d]
    total = kept_weights.sum(dim=0)
    equal = torch.full_like(kept_weights, 1.0 / (m - 2 * cut))
    shares = torch.where(total > 0, kept_weights / total.clamp_min(torch.finfo(torch.float64).tiny), equal)
    return (shares.to(rows.dtype) * values[cut : m - cut]).sum(dim=0)


def krum_scores(updates: torch.Tensor, mask: torch.Tensor, f: int) -> torch.Tensor:
    """Krum's score of every present update (sum of squared distances to its ``m - f - 2`` nearest), +inf elsewhere.

    Float64 ``[n]`` on the CPU. ``f`` is the number of Byzantine clients the rule tolerates.
    """
    if f < 0:
        raise ConfigError(
            f"Krum's f must be non-negative, got {f}", hint="pass the number of malicious clients tolerated"
        )
    rows = torch.nonzero(mask.cpu()).flatten()
    scores = torch.full((updates.shape[0],), torch.inf, dtype=torch.float64)
    m = rows.numel()
    if m == 0:
        return scores
    present = updates[rows.to(updates.device)].to(torch.float64)
    distances = torch.cdist(present, present).pow(2).cpu()  # [m, m]
    closest = max(1, m - f - 2)
    nearest = torch.sort(distances, dim=1).values[:, 1 : closest + 1]  # column 0 is the update itself
    scores[rows] = nearest.sum(dim=1)
    return scores


def multi_krum(updates: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor, f: int, to_keep: int) -> torch.Tensor:
    """The weighted mean of the ``to_keep`` present updates with the lowest Krum scores (0: Krum, the best one)."""
    if to_keep < 0:
        raise ConfigError(f"Multi-Krum's to_keep must be non-negative, got {to_keep}", hint="0 keeps the single best")
    chosen = krum_selection(updates, mask, f, to_keep)
    return _weighted_mean(*_present(updates, weights, chosen))


def krum_selection(updates: torch.Tensor, mask: torch.Tensor, f: int, to_keep: int) -> torch.Tensor:
    """Which updates Multi-Krum averages: bool ``[n]``, the ``max(1, to_keep)`` lowest scores among the present."""
    scores = krum_scores(updates, mask, f)
    present = int(mask.sum())
    keep = min(max(1, to_keep), present)
    chosen = torch.zeros(updates.shape[0], dtype=torch.bool)
    chosen[torch.argsort(scores, stable=True)[:keep]] = True
    return chosen


def clip_scales(norms: torch.Tensor, max_norm: float | torch.Tensor) -> torch.Tensor:
    """``min(1, max_norm / norm)`` per update (1 for a zero update), float64 like ``norms``."""
    limit = torch.as_tensor(max_norm, dtype=torch.float64)
    return torch.where(norms > limit, limit / norms.clamp_min(ZERO_NORM), torch.ones_like(norms))


def norm_clipped_mean(
    updates: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor, max_norm: float
) -> torch.Tensor:
    """The weighted mean of the present updates, each first scaled down to norm at most ``max_norm``."""
    if not max_norm > 0:
        raise ConfigError(f"the clipping norm must be positive, got {max_norm}", hint="pass the largest norm allowed")
    rows, w = _present(updates, weights, mask)
    scales = clip_scales(row_norms(rows), max_norm)
    return _weighted_mean(rows * scales.to(device=rows.device, dtype=rows.dtype)[:, None], w)


__all__ = [
    "clip_scales",
    "coordinate_median",
    "krum_scores",
    "krum_selection",
    "leave_one_out_medians",
    "multi_krum",
    "norm_clipped_mean",
    "trimmed_mean",
]
