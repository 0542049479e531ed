"""Loss histograms and their KL divergence (FedAVE's data-distribution distance).

Pure: per-sample losses -> histogram over shared bins -> ``KL(p || q)``.
Both histograms use the same :data:`DEFAULT_BINS` equal-width bins spanning
the smallest to the largest loss of either sample; every bin gets
:data:`HISTOGRAM_EPSILON` extra probability before renormalising, so an empty
bin in ``q`` gives a large but finite divergence instead of infinity.
"""

from __future__ import annotations

import torch

from fedchain.errors import DataError

#: Number of equal-width bins of a loss histogram.
DEFAULT_BINS = 10
#: Probability added to every bin (then renormalised) so that empty bins keep the KL finite.
HISTOGRAM_EPSILON = 1e-6


def _as_losses(name: str, losses: torch.Tensor) -> torch.Tensor:
    values = torch.as_tensor(losses, dtype=torch.float64).reshape(-1).cpu()
    if values.numel() == 0 or not torch.isfinite(values).all():
        raise DataError(
            f"{name} must be a non-empty vector of finite per-sample losses",
            hint="compute per-sample losses with reduction='none' on at least one sample",
        )
    return values


def shared_edges(first: torch.Tensor, second: torch.Tensor, bins: int = DEFAULT_BINS) -> torch.Tensor:
    """``bins + 1`` equal-width edges over the range of both samples (a unit-wide range when it is a point)."""
    low = float(min(first.min(), second.min()))
    high = float(max(first.max(), second.max()))
    if high <= low:
        low, high = low - 0.5, low + 0.5
    return torch.linspace(low, high, bins + 1, dtype=torch.float64)


def loss_histogram(losses: torch.Tensor, edges: torch.Tensor, epsilon: float = HISTOGRAM_EPSILON) -> torch.Tensor:
    """Probability of each bin ``[e_k, e_{k+1})`` (the last bin closed), smoothed by ``epsilon``."""
    bins = edges.numel() - 1
    index = torch.bucketize(losses, edges[1:-1], right=True)
    counts = torch.bincount(index, minlength=bins).to(torch.float64)
    probabilities = counts / counts.sum() + epsilon
    return probabilities / probabilities.sum()


def kl_divergence(p: torch.Tensor, q: torch.Tensor) -> float:
    """``sum_k p_k log(p_k / q_k)`` of two strictly positive distributions."""
    return float((p * (p / q).log()).sum())


def loss_kl(
    local_losses: torch.Tensor,
    validation_losses: torch.Tensor,
    bins: int = DEFAULT_BINS,
    epsilon: float = HISTOGRAM_EPSILON,
) -> float:
    """``KL(hist(local) || hist(validation))`` over shared bins: FedAVE's ``KL(Loss_i, Loss_{V_i})``."""
    local = _as_losses("local losses", local_losses)
    validation = _as_losses("validation losses", validation_losses)
    edges = shared_edges(local, validation, bins)
    return kl_divergence(loss_histogram(local, edges, epsilon), loss_histogram(validation, edges, epsilon))
