"""CGSV: cosine-gradient Shapley value aggregation (seed ``cgsv-contribution-aggregation.zh.txt``).

Round t (1-based), weights r^t (r^1 = data shares):

- ``u_i = tau * Delta_i / ||Delta_i||`` (``tau=None`` keeps the raw update; the default, ``"median"``, is the
  median norm of the round's updates: :func:`fedchain.fl.aggregate.median_length`; the seed's 1.0 stays an option),
- ``U = sum_i r_i u_i`` (r renormalised over the accepted clients); the new
  global model is ``global + U``,
- ``psi_i = cos(u_i, U)`` is the round's contribution, or with ``leave_one_out`` the client's cosine to what
  the others add, ``cos(u_i, U - r_i u_i)``,
- ``r_i <- gamma^t r_i + (1 - gamma^t) psi_i`` with ``gamma^t = 1 - (1 - gamma^0) / t``,
  clipped at 0 and renormalised to sum 1.

``gamma^0 = 1`` keeps r at the data shares for ever: FedAvg's weights (and
FedAvg itself with ``tau=None``). Rejected clients get ``psi_i = 0``, so their
weight decays. If every weight is clipped to 0, r restarts from the data shares.

The contribution the chain scores (its quality, rescaled to mean 1) is by default ``psi_i`` times the client's
:func:`loss_discount`, ``min(1, median_j L_j / L_i)``, with ``L_i`` the validation loss of the client's updated
model (``contribution_measure: cosine`` is the seed's ``psi_i`` alone). A cosine says how far an update points
where the round goes, not how good it is: an update of 50% noisy labels points much where the clean ones do, and
``fedchain demo --strategy cgsv`` (5 clients, 3 rounds) paid its two noisy clients as much as its clean ones. The
noisy labels do show in the loss of the model they train (docs/robustness.md, "cgsv: the loss discount"). The
aggregation weights take ``psi_i`` either way, so the global model is the seed's.

``leave_one_out`` (off by default): ``U`` holds ``r_i u_i``, so the seed's cosine credits each client with
agreeing with itself, the more the larger its weight. Measured against what the others add, the demo's noisy
clients still kept 86% of the clean ones' pay, and on Dirichlet data the cosine to the others put honest skewed
clients below q_min late in training (9 and 11 more client-rounds in the MNIST and Fashion-MNIST tables, none
before), so it stays an option (docs/robustness.md, "cgsv: the cosine to the others").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Final, Literal

import torch

from fedchain.errors import ConfigError
from fedchain.fl.aggregate import (
    MEDIAN_LENGTH,
    ZERO_NORM,
    UpdateLength,
    cosine_to,
    data_shares,
    normalise_weights,
    normalised_rows,
    weighted_sum,
)
from fedchain.fl.quality import loss_ratio
from fedchain.fl.strategy import (
    RoundInputs,
    RoundResult,
    Strategy,
    StrategyState,
    check_state_size,
    evaluation_losses,
)

#: The product's contribution measure (:attr:`CGSV.contribution_measure`).
LOSS_DISCOUNTED: Final = "loss_discounted"


def loss_discount(losses: torch.Tensor, eligible: torch.Tensor, exponent: float = 1.0) -> torch.Tensor:
    """``min(1, median_j L_j / L_i) ** exponent`` over the ``eligible`` clients with a finite validation loss
    ``L_i`` (the median over them), 0 for the others. Float64 ``[n]``.

    The ratio is the loss quality's (:func:`~fedchain.fl.quality.loss_ratio`), capped at 1: a client whose model
    is at least as good as the round's median keeps 1; a worse one is discounted by how much worse.
    """
    losses = losses.to(torch.float64)
    usable = eligible & torch.isfinite(losses)
    ratio = loss_ratio(losses, usable).clamp(max=1.0).pow(exponent)
    return torch.where(usable, ratio, torch.zeros_like(ratio))


@dataclass(frozen=True)
class CGSVState(StrategyState):
    """CGSV's aggregation weights r^t, float64 ``[n]`` summing to 1 (None before round 1)."""

    weights: torch.Tensor | None = None


@dataclass(frozen=True, kw_only=True)
class CGSV(Strategy[CGSVState]):
    """Cosine-gradient Shapley aggregation. No rewards in kind.

    Contribution: ``psi_i = cos(u_i, U)`` of this round (``cos(u_i, U - r_i u_i)`` with ``leave_one_out``; 0 for
    rejected clients), times the client's :func:`loss_discount` unless ``contribution_measure`` is ``cosine``.
    Needs ``Validation.client_evaluations`` or ``Validation.evaluate`` for the discount.
    """

    name = "cgsv"
    normalises_updates = True
    state_type = CGSVState

    #: Normalised update length tau: a number (the seed: 1.0), "median" (the round's median update norm: it
    #: learns as FedAvg does, where 1.0 ended 5 IID rounds 5 points lower), or None to aggregate the raw updates.
    tau: UpdateLength = MEDIAN_LENGTH
    #: gamma^0 in [0, 1]: 1 keeps the data shares (FedAvg), lower values let contribution steer the weights.
    gamma0: float = 0.5
    #: Measure each client against the others' part of the aggregate (module docstring); False is the seed's
    #: ``cos(u_i, U)``.
    leave_one_out: bool = False
    #: The round's contribution (the chain's quality, rescaled to mean 1): ``loss_discounted``, the cosine times
    #: :func:`loss_discount` of the client's model, or ``cosine``, the seed's ``psi_i`` alone. The aggregation
    #: weights take ``psi_i`` either way.
    contribution_measure: Literal["loss_discounted", "cosine"] = LOSS_DISCOUNTED
    #: Exponent of the loss discount (1: the loss ratio itself; 0: no discount).
    loss_exponent: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.contribution_measure not in (LOSS_DISCOUNTED, "cosine"):
            raise ConfigError(
                f"cgsv contribution_measure must be loss_discounted or cosine, got {self.contribution_measure!r}",
                hint="e.g. contribution_measure: cosine (the seed's)",
            )
        if not (math.isfinite(self.loss_exponent) and self.loss_exponent >= 0):
            raise ConfigError(
                f"cgsv loss_exponent must be a finite number >= 0, got {self.loss_exponent}",
                hint="e.g. loss_exponent: 1",
            )
        if not 0.0 <= self.gamma0 <= 1.0:
            raise ConfigError(f"cgsv gamma0 must be in [0, 1], got {self.gamma0}", hint="e.g. gamma0: 0.5")
        if isinstance(self.tau, float) and not self.tau > 0:
            raise ConfigError(
                f"cgsv tau must be positive, got {self.tau}", hint="e.g. tau: median, 1.0, or null for raw updates"
            )

    def init_state(self, data_sizes: torch.Tensor) -> CGSVState:
        return CGSVState(weights=data_shares(data_sizes))

    def aggregate(self, inputs: RoundInputs, state: CGSVState) -> RoundResult[CGSVState]:
        check_state_size(self.name, state.weights, inputs.n_clients)
        previous = state.weights if state.weights is not None else data_shares(inputs.data_sizes)
        t = state.round + 1
        units = normalised_rows(inputs.updates, inputs.finite, self.tau)
        weights = normalise_weights(torch.where(inputs.finite, previous, torch.zeros_like(previous)))
        aggregated = weighted_sum(units, weights)
        cosines = cosine_to_others(units, aggregated, weights) if self.leave_one_out else cosine_to(units, aggregated)
        psi = torch.where(inputs.finite, cosines, torch.zeros_like(previous))
        gamma = 1.0 - (1.0 - self.gamma0) / t
        updated = normalise_weights((gamma * previous + (1.0 - gamma) * psi).clamp_min(0.0))
        if updated.sum() == 0:
            updated = data_shares(inputs.data_sizes)
        contribution = psi
        if self.contribution_measure == LOSS_DISCOUNTED:
            losses = evaluation_losses(inputs.client_evaluations(self.name))
            discount = loss_discount(losses, inputs.finite, self.loss_exponent)
            contribution = psi * discount
        return RoundResult(
            global_params=inputs.global_params + aggregated,
            contribution=contribution,
            rewards=None,
            accepted=inputs.finite.clone(),
            state=dataclasses.replace(state, weights=updated),
            weights=weights,
        )


def cosine_to_others(units: torch.Tensor, aggregated: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``cos(u_i, U - r_i u_i)`` for every row ``u_i`` of ``units``, with ``U = aggregated`` and ``r = weights``,
    float64 ``[n]`` on the CPU, from dot products alone (no ``[n, d]`` copy of the others' sums). Where the others
    add nothing (a lone accepted client) it is ``cos(u_i, U)``, the seed's value."""
    rows = units.to(torch.float64)
    total = aggregated.to(torch.float64)
    r = weights.to(device=rows.device, dtype=torch.float64)
    dots = rows @ total  # u_i . U
    squares = (rows * rows).sum(dim=1)  # |u_i|^2
    own = dots - r * squares  # u_i . (U - r_i u_i)
    others = (total @ total - 2 * r * dots + r * r * squares).clamp_min(0.0).sqrt()  # |U - r_i u_i|
    lengths = squares.sqrt()
    denominator = lengths * others
    seed_denominator = lengths * total.norm()  # for cos(u_i, U), from the same dot products
    seed = torch.where(
        seed_denominator > ZERO_NORM**2, dots / seed_denominator.clamp_min(ZERO_NORM**2), torch.zeros_like(dots)
    )
    lone = denominator <= ZERO_NORM**2
    cosine = torch.where(lone, seed, own / denominator.clamp_min(ZERO_NORM**2))
    return cosine.clamp(-1.0, 1.0).cpu()
