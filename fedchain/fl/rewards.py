"""Rewards in kind: each client receives a sparsified copy of the global update.

Pure selection kernels shared by fedfaim and fedave. Ties are broken by
position (the earlier entry wins), so selections are deterministic.
"""

from __future__ import annotations

import torch


def top_k_mask(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Boolean mask of the ``k`` highest ``scores`` (clamped to ``[0, len]``; ties by position)."""
    k = max(0, min(int(k), scores.numel()))
    mask = torch.zeros(scores.numel(), dtype=torch.bool, device=scores.device)
    if k:
        mask[torch.argsort(scores, descending=True, stable=True)[:k]] = True
    return mask


def sparsify_top_magnitude(update: torch.Tensor, k: int) -> torch.Tensor:
    """FedAVE's ``sparsify``: keep the ``k`` largest-magnitude entries of ``update``, zero the rest."""
    return torch.where(top_k_mask(update.abs(), k), update, torch.zeros_like(update))


def sparsify_top_magnitude_many(update: torch.Tensor, counts: list[int]) -> torch.Tensor:
    """``[sparsify_top_magnitude(update, k) for k in counts]`` stacked ``[len(counts), d]``, with one sort."""
    order = torch.argsort(update.abs(), descending=True, stable=True)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=order.device)
    limits = torch.tensor(counts, dtype=rank.dtype, device=rank.device).clamp(0, update.numel())
    keep = rank[None, :] < limits[:, None]
    return torch.where(keep, update[None, :], torch.zeros((), dtype=update.dtype, device=update.device))


def distribution_scores(vector: torch.Tensor) -> torch.Tensor:
    """FedFAIM eqs. 4.17/4.18: ``|v_j| / sum_j |v_j|`` (all zeros for the zero vector)."""
    magnitude = vector.abs()
    total = magnitude.sum()
    return magnitude / total if total > 0 else torch.zeros_like(magnitude)


def select_by_agreement(global_update: torch.Tensor, local_update: torch.Tensor, k: int) -> torch.Tensor:
    """FedFAIM's customised gradient: the ``k`` entries of ``global_update`` with the highest ``s_ij * s_Gj``."""
    scores = distribution_scores(local_update) * distribution_scores(global_update)
    return torch.where(top_k_mask(scores, k), global_update, torch.zeros_like(global_update))
