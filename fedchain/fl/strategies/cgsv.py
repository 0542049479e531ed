"""CGSV: cosine-gradient Shapley value aggregation (seed ``cgsv-contribution-aggregation.zh.txt``).

Round t (1-based), weights r^t (r^1 = data shares):

- ``u_i = tau * Delta_i / ||Delta_i||`` (``tau=None`` keeps the raw update; the default, ``"median"``, is the
  median norm of the round's updates: :func:`fedchain.fl.aggregate.median_length`; the seed's 1.0 stays an option),
- ``U = sum_i r_i u_i`` (r renormalised over the accepted clients); the new
  global model is ``global + U``,
- ``psi_i = cos(u_i, U)`` is the round's contribution,
- ``r_i <- gamma^t r_i + (1 - gamma^t) psi_i`` with ``gamma^t = 1 - (1 - gamma^0) / t``,
  clipped at 0 and renormalised to sum 1.

``gamma^0 = 1`` keeps r at the data shares for ever: FedAvg's weights (and
FedAvg itself with ``tau=None``). Rejected clients get ``psi_i = 0``, so their
weight decays. If every weight is clipped to 0, r restarts from the data shares.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from fedchain.errors import ConfigError
from fedchain.fl.aggregate import (
    MEDIAN_LENGTH,
    UpdateLength,
    cosine_to,
    data_shares,
    normalise_weights,
    normalised_rows,
    weighted_sum,
)
from fedchain.fl.strategy import RoundInputs, RoundResult, Strategy, StrategyState, check_state_size


@dataclass(frozen=True)
class CGSVState(StrategyState):
    """CGSV's aggregation weights r^t, float64 ``[n]`` summing to 1 (None before round 1)."""

    weights: torch.Tensor | None = None


@dataclass(frozen=True, kw_only=True)
class CGSV(Strategy[CGSVState]):
    """Cosine-gradient Shapley aggregation. No validation inputs, no rewards in kind.

    Contribution: ``psi_i = cos(u_i, U)`` of this round (0 for rejected clients).
    """

    name = "cgsv"
    normalises_updates = True
    state_type = CGSVState

    #: Normalised update length tau: a number (the seed: 1.0), "median" (the round's median update norm: it
    #: learns as FedAvg does, where 1.0 ended 5 IID rounds 5 points lower), or None to aggregate the raw updates.
    tau: UpdateLength = MEDIAN_LENGTH
    #: gamma^0 in [0, 1]: 1 keeps the data shares (FedAvg), lower values let contribution steer the weights.
    gamma0: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
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
        psi = torch.where(inputs.finite, cosine_to(units, aggregated), torch.zeros_like(previous))
        gamma = 1.0 - (1.0 - self.gamma0) / t
        updated = normalise_weights((gamma * previous + (1.0 - gamma) * psi).clamp_min(0.0))
        if updated.sum() == 0:
            updated = data_shares(inputs.data_sizes)
        return RoundResult(
            global_params=inputs.global_params + aggregated,
            contribution=psi,
            rewards=None,
            accepted=inputs.finite.clone(),
            state=dataclasses.replace(state, weights=updated),
            weights=weights,
        )
