"""Quality weighting (Tian et al. 2023, eq. 19): weights ``q_i |D_i|``, normalised.

``q_i = loss_avg / loss_i`` (eq. 4), where ``loss_i`` is the validation loss of
client i's updated model ``global + Delta_i`` and ``loss_avg`` the median of
those losses over the accepted clients (:func:`~fedchain.fl.quality.loss_ratio`). A lower loss weighs more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fedchain.fl.aggregate import normalise_weights
from fedchain.fl.quality import loss_ratio
from fedchain.fl.strategy import RoundInputs, RoundResult, Strategy, StrategyState, evaluation_losses


@dataclass(frozen=True, kw_only=True)
class QualityWeighted(Strategy[StrategyState]):
    """Tian eq. 19. Needs ``Validation.client_evaluations`` or ``Validation.evaluate``.

    Contribution: ``q_i`` (0 for rejected clients). A client whose model's
    validation loss is NaN or infinite is rejected as well.
    """

    name = "quality"

    def aggregate(self, inputs: RoundInputs, state: StrategyState) -> RoundResult[StrategyState]:
        losses = evaluation_losses(inputs.client_evaluations(self.name))
        accepted = inputs.finite & torch.isfinite(losses)
        quality = loss_ratio(losses, accepted)
        weights = normalise_weights(quality * inputs.data_sizes)
        return RoundResult(
            global_params=inputs.global_params + self.aggregation.combine(inputs.updates, weights),
            contribution=quality,
            rewards=None,
            accepted=accepted,
            state=state,
            weights=weights,
            client_losses=torch.where(accepted, losses, torch.full_like(losses, math.nan)),
        )
