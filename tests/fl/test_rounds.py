"""The round after screening that the simulation and the aggregator share (:mod:`fedchain.fl.rounds`)."""

from __future__ import annotations

import math

import torch

from fedchain.fl.quality import GraceRule, grace_memory
from fedchain.fl.registry import get_strategy
from fedchain.fl.rounds import aggregate_and_score
from fedchain.fl.screening import NO_SCREENING, screen
from fedchain.fl.strategy import Evaluation, Validation


def test_an_update_whose_model_loss_is_not_finite_is_not_accepted_and_the_grace_memory_travels() -> None:
    # prepare: four clients, screening off; the last client's model blows up on the validation set
    updates = torch.eye(4, dtype=torch.float64)
    global_params = torch.zeros(4, dtype=torch.float64)
    evaluations = [Evaluation(loss=1.0, accuracy=0.9)] * 2 + [Evaluation(loss=4.0, accuracy=0.8)]
    evaluations += [Evaluation(loss=math.inf, accuracy=0.0)]
    screened = screen(updates, torch.ones(4, dtype=torch.bool), None, NO_SCREENING)
    validation = Validation(evaluate=lambda params: Evaluation(loss=2.0, accuracy=0.5), client_evaluations=evaluations)
    grace = GraceRule(min_quality=0.5, allowance=1)
    asked: list[int] = []

    def initial_loss() -> float:
        asked.append(1)
        return 2.3

    # execute
    result, quality = aggregate_and_score(
        get_strategy("fedavg"), global_params, updates, screened, [1.0] * 4, None, validation,
        client_params=None, source="loss", evaluations=evaluations, initial_loss=initial_loss,
        floor=0.0, data_credit=1.0, grace=grace,
    )  # fmt: skip

    # assert: screening let it through, the loss check does not; the others are scored against their median loss
    # (1.0), the third below q_min and not graced in round 1 (no chance: no first-round grace), which the memory
    # carries; the initial loss is not asked without the loss test
    assert screened.accepted.all()
    assert result.accepted.tolist() == [True, True, True, False]
    assert quality.values == (1.0, 1.0, 0.25, 0.0)
    assert grace_memory(result.state).poor == (False, False, True, True)
    assert not asked
