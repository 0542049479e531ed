"""One round after screening: the strategy aggregates, and every client is measured for the chain.

The simulation (:func:`fedchain.experiments.runner.score_round`) and the product's aggregator
(:func:`fedchain.aggregator.scoring.score_round`, which the auditor, the Flower strategy and the dispute tools
call) gather a round's inputs in their own ways: one trains its clients in process, the other decodes what fog
nodes committed. From screening on they run :func:`aggregate_and_score`, so the tables of ``reproduce`` measure
what a task posts: the screened updates aggregated by the strategy, the chain's quality
(:func:`fedchain.fl.quality.round_quality`) with the task's floor, data credit and grace, and the grace's memory
carried in the strategy's state.

One difference is left, ``refuse_non_finite``: the aggregator marks an update whose model's validation loss is not
finite as not accepted after the strategy's round, the runner leaves such an update to screening's loss check
(``max_loss_ratio``), as every kept table run was measured. Under the default screening the check rejects it first,
so the two agree; with screening off, a contribution strategy's qualities can differ between them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import torch

from fedchain.errors import ConfigError
from fedchain.fl.quality import (
    GraceRule,
    QualitySource,
    RoundQuality,
    grace_memory,
    improved_on,
    remembered,
    round_quality,
)
from fedchain.fl.screening import ScreeningResult, screened_updates
from fedchain.fl.strategy import Evaluation, RoundResult, Strategy, StrategyState, Validation


def aggregate_and_score(
    strategy: Strategy,
    global_params: torch.Tensor,
    updates: torch.Tensor,
    screened: ScreeningResult,
    sizes: torch.Tensor | Sequence[float],
    state: StrategyState | None,
    validation: Validation,
    *,
    client_params: torch.Tensor | None,
    source: QualitySource,
    evaluations: Sequence[Evaluation] | None,
    initial_loss: Callable[[], float],
    floor: float,
    data_credit: float,
    grace: GraceRule | None,
    refuse_non_finite: bool,
) -> tuple[RoundResult, RoundQuality]:
    """The strategy's round over ``updates`` ``[n, d]`` as ``screened`` lets them through, and every client's
    quality for the chain; the result's state carries the grace's memory to the next round.

    ``evaluations``: each client's updated model on the validation set (None when the round measured none: a
    contribution quality without a grace or a screening rule that needs them). ``refuse_non_finite``: mark a client
    whose model's loss is not finite as not accepted (module docstring; needs ``evaluations``). ``initial_loss``:
    the validation loss of ``global_params``, asked only in the task's first round when the grace tests the loss
    there (:attr:`~fedchain.fl.quality.GraceRule.by_loss`). ``floor``, ``data_credit`` and ``grace`` are the task's
    for this round (:func:`~fedchain.fl.quality.round_quality`).
    """
    result = strategy.round(
        global_params, screened_updates(updates, screened), sizes, state, validation, client_params=client_params
    )
    losses = None if evaluations is None else [e.loss for e in evaluations]
    if refuse_non_finite:
        if losses is None:
            raise ConfigError(
                "refusing models of non-finite loss needs each client's evaluation", hint="pass evaluations=..."
            )
        finite = torch.tensor([math.isfinite(x) for x in losses], device=result.accepted.device)
        result = dataclasses.replace(result, accepted=result.accepted & finite)
    improved = None
    if grace is not None and grace.by_loss and grace_memory(state).first and losses is not None:
        improved = improved_on(losses, initial_loss())  # round 1: every client trained from global_params
    quality = round_quality(
        result,
        source=source,
        client_losses=None if losses is None else torch.tensor(losses, dtype=torch.float64),
        floor=floor,
        data_sizes=sizes,
        data_credit=data_credit,
        grace=grace,
        memory=grace_memory(state),
        accuracies=None if evaluations is None else [e.accuracy for e in evaluations],
        doubtful=screened.doubtful,
        improved=improved,
        judged=screened.judged_by_chance,
    )
    if grace is not None:
        result = dataclasses.replace(result, state=remembered(result.state, quality.memory))
    return result, quality


__all__ = ["aggregate_and_score"]
