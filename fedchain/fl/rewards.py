"""Rewards in kind: each client receives a sparsified copy of the global update.

Pure selection kernels shared by fedfaim and fedave. Ties are broken by
position (the earlier entry wins), so selections are deterministic; counts
outside ``[0, d]`` are clamped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def descending_rank(scores: torch.Tensor) -> torch.Tensor:
    """Rank of every entry of ``scores`` ``[d]``: 0 for the highest, ties by position."""
    order = torch.argsort(scores, descending=True, stable=True)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=order.device)
    return rank


def keep_top(update: torch.Tensor, rank: torch.Tensor, counts: Sequence[int]) -> torch.Tensor:
    """Row i: ``update`` with only its ``counts[i]`` best-ranked entries kept, stacked ``[len(counts), d]``."""
    limits = torch.tensor(list(counts), dtype=rank.dtype, device=rank.device).clamp(0, update.numel())
    keep = rank[None, :] < limits[:, None]
    return torch.where(keep, update[None, :], torch.zeros((), dtype=update.dtype, device=update.device))


def sparsify_top_magnitude(update: torch.Tensor, counts: Sequence[int]) -> torch.Tensor:
    """FedAVE's ``sparsify`` for every count: the ``k`` largest-magnitude entries of ``update``, one sort for all."""
    return keep_top(update, descending_rank(update.abs()), counts)


def sparsify_top_magnitude_by_layer(
    update: torch.Tensor, fractions: Sequence[float], layer_sizes: Sequence[int]
) -> torch.Tensor:
    """Layer-wise ``sparsify`` ``[len(fractions), d]``: row i keeps, in every layer (consecutive
    slices of ``layer_sizes`` entries), its ``ceil(fractions[i] * size)`` largest magnitudes.

    The FedAVE and CGSV authors' code masks this way: every layer of a rewarded model
    moves, where the whole-vector top-k would hand a small quota to the few layers with
    the largest updates. One sort per layer serves every client.
    """
    if sum(layer_sizes) != update.numel() or any(size <= 0 for size in layer_sizes):
        raise ValueError(f"layer sizes {list(layer_sizes)} do not split a vector of {update.numel()} entries")
    parts = []
    offset = 0
    for size in layer_sizes:
        layer = update[offset : offset + size]
        counts = [math.ceil(f * size) for f in fractions]  # keep_top clamps them to [0, size]
        parts.append(keep_top(layer, descending_rank(layer.abs()), counts))
        offset += size
    return torch.cat(parts, dim=1)


def distribution_scores(vector: torch.Tensor) -> torch.Tensor:
    """FedFAIM eqs. 4.17/4.18: ``|v_j| / sum_j |v_j|`` (all zeros for the zero vector)."""
    magnitude = vector.abs()
    total = magnitude.sum()
    return magnitude / total if total > 0 else torch.zeros_like(magnitude)


def select_by_agreement(
    global_update: torch.Tensor, local_updates: torch.Tensor, counts: Sequence[int]
) -> torch.Tensor:
    """FedFAIM's customised gradients ``[n, d]``: for client i, the ``counts[i]`` entries of
    ``global_update`` with the highest ``s_ij * s_Gj`` (one client at a time, O(d) extra memory)."""
    global_scores = distribution_scores(global_update)
    return torch.cat(
        [
            keep_top(global_update, descending_rank(distribution_scores(local) * global_scores), [count])
            for local, count in zip(local_updates, counts, strict=True)
        ]
    )


def sparsify_fractions(update: torch.Tensor, fractions: Sequence[float], layer_sizes: Sequence[int]) -> torch.Tensor:
    """Row i keeps ``fractions[i]`` of ``update``'s largest magnitudes ``[len(fractions), d]``:
    of every layer with ``layer_sizes`` (:func:`sparsify_top_magnitude_by_layer`), else of the
    whole vector (``ceil(fraction * d)`` entries)."""
    if layer_sizes:
        return sparsify_top_magnitude_by_layer(update, fractions, layer_sizes)
    return sparsify_top_magnitude(update, [math.ceil(f * update.numel()) for f in fractions])
