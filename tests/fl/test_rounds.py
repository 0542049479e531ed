"""The round after screening that the simulation and the aggregator share (:mod:`fedchain.fl.rounds`)."""

from __future__ import annotations

import math

import pytest
import torch

from fedchain.errors import ConfigError
from fedchain.fl.quality import GraceRule, QualitySource, RoundQuality, grace_memory
from fedchain.fl.registry import get_strategy
from fedchain.fl.rounds import aggregate_and_score
from fedchain.fl.screening import NO_SCREENING, screen
from fedchain.fl.strategy import Evaluation, RoundResult, Validation

UPDATES = torch.eye(4, dtype=torch.float64)
#: The last client's model blows up on the validation set; screening is off, so nothing else refuses it.
EVALUATIONS = [Evaluation(loss=1.0, accuracy=0.9)] * 2 + [Evaluation(loss=4.0, accuracy=0.8)]
EVALUATIONS += [Evaluation(loss=math.inf, accuracy=0.0)]


def scored(
    *, source: QualitySource, refuse: bool, grace: GraceRule | None, asked: list[int] | None = None
) -> tuple[RoundResult, RoundQuality]:
    screened = screen(UPDATES, torch.ones(4, dtype=torch.bool), None, NO_SCREENING)
    validation = Validation(evaluate=lambda params: Evaluation(loss=2.0, accuracy=0.5), client_evaluations=EVALUATIONS)

    def initial_loss() -> float:
        if asked is not None:
            asked.append(1)
        return 2.3

    return aggregate_and_score(
        get_strategy("fedavg"), torch.zeros(4, dtype=torch.float64), UPDATES, screened, [1.0, 2.0, 3.0, 4.0], None, validation,
        client_params=None, source=source, evaluations=EVALUATIONS, initial_loss=initial_loss,
        floor=0.0, data_credit=1.0, grace=grace, refuse_non_finite=refuse,
    )  # fmt: skip


def test_the_loss_quality_scores_against_the_accepted_median_and_the_grace_memory_travels() -> None:
    # the others are scored against their median loss (1.0); the third is below q_min and not graced in round 1
    # (no chance: no first-round grace), which the memory carries; the initial loss is not asked without the loss test
    asked: list[int] = []
    result, quality = scored(source="loss", refuse=True, grace=GraceRule(min_quality=0.5, allowance=1), asked=asked)

    assert result.accepted.tolist() == [True, True, True, False]
    assert quality.values == (1.0, 1.0, 0.25, 0.0)
    assert grace_memory(result.state).poor == (False, False, True, True)
    assert not asked


def test_the_first_rounds_loss_test_asks_the_initial_models_loss_once() -> None:
    asked: list[int] = []
    rule = GraceRule(min_quality=0.5, allowance=1, chance=0.1, by_loss=True)

    _, quality = scored(source="loss", refuse=True, grace=rule, asked=asked)

    assert asked == [1]
    assert quality.values[2] == 0.5  # graced in round 1: its model beats chance (0.8 against a median of 0.9)


def test_refusing_a_model_of_non_finite_loss_takes_it_out_of_a_contribution_quality() -> None:
    # the aggregator refuses it; the runner leaves it to screening's loss check, which is off here
    refused, refused_quality = scored(source="contribution", refuse=True, grace=None)
    kept, kept_quality = scored(source="contribution", refuse=False, grace=None)

    assert refused.accepted.tolist() == [True, True, True, False] and kept.accepted.all()
    assert refused_quality.values[3] == 0.0 and kept_quality.values[3] > 0
    assert refused_quality.values[:3] != kept_quality.values[:3]  # rescaled over the accepted clients
    assert torch.equal(refused.global_params, kept.global_params)  # the strategy's round is the same
    with pytest.raises(ConfigError, match="needs each client's evaluation"):
        aggregate_and_score(
            get_strategy("fedavg"), torch.zeros(4, dtype=torch.float64), UPDATES,
            screen(UPDATES, torch.ones(4, dtype=torch.bool), None, NO_SCREENING), [1.0] * 4, None, Validation(),
            client_params=None, source="contribution", evaluations=None, initial_loss=lambda: 2.3,
            floor=0.0, data_credit=1.0, grace=None, refuse_non_finite=True,
        )  # fmt: skip
