"""FedAvg (McMahan et al. 2017): weights ``|D_i| / sum_j |D_j|``."""

from __future__ import annotations

from dataclasses import dataclass

from fedchain.fl.aggregate import data_shares
from fedchain.fl.strategy import RoundInputs, RoundResult, Strategy, StrategyState


@dataclass(frozen=True, kw_only=True)
class FedAvg(Strategy[StrategyState]):
    """Data-size weighted mean of the finite updates (or the task's robust rule, :attr:`Strategy.aggregation`).

    Contribution: the client's aggregation weight (its data share among the
    accepted clients). No validation inputs, no rewards in kind.
    """

    name = "fedavg"

    def aggregate(self, inputs: RoundInputs, state: StrategyState) -> RoundResult[StrategyState]:
        weights = data_shares(inputs.data_sizes, inputs.finite)
        new_global = inputs.global_params + self.aggregation.combine(inputs.updates, weights)
        return RoundResult(
            global_params=new_global,
            contribution=weights.clone(),
            rewards=None,
            accepted=inputs.finite.clone(),
            state=state,
            weights=weights,
        )
