"""Pure aggregation kernels over stacked flat updates.

Every function here is a pure tensor computation (no I/O, logging or state),
shared by the strategies in :mod:`fedchain.fl.strategies`. Shapes follow one
convention: ``updates`` is ``[n_clients, n_params]``, a model or an update is
``[n_params]``, a per-client quantity is ``[n_clients]``.

Per-client weights are float64 (they are small and feed the chain's 1e18 fixed
point); they are cast to the parameters' dtype only to multiply the updates.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import torch

#: Below this Euclidean norm an update counts as the zero update: it has no
#: direction, its unit vector is the zero vector and its cosine with anything is 0.
ZERO_NORM = 1e-12


def finite_rows(updates: torch.Tensor) -> torch.Tensor:
    """Boolean ``[n]``: which rows hold only finite numbers (no NaN, no +-inf).

    ``0 * x`` is 0 for every finite x and NaN for NaN and +-inf, so a row's sum
    of ``0 * x`` is 0 exactly when the row is finite (2-3x faster than ``isfinite().all()``).
    """
    return (updates * 0).sum(dim=1) == 0


def normalise_weights(weights: torch.Tensor) -> torch.Tensor:
    """``weights / weights.sum()``; all zeros stay all zeros (nothing to aggregate)."""
    total = weights.sum()
    return weights / total if total > 0 else torch.zeros_like(weights)


def data_shares(data_sizes: torch.Tensor, accepted: torch.Tensor | None = None) -> torch.Tensor:
    """FedAvg weights ``|D_i| / sum_j |D_j|`` over the accepted clients (0 for the others)."""
    sizes = data_sizes.to(torch.float64)
    if accepted is not None:
        sizes = torch.where(accepted, sizes, torch.zeros_like(sizes))
    return normalise_weights(sizes)


def weighted_sum(updates: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``sum_i weights_i * updates_i`` as a ``[n_params]`` vector of the updates' dtype."""
    return weights.to(device=updates.device, dtype=updates.dtype) @ updates


def row_norms(updates: torch.Tensor) -> torch.Tensor:
    """Euclidean norm of every row, float64 ``[n]`` on the CPU."""
    return torch.linalg.vector_norm(updates.to(torch.float64), dim=1).cpu()


#: The length a normalising strategy (cgsv, fedave) scales every update to: a fixed ``tau`` (the papers' settings),
#: ``"median"`` (:func:`median_length`), or None (cgsv only: the raw updates).
UpdateLength: TypeAlias = float | Literal["median"] | None
MEDIAN_LENGTH: Literal["median"] = "median"


def median_length(updates: torch.Tensor, finite: torch.Tensor) -> float:
    """The median norm of the finite, non-zero rows (1.0 when there are none).

    Scaled to it, every update weighs by its direction alone, as a fixed tau makes it, and the round
    moves the model as far as a typical update of this round would: a fixed tau of 1 or 0.5 held
    lenet5 on 5 IID MNIST clients to 86-87% (cgsv) and 78% (fedave) after 5 rounds, where FedAvg
    reached 92%, because honest updates were several times longer than tau early on. A median over
    the screened round moves only if half the round's updates do.
    """
    norms = row_norms(updates)[finite.cpu()]
    norms = norms[norms > ZERO_NORM]
    return float(norms.median()) if norms.numel() else 1.0


def normalised_rows(updates: torch.Tensor, finite: torch.Tensor, length: UpdateLength) -> torch.Tensor:
    """Every row scaled to ``length`` (:data:`UpdateLength`); None returns ``updates`` as they are."""
    if length is None:
        return updates
    tau = median_length(updates, finite) if length == MEDIAN_LENGTH else float(length)
    return unit_rows(updates, tau)


def unit_rows(updates: torch.Tensor, tau: float = 1.0) -> torch.Tensor:
    """``tau * u_i / ||u_i||`` for every row; rows with norm below :data:`ZERO_NORM` become zero."""
    norms = torch.linalg.vector_norm(updates, dim=1, keepdim=True)
    scale = torch.where(norms > ZERO_NORM, tau / norms.clamp_min(ZERO_NORM), torch.zeros_like(norms))
    return updates * scale


def cosine_to(updates: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every row with ``reference``, float64 ``[n]`` on the CPU.

    Defined as 0 where either side is the zero vector (no direction, no agreement).
    """
    rows = updates.to(torch.float64)
    ref = reference.to(torch.float64)
    norms = torch.linalg.vector_norm(rows, dim=1)
    ref_norm = torch.linalg.vector_norm(ref)
    dots = rows @ ref
    denominator = norms * ref_norm
    cosine = torch.where(denominator > ZERO_NORM**2, dots / denominator.clamp_min(ZERO_NORM**2), torch.zeros_like(dots))
    return cosine.clamp(-1.0, 1.0).cpu()
